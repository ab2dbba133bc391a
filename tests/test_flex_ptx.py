"""The two contraction rules refmodel.golden.attention's FlexAttention model encodes, against Triton 3.6's own PTX
for sm_90 (a CPU compile of the template's forward block, torch 2.11's common.py.jinja, reduced to what decides
them; no GPU):

* ``p = exp2(post_mod_scores·RCP_LN2 − m)`` is ``fma(s, RCP_LN2, −m)`` only when no ``tl.where`` stands between the
  product and the subtraction; with one (the CHECK_BLOCK_BOUNDARY or mask_mod where) LLVM hoists the multiply
  above the select and the subtraction stays a ``sub.f32``;
* a score_mod's ``qk·SM_SCALE + x`` is one ``fma.rn.f32``.
"""

from __future__ import annotations

import re

import pytest

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

RCP_LN2 = "0f3FB8AA3B"
SM_SCALE_D64 = "0f3E000000"


@triton.jit
def _block(Q, K, V, O, L, KV_LEN, N_BLOCKS, SM_SCALE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
           D: tl.constexpr, RELBIAS: tl.constexpr, CHECK_BLOCK_BOUNDARY: tl.constexpr, MASK: tl.constexpr):
    RCP_LN2: tl.constexpr = 1.44269504
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    for start_n in range(0, N_BLOCKS):          # a run-time loop, as the template's block_n_end
        offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
        k = tl.trans(tl.load(K + offs_n[:, None] * D + offs_d[None, :]))
        qk = tl.dot(q, k)
        qk *= SM_SCALE
        if RELBIAS:
            post_mod_scores = qk + (offs_m[:, None] - offs_n[None, :]).to(tl.float32)
        else:
            post_mod_scores = qk
        if CHECK_BLOCK_BOUNDARY:
            post_mod_scores = tl.where(offs_n[None, :] < KV_LEN, post_mod_scores, float("-inf"))
        if MASK:                                 # a causal mask_mod on a partial block
            post_mod_scores = tl.where(offs_m[:, None] >= offs_n[None, :], post_mod_scores, float("-inf"))
        post_mod_scores *= RCP_LN2
        m_ij = tl.maximum(m_i, tl.max(post_mod_scores, 1))
        m_ij_masked = tl.where(m_ij == float("-inf"), 0, m_ij)
        alpha = tl.math.exp2(m_i - m_ij_masked)
        p = tl.math.exp2(post_mod_scores - m_ij_masked[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + offs_n[:, None] * D + offs_d[None, :])
        acc = tl.dot(p.to(tl.bfloat16), v, acc)
        m_i = m_ij
    l_i = tl.where(l_i == 0.0, 1, l_i)
    tl.store(O + offs_m[:, None] * D + offs_d[None, :], (acc / l_i[:, None]).to(tl.bfloat16))
    tl.store(L + offs_m, m_i + tl.math.log2(l_i))


def _ptx(relbias: bool, boundary: bool, mask: bool = False) -> str:
    from triton.backends.compiler import GPUTarget

    sig = {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "O": "*bf16", "L": "*fp32", "KV_LEN": "i32", "N_BLOCKS": "i32"}
    const = dict(SM_SCALE=0.125, BLOCK_M=128, BLOCK_N=64, D=64, RELBIAS=relbias, CHECK_BLOCK_BOUNDARY=boundary,
                 MASK=mask)
    try:
        c = triton.compile(triton.compiler.ASTSource(_block, sig, const), target=GPUTarget("cuda", 90, 32),
                           options=dict(num_warps=4, num_stages=3))
    except Exception as e:  # noqa: BLE001 - no ptx toolchain in this Triton build
        pytest.skip(f"Triton cannot compile for sm_90 here: {type(e).__name__}")
    return c.asm["ptx"]


def _fmas_with(ptx: str, const: str) -> int:
    return len(re.findall(rf"fma\.rn\.f32\s+[^;]*{const}", ptx))


def test_exp_argument_is_an_fma_only_without_a_select():
    from refmodel.golden import attention as A

    plain = _ptx(False, False)
    assert _fmas_with(plain, RCP_LN2) > 0
    for selected in (_ptx(False, True), _ptx(False, False, True)):      # the boundary where; a mask_mod where
        assert _fmas_with(selected, RCP_LN2) == 0
        assert re.search(rf"mul\.f32\s+[^;]*{RCP_LN2}", selected)
    # the model: the same inputs give different p where the FMA and the rounded product differ
    import ml_dtypes
    import numpy as np

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((128, 64)).astype(ml_dtypes.bfloat16) for _ in range(3))
    a = A.flex_forward(q, k, v, is_divisible=True)
    b = A.flex_forward(q, k, v, is_divisible=False)
    assert not np.array_equal(a[1].view(np.uint32), b[1].view(np.uint32))


def test_score_mod_add_is_one_fma():
    ptx = _ptx(True, False)
    assert _fmas_with(ptx, SM_SCALE_D64) > 0
    assert not re.search(rf"mul\.f32\s+[^;]*{SM_SCALE_D64}", ptx)
