"""Compiled dispatchers over the compiler spellings' models (:data:`.spelled.SPELLED`): evaluate one
spelling by its code on arrays, and recompute the recorded digests (all 2**32 inputs of a unary
spelling, the pair sets of a binary one)."""

from __future__ import annotations

import warnings

import numba
import numpy as np
from numba import literal_unroll

from .digest import key
from .spelled import SPELLED

warnings.filterwarnings("ignore", message=".*First-class function type feature is experimental")

UN_NAMES = tuple(n for n, (_, k) in SPELLED.items() if k == 1)
UN_FNS = tuple(f for f, k in SPELLED.values() if k == 1)
BI_NAMES = tuple(n for n, (_, k) in SPELLED.items() if k == 2)
BI_FNS = tuple(f for f, k in SPELLED.values() if k == 2)


@numba.njit(cache=True)
def eval_unary(code, x):
    r = np.int64(0)
    k = 0
    for f in literal_unroll(UN_FNS):
        if k == code:
            r = f(x)
        k += 1
    return r


@numba.njit(cache=True)
def eval_binary(code, a, b):
    r = np.int64(0)
    k = 0
    for f in literal_unroll(BI_FNS):
        if k == code:
            r = f(a, b)
        k += 1
    return r


@numba.njit(cache=True, parallel=True)
def map_unary(code, xs, out):
    for i in numba.prange(xs.size):
        out[i] = eval_unary(code, np.int64(xs[i]))


@numba.njit(cache=True, parallel=True)
def map_binary(code, a, b, out):
    for i in numba.prange(a.size):
        out[i] = eval_binary(code, np.int64(a[i]), np.int64(b[i]))


@numba.njit(cache=True, parallel=True)
def sweep_sums(code, chunks):
    out = np.zeros(chunks.size, np.uint64)
    for j in range(chunks.size):
        parts = np.zeros(256, np.uint64)
        for t in numba.prange(256):
            s = np.uint64(0)
            base = (np.int64(chunks[j]) << 24) + t * (1 << 16)
            for i in range(base, base + (1 << 16)):
                s += key(i, np.uint64(eval_unary(code, i) & 0xFFFFFFFF))
            parts[t] = s
        out[j] = parts.sum()
    return out


@numba.njit(cache=True, parallel=True)
def pair_sum(code, a, b, start):
    parts = np.zeros(256, np.uint64)
    n = a.size
    step = (n + 255) // 256
    for t in numba.prange(256):
        s = np.uint64(0)
        for j in range(t * step, min(n, (t + 1) * step)):
            s += key(start + j, np.uint64(eval_binary(code, np.int64(a[j]), np.int64(b[j])) & 0xFFFFFFFF))
        parts[t] = s
    return parts.sum()
