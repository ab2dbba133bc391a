"""Compact fixtures of every dense wgmma form (kind ``wgmma_forms``), recorded by
``python -m gpu.record_forms`` on an H200, and their replayer.

One fixture file holds many *jobs* (one form in one configuration: SS or RS A operand,
scale-d, imm scales, chain).  The recorder ran full 64 x N tiles on the hardware and
compared every output with refmodel; the fixture keeps, per tile, the outputs of a few
rows ``R`` and columns ``J`` together with exactly the inputs they depend on: the rows
``A[R, :]``, the columns ``B[:, J]`` and ``C[R, J]`` (output ``D[r, j]`` of a wgmma depends
on row ``r`` of A, column ``j`` of B and ``C[r, j]`` only).  The replayer places them back
into a 64 x N tile (zeros elsewhere), runs refmodel and compares ``D[R, J]`` bit for bit.

Arrays of job ``i`` (all raw bits): ``j{i}_a`` (T, R, K*chain), ``j{i}_b`` (T, K*chain, J),
``j{i}_c`` and ``j{i}_d`` (T, R, J), ``j{i}_rows`` (T, R), ``j{i}_cols`` (T, J), ``j{i}_family``
(T,).  Meta: ``jobs`` (one dict per job: instr, rs, scale_d, imm_scale_a, imm_scale_b, chain,
families, seed) and ``forms`` (every instr the file covers).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..dtypes import bits_of, element_dtype, from_bits
from ..wgmma_forms import M, parse_wgmma
from .case import WgmmaCase
from .replay import Result, _count, meta_error, replayer

KIND = "wgmma_forms"
FEATURE = "wgmma_forms"
PARTS = ("a", "b", "c", "d", "rows", "cols", "family")


def compact(a_bits: np.ndarray, b_bits: np.ndarray, c_bits: np.ndarray, d_bits: np.ndarray,
            rows: np.ndarray, cols: np.ndarray, family: np.ndarray) -> dict[str, np.ndarray]:
    """Keep outputs D[t, rows[t], cols[t]] of full tiles and the inputs they depend on."""
    t = np.arange(a_bits.shape[0])[:, None]
    ri, ci = rows[:, :, None], cols[:, None, :]
    return {"a": a_bits[t, rows], "b": np.take_along_axis(b_bits, cols[:, None, :], axis=2),
            "c": c_bits[t[:, :, None], ri, ci], "d": d_bits[t[:, :, None], ri, ci],
            "rows": rows.astype(np.uint8), "cols": cols.astype(np.uint16), "family": family.astype(np.int16)}


def expand(instr: str, chain: int, part: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Full typed (a, b, c) tiles with the kept rows/columns in place and zeros elsewhere."""
    f = parse_wgmma(instr)
    tiles = part["a"].shape[0]
    kk = f.k * chain
    rows, cols = part["rows"].astype(np.int64), part["cols"].astype(np.int64)
    a = np.zeros((tiles, M, kk), dtype=part["a"].dtype)
    b = np.zeros((tiles, kk, f.n), dtype=part["b"].dtype)
    c = np.zeros((tiles, M, f.n), dtype=part["c"].dtype)
    t = np.arange(tiles)[:, None]
    a[t, rows] = part["a"]
    np.put_along_axis(b, np.broadcast_to(cols[:, None, :], part["b"].shape), part["b"], axis=2)
    c[t[:, :, None], rows[:, :, None], cols[:, None, :]] = part["c"]
    return from_bits(a, f.dtype_a), from_bits(b, f.dtype_b), from_bits(c, f.dtype_d)


def _job_parts(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Split the arrays per job, refusing any disagreement between meta and arrays."""
    jobs = meta.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise meta_error("meta lists no jobs")
    n = len(jobs)
    seen: dict[int, set[str]] = {}
    for k in arrays:
        m = re.fullmatch(r"j(\d+)_(\w+)", k)
        if not m or m.group(2) not in PARTS:
            raise meta_error(f"array {k!r} is not part of any job")
        seen.setdefault(int(m.group(1)), set()).add(m.group(2))
    if set(seen) != set(range(n)):
        raise meta_error(f"{n} jobs in meta but arrays for {len(seen)} jobs "
                         f"(no job in meta for {sorted(set(seen) - set(range(n)))[:5]}, "
                         f"no arrays for {sorted(set(range(n)) - set(seen))[:5]})")
    forms = meta.get("forms")
    if not isinstance(forms, list) or sorted(set(forms)) != sorted({j.get("instr") for j in jobs}):
        raise meta_error("meta 'forms' is not the set of the jobs' instructions")
    parts = []
    for i, job in enumerate(jobs):
        if seen[i] != set(PARTS):
            raise meta_error(f"job {i} lacks arrays {sorted(set(PARTS) - seen[i])}")
        p = {k: arrays[f"j{i}_{k}"] for k in PARTS}
        f = parse_wgmma(job["instr"])
        chain = int(job.get("chain", 1))
        t, r = p["rows"].shape
        jn = p["cols"].shape[1]
        want = {"a": (t, r, f.k * chain), "b": (t, f.k * chain, jn), "c": (t, r, jn), "d": (t, r, jn),
                "cols": (t, jn), "family": (t,)}
        for k, shp in want.items():
            if p[k].shape != shp:
                raise meta_error(f"job {i} ({job['instr']}): j{i}_{k} has shape {p[k].shape}, expected {shp}")
        if p["rows"].size and (int(p["rows"].max()) >= M or int(p["cols"].max()) >= f.n):
            raise meta_error(f"job {i} ({job['instr']}): a kept row or column is outside the 64 x {f.n} tile")
        parts.append(p)
    return parts


def job_label(job: dict[str, Any]) -> str:
    return (f"{job['instr'].removeprefix('wgmma.mma_async.sync.aligned.')} {'rs' if job.get('rs') else 'ss'} "
            f"sd{int(bool(job.get('scale_d', True)))} imm{int(job.get('imm_scale_a', 1)):+d}"
            f"{int(job.get('imm_scale_b', 1)):+d} chain{int(job.get('chain', 1))}")


@replayer(KIND)
def replay_forms(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """Every job of the file through refmodel, compared bit for bit with the kept outputs."""
    parts = _job_parts(meta, arrays)
    total = Result(0, 0)
    for job, p in zip(meta["jobs"], parts):
        f = parse_wgmma(job["instr"])
        chain = int(job.get("chain", 1))
        a, b, c = expand(job["instr"], chain, p)
        case = WgmmaCase(job["instr"], a, b, c, rs=bool(job.get("rs", False)),
                         scale_d=bool(job.get("scale_d", True)), imm_scale_a=int(job.get("imm_scale_a", 1)),
                         imm_scale_b=int(job.get("imm_scale_b", 1)), chain=chain)
        d_full = bits_of(np.asarray(case.model(), dtype=element_dtype(f.dtype_d)))
        t = np.arange(p["rows"].shape[0])[:, None, None]
        got = d_full[t, p["rows"].astype(np.int64)[:, :, None], p["cols"].astype(np.int64)[:, None, :]]
        total.add(_count(got, p["d"], job_label(job), {}))
    return total


def forms_covered(entries) -> set[str]:
    """Instructions with replayable hardware fixtures among manifest entries (kinds
    ``wgmma`` and ``wgmma_forms``)."""
    out: set[str] = set()
    for e in entries:
        if e.get("kind") == KIND:
            out |= {j["instr"] for j in e.get("meta", {}).get("jobs", [])}
        elif e.get("kind") == "wgmma" and "instr" in e.get("meta", {}):
            out.add(e["meta"]["instr"])
    return out
