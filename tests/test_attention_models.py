"""refmodel.golden.attention: the public sdpa and flex_attention refuse what the recordings did not establish;
the schedules are attentions (close to the float64 softmax), exact where the arithmetic is exact, and their
open choices are distinguishable (so recordings decide them: tests/test_replay_attention.py); FP8's P and O
rounding is the recorded cvt."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from refmodel.errors import InputError
from refmodel.golden import attention as A
from refmodel.golden.attention import fa2_forward, sdpa

BF16 = ml_dtypes.bfloat16


def _qkv(S, D, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((S, D)).astype(BF16) for _ in range(3))


def _reference(q, k, v, causal):
    """float64 softmax attention: (o, natural-log lse)."""
    Q, K, V = (x.astype(np.float64) for x in (q, k, v))
    S, D = Q.shape
    s = Q @ K.T / np.sqrt(D)
    if causal:
        s = np.where(np.arange(S)[None, :] > np.arange(S)[:, None], -np.inf, s)
    m = s.max(1, keepdims=True)
    e = np.exp(s - m)
    return (e / e.sum(1, keepdims=True)) @ V, (m + np.log(e.sum(1, keepdims=True)))[:, 0]


def test_sdpa_refuses_what_was_not_recorded():
    q, k, v = (x[None, None] for x in _qkv(128, 64))
    with pytest.raises(InputError, match="cudnn backend of scaled_dot_product_attention was not reproduced bit for "
                                         "bit on the hardware"):
        sdpa(q, k, v, backend="cudnn")
    with pytest.raises(InputError, match="must all be bfloat16 or all float16"):
        sdpa(*(x.astype(ml_dtypes.float8_e4m3fn) for x in (q, k, v)))
    q96, k96, v96 = (x[None, None] for x in _qkv(128, 96))
    with pytest.raises(InputError, match=r"head dim 96 was not recorded .* \[64, 128\]"):
        sdpa(q96, k96, v96)
    assert sdpa(q[:, :, :64], k, v).shape == (1, 1, 64, 64)     # Sk != Sq was recorded (cases 37-41)
    with pytest.raises(InputError, match="default scale 1/sqrt"):
        sdpa(q, k, v, scale=0.5)
    assert sdpa(q, k, v, scale=0.125).shape == q.shape          # 1/sqrt(64) is the default
    assert set(A.VERIFIED) == {"flash", "efficient", "flex"}
    with pytest.raises(InputError, match=r"must be \(B, H, S, D\) arrays"):
        sdpa(q[0, 0], k[0, 0], v[0, 0])
    with pytest.raises(InputError, match="backend must be one of"):
        sdpa(q, k, v, backend="math")


@pytest.mark.parametrize("model,S,D,causal,seed", [
    ("fa2", 128, 64, False, 0), ("fa2", 200, 128, True, 0), ("fa2", 200, 64, False, 0),
    ("flex", 128, 64, False, 3), ("flex", 200, 128, True, 3), ("flex", 256, 64, True, 3)])
def test_each_schedule_is_an_attention(model, S, D, causal, seed):
    q, k, v = _qkv(S, D, seed=seed)
    o, lse = {"fa2": fa2_forward, "flex": A.flex_forward}[model](q, k, v, is_causal=causal)
    ref_o, ref_lse = _reference(q, k, v, causal)
    assert np.abs(o.astype(np.float64) - ref_o).max() < 0.02
    assert np.abs(lse - ref_lse).max() < 1e-5


def test_exact_where_the_arithmetic_is_exact():
    q, k, v = _qkv(200, 64, seed=1)
    o, lse = fa2_forward(q, k, v, is_causal=True)
    assert np.array_equal(o[0].view(np.uint16), v[0].view(np.uint16))    # row 0 sees key 0 only: p = 1, sum = 1
    with pytest.raises(InputError, match="head dim 96"):
        fa2_forward(*_qkv(64, 96))


def test_the_open_contractions_change_bits():
    q, k, v = _qkv(200, 128, seed=2)
    base = fa2_forward(q, k, v, is_causal=True)
    for c in ("max", "sum", "lse"):
        o, lse = fa2_forward(q, k, v, is_causal=True, contract=(c,))
        assert not (np.array_equal(o.view(np.uint16), base[0].view(np.uint16)) and np.array_equal(lse, base[1])), c


def test_flex_and_fa2_schedules_disagree_in_bits():
    """Two kernels, one attention: the schedules differ (exp2 forms, FMA placement, sum order, key-block order)."""
    from refmodel.golden.attention import flex_forward

    q, k, v = _qkv(200, 128, seed=4)
    a, _ = flex_forward(q, k, v, is_causal=True)
    b, _ = fa2_forward(q, k, v, is_causal=True)
    assert np.mean(a.view(np.uint16) != b.view(np.uint16)) > 0.01


_FLEX_CODE = """
@triton.jit
def triton_tem_fused_0(arg_Q, arg_K, arg_V, arg_LSE, arg_MAX, arg_KV_NUM_BLKS, arg_KV_IDX, out_ptr0):
    PRESCALE_QK : tl.constexpr = False
    SM_SCALE : tl.constexpr = 0.125
    HAS_FULL_BLOCKS : tl.constexpr = False
    QK_HEAD_DIM : tl.constexpr = 64
    BLOCK_M : tl.constexpr = 128
    BLOCK_N : tl.constexpr = 128
    SPARSE_Q_BLOCK_SIZE : tl.constexpr = 1073741824
    SPARSE_KV_BLOCK_SIZE : tl.constexpr = 1073741824
    pass

@triton.jit
def forward_block_mn(arg_Q, q, K, V):
    m = get_bounded_indices(offs_m, Q_LEN if CHECK_BLOCK_BOUNDARY else None)
    n = get_bounded_indices(offs_n, KV_LEN if CHECK_BLOCK_BOUNDARY else None)

    SCORE

    if CHECK_BLOCK_BOUNDARY:
        pass
"""
_RELBIAS = """tmp0 = (qk)
    tmp1 = (m)
    tmp2 = (n)
    tmp3 = tmp1 - tmp2
    tmp4 = tmp3.to(tl.float32)
    tmp5 = tmp0 + tmp4
    post_mod_scores = tmp5"""


def test_flex_config_reads_and_refuses():
    from refmodel.golden.attention import flex_config

    cfg = flex_config(_FLEX_CODE.replace("SCORE", "tmp0 = (qk)\n    post_mod_scores = tmp0"), 64, False)
    assert (cfg["block_m"], cfg["block_n"], cfg["scale"], cfg["score_mod"]) == (128, 128, 0.125, None)
    mod = flex_config(_FLEX_CODE.replace("SCORE", _RELBIAS), 64, False)["score_mod"]
    qk = np.random.default_rng(5).standard_normal((64, 64)).astype(np.float32) * 30
    qi, ki = np.arange(64)[:, None], np.arange(64)[None, :]
    sc = np.float32(0.0883883461)       # qk·scale + (q - kv) is one FMA: one rounding of the exact value
    want = (qk.astype(np.float64) * np.float64(sc) + (qi - ki)).astype(np.float32)
    assert np.array_equal(mod(qk, sc, qi, ki), want)
    assert not np.array_equal(want, (qk * sc).astype(np.float32) + (qi - ki).astype(np.float32))
    with pytest.raises(InputError, match="PRESCALE_QK=True"):
        flex_config(_FLEX_CODE.replace("PRESCALE_QK : tl.constexpr = False", "PRESCALE_QK : tl.constexpr = True"),
                    64, False)
    with pytest.raises(InputError, match="not one the recordings established"):
        flex_config(_FLEX_CODE.replace("SCORE", "tmp0 = libdevice.tanh(qk)\n    post_mod_scores = tmp0"), 64, False)
    with pytest.raises(InputError, match="generated for head dim 64"):
        flex_config(_FLEX_CODE.replace("SCORE", _RELBIAS), 128, False)
    with pytest.raises(InputError, match="full blocks"):
        flex_config(_FLEX_CODE.replace("SCORE", _RELBIAS), 64, True)


def test_fp8_rounding_is_the_recorded_cvt():
    """Triton's f32 -> fp8e4nv (P before the PV dot, O at the store) is cvt.rn.satfinite.e4m3x2.f32, which
    refmodel.numerics.cvt reproduces over all 2^32 inputs: finite overflow saturates to ±448, NaN is 0x7F
    (ml_dtypes' cast, which overflows to NaN, would differ)."""
    from refmodel.numerics.cvt import cvt

    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(4096).astype(np.float32) * 10.0 ** rng.integers(-12, 6, 4096),
                        np.array([np.nan, np.inf, -np.inf, 1e6, -1e6, 448, 464, 0.0, -0.0, 2.0 ** -10],
                                 np.float32)]).astype(np.float32)
    got = A._round(x, ml_dtypes.float8_e4m3fn).view(np.uint8)
    want = (cvt("cvt.rn.satfinite.e4m3x2.f32", x, x) & 0xFF).astype(np.uint8)
    assert np.array_equal(got, want)
    assert got[-10:-6].tolist() == [0x7F, 0x7E, 0xFE, 0x7E]
    assert not np.array_equal(got, x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))


def test_flex_fp8_is_an_attention():
    """e4m3 q, k, v through FlexAttention's FP8 template: an attention within FP8's precision (e4m3 P and O),
    64 x 64 tiles by default."""
    E4 = ml_dtypes.float8_e4m3fn
    q, k, v = (x.astype(np.float32).astype(E4) for x in _qkv(200, 64, seed=4))
    o, lse = A.flex_forward(q, k, v, is_causal=True)
    assert o.dtype == np.dtype(E4)
    ro, rl = _reference(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), True)
    assert np.max(np.abs(o.astype(np.float64) - ro)) < 0.15 and np.max(np.abs(lse - rl)) < 1e-3
    assert A.FLEX_FP8_DEFAULTS[64][:2] == (64, 64)
    o2, _ = A.flex_forward(q, k, v, is_causal=True, block_m=128, block_n=128)
    assert not np.array_equal(o.view(np.uint8), o2.view(np.uint8))   # the tile is part of the answer


def test_flex_decoding_is_refused():
    """Fewer than 128 queries: Inductor compiles the flex_decoding template (recorded at Sq 1, 17, 64, 96 on the
    H100: 2-warp mma.sync split-KV partials, then Inductor reductions), which is not modelled: refused, by the
    shape and by the code."""
    from refmodel.golden.attention import FLEX_DECODE_BELOW, flex_attention, flex_config

    q, k, v = (x[None, None] for x in _qkv(FLEX_DECODE_BELOW - 1, 64))
    with pytest.raises(InputError, match="fewer than 128 queries \\(got 127\\) runs Inductor's flex_decoding"):
        flex_attention(q, k, v)
    q, k, v = (x[None, None] for x in _qkv(FLEX_DECODE_BELOW, 64))
    assert flex_attention(q, k, v)[0].shape == q.shape
    code = _FLEX_CODE.replace("SCORE", "tmp0 = (qk)\n    post_mod_scores = tmp0").replace(
        "    BLOCK_M : tl.constexpr = 128", "    SPLIT_KV : tl.constexpr = 66\n    BLOCK_M : tl.constexpr = 32")
    with pytest.raises(InputError, match="flex_decoding template"):
        flex_config(code, 64, False)
