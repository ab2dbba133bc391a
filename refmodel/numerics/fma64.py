"""Correctly rounded binary64 fused multiply-add, in integer arithmetic (numba), with the NaN rules the
H200's DMMA showed (``mma.sync`` f64 forms).

``fma64(a, b, c)`` on uint64 bit patterns returns RN(a*b + c): the exact product and sum, one rounding
to nearest even, subnormal results kept, overflow to infinity, an exactly zero sum +0 unless both
addends are -0.  NaN inputs: the result is the first NaN of (b, c, a), quieted (bit 51 set);
an invalid operation (Inf * 0, Inf - Inf) gives ``DEFAULT_NAN`` = 0xfff8000000000000.
:func:`fma64_reference` is the same with Python integers (the tests hold the two equal).
"""

from __future__ import annotations

import numba
import numpy as np

DEFAULT_NAN = 0xFFF8000000000000
QUIET = 1 << 51
_EXP = 0x7FF0000000000000
_FRAC = 0x000FFFFFFFFFFFFF
_SIGN = 1 << 63
_M64 = 0xFFFFFFFFFFFFFFFF


# ----------------------------------------------------------------------------- readable reference


def _decode(x: int) -> tuple[int, int, int]:
    """(sign, integer significand, exponent of its unit bit) of finite binary64 bits."""
    s, e, f = x >> 63, (x >> 52) & 0x7FF, x & _FRAC
    return (s, f, -1074) if e == 0 else (s, f | (1 << 52), e - 1075)


def _round(sign: int, mag: int, exp: int) -> int:
    """Bits of RN((-1)^sign * mag * 2^exp), mag > 0."""
    nbits = mag.bit_length()
    top = exp + nbits - 1                       # exponent of the leading bit
    unit = max(top - 52, -1074)                 # exponent of the result's last bit
    shift = unit - exp
    if shift > 0:
        q, r = mag >> shift, mag & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if r > half or (r == half and q & 1):
            q += 1
    else:
        q = mag << -shift
    if q >> 53:                                 # rounding carried into a new bit
        q >>= 1
        unit += 1
    if q < (1 << 52):                           # subnormal (unit is -1074)
        return (sign << 63) | q
    biased = unit + 1075
    if biased >= 0x7FF:
        return (sign << 63) | _EXP
    return (sign << 63) | (biased << 52) | (q & _FRAC)


def fma64_reference(a: int, b: int, c: int) -> int:
    """:func:`fma64` on Python ints (readable; exact with unbounded integers)."""
    def nan(x):
        return (x & _EXP) == _EXP and (x & _FRAC) != 0

    for x in (b, c, a):
        if nan(x):
            return x | QUIET
    inf = lambda x: (x & ~_SIGN & _M64) == _EXP        # noqa: E731
    zero = lambda x: (x & ~_SIGN & _M64) == 0          # noqa: E731
    ps = (a >> 63) ^ (b >> 63)
    if inf(a) or inf(b):
        if zero(a) or zero(b) or (inf(c) and (c >> 63) != ps):
            return DEFAULT_NAN
        return (ps << 63) | _EXP
    if inf(c):
        return c
    sa, ma, ea = _decode(a)
    sb, mb, eb = _decode(b)
    sc, mc, ec = _decode(c)
    p = ma * mb
    if p == 0 and mc == 0:
        return _SIGN if ps and sc else 0
    e = min(ea + eb, ec)
    total = (-p if ps else p) * (1 << (ea + eb - e)) + (-mc if sc else mc) * (1 << (ec - e))
    if total == 0:
        return 0
    return _round(1 if total < 0 else 0, abs(total), e)


# ----------------------------------------------------------------------------- compiled


@numba.njit(cache=True, inline="always")
def _clz64(x):
    n = 0
    if x == 0:
        return 64
    while (x >> np.uint64(63)) == 0:
        x = x << np.uint64(1)
        n += 1
    return n


@numba.njit(cache=True, inline="always")
def _mul64(a, b):
    """(hi, lo) of the 128-bit product of two uint64 below 2**53."""
    m32 = np.uint64(0xFFFFFFFF)
    a0, a1 = a & m32, a >> np.uint64(32)
    b0, b1 = b & m32, b >> np.uint64(32)
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> np.uint64(32)) + (p01 & m32) + (p10 & m32)
    lo = (p00 & m32) | (mid << np.uint64(32))
    hi = p11 + (p01 >> np.uint64(32)) + (p10 >> np.uint64(32)) + (mid >> np.uint64(32))
    return hi, lo


@numba.njit(cache=True, inline="always")
def _shl128(hi, lo, s):
    if s == 0:
        return hi, lo
    if s >= 64:
        return lo << np.uint64(s - 64), np.uint64(0)
    return (hi << np.uint64(s)) | (lo >> np.uint64(64 - s)), lo << np.uint64(s)


@numba.njit(cache=True, inline="always")
def _shr128_sticky(hi, lo, s):
    """(hi, lo) >> s with the shifted-out bits ORed into bit 0."""
    if s == 0:
        return hi, lo
    if s >= 128:
        return np.uint64(0), np.uint64(1) if (hi | lo) != 0 else np.uint64(0)
    if s >= 64:
        t = s - 64
        out_lo = hi >> np.uint64(t) if t < 64 else np.uint64(0)
        lost = lo != 0 or (t > 0 and (hi & ((np.uint64(1) << np.uint64(t)) - np.uint64(1))) != 0)
        return np.uint64(0), out_lo | np.uint64(1 if lost else 0)
    lost = (lo & ((np.uint64(1) << np.uint64(s)) - np.uint64(1))) != 0
    nlo = (lo >> np.uint64(s)) | (hi << np.uint64(64 - s))
    return hi >> np.uint64(s), nlo | np.uint64(1 if lost else 0)


@numba.njit(cache=True)
def fma64_bits(a, b, c):
    """:func:`fma64` on three uint64 bit patterns (scalar, compiled)."""
    EXP = np.uint64(0x7FF0000000000000)
    FRAC = np.uint64(0x000FFFFFFFFFFFFF)
    ABS = np.uint64(0x7FFFFFFFFFFFFFFF)
    Q = np.uint64(1 << 51)
    if (b & EXP) == EXP and (b & FRAC) != 0:
        return b | Q
    if (c & EXP) == EXP and (c & FRAC) != 0:
        return c | Q
    if (a & EXP) == EXP and (a & FRAC) != 0:
        return a | Q
    ps = (a >> np.uint64(63)) ^ (b >> np.uint64(63))
    sc = c >> np.uint64(63)
    a_inf, b_inf, c_inf = (a & ABS) == EXP, (b & ABS) == EXP, (c & ABS) == EXP
    if a_inf or b_inf:
        if (a & ABS) == 0 or (b & ABS) == 0 or (c_inf and sc != ps):
            return np.uint64(0xFFF8000000000000)
        return (ps << np.uint64(63)) | EXP
    if c_inf:
        return c
    ea, eb, ec = np.int64((a >> np.uint64(52)) & np.uint64(0x7FF)), np.int64((b >> np.uint64(52)) & np.uint64(0x7FF)), \
        np.int64((c >> np.uint64(52)) & np.uint64(0x7FF))
    ma, mb, mc = a & FRAC, b & FRAC, c & FRAC
    if ea == 0:
        ea = 1
    else:
        ma |= np.uint64(1 << 52)
    if eb == 0:
        eb = 1
    else:
        mb |= np.uint64(1 << 52)
    if ec == 0:
        ec = 1
    else:
        mc |= np.uint64(1 << 52)
    ea -= 1075
    eb -= 1075
    ec -= 1075
    if ma == 0 or mb == 0:
        if mc == 0:
            return np.uint64(1 << 63) if (ps == 1 and sc == 1) else np.uint64(0)
        return c
    phi, plo = _mul64(ma, mb)
    ep = ea + eb
    # normalise both to a leading bit at 126 of (hi, lo); value = (hi, lo) * 2**(e)
    lz = _clz64(phi) if phi != 0 else 64 + _clz64(plo)
    sh = lz - 1
    phi, plo = _shl128(phi, plo, sh)
    ep -= sh
    if mc == 0:
        chi, clo, e_c = np.uint64(0), np.uint64(0), ep
        c_zero = True
    else:
        sh = 64 + _clz64(mc) - 1
        chi, clo = _shl128(np.uint64(0), mc, sh)
        e_c = ec - sh
        c_zero = False
    # align to the larger exponent
    if c_zero or ep >= e_c:
        e = ep
        if not c_zero:
            chi, clo = _shr128_sticky(chi, clo, ep - e_c)
        xs, xhi, xlo, ys, yhi, ylo = ps, phi, plo, sc, chi, clo
    else:
        e = e_c
        phi, plo = _shr128_sticky(phi, plo, e_c - ep)
        xs, xhi, xlo, ys, yhi, ylo = sc, chi, clo, ps, phi, plo
    if xs == ys:
        lo = xlo + ylo
        carry = np.uint64(1) if lo < xlo else np.uint64(0)
        hi = xhi + yhi + carry
        s = xs
    else:
        if xhi > yhi or (xhi == yhi and xlo >= ylo):
            borrow = np.uint64(1) if xlo < ylo else np.uint64(0)
            lo = xlo - ylo
            hi = xhi - yhi - borrow
            s = xs
        else:
            borrow = np.uint64(1) if ylo < xlo else np.uint64(0)
            lo = ylo - xlo
            hi = yhi - xhi - borrow
            s = ys
    if hi == 0 and lo == 0:
        return np.uint64(0)
    # leading bit position (0..127) and rounding to 53 bits at unit exponent max(top - 52, -1074)
    lz = _clz64(hi) if hi != 0 else 64 + _clz64(lo)
    lead = 127 - lz
    top = e + lead
    unit = top - 52
    if unit < -1074:
        unit = -1074
    shift = unit - e                      # bits below the result's last bit
    if shift <= 0:
        q = lo << np.uint64(-shift)       # exact (only tiny values, lead < 53)
        rnd_up = False
    else:
        hi2, lo2 = hi, lo                 # value >> (shift-1): its bit 0 is the guard bit
        if shift - 1 >= 128:
            guard = False
            sticky = (hi2 | lo2) != 0
            q = np.uint64(0)
        else:
            # value >> (shift-1) exactly, and whether bits below were non-zero
            if shift - 1 == 0:
                g_hi, g_lo, below = hi2, lo2, False
            elif shift - 1 >= 64:
                t = shift - 1 - 64
                g_lo = hi2 >> np.uint64(t) if t < 64 else np.uint64(0)
                g_hi = np.uint64(0)
                below = lo2 != 0 or (t > 0 and (hi2 & ((np.uint64(1) << np.uint64(t)) - np.uint64(1))) != 0)
            else:
                t = shift - 1
                below = (lo2 & ((np.uint64(1) << np.uint64(t)) - np.uint64(1))) != 0
                g_lo = (lo2 >> np.uint64(t)) | (hi2 << np.uint64(64 - t))
                g_hi = hi2 >> np.uint64(t)
            guard = (g_lo & np.uint64(1)) != 0
            sticky = below
            q = (g_lo >> np.uint64(1)) | (g_hi << np.uint64(63))
        rnd_up = guard and (sticky or (q & np.uint64(1)) != 0)
    if rnd_up:
        q += np.uint64(1)
    if (q >> np.uint64(53)) != 0:
        q = q >> np.uint64(1)
        unit += 1
    sign = s << np.uint64(63)
    if q < np.uint64(1 << 52):
        return sign | q
    biased = unit + 1075
    if biased >= 0x7FF:
        return sign | EXP
    return sign | (np.uint64(biased) << np.uint64(52)) | (q & FRAC)


@numba.njit(cache=True)
def _fma_chain(a, b, c, out):
    """out[p, m, n] = fma(a[p, m, K-1], b[p, K-1, n], ... fma(a[p, m, 0], b[p, 0, n], c[p, m, n]))."""
    P, M, K = a.shape
    N = b.shape[2]
    for p in range(P):
        for m in range(M):
            for n in range(N):
                d = c[p, m, n]
                for k in range(K):
                    d = fma64_bits(a[p, m, k], b[p, k, n], d)
                out[p, m, n] = d


def fma_chain(a_bits: np.ndarray, b_bits: np.ndarray, c_bits: np.ndarray) -> np.ndarray:
    """D bits (P, M, N) of the sequential k-order FMA chain from C (uint64 bit patterns)."""
    a = np.ascontiguousarray(a_bits, dtype=np.uint64)
    b = np.ascontiguousarray(b_bits, dtype=np.uint64)
    c = np.ascontiguousarray(c_bits, dtype=np.uint64)
    out = np.empty(c.shape, np.uint64)
    _fma_chain(a, b, c, out)
    return out


def fma64(a, b, c) -> np.ndarray:
    """Elementwise :func:`fma64_bits` on uint64 bit-pattern arrays (broadcast)."""
    a, b, c = np.broadcast_arrays(*(np.asarray(x, dtype=np.uint64) for x in (a, b, c)))
    out = fma_chain(a.reshape(-1, 1, 1), b.reshape(-1, 1, 1), c.reshape(-1, 1, 1))
    return out.reshape(a.shape)
