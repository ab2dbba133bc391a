"""Replay recorded hardware fixtures through refmodel and count mismatches.

Each fixture kind has one replayer ``f(meta, arrays, *, full) -> Result``.  Other
modules register theirs with :func:`replayer`.  ``full=False`` lets an expensive
replayer (the 2**32 sweeps) check a cheap subset; ``wgref verify --full`` and the
test suite run everything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .fixtures import iter_entries, load_arrays


@dataclass
class Result:
    cases: int
    mismatches: int
    details: list[str] = field(default_factory=list)


REPLAYERS: dict[str, Callable[..., Result]] = {}


def replayer(kind: str):
    def deco(fn):
        REPLAYERS[kind] = fn
        return fn
    return deco


def _count(got: np.ndarray, want: np.ndarray, label: str, inputs: dict[str, np.ndarray]) -> Result:
    got = np.asarray(got).reshape(-1)
    want = np.asarray(want).reshape(-1)
    bad = np.flatnonzero(got != want)
    details = []
    for i in bad[:3]:
        ins = ", ".join(f"{k}=0x{int(v.reshape(-1)[i]):x}" for k, v in inputs.items())
        details.append(f"{label}[{i}]: {ins}: hardware 0x{int(want[i]):x}, refmodel 0x{int(got[i]):x}")
    return Result(want.size, int(bad.size), details)


@replayer("cvt")
def replay_cvt(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    from ..numerics.cvt import cvt

    a, b = arrays["a"], arrays.get("b")
    total = Result(0, 0)
    for i, instr in enumerate(meta["forms"]):
        r = _count(cvt(instr, a, b), arrays[f"d{i}"], instr,
                   {"a": a} if b is None else {"a": a, "b": b})
        total.cases += r.cases
        total.mismatches += r.mismatches
        total.details += r.details
    return total


# chunks checked by the quick (non --full) sweep replay: the FP8 ranges of both signs
QUICK_CHUNKS = tuple(range(0x38, 0x48)) + tuple(range(0xB8, 0xC8)) + (0x00, 0x7F, 0x80, 0xFF)


@replayer("cvt_sweep")
def replay_cvt_sweep(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    from ..numerics.cvt import cvt
    from ..numerics.sweep import combine_digests, sweep_digests

    total = Result(0, 0)
    stride, n = meta["sample_stride"], meta["sample_n"]
    xs = (np.arange(n, dtype=np.uint64) * stride % (1 << 32)).astype(np.uint32)
    for form in meta["forms"]:
        key = form["key"]
        hw = [bytes(row).hex() for row in arrays[f"digests_{key}"]]
        if combine_digests(hw) != form["sha256"]:
            total.mismatches += 1
            total.details.append(f"{key}: chunk digests do not combine to the recorded sha256")
        chunks = None if full else QUICK_CHUNKS
        ref, _ = sweep_digests(form["fmt"], form["relu"], chunks, saturate=form["saturate"])
        idx = range(len(hw)) if chunks is None else chunks
        bad = [c for c, d in zip(idx, ref) if d != hw[c]]
        total.cases += len(ref) << 24
        total.mismatches += len(bad) << 24  # a bad chunk counts all its 2**24 inputs
        if bad:
            total.details.append(f"{key}: refmodel differs from the hardware in chunks {bad[:8]}")
        if f"sample_{key}" in arrays:
            got = cvt(form["instr"], xs, xs) >> 8
            r = _count(got, arrays[f"sample_{key}"], key, {"x": xs})
            total.cases += r.cases
            total.mismatches += r.mismatches
            total.details += r.details
    return total


@replayer("scaled_mm")
def replay_scaled_mm(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """torch._scaled_mm outputs recorded on the H200 against refmodel.scaled_mm."""
    from ..numerics.scaled_mm import scaled_mm

    total = Result(0, 0)
    for c in meta["cases"]:
        sa = arrays[c["scale_a"]] if isinstance(c["scale_a"], str) else np.float32(c["scale_a"])
        sb = arrays[c["scale_b"]] if isinstance(c["scale_b"], str) else np.float32(c["scale_b"])
        d = np.ascontiguousarray(scaled_mm(arrays["a"], arrays["b_nk"], sa, sb, out_dtype=c["out_dtype"],
                                           use_fast_accum=c["use_fast_accum"]))
        got = d.view(np.int32 if d.dtype.itemsize == 4 else np.int16)
        r = _count(got, arrays[c["array"]], f"{c['out_dtype']} fast={c['use_fast_accum']}", {})
        total.cases += r.cases
        total.mismatches += r.mismatches
        total.details += r.details
    return total


def load_plugins() -> None:
    """Import modules that register replayers of their own (wgmma, ...), if present."""
    import importlib

    for mod in ("refmodel.verify.replay_wgmma", "refmodel.verify.replay_layouts"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError:
            pass


def verify_all(root=None, *, full: bool = False, features: list[str] | None = None):
    """Yield (feature, entry, Result or Exception) for every fixture under root."""
    load_plugins()
    for feature, directory, entry in iter_entries(root):
        if features and feature not in features:
            continue
        try:
            arrays = load_arrays(directory, entry)
            fn = REPLAYERS.get(entry["kind"])
            if fn is None:
                raise KeyError(f"no replayer for fixture kind {entry['kind']!r}")
            yield feature, entry, fn(entry["meta"], arrays, full=full)
        except Exception as e:  # reported as a failing row, never a traceback
            yield feature, entry, e
