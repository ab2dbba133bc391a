"""Explore cuBLAS through torch (``torch.matmul`` bf16/f16 and ``torch._scaled_mm``) on the H200.

    python -m gpu.record_cublas --explore DIR     # run every shape, save outputs + kernel names

Inputs are drawn on the host with numpy from a per-call seed (``inputs(call)``), so a CPU can
rebuild them exactly; only the outputs and the cuBLAS kernel that ran (from torch's profiler)
travel back.  The kernel name tells the schedule cuBLAS picked (tile, split-K / stream-K).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

# (name, op, dtype, M, N, K, reduced_precision_reduction)
CALLS = [
    ("mm_bf16_256x256x256", "matmul", "bf16", 256, 256, 256, True),
    ("mm_bf16_512x512x1024", "matmul", "bf16", 512, 512, 1024, True),
    ("mm_bf16_1024x1024x1024", "matmul", "bf16", 1024, 1024, 1024, True),
    ("mm_bf16_64x64x8192", "matmul", "bf16", 64, 64, 8192, True),
    ("mm_bf16_64x64x8192_norrr", "matmul", "bf16", 64, 64, 8192, False),
    ("mm_bf16_128x128x16384", "matmul", "bf16", 128, 128, 16384, True),
    ("mm_bf16_128x128x16384_norrr", "matmul", "bf16", 128, 128, 16384, False),
    ("mm_bf16_16x16x4096", "matmul", "bf16", 16, 16, 4096, True),
    ("mm_bf16_1x1024x4096", "matmul", "bf16", 1, 1024, 4096, True),
    ("mm_bf16_257x129x1000", "matmul", "bf16", 257, 129, 1000, True),
    ("mm_f16_256x256x256", "matmul", "f16", 256, 256, 256, True),
    ("mm_f16_512x512x2048", "matmul", "f16", 512, 512, 2048, True),
    ("mm_f16_64x64x8192", "matmul", "f16", 64, 64, 8192, True),
    ("mm_f16_64x64x8192_norrr", "matmul", "f16", 64, 64, 8192, False),
    ("smm_e4m3_64x64x8192", "scaled_mm", "e4m3", 64, 64, 8192, None),
    ("smm_e4m3_512x512x2048", "scaled_mm", "e4m3", 512, 512, 2048, None),
    ("smm_e4m3_16x64x4096", "scaled_mm", "e4m3", 16, 64, 4096, None),
]


def inputs(i: int, dtype: str, m: int, n: int, k: int):
    """The inputs of call ``i``: a (M, K) and b (K, N) as numpy arrays of ``dtype`` (ml_dtypes)."""
    import ml_dtypes

    fp = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "e4m3": ml_dtypes.float8_e4m3fn}[dtype]
    rng = np.random.default_rng(5000 + i)
    sa = np.exp2(rng.integers(-3, 4, (m, k))).astype(np.float32)
    sb = np.exp2(rng.integers(-3, 4, (k, n))).astype(np.float32)
    lim = 400.0 if dtype == "e4m3" else 1e4
    a = np.clip(rng.standard_normal((m, k), dtype=np.float32) * sa, -lim, lim).astype(fp)
    b = np.clip(rng.standard_normal((k, n), dtype=np.float32) * sb, -lim, lim).astype(fp)
    return a, b


def explore(out: Path) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    out.mkdir(parents=True, exist_ok=True)
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16, "e4m3": torch.float8_e4m3fn}
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32}
    results, meta = {}, []
    for i, (name, op, dt, m, n, k, rrr) in enumerate(CALLS):
        a_np, b_np = inputs(i, dt, m, n, k)
        a = torch.from_numpy(a_np.view(np.uint8 if dt == "e4m3" else np.int16)).view(tdt[dt]).cuda()
        b = torch.from_numpy(b_np.view(np.uint8 if dt == "e4m3" else np.int16)).view(tdt[dt]).cuda()
        if rrr is not None:
            attr = "allow_bf16_reduced_precision_reduction" if dt == "bf16" else "allow_fp16_reduced_precision_reduction"
            setattr(torch.backends.cuda.matmul, attr, rrr)

        def call():
            if op == "matmul":
                return torch.matmul(a, b)
            one = torch.tensor(1.0, device="cuda")
            return torch._scaled_mm(a, b.t().contiguous().t(), one, one, out_dtype=torch.float32)
        try:
            call()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                d = call()
                torch.cuda.synchronize()
            kernels = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
        except Exception as e:  # reported, the rest goes on
            print(f"{name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        again = call()
        det = bool(torch.equal(d.view(view[d.element_size()]), again.view(view[d.element_size()])))
        results[name] = d.view(view[d.element_size()]).cpu().numpy()
        meta.append({"name": name, "index": i, "op": op, "dtype": dt, "M": m, "N": n, "K": k, "rrr": rrr,
                     "out": str(d.dtype), "kernels": kernels, "deterministic_rerun": det})
        print(f"{name}: {kernels} rerun-identical={det}", flush=True)
    np.savez_compressed(out / "cublas.npz", **results)
    (out / "cublas.json").write_text(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                                                 "cublas": torch.backends.cuda.preferred_blas_library().name,
                                                 "calls": meta}, indent=1))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--explore", required=True, help="run every call on the GPU, save to this folder")
    args = p.parse_args(argv)
    explore(Path(args.explore))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
