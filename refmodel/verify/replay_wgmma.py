"""Replayer of the wgmma fixtures (kind ``wgmma``) recorded by gpu/record/wgmma.py.

Arrays: ``a`` (S, 64, K*chain), ``b`` (S, K*chain, N), ``c`` and ``d`` (S, 64, N), all
raw bits; ``d`` is the hardware's result.  Meta: instr, rs, scale_d, imm_scale_a,
imm_scale_b, chain.  Extra arrays (``family``, ``d_model``) are ignored.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .case import WgmmaCase
from ..dtypes import bits_of, element_dtype
from .replay import Result, _count, check_output_arrays, meta_error, replayer
from ..wgmma_forms import M, parse_wgmma


def check_wgmma_arrays(meta: dict[str, Any], arrays: dict[str, np.ndarray], prefix: str = "") -> None:
    """The arrays ``{prefix}a/b/c/d`` have the shapes meta's form, chain and tile count imply."""
    f = parse_wgmma(meta["instr"])
    chain = int(meta.get("chain", 1))
    for k in "abcd":
        if prefix + k not in arrays:
            raise meta_error(f"{meta['instr']}: array {prefix + k!r} is missing")
    s = arrays[prefix + "d"].shape[:-2]
    want = {"a": s + (M, f.k * chain), "b": s + (f.k * chain, f.n), "c": s + (M, f.n), "d": s + (M, f.n)}
    for k, shp in want.items():
        if arrays[prefix + k].shape != shp:
            raise meta_error(f"{meta['instr']} chain {chain}: array {prefix + k!r} has shape "
                             f"{arrays[prefix + k].shape}, meta implies {shp}")


def case_from_fixture(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> WgmmaCase:
    f = parse_wgmma(meta["instr"])
    return WgmmaCase(meta["instr"], arrays["a"].view(element_dtype(f.dtype_a)),
                     arrays["b"].view(element_dtype(f.dtype_b)),
                     arrays["c"].view(element_dtype(f.dtype_d)), rs=bool(meta.get("rs", False)),
                     scale_d=bool(meta.get("scale_d", True)), imm_scale_a=int(meta.get("imm_scale_a", 1)),
                     imm_scale_b=int(meta.get("imm_scale_b", 1)), chain=int(meta.get("chain", 1)))


@replayer("wgmma")
def replay_wgmma(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    if "instr" not in meta:
        raise meta_error("meta names no instruction")
    check_output_arrays(arrays, ["d"], pattern="d", allowed=("a", "b", "c", "family", "d_model"))
    check_wgmma_arrays(meta, arrays)
    case = case_from_fixture(meta, arrays)
    got_bits = bits_of(case.model())
    return _count(got_bits, arrays["d"], meta["instr"].split(".")[4] + " " + meta["instr"].split(".", 5)[-1],
                  {})


# ----------------------------------------------------------------------------- seeds + digests

#: rows of each tile whose outputs a ``wgmma_seeded`` fixture keeps raw (one per warp of the warpgroup)
SEEDED_ROWS = (0, 21, 42, 63)


def to_seeded(meta: dict[str, Any], tiles, a: np.ndarray, b: np.ndarray, c: np.ndarray,
              d: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(arrays, meta) of a ``wgmma_seeded`` fixture for a job's recorded ``tiles`` (indices among the tiles its
    seed draws) with their raw-bit inputs and hardware outputs ``a, b, c, d``."""
    import hashlib

    ins = b"".join(np.ascontiguousarray(x).tobytes() for x in (a, b, c))
    d = np.ascontiguousarray(d)
    return ({"d_rows": np.ascontiguousarray(d[:, list(SEEDED_ROWS)])},
            {**meta, "tiles": [int(t) for t in tiles], "rows": list(SEEDED_ROWS),
             "inputs_sha256": hashlib.sha256(ins).hexdigest(),
             "d_sha256": hashlib.sha256(np.ascontiguousarray(d, d.dtype.newbyteorder("<")).tobytes()).hexdigest()})


def seeded_inputs(meta: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Raw-bit (a, b, c, family index) of the recorded tiles of a ``wgmma_seeded`` job: the job's inputs rebuilt
    from its seed (refmodel.verify.jobs.make_inputs, as gpu.record.wgmma drew them), tiles ``meta['tiles']``."""
    import hashlib

    from ..dtypes import raw_bits
    from .jobs import Job, make_inputs

    job = Job(meta["instr"], rs=bool(meta["rs"]), scale_d=bool(meta["scale_d"]), imm_scale_a=int(meta["imm_scale_a"]),
              imm_scale_b=int(meta["imm_scale_b"]), chain=int(meta["chain"]))
    a, b, c, idx, names = make_inputs(job, np.random.default_rng(meta["seed"]), int(meta["tiles_per_family"]))
    if list(names) != list(meta["families"]):
        raise meta_error(f"{meta['instr']}: the input families are now {list(names)}, the recording drew "
                         f"{meta['families']}: the generator changed")
    sel = np.asarray(meta["tiles"], np.int64)
    if sel.size == 0 or sel.min() < 0 or sel.max() >= idx.size:
        raise meta_error(f"{meta['instr']}: recorded tiles {meta['tiles']} are not among the {idx.size} drawn")
    f = job.form
    bits = [np.ascontiguousarray(raw_bits(x[sel], t)) for x, t in ((a, f.dtype_a), (b, f.dtype_b), (c, f.dtype_d))]
    h = hashlib.sha256(b"".join(x.tobytes() for x in bits)).hexdigest()
    if h != meta["inputs_sha256"]:
        raise meta_error(f"{meta['instr']}: the inputs rebuilt from the seed differ from the recorded ones "
                         "(inputs sha256): the generator changed")
    return bits[0], bits[1], bits[2], idx[sel]


@replayer("wgmma_seeded")
def replay_wgmma_seeded(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """A wgmma job stored as seeds + digests: the inputs rebuilt from the seed, refmodel's D compared with the
    hardware's kept rows (``d_rows``, raw bits, NaN payloads included) and with the sha256 of the hardware's
    whole D."""
    import hashlib

    if set(arrays) != {"d_rows"}:
        raise meta_error(f"a wgmma_seeded fixture holds exactly 'd_rows', this one {sorted(arrays)}")
    a, b, c, _ = seeded_inputs(meta)
    f = parse_wgmma(meta["instr"])
    rows = list(meta["rows"])
    if arrays["d_rows"].shape != (a.shape[0], len(rows), f.n):
        raise meta_error(f"{meta['instr']}: d_rows has shape {arrays['d_rows'].shape}, meta implies "
                         f"{(a.shape[0], len(rows), f.n)}")
    case = case_from_fixture(meta, {"a": a, "b": b, "c": c})
    got = np.ascontiguousarray(bits_of(case.model()))
    label = meta["instr"].split(".")[4] + " " + meta["instr"].split(".", 5)[-1]
    total = _count(got[:, rows], arrays["d_rows"], label + " kept rows", {})
    rest = got.size - arrays["d_rows"].size
    ok = hashlib.sha256(np.ascontiguousarray(got, got.dtype.newbyteorder("<")).tobytes()).hexdigest() == meta["d_sha256"]
    total.add(Result(rest, 0 if ok else rest, [] if ok else [f"{label}: the whole D's sha256 differs from the hardware's"]))
    return total
