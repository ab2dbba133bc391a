"""Run a compiled, GIL-free kernel over ranges of work items on several threads (the ground of
refmodel).

refmodel's hot kernels are ``numba.njit(nogil=True)`` functions of a range ``lo .. hi`` of work items
(tiles of rows, blocks, chunks of inputs).  :func:`parallel_ranges` splits ``0 .. n`` into pieces and
hands them to a pool of Python threads, which run the kernels at once because the kernels release
the GIL.  This replaces ``numba.njit(parallel=True)`` / ``prange``: the same speed on many cores, but
a kernel compiles two to three times faster without numba's parallel transforms, which matters on a
fresh checkout (every kernel compiles once) and on small machines.  The pool has as many threads as
numba would use (``NUMBA_NUM_THREADS`` / :func:`numba.set_num_threads`); pieces go to whichever
thread is free, so a busy machine slows one piece, not the whole call.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")

_POOL: ThreadPoolExecutor | None = None
_POOL_SIZE = 0
_LOCK = threading.Lock()


def threads() -> int:
    """How many threads refmodel's kernels use: numba's thread count (``NUMBA_NUM_THREADS``,
    :func:`numba.set_num_threads`)."""
    import numba

    return max(1, int(numba.get_num_threads()))


def _pool(n: int) -> ThreadPoolExecutor:
    global _POOL, _POOL_SIZE
    with _LOCK:
        if _POOL is None or _POOL_SIZE != n:
            if _POOL is not None:
                _POOL.shutdown(wait=False)
            _POOL = ThreadPoolExecutor(max_workers=n, thread_name_prefix="refmodel")
            _POOL_SIZE = n
        return _POOL


#: below this much work (about one element operation a unit) a call runs in the calling thread: handing
#: pieces to the pool costs tens of microseconds
MIN_WORK = 1 << 17


def parallel_ranges(kernel: Callable[..., Any], n: int, *args: Any, pieces_per_thread: int = 4,
                    min_piece: int = 1, work: int | None = None) -> None:
    """Call ``kernel(lo, hi, *args)`` for pieces ``lo .. hi`` covering ``0 .. n`` once each, on up to
    :func:`threads` threads (in this thread alone when one piece does).  Pieces hold at least
    ``min_piece`` items; about ``pieces_per_thread`` pieces a thread; ``work`` (the whole call's
    element operations, if known) below :data:`MIN_WORK` runs in this thread.  The kernel must write
    disjoint outputs for disjoint ranges; an exception in any piece is raised here."""
    if n <= 0:
        return
    t = threads()
    k = max(1, min(n // max(1, min_piece), t * pieces_per_thread))
    if t == 1 or k == 1 or (work is not None and work < MIN_WORK) or threading.current_thread().name.startswith("refmodel"):
        kernel(0, n, *args)
        return
    bounds = [n * i // k for i in range(k + 1)]
    futures = [_pool(t).submit(kernel, lo, hi, *args) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]
    for f in futures:
        f.result()


def prefetch(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """``items`` in order, produced up to ``depth`` ahead on another thread: a replay that rebuilds its
    inputs (numpy's random generators release the GIL) overlaps that work with the model's kernels.
    An exception in the producer is raised here, at the item where it happened; closing this iterator
    early stops the producer at its next item."""
    q: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()
    done = object()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put((True, item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put((True, done))
        except BaseException as e:  # handed to the consumer
            q.put((False, e))

    th = threading.Thread(target=produce, name="prefetch", daemon=True)
    th.start()
    try:
        while True:
            ok, item = q.get()
            if not ok:
                raise item
            if item is done:
                return
            yield item
    finally:
        stop.set()
