"""Tests of refmodel.numerics.scaling against independent evidence: a naive per-block loop in
float64 (float64 +, *, / of float32 operands rounded once to float32 are correctly
rounded float32 operations), DeepGEMM's reference cast transcribed op by op, the
OCP MX formula, exact bounds and hand-worked values."""

import math

import numpy as np
import pytest

from refmodel.errors import DTypeError, InputError
from refmodel.numerics.formats import fp8_spec
from refmodel.numerics.fp8 import decode, encode, encode_reference
from refmodel.numerics.scaling import (DelayedScaling, amax, decode_e8m0, dequantize, describe_recipe,
                              parse_granularity, quantize, scale_from_amax, scale_shape)

F32 = np.float32


# --------------------------------------------------------------------------- helpers

def _test_data(shape, seed=0):
    """float32 data whose rows span many binades, with a zero row, a tiny row, NaN and Inf."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    x *= 2.0 ** rng.integers(-20, 20, size=shape[:-1] + (1,))
    x = x.astype(np.float32)
    x[..., 1, :] = 0.0
    x[..., 2, :] = (rng.standard_normal(shape[-1]) * 1e-39).astype(np.float32)  # subnormals
    x.reshape(-1)[rng.integers(0, x.size, 5)] = np.nan
    x.reshape(-1)[rng.integers(0, x.size, 5)] = np.inf
    x.reshape(-1)[rng.integers(0, x.size, 5)] = -np.inf
    return x


def _ceil_log2(v: float) -> int:
    e = math.frexp(v)[1]  # v = m * 2**e, m in [0.5, 1)
    while 2.0 ** (e - 1) >= v:
        e -= 1
    while 2.0 ** e < v:
        e += 1
    return e


def _floor_log2(v: float) -> int:
    e = math.frexp(v)[1] - 1
    while 2.0 ** e > v:
        e -= 1
    while 2.0 ** (e + 1) <= v:
        e += 1
    return e


def naive_scale(a: float, fmt: str, scale_format: str, pow2, margin: int, floor: float) -> float:
    """The scale rules written out for one python-float amax (float64 exact)."""
    spec = fp8_spec(fmt)
    a = max(a, float(F32(floor)))
    if a == 0.0:
        return 1.0
    rule = pow2 if pow2 is not None else ("mx" if scale_format == "e8m0" else None)
    lo = -127 if scale_format == "e8m0" else -126
    s0 = float(F32(a / (spec.max / 2.0 ** margin)))
    if rule is None:
        return max(s0, 2.0 ** -126)
    if rule == "ceil":
        return 2.0 ** max(_ceil_log2(s0), lo)
    return 2.0 ** max(_floor_log2(a) - spec.emax + margin, lo)


def naive_quantize(x, fmt, tile, *, scale_format="f32", pow2=None, margin=0, floor=0.0,
                   quant_op="div", policy="satfinite", use_reference_encoder=False):
    """Per-block loop over the last two dims; returns (codes, float64 scales per block)."""
    x = np.asarray(x, dtype=np.float32)
    r, c = tile
    m, n = x.shape[-2:]
    mb, nb = -(-m // r), -(-n // c)
    batch = x.shape[:-2]
    codes = np.zeros(x.shape, np.uint8)
    scales = np.zeros(batch + (mb, nb))
    enc = encode_reference if use_reference_encoder else encode
    for b in np.ndindex(*batch):
        for bi in range(mb):
            for bj in range(nb):
                blk = x[b][bi * r:(bi + 1) * r, bj * c:(bj + 1) * c].astype(np.float64)
                fin = blk[np.isfinite(blk)]
                a = float(np.abs(fin).max()) if fin.size else 0.0
                s = naive_scale(a, fmt, scale_format, pow2, margin, floor)
                scales[b + (bi, bj)] = s
                if quant_op == "div":
                    t = (blk / s).astype(np.float32)
                else:
                    t = (blk * float(F32(1.0 / s))).astype(np.float32)
                codes[b][bi * r:(bi + 1) * r, bj * c:(bj + 1) * c] = enc(t, fmt, policy)
    return codes, scales


def _scales_as_float(scales):
    return decode_e8m0(scales).astype(np.float64) if scales.dtype == np.uint8 else \
        scales.astype(np.float64)


def _fp8_ulp(v: np.ndarray, fmt: str) -> np.ndarray:
    """Spacing of the FP8 grid just above |v| (the ulp of v), computed from frexp."""
    spec = fp8_spec(fmt)
    a = np.abs(v.astype(np.float64))
    e = np.frexp(np.where(a == 0, 1.0, a))[1] - 1
    e = np.maximum(np.where(a == 0, spec.emin, e), spec.emin)
    return np.ldexp(1.0, e - spec.mbits)


# --------------------------------------------------------------------------- naive loop

RECIPES = [  # (scale_format, pow2, quant_op, margin, amax_floor)
    ("f32", None, "div", 0, 0.0),
    ("f32", None, "mul_reciprocal", 0, 1e-4),
    ("f32", "ceil", "mul_reciprocal", 0, 0.0),
    ("f32", None, "div", 2, 0.0),
    ("e8m0", None, "div", 0, 0.0),
    ("e8m0", "ceil", "div", 1, 0.0),
]


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
@pytest.mark.parametrize("granularity,shape", [
    ("1x128", (2, 5, 300)), ("128x128", (260, 130)), ("1x32", (2, 5, 70)),
    ("row", (6, 45)), ("col", (6, 45)), ("3x5", (2, 8, 11)), ((2, 4), (9, 9))])
@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: "-".join(map(str, r)))
def test_matches_naive_per_block_loop(fmt, granularity, shape, recipe):
    scale_format, pow2, quant_op, margin, floor = recipe
    x = _test_data(shape, seed=len(shape) + shape[-1])
    q, s = quantize(x, fmt, granularity, scale_format=scale_format, pow2=pow2,
                    quant_op=quant_op, margin=margin, amax_floor=floor)
    g = parse_granularity(granularity)
    tile = g.tile(x.shape)
    q_ref, s_ref = naive_quantize(x, fmt, tile, scale_format=scale_format, pow2=pow2,
                                  margin=margin, floor=floor, quant_op=quant_op)
    assert s.shape == s_ref.shape == scale_shape(x.shape, granularity)
    assert s.dtype == (np.uint8 if scale_format == "e8m0" else np.float32)
    np.testing.assert_array_equal(_scales_as_float(s), s_ref)
    np.testing.assert_array_equal(q, q_ref)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_tensor_granularity_matches_naive_with_reference_encoder(fmt):
    x = _test_data((7, 33), seed=3)
    for sf in ("f32", "e8m0"):
        q, s = quantize(x, fmt, "tensor", scale_format=sf)
        q_ref, s_ref = naive_quantize(x, fmt, x.shape, scale_format=sf,
                                      use_reference_encoder=True)
        assert s.shape == ()
        assert _scales_as_float(s) == s_ref[0, 0]
        np.testing.assert_array_equal(q, q_ref)


def test_matches_deepgemm_reference_cast():
    """deep_gemm/utils/math.py per_token_cast_to_fp8 / per_block_cast_to_fp8, op by op in
    float32 (zero padding to 128, amax clamp 1e-4, sf = amax / 448, x * (1 / sf), and the
    UE8M0 rounding by bits: exponent + (mantissa != 0), clamped to 1..254)."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((130, 300)) * 2.0 ** rng.integers(-30, 10, (130, 1))).astype(F32)
    x[5] = 0

    def ceil_to_ue8m0(sf):
        bits = sf.view(np.int32)
        exp = ((bits >> 23) & 0xFF) + ((bits & 0x7FFFFF) != 0)
        return (np.clip(exp, 1, 254).astype(np.int32) << 23).view(F32)

    def deepgemm(xp, amax_blocks, expand, use_ue8m0):
        sf = (np.maximum(amax_blocks, F32(1e-4)) / F32(448.0)).astype(F32)
        sf = ceil_to_ue8m0(sf) if use_ue8m0 else sf
        t = (xp * expand((F32(1.0) / sf).astype(F32))).astype(F32)
        return encode(t, "e4m3"), sf

    xp = np.zeros((256, 384), F32)
    xp[:130, :300] = x
    for ue8m0 in (False, True):
        pow2 = "ceil" if ue8m0 else None
        # per token, 1x128
        am = np.abs(xp).reshape(256, 3, 128).max(axis=2)
        q_ref, sf_ref = deepgemm(xp, am, lambda r: np.repeat(r, 128, axis=1), ue8m0)
        q, s = quantize(x, "e4m3", "1x128", pow2=pow2, quant_op="mul_reciprocal",
                        amax_floor=1e-4)
        np.testing.assert_array_equal(q, q_ref[:130, :300])
        np.testing.assert_array_equal(s, sf_ref[:130])
        # per block, 128x128
        am = np.abs(xp).reshape(2, 128, 3, 128).max(axis=(1, 3))
        q_ref, sf_ref = deepgemm(
            xp, am, lambda r: np.repeat(np.repeat(r, 128, axis=0), 128, axis=1), ue8m0)
        q, s = quantize(x, "e4m3", "128x128", pow2=pow2, quant_op="mul_reciprocal",
                        amax_floor=1e-4)
        np.testing.assert_array_equal(q, q_ref[:130, :300])
        np.testing.assert_array_equal(s, sf_ref)


# --------------------------------------------------------------------------- bounds / identities

@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
@pytest.mark.parametrize("quant_op", ["div", "mul_reciprocal"])
def test_round_trip_bound_and_nearest_code(fmt, quant_op):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((64, 256)) * 2.0 ** rng.integers(-40, 40, (64, 1))).astype(F32)
    q, s = quantize(x, fmt, "1x128", quant_op=quant_op)
    d = dequantize(q, s, fmt, "1x128").astype(np.float64)
    s_el = np.repeat(s.astype(np.float64), 128, axis=1)
    v = decode(q, fmt).astype(np.float64)
    x64 = x.astype(np.float64)
    # the FP8 value is the nearest grid point to x / s, up to the float32 rounding of x / s
    table = decode(np.arange(256, dtype=np.uint8), fmt).astype(np.float64)
    table = table[np.isfinite(table)]
    t_exact = (x64 / s_el).ravel()
    best = np.abs(t_exact[:, None] - table[None, :]).min(axis=1)
    slack = 2.0 ** -22 * np.abs(t_exact) + 2.0 ** -149 / s_el.ravel()
    assert np.all(np.abs(t_exact - v.ravel()) <= best + slack)
    # |x - dequant(quant(x))| <= half an FP8 ulp times s, plus float32 roundings
    bound = 0.5 * _fp8_ulp(v, fmt) * s_el + 2.0 ** -22 * (np.abs(x64) + np.abs(d)) + 2.0 ** -149
    assert np.all(np.abs(x64 - d) <= bound)
    # f32 scales never saturate: every |value| <= fmax and some reach it
    assert np.abs(v).max() == fp8_spec(fmt).max


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
@pytest.mark.parametrize("quant_op", ["div", "mul_reciprocal"])
def test_amax_element_encodes_to_fmax(fmt, quant_op):
    spec = fp8_spec(fmt)
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((300, 32)) * 2.0 ** rng.integers(-100, 100, (300, 1))).astype(F32)
    for policy in ("satfinite", "nosat"):
        q, s = quantize(x, fmt, "row", quant_op=quant_op, policy=policy)
        arg = np.abs(x).argmax(axis=1)
        top = q[np.arange(300), arg]
        assert np.all(top & 0x7F == spec.max_code)
        assert np.all((top >> 7) == np.signbit(x[np.arange(300), arg]))
        assert not np.any(np.isnan(decode(q, fmt)))  # nosat: nothing overflows
    # when amax / fmax is exact in float32, x / s is exactly fmax
    a = (spec.max * 2.0 ** np.arange(-60, 60) * 1.25).astype(F32)
    for ai in a:
        s = scale_from_amax(ai, fmt)
        assert float(ai) / float(s) == spec.max


def test_zero_blocks():
    x = np.zeros((4, 64), F32)
    x[1, :32] = -0.0
    x[2, 40] = 3.0
    for sf, one in (("f32", 1.0), ("e8m0", 127)):
        q, s = quantize(x, "e4m3", "1x32", scale_format=sf)
        assert s[0, 0] == one and s[1, 0] == one and s[2, 0] == one
        assert s[2, 1] != one
        assert np.all(q[0] == 0) and np.all(q[1, :32] == 0x80)
        d = dequantize(q, s, "e4m3", "1x32")
        np.testing.assert_array_equal(np.signbit(d[1, :32]), True)
        assert d[2, 40] == 3.0
    assert amax(np.zeros((0, 5)), "row").shape == (0, 1)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_nan_and_inf_elements(fmt):
    spec = fp8_spec(fmt)
    rng = np.random.default_rng(2)
    clean = rng.standard_normal((3, 32)).astype(F32)
    clean[1] = np.abs(clean[1])
    x = clean.copy()
    x[0, 3] = np.nan
    x[1, 4] = np.inf
    x[1, 5] = -np.inf
    x[2, :] = np.inf
    ref = clean.copy()
    ref[0, 3] = 0
    ref[1, 4:6] = 0
    ref[2, :] = 0
    q_ref, s_ref = quantize(ref, fmt, "row")
    for policy in ("satfinite", "nosat"):
        q, s = quantize(x, fmt, "row", policy=policy)
        np.testing.assert_array_equal(s, s_ref)  # amax skips NaN and +-Inf
        assert s[2, 0] == 1.0  # no finite element: the zero rule
        assert q[0, 3] == spec.nan_code
        finite = np.isfinite(x)
        np.testing.assert_array_equal(q[finite], q_ref[finite])
        if policy == "satfinite":
            assert q[1, 4] == spec.max_code and q[1, 5] == spec.max_code | 0x80
        else:
            inf = spec.inf_code if spec.ieee_specials else spec.nan_code
            assert q[1, 4] & 0x7F == inf & 0x7F
    # a NaN scale makes its whole block NaN (f32 NaN, e8m0 0xFF)
    q, s = quantize(clean, fmt, "row")
    s[1, 0] = np.nan
    d = dequantize(q, s, fmt, "row")
    assert np.all(np.isnan(d[1])) and not np.any(np.isnan(d[[0, 2]]))
    q, s = quantize(clean, fmt, "row", scale_format="e8m0")
    s[0, 0] = 0xFF
    d = dequantize(q, s, fmt, "row")
    assert np.all(np.isnan(d[0])) and not np.any(np.isnan(d[1:]))


def test_subnormal_and_huge_amax():
    tiny = np.array([[2.0 ** -149, -2.0 ** -140, 1e-40]], F32)
    q, s = quantize(tiny, "e4m3", "tensor")
    assert s == F32(2.0 ** -126)  # amax / 448 would be subnormal (or 0): clamped
    np.testing.assert_array_equal(q, encode(tiny.astype(np.float64) * 2.0 ** 126, "e4m3"))
    assert decode(q, "e4m3")[0, 2] != 0  # 1e-40 * 2**126 = 0.0085: kept as an e4m3 subnormal
    q, s = quantize(tiny, "e4m3", "tensor", scale_format="e8m0")
    assert s == 0  # floor(log2(1e-40)) - 8 = -141, clamped to -127 (code 0)
    assert decode_e8m0(s) == F32(2.0 ** -127)
    big = np.array([3.0e38, -1.0], F32)
    q, s = quantize(big, "e5m2", "tensor", scale_format="e8m0")
    assert s == 127 + 127 - 15  # floor(log2(3e38)) = 127
    assert decode(q, "e5m2")[0] == 57344.0  # 3e38 / 2**112 = 57784.6: MX saturation
    q, s = quantize(big, "e4m3", "tensor")
    assert decode(q, "e4m3")[0] == 448.0
    with pytest.raises(InputError, match="must be finite in float32"):
        quantize(big, "e4m3", "tensor", margin=20)
    with pytest.raises(InputError, match=r"at most 2\*\*127"):
        quantize(big, "e4m3", "tensor", scale_format="e8m0", margin=20)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_pow2_scales(fmt):
    spec = fp8_spec(fmt)
    rng = np.random.default_rng(9)
    # random blocks plus adversarial amaxes within a few ulps of fmax * 2**k
    k = rng.integers(-100, 100, 200)
    adv = np.nextafter(F32(spec.max) * np.ldexp(F32(1), k), F32(np.inf)).astype(F32)
    adv[::2] = np.nextafter(adv[::2], F32(0))
    adv[::3] = F32(spec.max) * np.ldexp(F32(1), k[::3])
    x = (rng.random((200, 32)) * 2 - 1).astype(F32) * adv[:, None]
    x[:, 0] = adv
    for sf in ("f32", "e8m0"):
        q, s = quantize(x, fmt, "1x32", scale_format=sf, pow2="ceil")
        sv = _scales_as_float(s)
        m, _ = np.frexp(sv)
        assert np.all(m == 0.5)  # powers of two
        assert np.all(np.abs(x.astype(np.float64)) / sv <= spec.max)  # no element overflows
        assert np.all(np.abs(decode(q, fmt)) <= spec.max)
        # ceil is the smallest power of two at or above the float32 scale
        s32 = scale_from_amax(np.abs(x).max(axis=1, keepdims=True), fmt)
        assert np.all((sv >= s32) & (sv / 2 < s32))
    # MX rule: amax / X in [2**emax, 2**(emax + 1)); the part above fmax saturates
    q, s = quantize(x, fmt, "1x32", scale_format="e8m0")
    sv = _scales_as_float(s)
    r = np.abs(x).max(axis=1, keepdims=True) / sv
    assert np.all((r >= 2.0 ** spec.emax) & (r < 2.0 ** (spec.emax + 1)))
    over = np.abs(x.astype(np.float64)) / sv > spec.max
    assert over.any()
    assert np.all(q[over] & 0x7F == spec.max_code)


def test_mx_hand_worked_values():
    # e4m3, emax = 8: amax 1.0 -> 2**(0 - 8), code 119; amax 500 -> 2**0 and 500 saturates
    x = np.array([[1.0, 0.5] + [0.0] * 30, [500.0, 3.0] + [0.0] * 30])
    q, s = quantize(x, "e4m3", "1x32", scale_format="e8m0")
    assert s.ravel().tolist() == [119, 127]
    assert decode(q, "e4m3")[:, :2].tolist() == [[256.0, 128.0], [448.0, 3.0]]
    np.testing.assert_array_equal(dequantize(q, s, "e4m3", "1x32")[:, :2], [[1.0, 0.5],
                                                                             [448.0, 3.0]])


def test_quant_ops_are_different_conventions():
    """x / s and x * (1/s) differ by a float32 ulp at times, which moves an FP8 code.

    amax 1.0: s = RNE(1/448); for x below, x / s = 1.0625000x (just above the e4m3
    midpoint of 1 and 1.125) but x * RNE(1/s) rounds to the midpoint itself, a tie
    that goes to the even code 1.0."""
    x = np.array([1.0, 0.00237165205180645], F32)
    s = scale_from_amax(F32(1.0), "e4m3")
    assert float(x[1]) / float(s) > 1.0625  # exact quotient: above the midpoint
    assert float(F32(float(x[1]) * float(F32(1.0 / float(s))))) == 1.0625
    qd, _ = quantize(x, "e4m3", quant_op="div")
    qm, _ = quantize(x, "e4m3", quant_op="mul_reciprocal")
    assert decode(qd, "e4m3")[1] == 1.125 and decode(qm, "e4m3")[1] == 1.0
    # power-of-two scales: the two conventions agree everywhere
    y = _test_data((16, 64), seed=12)
    for sf, pow2 in (("e8m0", None), ("f32", "ceil")):
        np.testing.assert_array_equal(
            quantize(y, "e4m3", "1x32", scale_format=sf, pow2=pow2)[0],
            quantize(y, "e4m3", "1x32", scale_format=sf, pow2=pow2, quant_op="mul_reciprocal")[0])


# --------------------------------------------------------------------------- delayed scaling

def _expected_delayed(amaxes, history_len, algo, margin, fmax=448.0):
    scales, scale = [], 1.0
    for t in range(len(amaxes)):
        scales.append(scale)  # the scale used at step t
        window = amaxes[max(0, t + 1 - history_len):t + 1]
        if algo == "max":
            h = max([0.0] + [a for a in window if not math.isnan(a)])
        else:
            h = window[-1]
        if math.isfinite(h) and h > 0:
            scale = float(F32(h / (fmax * 2.0 ** -margin)))
    return scales + [scale]


@pytest.mark.parametrize("algo", ["max", "most_recent"])
@pytest.mark.parametrize("history_len", [1, 3, 16])
@pytest.mark.parametrize("margin", [0, 2])
def test_delayed_scaling_history(algo, history_len, margin):
    rng = np.random.default_rng(history_len)
    amaxes = [float(F32(v)) for v in rng.random(40) * 2.0 ** rng.integers(-8, 8, 40)]
    amaxes[5] = 0.0
    amaxes[9] = math.inf
    amaxes[13] = math.nan
    amaxes[20:24] = [1000.0] + [float(F32(0.001))] * 3
    ds = DelayedScaling("e4m3", history_len=history_len, algo=algo, margin=margin)
    assert ds.scale == 1.0
    expected = _expected_delayed(amaxes, history_len, algo, margin)
    for t, a in enumerate(amaxes):
        assert ds.scale == F32(expected[t]), t
        ds.update(a)
    assert ds.scale == F32(expected[-1])
    assert len(ds.history) == history_len
    assert ds.history[0] == F32(amaxes[-1])


def test_delayed_scaling_relations():
    ds0 = DelayedScaling("e5m2", history_len=4)
    ds2 = DelayedScaling("e5m2", history_len=4, margin=3)
    rng = np.random.default_rng(4)
    differ = 0
    for a in rng.random(200) * 100:
        s0, s2 = ds0.update(a), ds2.update(a)
        assert s2 == s0 * 8  # margin multiplies the scale by 2**margin, exactly
        inv = F32(F32(1) / ds0.te_scale)  # TE's scale_inv
        gap = abs(int(inv.view(np.int32)) - int(s0.view(np.int32)))
        assert gap <= 1
        differ += gap
    assert differ > 0  # the two conventions are not bitwise the same


def test_delayed_quantize_uses_previous_scale():
    ds = DelayedScaling("e4m3", history_len=2)
    q1, s1 = ds.quantize(np.array([1000.0, 1.0, np.nan]))
    assert s1 == 1.0 and q1[0] == 0x7E and q1[1] == 0x38  # step 1: scale 1, 1000 saturates
    assert ds.scale == F32(1000.0 / 448)
    q2, s2 = ds.quantize(np.array([1.0, np.inf]))
    assert s2 == F32(1000.0 / 448)
    np.testing.assert_array_equal(q2, quantize(np.array([1.0, np.inf]), "e4m3",
                                               amax_history=[1000.0])[0])
    assert ds.scale == F32(1000.0 / 448)  # inf amax: kept
    ds.quantize(np.array([2.0]))
    assert ds.scale == F32(1000.0 / 448)  # inf still in the window of 2: kept
    ds.quantize(np.array([3.0]))
    assert ds.scale == F32(3.0 / 448)


def test_stateless_history_matches_delayed_scaling():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 256)).astype(F32)
    hist = (rng.random((5, 4, 2)) * 4).astype(F32)
    hist[:, 3, 1] = 0
    q, s = quantize(x, "e4m3", "1x128", amax_history=hist, margin=1)
    for i in range(4):
        for j in range(2):
            ds = DelayedScaling("e4m3", history_len=5, margin=1)
            for a in hist[::-1, i, j]:
                ds.update(a)
            assert s[i, j] == ds.scale
            xb = x[i, j * 128:(j + 1) * 128]
            np.testing.assert_array_equal(q[i, j * 128:(j + 1) * 128],
                                          encode((xb / ds.scale).astype(F32), "e4m3"))
    assert s[3, 1] == 1.0
    q_t, s_t = quantize(x, "e4m3", "tensor", amax_history=[0.5, np.nan, 2.0])
    assert s_t == F32(2.0 / 448)


# --------------------------------------------------------------------------- shapes, text, errors

def test_scale_shapes_and_batch_dims():
    assert scale_shape((3, 5, 300), "1x128") == (3, 5, 3)
    assert scale_shape((257, 129), "128x128") == (3, 2)
    assert scale_shape((2, 7, 9), "row") == (2, 7, 1)
    assert scale_shape((2, 7, 9), "col") == (2, 1, 9)
    assert scale_shape((10,), "tensor") == ()
    x = _test_data((3, 4, 40), seed=1)
    q, s = quantize(x, "e4m3", "1x32")
    for b in range(3):
        qb, sb = quantize(x[b], "e4m3", "1x32")
        np.testing.assert_array_equal(q[b], qb)
        np.testing.assert_array_equal(s[b], sb)
    # row / col scales broadcast against x
    q, s = quantize(x, "e4m3", "col")
    np.testing.assert_array_equal(dequantize(q, s, "e4m3", "col"),
                                  (decode(q, "e4m3") * s).astype(F32))


def test_describe_recipe():
    text = describe_recipe("e4m3", "1x32", scale_format="e8m0")
    assert "2**(floor(log2(amax)) - 8)" in text and "code 127" in text and "1x32" in text
    text = describe_recipe("e5m2", "128x128", pow2="ceil", margin=2, amax_floor=1e-4,
                           quant_op="mul_reciprocal")
    assert "57344 * 2**-2" in text and "ceil" in text and "1 / s" in text and "0.0001" in text
    with pytest.raises(InputError):
        describe_recipe("e4m3", "bad")


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: quantize(np.ones((2, 2)), "e4m3", "3"), InputError,
     r"granularity must be 'tensor', 'row', 'col' or a tile like '1x128', got '3'"),
    (lambda: quantize(np.ones((2, 2)), "e4m3", "0x128"), InputError,
     r"tile sizes must be positive, got '0x128'"),
    (lambda: quantize(np.ones(4), "e4m3", "row"), InputError,
     r"granularity 'row' needs x with at least 2 dimensions, got shape \(4,\)"),
    (lambda: quantize(np.ones(4), "f16"), InputError, r"FP8 format must be e4m3 or e5m2"),
    (lambda: quantize(np.ones(4), "e4m3", scale_format="bf16"), InputError,
     r"scale_format must be 'f32' or 'e8m0', got 'bf16'"),
    (lambda: quantize(np.ones(4), "e4m3", pow2="floor"), InputError,
     r"pow2 must be None, 'ceil' or 'mx', got 'floor'"),
    (lambda: quantize(np.ones(4), "e4m3", margin=1.5), InputError,
     r"margin must be an integer from 0 to 64, got 1.5"),
    (lambda: quantize(np.ones(4), "e4m3", amax_floor=-1), InputError,
     r"amax_floor must be a finite number >= 0, got -1"),
    (lambda: quantize(np.ones(4), "e4m3", quant_op="mul"), InputError,
     r"quant_op must be 'div' or 'mul_reciprocal', got 'mul'"),
    (lambda: quantize(np.ones(4), "e4m3", policy="clip"), InputError, r"policy must be one of"),
    (lambda: quantize(np.array(["a"]), "e4m3"), DTypeError, r"input dtype must be"),
    (lambda: quantize(np.ones((2, 256)), "e4m3", "1x128", amax_history=np.ones((3, 2))),
     InputError, r"amax_history must have shape \(H, 2, 2\) with H >= 1"),
    (lambda: quantize(np.ones(3), "e4m3", amax_history=np.ones((2, 1))), InputError,
     r"amax_history must have shape \(H,\) with H >= 1 for granularity 'tensor'"),
    (lambda: quantize(np.ones(3), "e4m3", amax_history=[-1.0]), InputError,
     r"amax_history must hold amaxes >= 0, got -1.0"),
    (lambda: dequantize(np.zeros((2, 256), np.uint8), np.ones((2, 3), F32), "e4m3", "1x128"),
     InputError, r"scales of shape \(2, 3\) do not match granularity '1x128' for codes of "
                 r"shape \(2, 256\); expected \(2, 2\)"),
    (lambda: dequantize(np.zeros(4, np.uint8), np.float64(0.1), "e4m3"), InputError,
     r"float scales must be exactly representable in float32"),
    (lambda: dequantize(np.zeros(4, np.uint8), np.int32(1), "e4m3"), DTypeError,
     r"scales must be float32 or uint8 E8M0 codes, got int32"),
    (lambda: DelayedScaling("e4m3", history_len=0), InputError,
     r"history_len must be a positive integer, got 0"),
    (lambda: DelayedScaling("e4m3", algo="mean"), InputError,
     r"algo must be 'max' or 'most_recent', got 'mean'"),
    (lambda: DelayedScaling("e4m3").update(-2.0), InputError, r"amax must be >= 0, got -2.0"),
    (lambda: decode_e8m0(np.array([1.0])), DTypeError, r"E8M0 scale codes must be an integer"),
])
def test_error_messages(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()
