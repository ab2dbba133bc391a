"""Throughput of refmodel.numerics.gemm (products per second) next to numpy float64 matmul.

    python bench/bench_gemm.py                     # e4m3 m64n256k32 chain, K = 4096
    python bench/bench_gemm.py --k 8192 --promote 4
    python bench/bench_gemm.py --json ''           # print only, write no JSON

Measures, in one run and warm (the first call compiles or loads the numba cache and is
not counted), the best of ``--repeat`` calls of

* ``gemm`` with the fast chain kernel (the default, refmodel.numerics.fdpa_fast),
* the same ``gemm`` with the previous integer kernel (``fdpa_chain(kernel="int")``),
* numpy's float64 matmul (BLAS) on the same shapes,

checks that both kernels give the same bits, prints G products/s (M*N*K per second) and
the ratios, and writes them with the machine (CPU model, cores, load, numpy / numba
versions, date) to bench/results/cpu_gemm/ (``--json``).  Other processes on the machine
make the numbers noisy: the best of many repeats is the least disturbed one.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numba  # noqa: E402

import refmodel.numerics.gemm as gemm_module  # noqa: E402
from refmodel.dtypes import element_dtype  # noqa: E402
from refmodel.numerics.accumulate import fdpa_chain  # noqa: E402
from refmodel.numerics.fp8 import encode  # noqa: E402
from refmodel.numerics.gemm import gemm  # noqa: E402
from refmodel.wgmma_forms import parse_wgmma  # noqa: E402


def _best(fn, repeat: int) -> tuple[float, float]:
    """(best wall seconds, best CPU seconds of all threads) of ``repeat`` calls."""
    best = cpu = float("inf")
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        best = min(best, time.perf_counter() - t)
        cpu = min(cpu, time.process_time() - c)
    return best, cpu


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """What the numbers were measured on."""
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    flags = ""
    try:
        flags = next(ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags"))
    except (OSError, StopIteration):
        pass
    return {"cpu": _cpu_model(), "cpus": os.cpu_count(), "avx512f": " avx512f" in flags,
            "numba_threads": numba.get_num_threads(), "numba_threading_layer": _layer(),
            "numpy": np.__version__, "numba": numba.__version__, "python": platform.python_version(),
            "load_average_1_5_15": load,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def _layer() -> str:
    try:
        return numba.threading_layer()
    except ValueError:  # no parallel kernel ran yet
        return "unknown"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instr", default="wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3")
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--promote", type=int, default=None, help="promote_every (default: none)")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--no-int", action="store_true", help="skip the previous (integer) kernel")
    ap.add_argument("--json", default=None,
                    help="results file (default bench/results/cpu_gemm/<types>_m<M>n<N>k<K>[_p<n>].json; '' = none)")
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

    def run_int():
        # the same public gemm, its chain run by the previous integer kernel
        gemm_module.fdpa_chain = functools.partial(fdpa_chain, kernel="int")
        try:
            return gemm(a, b, instr=args.instr, promote_every=args.promote)
        finally:
            gemm_module.fdpa_chain = fdpa_chain

    t0 = time.perf_counter()
    d_fast = run()  # compile (or load the numba cache) and warm up
    first = time.perf_counter() - t0
    floating = form.family != "int8"
    if floating and not args.no_int:
        d_int = run_int()
        if not np.array_equal(np.ascontiguousarray(d_fast).view(np.uint8), np.ascontiguousarray(d_int).view(np.uint8)):
            raise SystemExit("the fast and the integer kernel disagree: a bug, please report it")
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    a64 @ b64
    # interleave the three so that a burst of other load hits them alike
    inf = float("inf")
    t_fast = t_int = t_np = c_fast = c_int = c_np = inf
    rounds = max(1, args.repeat // 3)
    for _ in range(rounds):
        w, c = _best(run, 3)
        t_fast, c_fast = min(t_fast, w), min(c_fast, c)
        if floating and not args.no_int:
            w, c = _best(run_int, 3)
            t_int, c_int = min(t_int, w), min(c_int, c)
        w, c = _best(lambda: a64 @ b64, 3)
        t_np, c_np = min(t_np, w), min(c_np, c)

    prods = M * N * K
    gps = lambda t: prods / t / 1e9  # noqa: E731
    print(f"instr     {args.instr}  M={M} N={N} K={K}  promote_every={args.promote}")
    print(f"machine   {_cpu_model()}, {os.cpu_count()} cpus, numba {numba.get_num_threads()} threads "
          f"(first call {first:.2f} s)")
    print(f"refmodel gemm (fast kernel)  {t_fast * 1e3:9.2f} ms  {gps(t_fast):8.2f} G products/s")
    if t_int < float("inf"):
        print(f"refmodel gemm (int kernel)   {t_int * 1e3:9.2f} ms  {gps(t_int):8.2f} G products/s"
              f"   fast / int: {t_int / t_fast:.2f}x")
    print(f"numpy float64 @ (BLAS)       {t_np * 1e3:9.2f} ms  {gps(t_np):8.2f} G products/s")
    print(f"ratio (fast model / numpy float64): {t_np / t_fast:.3f}")
    print(f"CPU time of all threads per call: fast {c_fast * 1e3:.2f} ms, "
          + (f"int {c_int * 1e3:.2f} ms, " if c_int < inf else "") + f"numpy {c_np * 1e3:.2f} ms "
          "(a busy machine stretches wall time more than CPU time)")

    res = {"instr": args.instr, "M": M, "N": N, "K": K, "promote_every": args.promote,
           "repeat": rounds * 3, "products": prods,
           "fast": {"seconds": t_fast, "cpu_seconds": c_fast, "g_products_per_s": gps(t_fast)},
           "int": {"seconds": t_int, "cpu_seconds": c_int, "g_products_per_s": gps(t_int)} if t_int < inf else None,
           "numpy_float64": {"seconds": t_np, "cpu_seconds": c_np, "g_products_per_s": gps(t_np)},
           "ratio_fast_to_numpy": t_np / t_fast,
           "ratio_fast_to_int": t_int / t_fast if t_int < inf else None,
           "machine": machine()}
    path = args.json
    if path is None:
        tag = f"{form.dtype_a}_{form.dtype_b}_{form.dtype_d}_m{M}n{N}k{K}" + (f"_p{args.promote}" if args.promote else "")
        path = str(ROOT / "bench" / "results" / "cpu_gemm" / f"{tag}.json")
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(res, indent=1) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
