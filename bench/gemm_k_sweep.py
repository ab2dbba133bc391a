"""Where the FP8 GEMM kernel's time goes: time per call at M = N fixed over a sweep of K, fitted as
t(K) = fixed + per_kblock * K/128 per tile wave, so the steady-state cost of one K block (both consumer
warpgroups' 8 wgmmas, their promotion and the ring) and the per-tile cost (fill, drain, epilogue,
launch) come apart.  Run on the H200:

    python bench/gemm_k_sweep.py [--mn 4096] [--ks 1024 2048 4096 8192 16384] [--configs "" "promote=0,bn=128"] [--json F]

Per-K-block cycles use the SM clock nvidia-smi reports after each config (an estimate: the clock moves).
The fit says nothing about why; it says where (steady state or per tile).
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

    from bench.bench_gemm_kernel import _gpu_state, _time_pair, e4m3_inputs
    from gpu.kernels.gemm_fp8 import launcher, parse_config, tile_count
    from gpu.kernels.runtime import device_info

    p = argparse.ArgumentParser()
    p.add_argument("--mn", type=int, default=4096)
    p.add_argument("--ks", type=int, nargs="*", default=[1024, 2048, 4096, 8192, 16384])
    p.add_argument("--configs", nargs="*", default=["", "promote=0,bn=128"])
    p.add_argument("--trials", type=int, default=6)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    n = a.mn
    rows = []
    for text in a.configs:
        cfg = parse_config(text)
        ts = []
        for K in a.ks:
            A, B, Ac, Bc = e4m3_inputs(n, n, K, K)
            KB = K // 128
            sa = cp.ones((n, KB), cp.float32) if cfg.promote else None
            sb = cp.ones((KB, -(-n // 128)), cp.float32) if cfg.promote else None
            launch, _ = launcher(Ac, Bc, sa, sb, cfg=cfg)
            f = launch.kernel_only or launch
            one = torch.ones((), device="cuda")
            g = lambda A=A, B=B: torch._scaled_mm(A, B.t(), one, one, out_dtype=torch.bfloat16,
                                                  use_fast_accum=not cfg.promote)
            t_cublas, t = _time_pair(g, f, 0, a.trials)
            st = _gpu_state()
            ts.append(t)
            rows.append({"config": cfg.name, "m": n, "n": n, "k": K, "seconds": t, "cublas_seconds": t_cublas,
                         "tflops": 2.0 * n * n * K / t / 1e12, "cublas_tflops": 2.0 * n * n * K / t_cublas / 1e12, **st})
            print(f"{cfg.name:<30} K={K:<6} {rows[-1]['tflops']:7.1f} TFLOP/s  (cuBLAS {rows[-1]['cublas_tflops']:7.1f})"
                  f"  {st.get('sm_clock_mhz', 0):.0f} MHz", flush=True)
        kbs = np.array(a.ks) / 128
        slope, icpt = np.polyfit(kbs, np.array(ts), 1)
        tiles = tile_count(n, n, cfg.bn)
        waves = tiles / launch.grid[0]
        clk = np.mean([r.get("sm_clock_mhz", 0) for r in rows if r["config"] == cfg.name]) * 1e6
        per_kb_cycles = slope / waves * clk * (128 / cfg.bn)      # per 128 x 128 x 128 block on one SM
        fit = {"config": cfg.name, "fit": True, "seconds_per_kblock": slope, "fixed_seconds": icpt, "waves": waves,
               "cycles_per_128cube_kblock": per_kb_cycles, "fixed_cycles_per_tile": icpt / waves * clk}
        rows.append(fit)
        print(f"{cfg.name}: {per_kb_cycles:.0f} cycles per 128^3 K block per SM in the steady state, "
              f"{fit['fixed_cycles_per_tile']:.0f} cycles fixed per tile wave ({waves:.2f} waves)", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps([{**r, **device_info()} for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
