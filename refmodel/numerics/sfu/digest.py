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
