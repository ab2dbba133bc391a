"""cvt forms: the table agrees with ptxas, packing order, semantics against independent evidence."""

import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np
import pytest

from refmodel import cvt
from refmodel.numerics import fp8
from refmodel.numerics.cvt import CVT_FORMS, parse_cvt
from refmodel.errors import DTypeError, FormError, InputError

PTXAS = shutil.which("ptxas")

NEAR_MISSES = [
    "cvt.rn.e4m3x2.f32", "cvt.rn.relu.e5m2x2.f32", "cvt.rz.satfinite.e4m3x2.f32",
    "cvt.rn.e4m3x2.f16x2", "cvt.rn.satfinite.f16x2.e4m3x2", "cvt.rz.f16x2.e5m2x2",
    "cvt.rn.satfinite.e4m3x2.bf16x2", "cvt.rn.bf16x2.e4m3x2", "cvt.rm.f16x2.f32",
]


def _ptx(instr: str) -> str:
    form = None
    try:
        form = parse_cvt(instr)
        types = form.ptx_types
    except FormError:
        parts = instr.split(".")
        reg = {"f32": "f32", "f16x2": "b32", "bf16x2": "b32", "e4m3x2": "b16", "e5m2x2": "b16"}
        types = (reg[parts[-2]], reg[parts[-1]]) + ((reg[parts[-1]],) if parts[-1] == "f32" else ())
    names = {"f32": "f", "b32": "r", "b16": "h"}
    ops = ", ".join(f"{names[t]}{i}" for i, t in enumerate(types))
    return (".version 8.7\n.target sm_90a\n.address_size 64\n.visible .entry k(){\n"
            " .reg .f32 f<4>; .reg .b32 r<4>; .reg .b16 h<4>;\n"
            f" {instr} {ops};\n ret;\n}}\n")


def _assembles(instr: str, tmp_path) -> bool:
    p = tmp_path / (instr.replace(".", "_") + ".ptx")
    p.write_text(_ptx(instr))
    r = subprocess.run([PTXAS, "-arch=sm_90a", str(p), "-o", "/dev/null"], capture_output=True, text=True)
    return r.returncode == 0


@pytest.mark.skipif(PTXAS is None, reason="ptxas not found (install the CUDA toolkit to check forms)")
def test_every_form_assembles_and_near_misses_do_not(tmp_path):
    with ThreadPoolExecutor(4) as ex:
        ok = list(ex.map(lambda f: _assembles(f.instr, tmp_path), CVT_FORMS))
        bad = list(ex.map(lambda s: _assembles(s, tmp_path), NEAR_MISSES))
    assert all(ok), [f.instr for f, o in zip(CVT_FORMS, ok) if not o]
    assert not any(bad), [s for s, b in zip(NEAR_MISSES, bad) if b]


@pytest.mark.parametrize("instr", NEAR_MISSES)
def test_near_misses_raise_form_error(instr):
    with pytest.raises(FormError):
        parse_cvt(instr)


def test_specific_rule_messages():
    with pytest.raises(FormError, match="requires .satfinite"):
        parse_cvt("cvt.rn.e4m3x2.f32")
    with pytest.raises(FormError, match="no cvt from .bf16x2 to .e4m3x2"):
        parse_cvt("cvt.rn.satfinite.e4m3x2.bf16x2")
    with pytest.raises(FormError, match="rounding modifier"):
        parse_cvt("cvt.satfinite.e4m3x2.f32")


def test_modifier_order_is_free():
    assert parse_cvt("cvt.rn.relu.satfinite.e4m3x2.f32") is parse_cvt("cvt.rn.satfinite.relu.e4m3x2.f32")


def test_form_count():
    # 8 f32/f16x2 -> f8x2 forms, 4 f8x2 -> f16x2, 16 f32 -> f16x2/bf16x2
    assert len(CVT_FORMS) == 28 and len({f.instr for f in CVT_FORMS}) == 28


def test_f8x2_f32_packing_order():
    d = cvt("cvt.rn.satfinite.e4m3x2.f32", np.float32(1.0), np.float32(-2.0))
    assert int(d) == (0x38 << 8) | 0xC0  # a -> d[15:8], b -> d[7:0]


def test_f16x2_source_high_half_to_high_byte():
    a = np.uint32((0x3C00 << 16) | 0xC000)  # f16 1.0 high, -2.0 low
    assert int(cvt("cvt.rn.satfinite.e4m3x2.f16x2", a)) == (0x38 << 8) | 0xC0


def test_f16x2_from_f8x2_is_exact_for_every_pair():
    a = np.arange(1 << 16, dtype=np.uint16)
    for fmt in ("e4m3", "e5m2"):
        d = cvt(f"cvt.rn.f16x2.{fmt}x2", a)
        hi, lo = (d >> 16).astype(np.uint16), (d & 0xFFFF).astype(np.uint16)
        mt = ml_dtypes.float8_e4m3fn if fmt == "e4m3" else ml_dtypes.float8_e5m2
        for half, byte in ((hi, a >> 8), (lo, a & 0xFF)):
            want = byte.astype(np.uint8).view(mt).astype(np.float16)
            nan = np.isnan(want)
            assert np.array_equal(half[~nan], want.view(np.uint16)[~nan])
            assert np.all(half[nan] == 0x7FFF)


def test_f16x2_f32_packing_matches_numpy_rne():
    rng = np.random.default_rng(5)
    a = rng.integers(0, 2**32, 100000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    b = rng.integers(0, 2**32, 100000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    d = cvt("cvt.rn.f16x2.f32", a, b)
    with np.errstate(over="ignore"):
        for half, src in (((d >> 16) & 0xFFFF, a), (d & 0xFFFF, b)):
            want = src.astype(np.float16).view(np.uint16)
            ok = ~np.isnan(src)
            assert np.array_equal(half[ok].astype(np.uint16), want[ok])
    d = cvt("cvt.rn.bf16x2.f32", a, b)
    want = b.astype(ml_dtypes.bfloat16).view(np.uint16)
    ok = ~np.isnan(b)
    assert np.array_equal((d & 0xFFFF)[ok].astype(np.uint16), want[ok])


def test_satfinite_f16_clamps_inf():
    d = cvt("cvt.rn.satfinite.f16x2.f32", np.float32(np.inf), np.float32(-1e6))
    assert int(d) == (0x7BFF << 16) | 0xFBFF


def test_f32_forms_accept_bit_patterns():
    x = np.array([1.5, -3.0, np.nan], np.float32)
    assert np.array_equal(cvt("cvt.rn.satfinite.e5m2x2.f32", x, x),
                          cvt("cvt.rn.satfinite.e5m2x2.f32", x.view(np.uint32), x.view(np.uint32)))


def test_operand_errors():
    with pytest.raises(InputError, match="two operands"):
        cvt("cvt.rn.satfinite.e4m3x2.f32", np.float32(1))
    with pytest.raises(DTypeError, match="operand a must be"):
        cvt("cvt.rn.satfinite.e4m3x2.f16x2", np.float32(1))
    with pytest.raises(InputError, match="one packed operand"):
        cvt("cvt.rn.f16x2.e4m3x2", np.uint16(1), np.uint16(2))
