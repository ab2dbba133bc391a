"""refmodel.numerics.wgmma: numba kernel vs float64 formula (bit for bit), MMA-Sim cross-check,
algebraic identities, integer wrap / satfinite, input validation."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

from refmodel.numerics import accumulate as acc
from refmodel.errors import DTypeError, FormError, InputError
from refmodel.dtypes import element_dtype
from refmodel.numerics.wgmma import wgmma, wgmma_reference
from refmodel.wgmma_forms import parse_wgmma

from wgmma_cases import bits_of, cancel_pairs, operand
from seeds import rng_for

PFX = "wgmma.mma_async.sync.aligned."
FLOAT_FORMS = [
    "m64n16k32.f32.e4m3.e4m3", "m64n8k32.f32.e5m2.e4m3", "m64n16k32.f16.e4m3.e5m2",
    "m64n8k32.f16.e5m2.e5m2", "m64n16k16.f32.f16.f16", "m64n16k16.f16.f16.f16",
    "m64n16k16.f32.bf16.bf16", "m64n16k8.f32.tf32.tf32",
]
KINDS = ("bits", "finite", "mixed", "subnormal", "extreme")


def _inputs(rng, form, kind, batch=(), ckind=None):
    fm = parse_wgmma(PFX + form)
    a = operand(rng, fm.dtype_a, batch + (64, fm.k), kind)
    b = operand(rng, fm.dtype_b, batch + (fm.k, fm.n), kind)
    c = operand(rng, fm.dtype_d, batch + (64, fm.n), ckind or kind)
    return fm, a, b, c


def _same(x, y):
    return x.dtype == y.dtype and x.shape == y.shape and np.array_equal(bits_of(x), bits_of(y))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


# ----------------------------------------------------------------------------- kernel == formula


@pytest.mark.parametrize("form", FLOAT_FORMS)
@pytest.mark.parametrize("kind", KINDS)
def test_kernel_equals_formula(form, kind, request):
    rng = rng_for(request, form, kind)
    fm, a, b, c = _inputs(rng, form, kind, ckind="mixed" if kind == "bits" else kind)
    for kw in (dict(), dict(scale_d=False), dict(imm_scale_a=-1), dict(imm_scale_b=-1)):
        assert _same(wgmma(PFX + form, a, b, c, **kw), wgmma_reference(PFX + form, a, b, c, **kw)), kw


@pytest.mark.parametrize("form", FLOAT_FORMS)
def test_kernel_equals_formula_cancellation_and_batches(form, request):
    rng = rng_for(request, form)
    fm, a, b, c = _inputs(rng, form, "finite", batch=(3,))
    a, b = cancel_pairs(rng, a, b)  # products cancel exactly in pairs: leaves C and rounding
    assert _same(wgmma(PFX + form, a, b, c), wgmma_reference(PFX + form, a, b, c))
    # broadcasting: one B for a batch of A, C without batch
    fm, a, b, c = _inputs(rng, form, "mixed", batch=(2, 2))
    assert _same(wgmma(PFX + form, a, b[0, 0], c[0, 0]), wgmma_reference(PFX + form, a, b[0, 0], c[0, 0]))


@pytest.mark.parametrize("form", ["m64n16k32.f32.e4m3.e5m2", "m64n16k16.f16.f16.f16", "m64n8k8.f32.tf32.tf32"])
@pytest.mark.parametrize("change", [dict(overflow="satfinite"), dict(k_group=8), dict(F=20),
                                    dict(e_zero=-10), dict(round_mbits=7, rounding="rne"),
                                    dict(tf32_ignored_bits=11)])
def test_kernel_equals_formula_other_params(form, change):
    fm = parse_wgmma(PFX + form)
    p = acc.with_params(acc.params_for(fm), **change)
    rng = np.random.default_rng(5)
    for kind in ("mixed", "extreme", "finite"):
        _, a, b, c = _inputs(rng, form, kind)
        assert _same(wgmma(PFX + form, a, b, c, params=p), wgmma_reference(PFX + form, a, b, c, params=p))


def test_kernel_equals_formula_wide_n():
    rng = np.random.default_rng(9)
    form = "m64n256k32.f32.e4m3.e4m3"
    _, a, b, c = _inputs(rng, form, "mixed")
    assert _same(wgmma(PFX + form, a, b, c), wgmma_reference(PFX + form, a, b, c))


# ----------------------------------------------------------------------------- MMA-Sim


_TORCH_DT = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "f16": "float16", "bf16": "bfloat16",
             "tf32": "float32", "f32": "float32"}


def _to_torch(torch, x, name):
    if name in ("e4m3", "e5m2", "bf16"):
        u = {1: np.uint8, 2: np.int16}[x.dtype.itemsize]
        return torch.from_numpy(np.ascontiguousarray(x).view(u).copy()).view(getattr(torch, _TORCH_DT[name]))
    return torch.from_numpy(np.ascontiguousarray(x).copy())


@pytest.mark.parametrize("form", FLOAT_FORMS)
def test_matches_mmasim(form):
    mmasim = pytest.importorskip("mmasim")
    torch = pytest.importorskip("torch")
    from mmasim import nv_ptx

    sim = nv_ptx.WGMMA("Hopper", form)
    fm = parse_wgmma(PFX + form)
    rng = np.random.default_rng(11)
    for spread in (1, 4, 10, 40):
        def gen(shape, name):
            x = rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread + 1, shape))
            return x.astype(np.float32).astype(element_dtype(name))
        a, b, c = gen((64, fm.k), fm.dtype_a), gen((fm.k, fm.n), fm.dtype_b), gen((64, fm.n), fm.dtype_d)
        c[::5, ::3] = 0
        ours = wgmma(PFX + form, a, b, c)
        theirs = sim(_to_torch(torch, a, fm.dtype_a), _to_torch(torch, b, fm.dtype_b),
                     _to_torch(torch, c, fm.dtype_d)).numpy()
        assert np.array_equal(bits_of(ours), bits_of(theirs)), (form, spread)
    del mmasim


# ----------------------------------------------------------------------------- identities


def _neg(x):
    return -x  # numpy negation of the typed array (flips the sign, NaN included)


@pytest.mark.parametrize("form", FLOAT_FORMS)
def test_imm_scale_is_negation(form):
    rng = np.random.default_rng(13)
    fm, a, b, c = _inputs(rng, form, "mixed")
    I = PFX + form
    assert _same(wgmma(I, a, b, c, imm_scale_a=-1), wgmma(I, _neg(a), b, c))
    assert _same(wgmma(I, a, b, c, imm_scale_b=-1), wgmma(I, a, _neg(b), c))
    assert _same(wgmma(I, a, b, c, imm_scale_a=-1, imm_scale_b=-1), wgmma(I, a, b, c))


@pytest.mark.parametrize("form", FLOAT_FORMS)
def test_sign_symmetry(form):
    # RZ and RNE are symmetric: D(-A, B, -C) = -D(A, B, C), except that zero is +0 and NaN canonical
    rng = np.random.default_rng(17)
    fm, a, b, c = _inputs(rng, form, "finite")
    I = PFX + form
    d = wgmma(I, a, b, c)
    dn = wgmma(I, a, b, _neg(c), imm_scale_a=-1)
    ok = (d != 0) & ~np.isnan(d)
    assert np.array_equal(bits_of(dn)[ok], bits_of(_neg(d))[ok])
    assert np.all(bits_of(dn)[d == 0] == 0)


@pytest.mark.parametrize("form", FLOAT_FORMS)
def test_scale_d_zero_means_c_is_plus_zero(form):
    rng = np.random.default_rng(19)
    fm, a, b, c = _inputs(rng, form, "mixed")
    I = PFX + form
    z = np.zeros_like(c)
    assert _same(wgmma(I, a, b, c, scale_d=False), wgmma(I, a, b, z))
    assert _same(wgmma(I, a, b, None), wgmma(I, a, b, z))


@pytest.mark.parametrize("form", FLOAT_FORMS)
def test_fused_sum_is_order_independent_within_an_instruction(form):
    # one fused sum per instruction: permuting K (same permutation on A's columns and
    # B's rows) changes nothing, unlike any sequential accumulation
    rng = np.random.default_rng(23)
    fm, a, b, c = _inputs(rng, form, "finite")
    perm = rng.permutation(fm.k)
    I = PFX + form
    assert _same(wgmma(I, a, b, c), wgmma(I, a[:, perm], b[perm], c))


@pytest.mark.parametrize("form", FLOAT_FORMS)
def test_small_integers_are_exact(form):
    # small integer inputs: every term and the sum are exact at F bits, so D = A @ B + C
    rng = np.random.default_rng(29)
    fm, a, b, c = _inputs(rng, form, "small_int")
    want = a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64)
    d = wgmma(PFX + form, a, b, c)
    assert np.array_equal(d.astype(np.float64), want)


def test_fp8_truncation_visible_in_one_instruction():
    I = PFX + "m64n8k32.f32.e4m3.e4m3"
    a = np.zeros((64, 32), ml_dtypes.float8_e4m3fn)
    b = np.zeros((32, 8), ml_dtypes.float8_e4m3fn)
    a[:, 0], b[0] = 1.0, 1.0
    a[:, 1:], b[1:] = 2.0 ** -7, 2.0 ** -7  # 31 products of 2**-14 beside 1.0
    d = wgmma(I, a, b)
    assert np.all(d == 1.0)  # each truncates to 0 (F = 13); exact would be 1 + 31 * 2**-14
    f = a.astype(np.float64) @ b.astype(np.float64)
    assert np.all(f > 1.0)


# ----------------------------------------------------------------------------- integer


def test_int8_exact_and_wrap_vs_satfinite():
    I = PFX + "m64n8k32.s32.s8.s8"
    Is = PFX + "m64n8k32.satfinite.s32.s8.s8"
    a = np.full((64, 32), 127, np.int8)
    b = np.full((32, 8), 127, np.int8)
    c = np.full((64, 8), 2 ** 31 - 1000, np.int32)
    exact = 32 * 127 * 127 + (2 ** 31 - 1000)
    d = wgmma(I, a, b, c)
    assert np.all(d == exact - 2 ** 32)
    assert np.all(wgmma(Is, a, b, c) == 2 ** 31 - 1)
    a2 = np.full((64, 32), -128, np.int8)
    c2 = np.full((64, 8), -(2 ** 31) + 5, np.int32)
    assert np.all(wgmma(Is, a2, b, c2) == -(2 ** 31))
    assert np.all(wgmma(I, a2, b, c2) == (32 * -128 * 127 - 2 ** 31 + 5) + 2 ** 32)


@pytest.mark.parametrize("form", ["m64n8k32.s32.s8.s8", "m64n16k32.s32.u8.s8", "m64n24k32.satfinite.s32.u8.u8",
                                  "m64n32k32.satfinite.s32.s8.u8"])
def test_int8_kernel_equals_formula_and_python_ints(form):
    fm = parse_wgmma(PFX + form)
    rng = np.random.default_rng(31)
    def gen(name, shape):
        info = np.iinfo(element_dtype(name))
        return rng.integers(info.min, info.max + 1, shape).astype(element_dtype(name))
    a, b = gen(fm.dtype_a, (2, 64, 32)), gen(fm.dtype_b, (2, 32, fm.n))
    c = rng.integers(-2 ** 31, 2 ** 31, (2, 64, fm.n)).astype(np.int32)
    d = wgmma(PFX + form, a, b, c)
    assert _same(d, wgmma_reference(PFX + form, a, b, c))
    for idx in [(0, 0, 0), (1, 63, fm.n - 1), (1, 5, 3)]:
        bi, i, j = idx
        v = sum(int(a[bi, i, k]) * int(b[bi, k, j]) for k in range(32)) + int(c[bi, i, j])
        want = max(-2 ** 31, min(2 ** 31 - 1, v)) if fm.satfinite else (v + 2 ** 31) % 2 ** 32 - 2 ** 31
        assert d[idx] == want


# ----------------------------------------------------------------------------- validation


E4 = ml_dtypes.float8_e4m3fn
I8 = PFX + "m64n8k32.f32.e4m3.e4m3"


@pytest.mark.parametrize("call, exc, msg", [
    (lambda: wgmma(I8, np.zeros((64, 32), np.float32), np.zeros((32, 8), E4)), DTypeError,
     "a must be float8_e4m3fn for A .e4m3, got float32"),
    (lambda: wgmma(I8, np.zeros((64, 16), E4), np.zeros((32, 8), E4)), InputError,
     "a must have shape (..., 64, 32) for m64n8k32, got (64, 16)"),
    (lambda: wgmma(I8, np.zeros((64, 32), E4), np.zeros((32, 16), E4)), InputError,
     "b must have shape (..., 32, 8) for m64n8k32, got (32, 16)"),
    (lambda: wgmma(I8, np.zeros((64, 32), E4), np.zeros((32, 8), E4), np.zeros((64, 8), np.float16)),
     DTypeError, "c must be float32 for the accumulator .f32, got float16"),
    (lambda: wgmma(I8, np.zeros((2, 64, 32), E4), np.zeros((3, 32, 8), E4)), InputError,
     "batch dimensions of a (2,), b (3,) do not broadcast"),
    (lambda: wgmma(I8, np.zeros((64, 32), E4), np.zeros((32, 8), E4), imm_scale_a=2), InputError,
     "imm_scale_a must be 1 or -1, got 2"),
    (lambda: wgmma(I8, np.zeros((64, 32), E4), np.zeros((32, 8), E4), scale_d=2), InputError,
     "scale_d must be True/False (or 1/0), got 2"),
    (lambda: wgmma(PFX + "m64n8k32.s32.s8.s8", np.zeros((64, 32), np.int8), np.zeros((32, 8), np.int8),
                   imm_scale_b=-1), InputError,
     "imm_scale_b must be 1 for integer wgmma (the .s8 forms have no imm-scale operands), got -1"),
    (lambda: wgmma(PFX + "m64n12k32.f32.e4m3.e4m3", None, None), FormError,
     "N must be a multiple of 8 in 8..256, got 12"),
    (lambda: wgmma(I8, np.zeros((64, 32), E4), np.zeros((32, 8), E4), params=acc.BINDING[("fp8", "f16")]),
     InputError, "params accumulate into f16 but the form's accumulator is .f32"),
    (lambda: wgmma(I8, np.zeros((64, 32), E4), np.zeros((32, 8), E4),
                   params=acc.with_params(acc.BINDING[("fp8", "f32")], k_group=5)),
     InputError, "k_group must divide K = 32, got 5"),
])
def test_validation_messages(call, exc, msg):
    with pytest.raises(exc) as ei:
        call()
    assert str(ei.value).endswith(msg) or str(ei.value) == msg, str(ei.value)


def test_tf32_low_bits_are_ignored():
    # lead: the tensor core reads the top 19 bits of the f32 container; a NaN whose
    # payload lies only in the low 13 bits reads as Inf
    I = PFX + "m64n8k8.f32.tf32.tf32"
    rng = np.random.default_rng(37)
    a = rng.standard_normal((64, 8)).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)
    noisy = (a.view(np.uint32) | rng.integers(0, 1 << 13, a.shape).astype(np.uint32)).view(np.float32)
    clean = (a.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    assert _same(wgmma(I, noisy, b), wgmma(I, clean, b))
    a2 = np.ones((64, 8), np.float32)
    a2[:, 0] = np.array([0x7F800001], np.uint32).view(np.float32)[0]  # NaN, payload in low bits
    d = wgmma(I, a2, np.ones((8, 8), np.float32))
    assert np.all(np.isposinf(d))
    with pytest.raises(InputError, match="tf32_ignored_bits must be in 10..16, got 0"):
        acc.with_params(acc.BINDING[("tf32", "f32")], tf32_ignored_bits=0)
