"""Fit refmodel.golden.cublas to the recorded cuBLAS calls and print the mismatch counts.

    python tools/cublas_fit.py              # the H200 recordings in fixtures/cublas
    python tools/cublas_fit.py DIR          # an --explore folder (cublas.json + cublas.npz)

For every recorded call: the kernel, the schedule :func:`cublas_schedule` gives, its mismatches
(outputs whose bits differ) out of M*N, then contrasting schedules with their counts (other
reduction orders, neighbouring split counts, no split, ...) and, where the split count is not
pinned down, every split count that gives 0.  The inputs are rebuilt from their seeds
(``refmodel.verify.seeded.library_matrices``, numpy only); with the fixtures, the kept rows and
columns (every output of the split-K calls, 64 x 64 of the larger ones).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu.record.cublas import inputs  # noqa: E402
from refmodel.dtypes import bits_of  # noqa: E402
from refmodel.errors import InputError  # noqa: E402
from refmodel.golden.cublas import (cublas_matmul, cublas_schedule, split_bounds,  # noqa: E402
                                    split_partials)
from refmodel.numerics.gemm import _convert  # noqa: E402
from refmodel.verify.seeded import library_matrices  # noqa: E402

_OUT = {"torch.bfloat16": "bf16", "torch.float16": "f16", "torch.float32": "f32"}
_ODT = {"bf16": np.dtype(ml_dtypes.bfloat16), "f16": np.dtype(np.float16), "f32": np.dtype(np.float32)}


def mismatches(out: np.ndarray, rec: np.ndarray) -> int:
    o = bits_of(out)
    mask = (1 << (8 * o.dtype.itemsize)) - 1
    return int(np.count_nonzero((o.astype(np.int64) & mask) != (rec.astype(np.int64).reshape(o.shape) & mask)))


def _reduce(parts, order):
    if order == "reverse":
        parts = parts[::-1]
    if order == "tree":
        parts = list(parts)
        while len(parts) > 1:
            nxt = [(parts[i] + parts[i + 1]).astype(np.float32) for i in range(0, len(parts) - 1, 2)]
            parts = nxt + ([parts[-1]] if len(parts) % 2 else [])
        return parts[0]
    if order == "exact":
        return np.sum(np.array(parts, np.float64), 0).astype(np.float32)
    acc = parts[0]
    for p in parts[1:]:
        acc = (acc + p).astype(np.float32)
    return acc


def fit_call(c: dict, a: np.ndarray, b: np.ndarray, rec: np.ndarray, scan: bool) -> list[str]:
    """The report of one call: ``a``, ``b`` its inputs (or the kept rows of A and columns of B),
    ``rec`` the recorded outputs they give."""
    M, N, K = c["M"], c["N"], c["K"]
    out = _OUT[c["out"]]
    gk = [k for k in c["kernels"] if k.startswith("nvjet") or "cutlass_75" in k][0]
    sch = cublas_schedule(c["kernels"], M, N, K)
    kw = sch.kwargs()
    n = rec.size
    lines = [f"{c['name']}  (rrr={c['rrr']}, {n} of {M * N} outputs)",
             f"  kernel: {gk.split('(')[0].replace('void cutlass::Kernel2<', '').rstrip('>')}"]

    def run(**over):
        k = dict(kw, **over)
        try:
            return mismatches(cublas_matmul(a, b, out_dtype=out, **k), rec)
        except InputError as e:
            return f"n/a ({e})"

    best = run()
    chain = {"mma.sync.m16n8k8": "mma.sync m16n8k8 chain (fused groups of 8)",
             "wgmma": "wgmma k32 chain promoted to f32 every 4 instr" if c["dtype"] == "e4m3"
             else "wgmma k16 chain (f32)"}[sch.instr]
    desc = (f"S={sch.splits} chunks={np.diff(split_bounds(K, sch.splits, sch.split_align)).tolist()}, "
            "each a fresh chain, f32 partials added in split order" if sch.splits > 1 else "one chain over all K")
    lines.append(f"  schedule: {chain}, {desc}, cvt to {out}"
                 f"  ->  {best} / {n} mismatches" + ("" if sch.determined else "  [split count NOT determined]"))
    if sch.note:
        lines.append(f"  note: {sch.note}")
    alts = {}
    if sch.splits > 1:
        parts = split_partials(a, b, splits=sch.splits, split_align=sch.split_align, instr=sch.instr)
        for order in ("reverse", "tree", "exact"):
            alts[f"reduce {order}"] = mismatches(_convert(_reduce(parts, order), _ODT[out]), rec)
        alts["no split (S=1)"] = run(splits=1)
        for s in (sch.splits - 1, sch.splits + 1):
            alts[f"S={s}"] = run(splits=s)
        if out != "f32":
            alts[f"partials rounded to {out}"] = run(reduce_dtype=out)
    if sch.instr == "mma.sync.m16n8k8":
        alts["wgmma k16 groups instead of k8"] = run(instr="wgmma", split_align=8)
    if c["op"] == "matmul" and sch.splits == 1:
        ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
        alts["exact f64 dot, one rounding"] = mismatches(_convert(ref, _ODT[out]), rec)
    if c["op"] == "scaled_mm":
        from refmodel.numerics.scaled_mm import scaled_mm
        Ma = a.shape[0]
        Mp = -(-Ma // 64) * 64
        A = np.zeros((Mp, K), a.dtype)
        A[:Ma] = a
        d = scaled_mm(A, np.ascontiguousarray(b.T), np.float32(1), np.float32(1), out_dtype="f32",
                      use_fast_accum=True)[:Ma]
        alts["no promotion (use_fast_accum=True schedule)"] = mismatches(d, rec)
        from refmodel.numerics.gemm import gemm
        for pe in (1, 2, 8):
            d = gemm(A, np.ascontiguousarray(b), instr="wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3",
                     promote_every=pe)[:Ma]
            alts[f"promotion every {pe} instructions"] = mismatches(d, rec)
        if sch.splits > 1:
            alts["split_align=64 (stages not on the 128 grid), S=3"] = _fp8_align64(a, b, rec)
    for k, v in alts.items():
        lines.append(f"    vs {k}: {v} / {n}")
    if scan and not sch.determined and sch.consistent_splits != ("any",):
        zero = []
        for s in range(1, K // sch.split_align + 1):
            try:
                if run(splits=s) == 0:
                    zero.append(s)
            except InputError:
                pass
        lines.append(f"    split counts with 0 mismatches (S = 1..{K // sch.split_align}): {zero}")
    return lines


def _fp8_align64(a, b, rec):
    """Splits at 64-multiples that are not 128-multiples: each chunk's stages restart at its start."""
    from refmodel.numerics.gemm import gemm
    K = a.shape[1]
    M = a.shape[0]
    Mp = -(-M // 64) * 64
    A = np.zeros((Mp, K), a.dtype)
    A[:M] = a
    instr = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"
    parts = []
    bnd = split_bounds(K, 3, 64)
    for k0, k1 in zip(bnd[:-1], bnd[1:]):
        acc = np.zeros((Mp, b.shape[1]), np.float32)
        for s in range(k0, k1, 128):
            e = min(s + 128, k1)
            acc = (acc + gemm(A[:, s:e], np.ascontiguousarray(b[s:e]), instr=instr)).astype(np.float32)
        parts.append(acc[:M])
    return mismatches(_reduce(parts, "sequential"), rec)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", nargs="?", default=None, help="an --explore folder (default: fixtures/cublas)")
    p.add_argument("--no-scan", action="store_true", help="skip the split-count scan of undetermined calls")
    args = p.parse_args(argv)
    if args.dir:
        d = Path(args.dir)
        meta = json.loads((d / "cublas.json").read_text())
        rec = np.load(d / "cublas.npz")
        print(f"torch {meta.get('torch')}, CUDA {meta.get('cuda')}")
        for c in meta["calls"]:
            a, b = inputs(c["index"], c["dtype"], c["M"], c["N"], c["K"])
            print("\n".join(fit_call(c, a, b, rec[c["name"]], not args.no_scan)), flush=True)
        return 0
    fx = Path(__file__).resolve().parents[1] / "fixtures" / "cublas"
    entry = json.loads((fx / "manifest.json").read_text())["entries"][0]
    z = np.load(fx / entry["file"])
    print(f"fixtures/cublas: torch {entry['provenance']['torch']}, {entry['provenance']['cublas']}")
    for k, c in enumerate(entry["meta"]["calls"]):
        a, b = library_matrices(c["seed"], c["dtype"], c["M"], c["N"], c["K"], exp_range=tuple(c["exp_range"]),
                                lim=c["lim"])
        rows, cols = z[f"rows{k}"], z[f"cols{k}"]
        print("\n".join(fit_call(c, a[rows], b[:, cols], z[c["array"]], not args.no_scan)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
