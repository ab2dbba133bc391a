"""A probe of the compile flags: float32 fma, mul, ``x * y``, add and a double -> float conversion whose
results are float32 subnormals, which a build with ``-ftz=true`` (cupy's ``RawModule(code=...)``) flushes
to zero.  One kernel, its inputs and the IEEE results, for ``tests/test_gpu_runtime.py`` and
``bench/ftz_probe.py``."""

from __future__ import annotations

import numpy as np

OPS = ("__fmaf_rn", "__fmul_rn", "x * y", "__fadd_rn", "(float)double")   # out[5 i + j], j in this order

SOURCE = r"""
extern "C" __global__ void wgref_float_ops(const float* x, const float* y, const float* z, const double* w, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[5 * i + 0] = __fmaf_rn(x[i], y[i], z[i]);
  out[5 * i + 1] = __fmul_rn(x[i], y[i]);
  out[5 * i + 2] = x[i] * y[i];
  out[5 * i + 3] = __fadd_rn(z[i], -0.75f * z[i]);
  out[5 * i + 4] = (float)w[i];
}
"""


def inputs(n: int = 4096, seed: int = 7, subnormal_operands: int = 0):
    """(x, y, z, w): float32 x, y near 2^-70 (their products are subnormal), z subnormal, float64 w in
    2^-152 .. 2^-120; the first ``subnormal_operands`` x are subnormal themselves."""
    rng = np.random.default_rng(seed)
    x = (rng.uniform(1, 2, n) * 2.0 ** rng.integers(-80, -60, n)).astype(np.float32)
    y = (rng.uniform(1, 2, n) * 2.0 ** rng.integers(-80, -60, n)).astype(np.float32)
    z = (rng.uniform(-1, 1, n) * 2.0 ** -128).astype(np.float32)
    x[:subnormal_operands] = np.float32(2.0 ** -140) * np.arange(1, subnormal_operands + 1, dtype=np.float32)
    w = rng.uniform(1, 2, n) * 2.0 ** rng.integers(-152, -120, n)
    return x, y, z, w


def ieee(x, y, z, w) -> np.ndarray:
    """(n, 5) uint32: the IEEE float32 bits of each operation (refmodel.fma_f32 for the fused one)."""
    import refmodel

    fma = np.array([refmodel.fma_f32(a, b, c) for a, b, c in zip(x, y, z)], np.float32)   # one rounding
    return np.stack([fma, x * y, x * y, z + np.float32(-0.75) * z, w.astype(np.float32)], 1).view(np.uint32)


def run(module, x, y, z, w) -> np.ndarray:
    """(n, 5) uint32: the device's bits, from ``module`` (a compiled :data:`SOURCE`)."""
    import cupy as cp

    n = len(x)
    out = cp.zeros(5 * n, cp.float32)
    module.get_function("wgref_float_ops")(((n + 127) // 128,), (128,),
                                           (cp.asarray(x), cp.asarray(y), cp.asarray(z), cp.asarray(w), out,
                                            np.int32(n)))
    return cp.asnumpy(out).reshape(n, 5).view(np.uint32)
