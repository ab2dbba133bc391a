"""Adversarial values, second pass (issue 16): any size, any flag, any integer, any long text.

Properties, each over every parameter of its class in the public API of the model:

* **any size**: a huge integer for a sized parameter (rows, K, lines, smem_size, tile sizes,
  register ranges, ...) gives one clean :class:`~refmodel.errors.WgrefError` fast, with no large
  allocation (tracemalloc sees every numpy buffer) -- never a MemoryError, an OverflowError or a
  hang;
* **any flag value**: every boolean parameter goes through one checker: "no", "false", 2, 0.5,
  None are refused; True/False, 0/1 and numpy bools are accepted and mean what they say
  (``relu=0`` does not apply relu, ``nan_equal=np.True_`` ignores NaN payloads);
* **any integer**: floats (1.0 too), NaN, bools, strings, negatives and out-of-range values are
  refused with the rule; register values above 2**32 are refused, not wrapped; forms that do not
  exist (m64n40 .s32, 14-byte shared-memory rows) are refused;
* **any long text**: a 5,000-character string (or a 10**5000 integer) in any argument comes back
  as a short excerpt, never echoed whole;
* and the format cases: a JSON trace line holding U+2028 / U+2029 / U+0085 / a form feed is one
  line, a lone ``commit_group`` trace names its event, JUnit XML is well-formed whatever a name
  holds.

Every case counts into the session's ``adversarial cases tried`` total (tests/conftest.py).
"""

from __future__ import annotations

import json
import time
import tracemalloc
import warnings
import xml.dom.minidom

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import refmodel
from refmodel.errors import InputError, WgrefError
from refmodel.golden import cublas_matmul, cutlass_dense_gemm, triton_matmul
from refmodel.layouts.descriptor import MatrixDescriptor, kmajor_offsets, make_descriptor, operand_addresses
from refmodel.layouts.fragment import render_accumulator_layout
from refmodel.layouts.smem import SmemLayout, dense_strides, rowmajor_offsets, tile_image
from refmodel.layouts.sparse_formats import cutlass_sm90_offsets, from_cutlass_sm90_meta
from refmodel.layouts.stmatrix import fragment_map
from refmodel.layouts.swizzle import Swizzle, atom_table
from refmodel.limits import LIMITS, LimitError, check_limit, table
from refmodel.machine import pipeline as pl
from refmodel.machine.epilogue import epilogue_stmatrix
from refmodel.machine.tma import tma_load, tma_offsets
from refmodel.numerics.error_report import error_vs_k
from refmodel.numerics.fp8 import convert_codes
from refmodel.numerics.sweep import encode_f32_fast, sweep_chunk
from refmodel.render import render
from refmodel.validate import check_flag, check_int, excerpt, loads_json
from refmodel.verify.differ import diff

import os

SCALE = 10 if os.environ.get("HYPOTHESIS_PROFILE") == "thorough" else 1

F16 = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"
E4M3 = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"
SP_F16 = "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16"
DESC_A = MatrixDescriptor(0, 128, 256).encode()
DESC_B = MatrixDescriptor(4096, 128, 256).encode()
RNG = np.random.default_rng(16)
A16 = (RNG.integers(-4, 5, (64, 16))).astype(np.float16)
B16 = (RNG.integers(-4, 5, (16, 8))).astype(np.float16)
C32 = np.full((64, 8), 0.5, np.float32)
SMEM = np.zeros(8192, np.uint8)
SMEM[:2048] = np.frombuffer(A16.tobytes(), np.uint8)[: 2048]   # any finite f16 bits
SMEM[4096:4096 + 256] = np.frombuffer(B16.T.copy().tobytes(), np.uint8)
SP_A = RNG.integers(-3, 4, (64, 16)).astype(np.float16)
SP_B = RNG.integers(-3, 4, (32, 8)).astype(np.float16)
SP_META = np.full((64, 8), 0b0100, np.uint8)
C_REGS = np.full((128, 4), np.float32(0.25).view(np.uint32), np.uint32)
def _num(v: int) -> str:
    """The decimal text of an integer, also beyond Python's 4300-digit str() limit."""
    return str(v) if v < 10**4000 else "1" + "0" * (len(str(10**4000)) + 999)


def _js(obj: dict) -> str:
    """json.dumps with integers of any size (written as their digits)."""
    return json.dumps({k: (f"@{_num(v)}@" if isinstance(v, int) and not isinstance(v, bool) else v)
                       for k, v in obj.items()}).replace('"@', "").replace('@"', "")


HUGE = [10**6, 2**31, 10**9 + 7, 2**40, 10**12, 10**18, 2**64, 10**30, 10**100, 10**5000]


def one_error(fn, *args, **kwargs):
    """Call ``fn``: success, or one one-line WgrefError (returned); anything else fails."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            fn(*args, **kwargs)
    except WgrefError as e:
        msg = str(e)
        assert msg and "\n" not in msg, f"{type(e).__name__} is not one line: {msg[:300]!r}"
        return e
    except Exception as e:  # noqa: BLE001 - the property under test
        pytest.fail(f"{getattr(fn, '__name__', fn)} raised {type(e).__name__} (not a WgrefError): {str(e)[:300]}")
    return None


def refused(fn, *args, **kwargs) -> WgrefError:
    e = one_error(fn, *args, **kwargs)
    assert e is not None, f"{getattr(fn, '__name__', fn)} accepted {args!r:.200} {kwargs!r:.200}"
    return e


# ----------------------------------------------------------------------------- the limits table

def test_limits_table_is_data_with_reasons():
    rows = table()
    assert len(rows) >= 30 and len({r[0] for r in rows}) == len(rows)
    for name, value, reason in rows:
        assert isinstance(value, int) and value > 0 and len(reason) > 20, name
    assert LIMITS["smem_bytes"].value == 232448 and LIMITS["wgmma_n"].value == 256
    assert LIMITS["desc_offset_bytes"].value == (1 << 18) - 16
    from refmodel.limits import MAX_ARRAY_BYTES, MAX_JSON_DEPTH, MAX_NPZ_MEMBERS

    assert (MAX_ARRAY_BYTES, MAX_NPZ_MEMBERS, MAX_JSON_DEPTH) == (4 << 30, 4096, 64)
    with pytest.raises(LimitError, match=r"rows must be at most 4096 \(limit 'smem_rows': .*\), got 1000000$"):
        check_limit("smem_rows", 1000000, "rows")
    assert issubclass(LimitError, InputError)
    assert refmodel.machine.mainloop.SMEM_LIMIT == LIMITS["smem_bytes"].value


# ----------------------------------------------------------------------------- any size

def _e(name: str):
    return np.zeros((64, 16), np.float16)


# name -> fn(huge): a sized parameter set to a huge value, everything else valid
SIZED = {
    "quantize tile rows": lambda v: refmodel.quantize(np.ones((4, 4)), "e4m3", (v, 2)),
    "quantize tile cols": lambda v: refmodel.quantize(np.ones((4, 4)), "e4m3", (2, v)),
    "quantize tile string": lambda v: refmodel.quantize(np.ones((4, 4)), "e4m3", f"{_num(v)}x{_num(v)}"),
    "quantize margin": lambda v: refmodel.quantize(np.ones((4, 4)), "e4m3", margin=v),
    "DelayedScaling history_len": lambda v: refmodel.DelayedScaling("e4m3", v),
    "tma_load smem_size": lambda v: tma_load(np.zeros((16, 64), np.uint16), (8, 8), (0, 0), smem_size=v),
    "tma_load dst": lambda v: tma_load(np.zeros((16, 64), np.uint16), (8, 8), (0, 0), dst=v - v % 128),
    "tma_load fill": lambda v: tma_load(np.zeros((16, 64), np.uint16), (8, 8), (0, 0), fill=v),
    "tma_load smem_base": lambda v: tma_load(np.zeros((16, 64), np.uint16), (8, 8), (0, 0), smem_base=v),
    "tma_load box": lambda v: tma_load(np.zeros((16, 64), np.uint16), (v, 8), (0, 0)),
    "tma_load coords": lambda v: tma_load(np.zeros((16, 64), np.uint16), (8, 8), (v, 0)),
    "tma_offsets dst": lambda v: tma_offsets((8, 8), 2, dst=v - v % 128),
    "operand_addresses rows": lambda v: operand_addresses(DESC_A, v - v % 8, 16, 2),
    "operand_addresses k": lambda v: operand_addresses(DESC_A, 64, v, 2),
    "SmemLayout lbo": lambda v: SmemLayout("K", "none", 2, v - v % 16, 256),
    "SmemLayout offsets": lambda v: SmemLayout("MN", "128B", 2, 1024, 2048).offsets(64, v - v % 8),
    "tile_image size": lambda v: tile_image(A16, "K", "none", size=v),
    "tile_image base": lambda v: tile_image(A16, "K", "none", base=v - v % 1024),
    "rowmajor_offsets rows": lambda v: rowmajor_offsets(v, 64, 2, "128B"),
    "rowmajor_offsets cols": lambda v: rowmajor_offsets(64, v - v % 64, 2, "128B"),
    "rowmajor_offsets base": lambda v: rowmajor_offsets(64, 64, 2, "none", base=v),
    "dense_strides rows": lambda v: dense_strides("MN", "none", v - v % 8),
    "dense_strides row bytes": lambda v: dense_strides("K", "none", 64, v - v % 16),
    "kmajor_offsets rows": lambda v: kmajor_offsets(v - v % 8, 32, lbo=128, sbo=256),
    "kmajor_offsets row_bytes": lambda v: kmajor_offsets(64, v - v % 16, lbo=128, sbo=256),
    "make_descriptor rows": lambda v: make_descriptor(0, rows=v - v % 8, k=16, elem_bytes=2),
    "make_descriptor k": lambda v: make_descriptor(0, rows=64, k=v, elem_bytes=2),
    "make_descriptor k_step": lambda v: make_descriptor(0, swizzle="128B", rows=64, k=16, elem_bytes=2, k_step=v),
    "make_descriptor smem_size": lambda v: make_descriptor(0, rows=64, k=16, elem_bytes=2, smem_size=v),
    "make_descriptor smem_base": lambda v: make_descriptor(0, rows=64, k=16, elem_bytes=2, smem_size=4096,
                                                           smem_base=v),
    "make_descriptor base_offset": lambda v: make_descriptor(0, swizzle="128B", rows=64, k=16, elem_bytes=2,
                                                             base_offset=v),
    "MatrixDescriptor sbo": lambda v: MatrixDescriptor(0, 128, v - v % 16),
    "MatrixDescriptor decode": lambda v: MatrixDescriptor.decode(v),
    "error_vs_k K": lambda v: error_vs_k(E4M3, [v - v % 32]),
    "error_vs_k m": lambda v: error_vs_k(E4M3, [64], m=v - v % 64),
    "error_vs_k n": lambda v: error_vs_k(E4M3, [64], n=v - v % 8),
    "error_vs_k seed": lambda v: error_vs_k(E4M3, [64], seed=v),
    "render swizzle lines": lambda v: render("swizzle", lines=v),
    "render smem rows": lambda v: render("smem", rows=v - v % 8),
    "render smem k": lambda v: render("smem", k=v),
    "render smem lbo": lambda v: render("smem", mode="none", lbo=v - v % 16),
    "render desc rows": lambda v: render("desc", value=DESC_A, rows=v - v % 8),
    "render desc k": lambda v: render("desc", value=DESC_A, k=v),
    "render acc n": lambda v: render("acc", n=v - v % 8),
    "render stmatrix num": lambda v: render("stmatrix", num=v),
    "atom_table lines": lambda v: atom_table("128B", v),
    "Swizzle B": lambda v: Swizzle(3, 4, v),
    "epilogue fill": lambda v: epilogue_stmatrix(np.zeros((64, 16), np.float32), fill=v),
    "epilogue smem_base": lambda v: epilogue_stmatrix(np.zeros((64, 16), np.float32), smem_base=v - v % 1024),
    "wgmma_smem smem_base": lambda v: refmodel.wgmma_smem(F16, SMEM, DESC_A, DESC_B, smem_base=v),
    "cutlass_sm90_offsets m": lambda v: cutlass_sm90_offsets(v - v % 64, 128, "f16", 128),
    "cutlass_sm90_offsets k": lambda v: cutlass_sm90_offsets(64, v - v % 128, "f16", 128),
    "from_cutlass_sm90_meta m": lambda v: from_cutlass_sm90_meta(np.zeros(8, np.uint8), "f16", v - v % 64, 128, 128),
    "mainloop k_iters": lambda v: pl.gemm_mainloop_trace(k_iters=v),
    "mainloop stages": lambda v: pl.gemm_mainloop_trace(stages=v),
    "mainloop smem_base": lambda v: pl.gemm_mainloop_trace(smem_base=v - v % 1024),
    "mainloop promote_every": lambda v: pl.gemm_mainloop_trace(promote_every=v),
    "sweep_chunk": lambda v: sweep_chunk("e4m3", False, v),
    "diff max_samples": lambda v: diff(np.float32([1]), np.float32([2]), max_samples=v),
    "render_accumulator_layout rows": lambda v: render_accumulator_layout(8, "f32", rows=v),
    "gemm promote_every": lambda v: refmodel.gemm(np.zeros((64, 32), ml_dtypes.float8_e4m3fn),
                                                  np.zeros((32, 8), ml_dtypes.float8_e4m3fn), instr=E4M3,
                                                  promote_every=v),
    "pack_meta fill": lambda v: refmodel.pack_meta(SP_META, "f16", fill=v),
    "cublas splits": lambda v: cublas_matmul(np.zeros((64, 64), np.float16), np.zeros((64, 8), np.float16), splits=v),
    "triton block_k": lambda v: triton_matmul(np.zeros((64, 64), np.float16), np.zeros((64, 8), np.float16),
                                              block_k=v),
    "trace register range": lambda v: pl.parse_trace(json.dumps({"op": "reg_write", "regs": f"d[0:{_num(v)}]"})),
    "trace register index": lambda v: pl.parse_trace(json.dumps({"op": "reg_read",
                                                                 "regs": f"d[{_num(v)}:{_num(v)}1]"})),
    "trace smem range": lambda v: pl.parse_trace('{"op": "st_shared", "smem": [[0, %s]]}' % _num(v)),
    "trace mbarrier count": lambda v: pl.parse_trace(_js({"op": "mbarrier.init", "bar": "b", "count": v})),
    "trace wait_group n": lambda v: pl.parse_trace(_js({"op": "wait_group", "n": v})),
    "trace expect_tx bytes": lambda v: pl.parse_trace(_js({"op": "mbarrier.arrive_expect_tx", "bar": "b",
                                                           "bytes": v})),
    "trace descriptor": lambda v: pl.parse_trace(json.dumps({"op": "mma_async", "acc": "d[0:4]", "instr": F16,
                                                             "desc_b": _num(v)})),
    "trace descriptor int": lambda v: pl.parse_trace(_js({"op": "mma_async", "acc": "d[0:4]", "instr": F16,
                                                          "desc_b": v})),
}


def _bounded(fn, v):
    """One WgrefError (or success), within 10 s and 256 MiB of traced allocations."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        e = one_error(fn, v)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    took = time.perf_counter() - t0
    assert took < 10, f"took {took:.1f} s"
    assert peak < 512 << 20, f"allocated {peak >> 20} MiB"
    return e


@settings(max_examples=SCALE * 4 * len(SIZED))
@given(name=st.sampled_from(sorted(SIZED)), v=st.sampled_from(HUGE))
def test_any_size_is_one_error_without_allocation(name, v, adversarial_counter):
    adversarial_counter["cases"] += 1
    e = _bounded(SIZED[name], v)    # a moderately large value may be valid (a trace's range end at 10**6)
    assert e is None or len(str(e)) < 600, str(e)


@pytest.mark.parametrize("name", sorted(SIZED))
def test_every_sized_parameter_refuses_the_largest(name, adversarial_counter):
    """Each row of SIZED at 10**5000 and 2**64 (the digits and the overflow cases), deterministically."""
    for v in (2**64, 10**5000):
        adversarial_counter["cases"] += 1
        assert _bounded(SIZED[name], v) is not None, f"{name}={v}"


def test_the_issue_examples_name_their_limit():
    for fn, lim in [(lambda: tma_load(np.zeros((16, 64), np.uint16), (8, 8), (0, 0), fill=300), "0 to 255"),
                    (lambda: operand_addresses(DESC_A, 10**9, 16, 2), "smem_rows"),
                    (lambda: render("smem", rows=1000000), "diagram_rows"),
                    (lambda: render("desc", value=DESC_A, rows=1000000), "diagram_rows"),
                    (lambda: error_vs_k(E4M3, [10**12]), "error_k"),
                    (lambda: render("swizzle", lines=10**6), "diagram_lines"),
                    (lambda: pl.parse_trace('{"op": "reg_write", "regs": "d[0:300000000]"}'), "trace_reg_range"),
                    (lambda: tma_load(np.zeros((16, 64), np.uint16), (8, 8), (0, 0), smem_size=10**12), "smem_bytes")]:
        with pytest.raises(WgrefError, match=lim):
            fn()


def test_a_standard_tile_on_a_smaller_array_quantizes_like_one_block():
    """A standard tile larger than the array is one ragged block (no padding to the tile size); a
    tile beyond the array and beyond every standard tile (limit 'block') is refused
    (tests/test_hostile_classes.py has the rule's other cases)."""
    x = np.linspace(-3, 3, 16).reshape(4, 4)
    q1, s1 = refmodel.quantize(x, "e4m3", (4, 4))
    q2, s2 = refmodel.quantize(x, "e4m3", (4096, 4096))
    assert np.array_equal(q1, q2) and np.array_equal(s1, s2)
    assert np.array_equal(refmodel.dequantize(q2, s2, "e4m3", "4096x4096"),
                          refmodel.dequantize(q1, s1, "e4m3", (4, 4)))
    with pytest.raises(LimitError, match="limit 'block'"):
        refmodel.quantize(x, "e4m3", (2**31 - 1, 2**31 - 1))


# ----------------------------------------------------------------------------- any flag value

def _bits(x):
    if isinstance(x, tuple):
        return tuple(_bits(v) for v in x)
    if isinstance(x, np.ndarray):
        return (x.dtype.str, x.shape, x.tobytes())
    if hasattr(x, "to_dict"):
        return json.dumps(x.to_dict(), sort_keys=True, default=str)
    return x


X_SAT = np.float32([1e6, -1e6, -1.5, 1.0 + 2**-4 + 2**-6, 3.0])
NAN_A = np.uint32([0x7FC00001, 0x3F800000]).view(np.float32)
NAN_B = np.uint32([0x7FC00000, 0x3F800000]).view(np.float32)
SP_META_REGS = refmodel.pack_meta(SP_META, "f16")

# name -> (fn(flag), True and False must differ)
FLAGS = {
    "round_to_format saturate": (lambda f: refmodel.round_to_format(X_SAT, "e4m3", saturate=f), True),
    "round_to_format relu": (lambda f: refmodel.round_to_format(X_SAT, "e4m3", relu=f), True),
    "round_to_format rz": (lambda f: refmodel.round_to_format(X_SAT, "e4m3", rz=f), True),
    "convert_codes saturate": (lambda f: convert_codes(np.uint16([0x7BFF]), "f16", "e4m3", saturate=f), True),
    "convert_codes relu": (lambda f: convert_codes(np.uint16([0xBC00]), "f16", "e4m3", relu=f), True),
    "encode_f32_fast relu": (lambda f: encode_f32_fast(X_SAT.view(np.uint32), "e4m3", relu=f), True),
    "encode_f32_fast saturate": (lambda f: encode_f32_fast(X_SAT.view(np.uint32), "e5m2", saturate=f), True),
    "diff nan_equal": (lambda f: diff(NAN_A, NAN_B, nan_equal=f), True),
    "scaled_mm use_fast_accum": (lambda f: refmodel.scaled_mm(np.full((64, 128), 0x38, np.uint8),
                                                              np.full((16, 128), 0x38, np.uint8), np.float32(1),
                                                              np.float32(1), use_fast_accum=f), False),
    "wgmma scale_d": (lambda f: refmodel.wgmma(F16, A16, B16, C32, scale_d=f), True),
    "wgmma_reference scale_d": (lambda f: refmodel.wgmma_reference(F16, A16, B16, C32, scale_d=f), True),
    "wgmma_sp scale_d": (lambda f: refmodel.wgmma_sp(SP_F16, SP_A, SP_META, SP_B, C32, scale_d=f), True),
    "wgmma_sp_reference scale_d": (lambda f: refmodel.wgmma_sp_reference(SP_F16, SP_A, SP_META, SP_B, C32,
                                                                         scale_d=f), True),
    "wgmma_smem scale_d": (lambda f: refmodel.wgmma_smem(F16, SMEM, DESC_A, DESC_B, C32, scale_d=f), True),
    "wgmma_smem imm_trans_a": (lambda f: refmodel.wgmma_smem(F16, SMEM, DESC_A, DESC_B, imm_trans_a=f), True),
    "wgmma_smem imm_trans_b": (lambda f: refmodel.wgmma_smem(F16, SMEM, DESC_A, DESC_B, imm_trans_b=f), True),
    "wgmma_registers scale_d": (lambda f: refmodel.wgmma_registers(F16, SMEM, DESC_A, DESC_B, C_REGS,
                                                                   scale_d=f), True),
    "wgmma_registers imm_trans_b": (lambda f: refmodel.wgmma_registers(F16, SMEM, DESC_A, DESC_B,
                                                                       imm_trans_b=f), True),
    "wgmma_sp_registers scale_d": (lambda f: refmodel.wgmma_sp_registers(SP_F16, SMEM, DESC_A, DESC_B, SP_META_REGS,
                                                                         C_REGS, scale_d=f), True),
    "render stmatrix trans": (lambda f: render("stmatrix", "ascii", trans=f), True),
    "render ldmatrix trans": (lambda f: render("ldmatrix", "svg", num=2, trans=f), True),
    "fragment_map trans": (lambda f: fragment_map(4, f), True),
    "describe_recipe delayed": (lambda f: refmodel.describe_recipe("e4m3", delayed=f), True),
}
TRUTHY = [True, 1, np.True_, np.int64(1), np.uint8(1), np.array(True), np.array(1)]
FALSY = [False, 0, np.False_, np.int32(0), np.array(False), np.array(0)]
NOT_FLAGS = ["no", "false", "False", "yes", "", "0", "1", 2, -1, 0.5, 1.0, 0.0, float("nan"), None,
             np.float64(1.0), [True], (), np.array([1, 0]), np.array([True]), b"\x01", 1j, "x" * 5000, 10**5000]


@settings(max_examples=SCALE * 6 * len(FLAGS))
@given(name=st.sampled_from(sorted(FLAGS)), bad=st.sampled_from(NOT_FLAGS))
def test_any_non_flag_is_refused(name, bad, adversarial_counter):
    adversarial_counter["cases"] += 1
    e = refused(FLAGS[name][0], bad)
    assert "True/False" in str(e) or "0 or 1" in str(e), str(e)
    assert len(str(e)) < 300, str(e)


@pytest.mark.parametrize("name", sorted(FLAGS))
def test_flags_mean_what_they_say(name, adversarial_counter):
    fn, differ = FLAGS[name]
    with np.errstate(all="ignore"):
        on, off = _bits(fn(True)), _bits(fn(False))
        if differ:
            assert on != off, f"{name}: True and False give the same result (the probe must tell them apart)"
        for v in TRUTHY:
            adversarial_counter["cases"] += 1
            assert _bits(fn(v)) == on, f"{name}={v!r} does not mean True"
        for v in FALSY:
            adversarial_counter["cases"] += 1
            assert _bits(fn(v)) == off, f"{name}={v!r} does not mean False"


def test_relu_false_does_not_apply_relu():
    assert refmodel.round_to_format(np.float32([-1.5]), "e4m3", relu=0)[0] == 0xBC
    assert refmodel.round_to_format(np.float32([-1.5]), "e4m3", relu=np.True_)[0] == 0
    with pytest.raises(InputError, match="relu must be True/False"):
        refmodel.round_to_format(np.float32([-1.5]), "e4m3", relu="no")   # was: relu applied


def test_check_flag_and_check_int_units():
    for v in TRUTHY:
        assert check_flag("f", v) is True
    for v in FALSY:
        assert check_flag("f", v) is False
    assert check_flag("f", None, allow_none=True) is None
    for v in NOT_FLAGS:
        with pytest.raises(InputError):
            check_flag("f", v)
    for v in (1.0, float("nan"), True, np.True_, "3", None, 3.5, np.float32(2)):
        with pytest.raises(InputError, match="must be an integer"):
            check_int("n", v)
    assert check_int("n", np.int16(5), 0, 8, multiple=5) == 5
    with pytest.raises(InputError, match=r"multiple of 16 \(why\), got 8"):
        check_int("n", 8, multiple=16, rule="why")
    with pytest.raises(LimitError, match="smem_bytes"):
        check_int("n", 10**6, limit="smem_bytes")


# ----------------------------------------------------------------------------- any integer

def _tma(**kw):
    return tma_load(np.zeros((16, 64), np.uint16), (8, 8), (0, 0), **kw)


# name -> (fn(v), a valid value, out-of-range values that must be refused besides the generic ones)
INTS = {
    "k_step": (lambda v: make_descriptor(0, swizzle="128B", rows=64, k=16, elem_bytes=2, k_step=v), 1, [4, -1]),
    "base_offset": (lambda v: make_descriptor(0, swizzle="128B", rows=64, k=16, elem_bytes=2, base_offset=v), 0,
                    [8, -1]),
    "make_descriptor smem_base": (lambda v: make_descriptor(0, rows=64, k=16, elem_bytes=2, smem_size=4096,
                                                            smem_base=v), 0, [-16, 8]),
    "make_descriptor smem_size": (lambda v: make_descriptor(0, rows=64, k=16, elem_bytes=2, smem_size=v), 4096,
                                  [0, -1, 1024]),
    "descriptor start": (lambda v: make_descriptor(v, rows=64, k=16, elem_bytes=2), 0, [8, -16, 1 << 18]),
    "tma fill": (lambda v: _tma(fill=v), 0x5A, [256, 300, -1]),
    "tma dst": (lambda v: _tma(dst=v), 128, [64, -128]),
    "tma smem_size": (lambda v: _tma(smem_size=v), 1024, [0, 16]),
    "tma smem_base": (lambda v: _tma(smem_base=v), 1024, [-1, 64, 1 << 20]),
    "tma box rows": (lambda v: tma_load(np.zeros((16, 64), np.uint16), (v, 8), (0, 0)), 8, [0, 257]),
    "epilogue fill": (lambda v: epilogue_stmatrix(np.zeros((64, 16), np.float32), fill=v), 0xA5, [256, -1]),
    "epilogue smem_base": (lambda v: epilogue_stmatrix(np.zeros((64, 16), np.float32), smem_base=v), 1024,
                           [-1024, 8]),
    "wgmma_smem smem_base": (lambda v: refmodel.wgmma_smem(F16, SMEM, DESC_A, DESC_B, smem_base=v), 0, [-1, 8]),
    "MatrixDescriptor lbo": (lambda v: MatrixDescriptor(0, v, 256), 128, [1 << 18, 8, -16]),
    "MatrixDescriptor base_offset": (lambda v: MatrixDescriptor(0, 128, 256, v), 0, [8, -1]),
    "SmemLayout lbo": (lambda v: SmemLayout("K", "none", 2, v, 256), 128, [1 << 18, 8]),
    "SmemLayout elem_bytes": (lambda v: SmemLayout("K", "none", v, 128, 256), 2, [3, 8, 0]),
    "tile_image base": (lambda v: tile_image(A16, "K", "128B", base=v), 1024, [-1024, 1 << 20]),
    "rowmajor_offsets elem_bytes": (lambda v: rowmajor_offsets(64, 64, v, "128B"), 2, [3]),
    "quantize margin": (lambda v: refmodel.quantize(np.ones((4, 4)), "e4m3", margin=v), 0, [-1, 65]),
    "history_len": (lambda v: refmodel.DelayedScaling("e4m3", v), 16, [0, -3]),
    "sp_sel": (lambda v: refmodel.wgmma_sp(SP_F16, SP_A, SP_META, SP_B, sp_sel=v), 1, [2, -1]),
    "imm_scale_a": (lambda v: refmodel.wgmma(F16, A16, B16, imm_scale_a=v), -1, [0, 2]),
    "imm_scale_b sparse reference": (lambda v: refmodel.wgmma_sp_reference(SP_F16, SP_A, SP_META, SP_B,
                                                                           imm_scale_b=v), -1, [0, 3]),
    "max_samples": (lambda v: diff(np.float32([1]), np.float32([2]), max_samples=v), 3, [-1]),
    "block_k": (lambda v: triton_matmul(np.zeros((64, 64), np.float16), np.zeros((64, 8), np.float16), block_k=v),
                32, [0, 24, -32]),
    "cublas splits": (lambda v: cublas_matmul(np.zeros((64, 128), np.float16), np.zeros((128, 8), np.float16),
                                              splits=v), 2, [0, -1, 3]),
    "cutlass promotion interval": (lambda v: cutlass_dense_gemm(np.zeros((64, 64), ml_dtypes.float8_e4m3fn),
                                                                np.zeros((64, 8), ml_dtypes.float8_e4m3fn),
                                                                mma_promotion_interval=v), 1, [0, 3]),
    "render swizzle lines": (lambda v: render("swizzle", lines=v), 8, [0, -8]),
    "render smem rows": (lambda v: render("smem", rows=v), 64, [0, 12]),
    "render acc n": (lambda v: render("acc", n=v), 16, [0, 12, 264]),
    "render stmatrix num": (lambda v: render("stmatrix", num=v), 2, [3, 0, 8]),
    "render sparse-meta sel": (lambda v: render("sparse-meta", dtype="f16", sel=v), 1, [2, -1]),
    "render desc value": (lambda v: render("desc", value=v), DESC_A, [-1, 1 << 64, 1 << 14]),
    "error_vs_k K": (lambda v: error_vs_k(E4M3, [v], [None, 1]), 64, [0, 48, -64]),
    "error_vs_k seed": (lambda v: error_vs_k(E4M3, [64], [None], seed=v), 3, [-1]),
    "error_vs_k m": (lambda v: error_vs_k(E4M3, [64], [None], m=v), 64, [0, 32]),
    "Swizzle S": (lambda v: Swizzle(3, 4, v), 3, [-1, 2, 60]),
    "mainloop stages": (lambda v: pl.gemm_mainloop_trace(stages=v), 4, [0, 33]),
    "mainloop out_bytes": (lambda v: pl.mainloop_config(out_bytes=v), 2, [3, 0]),
    "sweep chunk": (lambda v: sweep_chunk("e4m3", False, v), 3, [-1, 256]),
    "pack_meta fill": (lambda v: refmodel.pack_meta(SP_META, "f16", fill=v), 7, [-1, 1 << 32]),
    "unpack_accumulator n": (lambda v: refmodel.unpack_accumulator(np.zeros((128, 4), np.uint32), v, "f32"), 8,
                             [12, 0]),
    "cutlass_sm90_offsets m": (lambda v: cutlass_sm90_offsets(v, 128, "f16", 128), 64, [0, 32]),
}
NONE_OK = {"cutlass promotion interval", "make_descriptor smem_size", "tma smem_size",
           "cublas splits"}   # None: not given
NOT_INTS = [float("nan"), float("inf"), 0.5, "3", None, True, False, np.True_, [1], np.array([1, 2]), 1j]


@settings(max_examples=SCALE * 5 * len(INTS))
@given(name=st.sampled_from(sorted(INTS)), bad=st.sampled_from(NOT_INTS + ["float(valid)", "valid + 0.5"]))
def test_any_non_integer_is_refused(name, bad, adversarial_counter):
    fn, valid, _ = INTS[name]
    adversarial_counter["cases"] += 1
    if (bad is None and name in NONE_OK) or (isinstance(bad, str) and bad == "3" and name == "render desc value"):
        assert one_error(fn, bad) is None    # None: not given; a descriptor may be given as text
        return
    if isinstance(bad, str) and bad == "float(valid)":
        bad = float(valid)          # 1.0 is not 1: fractional and integral floats alike are refused
    elif isinstance(bad, str) and bad == "valid + 0.5":
        bad = valid + 0.5
    e = refused(fn, bad)
    assert len(str(e)) < 400, str(e)


@pytest.mark.parametrize("name", sorted(INTS))
def test_integers_in_range_pass_out_of_range_refused(name, adversarial_counter):
    fn, valid, out = INTS[name]
    adversarial_counter["cases"] += 1
    assert one_error(fn, valid) is None, f"{name}={valid} must be accepted"
    if isinstance(valid, int) and not isinstance(valid, bool):
        adversarial_counter["cases"] += 1
        assert one_error(fn, np.int64(valid)) is None, f"{name}=np.int64({valid}) must be accepted"
    for v in out:
        adversarial_counter["cases"] += 1
        refused(fn, v)


def test_register_values_beyond_32_bits_are_refused_not_wrapped(adversarial_counter):
    big = np.zeros((128, 4), np.int64)
    big[3, 1] = 2**32 + 5
    neg = np.zeros((128, 4), np.int64)
    neg[0, 0] = -1
    calls = [lambda r: refmodel.unpack_accumulator(r, 8, "f32"),
             lambda r: refmodel.unpack_a_fragment(r, "f16"),
             lambda r: refmodel.wgmma_registers(F16, SMEM, DESC_A, DESC_B, r),
             lambda r: refmodel.wgmma_registers(F16, SMEM, r, DESC_B),
             lambda r: refmodel.unpack_meta(r[:, 0] + r[:, 1], "f16"),
             lambda r: refmodel.stmatrix("stmatrix.sync.aligned.m8n8.x4.shared.b16", r[:32], np.arange(32) * 16,
                                         np.zeros(1024, np.uint8)),
             lambda r: refmodel.unpack_accumulator(r.astype(np.float32), 8, "f32")]
    for call in calls:
        for regs in (big, neg):
            adversarial_counter["cases"] += 1
            e = refused(call, regs)
            assert "32" in str(e), str(e)
    # int32 registers are the same 32 bits (a cast the hardware does not see)
    i32 = np.full((128, 4), -1, np.int32)
    assert np.array_equal(refmodel.unpack_accumulator(i32, 8, "s32"),
                          refmodel.unpack_accumulator(i32.view(np.uint32), 8, "s32"))


@pytest.mark.parametrize("call,msg", [
    (lambda: refmodel.unpack_accumulator(np.zeros((128, 20), np.uint32), 40, "s32"), "m64n40 into .s32"),
    (lambda: refmodel.pack_accumulator(np.zeros((64, 40), np.int32), "s32"), "m64n40 into .s32"),
    (lambda: SmemLayout("K", "none", 2, 128, 256).offsets(64, 7), "14 bytes"),
    (lambda: render("smem", mode="none", k=7), "multiple of 16, got 14"),
    (lambda: operand_addresses(DESC_A, 64, 7, 2), "14 bytes"),
    (lambda: SmemLayout("MN", "none", 2, 128, 256).offsets(64, 4), "multiple of 8"),
    (lambda: make_descriptor(8, rows=64, k=16, elem_bytes=2), "multiple of 16"),
    (lambda: make_descriptor(-16, rows=64, k=16, elem_bytes=2), "non-negative"),
    (lambda: make_descriptor(0, rows=64, k=16, elem_bytes=2, lbo=1 << 18), "must be a multiple of 16 in 0..262128"),
    (lambda: make_descriptor(0, swizzle="128B", rows=64, k=16, elem_bytes=2, k_step=1.5), "k_step must be an integer"),
    (lambda: make_descriptor(0, swizzle="128B", rows=64, k=16, elem_bytes=2, base_offset=1.0), "base_offset"),
    (lambda: _tma(fill=300), "fill must be an integer from 0 to 255"),
    (lambda: _tma(smem_base=-5), "smem_base"),
    (lambda: triton_matmul(np.zeros((64, 64), np.float16), np.zeros((64, 8), np.float16), block_k=32, splits=2),
     "does not take the option 'splits'"),
    (lambda: triton_matmul(np.zeros((64, 64), np.float16), np.zeros((64, 8), np.float16), block_k=32,
                           input_precision="ieee"), "float32 inputs only"),
    (lambda: cutlass_dense_gemm(np.zeros((64, 32), np.float16), np.zeros((32, 8), np.float16), block_k=32),
     "does not take the option 'block_k'"),
    (lambda: cublas_matmul(np.zeros((64, 64), np.float16), np.zeros((64, 8), np.float16), input_precision="tf32"),
     "input_precision applies to float32 inputs"),
    (lambda: cublas_matmul(np.zeros((64, 64), np.float16), np.zeros((64, 8), np.float16), precision="tf32"),
     "does not take the option 'precision'"),
    (lambda: refmodel.scaled_mm(np.zeros((64, 128), np.uint8), np.zeros((8, 128), np.uint8), 1, 1,
                                use_fast_accum=2), "use_fast_accum must be True/False"),
    (lambda: render("acc", n=16, bogus=1), "takes no option 'bogus'"),
    (lambda: pl.parse_trace('{"op": "mma_async", "acc": "d[0:4]", "smem": [[0, 16]], "trans_a": 2}'), "trans_a"),
])
def test_nonsense_values_are_refused_with_the_rule(call, msg, adversarial_counter):
    adversarial_counter["cases"] += 1
    e = refused(call)
    assert msg in str(e), str(e)


def test_nonexistent_accumulator_form_is_marked_in_the_diagram():
    text = render("acc", "ascii", n=40, dtype="s32")
    assert "no such wgmma form" in text and "m64n40 into .s32" in text
    assert "no such wgmma form" not in render("acc", "ascii", n=48, dtype="s32")


# ----------------------------------------------------------------------------- long texts

LONG = "x" * 5000
LONG_I = "wgmma.mma_async.sync.aligned.m64n8k16." + "f" * 5000

# calls that take user text: each is given a 5,000-character string in one argument
TEXT = {
    "encode policy": lambda s: refmodel.encode(np.float32(1), "e4m3", s),
    "encode fmt": lambda s: refmodel.encode(np.float32(1), s),
    "format_spec": lambda s: refmodel.format_spec(s),
    "round_to_format fmt": lambda s: refmodel.round_to_format(np.float32(1), s),
    "quantize granularity": lambda s: refmodel.quantize(np.ones((4, 4)), "e4m3", s),
    "quantize scale_format": lambda s: refmodel.quantize(np.ones((4, 4)), "e4m3", scale_format=s),
    "quantize pow2": lambda s: refmodel.quantize(np.ones((4, 4)), "e4m3", pow2=s),
    "quantize quant_op": lambda s: refmodel.quantize(np.ones((4, 4)), "e4m3", quant_op=s),
    "quantize policy": lambda s: refmodel.quantize(np.ones((4, 4)), "e4m3", policy=s),
    "DelayedScaling algo": lambda s: refmodel.DelayedScaling("e4m3", 4, s),
    "describe_recipe": lambda s: refmodel.describe_recipe(s),
    "wgmma instr": lambda s: refmodel.wgmma(s, A16, B16),
    "wgmma_reference instr": lambda s: refmodel.wgmma_reference(s, A16, B16),
    "gemm instr": lambda s: refmodel.gemm(A16, B16, instr=s),
    "gemm out_dtype": lambda s: refmodel.gemm(A16, B16, instr=F16, out_dtype=s),
    "gemm promote_op": lambda s: refmodel.gemm(A16, B16, instr=F16, promote_op=s),
    "cvt instr": lambda s: refmodel.cvt(s, np.float32(1), np.float32(1)),
    "parse_cvt": lambda s: refmodel.parse_cvt(s),
    "scaled_mm out_dtype": lambda s: refmodel.scaled_mm(np.zeros((64, 128), np.uint8), np.zeros((8, 128), np.uint8),
                                                        1, 1, out_dtype=s),
    "scaled_mm fmt_a": lambda s: refmodel.scaled_mm(np.zeros((64, 128), np.uint8), np.zeros((8, 128), np.uint8),
                                                    1, 1, fmt_a=s),
    "error_vs_k instr": lambda s: error_vs_k(s, [64]),
    "error_vs_k dist": lambda s: error_vs_k(E4M3, [64], dist=s),
    "diff fmt": lambda s: diff(np.uint8([1]), np.uint8([1]), fmt=s),
    "diff labels": lambda s: diff(np.uint8([1]), np.uint8([1]), labels=[s, 1]),
    "swizzle_mode": lambda s: refmodel.swizzle_mode(s),
    "SmemLayout major": lambda s: refmodel.SmemLayout(s, "none", 2, 128, 256),
    "accumulator_layout dtype": lambda s: refmodel.accumulator_layout(8, s),
    "a_fragment_layout": lambda s: refmodel.a_fragment_layout(s),
    "meta_holders": lambda s: refmodel.meta_holders(s),
    "parse_matrix_instr": lambda s: refmodel.parse_matrix_instr(s),
    "stmatrix instr": lambda s: refmodel.stmatrix(s, np.zeros((32, 4), np.uint32), np.arange(32) * 16,
                                                  np.zeros(1024, np.uint8)),
    "wgmma_smem instr": lambda s: refmodel.wgmma_smem(s, SMEM, DESC_A, DESC_B),
    "wgmma_registers instr": lambda s: refmodel.wgmma_registers(s, SMEM, DESC_A, DESC_B),
    "wgmma_sp instr": lambda s: refmodel.wgmma_sp(s, SP_A, SP_META, SP_B),
    "wgmma_sp_registers instr": lambda s: refmodel.wgmma_sp_registers(s, SMEM, DESC_A, DESC_B, SP_META_REGS),
    "compress instr": lambda s: refmodel.compress(np.zeros((64, 32), np.float16), s),
    "tma mode": lambda s: tma_load(np.zeros((16, 64), np.uint16), (8, 8), (0, 0), s),
    "epilogue out_type": lambda s: epilogue_stmatrix(np.zeros((64, 16), np.float32), s),
    "render kind": lambda s: render(s),
    "render fmt": lambda s: render("acc", s),
    "render dtype": lambda s: render("smem", dtype=s),
    "render option": lambda s: render("acc", **{s: 1}),
    "render desc value": lambda s: render("desc", value=s),
    "triton input_precision": lambda s: triton_matmul(np.zeros((64, 64), np.float32), np.zeros((64, 8), np.float32),
                                                      block_k=32, input_precision=s),
    "triton option": lambda s: triton_matmul(np.zeros((64, 64), np.float16), np.zeros((64, 8), np.float16),
                                             block_k=32, **{s: 1}),
    "cublas instr": lambda s: cublas_matmul(np.zeros((64, 64), np.float16), np.zeros((64, 8), np.float16), instr=s),
    "cublas kernels": lambda s: refmodel.golden.cublas_schedule(s, 64, 64, 64),
    "cutlass acc_dtype": lambda s: cutlass_dense_gemm(np.zeros((64, 32), np.float16), np.zeros((32, 8), np.float16),
                                                      acc_dtype=s),
    "mainloop instr": lambda s: pl.gemm_mainloop_trace(instr=s),
    "mainloop broken": lambda s: pl.gemm_mainloop_trace(broken=s),
    "trace op": lambda s: pl.parse_trace(json.dumps({"op": s})),
    "trace field name": lambda s: pl.parse_trace(json.dumps({"op": "bar.sync", s: 1})),
    "trace role": lambda s: pl.parse_trace(json.dumps({"op": "bar.sync", "t": s})),
    "trace register": lambda s: pl.parse_trace(json.dumps({"op": "reg_read", "regs": [s]})),
    "trace descriptor": lambda s: pl.parse_trace(json.dumps({"op": "mma_async", "acc": "d0", "instr": F16,
                                                             "desc_b": s})),
    "trace instr": lambda s: pl.parse_trace(json.dumps({"op": "mma_async", "acc": "d0", "instr": s,
                                                        "desc_b": "0x10"})),
    "trace line": lambda s: pl.parse_trace(s),
    "load_json": lambda s: loads_json(s, "a config"),
}
TEXTS = [LONG, LONG_I, "[" * 5000, "{" + LONG, '"' + LONG, "9" * 5000, "0x" + "f" * 5000, " " + LONG + " ",
         "\u2028" * 5000, "e4m3" + LONG]


@settings(max_examples=SCALE * 3 * len(TEXT))
@given(name=st.sampled_from(sorted(TEXT)), s=st.sampled_from(TEXTS))
def test_long_text_comes_back_as_a_short_excerpt(name, s, adversarial_counter):
    adversarial_counter["cases"] += 1
    e = one_error(TEXT[name], s)
    if e is None:
        return   # a diff label or a trace of blank lines may well be fine
    msg = str(e)
    assert len(msg) < 600, f"{name}: a {len(msg)}-character message"
    for k in range(0, len(s) - 100, 500):
        assert s[k:k + 100] not in msg, f"{name}: the message echoes the input ({msg[:200]!r}...)"


@pytest.mark.parametrize("v", [10**5000, -(10**5000), 2**64, float("nan")], ids=["1e5000", "-1e5000", "2**64", "nan"])
def test_huge_numbers_in_messages_are_named_by_size(v, adversarial_counter):
    for fn in (lambda x: check_int("n", x, 0, 10), lambda x: refmodel.quantize(np.ones((4, 4)), "e4m3", margin=x),
               lambda x: refmodel.format_spec(x), lambda x: render("swizzle", lines=x),
               lambda x: refmodel.encode(np.float32(1), "e4m3", x)):
        adversarial_counter["cases"] += 1
        e = refused(fn, v)
        assert len(str(e)) < 400, str(e)
    assert excerpt(10**5000) == "an integer of about 10**5000"


# ----------------------------------------------------------------------------- traces and JUnit

@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\u0085", "\x0c", "\x1c", "\x1d", "\x1e", "\x0b"])
def test_trace_line_with_unicode_line_separators_is_one_line(sep, adversarial_counter):
    adversarial_counter["cases"] += 1
    tag = f"gemm.cu:88{sep}inner"
    text = (json.dumps({"op": "wgmma.fence", "line": tag}) + "\r\n"
            + json.dumps({"op": "mma_async", "acc": "d[0:4]", "smem": [[0, 64]], "line": tag}, ensure_ascii=False)
            + "\n" + json.dumps({"op": "commit_group"}) + "\n\n" + json.dumps({"op": "wait_group", "n": 0}) + "\r\n")
    ev = pl.parse_trace(text)
    assert [e.op for e in ev] == ["wgmma.fence", "mma_async", "commit_group", "wait_group"]
    assert ev[1].tag == tag and ev[3].lineno == 5
    assert not pl.check(ev).errors


def test_lone_commit_group_names_its_event(adversarial_counter):
    for text in ['{"op": "commit_group"}', '{"op": "commit_group", "t": "c0"}\n{"op": "commit_group", "t": "c0"}',
                 '{"op": "commit_group"}\n{"op": "wait_group", "n": 1}']:
        adversarial_counter["cases"] += 1
        rep = pl.check(text)
        h = [x for x in rep.hazards if x.kind == "unretired_at_end"]
        assert h and h[0].events, rep.hazards
        assert "commit_group" in h[0].message
        pl.format_hazard(h[0], rep.events)
        from refmodel.machine.pipeline_draw import draw_ascii, draw_svg

        draw_ascii(rep)
        draw_svg(rep)


@settings(max_examples=SCALE * 60)
@given(name=st.text(max_size=40), suite=st.text(max_size=20), bad=st.booleans())
def test_junit_is_well_formed_xml_whatever_the_names(name, suite, bad, adversarial_counter):
    adversarial_counter["cases"] += 1
    got = np.float32([1.0, 2.0])
    rep = diff(got, np.float32([1.0, 3.0]) if bad else got, name=name)
    x = rep.to_junit(suite=suite)
    dom = xml.dom.minidom.parseString(x.encode("utf-8", "surrogatepass"))
    assert dom.documentElement.tagName == "testsuite"
    assert bool(dom.getElementsByTagName("failure")) == bad


@settings(max_examples=SCALE * 40)
@given(depth=st.integers(60, 100000), kind=st.sampled_from(["[", "{\"a\":"]))
def test_deep_json_is_refused_not_a_recursion_error(depth, kind, adversarial_counter):
    adversarial_counter["cases"] += 1
    text = kind * depth
    e = one_error(loads_json, text, "a manifest")
    assert e is not None and len(str(e)) < 300
    e = one_error(pl.parse_trace, '{"op": "bar.sync", "t": ' + text + "}")
    assert e is not None


@settings(max_examples=SCALE * 40)
@given(line=st.text(max_size=200))
def test_any_trace_line_is_an_event_or_one_sentence(line, adversarial_counter):
    adversarial_counter["cases"] += 1
    one_error(pl.parse_trace, line)
    one_error(pl.check, line)


# ----------------------------------------------------------------------------- any value in any parameter

# function -> its valid keyword arguments; the property replaces one of them by an adversarial value
KWARGS = {
    "make_descriptor": (make_descriptor, dict(start=0, major="K", swizzle="128B", rows=64, k=16, elem_bytes=2,
                                             lbo=None, sbo=None, base_offset=0, k_step=1, smem_size=8192,
                                             smem_base=0)),
    "operand_addresses": (operand_addresses, dict(desc=DESC_A, rows=64, k=16, elem_bytes=2, major="K", rule=None)),
    "kmajor_offsets": (kmajor_offsets, dict(rows=64, row_bytes=32, lbo=128, sbo=256)),
    "tile_image": (tile_image, dict(tile=A16, major="K", mode="none", lbo=None, sbo=None, base=0, size=None)),
    "rowmajor_offsets": (rowmajor_offsets, dict(rows=64, cols=64, elem_bytes=2, mode="128B", base=0)),
    "dense_strides": (dense_strides, dict(major="MN", mode="64B", rows=64, row_k_bytes=None)),
    "SmemLayout": (SmemLayout, dict(major="MN", mode="none", elem_bytes=2, lbo=128, sbo=256)),
    "MatrixDescriptor": (MatrixDescriptor, dict(start_address=0, lbo=128, sbo=256, base_offset=0, swizzle=1)),
    "Swizzle": (Swizzle, dict(b=3, m=4, s=3)),
    "atom_table": (atom_table, dict(mode="64B", lines=4)),
    "tma_offsets": (tma_offsets, dict(box=(8, 8), elem_bytes=2, mode="none", dst=0, smem_base=0)),
    "tma_load": (tma_load, dict(tensor=np.zeros((16, 64), np.uint16), box=(8, 8), coords=(0, 0), mode="none", dst=0,
                                smem_size=None, smem_base=0, fill=0x5A)),
    "epilogue_stmatrix": (epilogue_stmatrix, dict(acc=np.zeros((64, 16), np.float32), out_type="bf16", mode="32B",
                                                  smem_base=0, fill=0xA5)),
    "fragment_map": (fragment_map, dict(num=2, trans=False)),
    "render_accumulator_layout": (render_accumulator_layout, dict(n=8, dtype_d="f32", rows=4)),
    "render acc": (lambda **kw: render("acc", **kw), dict(n=16, dtype="f16")),
    "render stmatrix": (lambda **kw: render("stmatrix", "ascii", **kw), dict(num=1, trans=True)),
    "render swizzle": (lambda **kw: render("swizzle", "svg", **kw), dict(mode="32B", dtype="e4m3", lines=4)),
    "render smem": (lambda **kw: render("smem", "ascii", **kw), dict(major="K", mode="none", dtype="f16", rows=8,
                                                                     k=16, lbo=None, sbo=None)),
    "render desc": (lambda **kw: render("desc", "ascii", **kw), dict(value=DESC_A, dtype="f16", rows=8, k=None,
                                                                     major="K")),
    "render sparse-meta": (lambda **kw: render("sparse-meta", "ascii", **kw), dict(dtype="f16", sel=1)),
    "error_vs_k": (error_vs_k, dict(instr=E4M3, ks=[64], promote=[None, 1], m=64, n=8, dist="normal", seed=1,
                                    promote_op="fma")),
    "gemm_mainloop_trace": (pl.gemm_mainloop_trace, dict(stages=2, k_iters=3, wait_depth=1, consumers=1,
                                                         promote_every=None, instr=pl.DEFAULT_INSTR, smem_base=0,
                                                         out_bytes=2, broken=None)),
    "triton_matmul": (triton_matmul, dict(a=np.ones((64, 64), np.float32), b=np.ones((64, 8), np.float32), block_k=32,
                                          input_precision="tf32x3", max_num_imprecise_acc=None,
                                          out_dtype=np.float16)),
    "cublas_matmul": (cublas_matmul, dict(a=np.ones((64, 128), np.float16), b=np.ones((128, 8), np.float16), splits=2,
                                          split_align=None, instr=None, reduce_dtype=None, out_dtype="bf16")),
    "cutlass_dense_gemm": (cutlass_dense_gemm, dict(a=np.ones((64, 64), ml_dtypes.float8_e4m3fn),
                                                    b=np.ones((64, 8), ml_dtypes.float8_e4m3fn), acc_dtype="f32",
                                                    out_dtype=np.float32, mma_promotion_interval=2)),
    "scaled_mm": (refmodel.scaled_mm, dict(a=np.full((64, 128), 0x38, np.uint8), b_nk=np.full((16, 128), 0x38, np.uint8),
                                           scale_a=np.float32(1), scale_b=np.float32(2), out_dtype="f16",
                                           use_fast_accum=True, fmt_a="e4m3", fmt_b="e5m2")),
    "diff": (diff, dict(got=NAN_A, want=NAN_B, fmt=None, nan_equal=True, labels=("row",), max_samples=2, name="d")),
    "round_to_format": (refmodel.round_to_format, dict(x=X_SAT, fmt="bf16", saturate=False, relu=True, rz=True)),
    "wgmma_sp_reference": (refmodel.wgmma_sp_reference, dict(instr=SP_F16, a_compressed=SP_A, meta=SP_META, b=SP_B,
                                                             c=C32, scale_d=True, imm_scale_a=-1, imm_scale_b=1)),
    "wgmma_smem": (refmodel.wgmma_smem, dict(instr=F16, smem=SMEM, a_desc=DESC_A, b_desc=DESC_B, c=C32, smem_base=0,
                                             scale_d=True, imm_scale_a=1, imm_scale_b=-1, imm_trans_a=1,
                                             imm_trans_b=0)),
    "cutlass_sm90_offsets": (cutlass_sm90_offsets, dict(m=64, k=128, dtype_a="e4m3", tile_k=128)),
    "describe_recipe": (refmodel.describe_recipe, dict(fmt="e5m2", granularity="1x128", scale_format="e8m0",
                                                       pow2="mx", margin=1, amax_floor=1e-4, quant_op="div",
                                                       policy="satfinite", delayed=True)),
    "DelayedScaling": (refmodel.DelayedScaling, dict(fmt="e4m3", history_len=4, algo="most_recent", margin=1)),
}
JUNK = st.one_of(
    st.none(), st.booleans(), st.text(max_size=6), st.binary(max_size=4), st.sampled_from(["no", "false", "1", "0x10"]),
    st.integers(-(2**70), 2**70), st.sampled_from(HUGE + [-(10**5000)]), st.floats(allow_nan=True, allow_infinity=True),
    st.just(object()), st.just([[1, 2], [3]]), st.just({"a": 1}), st.just(()), st.just([]),
    st.sampled_from([np.float32(1), np.int64(-3), np.uint8(200), np.bool_(True), np.array([1, 2]),
                     np.zeros((2, 2), np.uint8), np.array(5), np.dtype(np.float16), np.float16, "x" * 5000]))


def test_every_kwargs_table_entry_is_valid():
    for name, (fn, kw) in KWARGS.items():
        assert one_error(fn, **kw) is None, name


@settings(max_examples=SCALE * 12 * len(KWARGS))
@given(name=st.sampled_from(sorted(KWARGS)), data=st.data())
def test_any_value_in_any_parameter(name, data, adversarial_counter):
    adversarial_counter["cases"] += 1
    fn, kw = KWARGS[name]
    key = data.draw(st.sampled_from(sorted(kw)))
    kw = dict(kw, **{key: data.draw(JUNK)})
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        e = one_error(fn, **kw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 20 and peak < 512 << 20, (name, key)
    if e is not None:
        assert len(str(e)) < 600, str(e)
