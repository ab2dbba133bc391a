"""The fast kernel of :func:`refmodel.numerics.accumulate.fdpa_chain`: the same truncated
fused dot products, computed with exact floating-point arithmetic that vectorises.

Same numerics as the integer kernel (``fdpa_chain(..., kernel="int")``) and the readable
formula :func:`refmodel.numerics.accumulate.fdpa`; tests/test_gemm_fast.py holds all three
bit-identical.  Why every step is exact:

* an operand's value ``v = sig * 2**(exp - mbits)`` is held in float32 when every product
  of two values is a float32 normal with at most 24 significant bits (e4m3, e5m2, f16:
  products of 8 to 22 bits between 2**-48 and 2**32; :func:`value_dtype`), else in
  float64 (bf16, tf32);
* e_max needs only exponent sums: int8 lanes (64 per AVX-512 register) where the formats'
  exponents fit (:func:`exp8_threshold`), else int16;
* the aligned term ``trunc(v_a * v_b * 2**(F - e_max))`` is a product of exact values and
  a power of two: exact, and ``trunc`` rounds toward zero as the integer kernel's shift of
  the magnitude does (a result below 2**-126 is < 1 and truncates to 0 whatever its
  rounding).  ``2**(F - e_max)`` is clamped to the normal range, which only happens for
  columns whose products are all zero;
* the terms are integers below ``2**(F + 2)`` (C's below ``2**(F + 1)``) and a block of
  them sums exactly in float32 while ``F + 2 + log2(kblk + 1) <= 24`` (F = 13, 32 terms:
  below 2**21), else in float64; each term is added on its own, in the sum's dtype;
* each chain's D is kept as its value (float32 holds every f32 and f16 accumulator value);
  C's term, the normalisation and the RZ / RNE rounding to ``round_mbits`` bits are
  power-of-two scalings, ``trunc`` and a magic-number round-to-nearest-even of numbers
  below 2**24, split in two where a power of two would leave the normal range;
* NaN / Inf: a cheap per-block flag; only blocks holding a special operand or C are redone
  by the integer kernel's scalar rule; promotion is the integer kernel's ``promote_one`` (every
  promote op, fma_row_first included).

Loop order: threads over tiles of rows that share one B; for each block of K, every row of
the tile (the block of B stays in cache), rows four at a time so that each load of B
serves four rows; the loops over N are branch-free and vectorise (AVX-512 where present).
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from .._parallel import parallel_ranges, threads as n_threads
from .fdpa_special import BIG, _acc_value, _special_bits
from .promotion import promote_one

DEAD8 = -64  # exponent of a zero / special operand in the int8 exponent arrays (-BIG in int16)


@functools.lru_cache(maxsize=None)
def value_dtype(a, b) -> np.dtype:
    """float32 when every product of two values of FormatSpecs ``a`` and ``b`` is an exact
    float32 normal (at most 24 significant bits, between 2**-126 and 2**127), else float64."""
    bits = (a.mbits + 1) + (b.mbits + 1)
    lo = (a.emin - a.mbits) + (b.emin - b.mbits)  # the smallest product: two subnormals
    hi = (a.emax + 1) + (b.emax + 1)
    return np.dtype(np.float32 if bits <= 24 and lo >= -126 and hi <= 127 else np.float64)


@functools.lru_cache(maxsize=None)
def exp8_threshold(a, b) -> int | None:
    """With exponents held in int8 (zero / special: ``DEAD8``), a sum of two is a real
    product exponent iff it exceeds the returned threshold; None when int8 cannot hold
    them (then int16 with -BIG and threshold -BIG + 255)."""
    thr = DEAD8 + max(a.emax, b.emax)
    ok = (max(-a.emin, a.emax, -b.emin, b.emax) < -DEAD8 and a.emin + b.emin > thr
          and a.emax + b.emax <= 127)
    return thr if ok else None


@intrinsic
def _f64_pow2(typingctx, e):
    """2.0**e (float64) for an integer -1022 <= e <= 1023, from its exponent bits."""
    if not isinstance(e, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        v = context.cast(builder, args[0], sig.args[0], types.int64)
        v = builder.shl(builder.add(v, ir.Constant(ir.IntType(64), 1023)), ir.Constant(ir.IntType(64), 52))
        return builder.bitcast(v, ir.DoubleType())

    return types.float64(e), codegen


@numba.njit(cache=True, nogil=True)
def _values_chunk(sig, exp, mbits, out, exp8, narrow):
    """out = sig * 2**(exp - mbits) (zero where sig is 0) and, if ``narrow``, exp8 = exp
    in int8 (-BIG -> DEAD8); flat arrays."""
    for i in range(sig.shape[0]):
        e = min(max(np.int64(exp[i]) - mbits, -1022), 1023)
        out[i] = np.float64(sig[i]) * _f64_pow2(e)
    if narrow:
        for i in range(sig.shape[0]):
            e16 = exp[i]
            exp8[i] = np.int8(DEAD8 if e16 == -BIG else e16)


@numba.njit(cache=True, parallel=True, nogil=True)
def _values_kernel(sig, exp, mbits, out, exp8, narrow):
    """:func:`_values_chunk` in parallel chunks."""
    n = sig.shape[0]
    chunk = 4096
    for c in numba.prange((n + chunk - 1) // chunk):
        i0 = c * chunk
        i1 = min(i0 + chunk, n)
        # slices: loops from 0 carry no negative-index checks
        _values_chunk(sig[i0:i1], exp[i0:i1], mbits, out[i0:i1], exp8[i0:i1] if narrow else exp8, narrow)


def operand_arrays(sig: np.ndarray, exp: np.ndarray, mbits: int, dtype: np.dtype,
                   narrow: bool) -> tuple[np.ndarray, np.ndarray]:
    """(exact values in ``dtype``, int8 exponents or a (1, 1, 1) placeholder) of decoded
    significands and exponents of shape (P, K, Q)."""
    out = np.empty(sig.shape, dtype)
    exp8 = np.empty(sig.shape if narrow else (1, 1, 1), np.int8)
    args = (np.ascontiguousarray(sig).reshape(-1), np.ascontiguousarray(exp).reshape(-1), mbits,
            out.reshape(-1), exp8.reshape(-1), narrow)
    (_values_kernel if out.size > 1 << 16 else _values_chunk)(*args)  # small: no thread start
    return out, exp8


def _float_layout(fty):
    """(bits, mantissa bits, bias, llvm type) of numba's float32 / float64, else None."""
    if fty == types.float32:
        return 32, 23, 127, ir.FloatType()
    if fty == types.float64:
        return 64, 52, 1023, ir.DoubleType()
    return None


@intrinsic
def _fexp(typingctx, x):
    """Unbiased exponent field of a float32 / float64 as int32 (zero and subnormals:
    -bias, Inf / NaN: bias + 1), read from its bits."""
    lay = _float_layout(x)
    if lay is None:
        return None
    n, m, bias, _ = lay

    def codegen(context, builder, sig, args):
        it = ir.IntType(n)
        b = builder.bitcast(args[0], it)
        e = builder.and_(builder.lshr(b, ir.Constant(it, m)), ir.Constant(it, (1 << (n - 1 - m)) - 1))
        e = builder.sub(e, ir.Constant(it, bias))
        return builder.trunc(e, ir.IntType(32)) if n > 32 else e

    return types.int32(x), codegen


@intrinsic
def _pow2_like(typingctx, x, e):
    """2**e in the float type of ``x``, built from its exponent bits (the caller keeps e
    in that type's normal range)."""
    lay = _float_layout(x)
    if lay is None or not isinstance(e, types.Integer):
        return None
    n, m, bias, fty = lay

    def codegen(context, builder, sig, args):
        it = ir.IntType(n)
        v = context.cast(builder, args[1], sig.args[1], types.int64 if n == 64 else types.int32)
        v = builder.shl(builder.add(v, ir.Constant(it, bias)), ir.Constant(it, m))
        return builder.bitcast(v, fty)

    return x(x, e), codegen


@intrinsic
def _rint_nonneg(typingctx, x):
    """Round a float32 / float64 ``x >= 0`` to an integer, ties to even: the magic-number
    addition ``(x + 2**m) - 2**m`` (m mantissa bits) in the default rounding mode, and x
    itself from 2**m on (already an integer).  Vectorises, unlike a call of ``rint``."""
    lay = _float_layout(x)
    if lay is None:
        return None
    _, m, _, fty = lay

    def codegen(context, builder, sig, args):
        big = ir.Constant(fty, float(2 ** m))
        v = builder.fsub(builder.fadd(args[0], big), big)
        return builder.select(builder.fcmp_ordered(">=", args[0], big), args[0], v)

    return x(x), codegen


@numba.njit(cache=True)
def _pmax8(EA, EB, r, nb, k0, k1, pm):
    """pm[j] = max over k0 <= k < k1 of EA[r, k] + EB[nb, k, j] (int8)."""
    N = pm.shape[0]
    for j in range(N):
        pm[j] = -128
    k = k0
    while k + 4 <= k1:
        a0 = EA[r, k, 0]
        a1 = EA[r, k + 1, 0]
        a2 = EA[r, k + 2, 0]
        a3 = EA[r, k + 3, 0]
        b0 = EB[nb, k]
        b1 = EB[nb, k + 1]
        b2 = EB[nb, k + 2]
        b3 = EB[nb, k + 3]
        for j in range(N):
            m0 = max(np.int8(a0 + b0[j]), np.int8(a1 + b1[j]))
            m1 = max(np.int8(a2 + b2[j]), np.int8(a3 + b3[j]))
            pm[j] = max(pm[j], max(m0, m1))
        k += 4
    for kk in range(k, k1):
        a0 = EA[r, kk, 0]
        b0 = EB[nb, kk]
        for j in range(N):
            pm[j] = max(pm[j], np.int8(a0 + b0[j]))


@numba.njit(cache=True)
def _pmax8x4(EA, EB, r, nb, k0, k1, pm):
    """:func:`_pmax8` for the four rows r..r+3 at once (pm (4, N)): each B load serves four."""
    N = pm.shape[1]
    p0 = pm[0]
    p1 = pm[1]
    p2 = pm[2]
    p3 = pm[3]
    for j in range(N):
        p0[j] = -128
        p1[j] = -128
        p2[j] = -128
        p3[j] = -128
    k = k0
    while k + 2 <= k1:
        a0 = EA[r, k, 0]
        a1 = EA[r, k + 1, 0]
        c0 = EA[r + 1, k, 0]
        c1 = EA[r + 1, k + 1, 0]
        d0 = EA[r + 2, k, 0]
        d1 = EA[r + 2, k + 1, 0]
        e0 = EA[r + 3, k, 0]
        e1 = EA[r + 3, k + 1, 0]
        b0 = EB[nb, k]
        b1 = EB[nb, k + 1]
        for j in range(N):
            x0 = b0[j]
            x1 = b1[j]
            p0[j] = max(p0[j], max(np.int8(a0 + x0), np.int8(a1 + x1)))
            p1[j] = max(p1[j], max(np.int8(c0 + x0), np.int8(c1 + x1)))
            p2[j] = max(p2[j], max(np.int8(d0 + x0), np.int8(d1 + x1)))
            p3[j] = max(p3[j], max(np.int8(e0 + x0), np.int8(e1 + x1)))
        k += 2
    for kk in range(k, k1):
        a0 = EA[r, kk, 0]
        c0 = EA[r + 1, kk, 0]
        d0 = EA[r + 2, kk, 0]
        e0 = EA[r + 3, kk, 0]
        b0 = EB[nb, kk]
        for j in range(N):
            x0 = b0[j]
            p0[j] = max(p0[j], np.int8(a0 + x0))
            p1[j] = max(p1[j], np.int8(c0 + x0))
            p2[j] = max(p2[j], np.int8(d0 + x0))
            p3[j] = max(p3[j], np.int8(e0 + x0))


@numba.njit(cache=True)
def _pmax16(EA, EB, r, nb, k0, k1, pm):
    """:func:`_pmax8` in int16."""
    N = pm.shape[0]
    for j in range(N):
        pm[j] = -32768
    k = k0
    while k + 4 <= k1:
        a0 = EA[r, k, 0]
        a1 = EA[r, k + 1, 0]
        a2 = EA[r, k + 2, 0]
        a3 = EA[r, k + 3, 0]
        b0 = EB[nb, k]
        b1 = EB[nb, k + 1]
        b2 = EB[nb, k + 2]
        b3 = EB[nb, k + 3]
        for j in range(N):
            m0 = max(np.int16(a0 + b0[j]), np.int16(a1 + b1[j]))
            m1 = max(np.int16(a2 + b2[j]), np.int16(a3 + b3[j]))
            pm[j] = max(pm[j], max(m0, m1))
        k += 4
    for kk in range(k, k1):
        a0 = EA[r, kk, 0]
        b0 = EB[nb, kk]
        for j in range(N):
            pm[j] = max(pm[j], np.int16(a0 + b0[j]))


@numba.njit(cache=True)
def _terms(VA, VB, r, nb, k0, k1, scale, acc):
    """acc[j] = sum over k0 <= k < k1 of trunc(VA[r, k] * VB[nb, k, j] * scale[j]), exact."""
    N = acc.shape[0]
    for j in range(N):
        acc[j] = 0
    k = k0
    while k + 4 <= k1:
        a0 = VA[r, k, 0]
        a1 = VA[r, k + 1, 0]
        a2 = VA[r, k + 2, 0]
        a3 = VA[r, k + 3, 0]
        b0 = VB[nb, k]
        b1 = VB[nb, k + 1]
        b2 = VB[nb, k + 2]
        b3 = VB[nb, k + 3]
        for j in range(N):
            s = scale[j]
            acc[j] += np.trunc(a0 * b0[j] * s)  # one term at a time: each joins in acc's dtype
            acc[j] += np.trunc(a1 * b1[j] * s)
            acc[j] += np.trunc(a2 * b2[j] * s)
            acc[j] += np.trunc(a3 * b3[j] * s)
        k += 4
    for kk in range(k, k1):
        a0 = VA[r, kk, 0]
        b0 = VB[nb, kk]
        for j in range(N):
            acc[j] += np.trunc(a0 * b0[j] * scale[j])


@numba.njit(cache=True)
def _terms4(VA, VB, r, nb, k0, k1, scale, acc):
    """:func:`_terms` for the four rows r..r+3 at once (scale, acc (4, N)): each B load
    serves four rows."""
    N = acc.shape[1]
    A0 = acc[0]
    A1 = acc[1]
    A2 = acc[2]
    A3 = acc[3]
    S0 = scale[0]
    S1 = scale[1]
    S2 = scale[2]
    S3 = scale[3]
    for j in range(N):
        A0[j] = 0
        A1[j] = 0
        A2[j] = 0
        A3[j] = 0
    k = k0
    while k + 2 <= k1:
        a0 = VA[r, k, 0]
        a1 = VA[r, k + 1, 0]
        c0 = VA[r + 1, k, 0]
        c1 = VA[r + 1, k + 1, 0]
        d0 = VA[r + 2, k, 0]
        d1 = VA[r + 2, k + 1, 0]
        e0 = VA[r + 3, k, 0]
        e1 = VA[r + 3, k + 1, 0]
        b0 = VB[nb, k]
        b1 = VB[nb, k + 1]
        for j in range(N):
            x0 = b0[j]
            x1 = b1[j]
            A0[j] += np.trunc(a0 * x0 * S0[j])  # one term at a time: each joins in acc's dtype
            A0[j] += np.trunc(a1 * x1 * S0[j])
            A1[j] += np.trunc(c0 * x0 * S1[j])
            A1[j] += np.trunc(c1 * x1 * S1[j])
            A2[j] += np.trunc(d0 * x0 * S2[j])
            A2[j] += np.trunc(d1 * x1 * S2[j])
            A3[j] += np.trunc(e0 * x0 * S3[j])
            A3[j] += np.trunc(e1 * x1 * S3[j])
        k += 2
    for kk in range(k, k1):
        a0 = VA[r, kk, 0]
        c0 = VA[r + 1, kk, 0]
        d0 = VA[r + 2, kk, 0]
        e0 = VA[r + 3, kk, 0]
        b0 = VB[nb, kk]
        for j in range(N):
            x0 = b0[j]
            A0[j] += np.trunc(a0 * x0 * S0[j])
            A1[j] += np.trunc(c0 * x0 * S1[j])
            A2[j] += np.trunc(d0 * x0 * S2[j])
            A3[j] += np.trunc(e0 * x0 * S3[j])


@numba.njit(cache=True)
def _value_bits(v, acc_e, acc_m, nan_bits):
    """Accumulator bits (f32 or f16 layout) of a value the accumulator holds exactly."""
    if math.isnan(v):
        return np.int64(nan_bits)
    emask = (1 << acc_e) - 1
    bias = (1 << (acc_e - 1)) - 1
    sign = np.int64(1) << (acc_e + acc_m) if math.copysign(1.0, v) < 0 else np.int64(0)
    a = abs(v)
    if a == np.inf:
        return sign | (np.int64(emask) << acc_m)
    if a < math.ldexp(1.0, 1 - bias):  # zero or subnormal: a multiple of 2**(emin - acc_m)
        return sign | np.int64(math.ldexp(a, acc_m - (1 - bias)))
    m, e = math.frexp(a)  # a = m * 2**e, 0.5 <= m < 1
    frac = np.int64(math.ldexp(m, acc_m + 1)) - (np.int64(1) << acc_m)
    return sign | (np.int64(e - 1 + bias) << acc_m) | frac


@numba.njit(cache=True)
def _emax_row(d, cprev, pm, bz, emax, scale, ez, zrow, thr, demin, F, elo, ehi):
    """e_max of one row's block per column: the largest of the products' exponents pm
    (where > thr, i.e. some product is not zero / special), C's exponent (e_zero if C is
    zero or special; C = d, kept in cprev) and e_zero when the column's block has a zero
    operand (bz[j], or zrow = e_zero for the row's); scale = 2**(F - e_max) clamped to
    elo..ehi (exact in scale's dtype).  Integer arithmetic in int32 (16 lanes)."""
    N = d.shape[0]
    ez = np.int32(ez)
    zrow = np.int32(zrow)
    thr = np.int32(thr)
    demin = np.int32(demin)
    F = np.int32(F)
    elo = np.int32(elo)
    ehi = np.int32(ehi)
    for j in range(N):
        c = d[j]
        cprev[j] = c
        ec = max(_fexp(c), demin)
        e0 = ez if (c == 0) | (not math.isfinite(c)) else ec
        e0 = max(e0, ez if bz[j] else zrow)
        pj = np.int32(pm[j])
        em = max(e0, pj) if pj > thr else e0
        emax[j] = em
        scale[j] = _pow2_like(scale[j], min(max(np.int32(F - em), elo), ehi))


@numba.njit(cache=True)
def _round_row(d, cprev, acc, emax, F, demin, rnd_m, rz, largest, ovf, elo, ehi):
    """D of one row's block: C's aligned, truncated term joins the exact sum acc; then one
    normalisation and rounding of S * 2**(e_max - F) to rnd_m bits (RZ or RNE), subnormals
    kept, overflow to ``ovf``, +0 for zero.  Arithmetic in d's dtype, every step exact
    (powers of two split where one would leave the normal range).  Returns how many C
    were NaN / Inf (their D is redone by the caller)."""
    N = d.shape[0]
    F = np.int32(F)
    demin = np.int32(demin)
    rnd_m = np.int32(rnd_m)
    elo = np.int32(elo)
    ehi = np.int32(ehi)
    nspec = np.int32(0)
    for j in range(N):
        em = emax[j]
        fe = np.int32(F - em)
        c = cprev[j]
        nspec += np.int32(not math.isfinite(c))
        e1 = min(max(fe, elo), ehi)
        tc = np.trunc(c * _pow2_like(c, e1) * _pow2_like(c, np.int32(fe - e1)))
        S = acc[j] + tc  # exact: integers below 2**24 (float32) or 2**53 (float64)
        mag = abs(S)
        top = max(np.int32(_fexp(mag) - fe), demin)  # exponent of the result's unit bit
        eq = min(max(np.int32(rnd_m - top - fe), elo), ehi)
        q = mag * _pow2_like(mag, eq)  # exact, below 2**(rnd_m + 1)
        rr = np.trunc(q) if rz else _rint_nonneg(q)
        e4 = np.int32(top - rnd_m)
        split = np.int32(32) if e4 < elo else np.int32(0)  # a subnormal result: scale in two steps
        res = rr * _pow2_like(rr, np.int32(e4 + split)) * _pow2_like(rr, np.int32(-split))
        res = ovf if res > largest else res
        res = -res if S < 0 else res
        d[j] = res if rr != 0 else rr  # rr: +0
    return nspec


@numba.njit(cache=True, nogil=True)
def chain_kernel(t_lo, t_hi, VA, EA, EA8, AZ, AS, VB, EB, EB8, BZ, BS, BSany, SA, CA, SB, CB, rows_per_b,
                 tile_rows, kblk, blk0, nblk, dv, accbuf, scalebuf, elo, ehi, thr8,
                 F, e_zero, acc_e, acc_m, rnd_m, rz, sat, nan_bits, stage_nblk, scale_rows,
                 scale_cols, op, accf):
    """Tiles ``t_lo .. t_hi`` (of ``ntiles``; :func:`refmodel._parallel.parallel_ranges` runs the ranges
    on several threads).  Arguments as :func:`refmodel.numerics.accumulate._chain_kernel`, plus: VA (R, K, 1)
    and VB (NB, K, N) the operands' exact values (float32 or float64, one dtype); EA8 /
    EB8 their exponents in int8 when ``thr8`` > -128 (see :func:`exp8_threshold`), else
    EA / EB (int16) are used; ``tile_rows`` rows per parallel tile; dv (R, N): each
    chain's C on entry and its D on return, as values (accbuf's dtype); accbuf (tiles, 4, N) the block sums (float32 when
    they provably stay below 2**24, else float64); scalebuf (tiles, 4, N) of VA's dtype
    for 2**(F - e_max), its exponent clamped to elo..ehi.  Rows go four at a time."""
    R = VA.shape[0]
    N = VB.shape[2]
    bias = (1 << (acc_e - 1)) - 1
    demin = np.int32(1 - bias)  # exponent of the accumulator's smallest normal
    largest = dv.dtype.type(math.ldexp(2.0 - math.ldexp(1.0, -rnd_m), bias))
    ovf = largest if sat else dv.dtype.type(np.inf)
    narrow = thr8 > -128
    thr = np.int32(thr8) if narrow else np.int32(-BIG + 255)
    ez = np.int32(e_zero)
    tiles_per_b = (rows_per_b + tile_rows - 1) // tile_rows
    for t in range(t_lo, t_hi):
        nb = t // tiles_per_b
        r0 = nb * rows_per_b + (t % tiles_per_b) * tile_rows
        r1 = min(r0 + tile_rows, (nb + 1) * rows_per_b)
        acc4 = accbuf[t]
        scale4 = scalebuf[t]
        emax4 = np.empty((4, N), np.int32)
        pm8 = np.empty((4, N), np.int8)
        pm16 = np.empty(N, np.int16)
        cprev4 = np.empty((4, N), dv.dtype)
        for bi in range(nblk):
            blk = blk0 + bi
            k0 = blk * kblk
            k1 = k0 + kblk
            bz = BZ[nb, blk]
            bsany = BSany[nb, blk]
            for g in range(r0, r1, 4):
                nr = min(4, r1 - g)
                if narrow and nr == 4:
                    _pmax8x4(EA8, EB8, g, nb, k0, k1, pm8)
                for i in range(nr):
                    r = g + i
                    d = dv[r]
                    if stage_nblk > 0 and bi % stage_nblk == 0:
                        for j in range(N):
                            d[j] = 0.0  # each stage starts with scale-d = 0
                    # e_max: the largest of the products' exponents, C's (e_zero if C is
                    # zero) and e_zero when the block has a zero operand
                    if narrow and nr < 4:
                        _pmax8(EA8, EB8, r, nb, k0, k1, pm8[i])
                    elif not narrow:
                        _pmax16(EA, EB, r, nb, k0, k1, pm16)
                    zrow = ez if AZ[r, blk, 0] else np.int32(-BIG)
                    if narrow:
                        _emax_row(d, cprev4[i], pm8[i], bz, emax4[i], scale4[i], ez, zrow, thr,
                                  demin, F, elo, ehi)
                    else:
                        _emax_row(d, cprev4[i], pm16, bz, emax4[i], scale4[i], ez, zrow, thr,
                                  demin, F, elo, ehi)
                # the aligned, truncated products, summed exactly
                if nr == 4:
                    _terms4(VA, VB, g, nb, k0, k1, scale4, acc4)
                else:
                    for i in range(nr):
                        _terms(VA, VB, g + i, nb, k0, k1, scale4[i], acc4[i])
                for i in range(nr):
                    r = g + i
                    d = dv[r]
                    cprev = cprev4[i]
                    nspec = _round_row(d, cprev, acc4[i], emax4[i], F, demin, rnd_m, rz, largest, ovf,
                                       elo, ehi)
                    # NaN / Inf: redo the affected elements
                    if AS[r, blk, 0] or bsany or nspec > 0:
                        asp = AS[r, blk, 0]
                        bs = BS[nb, blk]
                        for j in range(N):
                            if asp or bs[j] or not math.isfinite(cprev[j]):
                                cb = _value_bits(np.float64(cprev[j]), acc_e, acc_m, nan_bits)
                                bits = _special_bits(r, nb, k0, k1, j, SA, CA, SB, CB, cb,
                                                     acc_e, acc_m, nan_bits)
                                d[j] = _acc_value(bits, acc_e, acc_m)
                    if stage_nblk > 0 and (bi + 1) % stage_nblk == 0:
                        st = bi // stage_nblk
                        sa_r = scale_rows[st, r]
                        for j in range(N):
                            accf[r, j] = promote_one(accf[r, j], d[j], sa_r, scale_cols[st, j], op)


def run_chain(A, B, rows_per_b: int, kblk: int, blk0: int, nblk: int, cbits: np.ndarray,
              out: np.ndarray, p, stage_nblk: int, scale_rows: np.ndarray,
              scale_cols: np.ndarray, op: int, accf: np.ndarray) -> None:
    """Run :func:`chain_kernel` for :func:`refmodel.numerics.accumulate.fdpa_chain` (which
    validated the arguments): A, B Decoded operands, results into ``out`` (and ``accf``)."""
    NB, _, N = B.sig.shape
    known = A.spec is not None and B.spec is not None
    # without the formats: float64 holds any product exactly, int16 any exponent
    vdt = value_dtype(A.spec, B.spec) if known else np.dtype(np.float64)
    thr8 = exp8_threshold(A.spec, B.spec) if known else None
    sum_bits = p.F + 2 + int(np.ceil(np.log2(kblk + 1)))  # kblk terms < 2**(F+2), C's < 2**(F+1)
    adt = np.dtype(np.float32 if vdt == np.float32 and sum_bits <= 24 else np.float64)
    elo, ehi = (-126, 127) if vdt == np.float32 else (-1022, 1023)
    threads = n_threads()
    tiles_per_b = min(rows_per_b, max(1, -(-4 * threads // NB)))  # >= 4 tiles a thread
    tile_rows = -(-rows_per_b // tiles_per_b)
    tiles_per_b = -(-rows_per_b // tile_rows)
    ntiles = NB * tiles_per_b
    spec = p.acc_spec
    if nblk == 0:
        out[...] = cbits
        return
    VA, EA8 = operand_arrays(A.sig, A.exp, A.mbits, vdt, thr8 is not None)
    VB, EB8 = operand_arrays(B.sig, B.exp, B.mbits, vdt, thr8 is not None)
    # C as values (exact: every f32 / f16 value is a float32); D's bits from D's values
    acc_dt = np.dtype(np.float32 if spec.bits == 32 else np.float16)
    ubits = np.dtype(np.uint32 if spec.bits == 32 else np.uint16)
    with np.errstate(invalid="ignore"):  # a signalling NaN C: its D is redone by the NaN rule
        dv = np.ascontiguousarray(cbits.astype(ubits).view(acc_dt), dtype=adt)
    _run(VA, EA8, VB, EB8, A, B, rows_per_b, tile_rows, kblk, blk0, nblk, dv, ntiles, N, adt, vdt,
         elo, ehi, thr8, p, spec, stage_nblk, scale_rows, scale_cols, op, accf)
    with np.errstate(invalid="ignore"):
        d = dv.astype(acc_dt)  # exact: D's values are the accumulator's
    bits = d.view(ubits).copy()
    bits[np.isnan(d)] = p.nan_bits
    out[...] = bits


def _run(VA, EA8, VB, EB8, A, B, rows_per_b, tile_rows, kblk, blk0, nblk, dv, ntiles, N, adt, vdt,
         elo, ehi, thr8, p, spec, stage_nblk, scale_rows, scale_cols, op, accf):
    """:func:`chain_kernel` with its scratch buffers and the binding's numbers."""
    parallel_ranges(chain_kernel, ntiles, VA, A.exp, EA8, A.any_zero, A.any_special, VB, B.exp, EB8,
                    B.any_zero, B.any_special, np.ascontiguousarray(B.any_special.any(axis=2)), A.sig, A.cls,
                    B.sig, B.cls, rows_per_b, tile_rows, kblk, blk0, nblk, dv,
                    np.empty((ntiles, 4, N), adt), np.empty((ntiles, 4, N), vdt), elo, ehi,
                    -128 if thr8 is None else thr8, p.F, p.e_zero, spec.ebits, spec.mbits,
                    p.round_mbits, p.rounding == "rz", p.overflow == "satfinite", p.nan_bits,
                    stage_nblk, scale_rows, scale_cols, op, accf)


def _register() -> None:
    """Offer this kernel to refmodel.numerics.accumulate (``fdpa_chain(kernel="fast")``), which never
    imports this module: refmodel.numerics imports it at start."""
    from . import accumulate

    accumulate._FAST_KERNEL["run_chain"] = run_chain


_register()
