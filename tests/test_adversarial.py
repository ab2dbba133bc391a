"""Adversarial inputs: every public entry point, the CLI, corrupted files and killed writers.

The property everywhere: an outcome is either success or *one* wgref error --
a :class:`refmodel.errors.WgrefError` from the library, exit 2 with exactly one stderr
line and no traceback from the CLI -- never an exception from numpy/numba internals.
Silent acceptance of contradicting input is checked by the targeted tests at the end.

CI runs the deterministic ``ci`` Hypothesis profile (tests/conftest.py);
``HYPOTHESIS_PROFILE=thorough`` multiplies the example counts for local bug hunting.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import refmodel
from refmodel.errors import DTypeError, FormError, InputError, WgrefError
from refmodel.verify.case import WgmmaCase, load_case, save_case
from wgref.cli import main

from cli_harness import run_cli

ROOT = Path(__file__).resolve().parent.parent
SCALE = 20 if os.environ.get("HYPOTHESIS_PROFILE") == "thorough" else 1


def n(k: int) -> int:
    return k * SCALE


INSTR = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"
INSTR_BF16 = "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"
CVT = "cvt.rn.satfinite.e4m3x2.f32"

# ----------------------------------------------------------------------------- strategies

DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
          np.float16, np.float32, np.float64, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
          ml_dtypes.float8_e5m2, np.complex64, np.bool_]
SHAPES = [(), (0,), (3,), (2, 3), (64, 32), (32, 8), (64, 8), (1, 64, 32), (4, 4), (0, 4)]


@st.composite
def arrays(draw):
    dt = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(st.sampled_from(SHAPES))
    size = int(np.prod(shape, dtype=np.int64))
    raw = np.frombuffer(draw(st.binary(min_size=size * dt.itemsize, max_size=size * dt.itemsize)),
                        dtype=np.uint8).copy()
    x = raw.view(dt).reshape(shape) if size else np.zeros(shape, dt)
    variant = draw(st.sampled_from(["plain", "bigendian", "noncontig", "plain"]))
    if variant == "bigendian" and dt.kind in "iuf" and dt.itemsize > 1:
        x = x.astype(dt.newbyteorder(">"))
    elif variant == "noncontig" and x.ndim >= 1 and x.shape[-1] > 1:
        x = np.repeat(x, 2, axis=-1)[..., ::2]
    return x


# valid arrays of the wgmma/gemm operands, so that calls get past the first check
def _valid(shape, dt):
    return (np.arange(int(np.prod(shape))) % 7).astype(np.float32).astype(dt).reshape(shape)


DESC = 0x0000001000080000          # start 0, LBO 128, SBO 256, no swizzle
DESC_B = DESC | (4096 >> 4)        # the same at 4096
STMATRIX = "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16"
LDMATRIX = "ldmatrix.sync.aligned.m8n8.x2.shared.b16"

VALID = {
    "a": _valid((64, 32), ml_dtypes.float8_e4m3fn), "b": _valid((32, 8), ml_dtypes.float8_e4m3fn),
    "c": np.zeros((64, 8), np.float32), "f32": np.float32([1.5, -2.0, np.nan]),
    "codes": np.arange(6, dtype=np.uint8), "x2d": np.linspace(-3, 3, 16).reshape(4, 4),
}

junk_scalars = st.one_of(
    st.none(), st.booleans(), st.text(max_size=4), st.binary(max_size=4),
    st.complex_numbers(max_magnitude=1e3), st.integers(min_value=-(2**400), max_value=2**400),
    st.floats(allow_nan=True, allow_infinity=True), st.just(object()),
    st.just([[1, 2], [3]]), st.just({"a": 1}), st.just(()), st.just([]),
)
junk = st.one_of(junk_scalars, arrays())
MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
MMA_S4 = "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s4.s4.s32"
MMA_F64 = "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64"
strings = st.one_of(st.sampled_from(["", " ", ";", "e4m3", "e5m2", "f16", "bf16", "f32", "tf32", "f64",
                                     "tensor", "row", "col", "1x128", "0x4", "99999999999999999999x2",
                                     "satfinite", "nosat", "relu", "div", "e8m0", "mx", "ceil", CVT,
                                     "cvt.rn.satfinite", "cvt", INSTR, INSTR_BF16, "wgmma"]),
                    st.text(max_size=12))


def maybe(valid, other=junk, p_valid=0.6):
    """``valid`` most of the time, else an adversarial value."""
    return st.one_of(st.just(valid), other) if not isinstance(valid, st.SearchStrategy) \
        else st.one_of(valid, other)


def outcome(fn, *args, **kwargs):
    """Call ``fn``; success and WgrefError are the two allowed outcomes."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            fn(*args, **kwargs)
    except WgrefError as e:
        msg = str(e)
        assert msg and "\n" not in msg, f"{type(e).__name__} is not one line: {msg!r}"
        assert not isinstance(e, (IndexError, KeyError, AttributeError))
    except Exception as e:  # noqa: BLE001 - this is the property under test
        pytest.fail(f"{getattr(fn, '__name__', fn)} raised {type(e).__name__} (not a WgrefError): "
                    f"{str(e)[:200]}; args={args!r:.300} kwargs={kwargs!r:.300}")


# ----------------------------------------------------------------------------- library entry points

# name -> strategy of (args, kwargs); each mixes valid arguments with adversarial ones
def _call(*args, **kwargs):
    return st.tuples(st.tuples(*args), st.fixed_dictionaries(kwargs))


ENTRY_POINTS = {
    "encode": _call(maybe(VALID["f32"]), maybe(st.sampled_from(["e4m3", "e5m2"]), strings),
                    maybe(st.sampled_from(list(refmodel.POLICIES)), strings)),
    "decode": _call(maybe(VALID["codes"]), maybe(st.sampled_from(["e4m3", "e5m2"]), strings)),
    "round_to_format": _call(maybe(VALID["f32"]), maybe(st.sampled_from(["e4m3", "bf16", "f16"]), strings),
                             saturate=maybe(True), relu=maybe(False)),
    "cvt": _call(maybe(st.just(CVT), strings), maybe(VALID["f32"]), maybe(VALID["f32"])),
    "pack_x2": _call(maybe(VALID["codes"]), maybe(VALID["codes"])),
    "unpack_x2": _call(maybe(np.uint16([0x3800]))),
    "pack_x4": _call(maybe(VALID["codes"]), maybe(VALID["codes"]), maybe(VALID["codes"]),
                     maybe(VALID["codes"])),
    "unpack_x4": _call(maybe(np.uint32([0x38003800]))),
    "quantize": _call(maybe(VALID["x2d"]), maybe(st.just("e4m3"), strings),
                      maybe(st.sampled_from(["tensor", "row", "1x2", (2, 2)]), strings),
                      scale_format=maybe(st.just("f32"), strings), margin=maybe(0),
                      amax_floor=maybe(0.0), amax_history=maybe(None)),
    "dequantize": _call(maybe(np.zeros((4, 4), np.uint8)), maybe(np.float32(1.0)),
                        maybe(st.just("e4m3"), strings), maybe(st.just("tensor"), strings)),
    "scale_from_amax": _call(maybe(np.float32([1.0, 0.0])), maybe(st.just("e4m3"), strings),
                             scale_format=maybe(st.just("f32"), strings), margin=maybe(0)),
    "decode_e8m0": _call(maybe(np.uint8([127, 255]))),
    "describe_recipe": _call(maybe(st.just("e4m3"), strings), maybe(st.just("1x128"), strings),
                             margin=maybe(0), amax_floor=maybe(0.0)),
    "diff": _call(maybe(VALID["f32"]), maybe(VALID["f32"]),
                  fmt=maybe(st.sampled_from([None, "e4m3", "f32"]), strings), nan_equal=maybe(False),
                  max_samples=maybe(10)),
    "wgmma": _call(maybe(st.just(INSTR), strings), maybe(VALID["a"]), maybe(VALID["b"]), maybe(VALID["c"]),
                   scale_d=maybe(True), imm_scale_a=maybe(1), imm_scale_b=maybe(-1)),
    "wgmma_reference": _call(maybe(st.just(INSTR), strings), maybe(VALID["a"]), maybe(VALID["b"]),
                             scale_d=maybe(False)),
    "gemm": _call(maybe(VALID["a"]), maybe(VALID["b"]), maybe(None), instr=maybe(st.just(INSTR), strings),
                  promote_every=maybe(1), scale_a=maybe(None), scale_b=maybe(np.float32(2)),
                  out_dtype=maybe(st.sampled_from([None, "bf16", np.float16]), strings),
                  promote_op=maybe(st.just("fma"), strings)),
    "scaled_mm": _call(maybe(np.zeros((64, 128), np.uint8)), maybe(np.zeros((8, 128), np.uint8)),
                       maybe(np.float32(1)), maybe(np.float32(1)),
                       out_dtype=maybe(st.just("bf16"), strings), use_fast_accum=maybe(True),
                       fmt_a=maybe(st.just("e4m3"), strings)),
    "error_vs_k": _call(maybe(st.just(INSTR), strings), maybe(st.just([32, 64])), maybe(st.just([None, 1]))),
    "format_spec": _call(maybe(st.just("e4m3"), strings)),
    "parse_cvt": _call(maybe(st.just(CVT), strings)),
    "parse_wgmma": _call(maybe(st.just(INSTR), strings)),
    "parse_mma_sync": _call(maybe(st.sampled_from([MMA, MMA_S4, MMA_F64, "mma.sync.aligned.m8n8k4.row.row.f16.f16.f16.f16"]),
                                  strings)),
    "mma_sync": _call(maybe(st.sampled_from([MMA, MMA_S4, MMA_F64]), strings),
                      maybe(st.sampled_from([np.ones((16, 16), np.float16), np.full((16, 32), 7, np.int8),
                                             np.ones((16, 16), np.float64)])),
                      maybe(st.sampled_from([np.ones((16, 8), np.float16), np.full((32, 8), -8, np.int8),
                                             np.ones((16, 8), np.float64)])),
                      maybe(st.sampled_from([None, np.zeros((16, 8), np.float32), np.zeros((16, 8), np.int32)]))),
    "params_for": _call(maybe(st.just(INSTR), strings)),
    "fma_f32": _call(maybe(1.5), maybe(np.float32(2)), maybe(np.float32(-3))),
    "DelayedScaling": _call(maybe(st.just("e4m3"), strings), maybe(4), maybe(st.just("max"), strings),
                            maybe(0)),
    # layouts
    "Swizzle": _call(maybe(3), maybe(4), maybe(3)),
    "swizzle_mode": _call(maybe(st.sampled_from(["128B", "none", 64, "32b"]), strings)),
    "swizzle_address": _call(maybe(np.arange(16) * 16), maybe(st.just("128B"), strings)),
    "SmemLayout": _call(maybe(st.sampled_from(["K", "MN"]), strings), maybe(st.just("128B"), strings), maybe(2),
                        maybe(16), maybe(1024)),
    "dense_strides": _call(maybe(st.just("K"), strings), maybe(st.just("64B"), strings), maybe(64), maybe(32)),
    "tile_image": _call(maybe(VALID["a"][:, :16].astype(np.float16)), maybe(st.just("K"), strings),
                        maybe(st.just("none"), strings)),
    "rowmajor_offsets": _call(maybe(64), maybe(64), maybe(2), maybe(st.just("128B"), strings)),
    "MatrixDescriptor": _call(maybe(0x400), maybe(128), maybe(256), maybe(0), maybe(0)),
    "operand_addresses": _call(maybe(DESC), maybe(64), maybe(16), maybe(2), major=maybe(st.just("K"), strings)),
    "accumulator_layout": _call(maybe(8), maybe(st.just("f32"), strings)),
    "a_fragment_layout": _call(maybe(st.just("f16"), strings)),
    "pack_accumulator": _call(maybe(VALID["c"]), maybe(st.just("f32"), strings)),
    "unpack_accumulator": _call(maybe(np.zeros((128, 4), np.uint32)), maybe(8), maybe(st.just("f32"), strings)),
    "pack_a_fragment": _call(maybe(VALID["a"]), maybe(st.just("e4m3"), strings)),
    "unpack_a_fragment": _call(maybe(np.zeros((128, 4), np.uint32)), maybe(st.just("f16"), strings)),
    "parse_matrix_instr": _call(maybe(st.just(STMATRIX), strings)),
    # machine
    "stmatrix": _call(maybe(st.just(STMATRIX), strings), maybe(np.zeros((32, 4), np.uint32)),
                      maybe(np.arange(32) * 16), maybe(np.zeros(1024, np.uint8))),
    "ldmatrix": _call(maybe(st.just(LDMATRIX), strings), maybe(np.arange(32) * 16), maybe(np.zeros(1024, np.uint8))),
    "wgmma_smem": _call(maybe(st.just(INSTR), strings), maybe(np.zeros(8192, np.uint8)), maybe(DESC), maybe(DESC_B),
                        maybe(VALID["c"]), smem_base=maybe(0), scale_d=maybe(True), imm_trans_a=maybe(0),
                        imm_scale_b=maybe(-1)),
    "wgmma_registers": _call(maybe(st.just(INSTR), strings), maybe(np.zeros(8192, np.uint8)),
                             maybe(st.sampled_from([DESC, np.zeros((128, 4), np.uint32)])), maybe(DESC_B),
                             maybe(np.zeros((128, 4), np.uint32))),
    "epilogue_stmatrix": _call(maybe(np.zeros((64, 16), np.float32)), maybe(st.just("bf16"), strings),
                               maybe(st.just("32B"), strings)),
    "tma_load": _call(maybe(np.zeros((16, 64), np.uint16)), maybe((8, 8)), maybe((0, 0)),
                      maybe(st.just("none"), strings), dst=maybe(0)),
}


SP_F16 = "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16"
SP_TF32 = "wgmma.mma_async.sp.sync.aligned.m64n8k16.f32.tf32.tf32"
SP_META = np.full((64, 8), 0b0100, np.uint8)
sp_instr = maybe(st.sampled_from([SP_F16, SP_TF32, "wgmma.mma_async.sp.sync.aligned.m64n8k64.s32.s8.s8"]), strings)
sp_dtype = maybe(st.sampled_from(["f16", "tf32", "e4m3", "s8"]), strings)
ENTRY_POINTS.update({
    "parse_wgmma_sp": _call(sp_instr),
    "compress": _call(maybe(_valid((64, 32), np.float16)), sp_instr),
    "decompress": _call(maybe(_valid((64, 16), np.float16)), maybe(SP_META), sp_instr),
    "prune_2_4": _call(maybe(_valid((64, 32), np.float16)), sp_instr),
    "kept_positions": _call(maybe(st.sampled_from([SP_META, np.arange(1024).reshape(64, 16) % 16])), sp_instr),
    "wgmma_sp": _call(sp_instr, maybe(_valid((64, 16), np.float16)), maybe(SP_META), maybe(_valid((32, 8), np.float16)),
                      maybe(np.zeros((64, 8), np.float32)), sp_sel=maybe(st.sampled_from([0, 1, 2])),
                      scale_d=maybe(True), imm_scale_a=maybe(-1)),
    "gemm_sp": _call(sp_instr, maybe(_valid((64, 16), np.float16)), maybe(SP_META), maybe(_valid((32, 8), np.float16)),
                     maybe(None), sp_sel=maybe(st.sampled_from([0, 1, 2])), promote_every=maybe(st.sampled_from([1, 2]))),
    "wgmma_sp_reference": _call(sp_instr, maybe(_valid((64, 16), np.float16)), maybe(SP_META),
                                maybe(_valid((32, 8), np.float16)), maybe(None), scale_d=maybe(False)),
    "meta_holders": _call(sp_dtype, maybe(st.sampled_from([0, 1]))),
    "pack_meta": _call(maybe(SP_META), sp_dtype, maybe(st.sampled_from([0, 1])),
                       fill=maybe(st.sampled_from([0, np.zeros(128, np.uint32)]))),
    "unpack_meta": _call(maybe(np.zeros(128, np.uint32)), sp_dtype, maybe(st.sampled_from([0, 1]))),
    "wgmma_sp_registers": _call(sp_instr, maybe(np.zeros(8192, np.uint8)),
                                maybe(st.sampled_from([DESC, np.zeros((128, 4), np.uint32)])), maybe(DESC_B),
                                maybe(np.zeros(128, np.uint32)), maybe(None), sp_sel=maybe(0)),
})


def test_every_array_entry_point_is_covered():
    """A new public function that takes arguments must get a strategy here."""
    skip = {"WgrefError", "FormError", "InputError", "DTypeError", "DeviceError", "FormatSpec",
            "FORMATS", "E4M3", "E5M2", "F16", "BF16", "F32", "POLICIES", "CVT_FORMS", "WGMMA_FORMS",
            "BINDING", "PROMOTE_OPS", "AccumParams", "IntAccumParams", "with_params",
            "fdpa",  # low-level formula over already-validated AccumParams (internal use)
            "SwizzleMode", "SWIZZLE_MODES", "MATRIX_FORMS", "WGMMA_SP_FORMS", "MMA_SYNC_FORMS"}  # data
    missing = [nm for nm in refmodel.__all__ if nm not in skip and nm not in ENTRY_POINTS]
    assert not missing, f"no adversarial strategy for {missing}"


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_entry_point_gives_success_or_one_wgref_error(name, adversarial_counter):
    fn = getattr(refmodel, name)
    examples = 25 if name in ("wgmma", "wgmma_reference", "gemm", "scaled_mm", "error_vs_k", "wgmma_sp",
                              "wgmma_sp_reference", "wgmma_sp_registers") else 60

    @settings(max_examples=n(examples))
    @given(call=ENTRY_POINTS[name])
    def check(call):
        adversarial_counter["cases"] += 1
        args, kwargs = call
        outcome(fn, *args, **kwargs)

    check()


@settings(max_examples=n(40))
@given(x=arrays(), fmt=st.sampled_from(["e4m3", "e5m2", "f16", "bf16", "f32", "f64"]))
def test_diff_of_any_two_arrays(x, fmt, adversarial_counter):
    adversarial_counter["cases"] += 2
    outcome(refmodel.diff, x, x.copy())
    outcome(refmodel.diff, x, x, fmt=fmt)


# ----------------------------------------------------------------------------- CLI argv

def check_cli(argv):
    rc, out, err = run_cli(argv)
    assert rc in (0, 1, 2), (argv, rc, err)
    assert "Traceback" not in err and "Traceback" not in out, (argv, err)
    if rc == 2:
        assert err.count("\n") == 1 and err.strip(), f"{argv}: stderr must be one line, got {err!r}"
    if "--json" in argv and rc in (0, 1) and out.strip():
        for line in out.strip().splitlines():
            json.loads(line, parse_constant=_no_constants)
    return rc, out, err


def _no_constants(c):
    raise ValueError(f"non-standard JSON constant {c}")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Input files of the targeted tests (never written by the random CLI runs)."""
    return _make_files(tmp_path_factory.mktemp("adv"))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """The same files for random argv, which may overwrite any of them, and a small real fixture set
    (the FP8 GEMM kernel's fixtures, signed) that the random ``verify`` runs replay."""
    import shutil

    from refmodel.verify.fixtures import write_index

    d = _make_files(tmp_path_factory.mktemp("scratch"))
    shutil.copytree(ROOT / "fixtures" / "gemm", d / "fixtures_small" / "gemm")
    write_index(d / "fixtures_small")
    return d


def _make_files(d):
    np.save(d / "x.npy", np.linspace(-500, 500, 512, dtype=np.float32).reshape(4, 128))
    np.save(d / "codes.npy", np.arange(256, dtype=np.uint8))
    np.save(d / "big.npy", np.float32([1e30, -np.inf, np.nan]))
    (d / "empty.npy").write_bytes(b"")
    (d / "text.npy").write_text("hello")
    raw = (d / "x.npy").read_bytes()
    (d / "trunc.npy").write_bytes(raw[: len(raw) // 2])
    np.savez(d / "arch.npz", a=np.zeros(3))
    (d / "trunc.npz").write_bytes((d / "arch.npz").read_bytes()[:40])
    (d / "sub").mkdir()
    (d / "afile").write_text("x")
    save_case(d / "case.npz", _small_case(), hardware=_small_case().model())
    return d


FILE_NAMES = ["x.npy", "codes.npy", "big.npy", "empty.npy", "text.npy", "trunc.npy", "arch.npz",
              "arch.npz:a", "arch.npz:zz", "trunc.npz", "trunc.npz:a", "sub", "missing.npy",
              "case.npz", "afile/out.npz", "sub/out.npz", "out.npz"]
VALUES = ["450", "-inf", "-1.5", "nan", "-nan", "0x7f800000", "-0x1", "0x1.8p3", "-0x1.8p3", "1e400",
          "-1e-45", "", "--", "-", "abc", "0x", "-0", "1_0", "inf", "-3", "99999999999999999999"]
OPTS = ["--to", "--from", "--policy", "--fmt", "--granularity", "--scale-format", "-o", "--json",
        "--k", "--promote", "--dist", "--seed", "--plot", "--junit", "--nan-equal", "--cpu", "--time",
        "--cases", "--chain", "--resume", "--fixtures", "--feature", "--full", "--out", "-h"]
WORDS = ["e4m3", "e5m2", "f16", "bf16", "f64", "f8", "tensor", "1x128", "3", "none", "0", "-1",
         "satfinite", "relu", "nosat", "e8m0", "uniform", "512", "512,1024", "x,y", INSTR, "cvt", "wgmma"]


@st.composite
def argv_strategy(draw, files_dir):
    cmd = draw(st.sampled_from(["cvt", "formats", "quantize", "diff", "error", "replay", "record",
                                "verify", "fuzz", "nope", ""]))
    pool = st.one_of(st.sampled_from(VALUES), st.sampled_from(OPTS), st.sampled_from(WORDS),
                     st.sampled_from(FILE_NAMES).map(lambda f: str(files_dir / f)), st.text(max_size=6))
    rest = draw(st.lists(pool, max_size=7))
    if cmd == "verify":   # a small real fixture set: replaying all of them is test_fixtures' job (about 200 s here)
        rest = [*rest, "--fixtures", str(files_dir / "fixtures_small")]
    return [cmd, *rest]


# templates that get past argparse, with slots for adversarial values
def _templates(d):
    f = lambda name: str(d / name)  # noqa: E731
    return [
        lambda v, w, p: ["cvt", v, "--to", w if w in ("e4m3", "e5m2") else "e4m3", "--from", w, "--json"],
        lambda v, w, p: ["cvt", v, "--to", "e5m2", "--policy", "nosat"],
        lambda v, w, p: ["quantize", f(p), "--fmt", "e4m3", "--granularity", w, "-o", str(d / "q.npz"), "--json"],
        lambda v, w, p: ["quantize", f("x.npy"), "--fmt", "e5m2", "-o", f(p)],
        lambda v, w, p: ["diff", f(p), f("x.npy"), "--fmt", w, "--json"],
        lambda v, w, p: ["diff", f("codes.npy"), f(p), "--junit", f(p)],
        lambda v, w, p: ["error", "--k", w, "--promote", v, "--json"],
        lambda v, w, p: ["replay", f(p), "--cpu", "--json"],
        lambda v, w, p: ["formats", w, "--json"],
    ]


@settings(max_examples=n(150))
@given(data=st.data())
def test_cli_random_argv(scratch, data, adversarial_counter):
    adversarial_counter["cases"] += 1
    argv = data.draw(argv_strategy(scratch))
    check_cli(argv)


@settings(max_examples=n(150))
@given(t=st.integers(0, 8), v=st.sampled_from(VALUES), w=st.sampled_from(WORDS + VALUES),
       p=st.sampled_from(FILE_NAMES))
def test_cli_templates(scratch, t, v, w, p, adversarial_counter):
    adversarial_counter["cases"] += 1
    if t == 6 and w.count(",") == 0 and w.isdigit() and int(w) > 4096:
        w = "512"  # keep error_vs_k cheap
    check_cli(_templates(scratch)[t](v, w, p))


def test_cli_errors_really_have_no_traceback(files):
    """A few of the above through a real subprocess (what a user sees)."""
    for argv in (["cvt", "--to", "e4m3"], ["quantize", str(files / "empty.npy"), "--fmt", "e4m3", "-o",
                                         str(files / "sub")], ["replay", str(files / "trunc.npz")]):
        r = subprocess.run([sys.executable, "-m", "wgref.cli", *argv], capture_output=True, text=True,
                           cwd=ROOT)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr


# ----------------------------------------------------------------------------- corrupted files

def _small_case(chain=1) -> WgmmaCase:
    rng = np.random.default_rng(0)
    a = (rng.integers(-4, 5, (1, 64, 32 * chain))).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.integers(-4, 5, (1, 32 * chain, 8))).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    return WgmmaCase(INSTR, a, b, np.zeros((1, 64, 8), np.float32), chain=chain)


@settings(max_examples=n(60))
@given(cut=st.floats(0, 1), flips=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)), max_size=3))
def test_corrupted_replay_file(tmp_path_factory, cut, flips, adversarial_counter):
    adversarial_counter["cases"] += 1
    d = tmp_path_factory.mktemp("corrupt")
    p = save_case(d / "case.npz", _small_case(), hardware=_small_case().model())
    raw = bytearray(p.read_bytes())
    for pos, x in flips:
        raw[int(pos * (len(raw) - 1))] ^= x
    raw = raw[: max(0, int(cut * len(raw))) if cut < 0.9 else len(raw)]
    p.write_bytes(bytes(raw))
    outcome(load_case, p)
    check_cli(["replay", str(p), "--cpu"])


@settings(max_examples=n(60))
@given(cut=st.integers(0, 400), flip=st.integers(0, 400), x=st.integers(0, 255))
def test_corrupted_fuzz_journal(tmp_path_factory, cut, flip, x, adversarial_counter):
    from gpu.fuzz.cpu_engine import read_journal

    adversarial_counter["cases"] += 1
    d = tmp_path_factory.mktemp("journal")
    j = d / "journal.jsonl"
    recs = [{"header": {"target": "fp8", "seed": 0}}] + [
        {"batch": i, "job": "x", "tiles": 64, "outputs": 1000, "mismatches": 0, "seconds": 0.1} for i in range(4)]
    raw = bytearray("".join(json.dumps(r) + "\n" for r in recs).encode())
    if flip < len(raw):
        raw[flip] ^= x
    j.write_bytes(bytes(raw[:cut] if cut < len(raw) else raw))
    outcome(read_journal, j)


@settings(max_examples=n(40))
@given(cut=st.floats(0, 1), flip=st.floats(0, 1), x=st.integers(1, 255))
def test_corrupted_quantize_output(files, tmp_path_factory, cut, flip, x, adversarial_counter):
    adversarial_counter["cases"] += 1
    d = tmp_path_factory.mktemp("q")
    q = d / "q.npz"
    assert check_cli(["quantize", str(files / "x.npy"), "--fmt", "e4m3", "-o", str(q)])[0] == 0
    raw = bytearray(q.read_bytes())
    raw[int(flip * (len(raw) - 1))] ^= x
    q.write_bytes(bytes(raw[: int(cut * len(raw))] if cut < 0.8 else raw))
    check_cli(["diff", f"{q}:codes", f"{q}:codes"])
    check_cli(["diff", f"{q}:scales", str(files / "x.npy")])


# ----------------------------------------------------------------------------- kill -9

def test_killed_quantize_leaves_previous_or_complete_output(tmp_path, adversarial_counter):
    """kill -9 at spread-out moments of `wgref quantize`: the output is always the previous
    file (byte for byte) or a complete new one, never a partial file."""
    x = np.random.default_rng(1).standard_normal((2048, 1024)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "q.npz"
    np.savez(out, previous=np.arange(3))
    previous = out.read_bytes()
    cmd = [sys.executable, "-m", "wgref.cli", "quantize", str(tmp_path / "x.npy"), "--fmt", "e4m3",
           "--granularity", "1x128", "-o", str(out)]
    # how long a full run takes here, then kill at fractions of it
    t0 = time.time()
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    full = time.time() - t0
    outcomes = set()
    for frac in (0.3, 0.5, 0.65, 0.75, 0.85, 0.95):
        adversarial_counter["cases"] += 1
        out.write_bytes(previous)
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(frac * full)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if out.read_bytes() == previous:
            outcomes.add("previous")
            continue
        with np.load(out) as z:  # must be complete: every member loads, right shapes
            assert z["codes"].shape == x.shape and z["scales"].shape == (2048, 8)
        outcomes.add("complete")
    assert outcomes  # at least one kill happened and was checked


# ----------------------------------------------------------------------------- targeted (old behaviour)

A, B = VALID["a"], VALID["b"]


@pytest.mark.parametrize("call,err,msg", [
    (lambda: refmodel.cvt("", np.float32(1), np.float32(2)), FormError, "cvt opcode"),
    (lambda: refmodel.cvt(CVT, np.ones(3, np.float32), np.ones(2, np.float32)), InputError, "do not broadcast"),
    (lambda: refmodel.pack_x2(np.ones(3, np.uint8), np.ones(2, np.uint8)), InputError, "do not broadcast"),
    (lambda: refmodel.wgmma(INSTR, A, B, scale_d=np.array([1, 0])), InputError, "scale_d must be"),
    (lambda: refmodel.gemm(A, B, instr=INSTR, promote_every=1, scale_a="x"), DTypeError, "scale_a must be"),
    (lambda: refmodel.gemm(A, B, instr=INSTR, promote_every=1, scale_b=1j), DTypeError, "complex"),
    (lambda: refmodel.gemm(A, B, instr=INSTR, out_dtype=object()), InputError, "out_dtype must be"),
    (lambda: refmodel.quantize(np.ones((4, 4)), "e4m3", "1" * 20 + "x2"), InputError, "tile sizes"),
    (lambda: refmodel.encode(10**400, "e4m3"), DTypeError, "beyond 64 bits"),
    (lambda: refmodel.encode(None, "e4m3"), DTypeError, "got None"),  # was NaN (0x7F)
    (lambda: refmodel.decode(np.ones(2, ml_dtypes.float8_e5m2), "e4m3"), DTypeError, "float8_e5m2"),
    (lambda: refmodel.diff(np.int16([0x100]), np.int16([0]), fmt="e4m3"), InputError, "0..255"),
    (lambda: refmodel.diff(np.float32([1]), np.float32([2]), fmt="e4m3"), DTypeError, "float32"),
    (lambda: refmodel.unpack_x2("a"), DTypeError, "packed"),
    (lambda: refmodel.scale_from_amax("x", "e4m3"), DTypeError, "amax"),
    (lambda: refmodel.scaled_mm(np.zeros(3, np.uint8), np.zeros(3, np.uint8), 1, 1), InputError, "2-D"),
    (lambda: refmodel.DelayedScaling().update("x"), InputError, "amax must be a real number"),
    (lambda: refmodel.params_for("x"), FormError, "not of the form"),
    (lambda: refmodel.fma_f32("a", 1, 2), InputError, "x must be a real number"),
    (lambda: refmodel.error_vs_k(INSTR, [512], [3]), InputError, "divides none"),
])
def test_reviewer_examples_get_one_sentence(call, err, msg):
    with pytest.raises(err, match=msg):
        call()


def test_big_endian_arrays_are_read_by_value():
    c = np.full((64, 8), 0.5, np.float32)
    want = refmodel.wgmma(INSTR, A, B, c)
    got = refmodel.wgmma(INSTR, A, B, c.astype(">f4"))  # was "must be float32, got float32"
    assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert refmodel.encode(np.float32([1.5]).astype(">f4"), "e4m3")[0] == refmodel.encode(np.float32(1.5), "e4m3")


def test_decode_accepts_its_own_typed_array():
    x = np.float32([1.5, -2]).astype(ml_dtypes.float8_e5m2)
    assert refmodel.decode(x, "e5m2").tolist() == [1.5, -2.0]


@pytest.mark.parametrize("change,msg", [
    (lambda cfg, z: cfg.update(chain=0), "chain must be an integer from 1"),
    (lambda cfg, z: z.update(a=np.concatenate([z["a"], z["a"]], axis=-1)), "'a' must have shape"),
    (lambda cfg, z: cfg.update(chain="2"), "chain must be an integer"),
    (lambda cfg, z: cfg.update(scale_d="yes"), "scale_d must be"),
    (lambda cfg, z: cfg.update(instr=5), "instr must be a string"),
    (lambda cfg, z: cfg.update(extra=1), "only the keys"),
    (lambda cfg, z: z.update(hardware=z["hardware"][..., :4]), "'hardware' must have shape"),
    (lambda cfg, z: z.pop("b"), "no array 'b'"),
])
def test_malformed_replay_files_are_refused(tmp_path, capsys, change, msg):
    p = save_case(tmp_path / "c.npz", _small_case(), hardware=_small_case().model())
    with np.load(p) as f:
        z = {k: f[k] for k in f.files}
    cfg = json.loads(str(z["config"]))
    change(cfg, z)
    z["config"] = np.array(json.dumps(cfg))
    np.savez(p, **z)
    with pytest.raises(InputError, match=msg):
        load_case(p)
    rc = main(["replay", str(p), "--cpu"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and msg.split()[0] in err


@pytest.mark.parametrize("value,code", [("-inf", "0xFE"), ("-1.5", "0xBE"), ("-0x1.8p3", "0xD4"), ("-nan", "0x7F")])
def test_cli_negative_values(capsys, value, code):
    fmt = "e5m2" if value == "-1.5" else "e4m3"
    assert main(["cvt", value, "--to", fmt, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["code"] == code


@pytest.mark.parametrize("name", ["empty.npy", "trunc.npy", "text.npy", "sub", "arch.npz", "trunc.npz:a"])
def test_cli_bad_input_files(files, name):
    rc, _, err = check_cli(["quantize" if ":" not in name else "diff", str(files / name),
                            *(["--fmt", "e4m3", "-o", str(files / "o.npz")] if ":" not in name else
                              [str(files / "x.npy")])])
    assert rc == 2 and ("cannot read" in err or "one array" in err)


@pytest.mark.parametrize("out,msg", [("sub", "is a directory"), ("afile/q.npz", "cannot write")])
def test_cli_unwritable_output(files, out, msg):
    rc, _, err = check_cli(["quantize", str(files / "x.npy"), "--fmt", "e4m3", "-o", str(files / out)])
    assert rc == 2 and msg in err
    rc, _, err = check_cli(["diff", str(files / "x.npy"), str(files / "x.npy"), "--junit", str(files / out)])
    assert rc == 2 and msg in err


def test_cli_error_promote_dividing_nothing_is_usage_error():
    rc, out, err = check_cli(["error", "--promote", "3", "--k", "512"])
    assert rc == 2 and "divides none" in err and out == ""


def test_cli_record_default_runs_all_kinds(monkeypatch):
    """`wgref record` with no kinds used to fail in argparse ("invalid choice: [...]")."""
    import wgref.cli as cli

    seen = {}
    monkeypatch.setitem(cli.COMMANDS, "record", lambda args: seen.setdefault("what", args.what) and 0)
    assert cli.main(["record"]) == 0 and seen["what"] == list(cli.RECORD_KINDS)
    assert set(cli.RECORD_KINDS) >= {"cvt", "wgmma", "torch", "forms", "layouts"}


def test_cli_json_is_strict(capsys):
    assert main(["formats", "e4m3", "--json"]) == 0  # the NaN code has value NaN
    rows = json.loads(capsys.readouterr().out, parse_constant=_no_constants)
    assert rows[0x7F]["value"] == "nan"
    assert main(["formats", "e5m2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out, parse_constant=_no_constants)
    assert rows[0x7C]["value"] == "inf" and rows[0xFC]["value"] == "-inf"
    r = refmodel.diff(np.float32([np.nan]), np.float32([1.0]))
    json.loads(r.to_json(), parse_constant=_no_constants)


def test_quantize_output_is_written_atomically(files, tmp_path, monkeypatch):
    """A writer that dies mid-file leaves the previous output, not a partial one."""
    out = tmp_path / "q.npz"
    out.write_bytes(b"previous")

    def dying(f, **arrays):
        f.write(b"PK\x03\x04partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez_compressed", dying)
    rc, _, _ = run_cli(["quantize", str(files / "x.npy"), "--fmt", "e4m3", "-o", str(out)])
    assert rc == 130 and out.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["q.npz"]  # no temp file left behind


def test_torn_journal_line_is_dropped_with_a_warning(tmp_path):
    from gpu.fuzz.cpu_engine import read_journal

    j = tmp_path / "journal.jsonl"
    whole = json.dumps({"header": {"seed": 0}}) + "\n" + json.dumps(
        {"batch": 0, "job": "x", "tiles": 1, "outputs": 2, "mismatches": 0, "seconds": 0.1}) + "\n"
    j.write_text(whole + '{"batch": 1, "job": "x", "ti')
    with pytest.warns(UserWarning, match="torn last line"):
        recs = read_journal(j)
    assert [r.get("batch") for r in recs] == [None, 0] and j.read_text() == whole
    j.write_text(whole.replace('"batch": 0', '"batch": 0,,') + whole.splitlines()[1] + "\n")
    with pytest.raises(InputError, match="line 2"):
        read_journal(j)


def test_import_with_no_writable_numba_cache(tmp_path):
    """A read-only install with no writable home: import falls back to a temp cache dir."""
    import shutil

    pkg = tmp_path / "site"
    shutil.copytree(ROOT / "refmodel", pkg / "refmodel", ignore=shutil.ignore_patterns("__pycache__"))
    for d in [p for p in (pkg / "refmodel").rglob("*") if p.is_dir()] + [pkg / "refmodel"]:
        (d / "__pycache__").write_text("")  # a file where numba wants a directory: unwritable
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(HOME=str(blocker), PYTHONPATH=str(pkg), PYTHONDONTWRITEBYTECODE="1",
               NUMBA_CACHE_DIR=str(blocker / "sub"))
    r = subprocess.run([sys.executable, "-c", "import refmodel, numpy as np; "
                        "print(int(refmodel.encode(np.float32(448), 'e4m3')))"],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-500:]
    assert r.stdout.strip() == "126" and "no writable numba cache" in r.stderr
    assert "Traceback" not in r.stderr
