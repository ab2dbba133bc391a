"""FP8 encode/decode: exhaustive and identity checks against independent evidence."""

import ml_dtypes
import numpy as np
import pytest

from refmodel.numerics import fp8
from refmodel.errors import DTypeError, InputError
from refmodel.numerics.formats import E4M3, E5M2, F16, BF16, FORMATS, decode_scalar, format_spec

ML = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


@pytest.mark.parametrize("spec", list(FORMATS.values()), ids=lambda s: s.name)
def test_format_identities(spec):
    assert spec.bits == 1 + spec.ebits + spec.mbits
    assert spec.bias == 2 ** (spec.ebits - 1) - 1
    if spec.dtype is not None:
        fi = ml_dtypes.finfo(spec.dtype)
        assert spec.max == float(fi.max)
        assert spec.smallest_normal == float(fi.smallest_normal)
        assert spec.smallest_subnormal == float(fi.smallest_subnormal)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_decode_all_codes_matches_ml_dtypes(fmt):
    codes = np.arange(256, dtype=np.uint8)
    ours = fp8.decode(codes, fmt)
    theirs = codes.view(ML[fmt]).astype(np.float32)
    nan = np.isnan(theirs)
    assert np.array_equal(np.isnan(ours), nan)
    assert np.array_equal(ours.view(np.uint32)[~nan], theirs.view(np.uint32)[~nan])  # -0 included
    assert np.all(ours.view(np.uint32)[nan] == 0x7FFFFFFF)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
@pytest.mark.parametrize("policy", ["satfinite", "nosat", "relu"])
def test_decode_encode_round_trip(fmt, policy):
    codes = np.arange(256, dtype=np.uint8)
    spec = format_spec(fmt)
    vals = fp8.decode(codes, fmt)
    back = fp8.encode(vals, fmt, policy)
    for c, b in zip(codes, back):
        c = int(c)
        if spec.is_nan_code(c):
            assert b == spec.nan_code
        elif policy == "relu" and c & 0x80:
            assert b == 0
        elif spec.inf_code is not None and (c & 0x7F) == spec.inf_code:
            assert b == (c if policy == "nosat" else (c & 0x80) | spec.max_code)
        else:
            assert b == c


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_nosat_equals_ml_dtypes_on_float32(fmt):
    """ml_dtypes rounds float32 correctly with NaN/Inf on overflow: an independent oracle."""
    rng = np.random.default_rng(7)
    x = rng.integers(0, 2**32, 2_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    ours = fp8.encode(x, fmt, "nosat")
    theirs = x.astype(ML[fmt]).view(np.uint8)
    nan = np.isnan(x)
    assert np.array_equal(ours[~nan], theirs[~nan])
    assert np.all(ours[nan] == 0x7F)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_kernel_matches_readable_formula(fmt):
    rng = np.random.default_rng(3)
    e = rng.integers(-30, 30, 20000)
    x = rng.standard_normal(20000) * 2.0 ** e
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, np.nan, 448, 464, 465, 480, 57344, 61440, 61439.9]])
    for policy in fp8.POLICIES:
        for dt in (np.float64, np.float32, np.float16):
            xv = x.astype(dt)
            assert np.array_equal(fp8.encode(xv, fmt, policy), fp8.encode_reference(xv, fmt, policy)), (dt, policy)


def test_float64_is_rounded_once():
    """ml_dtypes double-rounds float64 through float32; we must not."""
    x = np.float64(1 + 2**-4 + 2**-40)
    assert int(fp8.encode(x, "e4m3")) == 0x39  # 1.125
    assert float(fp8.decode(np.uint8(0x39), "e4m3")) == 1.125


@pytest.mark.parametrize("fmt,maxc,ovf", [("e4m3", 0x7E, 0x7F), ("e5m2", 0x7B, 0x7C)])
def test_overflow_policies(fmt, maxc, ovf):
    spec = format_spec(fmt)
    half_ulp_above = spec.max + 2.0 ** (spec.emax - spec.mbits - 1)  # tie: 464 / 61440
    x = np.array([spec.max, half_ulp_above, np.nextafter(half_ulp_above, 0), 1e30, np.inf, -np.inf], np.float64)
    sat = fp8.encode(x, fmt, "satfinite")
    assert list(sat) == [maxc, maxc, maxc, maxc, maxc, 0x80 | maxc]
    nos = fp8.encode(x, fmt, "nosat")
    # a tie above max rounds to even: 464 -> 448 (e4m3 1.110 is even); 61440 -> overflow (e5m2 1.11 is odd)
    tie = maxc if fmt == "e4m3" else ovf
    assert list(nos) == [maxc, tie, maxc, ovf, ovf, 0x80 | ovf]
    relu = fp8.encode(x, fmt, "relu")
    assert list(relu) == [maxc, maxc, maxc, maxc, maxc, 0]


def test_subnormals_and_underflow():
    for spec in (E4M3, E5M2):
        ss = spec.smallest_subnormal
        x = np.array([ss, ss / 2, ss * 0.5000001, ss * 1.5, ss * 2.5, -ss / 2], np.float64)
        assert list(fp8.encode(x, spec)) == [1, 0, 1, 2, 2, 0x80]


def test_relu_zeroes_negative_zero_and_keeps_nan():
    x = np.array([-0.0, -1.0, np.nan, -np.nan], np.float32)
    assert list(fp8.encode(x, "e4m3", "relu")) == [0, 0, 0x7F, 0x7F]


def test_round_to_format_f16_bf16_match_numpy():
    rng = np.random.default_rng(11)
    x = rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    nan = np.isnan(x)
    with np.errstate(over="ignore"):
        h = x.astype(np.float16).view(np.uint16)
        b = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    assert np.array_equal(fp8.round_to_format(x, F16, saturate=False)[~nan], h[~nan])
    assert np.array_equal(fp8.round_to_format(x, BF16, saturate=False)[~nan], b[~nan])


def test_rz_truncates():
    x = np.array([1 + 2**-11 + 2**-12, -(1 + 2**-11 + 2**-12), 65520.0, 1e10, np.inf], np.float32)
    got = fp8.round_to_format(x, F16, saturate=False, rz=True)
    assert list(got) == [0x3C00, 0xBC00, 0x7BFF, 0x7BFF, 0x7C00]


def test_pack_unpack():
    rng = np.random.default_rng(0)
    e = [rng.integers(0, 256, 100) for _ in range(4)]
    p4 = fp8.pack_x4(*e)
    assert p4.dtype == np.uint32
    assert all(np.array_equal(a, b) for a, b in zip(fp8.unpack_x4(p4), e))
    assert int(fp8.pack_x4(1, 2, 3, 4)) == 0x04030201  # element 0 in the low byte
    p2 = fp8.pack_x2(e[0], e[1])
    assert p2.dtype == np.uint16 and int(fp8.pack_x2(0xAA, 0xBB)) == 0xBBAA
    assert all(np.array_equal(a, b) for a, b in zip(fp8.unpack_x2(p2), e[:2]))


def test_errors_are_one_clear_line():
    with pytest.raises(InputError, match="policy must be one of"):
        fp8.encode(np.float32(1), "e4m3", "clip")
    with pytest.raises(InputError, match="FP8 format must be e4m3 or e5m2"):
        fp8.encode(np.float32(1), "f16")
    with pytest.raises(InputError, match="unknown format"):
        fp8.encode(np.float32(1), "e3m4")
    with pytest.raises(DTypeError, match="input dtype must be"):
        fp8.encode(np.array(["a"]), "e4m3")
    with pytest.raises(InputError, match="codes in 0..255"):
        fp8.pack_x2(300, 1)


def test_decode_scalar_worked_example():
    assert decode_scalar(0x5C, E4M3) == 24.0  # 0.1011.100 -> 1.5 * 2**4
