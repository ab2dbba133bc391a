"""The accumulator model: binding table, decoding, the float64 formula against an exact
rational implementation, hand-built truncation cases, final rounding."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from refmodel.numerics import accumulate as acc
from refmodel.errors import InputError
from refmodel.numerics.formats import BF16, E4M3, E5M2, F16, F32, TF32, decode_scalar
from refmodel.numerics.fp8 import round_to_format
from refmodel.wgmma_forms import WGMMA_FORMS
from seeds import rng_for

P_FP8_F32 = acc.BINDING[("fp8", "f32")]
P_FP8_F16 = acc.BINDING[("fp8", "f16")]
P_BF16 = acc.BINDING[("bf16", "f32")]
P_F16_F16 = acc.BINDING[("f16", "f16")]


# ----------------------------------------------------------------------------- binding


def test_every_form_has_a_binding_row():
    for f in WGMMA_FORMS:
        p = acc.params_for(f)
        if f.family == "int8":
            assert isinstance(p, acc.IntAccumParams)
        else:
            assert p.acc == f.dtype_d


def test_binding_leads():
    # the public leads (MMA-Sim, Hopper wgmma): F, e_zero, final rounding per family
    assert (P_FP8_F32.F, P_FP8_F32.round_mbits, P_FP8_F32.rounding, P_FP8_F32.e_zero) == (13, 13, "rz", -133)
    assert (P_FP8_F16.F, P_FP8_F16.round_mbits, P_FP8_F16.rounding, P_FP8_F16.e_zero) == (13, 10, "rne", -21)
    for fam in ("tf32", "f16", "bf16"):
        p = acc.BINDING[(fam, "f32")]
        assert (p.F, p.round_mbits, p.rounding, p.e_zero) == (25, 23, "rz", -133)
    assert P_F16_F16.rounding == "rne" and P_F16_F16.e_zero == -21


@pytest.mark.parametrize("kw, msg", [
    (dict(rounding="rn"), "rounding must be 'rz' or 'rne', got 'rn'"),
    (dict(overflow="max"), "overflow must be 'inf' or 'satfinite', got 'max'"),
    (dict(F=40), "F must be in 1..29"),
    (dict(round_mbits=24), "round_mbits must be in 1..23 for f32, got 24"),
])
def test_params_validation(kw, msg):
    with pytest.raises(InputError, match=msg.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        acc.with_params(P_FP8_F32, **kw)


# ----------------------------------------------------------------------------- decoding


@pytest.mark.parametrize("spec", [E4M3, E5M2, F16, BF16, TF32], ids=lambda s: s.name)
def test_decode_table_matches_formats_decode(spec):
    sig, exp, cls = acc.decode_table(spec)
    codes = np.arange(1 << spec.bits) if spec.bits <= 16 else np.random.default_rng(0).integers(0, 1 << spec.bits, 20000)
    for c in codes:
        v = decode_scalar(int(c), spec) if spec is not TF32 else _tf32_value(int(c))
        k = cls[c]
        if math.isnan(v):
            assert k == acc.CLS_NAN
        elif math.isinf(v):
            assert k == (acc.CLS_PINF if v > 0 else acc.CLS_NINF)
        elif v == 0:
            assert k == acc.CLS_ZERO and sig[c] == 0
        else:
            assert k == acc.CLS_FINITE
            assert math.ldexp(int(sig[c]), int(exp[c]) - spec.mbits) == v
            assert abs(int(sig[c])) < (2 << spec.mbits)
            assert exp[c] >= spec.emin


def _tf32_value(code):
    return float(np.array([code << 13], np.uint32).view(np.float32)[0])


def test_significand_exponent_identity():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(2000) * np.exp2(rng.integers(-160, 130, 2000))
    for emin in (-126, -14, -6):
        s, e = acc.significand_exponent(x, emin)
        assert np.array_equal(np.ldexp(s, e), x)
        assert np.all(e >= emin)
        normal = e > emin
        assert np.all((np.abs(s[normal]) >= 1) & (np.abs(s[normal]) < 2))
        assert np.all(np.abs(s) < 2)


# ----------------------------------------------------------------------------- final rounding


def test_round_result_f16_rne_equals_fp8_module_kernel():
    rng = np.random.default_rng(2)
    v = rng.standard_normal(20000) * np.exp2(rng.integers(-30, 18, 20000))
    v = np.concatenate([v, [65504.0, 65519.99, 65520.0, 2.0 ** -25, 3 * 2.0 ** -26, -2.0 ** -26]])
    got = acc.round_result(v, P_F16_F16).view(np.uint16)
    want = round_to_format(v, "f16", saturate=False)
    zero = (want & 0x7FFF) == 0
    want = np.where(zero, 0, want)  # the model writes +0 for every zero result
    assert np.array_equal(got, want)


def test_round_result_f32_rz_equals_nextafter_rule():
    rng = np.random.default_rng(3)
    v = rng.standard_normal(20000) * np.exp2(rng.integers(-160, 128, 20000))
    v = v[np.abs(v) < 3.4e38]
    got = acc.round_result(v, P_BF16)
    rn = v.astype(np.float32)  # RNE; RZ is RN or its neighbour toward zero
    rz = np.where(np.abs(rn.astype(np.float64)) > np.abs(v), np.nextafter(rn, np.float32(0)), rn)
    rz = np.where(rz == 0, np.float32(0), rz)
    assert np.array_equal(got.view(np.uint32), rz.view(np.uint32))
    # e8m13: RZ to 13 mantissa bits = RZ to f32 then the low 10 bits cleared
    got13 = acc.round_result(v, P_FP8_F32).view(np.uint32)
    want13 = rz.view(np.uint32) & np.uint32(0xFFFFFC00)
    want13 = np.where((want13 & 0x7FFFFFFF) == 0, 0, want13)
    assert np.array_equal(got13, want13)


def test_round_result_overflow_policy():
    big = np.array([2.0 ** 128, -2.0 ** 129])
    inf = acc.round_result(big[:2], P_BF16)
    assert np.isposinf(inf[0]) and np.isneginf(inf[1])
    sat = acc.round_result(big[:2], acc.with_params(P_BF16, overflow="satfinite"))
    assert sat[0] == np.finfo(np.float32).max and sat[1] == -np.finfo(np.float32).max
    sat13 = acc.round_result(big[:1], acc.with_params(P_FP8_F32, overflow="satfinite"))
    assert sat13.view(np.uint32)[0] == 0x7F7FFC00  # largest e8m13 value
    h = acc.round_result(np.array([65520.0, 65519.0]), P_F16_F16)
    assert np.isposinf(h[0]) and h[1] == 65504


# ----------------------------------------------------------------------------- exact rational model


def _se(x: Fraction, emin: int):
    """(s, e): x = s * 2**e, |s| in [1, 2) or e = emin."""
    if x == 0:
        return Fraction(0), emin
    e = x.numerator.__abs__().bit_length() - x.denominator.bit_length()
    while abs(x) >= Fraction(2) ** (e + 1):
        e += 1
    while abs(x) < Fraction(2) ** e:
        e -= 1
    e = max(e, emin)
    return x / Fraction(2) ** e, e


def _rational_fdpa(a, b, c, fa, fb, p):
    """The model in exact rational arithmetic, one element (independent of acc.fdpa)."""
    fc = p.acc_spec
    terms = []
    for x, y in zip(a, b):
        sx, ex = _se(Fraction(x), fa.emin)
        sy, ey = _se(Fraction(y), fb.emin)
        s = sx * sy
        terms.append((s, ex + ey if s != 0 else p.e_zero))
    sc, ec = _se(Fraction(c), fc.emin)
    terms.append((sc, ec if sc != 0 else p.e_zero))
    emax = max(e for _, e in terms)
    total = sum(int(s * Fraction(2) ** (e - emax + p.F)) for s, e in terms)  # int() truncates toward 0
    v = Fraction(total) * Fraction(2) ** (emax - p.F)
    if v == 0:
        return 0.0
    s, e = _se(abs(v), fc.emin)
    q = abs(v) / Fraction(2) ** (e - p.round_mbits)
    r = math.floor(q) if p.rounding == "rz" else round(q)  # round(): ties to even
    mag = r * Fraction(2) ** (e - p.round_mbits)
    largest = (2 - Fraction(1, 2 ** p.round_mbits)) * Fraction(2) ** fc.emax
    if mag > largest:
        out = float("inf") if p.overflow == "inf" else float(largest)
    else:
        out = float(mag)
    return -out if v < 0 else out


@pytest.mark.parametrize("fam, fa, fb, p, dt", [
    ("e4m3", E4M3, E4M3, P_FP8_F32, "float8_e4m3fn"),
    ("e5m2xe4m3", E5M2, E4M3, P_FP8_F16, None),
    ("bf16", BF16, BF16, P_BF16, None),
    ("f16", F16, F16, P_F16_F16, None),
    ("tf32", TF32, TF32, acc.BINDING[("tf32", "f32")], None),
])
def test_fdpa_formula_equals_exact_rational_model(fam, fa, fb, p, dt, request):
    rng = rng_for(request, fam)
    K = 32 if fa.bits == 8 else (16 if fa.bits == 16 else 8)
    n = 150
    def draw(spec, shape):
        vals = np.array([decode_scalar(int(c), spec) for c in rng.integers(0, spec.max_code + 1, shape).ravel()])
        vals = vals.reshape(shape) * np.where(rng.random(shape) < 0.5, -1, 1)
        vals[rng.random(shape) < 0.1] = 0.0
        return vals
    def draw_tf32(shape):
        x = rng.standard_normal(shape) * np.exp2(rng.integers(-140, 60, shape))
        bits = x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
        return bits.view(np.float32).astype(np.float64)
    if fa is TF32:
        a, b = draw_tf32((n, K)), draw_tf32((n, K))
    else:
        a, b = draw(fa, (n, K)), draw(fb, (n, K))
    cspec = p.acc_spec
    c = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 10, n))).astype(
        np.float32 if cspec is F32 else np.float16).astype(np.float64)
    c[::7] = 0.0
    got = acc.fdpa(a, b, c, p, fa, fb).astype(np.float64)
    want = np.array([_rational_fdpa(a[i], b[i], c[i], fa, fb, p) for i in range(n)])
    assert np.array_equal(got, want)


# ----------------------------------------------------------------------------- hand-built cases


def _fdpa1(a, b, c, p, fa=E4M3, fb=E4M3):
    return acc.fdpa(np.array([a], float), np.array([b], float), np.array([c], float), p, fa, fb)[0]


def test_small_product_vanishes_beside_large_one():
    # 1 + 2**-14 is an f32, but the product 2**-7 * 2**-7 sits 14 binades below e_max
    # and keeps only F = 13 fraction bits: it truncates to 0.
    d = _fdpa1([1.0, 2.0 ** -7], [1.0, 2.0 ** -7], 0.0, P_FP8_F32)
    assert d == np.float32(1.0)
    # 2**-13 survives (exactly the last kept bit)
    d = _fdpa1([1.0, 2.0 ** -7], [1.0, 2.0 ** -6], 0.0, P_FP8_F32)
    assert d == np.float32(1.0 + 2.0 ** -13)
    # a negative small product truncates toward zero too: no borrow from the big one
    d = _fdpa1([1.0, -2.0 ** -7], [1.0, 2.0 ** -7], 0.0, P_FP8_F32)
    assert d == np.float32(1.0)


def test_c_loses_low_bits():
    # C = 1 + 2**-20 beside a product of 1: C is aligned to e_max = 0 and truncated to
    # 13 fraction bits (FP8) -> 2.0; with F = 25 (bf16) it keeps them, then RZ to f32.
    c = float(np.float32(1.0 + 2.0 ** -20))
    assert _fdpa1([1.0], [1.0], c, P_FP8_F32) == np.float32(2.0)
    assert _fdpa1([1.0], [1.0], c, P_BF16, BF16, BF16) == np.float32(2.0 + 2.0 ** -20)
    # C alone (zero products): its own e_max; e8m13 keeps 13 bits of it
    assert _fdpa1([0.0], [0.0], float(np.float32(1 + 2.0 ** -12)), P_FP8_F32) == np.float32(1 + 2.0 ** -12)
    assert _fdpa1([0.0], [0.0], float(np.float32(1 + 2.0 ** -14)), P_FP8_F32) == np.float32(1.0)


def test_final_rounding_is_rz_for_f32_and_rne_for_f16():
    c = float(np.float32(1 + 3 * 2.0 ** -23))
    # exact sum 2 + 3*2**-23 = 2 + 1.5 ulp: RZ gives 2 + 1 ulp (RNE would give 2 + 2 ulp)
    assert _fdpa1([1.0], [1.0], c, P_BF16, BF16, BF16) == np.float32(2 + 2.0 ** -22)
    # f16: 1 + 1 + 1.5*2**-10 -> ulp at 2 is 2**-9: 2 + 0.75 ulp rounds to nearest: 2 + 2**-9
    c16 = float(np.float16(1 + 3 * 2.0 ** -11))
    assert _fdpa1([1.0], [1.0], c16, P_F16_F16, F16, F16) == np.float16(2 + 2.0 ** -9)


def test_cancellation_and_zero_sign():
    # 1 - 1 + 2**-14: the small term is truncated against e_max = 0 before the cancellation
    d = _fdpa1([1.0, 1.0, 2.0 ** -7], [1.0, -1.0, 2.0 ** -7], 0.0, P_FP8_F32)
    assert d == 0 and not np.signbit(d)
    # -0 + (-0)*x: exact zero result is +0
    d = _fdpa1([-0.0], [1.0], -0.0, P_FP8_F32)
    assert d == 0 and not np.signbit(d)


def test_e_zero_takes_part_in_alignment():
    # 2**-9 (e4m3 min subnormal: s = 1/8, e = -6) * 2**-6 = 2**-15 with e = -12.  With a
    # zero C, the C term's exponent is e_zero: at -133 the product is e_max and exact; at
    # e_zero = 0 it is aligned to 0 and truncated to F = 13 bits: trunc(1/8 * 2**1) = 0.
    assert _fdpa1([2.0 ** -9], [2.0 ** -6], 0.0, P_FP8_F32) == np.float32(2.0 ** -15)
    assert _fdpa1([2.0 ** -9], [2.0 ** -6], 0.0, acc.with_params(P_FP8_F32, e_zero=0)) == 0
    # a nonzero C takes its own exponent, not e_zero
    assert _fdpa1([2.0 ** -9], [2.0 ** -6], 2.0 ** -20, acc.with_params(P_FP8_F32, e_zero=0)) \
        == np.float32(2.0 ** -15 + 2.0 ** -20)


def test_special_values():
    nan, inf = float("nan"), float("inf")
    p = acc.BINDING[("f16", "f32")]
    f = lambda a, b, c: _fdpa1(a, b, c, p, F16, F16)  # noqa: E731
    assert np.isnan(f([nan, 1.0], [1.0, 1.0], 0.0))
    assert np.isnan(f([inf, 1.0], [0.0, 1.0], 0.0))            # Inf * 0
    assert np.isnan(f([inf, inf], [1.0, -1.0], 0.0))           # +Inf - Inf
    assert np.isnan(f([inf], [1.0], -inf))                      # with C
    assert f([inf, 1.0], [-2.0, 1.0], 5.0) == -np.inf
    assert f([0.0], [0.0], inf) == np.inf
    assert np.float32(f([nan], [1.0], 0.0)).view(np.uint32) == 0x7FFFFFFF
    h = _fdpa1([inf], [0.0], 0.0, P_F16_F16, F16, F16)
    assert np.float16(h).view(np.uint16) == 0x7FFF
