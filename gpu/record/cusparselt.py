"""Explore cuSPARSELt through PyTorch semi-structured sparsity on the H200.

    python -m gpu.record.cusparselt --explore DIR     # run every call, save outputs + kernel names

Inputs are drawn on the host with numpy from a per-call seed (:func:`inputs`: the library
recorders' matrices, A then 2:4 pruned along K by magnitude), so a CPU rebuilds them exactly; only
the outputs, the sha256 of what was fed and the kernels that ran (torch's profiler) travel back.
The calls are gpu.libraries.cusparselt's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from gpu.libraries.cusparselt import cslt_sparse_mm, semi_structured_mm, version
from gpu.libraries.torch_cublas import bits_view, to_gpu, versions

# (name, api, dtype, out, M, N, K, split_k): api "mm" = to_sparse_semi_structured + torch.mm,
# "cslt" = _cslt_compress + _cslt_sparse_mm; out None = the input dtype
CALLS = [
    ("mm_f16_128x128x256", "mm", "f16", None, 128, 128, 256, None),
    ("mm_bf16_256x256x1024", "mm", "bf16", None, 256, 256, 1024, None),
    ("mm_f16_1024x1024x4096", "mm", "f16", None, 1024, 1024, 4096, None),
    ("mm_f16_64x64x8192", "mm", "f16", None, 64, 64, 8192, None),
    ("mm_bf16_64x64x8192", "mm", "bf16", None, 64, 64, 8192, None),
    ("mm_bf16_128x128x16384", "mm", "bf16", None, 128, 128, 16384, None),
    ("mm_bf16_64x256x8192", "mm", "bf16", None, 64, 256, 8192, None),
    ("cslt_f16_256x256x1024", "cslt", "f16", None, 256, 256, 1024, None),
    ("cslt_e4m3_bf16_128x128x1024", "cslt", "e4m3", "bf16", 128, 128, 1024, None),
    ("cslt_e4m3_f32_256x256x2048", "cslt", "e4m3", "f32", 256, 256, 2048, None),
    ("cslt_e4m3_bf16_64x64x8192", "cslt", "e4m3", "bf16", 64, 64, 8192, None),
    ("cslt_e4m3_f32_128x128x16384", "cslt", "e4m3", "f32", 128, 128, 16384, None),
    ("cslt_f16_64x64x8192_sk1", "cslt", "f16", None, 64, 64, 8192, 1),
    ("cslt_f16_64x64x8192_sk2", "cslt", "f16", None, 64, 64, 8192, 2),
    ("cslt_f16_64x64x8192_sk4", "cslt", "f16", None, 64, 64, 8192, 4),
    ("cslt_e4m3_bf16_64x64x8192_sk4", "cslt", "e4m3", "bf16", 64, 64, 8192, 4),
]


def prune_2_4(a: np.ndarray) -> np.ndarray:
    """``a`` (M, K) with the two smallest-magnitude elements of every group of four along K set to +0
    (ties: the lower index is kept), as PyTorch's 2:4 convention wants."""
    m, k = a.shape
    mag = np.abs(a.astype(np.float32)).reshape(m, k // 4, 4)
    order = np.argsort(-mag, axis=-1, kind="stable")          # largest first, lower index on ties
    keep = np.zeros(mag.shape, bool)
    np.put_along_axis(keep, order[..., :2], True, axis=-1)
    out = a.copy().reshape(m, k // 4, 4)
    out[~keep] = 0
    return out.reshape(m, k)


def inputs(i: int, dtype: str, m: int, n: int, k: int):
    """The inputs of call ``i``: a (M, K) 2:4-pruned and b (K, N), numpy arrays of ``dtype``."""
    from refmodel.verify.seeded import library_matrices

    a, b = library_matrices(7000 + i, dtype, m, n, k, exp_range=(-3, 4), lim=400.0 if dtype == "e4m3" else 1e4)
    return prune_2_4(a), b


def explore(out: Path) -> None:
    import torch

    from refmodel.verify.seeded import matrix_sha256

    out.mkdir(parents=True, exist_ok=True)
    results, meta = {}, []
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
    for i, (name, api, dt, o, m, n, k, sk) in enumerate(CALLS):
        a_np, b_np = inputs(i, dt, m, n, k)
        a, b = to_gpu(a_np, dt), to_gpu(b_np, dt)
        rec = {"name": name, "index": i, "api": api, "dtype": dt, "out": o or dt, "M": m, "N": n, "K": k,
               "split_k": sk, "seed": 7000 + i, "a_sha256": matrix_sha256(a_np), "b_sha256": matrix_sha256(b_np)}
        d = None
        for b_layout in ("row", "col"):
            bb = b if b_layout == "row" else b.t().contiguous().t()
            try:
                if api == "mm":
                    call = lambda: semi_structured_mm(a, bb)  # noqa: E731
                else:
                    call = lambda: cslt_sparse_mm(a, bb, out_dtype=tdt[o] if o else None, split_k=sk)  # noqa: E731
                d, kernels = call()
                again, _ = call()
                rec.update(b_layout=b_layout, kernels=kernels, out_torch=str(d.dtype), shape=list(d.shape),
                           deterministic_rerun=bool(np.array_equal(bits_view(d), bits_view(again))))
                break
            except Exception as e:  # reported, the next layout / call goes on
                rec.setdefault("errors", []).append(f"b {b_layout}: {type(e).__name__}: {str(e)[:300]}")
        if d is not None:
            results[name] = bits_view(d)
        meta.append(rec)
        print(json.dumps(rec)[:600], flush=True)
    np.savez_compressed(out / "cusparselt.npz", **results)
    (out / "cusparselt.json").write_text(json.dumps({**versions(), "cusparselt": version(), "calls": meta}, indent=1))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--explore", help="run every call on the GPU, save to this folder")
    args = p.parse_args(argv)
    if args.explore:
        explore(Path(args.explore))
        return 0
    p.error("give --explore DIR (GPU)")
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
