"""Explore cuSPARSELt through PyTorch semi-structured sparsity on the H200.

    python -m gpu.record.cusparselt --explore DIR     # run every call, save outputs + kernel names
    python -m gpu.record.cusparselt --store DIR --out fixtures   # (CPU) check the golden model, store

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


def inputs(i: int, dtype: str, m: int, n: int, k: int):
    """The inputs of call ``i``: a (M, K) 2:4-pruned and b (K, N), numpy arrays of ``dtype``
    (refmodel.verify.seeded.sparse_library_matrices with seed 7000 + i)."""
    from refmodel.verify.seeded import sparse_library_matrices

    return sparse_library_matrices(7000 + i, dtype, m, n, k)


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


SAMPLE = 64   # outputs larger than 256 x 256 keep SAMPLE rows and SAMPLE columns


def store(explored: Path, out: Path, log=print) -> int:
    """fixtures/cusparselt/calls.npz (kind ``cusparselt_calls``): every recorded call with its seed, input
    sha256, kernels and outputs (all of them, or 64 rows x 64 columns of the larger ones), and what
    refmodel.golden.cusparselt_matmul does with its kernel names: reproduce every stored output
    (``expect`` "match", checked here) or refuse (``expect`` "refused": a split the model does not know)."""
    import ml_dtypes

    from refmodel.dtypes import bits_of
    from refmodel.errors import InputError
    from refmodel.golden.cusparselt import cusparselt_matmul, cusparselt_schedule
    from refmodel.verify.fixtures import host_provenance, write_fixture

    rec = json.loads((explored / "cusparselt.json").read_text())
    with np.load(explored / "cusparselt.npz") as z:
        outs = {k: z[k] for k in z.files}
    od = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}
    arrays, calls, bad, cases = {}, [], 0, 0
    for c in rec["calls"]:
        if c["name"] not in outs:
            continue
        hw = outs[c["name"]]
        a, b = inputs(c["index"], c["dtype"], c["M"], c["N"], c["K"])
        rng = np.random.default_rng(c["index"])
        if hw.size > 256 * 256:
            rows = np.sort(rng.choice(c["M"], SAMPLE, replace=False))
            cols = np.sort(rng.choice(c["N"], SAMPLE, replace=False))
        else:
            rows, cols = np.arange(c["M"]), np.arange(c["N"])
        kept = hw[np.ix_(rows, cols)]
        try:
            if hw.size > 256 * 256:     # the full call's schedule, run on the kept rows and columns
                sched = cusparselt_schedule(c["dtype"], c["M"], c["N"], c["K"], out_dtype=c["out"], kernel=c["kernels"])
                d = cusparselt_matmul(a[rows], b[:, cols], out_dtype=od[c["out"]], schedule=sched)
            else:
                d = cusparselt_matmul(a, b, out_dtype=od[c["out"]], kernel=c["kernels"])
            n = int(np.count_nonzero(bits_of(d).view(kept.dtype) != kept))
            expect = "match"
        except InputError as e:
            n, expect = 0, "refused"
            log(f"{c['name']}: refused ({str(e)[:100]})")
        log(f"{c['name']}: {kept.size} outputs kept, {n} mismatches ({expect})")
        bad += n
        i = len(calls)
        arrays[f"d{i}"], arrays[f"rows{i}"], arrays[f"cols{i}"] = kept, rows.astype(np.int32), cols.astype(np.int32)
        calls.append({k: c[k] for k in ("name", "index", "api", "dtype", "out", "M", "N", "K", "seed", "a_sha256",
                                        "b_sha256", "kernels", "b_layout", "deterministic_rerun") if k in c}
                     | {"array": i, "expect": expect, "recorded_outputs": int(hw.size)})
        cases += int(kept.size)
    if bad:
        log(f"{bad} mismatches: nothing stored")
        return 1
    prov = {**host_provenance(), "device": "NVIDIA H200", "recorder": "gpu.record.cusparselt",
            "torch": rec.get("torch"), "cuda": rec.get("cuda"), "cusparselt": rec.get("cusparselt")}
    write_fixture("cusparselt", "calls", arrays, kind="cusparselt_calls", cases=cases,
                  meta={"calls": calls, "inputs": "refmodel.verify.seeded.sparse_library_matrices(seed, dtype, M, N, K)"},
                  provenance=prov, root=out)
    log(f"stored {len(calls)} calls, {cases} outputs")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--explore", help="run every call on the GPU, save to this folder")
    p.add_argument("--store", help="(CPU) turn an --explore folder into fixtures under --out")
    p.add_argument("--out", default="fixtures")
    args = p.parse_args(argv)
    if args.explore:
        explore(Path(args.explore))
        return 0
    if args.store:
        return store(Path(args.store), Path(args.out))
    p.error("give --explore DIR (GPU) or --store DIR (CPU)")
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
