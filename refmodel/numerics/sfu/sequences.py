"""Each sm_90a SFU form as the instruction sequence ptxas 13.0 emits for it (SASS read from the
recorded cubins), around the unit's functions of :mod:`.mufu`.  All on bit patterns (int64 in, int64
out); the f16/bf16 forms take and return 16-bit patterns.

The non-``.ftz`` f32 forms exist because MUFU itself flushes subnormals: ptxas scales a subnormal
operand into the normal range first and undoes the scaling on the result.
"""

from __future__ import annotations

import numba
import numpy as np

from .bits import bits64, dfma, f32, f64, fabs_gt, fabs_lt, fadd, fmul, fmul_ftz, fmul_rz
from .mufu import (ONE_OVER_TAU, mufu_ex2, mufu_lg2, mufu_rcp, mufu_rcp64h, mufu_rsq, mufu_rsq64h, mufu_sincos,
                   mufu_sqrt, mufu_tanh)

TWO24 = 0x4B800000        # 2**24
MIN_NORMAL = 1.1754943508222875e-38   # 2**-126
TWO126 = 8.507059173023462e37         # 2**126
HALF, QUARTER = 0x3F000000, 0x3E800000
MINUS_24 = 0xC1C00000
TWO12, TWO_M12 = 0x45800000, 0x39800000


@numba.njit(cache=True)
def ex2_ftz_f32(x):
    return mufu_ex2(x)


@numba.njit(cache=True)
def ex2_f32(x):
    # FSETP.GEU P0, x, -126 ; @!P0 FMUL x, x, 0.5 ; MUFU.EX2 ; @!P0 FMUL y, y, y
    if f32(x) < -126.0:
        y = mufu_ex2(fmul(x, HALF))
        return fmul(y, y)
    return mufu_ex2(x)


@numba.njit(cache=True)
def lg2_ftz_f32(x):
    return mufu_lg2(x)


@numba.njit(cache=True)
def lg2_f32(x):
    # |x| < 2^-126: x * 2^24, MUFU.LG2, FADD -24
    if fabs_lt(x, MIN_NORMAL):
        return fadd(mufu_lg2(fmul(x, TWO24)), MINUS_24)
    return mufu_lg2(x)


@numba.njit(cache=True)
def rcp_ftz_f32(x):
    return mufu_rcp(x)


@numba.njit(cache=True)
def rcp_f32(x):
    # s = |x| < 2^-126 ? 2^24 : 1 ; s = |x| > 2^126 ? 0.25 : s ; s * MUFU.RCP(x * s)
    s = 0x3F800000
    if fabs_lt(x, MIN_NORMAL):
        s = TWO24
    if fabs_gt(x, TWO126):
        s = QUARTER
    return fmul(s, mufu_rcp(fmul(x, s)))


@numba.njit(cache=True)
def rsqrt_ftz_f32(x):
    return mufu_rsq(x)


@numba.njit(cache=True)
def rsqrt_f32(x):
    if fabs_lt(x, MIN_NORMAL):
        return fmul(mufu_rsq(fmul(x, TWO24)), TWO12)
    return mufu_rsq(x)


@numba.njit(cache=True)
def sin_f32(x):
    # FMUL.RZ r, x, 1/(2 pi) ; MUFU.SIN (the same for .ftz)
    return mufu_sincos(fmul_rz(x, ONE_OVER_TAU), False)


@numba.njit(cache=True)
def cos_f32(x):
    return mufu_sincos(fmul_rz(x, ONE_OVER_TAU), True)


@numba.njit(cache=True)
def div_approx_ftz_f32(a, b):
    # MUFU.RCP r, b ; FMUL.FTZ d, a, r
    return fmul_ftz(a, mufu_rcp(b))


@numba.njit(cache=True)
def div_approx_f32(a, b):
    # |b| < 2^-126: a, b * 2^24 ; MUFU.RCP ; FMUL
    if fabs_lt(b, MIN_NORMAL):
        b = fmul(b, TWO24)
        a = fmul(a, TWO24)
    return fmul(mufu_rcp(b), a)


@numba.njit(cache=True)
def div_full_f32(a, b):
    # |b| > 2^126: a, b * 0.25 ; |b| < 2^-126 (of the original b): a, b * 2^24 ; MUFU.RCP ; FMUL
    big = fabs_gt(b, TWO126)
    small = fabs_lt(b, MIN_NORMAL)
    if big:
        b = fmul(b, QUARTER)
        a = fmul(a, QUARTER)
    if small:
        b = fmul(b, TWO24)
        a = fmul(a, TWO24)
    return fmul(mufu_rcp(b), a)


@numba.njit(cache=True)
def div_full_ftz_f32(a, b):
    if fabs_gt(b, TWO126):
        b = fmul_ftz(b, QUARTER)
        a = fmul_ftz(a, QUARTER)
    return fmul_ftz(mufu_rcp(b), a)


sin_ftz_f32 = sin_f32      # ptxas emits the same two instructions for .ftz
cos_ftz_f32 = cos_f32


@numba.njit(cache=True)
def sqrt_ftz_f32(x):
    return mufu_sqrt(x)


@numba.njit(cache=True)
def sqrt_f32(x):
    # |x| < 2^-126: x * 2^24, MUFU.SQRT, * 2^-12
    if fabs_lt(x, MIN_NORMAL):
        return fmul(mufu_sqrt(fmul(x, TWO24)), TWO_M12)
    return mufu_sqrt(x)


# ------------------------------------------------------------------------------------------ f64
@numba.njit(cache=True)
def rcp_ftz_f64(x):
    # MUFU.RCP64H on the high word; the low word is 0
    return mufu_rcp64h((x >> 32) & 0xFFFFFFFF) << 32


@numba.njit(cache=True)
def rsqrt_ftz_f64(x):
    return mufu_rsq64h((x >> 32) & 0xFFFFFFFF) << 32


@numba.njit(cache=True)
def _rsqrt_step(x):
    # y0 = {RSQ64H(hi), 0}; e = 1 - x*RN(y0*y0); y = y0 + RN(y0*e) * (0.375 e + 0.5)   (DMUL, DFMA)
    y0 = f64(mufu_rsq64h((x >> 32) & 0xFFFFFFFF) << 32)
    xv = f64(x)
    e = dfma(xv, -(y0 * y0), 1.0)
    p = dfma(e, 0.375, 0.5)
    return dfma(p, y0 * e, y0)


@numba.njit(cache=True)
def rsqrt_f64(x):
    """rsqrt.approx.f64: RSQ64H and one correction step in float64; a slow path (ptxas's
    __cuda_sm20_drsqrt_f64_slowpath) for zero, subnormal, negative, Inf and NaN operands."""
    hi = (x >> 32) & 0xFFFFFFFF
    if ((hi - 0x00100000) & 0xFFFFFFFF) < 0x7FE00000:
        return bits64(_rsqrt_step(x))
    xv = f64(x)
    if xv == 0.0:
        return ((hi & 0x80000000) | 0x7FF00000) << 32
    if xv != xv:
        return bits64(xv + xv)
    if hi & 0x80000000:
        return np.int64(-2251799813685248)   # 0xfff8000000000000
    if abs(xv) == np.inf:
        return 0
    return bits64(_rsqrt_step(bits64(xv * 18014398509481984.0)) * 134217728.0)   # 2^54, 2^27


# ----------------------------------------------------------------------------------- 16-bit
@numba.njit(cache=True)
def f16_to_f32(h):
    """Exact float16 -> float32 bit pattern (subnormals normalised)."""
    s, e, m = (h >> 15) & 1, (h >> 10) & 0x1F, h & 0x3FF
    if e == 0x1F:
        return (s << 31) | 0x7F800000 | (m << 13)
    if e == 0:
        if m == 0:
            return s << 31
        e = 113
        while not m & 0x400:
            m <<= 1
            e -= 1
        return (s << 31) | (e << 23) | ((m & 0x3FF) << 13)
    return (s << 31) | ((e + 112) << 23) | (m << 13)


@numba.njit(cache=True)
def f32_to_f16_trunc(y):
    """float32 -> float16 with the significand truncated (toward zero), subnormal results kept,
    exponent overflow -> Inf; NaN -> 0x7fff (MUFU.EX2.F16's conversion)."""
    s, e, m = (y >> 31) & 1, (y >> 23) & 0xFF, y & 0x7FFFFF
    if e == 255:
        return 0x7FFF if m else (s << 15) | 0x7C00
    ue = e - 127
    if ue > 15:
        return (s << 15) | 0x7C00
    if ue >= -14:
        return (s << 15) | ((ue + 15) << 10) | (m >> 13)
    if e == 0:
        return s << 15
    sh = 13 + (-14 - ue)
    return (s << 15) | (((m | 0x800000) >> sh) if sh < 32 else 0)


@numba.njit(cache=True)
def ex2_f16(h):
    # MUFU.EX2.F16: EX2 of the exact float32 value, truncated to float16
    return f32_to_f16_trunc(mufu_ex2(f16_to_f32(h)))


@numba.njit(cache=True)
def ex2_ftz_bf16(h):
    # MUFU.EX2.BF16: EX2 of the bfloat16 as float32, truncated to bfloat16; NaN -> 0x7fff
    y = mufu_ex2(h << 16)
    return 0x7FFF if (y & 0x7FFFFFFF) > 0x7F800000 else y >> 16


@numba.njit(cache=True)
def ex2_f16x2(w):
    return ex2_f16(w & 0xFFFF) | (ex2_f16((w >> 16) & 0xFFFF) << 16)


@numba.njit(cache=True)
def ex2_ftz_bf16x2(w):
    return ex2_ftz_bf16(w & 0xFFFF) | (ex2_ftz_bf16((w >> 16) & 0xFFFF) << 16)


@numba.njit(cache=True)
def tanh_f32(x):
    return mufu_tanh(x)


@numba.njit(cache=True)
def tanh_f16(h):
    # MUFU.TANH.F16: TANH of the exact float32 value, truncated to float16
    return f32_to_f16_trunc(mufu_tanh(f16_to_f32(h)))


@numba.njit(cache=True)
def tanh_bf16(h):
    # MUFU.TANH.BF16: TANH of the bfloat16 as float32, truncated to bfloat16 (NaN -> 0x7fff)
    return mufu_tanh(h << 16) >> 16


@numba.njit(cache=True)
def tanh_f16x2(w):
    return tanh_f16(w & 0xFFFF) | (tanh_f16((w >> 16) & 0xFFFF) << 16)


@numba.njit(cache=True)
def tanh_bf16x2(w):
    return tanh_bf16(w & 0xFFFF) | (tanh_bf16((w >> 16) & 0xFFFF) << 16)


#: the model of each form, in :data:`.forms.SFU_FORMS` order; forms missing here have none yet
UNARY = (
    ("ex2.approx.f32", ex2_f32), ("ex2.approx.ftz.f32", ex2_ftz_f32),
    ("lg2.approx.f32", lg2_f32), ("lg2.approx.ftz.f32", lg2_ftz_f32),
    ("rcp.approx.f32", rcp_f32), ("rcp.approx.ftz.f32", rcp_ftz_f32),
    ("rsqrt.approx.f32", rsqrt_f32), ("rsqrt.approx.ftz.f32", rsqrt_ftz_f32),
    ("sqrt.approx.f32", sqrt_f32), ("sqrt.approx.ftz.f32", sqrt_ftz_f32),
    ("sin.approx.f32", sin_f32), ("sin.approx.ftz.f32", sin_ftz_f32),
    ("cos.approx.f32", cos_f32), ("cos.approx.ftz.f32", cos_ftz_f32),
    ("rcp.approx.ftz.f64", rcp_ftz_f64), ("rsqrt.approx.f64", rsqrt_f64), ("rsqrt.approx.ftz.f64", rsqrt_ftz_f64),
    ("ex2.approx.f16", ex2_f16), ("ex2.approx.f16x2", ex2_f16x2),
    ("ex2.approx.ftz.bf16", ex2_ftz_bf16), ("ex2.approx.ftz.bf16x2", ex2_ftz_bf16x2),
    ("tanh.approx.f32", tanh_f32), ("tanh.approx.f16", tanh_f16), ("tanh.approx.f16x2", tanh_f16x2),
    ("tanh.approx.bf16", tanh_bf16), ("tanh.approx.bf16x2", tanh_bf16x2),
)
BINARY = (
    ("div.approx.f32", div_approx_f32), ("div.approx.ftz.f32", div_approx_ftz_f32),
    ("div.full.f32", div_full_f32), ("div.full.ftz.f32", div_full_ftz_f32),
)


#: the SASS ptxas 13.0 emits for each form (sm_90a), as the models above follow it
SASS = {
    "ex2.approx.ftz.f32": "MUFU.EX2",
    "ex2.approx.f32": "x < -126 ? (x*0.5, MUFU.EX2, y*y) : MUFU.EX2",
    "lg2.approx.ftz.f32": "MUFU.LG2",
    "lg2.approx.f32": "|x| < 2^-126 ? (x*2^24, MUFU.LG2, y + -24) : MUFU.LG2",
    "rcp.approx.ftz.f32": "MUFU.RCP",
    "rcp.approx.f32": "s = |x| > 2^126 ? 0.25 : |x| < 2^-126 ? 2^24 : 1; s * MUFU.RCP(x*s)",
    "rsqrt.approx.ftz.f32": "MUFU.RSQ",
    "rsqrt.approx.f32": "|x| < 2^-126 ? (x*2^24, MUFU.RSQ, y*2^12) : MUFU.RSQ",
    "sqrt.approx.ftz.f32": "MUFU.SQRT",
    "sqrt.approx.f32": "|x| < 2^-126 ? (x*2^24, MUFU.SQRT, y*2^-12) : MUFU.SQRT",
    "sin.approx.f32": "FMUL.RZ x*0x3e22f983 (1/2pi); MUFU.SIN",
    "sin.approx.ftz.f32": "FMUL.RZ x*0x3e22f983 (1/2pi); MUFU.SIN",
    "cos.approx.f32": "FMUL.RZ x*0x3e22f983 (1/2pi); MUFU.COS",
    "cos.approx.ftz.f32": "FMUL.RZ x*0x3e22f983 (1/2pi); MUFU.COS",
    "tanh.approx.f32": "MUFU.TANH",
    "div.approx.f32": "|b| < 2^-126 ? (a, b *= 2^24); MUFU.RCP(b) * a",
    "div.approx.ftz.f32": "FMUL.FTZ a * MUFU.RCP(b)",
    "div.full.f32": "|b| > 2^126 ? (a, b *= 0.25); |b| < 2^-126 ? (a, b *= 2^24); MUFU.RCP(b) * a",
    "div.full.ftz.f32": "|b| > 2^126 ? (a, b *= 0.25, FTZ); FMUL.FTZ MUFU.RCP(b) * a",
    "rcp.approx.ftz.f64": "MUFU.RCP64H of the high word; low word 0",
    "rsqrt.approx.ftz.f64": "MUFU.RSQ64H of the high word; low word 0",
    "rsqrt.approx.f64": "y0 = MUFU.RSQ64H; e = DFMA(x, -DMUL(y0, y0), 1); DFMA(DFMA(e, 0.375, 0.5), DMUL(y0, e), y0); "
                        "slow path for 0, subnormal (x*2^54 ... *2^27), negative, Inf, NaN",
    "ex2.approx.f16": "MUFU.EX2.F16 (EX2 of the float32 value, truncated to f16, overflow to Inf)",
    "ex2.approx.f16x2": "MUFU.EX2.F16 on each half; PRMT",
    "ex2.approx.ftz.bf16": "MUFU.EX2.BF16 (EX2 of the float32 value, truncated to bf16)",
    "ex2.approx.ftz.bf16x2": "MUFU.EX2.BF16 on each half; PRMT",
    "tanh.approx.f16": "MUFU.TANH.F16 (TANH of the float32 value, truncated to f16)",
    "tanh.approx.f16x2": "MUFU.TANH.F16 on each half; PRMT",
    "tanh.approx.bf16": "MUFU.TANH.BF16 (TANH of the float32 value, truncated to bf16)",
    "tanh.approx.bf16x2": "MUFU.TANH.BF16 on each half; PRMT",
}
