"""Compiled dispatchers over the compiler spellings' models (:data:`.spelled.SPELLED`): evaluate one
spelling by its code on arrays, and recompute the recorded digests (all 2**32 inputs of a unary
spelling, the pair sets of a binary one)."""

from __future__ import annotations

import warnings

import numba
import numpy as np
from numba import literal_unroll

from ..._parallel import parallel_ranges
from .digest import block_sweep, key
from .spelled import SPELLED

warnings.filterwarnings("ignore", message=".*First-class function type feature is experimental")

UN_NAMES = tuple(n for n, (_, k) in SPELLED.items() if k == 1)
UN_FNS = tuple(f for f, k in SPELLED.values() if k == 1)
BI_NAMES = tuple(n for n, (_, k) in SPELLED.items() if k == 2)
BI_FNS = tuple(f for f, k in SPELLED.values() if k == 2)


# As in :mod:`.unit`: the spelling is picked once, outside the loops, and the kernels take a range
# lo .. hi of their work for refmodel._parallel.parallel_ranges.

@numba.njit(cache=True, nogil=True)
def _map_unary(lo, hi, code, xs, out):
    k = 0
    for f in literal_unroll(UN_FNS):
        if k == code:
            for i in range(lo, hi):
                out[i] = f(np.int64(xs[i]))
        k += 1


@numba.njit(cache=True, nogil=True)
def _map_binary(lo, hi, code, a, b, out):
    k = 0
    for f in literal_unroll(BI_FNS):
        if k == code:
            for i in range(lo, hi):
                out[i] = f(np.int64(a[i]), np.int64(b[i]))
        k += 1


@numba.njit(cache=True, nogil=True)
def _pair_pieces(lo, hi, code, a, b, start, step, parts):
    n = a.size
    k = 0
    for f in literal_unroll(BI_FNS):
        if k == code:
            for p in range(lo, hi):
                s = np.uint64(0)
                for j in range(p * step, min(n, (p + 1) * step)):
                    s += key(start + j, np.uint64(f(np.int64(a[j]), np.int64(b[j])) & 0xFFFFFFFF))
                parts[p] = s
        k += 1


def map_unary(code: int, xs: np.ndarray, out: np.ndarray) -> None:
    # int64 words: one compiled signature of the map (the sweeps use it too)
    parallel_ranges(_map_unary, xs.size, code, np.ascontiguousarray(xs, dtype=np.int64), out, min_piece=4096)


def map_binary(code: int, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    parallel_ranges(_map_binary, a.size, code, a, b, out, min_piece=4096)


def sweep_sums(code: int, chunks) -> np.ndarray:
    """Chunk sums of a unary spelling over inputs i = c << 24 .. (the word is i; 32-bit outputs)."""
    return block_sweep(_map_unary, code, np.ascontiguousarray(chunks, dtype=np.int64), lambda i: i, 0xFFFFFFFF)


def pair_sum(code: int, a: np.ndarray, b: np.ndarray, start: int) -> int:
    parts = np.zeros(256, np.uint64)
    step = (a.size + 255) // 256
    parallel_ranges(_pair_pieces, 256, code, a, b, start, step, parts)
    return np.uint64(parts.sum(dtype=np.uint64))
