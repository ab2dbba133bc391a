"""Golden GEMMs on the GPU (gpu/kernels/golden_gemm.py) vs the CPU refmodel vs the tensor core, one run:

* the golden 8192^3 e4m3 GEMM on the GPU's CUDA cores, promotion every 4 instructions and none, in products/s
  (M*N*K per second; decoding, the GEMM and the epilogue included, NVRTC compilation excluded);
* the CPU refmodel (refmodel.golden.Schedule.run) on a smaller cube, products/s (it scales linearly in M*N*K);
* torch._scaled_mm's own time on the same shape (use_fast_accum False and True), and how many of its outputs
  differ from the golden model of that call (refmodel.golden.torch_scaled_mm.scaled_mm_schedule);
* a sample of the GPU's golden outputs (64 x 64 blocks) checked against the CPU model: mismatches are printed.

    python bench/bench_golden_gpu.py [--size 8192] [--cpu-size 1024] [--reps 3] [--out bench/results/golden_gpu]

Writes ``golden_gpu_<size>.json`` under ``--out`` with the device and versions.  Goal: >= 1e12 products/s.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu_timing import median_event_seconds

E4 = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"


def main(argv=None) -> int:
    import cupy as cp
    import numpy as np

    from gpu.kernels.golden_gemm import golden_gemm_device
    from gpu.kernels.runtime import device_info
    from refmodel.golden import Schedule

    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--cpu-size", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--blocks", type=int, default=6, help="64 x 64 output blocks checked against the CPU model")
    ap.add_argument("--kernel", default="tiled", choices=["tiled", "reference"])
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "golden_gpu"))
    a = ap.parse_args(argv)
    n = a.size
    rng = np.random.default_rng(n)
    # e4m3 codes of normal values times 2**[-4, 4): finite, varied exponents (no NaN code 0x7F / 0xFF)
    from refmodel.numerics.fp8 import encode

    def codes(shape):
        return encode((rng.standard_normal(shape) * 2.0 ** rng.integers(-4, 4, shape)).astype(np.float32), "e4m3")

    A, B = codes((n, n)), codes((n, n))                      # A (M, K), B (K, N)
    Ad, Bd = cp.asarray(A), cp.asarray(B)
    prods = float(n) ** 3
    rec = {"size": n, "kernel": a.kernel, "device": device_info(), "python": platform.python_version(),
           "numpy": np.__version__, "gpu": {}, "cpu": {}, "tensor_core": {}, "sample": {}}
    # compile outside the timing
    golden_gemm_device(Ad[:64, :128], Bd[:128, :64], dtype="e4m3", promote_every=4, kernel=a.kernel)
    outs = {}
    for pe in (4, None):
        key = f"promote_{pe or 'none'}"
        t, out = median_event_seconds(cp, lambda pe=pe: golden_gemm_device(Ad, Bd, dtype="e4m3", promote_every=pe, kernel=a.kernel),
                        a.reps)
        outs[key] = cp.asnumpy(out).view(np.uint32)
        rec["gpu"][key] = {"seconds": t, "products_per_s": prods / t}
        print(f"GPU golden {n}^3 e4m3 {key:<13} {t:8.3f} s  {prods / t:10.3e} products/s", flush=True)
    # the CPU refmodel on a smaller cube
    c = a.cpu_size
    for pe in (4, None):
        key = f"promote_{pe or 'none'}"
        s = Schedule(E4, promote_every=pe, out_dtype="f32")
        at, bt = A[:c, :c].view(__import__("ml_dtypes").float8_e4m3fn), B[:c, :c].view(__import__("ml_dtypes").float8_e4m3fn)
        s.run(at[:64, :128], bt[:128, :64])                  # numba compiled
        t0 = time.perf_counter()
        s.run(at, bt)
        t = time.perf_counter() - t0
        rec["cpu"][key] = {"size": c, "seconds": t, "products_per_s": float(c) ** 3 / t}
        print(f"CPU refmodel {c}^3 e4m3 {key:<13} {t:8.3f} s  {float(c) ** 3 / t:10.3e} products/s "
              f"(GPU/CPU {rec['gpu'][key]['products_per_s'] / (float(c) ** 3 / t):.0f}x)", flush=True)
    # the sample against the CPU model
    import ml_dtypes

    at, bt = A.view(ml_dtypes.float8_e4m3fn), B.view(ml_dtypes.float8_e4m3fn)
    for pe in (4, None):
        key = f"promote_{pe or 'none'}"
        s = Schedule(E4, promote_every=pe, out_dtype="f32")
        bad = checked = 0
        for _ in range(a.blocks):
            r0, c0 = int(rng.integers(0, n // 64)) * 64, int(rng.integers(0, n // 64)) * 64
            want = np.asarray(s.run(at[r0:r0 + 64], np.ascontiguousarray(bt[:, c0:c0 + 64]))).view(np.uint32)
            got = outs[key][r0:r0 + 64, c0:c0 + 64]
            diff = np.argwhere(got != want)
            for i, j in diff[:5]:
                print(f"  MISMATCH {key} D[{r0 + i}, {c0 + j}]: GPU {got[i, j]:#010x} CPU {want[i, j]:#010x}")
            bad += len(diff)
            checked += want.size
        rec["sample"][key] = {"checked": checked, "mismatches": bad}
        print(f"sample {key}: {checked} outputs checked against the CPU model, {bad} mismatches", flush=True)
    # the tensor core's own time (torch._scaled_mm, cuBLASLt) and its bits vs the golden model of that call
    if not a.no_torch:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            from refmodel.golden.torch_scaled_mm import scaled_mm_schedule

            ta = torch.as_tensor(Ad, device="cuda").view(torch.float8_e4m3fn)
            tbt = torch.as_tensor(cp.ascontiguousarray(Bd.T), device="cuda").view(torch.float8_e4m3fn)   # (N, K)
            one = torch.ones((), device="cuda")
            for fast in (False, True):
                f = lambda fast=fast: torch._scaled_mm(ta, tbt.t(), one, one, out_dtype=torch.float32, use_fast_accum=fast)
                for _ in range(3):
                    d = f()
                torch.cuda.synchronize()
                ts = []
                for _ in range(max(a.reps, 5)):
                    s_, e_ = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s_.record()
                    d = f()
                    e_.record()
                    e_.synchronize()
                    ts.append(s_.elapsed_time(e_) / 1e3)
                t = sorted(ts)[len(ts) // 2]
                sched = scaled_mm_schedule(n, n, n, use_fast_accum=fast, rowwise=False, out_dtype="f32")
                g = golden_gemm_device(Ad, Bd, schedule=sched, scale_a=np.float32(1), scale_b=np.float32(1),
                                       kernel=a.kernel)
                hw = cp.asarray(d.contiguous().view(torch.int32)).view(cp.uint32)
                differ = int(cp.count_nonzero(hw != g.view(cp.uint32)))
                key = "fast" if fast else "precise"
                rec["tensor_core"][key] = {"seconds": t, "products_per_s": prods / t,
                                           "outputs_differing_from_golden": differ, "torch": torch.__version__}
                print(f"torch._scaled_mm {key:<8} {t * 1e3:8.3f} ms {prods / t:10.3e} products/s; "
                      f"{differ} of {n * n} outputs differ from the golden model "
                      f"(golden GPU / tensor core time: {rec['gpu']['promote_4' if not fast else 'promote_none']['seconds'] / t:.0f}x)",
                      flush=True)
    goal = min(v["products_per_s"] for v in rec["gpu"].values())
    rec["goal_products_per_s"] = 1e12
    rec["goal_met"] = bool(goal >= 1e12)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"golden_gpu_{n}.json"
    path.write_text(json.dumps(rec, indent=1))
    print(f"wrote {path}; goal 1e12 products/s {'met' if rec['goal_met'] else 'NOT met'} ({goal:.3e})")
    return 0 if all(v["mismatches"] == 0 for v in rec["sample"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
