"""The special-function unit: forms as data, the model's identities and PTX bounds, the API's rules,
the teaching trace, and the table fitter (the H200 comparison itself: fixtures/sfu, replayed by
tests/test_fixtures.py, and tests/test_gpu_sfu.py on a device)."""

from __future__ import annotations

import math
import subprocess

import ml_dtypes
import numpy as np
import pytest

import refmodel
from refmodel.errors import DTypeError, FormError, InputError
from refmodel.numerics.sfu import SFU_FORMS, parse_sfu
from refmodel.numerics.sfu import mufu
from refmodel.numerics.sfu.explain import explain, render, trace_mufu
from refmodel.numerics.sfu.forms import NEAR_MISSES
from refmodel.numerics.sfu.unit import MODELLED, sfu
from host_cxx import NVCC, needs_nvcc
from seeds import rng_for


def f32bits(v) -> np.ndarray:
    return np.asarray(v, np.float32).view(np.uint32)


# ----------------------------------------------------------------------------------- the table
def test_forms_table_is_the_issue_list():
    got = {f.instr for f in SFU_FORMS}
    want = {f"{op}.approx{ftz}.f32" for op in ("ex2", "lg2", "rcp", "rsqrt", "sqrt", "sin", "cos")
            for ftz in ("", ".ftz")}
    want |= {"tanh.approx.f32", "rcp.approx.ftz.f64", "rsqrt.approx.f64", "rsqrt.approx.ftz.f64"}
    want |= {f"div.{m}{ftz}.f32" for m in ("approx", "full") for ftz in ("", ".ftz")}
    want |= {"ex2.approx.f16", "ex2.approx.f16x2", "ex2.approx.ftz.bf16", "ex2.approx.ftz.bf16x2"}
    want |= {f"tanh.approx.{t}" for t in ("f16", "f16x2", "bf16", "bf16x2")}
    assert got == want and len(SFU_FORMS) == 30
    assert not set(NEAR_MISSES) & got
    assert MODELLED == got          # every form has a model
    for f in SFU_FORMS:
        assert parse_sfu(f.instr) is f and f.bound


@pytest.mark.parametrize("bad, rule", [
    ("exp2.approx.f32", "opcode must be one of"), ("ex2.approx.bf16", "not an sm_90a form of ex2"),
    ("rcp.approx.f64", "not an sm_90a form"), (3, "is a string"),
])
def test_parse_refuses_in_one_sentence(bad, rule):
    with pytest.raises(FormError, match=rule) as e:
        parse_sfu(bad)
    assert "\n" not in str(e.value)


@needs_nvcc
def test_every_form_assembles_and_near_misses_do_not(tmp_path):
    """The table is what ptxas -arch=sm_90a accepts (ptxas's own verdict, no device needed)."""
    from gpu.kernels.sfu import form_source
    from gpu.kernels.runtime import PRELUDE
    from refmodel.numerics.sfu.forms import SfuForm

    def assembles(form):
        src = tmp_path / "k.cu"
        src.write_text(PRELUDE + form_source(form))
        r = subprocess.run([NVCC, "-arch=sm_90a", "-cubin", "-o", str(tmp_path / "k.cubin"), str(src)],
                           capture_output=True, text=True)
        return r.returncode == 0

    for f in SFU_FORMS:
        assert assembles(f), f.instr
    for s in NEAR_MISSES:
        p = s.split(".")
        assert not assembles(SfuForm(p[0], p[1], "ftz" in p, p[-1], "")), s


# ------------------------------------------------------------------- identities and PTX bounds
def p2(k) -> np.ndarray:
    return np.ldexp(np.float64(1), k).astype(np.float32)


def test_exact_points():
    k = np.arange(-100, 101)
    assert (sfu("rcp.approx.f32", p2(k)) == p2(-k)).all()
    assert (sfu("ex2.approx.f32", k.astype(np.float32)) == p2(k)).all()
    assert sfu("lg2.approx.f32", np.float32(1)) == 0        # the only exact power: 1.0 is a special case
    assert (np.abs(sfu("lg2.approx.f32", p2(k)) - k) <= np.abs(k) * 2.0 ** -22).all()
    assert sfu("lg2.approx.f32", np.float32(2 ** -100)) != -100     # lg2's first segment starts at A = 4
    even = np.arange(-62, 63) * 2
    assert (sfu("sqrt.approx.f32", p2(even)) == p2(even // 2)).all()
    assert (sfu("rsqrt.approx.f32", p2(even)) == p2(-even // 2)).all()
    assert sfu("sin.approx.f32", np.float32(0)) == 0 and sfu("cos.approx.f32", np.float32(0)) == 1


def test_specials_follow_the_ptx_manual():
    inf, nan = np.float32(np.inf), np.float32(np.nan)
    v = lambda op, x: sfu(op, np.float32(x))
    assert v("rcp.approx.f32", -inf) == 0 and np.signbit(v("rcp.approx.f32", -inf))
    assert v("rcp.approx.f32", np.float32(-0.0)) == -inf
    assert v("rsqrt.approx.f32", np.float32(-0.0)) == -inf and v("rsqrt.approx.f32", inf) == 0
    assert np.isnan(v("rsqrt.approx.f32", -1.0)) and np.isnan(v("sqrt.approx.f32", -1.0))
    assert v("ex2.approx.f32", -inf) == 0 and v("ex2.approx.f32", np.float32(-0.0)) == 1
    assert v("lg2.approx.f32", np.float32(0)) == -inf
    assert v("tanh.approx.f32", -inf) == -1 and v("tanh.approx.f32", inf) == 1
    for op in ("ex2.approx.f32", "lg2.approx.f32", "rcp.approx.f32", "sin.approx.f32", "tanh.approx.f32"):
        assert int(np.asarray(v(op, nan)).view(np.uint32)) == 0x7FFFFFFF, op       # canonical NaN
    # subnormals: kept by the non-ftz forms, flushed by .ftz (tanh passes them through)
    tiny = np.float32(1e-40)
    assert v("rcp.approx.ftz.f32", tiny) == inf and np.isfinite(v("rcp.approx.f32", np.float32(1e-38) * 100))
    assert v("sqrt.approx.ftz.f32", tiny) == 0 and v("sqrt.approx.f32", tiny) > 0
    assert v("tanh.approx.f32", tiny) == tiny
    assert v("sin.approx.f32", tiny) == 0       # sin.approx.f32 is the .ftz sequence (FMUL.RZ, MUFU.SIN)


def _ulps(got, ref):
    o = lambda b: np.where(b >> 31, -(b & 0x7FFFFFFF).astype(np.int64), b.astype(np.int64))
    return o(np.asarray(got, np.float32).view(np.uint32)) - o(np.asarray(ref, np.float32).view(np.uint32))


def test_documented_error_bounds_hold(request):
    rng = rng_for(request)
    x = rng.uniform(-60, 60, 1 << 16).astype(np.float32)
    assert np.abs(_ulps(sfu("ex2.approx.ftz.f32", x), np.exp2(x.astype(np.float64)))).max() <= 2
    p = rng.uniform(1e-30, 1e30, 1 << 16).astype(np.float32)
    assert np.abs(_ulps(sfu("rcp.approx.f32", p), 1 / p.astype(np.float64))).max() <= 1
    rel = lambda g, r: np.abs(g.astype(np.float64) / r - 1)
    assert rel(sfu("rsqrt.approx.f32", p), 1 / np.sqrt(p.astype(np.float64))).max() <= 2 ** -22.9
    assert rel(sfu("sqrt.approx.f32", p), np.sqrt(p.astype(np.float64))).max() <= 2 ** -23
    a = rng.uniform(-math.pi, math.pi, 1 << 16).astype(np.float32)
    assert np.abs(sfu("sin.approx.f32", a) - np.sin(a.astype(np.float64))).max() <= 2 ** -20.9
    t = rng.uniform(-5, 5, 1 << 16).astype(np.float32)
    assert rel(sfu("tanh.approx.f32", t), np.tanh(t.astype(np.float64))).max() <= 2 ** -10.98
    q = rng.uniform(0.5, 2, 1 << 16).astype(np.float32)
    assert np.abs(sfu("lg2.approx.f32", q) - np.log2(q.astype(np.float64))).max() <= 2 ** -22


def test_x2_forms_are_two_scalar_forms(request):
    rng = rng_for(request)
    w = rng.integers(0, 1 << 32, 4096, dtype=np.uint64).astype(np.uint32)
    for x2 in ("ex2.approx.f16x2", "ex2.approx.ftz.bf16x2", "tanh.approx.f16x2", "tanh.approx.bf16x2"):
        one = x2[:-2]
        got = sfu(x2, w)
        lo, hi = sfu(one, (w & 0xFFFF).astype(np.uint16)), sfu(one, (w >> 16).astype(np.uint16))
        assert (got == (lo.astype(np.uint32) | (hi.astype(np.uint32) << 16))).all(), x2


def test_div_full_is_rcp_then_multiply(request):
    rng = rng_for(request)
    a = rng.uniform(-1e6, 1e6, 4096).astype(np.float32)
    b = rng.uniform(1e-3, 1e3, 4096).astype(np.float32)
    assert (sfu("div.full.f32", a, b) == a * sfu("rcp.approx.ftz.f32", b)).all()


# ------------------------------------------------------------------------------------ the API
def test_api_kinds_and_rules():
    assert sfu("ex2.approx.f32", np.float32([1, 2])).dtype == np.float32
    assert sfu("ex2.approx.f32", f32bits([1, 2])).dtype == np.uint32
    assert sfu("ex2.approx.ftz.bf16", np.array([1], ml_dtypes.bfloat16)).dtype == ml_dtypes.bfloat16
    assert sfu("tanh.approx.f16", np.array([0.5], np.float16))[0] == np.float16(0.4619)
    assert sfu("rsqrt.approx.ftz.f64", np.array([4.0]))[0] == 0.5
    assert sfu("div.approx.f32", np.float32([[1], [2]]), np.float32([4, 8])).shape == (2, 2)
    assert refmodel.sfu is sfu
    assert sfu("ex2.approx.f32", 1.5).dtype == np.float32 and float(sfu("rcp.approx.f32", 4.0)) == 0.25
    with pytest.raises(DTypeError, match="takes float32 values or uint32 bit patterns as x, got float64"):
        sfu("ex2.approx.f32", np.array([1.0]))
    with pytest.raises(InputError, match="takes 2 operands, got 1"):
        sfu("div.full.f32", np.float32([1]))
    with pytest.raises(InputError, match="takes 1 operand, got 2"):
        sfu("rcp.approx.f32", np.float32([1]), np.float32([1]))
    with pytest.raises(InputError, match="do not broadcast"):
        sfu("div.full.f32", np.float32([1, 2]), np.float32([1, 2, 3]))
    with pytest.raises(DTypeError, match="uint32 words packing two float16"):
        sfu("ex2.approx.f16x2", np.float16([1, 2]))


# ---------------------------------------------------------------------- model, trace, fitter
@pytest.mark.parametrize("name", ["mufu_rcp", "mufu_rsq", "mufu_sqrt", "mufu_ex2", "mufu_lg2", "mufu_tanh"])
def test_python_and_compiled_model_agree(name, request):
    """The numba function run as plain Python gives the compiled function's bits."""
    fn = getattr(mufu, name)
    rng = rng_for(request, name)
    for x in rng.integers(0, 1 << 32, 2000, dtype=np.uint64).tolist():
        assert fn.py_func(x) == fn(x), hex(x)


@pytest.mark.parametrize("fn", ["RCP", "RSQ", "SQRT", "EX2", "LG2", "SIN", "COS", "TANH"])
def test_trace_reaches_the_model(fn, request):
    rng = rng_for(request, fn)
    xs = np.concatenate([rng.integers(0, 1 << 32, 3000, dtype=np.uint64),
                         rng.integers(0x3D000000, 0x41000000, 3000, dtype=np.uint64)])
    comp = {"SIN": lambda v: mufu.mufu_sincos(v, False), "COS": lambda v: mufu.mufu_sincos(v, True),
            "RCP": mufu.mufu_rcp, "RSQ": mufu.mufu_rsq, "SQRT": mufu.mufu_sqrt, "EX2": mufu.mufu_ex2,
            "LG2": mufu.mufu_lg2, "TANH": mufu.mufu_tanh}[fn]
    for x in xs.tolist():
        t = trace_mufu(fn, x)
        assert t["result"] == comp(x)
        r = comp(x)
        if "special" not in t and fn in ("RCP", "RSQ", "SQRT", "EX2") and 0 < (r >> 23) & 0xFF < 255:
            # the polynomial's shifted value is the result's significand (2^24: the carry into the exponent)
            assert t["shifted"] in ((r & 0x7FFFFF) | 0x800000, 1 << 24), hex(x)


def test_explain_renders_a_real_evaluation():
    r = explain("ex2.approx.ftz.f32", 0.7)
    assert r["result"] == int(f32bits(sfu("ex2.approx.ftz.f32", np.float32(0.7))))
    assert r["trace"]["segment"] == 44 and r["error_ulps"] == 0
    text = render(explain("rcp.approx.f32", np.float32(1e-40).view(np.uint32).item()))
    assert "MUFU.RCP of 0x090b6100" in text        # the operand after ptxas's 2^24 scaling
    with pytest.raises(InputError, match="takes two operands"):
        explain("div.full.f32", 1.0)


def test_fitter_recovers_the_tables_from_outputs():
    """tools/sfu_fit.py solves the RCP and SQRT tables back, uniquely, from the model's outputs on
    [1, 2) (the same outputs the H200 gives: fixtures/sfu)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import sfu_fit
    from refmodel.numerics.sfu.fixed import square17
    from refmodel.numerics.sfu.tables import RCP

    k = np.arange(1 << 23, dtype=np.int64)
    out = sfu("rcp.approx.ftz.f32", (0x3F800000 + k).astype(np.uint32)).astype(np.int64)
    fxo = out - (126 << 23) + 0x800000
    xl = k & 0xFFFF
    tab = sfu_fit.fit_table("rcp", 128, k >> 16, xl, square17(xl << 1), (fxo << 15) - 0x47E7,
                            ((fxo + 1) << 15) - 1 - 0x47E7, 13)
    assert (np.array(tab) == RCP).all()


def test_cli_sfu(capsys):
    from wgref.cli import main

    assert main(["sfu", "sqrt.approx.f32", "2"]) == 0
    out = capsys.readouterr().out
    assert "segment 64" in out and "0x3fb504f3" in out and "error +0 ulp" in out
    assert main(["sfu", "div.full.f32", "1"]) == 2
    assert main(["sfu", "tanh.approx.bf16", "1"]) == 2
    assert main(["sfu", "sin.approx.f32", "0x3f800000", "--json"]) == 0


@pytest.mark.parametrize("name", ["ex2.approx.f16x2", "ex2.approx.ftz.bf16x2", "tanh.approx.f16x2",
                                  "tanh.approx.bf16x2", "ex2.approx.f16", "tanh.approx.bf16"])
def test_table_sweep_equals_the_direct_sweep(name):
    """The sweep of a 16-bit or two-halves form looks its outputs up in a table of the 65536 halves:
    the chunk sums equal the loop that runs the model on every input word, and a two-halves form's
    model is its half form's on each half (the table's premise)."""
    from refmodel.numerics.sfu.unit import HALVES, UNARY_CODE, _sweep_sums_direct, sfu, sweep_sums

    code = UNARY_CODE[name]
    bits = 16 if name not in HALVES else 32
    chunks = [0x3C, 0xFF] if bits == 32 else [0x00]
    assert np.array_equal(sweep_sums(code, chunks, bits, 0), _sweep_sums_direct(code, chunks, bits, 0))
    if name in HALVES:
        w = np.random.default_rng(34).integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32)
        half = HALVES[name]
        lo = sfu(half, (w & 0xFFFF).astype(np.uint16)).view(np.uint16).astype(np.uint32)
        hi = sfu(half, (w >> 16).astype(np.uint16)).view(np.uint16).astype(np.uint32)
        assert np.array_equal(sfu(name, w).view(np.uint32), lo | (hi << 16))


@pytest.mark.parametrize("name,bits", [("ex2.approx.ftz.f32", 32), ("sin.approx.f32", 32), ("rsqrt.approx.f64", 64)])
def test_sweep_sums_are_the_digest_of_the_model_outputs(name, bits):
    """A sweep's chunk sum (block by block through the map kernel) is the digest (digest.py) of the
    model's outputs on that chunk's words, computed through the public sfu()."""
    from refmodel.numerics.sfu.digest import digest_array
    from refmodel.numerics.sfu.unit import UNARY_CODE, sweep_sums
    from refmodel.numerics.sfu.unit import sfu

    c, lo = 0x3F, 0x9E3779B9
    i = (np.uint64(c) << np.uint64(24)) + np.arange(1 << 24, dtype=np.uint64)
    words = i.astype(np.uint32) if bits == 32 else (i << np.uint64(32)) | np.uint64(lo)
    want = digest_array(sfu(name, words), c << 24)
    assert int(sweep_sums(UNARY_CODE[name], [c], bits, lo if bits == 64 else 0)[0]) == want


# ---------------------------------------------------------------- the fast paths of the datapath
def test_square17_table_is_the_partial_product_sum():
    """The squarer's lookup table holds, for every 17-bit x, the masked partial-product sum that
    defines it (computed by the compiled loop), and fits its uint16 entries."""
    from refmodel.numerics.sfu.fixed import SQUARE17, square17_bits, square17_scalar

    xs = np.arange(1 << 17)
    want = np.array([square17_bits(int(x)) for x in xs[::97]] + [square17_bits((1 << 17) - 1)])
    got = np.array([square17_scalar(int(x)) for x in xs[::97]] + [square17_scalar((1 << 17) - 1)])
    assert np.array_equal(got, want)
    loop = np.zeros(1 << 17, np.int64)            # all of them, the partial products summed in numpy
    for i in range(17):
        loop += np.where((xs >> i) & 1, xs >> (18 - i), 0)
    assert np.array_equal(SQUARE17.astype(np.int64), loop >> 1)     # (a uint16 entry that wrapped would differ)


def test_normalise_in_one_shift_is_the_loop(request):
    """Normalising by the top bit's position (count leading zeros) gives the loop's shift and exponent,
    for zero, every bit width, and values already at or above the target bit."""
    rng = rng_for(request, "normalise")
    vals = [0, 1, (1 << 42), (1 << 43) - 1, (1 << 50) + 3]
    vals += [int(v) >> int(s) for v, s in zip(rng.integers(1, 1 << 62, 3000, dtype=np.int64),
                                              rng.integers(0, 62, 3000))]
    for bit in (37, 42):
        for v in vals:
            assert mufu._normalise(v, 133, bit) == mufu._normalise_loop(v, 133, bit), (v, bit)
    for v in vals:
        if v > 0:
            assert mufu.bit_length(v) == v.bit_length()


def test_tanh_result_shift_is_the_loop(request):
    """MUFU.TANH keeps 24 significant bits of R: the shift from R's bit length equals counting places."""
    rng = rng_for(request, "tanh-shift")
    for r in [0, 1, (1 << 24) - 1, 1 << 24, (1 << 40) + 1] + rng.integers(0, 1 << 41, 2000).tolist():
        n = 0
        while (r >> n) >= (1 << 24):
            n += 1
        assert (mufu.bit_length(r) - 24 if r >= (1 << 24) else 0) == n
