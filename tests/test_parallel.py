"""refmodel._parallel: the thread pool the nogil kernels run on, and the input prefetcher of the replays."""

import threading
import time

import numpy as np
import pytest

from refmodel import _parallel
from refmodel._parallel import MIN_WORK, parallel_ranges, prefetch


def _mark(lo, hi, seen, names):
    seen[lo:hi] += 1
    names.add(threading.current_thread().name)


@pytest.mark.parametrize("n", [1, 7, 1000, 4099])
def test_parallel_ranges_covers_every_item_once(n, monkeypatch):
    monkeypatch.setattr(_parallel, "threads", lambda: 3)
    seen = np.zeros(n, np.int64)
    names: set[str] = set()
    parallel_ranges(_mark, n, seen, names)
    assert (seen == 1).all()
    if n >= 12:
        assert any(x.startswith("refmodel") for x in names)     # the pool ran pieces


def test_small_work_runs_in_the_calling_thread(monkeypatch):
    monkeypatch.setattr(_parallel, "threads", lambda: 4)
    seen = np.zeros(10_000, np.int64)
    names: set[str] = set()
    parallel_ranges(_mark, seen.size, seen, names, work=MIN_WORK - 1)
    assert (seen == 1).all() and names == {threading.current_thread().name}


def test_an_exception_in_a_piece_is_raised_by_the_call(monkeypatch):
    monkeypatch.setattr(_parallel, "threads", lambda: 2)

    def bad(lo, hi):
        if lo <= 500 < hi:
            raise ValueError("piece 500")
    with pytest.raises(ValueError, match="piece 500"):
        parallel_ranges(bad, 1000)


def test_prefetch_keeps_the_order_and_the_items():
    assert list(prefetch(iter(range(100)), depth=3)) == list(range(100))
    assert list(prefetch([])) == []


def test_prefetch_raises_the_producers_exception_where_it_happened():
    def gen():
        yield 1
        yield 2
        raise KeyError("third")
    got = []
    with pytest.raises(KeyError, match="third"):
        for x in prefetch(gen()):
            got.append(x)
    assert got == [1, 2]


def test_closing_prefetch_early_stops_the_producer():
    made = []

    def gen():
        for i in range(10_000):
            made.append(i)
            yield i
    it = prefetch(gen(), depth=2)
    assert next(it) == 0
    it.close()
    time.sleep(0.5)
    n = len(made)
    time.sleep(0.3)
    assert len(made) == n and n < 10
