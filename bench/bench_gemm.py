"""Throughput of refmodel.numerics.gemm (multiply-adds per second) next to numpy float64 matmul.

    python bench/bench_gemm.py                     # e4m3 m64n256k32 chain, K = 4096
    python bench/bench_gemm.py --k 8192 --promote 4

Prints products/s (M*N*K per second) of the model and of numpy's float64 matmul on the
same shapes, measured in the same run, and their ratio.  No assertion: numbers only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numba  # noqa: E402

from refmodel.numerics.fp8 import encode  # noqa: E402
from refmodel.dtypes import element_dtype  # noqa: E402
from refmodel.numerics.gemm import gemm  # noqa: E402
from refmodel.wgmma_forms import parse_wgmma  # noqa: E402


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instr", default="wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3")
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--promote", type=int, default=None, help="promote_every (default: none)")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)

    form = parse_wgmma(args.instr)
    M, K, N = args.m, args.k, form.n
    rng = np.random.default_rng(0)

    def draw(name, shape):
        x = rng.standard_normal(shape)
        if name in ("e4m3", "e5m2"):
            return encode(x, name).view(element_dtype(name))
        if name in ("s8", "u8"):
            return rng.integers(0, 100, shape).astype(element_dtype(name))
        return x.astype(np.float32).astype(element_dtype(name))

    a, b = draw(form.dtype_a, (M, K)), draw(form.dtype_b, (K, N))
    run = lambda: gemm(a, b, instr=args.instr, promote_every=args.promote)  # noqa: E731
    t0 = time.perf_counter()
    run()  # compile (or load the numba cache) and warm up
    first = time.perf_counter() - t0
    t_model = _best(run, args.repeat)

    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    t_np = _best(lambda: a64 @ b64, args.repeat)

    prods = M * N * K
    print(f"instr     {args.instr}  M={M} N={N} K={K}  promote_every={args.promote}")
    print(f"threads   numba {numba.get_num_threads()}, cpus {os.cpu_count()}  (first call {first:.2f} s)")
    print(f"refmodel.numerics.gemm      {t_model * 1e3:9.2f} ms  {prods / t_model / 1e6:10.0f} M products/s")
    print(f"numpy float64 @    {t_np * 1e3:9.2f} ms  {prods / t_np / 1e6:10.0f} M products/s")
    print(f"ratio (model / numpy float64): {t_np / t_model:.3f}")


if __name__ == "__main__":
    main()
