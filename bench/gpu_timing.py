"""Timing of GPU work shared by the benches (``python bench/<name>.py`` puts bench/ on sys.path).

Both helpers call ``f`` once first (warm: compiled, attributes set, caches filled) and then time ``reps`` calls.
"""

from __future__ import annotations

import time


def median_event_seconds(cp, f, reps: int) -> tuple[float, object]:
    """(median seconds of one call between two CUDA events, the last call's result)."""
    out = f()
    cp.cuda.runtime.deviceSynchronize()
    ts = []
    for _ in range(reps):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        out = f()
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e) / 1e3)
    return sorted(ts)[len(ts) // 2], out


def mean_wall_seconds(cp, f, reps: int) -> float:
    """Mean wall-clock seconds of one call over ``reps`` back-to-back calls, synchronised at both ends."""
    f()
    cp.cuda.runtime.deviceSynchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        f()
    cp.cuda.runtime.deviceSynchronize()
    return (time.perf_counter() - t0) / reps
