"""``wgref fuzz lib:TARGET --schedule s.json``: fuzz a library GEMM against a schedule (an inferred one,
``wgref infer … -o s.json``, or any stored :class:`refmodel.golden.Schedule` with its source).

The call's shape, dtypes and options come from the schedule's ``source`` (libraries pick kernels by
shape: a schedule says nothing about another shape, so the fuzzer never changes it).  Batch ``b`` draws
one input family (``refmodel.verify.families.matrix``, the families in turn) from
``default_rng([seed, b])``, runs the library on the GPU and ``schedule.run`` on the host, and compares
every output bit for bit (NaN payloads included).  The first mismatch is **shrunk**: with the shape
fixed, the inputs are cut to the one row of A and column of B that make the first differing output
(one dot product), then the nonzero K positions are cut down by delta debugging while the library still
disagrees with the schedule there (each try is one call of the library, 400 at most); the smallest
input is saved with both outputs to ``<out>/mismatch_batch<b>.npz``.  A split-count error whose
mismatches are rare rounding events shrinks to the one dot product but keeps most of its K terms (a
random half of them seldom still rounds differently).  The journal is the fuzzer's (``wgref merge``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from refmodel.dtypes import bits_of
from refmodel.errors import InputError
from refmodel.fileio import save_npz
from refmodel.golden.schedule import Schedule, load_schedule
from refmodel.validate import dumps_strict

from gpu.fuzz.library import LibraryFuzzReport


@dataclass
class ScheduleFuzzReport(LibraryFuzzReport):
    """A library campaign's report (``rate``: outputs compared per second) and the schedule it checked."""

    schedule: str = ""


def call_of(schedule: Schedule) -> dict:
    """The library call a schedule describes: target, M, N, K, dtype, out and options, from its source."""
    src = dict(schedule.source or {})
    missing = [k for k in ("target", "shape", "dtype", "out") if k not in src]
    if missing:
        raise InputError(f"the schedule's source must name the call it was inferred from (target, shape, dtype, "
                         f"out); it lacks {', '.join(missing)}")
    try:
        M, N, K = (int(v) for v in str(src["shape"]).lower().split("x"))
    except ValueError:
        raise InputError(f"the schedule's source shape must be MxNxK, got {str(src['shape'])[:40]!r}") from None
    opts = {}
    if src.get("use_fast_accum"):
        opts["fast_accum"] = True
    for k in ("block_k", "imp", "split_k"):
        if src.get(k) is not None:
            opts[k] = int(src[k])
    return {"target": str(src["target"]), "M": M, "N": N, "K": K, "dtype": str(src["dtype"]),
            "out": str(src["out"]), "options": opts}


def _draw(call: dict, sparse: bool, seed: int, b: int):
    from refmodel.verify.families.matrix import FAMILIES, make_inputs
    from refmodel.verify.seeded import prune_rows_2_4

    rng = np.random.default_rng([seed, b])
    fam = FAMILIES[b % len(FAMILIES)]
    a, bb = make_inputs(rng, fam, call["dtype"], call["M"], call["N"], call["K"])
    return fam, (prune_rows_2_4(a) if sparse else a), bb


def _differs(schedule: Schedule, run: Callable, a, b, i: int, j: int) -> bool:
    with np.errstate(all="ignore"):
        want = schedule.run(a, b)
    got = run(a, b)
    return bool(bits_of(np.asarray(got))[i, j] != bits_of(np.asarray(want))[i, j])


def shrink_call(schedule: Schedule, run: Callable, a, b, i: int, j: int, *, sparse: bool = False,
                max_calls: int = 200) -> tuple[np.ndarray, np.ndarray, int]:
    """The smallest inputs (same shape) on which the library's output (i, j) still differs from the
    schedule's: only row i of A and column j of B kept, then the nonzero K positions cut down by delta
    debugging (keep one part, else drop one, else split finer; 2:4 groups of four for a sparse A).
    Returns (a, b, library calls made)."""
    a = np.array(a)
    b = np.array(b)
    calls = 0
    a2 = np.zeros_like(a)
    b2 = np.zeros_like(b)
    a2[i] = a[i]
    b2[:, j] = b[:, j]
    calls += 1
    if _differs(schedule, run, a2, b2, i, j):
        a, b = a2, b2
    else:                       # the mismatch needs other rows or columns: keep the whole inputs
        return a, b, calls
    unit = 4 if sparse else 1
    live = [k for k in range(0, a.shape[1], unit) if np.any(a[i, k:k + unit] != 0) and np.any(b[k:k + unit, j] != 0)]

    def only(keep: list):
        a2, b2 = np.zeros_like(a), np.zeros_like(b)
        for k in keep:
            a2[i, k:k + unit] = a[i, k:k + unit]
            b2[k:k + unit, j] = b[k:k + unit, j]
        return a2, b2
    parts = 2                                  # ddmin: keep one part, else drop one part, else split finer
    while len(live) > 1 and calls < max_calls:
        size = -(-len(live) // parts)
        chunks = [live[s:s + size] for s in range(0, len(live), size)]
        done = False
        for keep in chunks + ([[k for k in live if k not in set(c)] for c in chunks] if parts > 2 else []):
            if calls >= max_calls:
                break
            a2, b2 = only(keep)
            calls += 1
            if _differs(schedule, run, a2, b2, i, j):
                a, b, live = a2, b2, keep
                parts = 2 if len(keep) <= size else max(parts - 1, 2)
                done = True
                break
        if not done:
            if parts >= len(live):
                break
            parts = min(len(live), 2 * parts)
    return a, b, calls


def fuzz_schedule(schedule: Schedule | str | Path, *, cases: int, seed: int = 0, seconds: Optional[float] = None,
                  out: str | Path = "wgref-fuzz", run: Optional[Callable] = None, sparse: Optional[bool] = None,
                  progress: bool = False, shrink_calls: int = 400) -> ScheduleFuzzReport:
    """Run ``cases`` calls of the schedule's library call and diff each with ``schedule.run`` (module doc).
    ``run(a, b)`` defaults to the library on the GPU (:func:`gpu.libraries.gemm_targets.make_target`)."""
    from refmodel.verify.journal import append_record, open_journal

    if not isinstance(schedule, Schedule):
        schedule = load_schedule(schedule)
    call = call_of(schedule)
    if isinstance(cases, bool) or not isinstance(cases, int) or cases < 1:
        raise InputError(f"cases must be an integer >= 1, got {cases!r:.40}")
    if run is None:
        from gpu.libraries.gemm_targets import make_target

        run = make_target(call["target"], dtype=call["dtype"], out_dtype=call["out"], **call["options"])
    sparse = bool(getattr(run, "sparse", False)) if sparse is None else sparse
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    journal = out / "journal.jsonl"
    import hashlib

    sched_id = hashlib.sha256(schedule.to_json().encode()).hexdigest()[:16]
    header = {"target": f"lib:{call['target']}@schedule:{sched_id}", "seed": int(seed), "shard": [0, 1]}
    rep = ScheduleFuzzReport(f"lib:{call['target']}", int(seed), schedule=schedule.describe()[:200])
    M, N = call["M"], call["N"]
    t_start = time.time()
    b = 0
    open_journal(journal, header, False)
    while rep.calls < cases and (seconds is None or time.time() - t_start < seconds):
        t0 = time.time()
        fam, a, bb = _draw(call, sparse, int(seed), b)
        got = np.asarray(run(a, bb))
        with np.errstate(all="ignore"):
            want = np.asarray(schedule.run(a, bb))
        bad = bits_of(got) != bits_of(want)
        rec = {"batch": b, "job": f"{call['target']} {M}x{N}x{call['K']} {call['dtype']}->{call['out']} {fam}",
               "tiles": 1, "outputs": int(bad.size), "mismatches": int(bad.sum()), "skipped": False}
        if rec["mismatches"] and rep.first is None:
            i, j = (int(v) for v in np.argwhere(bad)[0])
            sa, sb, n_calls = shrink_call(schedule, run, a, bb, i, j, sparse=sparse, max_calls=shrink_calls)
            with np.errstate(all="ignore"):
                sw = np.asarray(schedule.run(sa, sb))
            sg = np.asarray(run(sa, sb))
            path = out / f"mismatch_batch{b}.npz"
            w = 2 * got.dtype.itemsize
            nz = int(np.count_nonzero(bits_of(sa)[i] & 0x7FFF if sa.dtype.itemsize == 2 else bits_of(sa)[i]))
            rep.first = {"batch": b, "row": i, "col": j, "family": fam,
                         "library": f"0x{int(bits_of(sg)[i, j]):0{w}x}", "schedule": f"0x{int(bits_of(sw)[i, j]):0{w}x}",
                         "mismatches": rec["mismatches"], "shrink_calls": n_calls, "nonzero_k": nz, "file": str(path)}
            rep.first["minimal"] = (f"{rec['job']}: D[{i},{j}] library {rep.first['library']}, schedule "
                                    f"{rep.first['schedule']} after shrinking to {nz} nonzero A[{i}, k] "
                                    f"({n_calls} library calls)")
            save_npz(path, a=bits_of(sa), b=bits_of(sb), library=bits_of(sg), schedule=bits_of(sw),
                     config=np.array(dumps_strict({**header, "schedule": json.loads(schedule.to_json()), "batch": b,
                                                  "family": fam, "row": i, "col": j})))
            rep.repro = str(path)
            rec["mismatch_file"] = rep.repro
        rec["seconds"] = round(time.time() - t0, 4)
        append_record(journal, rec)
        rep.batches += 1
        rep.calls += 1
        rep.outputs += rec["outputs"]
        rep.mismatches += rec["mismatches"]
        rep.seconds += rec["seconds"]
        if progress:
            print(f"batch {b}: {rec['job']}: {rec['outputs']} outputs, {rec['mismatches']} mismatches", flush=True)
        b += 1
    return rep


__all__ = ["fuzz_schedule", "shrink_call", "call_of", "ScheduleFuzzReport"]
