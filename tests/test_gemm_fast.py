"""The fast fused-dot-product chain kernel (refmodel.numerics.fdpa_fast) against the integer
kernel it replaced and the readable float64 formula ``fdpa``: bit for bit, on random and
adversarial operands (NaN, +-Inf, subnormals, max values, cancellation, wide exponent
spread, all-zero), every input family, both accumulators, promotion chains, odd K."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest

from refmodel.dtypes import from_bits
from refmodel.errors import InputError
from refmodel.numerics import fdpa_fast
from refmodel.numerics.accumulate import (
    BIG,
    PROMOTE_OPS,
    decode_operand,
    decode_table,
    fdpa,
    fdpa_chain,
    params_for,
    promote,
    with_params,
)
from refmodel.numerics.formats import format_spec
from refmodel.numerics.wgmma import operand_codes, operand_spec, operand_values
from refmodel.wgmma_forms import parse_wgmma

from wgmma_cases import bits_of, cancel_pairs, operand

PFX = "wgmma.mma_async.sync.aligned."
FORMS = ["m64n8k32.f32.e4m3.e4m3", "m64n8k32.f32.e5m2.e4m3", "m64n8k32.f16.e4m3.e5m2",
         "m64n8k32.f16.e5m2.e5m2", "m64n8k16.f32.f16.f16", "m64n8k16.f16.f16.f16",
         "m64n8k16.f32.bf16.bf16", "m64n8k8.f32.tf32.tf32"]
KINDS = ("bits", "finite", "mixed", "subnormal", "extreme", "small_int")


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _decoded(form, p, a, b, kblk):
    A = decode_operand(operand_codes(a, form.dtype_a, p)[..., None], operand_spec(form.dtype_a, p), kblk=kblk)
    B = decode_operand(operand_codes(b, form.dtype_b, p)[None], operand_spec(form.dtype_b, p), kblk=kblk)
    return A, B


def _readable_chain(form, p, a, b, c_bits, kblk, nblk=None):
    """D of the chain computed block by block with the readable formula ``fdpa``."""
    av = operand_values(a, form.dtype_a, p)
    bv = operand_values(b, form.dtype_b, p)
    fa, fb = operand_spec(form.dtype_a, p), operand_spec(form.dtype_b, p)
    d = from_bits(c_bits.astype(np.uint32 if p.acc == "f32" else np.uint16), form.dtype_d)
    nblk = a.shape[1] // kblk if nblk is None else nblk
    for t in range(nblk):
        s = slice(t * kblk, (t + 1) * kblk)
        d = fdpa(av[:, None, s], bv[s].T[None], d.astype(np.float64), p, fa, fb)
    return bits_of(d).astype(np.uint32)


def _c_bits(rng, form, shape, kind):
    return bits_of(operand(rng, form.dtype_d, shape, kind)).astype(np.uint32)


def _check(form, p, a, b, c_bits, kblk, *, rows_per_b=None, readable=True):
    A, B = _decoded(form, p, a, b, kblk)
    R = a.shape[0]
    rpb = R if rows_per_b is None else rows_per_b
    fast = fdpa_chain(A, B, c_bits, p, kblk=kblk, rows_per_b=R)
    old = fdpa_chain(A, B, c_bits, p, kblk=kblk, rows_per_b=R, kernel="int")
    assert np.array_equal(fast, old), f"{np.count_nonzero(fast != old)} of {fast.size} differ from the int kernel"
    if readable:
        ref = _readable_chain(form, p, a, b, c_bits, kblk)
        assert np.array_equal(fast, ref), f"{np.count_nonzero(fast != ref)} of {fast.size} differ from fdpa"
    if rpb != R:  # the same rows, each with its own copy of B (the sparse path's layout)
        Bs = decode_operand(np.repeat(operand_codes(b, form.dtype_b, p)[None], R // rpb, axis=0),
                            operand_spec(form.dtype_b, p), kblk=kblk)
        assert np.array_equal(fdpa_chain(A, Bs, c_bits, p, kblk=kblk, rows_per_b=rpb), fast)
    return fast


# ----------------------------------------------------------------------------- random and adversarial


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("kind", KINDS)
def test_fast_equals_int_kernel_and_readable_formula(form, kind):
    rng = np.random.default_rng([7, FORMS.index(form), KINDS.index(kind)])
    fm = parse_wgmma(PFX + form)
    p = params_for(fm)
    K = 3 * fm.k
    a = operand(rng, fm.dtype_a, (12, K), kind)
    b = operand(rng, fm.dtype_b, (K, 24), kind)
    _check(fm, p, a, b, _c_bits(rng, fm, (12, 24), "mixed" if kind == "bits" else kind), fm.k)


@pytest.mark.parametrize("form", FORMS)
def test_cancellation_spread_and_zeros(form):
    rng = np.random.default_rng([8, FORMS.index(form)])
    fm = parse_wgmma(PFX + form)
    p = params_for(fm)
    K = 2 * fm.k
    a, b = cancel_pairs(rng, operand(rng, fm.dtype_a, (9, K), "finite"), operand(rng, fm.dtype_b, (K, 16), "finite"))
    zero_c = np.zeros((9, 16), np.uint32)
    d = _check(fm, p, a, b, zero_c, K)  # one block: every product cancels exactly
    assert np.all(d == 0)  # +0, never -0
    # wide exponent spread: largest and smallest magnitudes side by side in every block
    a = operand(rng, fm.dtype_a, (9, K), "extreme")
    b = operand(rng, fm.dtype_b, (K, 16), "extreme")
    _check(fm, p, a, b, _c_bits(rng, fm, (9, 16), "extreme"), fm.k)
    # all-zero A (both signs), C = -0: D = +0
    az = (np.zeros((9, K)) * rng.choice([-1.0, 1.0], (9, K))).astype(a.dtype)
    neg0 = np.full((9, 16), 0x80000000 if p.acc == "f32" else 0x8000, np.uint32)
    assert np.all(_check(fm, p, az, b, neg0, fm.k) == 0)


@pytest.mark.parametrize("form", ["m64n8k32.f32.e4m3.e4m3", "m64n8k32.f16.e5m2.e5m2", "m64n8k16.f32.f16.f16"])
def test_specials_in_one_block_only(form):
    """NaN / Inf in one block of a long chain: the slow path redoes just that block."""
    rng = np.random.default_rng(9)
    fm = parse_wgmma(PFX + form)
    p = params_for(fm)
    K = 5 * fm.k
    a = operand(rng, fm.dtype_a, (8, K), "finite")
    b = operand(rng, fm.dtype_b, (K, 16), "finite")
    spec = format_spec(operand_spec(fm.dtype_a, p).name)
    codes = bits_of(a).copy()
    nan = spec.mag_mask if not spec.ieee_specials else spec.inf_code | 1
    codes[1, 2 * fm.k + 3] = nan
    codes[2, 2 * fm.k + 4] = spec.inf_code if spec.ieee_specials else nan
    a = codes.view(a.dtype)
    d = _check(fm, p, a, b, _c_bits(rng, fm, (8, 16), "finite"), fm.k)
    assert np.all(np.isnan(from_bits(d[1].astype(np.uint32 if p.acc == "f32" else np.uint16), fm.dtype_d)))


@pytest.mark.parametrize("c_kind", ["mixed", "bits"])
def test_special_and_subnormal_c(c_kind):
    """C NaN (any payload), +-Inf, subnormal, max: the chain's first C."""
    rng = np.random.default_rng(10)
    for form in ("m64n8k32.f32.e4m3.e4m3", "m64n8k32.f16.e4m3.e4m3"):
        fm = parse_wgmma(PFX + form)
        p = params_for(fm)
        a = operand(rng, fm.dtype_a, (8, 2 * fm.k), "finite")
        b = operand(rng, fm.dtype_b, (2 * fm.k, 16), "small_int")
        _check(fm, p, a, b, _c_bits(rng, fm, (8, 16), c_kind), fm.k)


def test_zero_blocks_return_c_bits_unchanged():
    rng = np.random.default_rng(11)
    fm = parse_wgmma(PFX + "m64n8k32.f32.e4m3.e4m3")
    p = params_for(fm)
    a = operand(rng, "e4m3", (4, 32), "finite")
    b = operand(rng, "e4m3", (32, 8), "finite")
    A, B = _decoded(fm, p, a, b, 32)
    c = np.full((4, 8), 0x7FC01234, np.uint32)  # a NaN with a payload: nothing touches it
    c[0] = 0x80000000
    for kernel in ("fast", "int"):
        assert np.array_equal(fdpa_chain(A, B, c, p, kblk=32, rows_per_b=4, nblk=0, kernel=kernel), c)


# ----------------------------------------------------------------------------- shapes and parameters


@pytest.mark.parametrize("kblk", [1, 3, 5, 7, 8, 13, 32])
@pytest.mark.parametrize("rows", [1, 3, 4, 6, 9])
def test_odd_k_and_row_counts(kblk, rows):
    """Blocks of K that the kernel's unrolling by 4 and 2 does not divide; row counts that
    the groups of four rows do not divide; rows_per_b = 1 (every row its own B)."""
    rng = np.random.default_rng([12, kblk, rows])
    fm = parse_wgmma(PFX + "m64n8k32.f32.e4m3.e5m2")
    p = with_params(params_for(fm), k_group=kblk)
    a = operand(rng, "e4m3", (rows, 3 * kblk), "mixed")
    b = operand(rng, "e5m2", (3 * kblk, 40), "mixed")
    _check(fm, p, a, b, _c_bits(rng, fm, (rows, 40), "finite"), kblk, rows_per_b=1)


@pytest.mark.parametrize("change", [dict(F=1), dict(F=14), dict(F=20), dict(F=25), dict(F=29),
                                    dict(e_zero=-150), dict(e_zero=5), dict(rounding="rne"),
                                    dict(overflow="satfinite"), dict(round_mbits=23), dict(round_mbits=1)])
@pytest.mark.parametrize("form", ["m64n8k32.f32.e4m3.e4m3", "m64n8k32.f16.e5m2.e5m2", "m64n8k16.f32.bf16.bf16"])
def test_binding_changes(form, change):
    """A hardware finding is a change of BINDING: the fast kernel follows every knob
    (including F large enough that block sums need float64)."""
    fm = parse_wgmma(PFX + form)
    p = params_for(fm)
    if change.get("round_mbits", 0) > p.acc_spec.mbits:
        change = dict(round_mbits=p.acc_spec.mbits)
    p = with_params(p, **change)
    rng = np.random.default_rng([13, len(str(change)), fm.k])
    K = 2 * fm.k
    for kind in ("mixed", "extreme", "finite"):
        a = operand(rng, fm.dtype_a, (6, K), kind)
        b = operand(rng, fm.dtype_b, (K, 16), kind)
        _check(fm, p, a, b, _c_bits(rng, fm, (6, 16), kind), fm.k)


def test_unknown_formats_take_the_float64_int16_path():
    """Decoded operands without a FormatSpec: float64 values and int16 exponents, same bits."""
    rng = np.random.default_rng(14)
    fm = parse_wgmma(PFX + "m64n8k32.f32.e4m3.e4m3")
    p = params_for(fm)
    a = operand(rng, "e4m3", (6, 64), "mixed")
    b = operand(rng, "e4m3", (64, 16), "mixed")
    A, B = _decoded(fm, p, a, b, 32)
    c = _c_bits(rng, fm, (6, 16), "mixed")
    fast = fdpa_chain(A, B, c, p, kblk=32, rows_per_b=6)
    bare = fdpa_chain(replace(A, spec=None), replace(B, spec=None), c, p, kblk=32, rows_per_b=6)
    assert np.array_equal(fast, bare)
    assert np.array_equal(fast, fdpa_chain(A, B, c, p, kblk=32, rows_per_b=6, kernel="int"))


def test_kernel_name_is_checked():
    fm = parse_wgmma(PFX + "m64n8k32.f32.e4m3.e4m3")
    p = params_for(fm)
    a = np.zeros((1, 32), np.uint8)
    A = decode_operand(a[..., None], operand_spec("e4m3", p), kblk=32)
    B = decode_operand(np.zeros((1, 32, 8), np.uint8), operand_spec("e4m3", p), kblk=32)
    with pytest.raises(InputError, match="kernel must be one of fast, int"):
        fdpa_chain(A, B, np.zeros((1, 8), np.uint32), p, kblk=32, rows_per_b=1, kernel="numpy")


# ----------------------------------------------------------------------------- promotion


@pytest.mark.parametrize("op", PROMOTE_OPS)
@pytest.mark.parametrize("form", ["m64n8k32.f32.e4m3.e4m3", "m64n8k16.f32.bf16.bf16"])
def test_promotion_chain(op, form):
    """Stages of two blocks, scaled and promoted into float32: the fast kernel equals the
    int kernel, and both equal the readable chain followed by :func:`promote`."""
    rng = np.random.default_rng([15, PROMOTE_OPS.index(op)])
    fm = parse_wgmma(PFX + form)
    p = params_for(fm)
    R, N, st = 6, 16, 2
    K = 3 * st * fm.k
    a = operand(rng, fm.dtype_a, (R, K), "mixed")
    b = operand(rng, fm.dtype_b, (K, N), "mixed")
    A, B = _decoded(fm, p, a, b, fm.k)
    rows = (rng.standard_normal((3, R)) * 4).astype(np.float32)
    cols = (rng.standard_normal((3, N)) * 4).astype(np.float32)
    acc0 = (rng.standard_normal((R, N)) * 100).astype(np.float32)
    got = {}
    for kernel in ("fast", "int"):
        acc = acc0.copy()
        fdpa_chain(A, B, np.zeros((R, N), np.uint32), p, kblk=fm.k, rows_per_b=R, promote_nblk=st,
                   scale_rows=rows, scale_cols=cols, promote_op=op, acc_f32=acc, kernel=kernel)
        got[kernel] = acc
    ref = acc0.copy()
    for s in range(3):
        ks = slice(s * st * fm.k, (s + 1) * st * fm.k)
        part = _readable_chain(fm, p, a[:, ks], b[ks], np.zeros((R, N), np.uint32), fm.k)
        promote(ref, part.view(np.float32), rows[s], cols[s], op)
    assert np.array_equal(bits_of(got["fast"]), bits_of(got["int"]))
    assert np.array_equal(bits_of(got["fast"]), bits_of(ref))


# ----------------------------------------------------------------------------- the exactness claims


def test_fp8_and_f16_products_are_exact_float32():
    """The float32 value path is chosen only where it is exact: every product of two e4m3
    or e5m2 values (exhaustive) and of f16 extremes is a float32 with the float64 value."""
    for fa in ("e4m3", "e5m2"):
        for fb in ("e4m3", "e5m2"):
            sa, sb = format_spec(fa), format_spec(fb)
            assert fdpa_fast.value_dtype(sa, sb) == np.float32
            va = _all_values(sa)
            vb = _all_values(sb)
            prod = va[:, None] * vb[None, :]
            assert np.array_equal(prod.astype(np.float32).astype(np.float64), prod)
            assert np.all((prod == 0) | (np.abs(prod) >= 2.0 ** -126))  # normal: no subnormal rounding
    f16 = format_spec("f16")
    assert fdpa_fast.value_dtype(f16, f16) == np.float32
    v = _all_values(f16)
    ext = np.concatenate([v[:200], v[-200:], v[::331]])
    prod = ext[:, None] * ext[None, :]
    assert np.array_equal(prod.astype(np.float32).astype(np.float64), prod)
    for name in ("bf16", "tf32"):
        s = operand_spec(name, params_for(parse_wgmma(PFX + "m64n8k16.f32.bf16.bf16")))
        assert fdpa_fast.value_dtype(s, s) == np.float64  # products can leave float32's range


def _all_values(spec):
    sig, exp, cls = decode_table(spec)
    ok = cls <= 1  # finite and zero
    return np.ldexp(sig[ok].astype(np.float64), exp[ok].astype(np.int64) - spec.mbits)


@pytest.mark.parametrize("pair", [("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e5m2"), ("f16", "f16"),
                                  ("bf16", "bf16")])
def test_int8_exponent_threshold_separates_real_products(pair):
    """With int8 exponents (zero / special: DEAD8), a sum of two exceeds the threshold iff
    both operands are real: exhaustive over the formats' exponents."""
    sa, sb = format_spec(pair[0]), format_spec(pair[1])
    thr = fdpa_fast.exp8_threshold(sa, sb)
    if pair[0] == "bf16":
        assert thr is None
        return
    ea = np.unique(decode_table(sa)[1]).astype(np.int64)
    eb = np.unique(decode_table(sb)[1]).astype(np.int64)
    ea = np.where(ea == -BIG, fdpa_fast.DEAD8, ea)
    eb = np.where(eb == -BIG, fdpa_fast.DEAD8, eb)
    s = ea[:, None] + eb[None, :]
    real = (ea[:, None] != fdpa_fast.DEAD8) & (eb[None, :] != fdpa_fast.DEAD8)
    assert s.min() >= -128 and s.max() <= 127
    assert np.array_equal(s > thr, real)
