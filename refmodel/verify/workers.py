"""``wgref verify`` on several processes: the manifest entries replayed by a pool of worker processes.

One replay is partly single-threaded Python and numpy (input generation from seeds, descriptor
addressing, sha256 of the outputs) and partly numba kernels on :mod:`refmodel._parallel`'s threads;
one process leaves cores idle for much of the run, and on a fresh checkout numba compiles one kernel
at a time.  :func:`verify_parallel` hands the entries to ``jobs`` spawned workers (the kinds with
kernels of their own together on one worker, :data:`SEPARATE_KERNELS`; the rest longest first,
:data:`COST_HINTS`), and yields the rows in :func:`refmodel.verify.replay.verify_all`'s order,
so the report is the same as a serial run's.  Each worker replays whole entries with the same code
as the serial path (:func:`refmodel.verify.replay._replay_entry`); nothing is skipped or sampled.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any, Iterator

from .fixtures import FixtureError

#: rough replay seconds of a fixture kind on a 2-core machine (bench/bench_verify.py): the pool
#: starts the long ones first so that no worker is left with a long entry at the end
COST_HINTS: dict[str, float] = {
    "cvt_sweep": 25, "device_model_layout": 22, "sfu_forms": 16, "layer_calls": 13, "sfu_spellings": 9,
    "inferred_schedule": 7, "device_model_jobs": 6, "cusparselt_calls": 5, "sfu_pairs": 5,
    "device_model_sparse": 4,
}


#: kinds whose compiled kernels no other replay uses (the cvt sweep's encoder, the SFU models): one
#: worker replays them together, first, while the others compile the GEMM kernels (the chain, decode,
#: seeded inputs) once and share them through numba's cache, so a cold run compiles nothing twice
SEPARATE_KERNELS = ("cvt_sweep", "cvt", "sfu_forms", "sfu_spellings", "sfu_pairs")


#: below this many estimated replay seconds the entries replay in this process (a small fixture tree)
MIN_PARALLEL_SECONDS = 8.0


class ReplayError(Exception):
    """An error a worker's replay ended with, rebuilt in the parent (its class name and message)."""

    def __init__(self, message: str, short: str | None = None):
        super().__init__(message)
        self.short = short or message


def default_jobs() -> int:
    """Worker processes ``wgref verify`` uses: the CPUs this process may run on, at most 4."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(4, n))


def _init(settings: dict[str, Any]) -> None:
    """A worker's start: numba's thread count, the parent's replay switches, the replayers."""
    import numba

    numba.set_num_threads(max(1, min(int(settings["threads"]), numba.config.NUMBA_NUM_THREADS)))
    from . import replay_sfu
    from .replay import load_plugins

    replay_sfu.EXHAUSTIVE = settings["sfu_exhaustive"]
    load_plugins()


def _replay_task(directory: str, entry: dict, full: bool):
    """One entry's Result, or (class name, message, short, is a FixtureError) of its error."""
    from .replay import _replay_entry

    res = _replay_entry(Path(directory), entry, full=full, progress=False)
    if isinstance(res, Exception):
        return (type(res).__name__, str(res), getattr(res, "short", None), isinstance(res, FixtureError))
    return res


def _replay_tasks(tasks: list[tuple[str, dict]], full: bool) -> list:
    """:func:`_replay_task` for several entries in turn (one worker, one submission)."""
    return [_replay_task(directory, entry, full) for directory, entry in tasks]


def _rebuild(out) -> Any:
    if not isinstance(out, tuple):
        return out
    name, message, short, fixture = out
    if fixture and name == "FixtureError":
        return FixtureError(message, short)
    cls = type(name, (FixtureError if fixture else ReplayError,), {})
    return cls(message, short)


def _bar(total: int, enabled: bool):
    if not enabled:
        return None
    import sys

    from tqdm import tqdm

    return tqdm(total=total, desc="fixtures", unit="fixture", file=sys.stderr, leave=False)


def verify_all(root=None, *, full: bool = True, features: list[str] | None = None, progress: bool = False,
               index: bool = True, jobs: int = 1, threads: int | None = None,
               min_seconds: float = MIN_PARALLEL_SECONDS) -> Iterator[tuple[str, dict, Any]]:
    """:func:`refmodel.verify.replay.verify_all`'s rows (feature, entry, Result or Exception), the
    entries replayed by ``jobs`` worker processes (1: in this process; ``threads``: numba threads of
    each, see :func:`verify_parallel`); the same rows, in the same order, either way
    (``wgref verify --jobs``)."""
    from .fixtures import default_root
    from .replay import load_plugins, verify_all as verify_serial

    if jobs <= 1:
        yield from verify_serial(root, full=full, features=features, progress=progress, index=index)
        return
    load_plugins()
    root = Path(root) if root is not None else default_root()
    yield from verify_parallel(root, full=full, features=features, progress=progress, index=index, jobs=jobs,
                               threads=threads, min_seconds=min_seconds)


def verify_parallel(root: Path, *, full: bool, features: list[str] | None, progress: bool, index: bool,
                    jobs: int, threads: int | None = None,
                    min_seconds: float = MIN_PARALLEL_SECONDS) -> Iterator[tuple[str, dict, Any]]:
    """:func:`refmodel.verify.replay.verify_all`'s rows, the entries replayed by ``jobs`` worker
    processes with ``threads`` numba threads each (default: the CPUs over the workers, at least 1);
    in this process when the entries' estimated seconds (:data:`COST_HINTS`, 0.5 for other kinds)
    are below ``min_seconds`` (a worker takes about a second to start)."""
    from . import replay_sfu
    from .replay import index_rows, manifest_rows

    rows = list(manifest_rows(root, features))
    todo = [i for i, r in enumerate(rows) if r[3] is None]
    estimate = sum(COST_HINTS.get(str(rows[i][2].get("kind")), 0.5) for i in todo)
    if len(todo) < 2 or estimate < min_seconds:    # too little to share out: starting workers costs more
        from .replay import replay_rows

        yield from replay_rows(root, rows, features=features, full=full, progress=progress, index=index)
        return
    if threads is None:
        threads = max(1, default_jobs() // max(1, jobs)) if jobs <= default_jobs() else 1
    settings = {"threads": threads, "sfu_exhaustive": bool(replay_sfu.EXHAUSTIVE)}
    futures: dict[int, tuple[Future, int | None]] = {}
    bar = _bar(len(todo), progress)
    ex = ProcessPoolExecutor(max_workers=max(1, min(jobs, len(todo))), mp_context=multiprocessing.get_context("spawn"),
                             initializer=_init, initargs=(settings,)) if todo else None
    try:
        kind = lambda i: str(rows[i][2].get("kind"))
        group = [i for i in todo if kind(i) in SEPARATE_KERNELS] if jobs > 1 else []
        if group:
            fut = ex.submit(_replay_tasks, [(str(rows[i][1]), rows[i][2]) for i in group], full)
            if bar is not None:
                fut.add_done_callback(lambda _f: bar.update(len(group)))
            futures.update((i, (fut, n)) for n, i in enumerate(group))
        for i in sorted(set(todo) - set(group), key=lambda i: (-COST_HINTS.get(kind(i), 1.0), i)):
            _, directory, entry, _ = rows[i]
            fut = ex.submit(_replay_task, str(directory), entry, full)
            futures[i] = (fut, None)
            if bar is not None:
                fut.add_done_callback(lambda _f: bar.update(1))
        if index:   # the tree's digests while the workers replay
            yield from index_rows(root, features)
        for i, (feature, _directory, entry, err) in enumerate(rows):
            if err is not None:
                yield feature, entry, err
                continue
            try:
                fut, n = futures[i]
                res = _rebuild(fut.result() if n is None else fut.result()[n])
            except Exception as e:     # a worker died (killed, out of memory): this entry is not checked
                res = ReplayError(f"the worker replaying this fixture stopped: {type(e).__name__}: {e}",
                                  "worker stopped")
            yield feature, entry, res
    finally:
        if bar is not None:
            bar.close()
        if ex is not None:
            ex.shutdown(wait=True, cancel_futures=True)
