"""The fast kernel of :func:`refmodel.numerics.accumulate.fdpa_chain`: the same truncated
fused dot products, computed with exact floating-point arithmetic that vectorises.

Same numerics as the integer kernel (``fdpa_chain(..., kernel="int")``) and the readable
formula :func:`refmodel.numerics.accumulate.fdpa`; tests/test_gemm_fast.py holds all three
bit-identical.  Why every step is exact:

* an operand's value ``v = sig * 2**(exp - mbits)`` is held in float32 when every product
  of two values is a float32 normal with at most 24 significant bits (e4m3, e5m2, f16:
  products of 8 to 22 bits between 2**-48 and 2**32; :func:`value_dtype`), else in
  float64 (bf16, tf32);
* e_max needs only exponent sums: int8 lanes (32 per AVX2, 64 per AVX-512 register) where the formats'
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
  C's term, the normalisation and the RZ / RNE rounding to ``round_mbits`` bits: where
  ``2**(F - e_max)`` and its inverse are normal and the result is normal (nearly always),
  C's term is one power-of-two scaling and ``trunc``, and the rounding is integer
  arithmetic on the bits of the exact sum |S| < 2**24 (RZ clears the low bits, RNE adds
  half a unit less one plus the last kept bit; a carry moves into the exponent as the
  rounding does), scaled back by ``2**(e_max - F)``; the other elements are found by cheap
  row-wide checks and redone by the general rule (power-of-two scalings split in two where
  one would leave the normal range, a magic-number round-to-nearest-even);
* NaN / Inf: a cheap per-block flag; only blocks holding a special operand or C are redone
  by the integer kernel's scalar rule;
* promotion (:func:`_promote_row`): fma, mul_add and fma_row_first are float32 products,
  sums and fused multiply-adds (``llvm.fma.f32``: one rounding, as ``promote_one``'s exact
  float64 emulation), which vectorise; fma_exact is ``promote_one``.

Loop order: threads over tiles of rows that share one B; for each block of K, every row of
the tile (the block of B stays in cache), rows four at a time so that each load of B
serves four rows; the loops over N are branch-free and vectorise: 8 float32 / int32 lanes
with AVX2 (32 int8 lanes for e_max), 16 with AVX-512.  Their any() flags are int32 sums or
min / max reductions (a bool reduction packs its lanes every step on AVX2), their integer
arithmetic stays 32-bit (numba widens integer sums to 64 bits; the bit tricks are
intrinsics).
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .._parallel import parallel_ranges, threads as n_threads
from .fdpa_special import BIG, _acc_value, _special_bits, _special_bits_rows
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


_VALUES_CHUNK = 1 << 15


@numba.njit(cache=True, nogil=True)
def _values_range(c_lo, c_hi, sig, exp, mbits, out, exp8, narrow):
    """Chunks ``c_lo .. c_hi`` of ``_VALUES_CHUNK`` elements of the flat arrays
    (:func:`refmodel._parallel.parallel_ranges` runs the ranges on several threads): out =
    sig * 2**(exp - mbits) (zero where sig is 0) and, if ``narrow``, exp8 = exp in int8
    (-BIG -> DEAD8).  Arithmetic in out's dtype (float32: 32-bit lanes), the power of two
    clamped to its normal range (only the zeros' -BIG reaches the clamp: :func:`value_dtype`
    keeps every value of a float32 operand normal)."""
    one = out.dtype.type(1.0)
    lo = np.int32(-126 if out.itemsize == 4 else -1022)
    hi = np.int32(127 if out.itemsize == 4 else 1023)
    mb = np.int32(mbits)
    i_lo = c_lo * _VALUES_CHUNK
    i_hi = min(c_hi * _VALUES_CHUNK, sig.shape[0])
    # slices: loops from 0 carry no negative-index checks (and vectorise)
    sg = sig[i_lo:i_hi]
    ex = exp[i_lo:i_hi]
    ov = out[i_lo:i_hi]
    for i in range(sg.shape[0]):
        e = min(max(np.int32(ex[i] - mb), lo), hi)
        ov[i] = ov.dtype.type(sg[i]) * _pow2_like(one, e)
    if narrow:
        e8 = exp8[i_lo:i_hi]
        for i in range(ex.shape[0]):
            e16 = ex[i]
            e8[i] = np.int8(DEAD8 if e16 == -BIG else e16)


def operand_arrays(sig: np.ndarray, exp: np.ndarray, mbits: int, dtype: np.dtype,
                   narrow: bool) -> tuple[np.ndarray, np.ndarray]:
    """(exact values in ``dtype``, int8 exponents or a (1, 1, 1) placeholder) of decoded
    significands and exponents of shape (P, K, Q)."""
    out = np.empty(sig.shape, dtype)
    exp8 = np.empty(sig.shape if narrow else (1, 1, 1), np.int8)
    n = out.size
    # one piece a thread, at least 4 chunks: a chunk is a few microseconds of work
    parallel_ranges(_values_range, -(-n // _VALUES_CHUNK), np.ascontiguousarray(sig).reshape(-1),
                    np.ascontiguousarray(exp).reshape(-1), mbits, out.reshape(-1), exp8.reshape(-1),
                    narrow, pieces_per_thread=1, min_piece=4, work=n)
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


@intrinsic
def _as_int(typingctx, x):
    """The bits of a float32 / float64 as int32 / int64."""
    lay = _float_layout(x)
    if lay is None:
        return None
    n = lay[0]
    ity = types.int32 if n == 32 else types.int64

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(n))

    return ity(x), codegen


@intrinsic
def _as_float(typingctx, like, i):
    """The float of ``like``'s type whose bits are the low 32 / 64 bits of the integer ``i``."""
    lay = _float_layout(like)
    if lay is None or not isinstance(i, types.Integer):
        return None
    n, _, _, fty = lay

    def codegen(context, builder, sig, args):
        v = context.cast(builder, args[1], sig.args[1], types.int64)
        v = builder.trunc(v, ir.IntType(n)) if n < 64 else v
        return builder.bitcast(v, fty)

    return like(like, i), codegen


@intrinsic
def _round_low_bits(typingctx, x, drop, rne):
    """A float32 / float64 ``x >= 0`` (zero or normal) rounded to ``mbits - drop``
    mantissa bits on its bits: the low ``drop`` bits cleared (RZ, ``rne`` False), or first
    increased by half a unit less one plus the last kept bit (RNE, for ``drop`` >= 1; a
    carry moves into the exponent as the rounding does).  Integer arithmetic in the
    float's width."""
    lay = _float_layout(x)
    if lay is None or not isinstance(drop, types.Integer) or not isinstance(rne, types.Boolean):
        return None
    n, _, _, fty = lay

    def codegen(context, builder, sig, args):
        it = ir.IntType(n)
        b = builder.bitcast(args[0], it)
        dr = context.cast(builder, args[1], sig.args[1], types.int64)
        dr = builder.trunc(dr, it) if n < 64 else dr
        one = ir.Constant(it, 1)
        unit = builder.shl(one, dr)
        keep = builder.neg(unit)  # ~(unit - 1)
        last = builder.and_(builder.lshr(b, dr), one)
        up = builder.add(builder.sub(builder.lshr(unit, one), one), last)
        up = builder.select(args[2], up, ir.Constant(it, 0))
        return builder.bitcast(builder.and_(builder.add(b, up), keep), fty)

    return x(x, drop, rne), codegen


@intrinsic
def _fma32(typingctx, x, y, z):
    """RN32(x * y + z) with one rounding, float32 operands: LLVM's ``llvm.fma.f32`` (an FMA
    instruction where the target has one, else the C library's correctly rounded ``fmaf``),
    which vectorises.  Equal to :func:`refmodel.numerics.promotion.fma_f32` on float32 values
    (IEEE fused multiply-add, NaN / Inf / zero signs included)."""
    if not (x == types.float32 and y == types.float32 and z == types.float32):
        return None

    def codegen(context, builder, sig, args):
        f = ir.FloatType()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f, [f, f, f]), "llvm.fma.f32")
        return builder.call(fn, list(args))

    return types.float32(x, y, z), codegen


@intrinsic
def _count_if(typingctx, count, cond):
    """int32 ``count + (1 if cond else 0)`` in 32-bit arithmetic: an any() / sum() over a loop
    that vectorises to one subtraction of the compare mask a vector (a bool accumulator
    packs its lanes every step; numba's integer sums are 64-bit)."""
    if count != types.int32 or not isinstance(cond, types.Boolean):
        return None

    def codegen(context, builder, sig, args):
        return builder.add(args[0], builder.zext(args[1], ir.IntType(32)))

    return types.int32(count, cond), codegen


@numba.njit(cache=True)
def _pmax4(EA, EB, ra, rb, rc, rd, nb, k0, k1, pm):
    """pm[i, j] = max over k0 <= k < k1 of EA[r_i, k] + EB[nb, k, j] for the four rows
    ra, rb, rc, rd (repeat a row to fill them), in the exponents' dtype (int8 or int16):
    each B load serves four rows."""
    N = pm.shape[1]
    t = pm.dtype.type
    p0 = pm[0]
    p1 = pm[1]
    p2 = pm[2]
    p3 = pm[3]
    lo = t(-128) if pm.itemsize == 1 else t(-32768)
    for j in range(N):
        p0[j] = lo
        p1[j] = lo
        p2[j] = lo
        p3[j] = lo
    k = k0
    while k + 2 <= k1:
        a0 = EA[ra, k, 0]
        a1 = EA[ra, k + 1, 0]
        c0 = EA[rb, k, 0]
        c1 = EA[rb, k + 1, 0]
        d0 = EA[rc, k, 0]
        d1 = EA[rc, k + 1, 0]
        e0 = EA[rd, k, 0]
        e1 = EA[rd, k + 1, 0]
        b0 = EB[nb, k]
        b1 = EB[nb, k + 1]
        for j in range(N):
            x0 = b0[j]
            x1 = b1[j]
            p0[j] = max(p0[j], max(t(a0 + x0), t(a1 + x1)))
            p1[j] = max(p1[j], max(t(c0 + x0), t(c1 + x1)))
            p2[j] = max(p2[j], max(t(d0 + x0), t(d1 + x1)))
            p3[j] = max(p3[j], max(t(e0 + x0), t(e1 + x1)))
        k += 2
    for kk in range(k, k1):
        a0 = EA[ra, kk, 0]
        c0 = EA[rb, kk, 0]
        d0 = EA[rc, kk, 0]
        e0 = EA[rd, kk, 0]
        b0 = EB[nb, kk]
        for j in range(N):
            x0 = b0[j]
            p0[j] = max(p0[j], t(a0 + x0))
            p1[j] = max(p1[j], t(c0 + x0))
            p2[j] = max(p2[j], t(d0 + x0))
            p3[j] = max(p3[j], t(e0 + x0))


@numba.njit(cache=True)
def _terms4(VA, VB, ra, rb, rc, rd, nb, k0, k1, scale, acc):
    """acc[i, j] = sum over k0 <= k < k1 of trunc(VA[r_i, k] * VB[nb, k, j] * scale[i, j]),
    exact, for the four rows ra, rb, rc, rd (repeat a row to fill them; scale, acc (4, N)):
    each B load serves four rows."""
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
        a0 = VA[ra, k, 0]
        a1 = VA[ra, k + 1, 0]
        c0 = VA[rb, k, 0]
        c1 = VA[rb, k + 1, 0]
        d0 = VA[rc, k, 0]
        d1 = VA[rc, k + 1, 0]
        e0 = VA[rd, k, 0]
        e1 = VA[rd, k + 1, 0]
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
        a0 = VA[ra, kk, 0]
        c0 = VA[rb, kk, 0]
        d0 = VA[rc, kk, 0]
        e0 = VA[rd, kk, 0]
        b0 = VB[nb, kk]
        for j in range(N):
            x0 = b0[j]
            A0[j] += np.trunc(a0 * x0 * S0[j])
            A1[j] += np.trunc(c0 * x0 * S1[j])
            A2[j] += np.trunc(d0 * x0 * S2[j])
            A3[j] += np.trunc(e0 * x0 * S3[j])


@numba.njit(cache=True)
def _pmax4_rows(EA, EB, BR, ra, rb, rc, rd, k0, k1, pm):
    """:func:`_pmax4` of a row-gathered B (EB (1, rows, N)): term k of row r_i meets B's row
    ``BR[r_i, k]``."""
    N = pm.shape[1]
    t = pm.dtype.type
    p0 = pm[0]
    p1 = pm[1]
    p2 = pm[2]
    p3 = pm[3]
    lo = t(-128) if pm.itemsize == 1 else t(-32768)
    for j in range(N):
        p0[j] = lo
        p1[j] = lo
        p2[j] = lo
        p3[j] = lo
    for k in range(k0, k1):
        a0 = EA[ra, k, 0]
        c0 = EA[rb, k, 0]
        d0 = EA[rc, k, 0]
        e0 = EA[rd, k, 0]
        b0 = EB[0, BR[ra, k]]
        b1 = EB[0, BR[rb, k]]
        b2 = EB[0, BR[rc, k]]
        b3 = EB[0, BR[rd, k]]
        for j in range(N):
            p0[j] = max(p0[j], t(a0 + b0[j]))
            p1[j] = max(p1[j], t(c0 + b1[j]))
            p2[j] = max(p2[j], t(d0 + b2[j]))
            p3[j] = max(p3[j], t(e0 + b3[j]))


@numba.njit(cache=True)
def _terms4_rows(VA, VB, BR, ra, rb, rc, rd, k0, k1, scale, acc):
    """:func:`_terms4` of a row-gathered B (VB (1, rows, N)): term k of row r_i multiplies B's
    row ``BR[r_i, k]``."""
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
    for k in range(k0, k1):
        a0 = VA[ra, k, 0]
        c0 = VA[rb, k, 0]
        d0 = VA[rc, k, 0]
        e0 = VA[rd, k, 0]
        b0 = VB[0, BR[ra, k]]
        b1 = VB[0, BR[rb, k]]
        b2 = VB[0, BR[rc, k]]
        b3 = VB[0, BR[rd, k]]
        for j in range(N):
            A0[j] += np.trunc(a0 * b0[j] * S0[j])
            A1[j] += np.trunc(c0 * b1[j] * S1[j])
            A2[j] += np.trunc(d0 * b2[j] * S2[j])
            A3[j] += np.trunc(e0 * b3[j] * S3[j])


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
    elo..ehi (exact in scale's dtype).  Integer arithmetic in int32.  Returns (whether a C
    is NaN / Inf, whether some column's e_max lies outside the range where 2**(F - e_max) and its inverse are normal: then
    :func:`_round_row` looks for the columns it must redo).  The flags are min / max
    reductions, which vectorise."""
    N = d.shape[0]
    ez = np.int32(ez)
    zrow = np.int32(zrow)
    thr = np.int32(thr)
    demin = np.int32(demin)
    F = np.int32(F)
    elo = np.int32(elo)
    ehi = np.int32(ehi)
    # the e_max where 2**(F - e_max) (scale's dtype) and its inverse are both normal
    lo_ok = np.int32(F + max(elo, -ehi))
    hi_ok = np.int32(F + min(ehi, -elo))
    fmax = np.int32(-BIG)  # the largest exponent field of C: above 127 / 1023 for NaN / Inf
    emlo = np.int32(BIG)
    emhi = np.int32(-BIG)
    for j in range(N):
        c = d[j]
        cprev[j] = c
        fc = _fexp(c)
        fmax = max(fmax, fc)
        e0 = ez if (c == 0) | (not math.isfinite(c)) else max(fc, demin)
        e0 = max(e0, ez if bz[j] else zrow)
        pj = np.int32(pm[j])
        em = max(e0, pj) if pj > thr else e0
        emax[j] = em
        scale[j] = _pow2_like(scale[j], min(max(np.int32(F - em), elo), ehi))
        emlo = min(emlo, em)
        emhi = max(emhi, em)
    spec = fmax > (127 if d.itemsize == 4 else 1023)
    clamp = (emlo < lo_ok) | (emhi > hi_ok)
    return spec, clamp


@numba.njit(cache=True)
def _round_row(d, cprev, acc, emax, scale, clamp, F, demin, rnd_m, rz, largest, ovf, elo, ehi):
    """D of one row's block: C's aligned, truncated term joins the exact sum acc; then one
    normalisation and rounding of S * 2**(e_max - F) to rnd_m bits (RZ or RNE), subnormals
    kept, overflow to ``ovf``, +0 for zero.  Arithmetic in d's dtype, every step exact.

    A branch-free loop over N does the common case: ``2**(F - e_max)`` (``scale``, from
    :func:`_emax_row`) and its inverse both normal, and a normal result (``|S| >=
    2**(demin + F - e_max)``, or S = 0).  The rounding to rnd_m bits is then one on the bits
    of |S| (exact in d's dtype, :func:`_round_low_bits`), and ``2**(e_max - F)`` scales the
    result exactly.  The other elements (looked for where the loop saw a subnormal result
    or :func:`_emax_row` an e_max outside that range, ``clamp``) are redone by the general
    rule: powers of two split where one would leave the normal range."""
    N = d.shape[0]
    F = np.int32(F)
    demin = np.int32(demin)
    rnd_m = np.int32(rnd_m)
    elo = np.int32(elo)
    ehi = np.int32(ehi)
    one = d.dtype.type(1.0)
    mb_f = 23 if d.itemsize == 4 else 52  # mantissa bits of d's dtype
    drop = np.int32(mb_f - rnd_m)  # low bits rounded off |S|
    rne = not rz and drop > 0
    inv_bits = np.int64(2 * (127 if mb_f == 23 else 1023)) << mb_f  # bits(2**-e) = inv_bits - bits(2**e)
    tiny = _pow2_like(one, demin)  # the smallest normal accumulator value
    slow = np.int32(1 if clamp else 0)
    for j in range(N):
        sc = d.dtype.type(scale[j])
        S = acc[j] + np.trunc(cprev[j] * sc)  # exact
        mag = abs(S)
        r = _round_low_bits(mag, drop, rne) * _as_float(sc, inv_bits - _as_int(sc))
        r = ovf if r > largest else r
        d[j] = -r if S < 0 else r
        slow = _count_if(slow, (mag < tiny * sc) & (mag != 0))  # a subnormal result
    if slow != 0:
        lo_ok = np.int32(F + max(elo, -ehi))
        hi_ok = np.int32(F + min(ehi, -elo))
        for j in range(N):
            em = emax[j]
            sc = d.dtype.type(scale[j])
            c = cprev[j]
            a = acc[j]
            mag = abs(a + np.trunc(c * sc))
            if not ((((em < lo_ok) | (em > hi_ok)) & ((c != 0) | (a != 0))) | ((mag < tiny * sc) & (mag != 0))):
                continue
            fe = np.int32(F - em)
            e1 = min(max(fe, elo), ehi)
            tc = np.trunc(c * _pow2_like(c, e1) * _pow2_like(c, np.int32(fe - e1)))
            S = a + tc  # exact: integers below 2**24 (float32) or 2**53 (float64)
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


@numba.njit(cache=True)
def _promote_row(acc, d, sa, sb, op):
    """acc[j] = promote_one(acc[j], d[j], sa, sb[j], op) for one row (float32 acc, sb; D's
    values d, float32 or float64 holding float32 values).  Ops 0 "fma" RN32(RN32(sa*sb) * D +
    acc), 1 "mul_add" RN32(acc + RN32(RN32(sa*sb) * D)) and 3 "fma_row_first" RN32(sb *
    RN32(sa*D) + acc) in one branch-free loop of float32 arithmetic and :func:`_fma32` (the
    roundings promote_one computes exactly in float64); op 2 "fma_exact" by promote_one.  A
    NaN result is the canonical 0x7FFFFFFF."""
    N = acc.shape[0]
    if op == 2:
        for j in range(N):
            acc[j] = promote_one(acc[j], d[j], sa, sb[j], op)
        return
    nan = _as_float(np.float32(0), 0x7FFFFFFF)
    row_first = op == 3
    mul_add = op == 1
    for j in range(N):
        p = np.float32(d[j])
        x = sa * p if row_first else sa * sb[j]
        y = sb[j] if row_first else p
        r = acc[j] + x * y if mul_add else _fma32(x, y, acc[j])
        acc[j] = r if r == r else nan


@numba.njit(cache=True, nogil=True)
def chain_kernel(t_lo, t_hi, VA, EA, EA8, AZ, AS, VB, EB, EB8, BZ, BS, BSany, SA, CA, SB, CB, BR, gathered, rows_per_b,
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
    for 2**(F - e_max), its exponent clamped to elo..ehi.  Rows go four at a time.

    ``gathered``: B is row-gathered (:class:`refmodel.numerics.accumulate.RowGathered`): VB, EB, EB8,
    SB, CB hold B's distinct rows (1, rows, N), term k of row r multiplies row ``BR[r, k]``, and
    the block flags BZ, BS, BSany are row r's (indexed by r, not by B); ``rows_per_b`` is R."""
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
        pm16 = np.empty((4, N) if not narrow else (4, 1), np.int16)
        cprev4 = np.empty((4, N), dv.dtype)
        flags = np.empty((4, 2), np.bool_)
        for bi in range(nblk):
            blk = blk0 + bi
            k0 = blk * kblk
            k1 = k0 + kblk
            bz = BZ[nb, blk]
            bsany = BSany[nb, blk]
            for g in range(r0, r1, 4):
                nr = min(4, r1 - g)
                # four rows (the last repeated where fewer are left): e_max's products
                rb = min(g + 1, r1 - 1)
                rc = min(g + 2, r1 - 1)
                rd = min(g + 3, r1 - 1)
                if gathered:
                    if narrow:
                        _pmax4_rows(EA8, EB8, BR, g, rb, rc, rd, k0, k1, pm8)
                    else:
                        _pmax4_rows(EA, EB, BR, g, rb, rc, rd, k0, k1, pm16)
                elif narrow:
                    _pmax4(EA8, EB8, g, rb, rc, rd, nb, k0, k1, pm8)
                else:
                    _pmax4(EA, EB, g, rb, rc, rd, nb, k0, k1, pm16)
                for i in range(nr):
                    r = g + i
                    d = dv[r]
                    if stage_nblk > 0 and bi % stage_nblk == 0:
                        for j in range(N):
                            d[j] = 0.0  # each stage starts with scale-d = 0
                    # e_max: the largest of the products' exponents, C's (e_zero if C is
                    # zero) and e_zero when the block has a zero operand
                    zrow = ez if AZ[r, blk, 0] else np.int32(-BIG)
                    bzr = BZ[r, blk] if gathered else bz
                    if narrow:
                        spec, clamp = _emax_row(d, cprev4[i], pm8[i], bzr, emax4[i], scale4[i], ez, zrow, thr,
                                                demin, F, elo, ehi)
                    else:
                        spec, clamp = _emax_row(d, cprev4[i], pm16[i], bzr, emax4[i], scale4[i], ez, zrow, thr,
                                                demin, F, elo, ehi)
                    flags[i, 0] = spec
                    flags[i, 1] = clamp
                for i in range(nr, 4):  # rows past nr: a copy of the last row's, results unused
                    for j in range(N):
                        scale4[i, j] = scale4[nr - 1, j]
                # the aligned, truncated products, summed exactly
                if gathered:
                    _terms4_rows(VA, VB, BR, g, rb, rc, rd, k0, k1, scale4, acc4)
                else:
                    _terms4(VA, VB, g, rb, rc, rd, nb, k0, k1, scale4, acc4)
                for i in range(nr):
                    r = g + i
                    d = dv[r]
                    cprev = cprev4[i]
                    _round_row(d, cprev, acc4[i], emax4[i], scale4[i], flags[i, 1], F, demin, rnd_m, rz, largest,
                               ovf, elo, ehi)
                    # NaN / Inf: redo the affected elements
                    if AS[r, blk, 0] or (BSany[r, blk] if gathered else bsany) or flags[i, 0]:
                        asp = AS[r, blk, 0]
                        bs = BS[r if gathered else nb, blk]
                        for j in range(N):
                            if asp or bs[j] or not math.isfinite(cprev[j]):
                                cb = _value_bits(np.float64(cprev[j]), acc_e, acc_m, nan_bits)
                                if gathered:
                                    bits = _special_bits_rows(r, k0, k1, j, SA, CA, SB, CB, BR, cb,
                                                              acc_e, acc_m, nan_bits)
                                else:
                                    bits = _special_bits(r, nb, k0, k1, j, SA, CA, SB, CB, cb,
                                                         acc_e, acc_m, nan_bits)
                                d[j] = _acc_value(bits, acc_e, acc_m)
                    if stage_nblk > 0 and (bi + 1) % stage_nblk == 0:
                        st = bi // stage_nblk
                        _promote_row(accf[r], d, scale_rows[st, r], scale_cols[st], op)


#: the kernel's B-row array when B is not row-gathered (never read)
_NO_ROWS = np.zeros((1, 1), np.int32)


def run_chain(A, B, rows_per_b: int, kblk: int, blk0: int, nblk: int, cbits: np.ndarray,
              out: np.ndarray, p, stage_nblk: int, scale_rows: np.ndarray,
              scale_cols: np.ndarray, op: int, accf: np.ndarray) -> None:
    """Run :func:`chain_kernel` for :func:`refmodel.numerics.accumulate.fdpa_chain` (which
    validated the arguments): A Decoded, B Decoded or row-gathered
    (:class:`refmodel.numerics.accumulate.RowGathered`: then every row has its own B, ``rows_per_b``
    is 1 and the kernel reads B's rows through the gather), results into ``out`` (and ``accf``)."""
    rows = getattr(B, "rows", None)          # a RowGathered B (duck-typed: accumulate is not imported)
    if rows is not None:
        flags = (B.any_zero, B.any_special)
        B = B.base
        rows_per_b = A.sig.shape[0]           # the kernel's tiles: every row against the one base B
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
         elo, ehi, thr8, p, spec, stage_nblk, scale_rows, scale_cols, op, accf,
         None if rows is None else (rows,) + flags)
    with np.errstate(invalid="ignore"):
        d = dv.astype(acc_dt)  # exact: D's values are the accumulator's
    bits = d.view(ubits).copy()
    bits[np.isnan(d)] = p.nan_bits
    out[...] = bits


def _run(VA, EA8, VB, EB8, A, B, rows_per_b, tile_rows, kblk, blk0, nblk, dv, ntiles, N, adt, vdt,
         elo, ehi, thr8, p, spec, stage_nblk, scale_rows, scale_cols, op, accf, gather=None):
    """:func:`chain_kernel` with its scratch buffers and the binding's numbers.  The scale
    vectors go in writeable (a read-only broadcast view would be another type: a second
    compile of the kernel for promoted chains).  ``gather``: (rows, any_zero, any_special) of a
    row-gathered B, or None."""
    scale_rows, scale_cols = (x if x.flags.writeable else x.copy() for x in (scale_rows, scale_cols))
    if gather is None:
        BR, BZ, BS = _NO_ROWS, B.any_zero, B.any_special
    else:
        BR, BZ, BS = gather
    parallel_ranges(chain_kernel, ntiles, VA, A.exp, EA8, A.any_zero, A.any_special, VB, B.exp, EB8,
                    BZ, BS, np.ascontiguousarray(BS.any(axis=2)), A.sig, A.cls,
                    B.sig, B.cls, BR, gather is not None, rows_per_b, tile_rows, kblk, blk0, nblk, dv,
                    np.empty((ntiles, 4, N), adt), np.empty((ntiles, 4, N), vdt), elo, ehi,
                    -128 if thr8 is None else thr8, p.F, p.e_zero, spec.ebits, spec.mbits,
                    p.round_mbits, p.rounding == "rz", p.overflow == "satfinite", p.nan_bits,
                    stage_nblk, scale_rows, scale_cols, op, accf, work=ntiles * tile_rows * N * nblk * kblk)


def _register() -> None:
    """Offer this kernel to refmodel.numerics.accumulate (``fdpa_chain(kernel="fast")``), which never
    imports this module: refmodel.numerics imports it at start."""
    from . import accumulate

    accumulate._FAST_KERNEL["run_chain"] = run_chain


_register()
