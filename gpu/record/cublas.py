"""Explore cuBLAS through torch (``torch.matmul`` bf16/f16 and ``torch._scaled_mm``) on the H200.

    python -m gpu.record.cublas --explore DIR     # run every shape, save outputs + kernel names
    python -m gpu.record.cublas --store DIR --out fixtures   # (CPU) check refmodel.golden.cublas, store

Inputs are drawn on the host with numpy from a per-call seed (``inputs(call)``), so a CPU can
rebuild them exactly; only the outputs and the cuBLAS kernel that ran (from torch's profiler)
travel back.  The kernel name tells the schedule cuBLAS picked (tile, split-K / stream-K).  The
calls, the profiler and the raw-bit transfers are gpu.libraries.torch_cublas's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from gpu.libraries.torch_cublas import (bits_view, matmul, profiled, scaled_mm_unit_scales,
                                        set_reduced_precision_reduction, to_gpu, versions)

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
    from refmodel.verify.seeded import library_matrices

    return library_matrices(5000 + i, dtype, m, n, k, exp_range=(-3, 4), lim=400.0 if dtype == "e4m3" else 1e4)


def explore(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    results, meta = {}, []
    for i, (name, op, dt, m, n, k, rrr) in enumerate(CALLS):
        a_np, b_np = inputs(i, dt, m, n, k)
        a, b = to_gpu(a_np, dt), to_gpu(b_np, dt)
        if rrr is not None:
            set_reduced_precision_reduction(dt, rrr)

        def call():
            return matmul(a, b) if op == "matmul" else scaled_mm_unit_scales(a, b)
        try:
            d, kernels = profiled(call)
        except Exception as e:  # reported, the rest goes on
            print(f"{name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        again = call()
        results[name] = bits_view(d)
        det = bool(np.array_equal(results[name], bits_view(again)))
        meta.append({"name": name, "index": i, "op": op, "dtype": dt, "M": m, "N": n, "K": k, "rrr": rrr,
                     "out": str(d.dtype), "kernels": kernels, "deterministic_rerun": det})
        print(f"{name}: {kernels} rerun-identical={det}", flush=True)
    np.savez_compressed(out / "cublas.npz", **results)
    (out / "cublas.json").write_text(json.dumps({**versions(), "calls": meta}, indent=1))


# torch._scaled_mm calls in the shapes where cuBLAS switches to split-K kernels:
# (name, M, N, K, use_fast_accum, per-tensor scales or None for 1, out)
SPLIT_CALLS = [
    ("smm_e4m3_64x64x8192_fast", 64, 64, 8192, True, None, "bf16"),
    ("smm_e4m3_64x64x8192_precise", 64, 64, 8192, False, None, "bf16"),
    ("smm_e4m3_64x64x8192_fast_f32", 64, 64, 8192, True, None, "f32"),
    ("smm_e4m3_64x64x8192_fast_scaled", 64, 64, 8192, True, (0.5, 0.375), "f32"),
    ("smm_e4m3_128x128x16384_fast", 128, 128, 16384, True, None, "bf16"),
    ("smm_e4m3_64x128x4096_fast", 64, 128, 4096, True, None, "f32"),
    ("smm_e4m3_64x256x8192_fast", 64, 256, 8192, True, None, "f32"),
    ("smm_e4m3_256x256x2048_fast", 256, 256, 2048, True, None, "f32"),
]


def explore_split(out: Path) -> None:
    """Run :data:`SPLIT_CALLS` (inputs seeded 6000 + i), save outputs and kernel names."""
    import torch

    from gpu.libraries.torch_cublas import scaled_mm

    out.mkdir(parents=True, exist_ok=True)
    results, meta = {}, []
    for i, (name, m, n, k, fast, scales, o) in enumerate(SPLIT_CALLS):
        from refmodel.verify.seeded import library_matrices

        a_np, b_np = library_matrices(6000 + i, "e4m3", m, n, k, exp_range=(-3, 4), lim=400.0)
        a = to_gpu(a_np, "e4m3")
        b_nk = to_gpu(np.ascontiguousarray(b_np.T), "e4m3")
        sa, sb = scales or (1.0, 1.0)
        sa_t, sb_t = torch.tensor(sa, device="cuda"), torch.tensor(sb, device="cuda")
        try:
            d, kernels = profiled(lambda: scaled_mm(a, b_nk, sa_t, sb_t, o, use_fast_accum=fast))
        except Exception as e:  # reported, the rest goes on
            print(f"{name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        again = scaled_mm(a, b_nk, sa_t, sb_t, o, use_fast_accum=fast)
        results[name] = bits_view(d)
        det = bool(np.array_equal(results[name], bits_view(again)))
        meta.append({"name": name, "index": i, "seed": 6000 + i, "M": m, "N": n, "K": k, "use_fast_accum": fast,
                     "scale_a": sa, "scale_b": sb, "out": o, "kernels": kernels, "deterministic_rerun": det})
        print(f"{name}: {kernels} rerun-identical={det}", flush=True)
    np.savez_compressed(out / "cublas_split.npz", **results)
    (out / "cublas_split.json").write_text(json.dumps({**versions(), "calls": meta}, indent=1))


def store_split(explored: Path, out: Path, log=print) -> int:
    """fixtures/cublas/scaled_mm_split.npz (kind ``scaled_mm_split``): the :data:`SPLIT_CALLS` outputs with
    their seeds, input sha256 and kernels, and what refmodel.golden.torch_scaled_mm.scaled_mm does with the
    kernel names (``expect``: "match", checked here on every output, or "refused")."""

    from refmodel.dtypes import bits_of
    from refmodel.errors import InputError
    from refmodel.golden.torch_scaled_mm import scaled_mm
    from refmodel.verify.fixtures import host_provenance, write_fixture
    from refmodel.verify.seeded import library_matrices, matrix_sha256

    rec = json.loads((explored / "cublas_split.json").read_text())
    with np.load(explored / "cublas_split.npz") as z:
        outs = {k: z[k] for k in z.files}
    arrays, calls, bad, cases = {}, [], 0, 0
    for c in rec["calls"]:
        hw = outs[c["name"]]
        a, b = library_matrices(c["seed"], "e4m3", c["M"], c["N"], c["K"], exp_range=(-3, 4), lim=400.0)
        b_nk = np.ascontiguousarray(b.T)
        try:
            d = scaled_mm(a, b_nk, np.float32(c["scale_a"]), np.float32(c["scale_b"]), out_dtype=c["out"],
                          use_fast_accum=c["use_fast_accum"], kernel=c["kernels"])
            n, expect = int(np.count_nonzero(bits_of(d).view(hw.dtype) != hw)), "match"
        except InputError as e:
            n, expect = 0, "refused"
            log(f"{c['name']}: refused ({str(e)[:100]})")
        log(f"{c['name']}: {hw.size} outputs, {n} mismatches ({expect})")
        bad += n
        i = len(calls)
        arrays[f"d{i}"] = hw
        calls.append({**c, "array": i, "expect": expect, "a_sha256": matrix_sha256(a), "b_sha256": matrix_sha256(b),
                      "exp_range": [-3, 4], "lim": 400.0})
        cases += int(hw.size)
    if bad:
        log(f"{bad} mismatches: nothing stored")
        return 1
    prov = {**host_provenance(), "device": "NVIDIA H200", "recorder": "gpu.record.cublas --explore-split",
            "torch": rec.get("torch"), "cuda": rec.get("cuda")}
    write_fixture("cublas", "scaled_mm_split", arrays, kind="scaled_mm_split", cases=cases,
                  meta={"calls": calls, "inputs": "refmodel.verify.seeded.library_matrices(seed, 'e4m3', M, N, K, "
                                                  "exp_range=(-3, 4), lim=400.0); b_nk = b.T"},
                  provenance=prov, root=out)
    log(f"stored {len(calls)} calls, {cases} outputs")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--explore", help="run every call on the GPU, save to this folder")
    p.add_argument("--store", help="(CPU) turn an --explore folder into fixtures under --out")
    p.add_argument("--out", default="fixtures")
    p.add_argument("--explore-split", help="run the split-K torch._scaled_mm calls on the GPU, save to this folder")
    p.add_argument("--store-split", help="(CPU) turn an --explore-split folder into fixtures under --out")
    args = p.parse_args(argv)
    if args.store_split:
        return store_split(Path(args.store_split), Path(args.out))
    if args.explore_split:
        explore_split(Path(args.explore_split))
        return 0
    if args.explore:
        explore(Path(args.explore))
        return 0
    if args.store:
        return store(Path(args.store), Path(args.out))
    p.error("give --explore DIR (GPU) or --store DIR (CPU)")
    return 2



SAMPLE = 64   # a recorded output larger than SAMPLE x SAMPLE keeps SAMPLE rows and SAMPLE columns


def _sample(rng, m: int, n: int):
    rows = np.arange(m) if m * n <= 40000 else np.sort(rng.choice(m, min(m, SAMPLE), replace=False))
    cols = np.arange(n) if m * n <= 40000 else np.sort(rng.choice(n, min(n, SAMPLE), replace=False))
    return rows, cols


def store(explored: Path, out: Path, log=print) -> int:
    """Turn an --explore folder into the fixture fixtures/cublas/calls.npz (kind ``cublas_calls``):
    every call refmodel.golden.cublas_matmul reproduces on the whole recorded output (under
    cublas_schedule(kernels, M, N, K)), with the seed and sha256 of its inputs and a sample of its
    outputs (all of them up to 40,000)."""
    import ml_dtypes

    from refmodel.dtypes import bits_of
    from refmodel.golden import cublas_matmul, cublas_schedule
    from refmodel.verify.fixtures import host_provenance, write_fixture
    from refmodel.verify.seeded import matrix_sha256

    info = json.loads((explored / "cublas.json").read_text())
    z = np.load(explored / "cublas.npz")
    arrays, calls, bad, outputs = {}, [], 0, 0
    od = {"torch.bfloat16": ml_dtypes.bfloat16, "torch.float16": np.float16, "torch.float32": np.float32}
    for c in info["calls"]:
        a, b = inputs(c["index"], c["dtype"], c["M"], c["N"], c["K"])
        sched = cublas_schedule(c["kernels"], c["M"], c["N"], c["K"])
        d = cublas_matmul(a, b, **sched.kwargs(), out_dtype={"torch.bfloat16": "bf16", "torch.float16": "f16",
                                                              "torch.float32": "f32"}[c["out"]])
        hw = z[c["name"]].view(od[c["out"]])
        n = int(np.count_nonzero(bits_of(d) != bits_of(hw)))
        log(f"{c['name']}: {hw.size} outputs, {n} mismatches ({sched.splits} splits{'' if sched.determined else ', S not determined'})")
        bad += n
        if n:
            continue
        rows, cols = _sample(np.random.default_rng(len(c["name"])), c["M"], c["N"])
        k = len(calls)
        arrays[f"d{k}"], arrays[f"rows{k}"], arrays[f"cols{k}"] = bits_of(hw[np.ix_(rows, cols)]), rows, cols
        outputs += rows.size * cols.size
        calls.append({**{x: c[x] for x in ("name", "op", "dtype", "M", "N", "K", "rrr", "out", "kernels")},
                      "seed": 5000 + c["index"], "exp_range": [-3, 4], "lim": 400.0 if c["dtype"] == "e4m3" else 1e4,
                      "a_sha256": matrix_sha256(a), "b_sha256": matrix_sha256(b), "recorded_outputs": int(hw.size),
                      "array": f"d{k}"})
    prov = {"device": "NVIDIA H200", "torch": info["torch"], "cuda": info["cuda"], "blas": info["cublas"],
            "cublas": "nvidia-cublas 13.1.0.3", "recorder": "gpu.record.cublas", **host_provenance()}
    write_fixture("cublas", "calls", arrays, kind="cublas_calls", cases=outputs, meta={"calls": calls},
                  provenance=prov, root=out)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
