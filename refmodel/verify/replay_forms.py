"""Compact fixtures of every dense wgmma form (kind ``wgmma_forms``), recorded by
``python -m gpu.record.forms`` on an H200, and their replayer.

One fixture file holds many *jobs* (one form in one configuration: SS or RS A operand,
scale-d, imm scales, chain) of one dtype family and accumulator type.  The recorder ran
full 64 x N tiles on the hardware and compared every output with refmodel; the fixture
keeps, per tile, the outputs of a few rows ``R`` and columns ``J`` together with exactly the
inputs they depend on: the rows ``A[R, :]``, the columns ``B[:, J]`` and ``C[R, J]`` (output
``D[r, j]`` of a wgmma depends on row ``r`` of A, column ``j`` of B and ``C[r, j]`` only).  The
replayer places them back into a 64 x N tile (zeros elsewhere), runs refmodel and compares
``D[R, J]`` bit for bit.

Arrays (flat, raw bits, the jobs one after another): ``a`` (T, R, K*chain) per job, ``b``
(T, K*chain, J), ``c`` and ``d`` (T, R, J), ``rows`` (T, R), ``cols`` (T, J), ``family`` (T,).
Meta: ``jobs`` (instr, rs, scale_d, imm_scale_a, imm_scale_b, chain, tiles, rows, cols per
job), ``forms`` (every instr of the file) and ``families`` (names of the family indices).
The jobs must account for every stored element exactly: a trimmed meta is refused.
"""

from __future__ import annotations

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


def job_shapes(job: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    f = parse_wgmma(job["instr"])
    kk = f.k * int(job.get("chain", 1))
    t, r, j = int(job["tiles"]), int(job["rows"]), int(job["cols"])
    if t < 1 or not 1 <= r <= M or not 1 <= j <= f.n:
        raise meta_error(f"{job['instr']}: tiles/rows/cols {t}/{r}/{j} do not fit a 64 x {f.n} tile")
    return {"a": (t, r, kk), "b": (t, kk, j), "c": (t, r, j), "d": (t, r, j), "rows": (t, r), "cols": (t, j),
            "family": (t,)}


def pack(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Concatenate jobs' compact arrays into the flat arrays of one fixture file."""
    return {k: np.concatenate([p[k].reshape(-1) for p in parts]) for k in PARTS}


def unpack(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Split the flat arrays per job, refusing any disagreement between meta and arrays."""
    jobs = meta.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise meta_error("meta lists no jobs")
    if set(arrays) != set(PARTS):
        raise meta_error(f"a {KIND} fixture holds exactly the arrays {list(PARTS)}, this one {sorted(arrays)}")
    forms = meta.get("forms")
    if not isinstance(forms, list) or sorted(set(forms)) != sorted({j.get("instr") for j in jobs}):
        raise meta_error("meta 'forms' is not the set of the jobs' instructions")
    off = dict.fromkeys(PARTS, 0)
    parts = []
    for i, job in enumerate(jobs):
        shapes = job_shapes(job)
        p = {}
        for k, shp in shapes.items():
            n = int(np.prod(shp))
            if off[k] + n > arrays[k].size:
                raise meta_error(f"job {i} ({job['instr']}) needs more {k!r} elements than the fixture holds")
            p[k] = arrays[k][off[k]:off[k] + n].reshape(shp)
            off[k] += n
        f = parse_wgmma(job["instr"])
        if int(p["rows"].max()) >= M or int(p["cols"].max()) >= f.n:
            raise meta_error(f"job {i} ({job['instr']}): a kept row or column is outside the 64 x {f.n} tile")
        parts.append(p)
    for k in PARTS:
        if off[k] != arrays[k].size:
            raise meta_error(f"meta's {len(jobs)} jobs account for {off[k]} of the {arrays[k].size} stored "
                             f"{k!r} elements: every stored output needs its job in meta")
    return parts


def job_label(job: dict[str, Any]) -> str:
    return (f"{job['instr'].removeprefix('wgmma.mma_async.sync.aligned.')} {'rs' if job.get('rs') else 'ss'} "
            f"sd{int(bool(job.get('scale_d', True)))} imm{int(job.get('imm_scale_a', 1)):+d}"
            f"{int(job.get('imm_scale_b', 1)):+d} chain{int(job.get('chain', 1))}")


@replayer(KIND)
def replay_forms(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """Every job of the file through refmodel, compared bit for bit with the kept outputs."""
    parts = unpack(meta, arrays)
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
    ``wgmma``, ``wgmma_seeded`` and ``wgmma_forms``)."""
    out: set[str] = set()
    for e in entries:
        if e.get("kind") == KIND:
            out |= {j["instr"] for j in e.get("meta", {}).get("jobs", [])}
        elif e.get("kind") in ("wgmma", "wgmma_seeded") and "instr" in e.get("meta", {}):
            out.add(e["meta"]["instr"])
    return out
