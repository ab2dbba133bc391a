"""Float32 promotion: the CUDA-core side of a promoted GEMM, ``acc = acc + scale * D`` in float32,
with the fused operations computed exactly (``fma_f32``, ``promote``), and ``add_f32`` / the
canonical NaN of a float32 add (the split-K reductions).  ``refmodel.numerics.accumulate``
re-exports every name."""

from __future__ import annotations

import math

import numba
import numpy as np

from ..errors import DTypeError, InputError
from ..validate import _describe

#
# The CUDA-core side of a promoted GEMM: acc = acc + scale * D in float32.  The fused
# operations are computed exactly: the product is split into an unevaluated sum of two
# float64 (Dekker), added with error-free transformations, rounded to odd in float64
# and then to nearest in float32 - a single correct rounding, because float64 carries
# more than 24 + 2 bits (Boldo & Melquiond, "Emulation of FMA and correctly rounded
# sums: proved algorithms using rounding to odd", IEEE TC 2008).

PROMOTE_OPS = ("fma", "mul_add", "fma_exact", "fma_row_first")


@numba.njit(cache=True)
def _two_sum(a, b):
    """s + e == a + b exactly (Knuth), s = RN64(a + b)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


@numba.njit(cache=True)
def _split(a):
    """Veltkamp split: a == hi + lo, each with at most 26 significant bits."""
    t = 134217729.0 * a  # 2**27 + 1
    hi = t - (t - a)
    return hi, a - hi


@numba.njit(cache=True)
def _two_prod(a, b):
    """p + e == a * b exactly (Dekker), p = RN64(a * b); no overflow / underflow here."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


@numba.njit(cache=True)
def _add_round_odd(a, b):
    """a + b rounded to odd in float64: RN64, and if inexact and even, the odd neighbour."""
    s, e = _two_sum(a, b)
    if e != 0.0:
        m, _ = math.frexp(s)
        if np.int64(abs(m) * 9007199254740992.0) & 1 == 0:  # last bit of the significand
            s = np.nextafter(s, np.inf if e > 0.0 else -np.inf)
    return s


@numba.njit(cache=True)
def fma_f32(x, y, z):
    """RN32(x * y + z) with one rounding.  ``x``: a float64 with at most 48 significant
    bits (a float32, or the exact product of two); ``y``, ``z``: float32 values."""
    if not (np.isfinite(x) and np.isfinite(y) and np.isfinite(z)):
        return np.float32(x * y + z)  # IEEE NaN / Inf rules; x*y cannot overflow float64
    uh, ul = _two_prod(x, y)
    th, tl = _two_sum(z, uh)
    v = _add_round_odd(tl, ul)
    w = _add_round_odd(th, v)
    if w == 0.0:  # exact zero: x*y == -z, so uh is exact and IEEE gives the sign
        return np.float32(uh + z)
    return np.float32(w)  # RN32 of the float64 round-to-odd value: correct rounding


@numba.njit(cache=True)
def fma_f32_loop(x, y, z, out):
    """``out[i] = fma.rn.f32(x[i], y[i], z[i])`` over 1-D float32 arrays (an epilogue's fused multiply-add)."""
    for i in range(x.size):
        out[i] = fma_f32(np.float64(x[i]), y[i], z[i])


def fma_f32_array(x, y, z) -> np.ndarray:
    """``fma.rn.f32`` elementwise over float32 arrays broadcast to one shape (NaN canonical)."""
    shape = np.broadcast_shapes(np.shape(x), np.shape(y), np.shape(z))
    xs, ys, zs = (np.ascontiguousarray(np.broadcast_to(np.asarray(v, np.float32), shape)).ravel() for v in (x, y, z))
    out = np.empty(xs.size, np.float32)
    fma_f32_loop(xs, ys, zs, out)
    return canonical_nan_f32(out.reshape(shape))


_NAN32 = np.array([0x7FFFFFFF], dtype=np.uint32).view(np.float32)  # canonical f32 NaN


def canonical_nan_f32(x: np.ndarray) -> np.ndarray:
    """float32 array with every NaN replaced by the canonical 0x7FFFFFFF, as the GPU's f32
    arithmetic (add.f32, fma.rn.f32) writes it (numpy keeps payloads; x86 writes 0xFFC00000
    for Inf - Inf)."""
    x = np.asarray(x, np.float32)
    return np.where(np.isnan(x), _NAN32[0], x).astype(np.float32)


def add_f32(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``add.rn.f32`` elementwise: the float32 sum, NaN canonical."""
    with np.errstate(all="ignore"):
        return canonical_nan_f32(np.asarray(x, np.float32) + np.asarray(y, np.float32))


def mul_f32(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``mul.rn.f32`` elementwise: the float32 product, NaN canonical."""
    with np.errstate(all="ignore"):
        return canonical_nan_f32(np.asarray(x, np.float32) * np.asarray(y, np.float32))


@numba.njit(cache=True)
def promote_one(acc, part, sa, sb, op):
    """acc + sa * sb * part in float32 (all float32 values) under promote op
    0 "fma": RN32(RN32(sa*sb) * part + acc); 1 "mul_add": RN32(acc + RN32(RN32(sa*sb) * part));
    2 "fma_exact": RN32(sa*sb*part + acc); 3 "fma_row_first": RN32(sb * RN32(sa*part) + acc) (cuBLASLt's
    1x128 x 1x128 block-scaled kernels, fixtures/layers).  A NaN result is the canonical 0x7FFFFFFF
    (what NVIDIA's FP32 units write; a lead)."""
    a = np.float64(sa)
    b = np.float64(sb)
    p = np.float64(part)
    z = np.float64(acc)
    if op == 2:
        r = fma_f32(a * b, p, z)  # a*b exact in float64 (48 bits)
    elif op == 3:
        t = np.float32(a * p)  # RN32 of the exact product (a*p exact in float64)
        r = fma_f32(np.float64(t), np.float32(sb), np.float32(acc))
    else:
        s = np.float64(np.float32(a * b))  # RN32 of the exact product
        if op == 0:
            r = fma_f32(s, p, z)
        else:
            t = np.float64(np.float32(s * p))  # s*p exact in float64, then RN32
            r = np.float32(z + t)  # RN64 then RN32 of a sum of two float32 is RN32 (53 >= 2*24 + 2)
    if np.isnan(r):
        return _NAN32[0]
    return r


@numba.njit(cache=True, parallel=True, nogil=True)
def _promote_kernel(acc, part, sa, sb, op):
    R, N = acc.shape
    for i in numba.prange(R):
        for j in range(N):
            acc[i, j] = promote_one(acc[i, j], part[i, j], sa[i], sb[j], op)


def promote(acc: np.ndarray, partial: np.ndarray, scale_rows, scale_cols, op: str = "fma") -> np.ndarray:
    """One promotion step in place: ``acc += scale_rows[:, None] * scale_cols[None, :] *
    partial`` in float32 with the rounding of ``op`` (:func:`promote_one`).  Returns ``acc``."""
    if op not in PROMOTE_OPS:
        raise InputError(f"promote_op must be one of {', '.join(PROMOTE_OPS)}, got {_describe(op)}")
    if acc.dtype != np.float32 or acc.ndim != 2 or not acc.flags.c_contiguous:
        raise DTypeError(f"acc must be a C-contiguous 2-D float32 array, got {acc.dtype} {acc.shape}")
    R, N = acc.shape
    sa = np.ascontiguousarray(np.broadcast_to(np.asarray(scale_rows, np.float32), (R,)))
    sb = np.ascontiguousarray(np.broadcast_to(np.asarray(scale_cols, np.float32), (N,)))
    part = np.ascontiguousarray(np.broadcast_to(np.asarray(partial, np.float32), (R, N)))
    _promote_kernel(acc, part, sa, sb, PROMOTE_OPS.index(op))
    return acc
