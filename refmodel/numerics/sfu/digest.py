"""Order-free digests of a function's outputs over all inputs, identical on the GPU and the CPU.

For an input index ``i`` (the input word itself for the 32-bit sweeps, the high word for the f64
sweeps) and its output word ``o`` (zero-extended to 64 bits)::

    key(i, o)       = mix64(o + mix64(i))            (mod 2**64)
    chunk_sum[c]    = sum of key(i, out[i]) for i in chunk c = i >> 24   (mod 2**64)

``mix64`` is SplitMix64's finaliser, a bijection of 64-bit words, so a single wrong output always
changes its chunk's sum; several wrong outputs cancel with probability about 2**-64.  The GPU adds the
keys in any order (atomics); the sum does not care.
"""

from __future__ import annotations

import numba
import numpy as np

CHUNK_BITS = 24
CHUNK = 1 << CHUNK_BITS

#: the same finaliser as CUDA C++, for the kernels (gpu.kernels.sfu pastes it)
MIX64_CUDA = r"""
__device__ __forceinline__ u64 wgref_mix64(u64 z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
"""


@numba.njit(cache=True)
def mix64(z):
    z = np.uint64(z)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True)
def key(i, o):
    return mix64(np.uint64(o) + mix64(np.uint64(i)))


@numba.njit(cache=True)
def keys_sum(index, out):
    """Sum of key(index[j], out[j]) (mod 2**64)."""
    s = np.uint64(0)
    for j in range(out.size):
        s += key(index[j], out[j])
    return s


def digest_array(out: np.ndarray, start: int = 0) -> int:
    """The digest (one chunk sum, as a Python int) of ``out`` for inputs ``start .. start+len-1``."""
    o = np.ascontiguousarray(out).reshape(-1)
    o = o.view(np.uint64) if o.dtype.itemsize == 8 else o.astype(np.uint64)
    idx = np.arange(start, start + o.size, dtype=np.uint64)
    return int(keys_sum(idx, o))


@numba.njit(cache=True, nogil=True)
def keys_sum_from(start, out, mask):
    """Sum of key(start + j, uint64(out[j]) & mask) (mod 2**64): the digest of the int64 outputs of
    inputs start, start + 1, ... (``mask``: the output word's bits)."""
    s = np.uint64(0)
    for j in range(out.size):
        s += key(start + j, np.uint64(out[j]) & mask)
    return s


def block_sweep(map_kernel, code: int, chunks: np.ndarray, words_of, mask: int) -> np.ndarray:
    """Chunk sums over inputs i = c << 24 .. (c + 1) << 24 for each chunk c, 2**16 inputs at a time:
    ``words_of(i)`` the operand words (int64) of inputs ``i``, ``map_kernel(lo, hi, code, words, out)``
    the model (the same compiled map the API uses: one compile serves both), then the keys."""
    from ..._parallel import parallel_ranges

    chunks = np.ascontiguousarray(chunks, dtype=np.int64)
    parts = np.zeros(chunks.size * 256, np.uint64)
    m = np.uint64(mask)

    def pieces(lo: int, hi: int) -> None:
        out = np.empty(1 << 16, np.int64)
        ar = np.arange(1 << 16, dtype=np.int64)
        for p in range(lo, hi):
            base = (int(chunks[p >> 8]) << 24) + (p & 255) * (1 << 16)
            words = np.ascontiguousarray(words_of(ar + base), dtype=np.int64)
            map_kernel(0, words.size, code, words, out)
            parts[p] = keys_sum_from(np.int64(base), out, m)

    parallel_ranges(pieces, parts.size)
    return parts.reshape(chunks.size, 256).sum(axis=1, dtype=np.uint64)
