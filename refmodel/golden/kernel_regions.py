"""Where the run-time-dispatching libraries switch kernels: the recorded kernel map, and the warning
a golden model gives when it is asked for a shape in (or next to) a region where the library was
seen running a split-K or segment-K kernel whose schedule the call does not name.

The map (:mod:`refmodel.golden.kernel_regions_data`, generated from fixtures/kernel_map by
``tools/kernel_regions.py``) holds, for a grid of (M, N, K), the class of kernel torch 2.11 picked
on the H200: 0 plain (one K chain), 1 segment-K, 2 split-K.  A shape between grid points takes the
worst class of the grid points around it; a shape outside the grid is "not recorded".
"""

from __future__ import annotations

import bisect
import warnings
from typing import Optional

from ..errors import InputError
from .kernel_regions_data import CLASSES, GRID_K, GRID_MN, VERSIONS

CLASS_NAMES = {0: "plain", 1: "segment-K", 2: "split-K"}
OPS = tuple(CLASSES)


class ScheduleWarning(UserWarning):
    """A golden model returned the bits of its default schedule for a call where the library is known
    to switch kernels (split-K, segment-K): pass ``kernel=`` (the name torch's profiler shows) or
    ``schedule=`` (a stored or inferred :class:`refmodel.golden.Schedule`) to get verified bits."""


def kernel_names(kernel) -> list[str]:
    """The kernel name, or list of names, that torch's profiler showed, as a non-empty list of strings."""
    names = [kernel] if isinstance(kernel, str) else list(kernel) if isinstance(kernel, (list, tuple)) else None
    if not names or not all(isinstance(k, str) for k in names):
        from ..validate import _describe

        raise InputError(f"kernel must be the kernel name (or the list of names) torch's profiler shows, "
                         f"got {_describe(kernel)}")
    return names


def _around(grid: tuple, v: int) -> tuple[list[int], bool]:
    """Indices of the grid values bracketing ``v``, and whether ``v`` lies inside the grid's range."""
    i = bisect.bisect_left(grid, v)
    if i < len(grid) and grid[i] == v:
        return [i], True
    if i == 0:
        return [0], False
    if i == len(grid):
        return [len(grid) - 1], False
    return [i - 1, i], True


def region(op: str, M: int, N: int, K: int) -> tuple[Optional[int], bool]:
    """(worst kernel class around (M, N, K) in the recorded map, whether the shape is inside the grid)."""
    codes = CLASSES[op]
    nm, nk = len(GRID_MN), len(GRID_K)
    mi, min_ = _around(GRID_MN, M)
    ni, nin = _around(GRID_MN, N)
    ki, kin = _around(GRID_K, K)
    worst = max(int(codes[(a * nm + b) * nk + c]) for a in mi for b in ni for c in ki)
    return worst, (min_ and nin and kin)


def warn_if_switching(op: str, M: int, N: int, K: int, library: str, stacklevel: int = 3) -> None:
    """Warn (:class:`ScheduleWarning`) when ``op`` at (M, N, K) is in or next to a recorded split-K /
    segment-K region, or outside the recorded grid."""
    worst, inside = region(op, M, N, K)
    where = f"{M}x{N}x{K}"
    if not inside:
        warnings.warn(f"{library} at {where} is outside the kernel map recorded on the H200 "
                      f"(M, N in {GRID_MN[0]}..{GRID_MN[-1]}, K in {GRID_K[0]}..{GRID_K[-1]}), where it may run a "
                      f"split-K kernel: these bits assume one K chain; pass kernel= or schedule= to know",
                      ScheduleWarning, stacklevel=stacklevel)
    elif worst:
        warnings.warn(f"{library} runs {CLASS_NAMES[worst]} kernels at or next to {where} (recorded on the H200, "
                      f"{VERSIONS.get('torch', '?')}): these bits assume one K chain; pass kernel= (from the "
                      f"profiler) or schedule= to know", ScheduleWarning, stacklevel=stacklevel)


__all__ = ["ScheduleWarning", "kernel_names", "region", "warn_if_switching", "OPS", "CLASS_NAMES"]
