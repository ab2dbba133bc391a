"""refmodel.golden.attention: the public sdpa refuses until a backend is recorded; the FA2 draft schedule is an
attention (close to the float64 softmax), exact where the arithmetic is exact, and its open contraction choices
are distinguishable (so recordings can decide them)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from refmodel.errors import InputError
from refmodel.golden.attention import fa2_forward_draft, sdpa

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


def test_sdpa_refuses_until_recorded():
    q, k, v = (x[None, None] for x in _qkv(128, 64))
    with pytest.raises(InputError, match="not reproduced bit for bit on the H200 yet"):
        sdpa(q, k, v, backend="cudnn")
    with pytest.raises(InputError, match=r"must be \(B, H, S, D\) arrays"):
        sdpa(q[0, 0], k[0, 0], v[0, 0])
    with pytest.raises(InputError, match="backend must be one of"):
        sdpa(q, k, v, backend="math")


@pytest.mark.parametrize("S,D,causal", [(128, 64, False), (200, 128, True), (200, 64, False)])
def test_the_draft_is_an_attention(S, D, causal):
    q, k, v = _qkv(S, D)
    o, lse = fa2_forward_draft(q, k, v, is_causal=causal)
    ref_o, ref_lse = _reference(q, k, v, causal)
    assert np.abs(o.astype(np.float64) - ref_o).max() < 0.02
    assert np.abs(lse - ref_lse).max() < 1e-5


def test_exact_where_the_arithmetic_is_exact():
    q, k, v = _qkv(200, 64, seed=1)
    o, lse = fa2_forward_draft(q, k, v, is_causal=True)
    assert np.array_equal(o[0].view(np.uint16), v[0].view(np.uint16))    # row 0 sees key 0 only: p = 1, sum = 1
    with pytest.raises(InputError, match="head dim 96"):
        fa2_forward_draft(*_qkv(64, 96))


def test_the_open_contractions_change_bits():
    q, k, v = _qkv(200, 128, seed=2)
    base = fa2_forward_draft(q, k, v, is_causal=True)
    for c in ("max", "sum", "lse"):
        o, lse = fa2_forward_draft(q, k, v, is_causal=True, contract=(c,))
        assert not (np.array_equal(o.view(np.uint16), base[0].view(np.uint16)) and np.array_equal(lse, base[1])), c


@pytest.mark.parametrize("S,D,causal", [(128, 64, False), (200, 128, True), (256, 64, True)])
def test_the_flex_draft_is_an_attention(S, D, causal):
    from refmodel.golden.attention import flex_attention_draft

    q, k, v = _qkv(S, D, seed=3)
    o, lse = flex_attention_draft(q, k, v, is_causal=causal)
    ref_o, ref_lse = _reference(q, k, v, causal)
    assert np.abs(o.astype(np.float64) - ref_o).max() < 0.02
    assert np.abs(lse - ref_lse).max() < 1e-5


def test_flex_and_fa2_schedules_disagree_in_bits():
    """Two kernels, one attention: the drafts differ (exp2 forms, FMA placement, sum order, key-block order)."""
    from refmodel.golden.attention import flex_attention_draft

    q, k, v = _qkv(200, 128, seed=4)
    a, _ = flex_attention_draft(q, k, v, is_causal=True)
    b, _ = fa2_forward_draft(q, k, v, is_causal=True)
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
