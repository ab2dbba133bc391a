"""Replay recorded hardware fixtures through refmodel and count mismatches.

Each fixture kind has one replayer ``f(meta, arrays, *, full) -> Result``.  Other
modules register theirs with :func:`replayer`.  By default (``full=True``) every stored
hardware output is checked, the 2**32 sweeps included; ``full=False`` (``wgref verify
--quick``) lets an expensive replayer check a named subset, and its Result says so
(``complete=False`` and ``scope``).

Every replayer first checks that its meta and its arrays agree (each output array has
its form in meta and each form its array), so a trimmed meta is refused, not skipped.
:func:`verify_all` also checks the tree against ``fixtures/INDEX.json``.
"""

from __future__ import annotations

import inspect
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .fixtures import FixtureError, check_index, default_root, load_arrays, load_manifest


@dataclass
class Result:
    cases: int
    mismatches: int
    details: list[str] = field(default_factory=list)
    complete: bool = True  # False: a quick replay checked a subset (``scope`` says which)
    scope: str = ""
    seconds: float = 0.0   # the replay's wall time (set by verify_all; 0 inside a replayer)
    worker: int = 0        # the process that replayed it (its pid)

    def add(self, other: "Result") -> None:
        self.cases += other.cases
        self.mismatches += other.mismatches
        self.details += other.details


def meta_error(msg: str) -> FixtureError:
    return FixtureError(msg, short="meta and arrays disagree")


def check_output_arrays(arrays: dict[str, np.ndarray], names: list[str], *, pattern: str,
                        allowed: tuple[str, ...] = ()) -> None:
    """Refuse a fixture whose output arrays (names matching ``pattern``) are not exactly
    ``names`` (the ones meta replays), or that holds arrays nobody reads."""
    outs = {k for k in arrays if re.fullmatch(pattern, k)}
    want = set(names)
    if len(names) != len(want):
        raise meta_error(f"meta names an output array twice: {sorted(names)}")
    if outs - want:
        raise meta_error(f"output arrays {sorted(outs - want)} have no form in meta: "
                         f"{len(want)} forms replayed, {len(outs)} output arrays stored")
    if want - outs:
        raise meta_error(f"meta names arrays {sorted(want - outs)} that the fixture does not hold")
    extra = set(arrays) - outs - set(allowed)
    if extra:
        raise meta_error(f"arrays {sorted(extra)} are neither inputs nor outputs of this fixture kind")


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

    forms = list(meta.get("forms") or [])
    check_output_arrays(arrays, [f"d{i}" for i in range(len(forms))], pattern=r"d\d+", allowed=("a", "b"))
    if not forms:
        raise meta_error("meta lists no cvt forms")
    a, b = arrays["a"], arrays.get("b")
    total = Result(0, 0)
    for i, instr in enumerate(forms):
        total.add(_count(cvt(instr, a, b), arrays[f"d{i}"], instr,
                         {"a": a} if b is None else {"a": a, "b": b}))
    return total


# chunks checked by the quick (non --full) sweep replay: the FP8 ranges of both signs
QUICK_CHUNKS = tuple(range(0x38, 0x48)) + tuple(range(0xB8, 0xC8)) + (0x00, 0x7F, 0x80, 0xFF)


def _progress_bar(total: int, desc: str, enabled: bool):
    if not enabled:
        return None
    import sys

    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="chunk", file=sys.stderr, leave=False)


@replayer("cvt_sweep")
def replay_cvt_sweep(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True,
                     progress: bool = False) -> Result:
    """Full: all 2**32 inputs of every form recomputed and hashed chunk by chunk against the
    hardware's chunk digests.  Quick: the chunks in :data:`QUICK_CHUNKS` only."""
    from ..numerics.cvt import cvt
    from ..numerics.sweep import CHUNK, N_CHUNKS, combine_digests, sweep_digests

    forms = list(meta.get("forms") or [])
    if not forms:
        raise meta_error("meta lists no sweep forms")
    keys = [f["key"] for f in forms]
    samples = [k for k in keys if f"sample_{k}" in arrays]
    check_output_arrays(arrays, [f"digests_{k}" for k in keys], pattern=r"digests_.+",
                        allowed=tuple(f"sample_{k}" for k in samples))
    for k in keys:
        if arrays[f"digests_{k}"].shape != (N_CHUNKS, 32):
            raise meta_error(f"digests_{k} has shape {arrays[f'digests_{k}'].shape}, expected ({N_CHUNKS}, 32)")
    chunks = list(range(N_CHUNKS)) if full else list(QUICK_CHUNKS)
    total = Result(0, 0, complete=full)
    total.scope = (f"all {len(forms)}×2^32 sweep inputs recomputed" if full else
                   f"quick: {len(chunks)} of {N_CHUNKS} chunks per sweep, {len(forms)} sweeps")
    stride, n = meta["sample_stride"], meta["sample_n"]
    xs = (np.arange(n, dtype=np.uint64) * stride % (1 << 32)).astype(np.uint32)
    bar = _progress_bar(len(chunks) * len(forms), "cvt sweeps", progress)
    try:
        for form in forms:
            key = form["key"]
            hw = [bytes(row).hex() for row in arrays[f"digests_{key}"]]
            if combine_digests(hw) != form["sha256"]:
                total.mismatches += 1
                total.details.append(f"{key}: chunk digests do not combine to the recorded sha256")
            if bar is not None:
                bar.set_postfix_str(key)
            ref: list[str] = []
            step = 16
            for s in range(0, len(chunks), step):
                part, _ = sweep_digests(form["fmt"], form["relu"], chunks[s:s + step], saturate=form["saturate"])
                ref += part
                if bar is not None:
                    bar.update(len(part))
            bad = [c for c, d in zip(chunks, ref) if d != hw[c]]
            total.cases += len(ref) * CHUNK
            total.mismatches += len(bad) * CHUNK  # a bad chunk counts all its 2**24 inputs
            if bad:
                total.details.append(f"{key}: refmodel differs from the hardware in chunks {bad[:8]}")
            if f"sample_{key}" in arrays:
                got = cvt(form["instr"], xs, xs) >> 8
                total.add(_count(got, arrays[f"sample_{key}"], key, {"x": xs}))
    finally:
        if bar is not None:
            bar.close()
    return total


@replayer("scaled_mm")
def replay_scaled_mm(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """torch._scaled_mm outputs recorded on the H200 against refmodel.scaled_mm."""
    from ..numerics.scaled_mm import scaled_mm

    cases = list(meta.get("cases") or [])
    if not cases:
        raise meta_error("meta lists no scaled_mm cases")
    check_output_arrays(arrays, [c["array"] for c in cases], pattern=r"d\d+",
                        allowed=("a", "b_nk") + tuple(x for c in cases for x in (c["scale_a"], c["scale_b"])
                                                      if isinstance(x, str)))
    total = Result(0, 0)
    for c in cases:
        sa = arrays[c["scale_a"]] if isinstance(c["scale_a"], str) else np.float32(c["scale_a"])
        sb = arrays[c["scale_b"]] if isinstance(c["scale_b"], str) else np.float32(c["scale_b"])
        d = np.ascontiguousarray(scaled_mm(arrays["a"], arrays["b_nk"], sa, sb, out_dtype=c["out_dtype"],
                                           use_fast_accum=c["use_fast_accum"]))
        got = d.view(np.int32 if d.dtype.itemsize == 4 else np.int16)
        total.add(_count(got, arrays[c["array"]], f"{c['out_dtype']} fast={c['use_fast_accum']}", {}))
    return total


PLUGINS = ("refmodel.verify.replay_wgmma", "refmodel.verify.replay_forms", "refmodel.verify.replay_layouts",
           "refmodel.verify.replay_sparse", "refmodel.verify.replay_gemm", "refmodel.verify.replay_golden",
           "refmodel.verify.replay_libraries", "refmodel.verify.replay_sfu", "refmodel.verify.replay_layers",
           "refmodel.verify.replay_mma_sync", "refmodel.verify.replay_attention")


def load_plugins() -> None:
    """Import the modules that register replayers of their own (wgmma, wgmma_forms, layouts)."""
    import importlib

    for mod in PLUGINS:
        importlib.import_module(mod)


def _call(fn: Callable[..., Result], meta, arrays, *, full: bool, progress: bool) -> Result:
    kw: dict[str, Any] = {"full": full}
    if "progress" in inspect.signature(fn).parameters:
        kw["progress"] = progress
    return fn(meta, arrays, **kw)


def _replay_entry(directory: Path, entry: dict, *, full: bool, progress: bool):
    """One manifest entry's Result, or the exception that stopped it (never raised)."""
    entry.setdefault("file", "?")
    try:
        arrays = load_arrays(directory, entry)
        fn = REPLAYERS.get(entry.get("kind"))
        if fn is None:
            raise FixtureError(f"no replayer for fixture kind {entry.get('kind')!r}", "unknown kind")
        t0 = time.perf_counter()
        res = _call(fn, entry.get("meta") or {}, arrays, full=full, progress=progress)
        res.seconds, res.worker = time.perf_counter() - t0, os.getpid()
        if res.complete and res.cases < int(entry.get("cases", 0)):
            raise FixtureError(f"replayed {res.cases} outputs, the manifest says {entry['cases']}",
                               "fewer outputs than the manifest")
        return res
    except Exception as e:  # reported as a failing row, never a traceback
        return e


def manifest_rows(root: Path, features: list[str] | None):
    """(feature, directory, entry or None, error or None) for every manifest entry under ``root``, in
    :func:`verify_all`'s order; an unreadable manifest or a malformed entry is a row with its error."""
    for man_path in sorted(root.glob("*/manifest.json")):
        directory = man_path.parent
        feature = directory.name
        if features and feature not in features:
            continue
        try:
            man = load_manifest(directory)
            entries = man["entries"]
            if not isinstance(entries, list):
                raise ValueError("'entries' is not a list")
        except Exception as e:
            yield feature, directory, {"file": "manifest.json", "provenance": {}}, (
                e if isinstance(e, FixtureError) else FixtureError(f"{man_path}: {e}", "unreadable manifest"))
            continue
        for entry in entries:
            if not isinstance(entry, dict):
                yield feature, directory, {"file": str(entry), "provenance": {}}, FixtureError(
                    f"{man_path}: an entry is not an object", "bad manifest entry")
                continue
            entry.setdefault("file", "?")
            yield feature, directory, entry, None


def verify_all(root=None, *, full: bool = True, features: list[str] | None = None, progress: bool = False,
               index: bool = True):
    """Yield (feature, entry, Result or Exception) for every fixture under root.

    First the tree is checked against INDEX.json (``index``): each problem is a row whose
    entry names the missing/changed thing.  Then every manifest entry is replayed; an
    unreadable manifest, a refused file or a replayer error is a row with an exception,
    never a traceback.  A complete replay that checks fewer outputs than the entry's
    ``cases`` is an error too.  In this process, one entry after another;
    :func:`refmodel.verify.workers.verify_all` gives the same rows from worker processes.
    """
    load_plugins()
    root = Path(root) if root is not None else default_root()
    yield from replay_rows(root, manifest_rows(root, features), features=features, full=full, progress=progress,
                           index=index)


def replay_rows(root: Path, rows, *, features: list[str] | None, full: bool, progress: bool, index: bool):
    """:func:`verify_all`'s rows in this process, from :func:`manifest_rows`' ``rows``: the index's
    problems (``index``), then each entry's Result or error."""
    if index:
        yield from index_rows(root, features)
    for feature, directory, entry, err in rows:
        yield feature, entry, err if err is not None else _replay_entry(directory, entry, full=full, progress=progress)


def index_rows(root: Path, features: list[str] | None):
    """The tree against INDEX.json: (feature, entry naming the thing, error) for each problem."""
    for feature, thing, err in check_index(root):
        if features and feature not in features and feature != "INDEX":
            continue
        yield feature, {"file": thing, "provenance": {}}, err
