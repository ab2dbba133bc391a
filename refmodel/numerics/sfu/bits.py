"""Bit casts and IEEE arithmetic for the SFU sequences, as numba intrinsics and helpers.

The sequences around MUFU (``FMUL``, ``FMUL.RZ``, ``FMUL.FTZ``, ``FADD``) are ordinary float32
operations with the GPU's conventions: any NaN result is the canonical ``0x7fffffff``; ``.FTZ`` reads
subnormal operands as signed zeros and flushes subnormal results to signed zeros.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

CNAN = 0x7FFFFFFF


@intrinsic
def _u32_as_f32(typingctx, x):
    sig = types.float32(types.uint32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float32))
    return sig, codegen


@intrinsic
def _f32_as_u32(typingctx, x):
    sig = types.uint32(types.float32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.uint32))
    return sig, codegen


@intrinsic
def _u64_as_f64(typingctx, x):
    sig = types.float64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))
    return sig, codegen


@intrinsic
def _f64_as_u64(typingctx, x):
    sig = types.uint64(types.float64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.uint64))
    return sig, codegen


@intrinsic
def _fma_f64(typingctx, a, b, c):
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):
        dbl = ir.DoubleType()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(dbl, [dbl, dbl, dbl]), "llvm.fma.f64")
        return builder.call(fn, args)
    return sig, codegen


@intrinsic
def _fma_f32(typingctx, a, b, c):
    sig = types.float32(types.float32, types.float32, types.float32)

    def codegen(context, builder, signature, args):
        flt = ir.FloatType()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(flt, [flt, flt, flt]), "llvm.fma.f32")
        return builder.call(fn, args)
    return sig, codegen


@numba.njit((numba.int64,), cache=True)
def f32(x):
    """float32 value of a bit pattern (any integer type)."""
    return _u32_as_f32(np.uint32(x & 0xFFFFFFFF))


@numba.njit(cache=True)
def bits32(v):
    """Bit pattern (int64) of a float32 value; NaN -> the canonical 0x7fffffff."""
    if v != v:
        return CNAN
    return np.int64(_f32_as_u32(np.float32(v)))


@numba.njit(cache=True)
def f64(x):
    """float64 value of a 64-bit pattern given as int64 or uint64."""
    return _u64_as_f64(np.uint64(x))


@numba.njit(cache=True)
def bits64(v):
    """Bit pattern of a float64 value as int64 (the word's two's-complement reading)."""
    return np.int64(_f64_as_u64(np.float64(v)))


@numba.njit(cache=True)
def dfma(a, b, c):
    """float64 a*b + c with one rounding (DFMA)."""
    return _fma_f64(a, b, c)


@numba.njit((numba.int64,), cache=True)
def ftz_in(x):
    """A float32 bit pattern as an .FTZ operand reads it: subnormals become signed zeros."""
    return x & 0x80000000 if (x & 0x7F800000) == 0 else x


@numba.njit((numba.int64, numba.int64,), cache=True)
def fmul(a, b):
    """FMUL: RN product of two float32 bit patterns, subnormals kept."""
    return bits32(f32(a) * f32(b))


@numba.njit((numba.int64, numba.int64,), cache=True)
def fmul_ftz(a, b):
    """FMUL.FTZ: subnormal operands read as signed zeros; a result whose exact magnitude is below
    2**-126 is a signed zero, even where it would round up to 2**-126 (seen on the H200: div.approx.ftz)."""
    p = np.float64(f32(ftz_in(a))) * np.float64(f32(ftz_in(b)))     # exact
    if abs(p) < 1.1754943508222875e-38:
        return 0x80000000 if p < 0.0 or (p == 0.0 and ((a ^ b) >> 31) & 1) else 0
    return bits32(np.float32(p))


@numba.njit((numba.int64, numba.int64, numba.int64,), cache=True)
def ffma(a, b, c):
    """FFMA: RN(a*b + c) with one rounding, subnormals kept (bit patterns)."""
    return bits32(_fma_f32(f32(a), f32(b), f32(c)))


@numba.njit((numba.int64, numba.int64, numba.int64,), cache=True)
def ffma_ftz(a, b, c):
    """FFMA.FTZ: as :func:`fmul_ftz`, the flush decided on the unrounded result (its float64 FMA,
    which is below 2**-126 exactly when the exact result is, 2**-126 being a float64)."""
    fa, fb, fc = f32(ftz_in(a)), f32(ftz_in(b)), f32(ftz_in(c))
    v = _fma_f64(np.float64(fa), np.float64(fb), np.float64(fc))
    r = bits32(_fma_f32(fa, fb, fc))
    if v == v and abs(v) < 1.1754943508222875e-38:
        return r & 0x80000000
    return r


@numba.njit((numba.int64, numba.int64,), cache=True)
def fadd(a, b):
    """FADD: RN sum, subnormals kept."""
    return bits32(f32(a) + f32(b))


@numba.njit((numba.int64, numba.int64,), cache=True)
def fmul_rz(a, b):
    """FMUL.RZ: the exact float64 product rounded toward zero to float32 (subnormals kept)."""
    p = np.float64(f32(a)) * np.float64(f32(b))
    if p != p:
        return CNAN
    q = np.float32(p)
    r = np.int64(_f32_as_u32(q))
    if abs(np.float64(q)) > abs(p):
        if (r & 0x7FFFFFFF) == 0x7F800000:          # RN overflowed: RZ keeps the largest float
            return (r & 0x80000000) | 0x7F7FFFFF
        r -= 1                                   # one ulp toward zero (magnitude is in the low bits)
    return r


@numba.njit((numba.int64, numba.float64,), cache=True)
def fabs_lt(x, bound):
    """|x| < bound, ordered (false for NaN), x a bit pattern, bound a float32 value."""
    return abs(f32(x)) < bound


@numba.njit((numba.int64, numba.float64,), cache=True)
def fabs_gt(x, bound):
    return abs(f32(x)) > bound
