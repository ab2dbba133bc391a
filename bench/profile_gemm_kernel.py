"""Profile one FP8 GEMM kernel config under Nsight Compute (on the H200): tensor-pipe utilisation and
warp stall reasons, for the closing note and docs/performance.md.

    ncu --kernel-name gemm_fp8 --launch-skip 2 --launch-count 1 --section SpeedOfLight \\
        --section WarpStateStats --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active \\
        python bench/profile_gemm_kernel.py --config "promote=1" --n 4096

The script launches the kernel ``--launches`` times on random e4m3 inputs (unit scales) and nothing else.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    import cupy as cp
    import numpy as np

    from gpu.kernels.gemm_fp8 import launcher, parse_config

    p = argparse.ArgumentParser()
    p.add_argument("--config", default="")
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--launches", type=int, default=4)
    a = p.parse_args(argv)
    cfg = parse_config(a.config)
    rng = np.random.default_rng(0)
    n = a.n
    A = cp.asarray(rng.integers(0, 0x70, (n, n), dtype=np.uint8))     # finite e4m3 codes
    B = cp.asarray(rng.integers(0, 0x70, (n, n), dtype=np.uint8))
    if cfg.scales == "tensor":          # per-tensor scales: one float each
        sa, sb = cp.ones(1, cp.float32), cp.ones(1, cp.float32)
    else:
        sa = cp.ones((n, n // 128), cp.float32) if cfg.promote else None
        sb = cp.ones((n // 128, -(-n // 128)), cp.float32) if cfg.promote else None
    launch, _ = launcher(A, B, sa, sb, cfg=cfg)
    for _ in range(a.launches):
        launch()
    cp.cuda.runtime.deviceSynchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
