"""refmodel.numerics.gemm: wgmma chains, float32 promotion (exact fma), scales, output conversion."""

from __future__ import annotations

import warnings
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from refmodel.errors import DTypeError, InputError
from refmodel.numerics.gemm import fma_f32, gemm, promote
from refmodel.numerics.wgmma import wgmma, wgmma_reference
from refmodel.wgmma_forms import parse_wgmma

from wgmma_cases import bits_of, operand

PFX = "wgmma.mma_async.sync.aligned."
E4 = ml_dtypes.float8_e4m3fn


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _same(x, y):
    return x.dtype == y.dtype and x.shape == y.shape and np.array_equal(bits_of(x), bits_of(y))


def _mats(rng, form, M, K, N, kind="finite"):
    fm = parse_wgmma(PFX + form)
    return fm, operand(rng, fm.dtype_a, (M, K), kind), operand(rng, fm.dtype_b, (K, N), kind)


# ----------------------------------------------------------------------------- exact rounding helpers


def _rn32(v: Fraction) -> np.float32:
    """Exact value -> float32, round to nearest even, subnormals, overflow to Inf."""
    if v == 0:
        return np.float32(0.0)
    a = abs(v)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while a >= Fraction(2) ** (e + 1):
        e += 1
    while a < Fraction(2) ** e:
        e -= 1
    top = max(e, -126)
    r = round(a / Fraction(2) ** (top - 23))  # ties to even
    mag = r * Fraction(2) ** (top - 23)
    out = np.float32(np.inf) if mag >= Fraction(2) ** 128 else np.float32(float(mag))
    return -out if v < 0 else out


def _f32(rng, n, lo=-40, hi=40):
    return (rng.standard_normal(n) * np.exp2(rng.integers(lo, hi, n))).astype(np.float32)


# ----------------------------------------------------------------------------- chains


@pytest.mark.parametrize("form", ["m64n16k32.f32.e4m3.e4m3", "m64n8k32.f16.e5m2.e4m3", "m64n8k16.f32.bf16.bf16",
                                  "m64n8k16.f16.f16.f16", "m64n8k8.f32.tf32.tf32", "m64n8k32.s32.s8.u8"])
def test_chain_of_one_equals_wgmma_and_tiles_are_independent(form):
    rng = np.random.default_rng(1)
    fm = parse_wgmma(PFX + form)
    if fm.family == "int8":
        a = rng.integers(-128, 128, (128, fm.k)).astype(np.int8)
        b = rng.integers(0, 256, (fm.k, 2 * fm.n)).astype(np.uint8)
    else:
        _, a, b = _mats(rng, form, 128, fm.k, 2 * fm.n, "mixed")
    d = gemm(a, b, instr=PFX + form)
    n = fm.n
    for i in range(2):
        for j in range(2):
            assert _same(d[64 * i:64 * (i + 1), n * j:n * (j + 1)],
                         wgmma(PFX + form, a[64 * i:64 * (i + 1)], b[:, n * j:n * (j + 1)]))


@pytest.mark.parametrize("form", ["m64n16k32.f32.e4m3.e4m3", "m64n8k32.f16.e4m3.e5m2", "m64n8k16.f32.f16.f16",
                                  "m64n8k8.f32.tf32.tf32"])
@pytest.mark.parametrize("kind", ["finite", "mixed"])
def test_chain_equals_reference_loop(form, kind):
    rng = np.random.default_rng(2)
    fm = parse_wgmma(PFX + form)
    K = 4 * fm.k
    _, a, b = _mats(rng, form, 64, K, fm.n, kind)
    c = operand(rng, fm.dtype_d, (64, fm.n), "finite")
    d = c
    for t in range(4):
        d = wgmma_reference(PFX + form, a[:, t * fm.k:(t + 1) * fm.k], b[t * fm.k:(t + 1) * fm.k], d)
    assert _same(gemm(a, b, c, instr=PFX + form), d)


def test_int8_chain_wraps_like_python_ints():
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (64, 256)).astype(np.int8)
    b = rng.integers(-128, 128, (256, 8)).astype(np.int8)
    c = rng.integers(-2 ** 31, 2 ** 31, (64, 8)).astype(np.int32)
    c[:4] = 2 ** 31 - 1
    d = gemm(a, b, c, instr=PFX + "m64n8k32.s32.s8.s8")
    for i, j in [(0, 0), (3, 7), (40, 2)]:
        v = sum(int(a[i, k]) * int(b[k, j]) for k in range(256)) + int(c[i, j])
        assert d[i, j] == (v + 2 ** 31) % 2 ** 32 - 2 ** 31


def test_fp8_chain_error_shrinks_with_promotion():
    # uniform positive data: the 13-bit truncation biases every instruction downwards,
    # so the unpromoted chain is far worse than promoting every instruction
    rng = np.random.default_rng(4)
    from refmodel.numerics.fp8 import encode
    a = encode(rng.uniform(0, 1, (64, 2048)), "e4m3").view(E4)
    b = encode(rng.uniform(0, 1, (2048, 32)), "e4m3").view(E4)
    I = PFX + "m64n32k32.f32.e4m3.e4m3"
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = lambda d: np.max(np.abs(d - ref) / ref)  # noqa: E731
    e_none, e_1 = err(gemm(a, b, instr=I)), err(gemm(a, b, instr=I, promote_every=1))
    assert e_none > 1e-2 and e_1 < 1e-4
    assert np.all(gemm(a, b, instr=I) <= ref)  # truncation only ever loses magnitude here


# ----------------------------------------------------------------------------- promotion


@pytest.mark.parametrize("form", ["m64n16k32.f32.e4m3.e4m3", "m64n8k32.f16.e4m3.e4m3", "m64n8k16.f32.bf16.bf16"])
def test_single_stage_promotion_equals_plain_chain(form):
    rng = np.random.default_rng(5)
    fm = parse_wgmma(PFX + form)
    _, a, b = _mats(rng, form, 64, 8 * fm.k, fm.n, "mixed")
    d = gemm(a, b, instr=PFX + form).astype(np.float32)  # f16 -> f32 exact
    d.view(np.uint32)[np.isnan(d)] = 0x7FFFFFFF  # float32 arithmetic writes the canonical NaN
    for op in ("fma", "mul_add", "fma_exact"):
        assert _same(gemm(a, b, instr=PFX + form, promote_every=8, promote_op=op), d)


@pytest.mark.parametrize("op", ["fma", "mul_add", "fma_exact"])
def test_promote_every_one_is_float32_running_sum(op):
    rng = np.random.default_rng(6)
    form = "m64n16k32.f32.e4m3.e4m3"
    _, a, b = _mats(rng, form, 64, 256, 16, "finite")
    c = _f32(rng, (64, 16), -5, 5)
    acc = c.copy()
    for t in range(8):
        part = wgmma(PFX + form, a[:, 32 * t:32 * (t + 1)], b[32 * t:32 * (t + 1)])
        acc = acc + part  # numpy float32 addition: one RNE rounding
    assert _same(gemm(a, b, c, instr=PFX + form, promote_every=1, promote_op=op), acc)


def test_power_of_two_scales_commute():
    rng = np.random.default_rng(7)
    form = "m64n16k32.f32.e5m2.e4m3"
    _, a, b = _mats(rng, form, 64, 256, 16, "finite")
    base = gemm(a, b, instr=PFX + form, promote_every=2)
    scaled = gemm(a, b, instr=PFX + form, promote_every=2, scale_a=np.float32(2.0 ** -3), scale_b=32.0)
    assert _same(scaled, (base * np.float32(4.0)).astype(np.float32))


def _fma_exact_frac(s, p, z):
    return _rn32(Fraction(float(s)) * Fraction(float(p)) + Fraction(float(z)))


def test_block_scales_against_exact_rationals():
    rng = np.random.default_rng(8)
    form = "m64n16k32.f32.e4m3.e4m3"
    M, K, N = 64, 256, 32
    _, a, b = _mats(rng, form, M, K, N, "finite")
    sa = np.exp2(rng.uniform(-3, 3, (M, 2))).astype(np.float32)  # 1x128 blocks along K
    sb = np.exp2(rng.uniform(-3, 3, (2, 2))).astype(np.float32)  # 128x16 blocks
    I = PFX + form
    for op in ("fma", "mul_add", "fma_exact"):
        got = gemm(a, b, instr=I, promote_every=2, scale_a=sa, scale_b=sb, promote_op=op)
        acc = np.zeros((M, N), np.float32)
        for st in range(4):  # stages of 64 along K, two per scale block
            part = gemm(a[:, 64 * st:64 * (st + 1)], b[64 * st:64 * (st + 1)], instr=I)
            kb = st // 2
            for i in range(0, M, 9):
                for j in range(N):
                    x, y = sa[i, kb], sb[kb, j // 16]
                    s = np.float32(x * y)
                    if op == "fma":
                        acc[i, j] = _rn32(Fraction(float(s)) * Fraction(float(part[i, j])) + Fraction(float(acc[i, j])))
                    elif op == "mul_add":
                        acc[i, j] = np.float32(acc[i, j] + np.float32(s * part[i, j]))
                    else:
                        acc[i, j] = _rn32(Fraction(float(x)) * Fraction(float(y)) * Fraction(float(part[i, j]))
                                          + Fraction(float(acc[i, j])))
        rows = np.arange(0, M, 9)
        assert _same(got[rows], acc[rows]), op


def test_fma_f32_is_one_correct_rounding():
    rng = np.random.default_rng(9)
    n = 6000
    x = _f32(rng, n, -40, 40).astype(np.float64)
    y = _f32(rng, n, -40, 40)
    # z near x*y (cancellation) or near half an ulp of x*y (ties), or random
    prod = x * y.astype(np.float64)
    z = np.where(rng.random(n) < 0.4, -prod, prod * np.exp2(rng.integers(-30, 10, n)))
    z = z.astype(np.float32)
    ties = rng.random(n) < 0.3  # z + x*y exactly half-way between float32 neighbours
    zf = z.astype(np.float64)
    ulp = np.exp2(np.floor(np.log2(np.abs(zf) + 1e-300)) - 23)
    yt = (rng.integers(0, 1 << 12, n) * 2 + 1).astype(np.float64) * ulp / 2  # odd multiple of ulp/2
    ok = ties & (np.abs(yt) < 2.0 ** 100) & (ulp > 2.0 ** -140)
    x = np.where(ok, 1.0, x)
    y = np.where(ok, yt.astype(np.float32), y)
    # 48-bit x: exact products of two float32 (the "fma_exact" operand)
    x48 = _f32(rng, n, -20, 20).astype(np.float64) * _f32(rng, n, -20, 20).astype(np.float64)
    for xs in (x, x48):
        for i in range(n):
            got = fma_f32(xs[i], np.float64(y[i]), np.float64(z[i]))
            want = _rn32(Fraction(xs[i]) * Fraction(float(y[i])) + Fraction(float(z[i])))
            assert np.float32(got).view(np.uint32) == want.view(np.uint32), (xs[i], y[i], z[i])


def test_fma_f32_double_rounding_trap():
    # x*y + z = 1 + 2**-24 + 2**-70: just above the float32 tie between 1 and 1 + 2**-23.
    # RN64 first lands on the tie and RN32 then picks the even 1.0 (wrong); one correct
    # rounding gives 1 + 2**-23.
    z = np.float64(np.float32(1 + 2.0 ** -23))
    x = np.float64(np.float32(1 + 2.0 ** -23))
    y = np.float64(np.float32(-(2.0 ** -24 - 2.0 ** -47)))
    assert Fraction(x) * Fraction(y) + Fraction(z) == 1 + Fraction(2) ** -24 + Fraction(2) ** -70
    assert np.float32(fma_f32(x, y, z)) == np.float32(1 + 2.0 ** -23)
    assert np.float32(x * y + z) == np.float32(1.0)  # naive float64 then float32


def test_promote_ops_on_the_double_rounding_trap():
    # acc = 1 + 2**-23, scale = 1 + 2**-23, partial = -(2**-24 - 2**-47): exact result
    # 1 + 2**-24 + 2**-70 (just above a tie).  fma / fma_exact round once -> up;
    # mul_add rounds the product to -2**-24 first, lands on the tie, goes to even 1.0.
    z = np.full((1, 2), 1 + 2.0 ** -23, np.float32)
    part = np.full((1, 2), -(2.0 ** -24 - 2.0 ** -47), np.float32)
    s = np.float32(1 + 2.0 ** -23)
    up = np.float32(1 + 2.0 ** -23)
    assert np.all(promote(z.copy(), part, s, 1.0, "fma") == up)
    assert np.all(promote(z.copy(), part, 1.0, s, "fma_exact") == up)
    assert np.all(promote(z.copy(), part, s, 1.0, "mul_add") == np.float32(1.0))
    # a scale product that is not a float32: fma rounds it first, fma_exact does not
    sa, sb = np.float32(1 + 2.0 ** -12), np.float32(1 + 2.0 ** -12)  # product 1 + 2**-11 + 2**-24
    one = np.full((1, 1), 1.0, np.float32)
    zero = np.zeros((1, 1), np.float32)
    assert promote(zero.copy(), one, sa, sb, "fma")[0, 0] == np.float32(1 + 2.0 ** -11)
    assert promote(zero.copy(), one, sa, sb, "fma_exact")[0, 0] == np.float32(1 + 2.0 ** -11)
    part = np.full((1, 1), 2.0 ** 4 * (1 + 2.0 ** -22), np.float32)
    r_fma = promote(one.copy(), part, sa, sb, "fma")[0, 0]
    r_ex = promote(one.copy(), part, sa, sb, "fma_exact")[0, 0]
    s = np.float32(np.float64(sa) * np.float64(sb))
    assert r_fma == _rn32(Fraction(float(s)) * Fraction(float(part[0, 0])) + 1)
    assert r_ex == _rn32(Fraction(float(sa)) * Fraction(float(sb)) * Fraction(float(part[0, 0])) + 1)
    assert r_fma != r_ex


def test_promote_rejects_bad_op():
    with pytest.raises(InputError, match="promote_op must be one of fma, mul_add, fma_exact, fma_row_first, got 'fms'"):
        promote(np.zeros((1, 1), np.float32), np.zeros((1, 1), np.float32), 1.0, 1.0, "fms")


# ----------------------------------------------------------------------------- output conversion


def test_out_dtype_conversions():
    rng = np.random.default_rng(10)
    form = "m64n16k16.f32.bf16.bf16"
    _, a, b = _mats(rng, form, 64, 64, 16, "finite")
    d = gemm(a, b, instr=PFX + form)
    assert _same(gemm(a, b, instr=PFX + form, out_dtype="bf16"), d.astype(ml_dtypes.bfloat16))
    assert _same(gemm(a, b, instr=PFX + form, out_dtype=np.float16), d.astype(np.float16))
    assert _same(gemm(a, b, instr=PFX + form, out_dtype="f32"), d)


# ----------------------------------------------------------------------------- validation


I = PFX + "m64n16k32.f32.e4m3.e4m3"
A = np.zeros((64, 128), E4)
B = np.zeros((128, 16), E4)


@pytest.mark.parametrize("kw, exc, msg", [
    (dict(a=np.zeros((60, 128), E4)), InputError, "M must be a positive multiple of 64, got 60"),
    (dict(a=np.zeros((64, 100), E4), b=np.zeros((100, 16), E4)), InputError,
     "K must be a positive multiple of 32 for m64n16k32, got 100"),
    (dict(b=np.zeros((128, 24), E4)), InputError, "N must be a positive multiple of 16 for m64n16k32, got 24"),
    (dict(b=np.zeros((64, 16), E4)), InputError, "b must have shape (K, N) with K = 128 (from a), got (64, 16)"),
    (dict(a=np.zeros((64, 128), np.float16)), DTypeError, "a must be float8_e4m3fn for .e4m3, got float16"),
    (dict(promote_every=3), InputError,
     "promote_every must be a positive divisor of the number of instructions K/32 = 4, got 3"),
    (dict(scale_a=2.0), InputError,
     "scale_a/scale_b need promote_every: the scales are applied when partial sums are promoted"),
    (dict(promote_every=2, scale_a=np.ones((64, 4), np.float32)), InputError,
     "a promotion stage (64 of K) must lie inside one scale_a block, but the block is K/4 = 32"),
    (dict(promote_every=1, scale_b=np.ones((4, 3), np.float32)), InputError,
     "scale_b must have shape (Kb, Nb) with Nb dividing N = 16, got (4, 3)"),
    (dict(promote_every=1, scale_a=np.ones((32, 4), np.float32)), InputError,
     "scale_a must have shape (M, Kb) = (64, Kb), got (32, 4)"),
    (dict(promote_every=1, c=np.zeros((64, 16), np.float16)), DTypeError,
     "c must be float32 for the float32 promotion accumulator, got float16"),
    (dict(c=np.zeros((64, 8), np.float32)), InputError, "c must have shape (M, N) = (64, 16), got (64, 8)"),
    (dict(out_dtype="f64"), InputError, "out_dtype must be f32, f16 or bf16 (or s32 for integer forms), got 'f64'"),
    (dict(promote_op="fms"), InputError, "promote_op must be one of fma, mul_add, fma_exact, fma_row_first, got 'fms'"),
])
def test_validation_messages(kw, exc, msg):
    args = dict(a=A, b=B)
    args.update(kw)
    a, b = args.pop("a"), args.pop("b")
    with pytest.raises(exc) as ei:
        gemm(a, b, instr=I, **args)
    assert str(ei.value) == msg


def test_int8_rejects_promotion():
    with pytest.raises(InputError, match="promote_every applies to floating-point forms"):
        gemm(np.zeros((64, 64), np.int8), np.zeros((64, 8), np.int8), instr=PFX + "m64n8k32.s32.s8.s8",
             promote_every=1)


# ----------------------------------------------------------------------------- error report


def test_error_vs_k_rows_and_table(tmp_path):
    from refmodel.numerics.error_report import error_vs_k, format_table, plot_error_vs_k

    rows = error_vs_k(PFX + "m64n16k32.f32.e4m3.e4m3", ks=(256, 1024), promote=(None, 1, 4, 16))
    got = {(r["k"], r["promote_every"]): r for r in rows}
    assert (256, 16) not in got and (1024, 16) in got  # 16 does not divide 256/32 = 8
    # more frequent promotion, smaller error; the unpromoted error grows with K
    assert got[(1024, 1)]["rel_err"] < got[(1024, 4)]["rel_err"] < got[(1024, None)]["rel_err"]
    assert got[(1024, None)]["rel_err"] > got[(256, None)]["rel_err"]
    assert all(r["max_rel_err"] >= r["rel_err"] * 0.5 for r in rows)
    text = format_table(rows)
    assert "every 4" in text and text.count("\n") == 3
    pytest.importorskip("matplotlib")
    path = plot_error_vs_k(rows, str(tmp_path / "err.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_so(monkeypatch, tmp_path):
    import builtins

    from refmodel.numerics.error_report import plot_error_vs_k

    real = builtins.__import__

    def fake(name, *a, **k):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(ImportError, match="plot_error_vs_k needs matplotlib"):
        plot_error_vs_k([{"k": 32, "promote_every": None, "rel_err": 0.1}], str(tmp_path / "x.png"))


def test_error_vs_k_validation():
    from refmodel.numerics.error_report import error_vs_k

    with pytest.raises(InputError, match="ks must be positive multiples of 32, got \\[100\\]"):
        error_vs_k(ks=(100,))
    with pytest.raises(InputError, match="dist must be one of uniform, normal, got 'cauchy'"):
        error_vs_k(dist="cauchy")
    with pytest.raises(InputError, match="n must be a positive multiple of the instruction's N = 128, got 16"):
        error_vs_k(n=16)
