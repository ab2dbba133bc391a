"""FP8 GEMM kernel (gpu/kernels/gemm_fp8.py) vs torch._scaled_mm (cuBLASLt), e4m3 -> bf16, same shapes,
same run, on the H200: TFLOP/s (median of events over repeated runs) and the ratio.

    python bench/bench_gemm_kernel.py [--sizes 4096 8192] [--reps 20]

Precise = our kernel with promotion every K block (K = 128) vs use_fast_accum=False;
fast = our kernel without promotion vs use_fast_accum=True.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    import cupy as cp
    import numpy as np
    import torch

    from gpu.kernels.gemm_fp8 import GemmConfig, gemm_fp8

    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="*", default=[4096, 8192])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    rows = []
    for n in a.sizes:
        rng = np.random.default_rng(n)
        A = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        B = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)       # (N, K)
        one = torch.ones((), device="cuda")
        for fast in (False, True):
            f = lambda: torch._scaled_mm(A, B.t(), one, one, out_dtype=torch.bfloat16, use_fast_accum=fast)  # noqa: E731
            for _ in range(3):
                f()
            torch.cuda.synchronize()
            ts = []
            for _ in range(a.reps):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(); f(); e.record(); e.synchronize()
                ts.append(s.elapsed_time(e) / 1e3)
            t_cublas = float(np.median(ts))
            Ac = cp.asarray(A.view(torch.uint8))
            Bc = cp.asarray(B.view(torch.uint8))
            cfg = GemmConfig(promote=not fast, out="bf16")
            KB = n // 128
            sa = cp.ones((n, KB), cp.float32)
            sb = cp.ones((KB, n // 128), cp.float32)
            ts = []
            for _ in range(3):
                _, t = gemm_fp8(Ac, Bc, sa if not fast else None, sb if not fast else None, cfg=cfg, timing=a.reps)
                ts.append(t)
            t_ours = float(np.median(ts))
            flops = 2.0 * n ** 3
            rows.append({"n": n, "mode": "fast" if fast else "precise", "cublas_tflops": flops / t_cublas / 1e12,
                         "ours_tflops": flops / t_ours / 1e12, "ratio": t_cublas / t_ours})
            r = rows[-1]
            print(f"{n}^3 {r['mode']:<8} cuBLAS {r['cublas_tflops']:7.1f} TFLOP/s   ours {r['ours_tflops']:7.1f} TFLOP/s"
                  f"   ratio {r['ratio']:.2f}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
