"""Which tiles of two device arrays differ: one compiled kernel for every shape and word size.

The campaigns compared the hardware's and the port's D with ``cp.nonzero((hw != model).any(axis=1))``;
cupy JIT-compiles that reduction for each new row length, 2.3-3.1 s on the H200 the first time
(``bench/probe_slow_batches.py``), so a campaign that draws a new form every batch spent its time in
NVRTC.  :func:`differing_rows` compiles one kernel (per process; cubins cached on disk) whatever the
shape, and also takes a per-row mask of rows to skip.

The dense, sparse and layout campaigns (``gpu.fuzz.gpu_engine``, ``gpu_sparse``, ``gpu_layout``) use it;
``tests/test_gpu_compare.py`` and ``bench/probe_slow_batches.py`` check it against cupy's expression on the
device.
"""

from __future__ import annotations

import numpy as np

from gpu.kernels.runtime import compile_module, require_device
from refmodel.errors import InputError

SOURCE = r"""
// flag[r] = 1 when a row of a and b differ in some word (rows with skip[r] != 0: 0); one block per row
extern "C" __global__ void wgref_rows_differ(const u32* __restrict__ a, const u32* __restrict__ b,
                                             const unsigned char* __restrict__ skip, unsigned char* __restrict__ flag,
                                             long long words) {
  const long long r = blockIdx.x;
  const u32* pa = a + r * words;
  const u32* pb = b + r * words;
  int d = 0;
  if (skip == nullptr || skip[r] == 0)
    for (long long i = threadIdx.x; i < words; i += blockDim.x) d |= (pa[i] != pb[i]);
  d = __syncthreads_or(d);
  if (threadIdx.x == 0) flag[r] = (unsigned char)(d != 0);
}
"""

_THREADS = 256


def differing_rows(a, b, skip=None):
    """Indices (cupy int64, ascending) of the rows ``r`` where ``a[r] != b[r]`` anywhere: the leading axis
    indexes rows, the rest of each array is the row (any shape, 1, 2 or 4-byte words, same dtype and shape in
    both); ``skip`` (optional, leading-axis bool) leaves rows out.  Equal to
    ``cp.nonzero((a != b).reshape(len(a), -1).any(axis=1) & ~skip)[0]``.  numpy arrays (a host runner
    standing in for the device, as the campaigns' host tests use) are compared on the host, same result."""
    if a.shape != b.shape or a.dtype != b.dtype:
        raise InputError(f"differing_rows compares arrays of one shape and dtype, got {a.shape} {a.dtype} "
                         f"and {b.shape} {b.dtype}")
    if a.ndim == 0:
        raise InputError("differing_rows needs a leading row axis, got a 0-d array")
    rows = int(a.shape[0])
    if skip is not None and tuple(skip.shape) != (rows,):
        raise InputError(f"skip must have shape ({rows},), got {skip.shape}")
    if isinstance(a, np.ndarray):
        bad = (a != b).reshape(rows, -1).any(axis=1)
        return np.flatnonzero(bad & ~np.asarray(skip, bool) if skip is not None else bad).astype(np.int64)
    cp = require_device()
    if rows == 0:
        return cp.zeros(0, cp.int64)
    nbytes = a.size // rows * a.itemsize
    if nbytes % 4:        # pad nothing: compare as bytes widened to words
        a, b, nbytes = a.reshape(rows, -1).astype(cp.uint32), b.reshape(rows, -1).astype(cp.uint32), a.size // rows * 4
    a = cp.ascontiguousarray(a)
    b = cp.ascontiguousarray(b)
    flag = cp.empty(rows, cp.uint8)
    if skip is not None:
        skip = cp.ascontiguousarray(skip.astype(cp.uint8, copy=False))
    k = compile_module(SOURCE).get_function("wgref_rows_differ")
    k((rows,), (_THREADS,), (a, b, skip if skip is not None else cp.uint64(0), flag, cp.int64(nbytes // 4)))
    return cp.flatnonzero(flag)
