"""The special-function unit's datapath (SASS ``MUFU.*``), bit for bit, on float32 bit patterns.

Every f32 function works the same way (the H200's tables are the G80's, solved from its outputs
by ``tools/sfu_fit.py``, see :mod:`.tables`):

1. **reduce** the operand to a fixed-point fraction ``f`` (23 bits) and an exponent or quadrant;
2. **look up** segment ``i`` = the top 6 or 7 bits of ``f`` -> coefficients ``A, B, C``;
3. **interpolate**: ``A << a + B*x + C*sq(x) + k``, where ``x`` are the fraction bits below the index
   and ``sq`` the truncated squarer (:func:`.fixed.square17_scalar`), then shift right (truncate);
4. **assemble** the float: exponent from step 1, subnormal results flushed to a signed zero, overflow
   to infinity (the unit is FTZ: subnormal operands are read as zero too), NaN -> ``0x7fffffff``.

=========  =====  ===================  ===========================  ==========================
function   index  x (bits below)       value                        result
=========  =====  ===================  ===========================  ==========================
RCP        7      16 (squared as x<<1) (A<<13 + Bx + C sq + 0x47e7) >> 15   significand, RN of the
RSQ        7 *    17                   (A<<14 + Bx + 4C sq + 0x7fff) >> 16   polynomial only
EX2        6      17                   (A<<13 + Bx + C sq + 0x77e2) >> 15
LG2        6      17                   (A<<12 + Bx + 2C sq + 0x3345) >> 2    36 fraction bits, + exponent, normalised, truncated
SIN/COS    6      17                   A<<11 + Bx + C sq                     38 bits, normalised, truncated
=========  =====  ===================  ===========================  ==========================

(*) RSQ's index is the exponent's parity and 6 fraction bits ([1, 4) in 128 segments).
"""

from __future__ import annotations

import numba
from numba.cpython.unsafe.numbers import leading_zeros

from .fixed import square17_scalar as _sq
import numpy as np

from .tables import EX2 as _EX2, LG2 as _LG2, RCP as _RCP, RSQRT as _RSQ, SIN as _SIN, SQRT as _SQRT, TANH as _TANH

CNAN = 0x7FFFFFFF          # the canonical NaN every MUFU result NaN is
INF = 0x7F800000
ONE_OVER_TAU = 0x3E22F983  # float32 1/(2 pi), the FMUL.RZ operand in front of MUFU.SIN/COS


@numba.njit((numba.int64, numba.int64, numba.int64, numba.boolean,), cache=True)
def mkfin(s, e, f, rz):
    """Assemble sign ``s``, biased exponent ``e`` and 24-bit significand ``f`` (2**24 carries into the
    exponent); subnormal results are flushed to a signed zero, overflow gives Inf (RZ: the largest float)."""
    if f == 0:
        return s << 31
    if f == 1 << 24:
        f >>= 1
        e += 1
    if e <= 0 or f < (1 << 23):
        return s << 31
    if e >= 255:
        return (s << 31) | (0x7F7FFFFF if rz else INF)
    return (s << 31) | (e << 23) | (f - (1 << 23))


@numba.njit(cache=True)
def rcp_poly(fx):
    """RCP's polynomial: the 24-bit significand of 1/x for x's significand fx (1.23 fixed point)."""
    i = (fx >> 16) & 0x7F
    xl = fx & 0xFFFF
    return ((_RCP[i, 0] << 13) + _RCP[i, 1] * xl + _RCP[i, 2] * _sq(xl << 1) + 0x47E7) >> 15


@numba.njit(cache=True)
def mufu_rcp(x):
    """MUFU.RCP: 1/x."""
    s, e, f = x >> 31, (x >> 23) & 0xFF, x & 0x7FFFFF
    if e == 255:
        return CNAN if f else s << 31
    if e == 0:
        return (s << 31) | INF
    return mkfin(s, 253 - e, rcp_poly(f | 0x800000), False)


@numba.njit(cache=True)
def rsq_poly(fp):
    """RSQ's polynomial for fp = exponent parity << 23 | fraction (fp != 0): 1/sqrt in [0.5, 1)."""
    i = fp >> 17
    xl = fp & 0x1FFFF
    return ((_RSQ[i, 0] << 14) + _RSQ[i, 1] * xl + ((_RSQ[i, 2] * _sq(xl)) << 2) + 0x7FFF) >> 16


@numba.njit(cache=True)
def mufu_rsq(x):
    """MUFU.RSQ: 1/sqrt(x)."""
    s, e, f = x >> 31, (x >> 23) & 0xFF, x & 0x7FFFFF
    if e == 255 and f:
        return CNAN
    if e == 0:
        return (s << 31) | INF
    if s:
        return CNAN
    if e == 255:
        return 0
    ue = e - 127
    fp = f | ((ue & 1) << 23)
    ex = 127 - (ue >> 1) - 1
    if fp == 0:
        return mkfin(0, ex + 1, 1 << 23, False)
    return mkfin(0, ex, rsq_poly(fp), False)


@numba.njit(cache=True)
def sqrt_poly(fp):
    """SQRT's polynomial for fp = exponent parity << 23 | fraction: sqrt in [1, 2)."""
    i = fp >> 17
    xl = fp & 0x1FFFF
    return ((_SQRT[i, 0] << 15) + _SQRT[i, 1] * xl + _SQRT[i, 2] * _sq(xl) + 0x7FFF) >> 17


@numba.njit(cache=True)
def mufu_sqrt(x):
    """MUFU.SQRT: sqrt(x), a table of its own (index: exponent parity and 6 fraction bits)."""
    s, e, f = x >> 31, (x >> 23) & 0xFF, x & 0x7FFFFF
    if e == 255 and f:
        return CNAN
    if e == 0:
        return s << 31
    if s:
        return CNAN
    if e == 255:
        return INF
    ue = e - 127
    return mkfin(0, 127 + (ue >> 1), sqrt_poly(f | ((ue & 1) << 23)), False)


@numba.njit(cache=True)
def mufu_rcp64h(hi):
    """MUFU.RCP64H: the high word of 1/x from the high word of a float64 (1.11.20): RCP's polynomial
    on the 20 fraction bits there, its significand truncated to 20 bits."""
    s, e, f = hi >> 31, (hi >> 20) & 0x7FF, hi & 0xFFFFF
    if e == 0x7FF:
        return CNAN if f else s << 31
    if e == 0:
        return (s << 31) | 0x7FF00000
    r = rcp_poly(0x800000 | (f << 3))
    ex = 2045 - e
    if r == 1 << 24:
        r >>= 1
        ex += 1
    if ex <= 0:
        return s << 31
    if ex >= 0x7FF:
        return (s << 31) | 0x7FF00000
    return (s << 31) | (ex << 20) | ((r - (1 << 23)) >> 3)


@numba.njit(cache=True)
def mufu_rsq64h(hi):
    """MUFU.RSQ64H: the high word of 1/sqrt(x) from the high word of a float64."""
    s, e, f = hi >> 31, (hi >> 20) & 0x7FF, hi & 0xFFFFF
    if e == 0x7FF and f:
        return CNAN
    if e == 0:
        return (s << 31) | 0x7FF00000
    if s:
        return CNAN
    if e == 0x7FF:
        return 0
    ue = e - 1023
    fp = (f << 3) | ((ue & 1) << 23)
    ex = 1023 - (ue >> 1) - 1
    r = (1 << 24) if fp == 0 else rsq_poly(fp)
    if r == 1 << 24:
        r >>= 1
        ex += 1
    if ex <= 0:
        return 0
    return (ex << 20) | ((r - (1 << 23)) >> 3)


@numba.njit(cache=True)
def mufu_ex2(x):
    """MUFU.EX2: 2**x.  The operand is first read as sign-magnitude fixed point with 7 integer and 23
    fraction bits, truncated; a negative one is complemented (one's complement of the fraction)."""
    s, e, f = x >> 31, (x >> 23) & 0xFF, x & 0x7FFFFF
    if e == 255:
        if f:
            return CNAN
        return 0 if s else INF
    ue = e - 127
    if ue >= 7:
        return 0 if s else INF
    m = (f | 0x800000) if e else 0
    if ue >= 0:
        fx = m << ue
    elif ue > -32:
        fx = m >> (-ue)
    else:
        fx = 0
    ex = fx >> 23
    fr = fx & 0x7FFFFF
    if s:
        ex = -ex - 1
        if fr:
            fr = ~fr & 0x7FFFFF
        else:
            ex += 1
    i = fr >> 17
    xl = fr & 0x1FFFF
    r = ((_EX2[i, 0] << 13) + _EX2[i, 1] * xl + _EX2[i, 2] * _sq(xl) + 0x77E2) >> 15
    return mkfin(0, ex + 127, r, False)


@numba.njit(cache=True)
def bit_length(v):
    """The number of bits of an int64 ``v`` > 0 (one count-leading-zeros instruction)."""
    return 64 - leading_zeros(np.int64(v))


@numba.njit((numba.int64, numba.int64, numba.int64,), cache=True)
def _normalise_loop(res, ex, bit):
    """Shift ``res`` (>= 0) left until its bit ``bit`` is set, one less ``ex`` per place (0 stays 0)."""
    while res and not (res >> bit) & 1:
        res <<= 1
        ex -= 1
    return res, ex


@numba.njit((numba.int64, numba.int64, numba.int64,), cache=True)
def _normalise(res, ex, bit):
    """:func:`_normalise_loop` in one shift where the top set bit is at or below ``bit`` (always, in
    the unit's functions; tests hold the two equal)."""
    if res > 0:
        sh = bit + 1 - bit_length(res)
        if sh >= 0:
            return res << sh, ex - sh
    return _normalise_loop(res, ex, bit)


@numba.njit(cache=True)
def mufu_lg2(x):
    """MUFU.LG2: log2(x).  The fraction's log (36 fraction bits) plus the exponent, in one's
    complement when negative, normalised and truncated."""
    s, e, f = x >> 31, (x >> 23) & 0xFF, x & 0x7FFFFF
    if e == 255 and f:
        return CNAN
    if e == 0:
        return 0xFF800000
    if s:
        return CNAN
    if e == 255:
        return INF
    fx = f | 0x800000
    if f == 0 and e == 127:
        res = 0
    else:
        i = (fx >> 17) & 0x3F
        xl = fx & 0x1FFFF
        res = ((_LG2[i, 0] << 12) + _LG2[i, 1] * xl + ((_LG2[i, 2] * _sq(xl)) << 1) + 0x3345) >> 2
    res += (e - 127) << 36
    sx = 0
    if res < 0:
        sx = 1
        res = ~res
    res, ex = _normalise(res, 133, 42)
    return mkfin(sx, ex, res >> 19, False)


@numba.njit(cache=True)
def revolutions(r):
    """|r| * 2**25 truncated, mod 2**25 (quadrant in bits 24..23), as MUFU.SIN/COS read r."""
    e = (r >> 23) & 0xFF
    if e == 0:
        return 0
    m = (r & 0x7FFFFF) | 0x800000
    sh = e - 127 + 2
    if sh >= 32:
        return 0
    if sh >= 0:
        return (m << sh) & 0x1FFFFFF
    if sh > -32:
        return m >> (-sh)
    return 0


@numba.njit(cache=True)
def mufu_sincos(r, cos):
    """MUFU.SIN / MUFU.COS of r in revolutions: sin(2 pi r) / cos(2 pi r)."""
    if (r >> 23) & 0xFF == 255:
        return CNAN
    fx = revolutions(r)
    sx = r >> 31
    q = fx >> 23
    fr = fx & 0x7FFFFF
    if cos:
        q += 1
        sx = 0
    if q & 1:
        fr = ~fr & 0x7FFFFF
    sx ^= (q >> 1) & 1
    i = fr >> 17
    xl = fr & 0x1FFFF
    res = (_SIN[i, 0] << 11) + _SIN[i, 1] * xl + _SIN[i, 2] * _sq(xl)
    res, ex = _normalise(res, 127, 37)
    return mkfin(sx, ex, res >> 14, True)


# MUFU.TANH: segments of [2^-8, 8), nb index bits in binade 2^k (k = -8..2); row = first row of the
# binade + the top nb fraction bits; the 17 fraction bits after them are x (the last 6 - nb unused)
_TANH_NB = np.array([0, 0, 0, 1, 1, 2, 2, 2, 3, 4, 3], dtype=np.int64)
_TANH_FIRST = np.concatenate([[0], np.cumsum(1 << _TANH_NB)[:-1]]).astype(np.int64)
_TANH_COEF = np.ascontiguousarray(_TANH[:, 2:])          # U, A, B, C


@numba.njit(cache=True)
def mufu_tanh(x):
    """MUFU.TANH: tanh(x), odd.  |x| < 2**-8 passes through unchanged (zeros and subnormals
    included: no flush), |x| >= 8 gives +-1; in between a quadratic per segment whose value R is
    the result in units of 2**-(U+15), truncated to 24 significant bits."""
    s = x & 0x80000000
    a = x & 0x7FFFFFFF
    e = a >> 23
    if a > 0x7F800000:
        return CNAN
    if e < 119:
        return x
    if e >= 130:
        return s | 0x3F800000
    f = a & 0x7FFFFF
    nb = _TANH_NB[e - 119]
    row = _TANH_FIRST[e - 119] + (f >> (23 - nb))
    xl = (f >> (6 - nb)) & 0x1FFFF
    u = _TANH_COEF[row, 0]
    r = (_TANH_COEF[row, 1] << 15) + _TANH_COEF[row, 2] * xl + _TANH_COEF[row, 3] * _sq(xl)
    n = 0                                 # the places r is above 24 significant bits
    if r >= (1 << 24):
        n = bit_length(r) - 24
    return s | ((135 + n - u) << 23) | ((r >> n) & 0x7FFFFF)
