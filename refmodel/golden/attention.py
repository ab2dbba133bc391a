"""Golden models of attention forward kernels on sm_90 (torch 2.11, Triton 3.6): bit for bit O and LSE.

:func:`sdpa` (the ``flash`` and ``efficient`` backends of ``scaled_dot_product_attention``) and
:func:`flex_attention` (FlexAttention under torch.compile, bf16 / f16 / e4m3) are the public entry points.
Every backend in :data:`VERIFIED` replays its hardware recordings bit for bit (``fixtures/attention``, recorded
by ``gpu.record.attention`` on an sm_90 H100; ``wgref verify --feature attention``); a backend, input type,
head dim, scale or shape class the recordings did not establish is refused in one sentence (cuDNN among
them: a closed kernel whose bits no modelled schedule gives, ``tools/attention_fit.py --backend cudnn``).

:func:`fa2_forward` is the schedule of the FlashAttention-2 kernels that torch's ``flash`` backend runs
on sm_90: the source (Dao-AILab/flash-attention v2.7.4, built by PyTorch 2.11 with ``UNFUSE_FMA``, no fast math)
and the sm_90 SASS of the 2.11.0 wheel's ``libtorch_cuda.so`` (native sm_90 cubins, no PTX), written with
refmodel's recorded parts:

* ``S = Q Kᵀ`` is a chain of ``mma.sync.m16n8k16`` fused dots over the head dimension (HMMA.16816);
* ``p = exp2f(FMUL(s, scale·log2 e) − FSEL(FMUL(max, scale·log2 e), 0))`` (no FFMA; ``cuda:exp2f``);
* P is rounded to bf16 / f16 (``F2FP``, RN) for ``acc_o += P V``; the row sum uses the float32 p;
* each thread keeps a running sum of its own columns (``col = 8j + 2(lane % 4) + {0, 1}``, ascending); in a later
  key block ``row_sum·scale + p₀`` is one FFMA; the quad reduction ``(s0 + s2) + (s1 + s3)`` is taken at the end;
* key blocks run from the last one down to the first; the rescale is ``exp2f((m_prev − m_cur)·scale·log2 e)``;
* the end: ``o = rn(acc_o · (1/sum))`` (IEEE reciprocal) and ``lse = FFMA(m, scale, __logf(sum))``;
* split-KV (ATen's heuristic, :func:`fa2_num_splits`): 64-row blocks, each split's O normalised in float32 and its
  LSE (``-inf`` when empty), merged by the combine kernel with ``expf``/``logf`` and ``o = FFMA(scale, o_s, o)``.

``contract`` names the three FFMA sites (``"sum"``, ``"lse"``, ``"combine"``, all of them by default: the SASS);
``"max"`` (``s·c − m·c`` as one FFMA, which the SASS does not do) is kept for the fit tool.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from ..errors import InputError
from ..numerics.promotion import add_f32, fma_f32_array, mul_f32
from ..numerics.sfu.unit import spelled_f32

#: ATen FA2 on sm_90, bf16, no dropout: head dim -> (kBlockM, kBlockN, warps) (flash_fwd_launch_template.h)
FA2_TRAITS = {64: (128, 128, 4), 128: (128, 64, 4)}
#: the 16-bit input types and the fused dot of their k16 MMAs (mma.sync m16n8k16 sums as the wgmma k16 does)
_MMA = {np.dtype(ml_dtypes.bfloat16): "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16",
        np.dtype(np.float16): "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16",
        # FlexAttention's FP8 template: Triton lowers both of its dots to k32 e4m3 wgmma (QK SS, PV RS) with
        # the float32 accumulator as C (no promotion: max_num_imprecise_acc 0)
        np.dtype(ml_dtypes.float8_e4m3fn): "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"}
#: the input types of the SDPA backends' recordings (FlexAttention takes e4m3 too)
_SDPA_TYPES = (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16))
_LOG2E = math.log2(math.e)
BACKENDS = ("flash", "efficient", "cudnn")
#: the backends whose schedule replays the hardware's recordings bit for bit (fixtures/attention; "flex":
#: FlexAttention)
VERIFIED: frozenset = frozenset({"flash", "efficient", "flex"})
#: the head dims the recordings cover
RECORDED_HEAD_DIMS = frozenset({64, 128})


def _check_bhsd(q, k, v) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q (B, H, Sq, D), k and v (B, H, Sk, D) of one 16-bit type, as numpy arrays."""
    q, k, v = (np.asarray(x) for x in (q, k, v))
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise InputError(f"q, k and v must be (B, H, S, D) arrays, got shapes {q.shape}, {k.shape}, {v.shape}")
    if k.shape != v.shape or q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise InputError(f"q (B, H, Sq, D), k and v (B, H, Sk, D) must agree, got {q.shape}, {k.shape}, {v.shape}")
    return q, k, v


def _refuse_unrecorded(what: str, backend: str, q, k, scale) -> None:
    """The configurations the recordings established (fixtures/attention): one sentence for any other."""
    if backend not in VERIFIED:
        raise InputError(f"{what} was not reproduced bit for bit on the hardware: wgref does not model it "
                         "(gpu.record.attention records it)")
    D = q.shape[-1]
    if D not in RECORDED_HEAD_DIMS:
        raise InputError(f"head dim {D} was not recorded for {what} (recorded: {sorted(RECORDED_HEAD_DIMS)})")
    if scale is not None and np.float32(scale) != np.float32(1.0 / math.sqrt(D)):
        raise InputError(f"{what} was recorded with the default scale 1/sqrt(D) only, got {scale!r}")


def sdpa(q, k, v, *, is_causal: bool = False, scale=None, backend: str = "flash", return_lse: bool = False,
         sms: int = 132, batch_heads: int | None = None):
    """``torch.nn.functional.scaled_dot_product_attention``'s output (``return_lse``: and its LSE, natural log,
    (B, H, Sq) float32) for one backend on q, k, v (B, H, S, D) bf16 or f16, bit for bit as torch 2.11 on
    sm_90.  ``flash``: the FA2 kernels (:func:`fa2_forward` per head, split-KV as ATen picks it for
    ``sms`` SMs: 132 on H100 SXM and H200); ``efficient``: :func:`memeff_forward` (its LSE padded to a
    multiple of 32 rows with +inf, as torch returns it).  ``batch_heads``: the whole call's batch x heads when
    ``q`` holds some of its heads (FA2's split choice depends on it; default B·H of ``q``).  A backend, head dim or
    scale the recordings did not establish is refused in one sentence."""
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    q, k, v = _check_bhsd(q, k, v)
    _refuse_unrecorded(f"the {backend} backend of scaled_dot_product_attention", backend, q, k, scale)
    B, H, Sq, D = q.shape
    o = np.zeros(q.shape, q.dtype)
    if backend == "flash":
        if batch_heads is not None and (not isinstance(batch_heads, int) or batch_heads < B * H):
            raise InputError(f"batch_heads must be an int of at least B x H = {B * H}, got {batch_heads!r}")
        ns = fa2_num_splits(batch_heads or B * H, 1, Sq, k.shape[2], D, sms)
        lse = np.zeros((B, H, Sq), np.float32)
        run = lambda b, h: fa2_forward(q[b, h], k[b, h], v[b, h], is_causal=is_causal, scale=scale,  # noqa: E731
                                       num_splits=ns)
    elif backend == "efficient":        # the LSE as torch returns it: padded to a multiple of 32 with +inf
        lse = np.full((B, H, -(-Sq // 32) * 32), np.inf, np.float32)
        run = lambda b, h: memeff_forward(q[b, h], k[b, h], v[b, h], is_causal=is_causal, scale=scale)  # noqa: E731
    else:
        raise InputError(f"the {backend} backend has no model")
    for b in range(B):
        for h in range(H):
            o[b, h], lse[b, h, :Sq] = run(b, h)
    return (o, lse) if return_lse else o


def flex_attention(q, k, v, *, causal: bool = False, code=None):
    """``torch.nn.attention.flex_attention.flex_attention(q, k, v, block_mask=..., return_lse=True)`` compiled
    by torch.compile (torch 2.11, sm_90): ``(o, lse)`` for q, k, v (B, H, S, D) bf16, f16 or e4m3 (o of the
    same type), ``causal``: the block mask of ``q_idx >= kv_idx``.  ``code``: Inductor's generated source of the call
    (``run_and_get_code``), from which the configuration and any score_mod are read; without it, torch
    2.11's defaults on sm_90 and no score_mod.  What the recordings did not establish is refused."""
    q, k, v = _check_bhsd(q, k, v)
    _refuse_unrecorded("FlexAttention", "flex", q, k, None)
    if q.shape[2] < FLEX_DECODE_BELOW:
        raise InputError(f"FlexAttention with fewer than {FLEX_DECODE_BELOW} queries (got {q.shape[2]}) runs "
                         "Inductor's flex_decoding template, which wgref does not model")
    kw = {} if code is None else flex_config(code, q.shape[-1], causal)
    B, H, Sq, D = q.shape
    o = np.zeros(q.shape, q.dtype)
    lse = np.zeros((B, H, Sq), np.float32)
    for b in range(B):
        for h in range(H):
            o[b, h], lse[b, h] = flex_forward(q[b, h], k[b, h], v[b, h], is_causal=causal, **kw)
    return o, lse


@dataclass
class Trace:
    """What one output element ``o[row, col]`` (one batch and head) went through: a model given a Trace appends
    one dict per key block to ``steps`` (the block, its scores, the running max and rescale, p and its
    rounding, the row sum's lanes, the accumulator before and after) and fills ``end`` (the sum, the
    normalisation, the rounded output, the LSE).  :mod:`refmodel.render.attention_draw` prints it."""

    row: int
    col: int
    steps: list = field(default_factory=list)
    end: dict = field(default_factory=dict)

    def at(self, rows: np.ndarray) -> int:
        """The traced row's index in the row block ``rows`` (consecutive query indices)."""
        return int(self.row - rows[0])

    def step(self, *, block, cols, s, masked, m_prev, m, rescale, p, p_rounded, v, sum_before, sum_after,
             acc_before, acc_after, lanes=()) -> None:
        """Record one key block: the traced row's values (``v``: the block's V column of the traced output,
        ``sum_before``/``sum_after``: the row sum's lanes or the one running sum, ``lanes``: this block's
        tl.sum lanes)."""
        self.steps.append(dict(
            block=int(block), cols=(int(cols[0]), int(cols[-1])), s=np.array(s, np.float32), masked=int(masked),
            m_prev=None if m_prev is None else float(m_prev), m=float(m),
            rescale=None if rescale is None else float(rescale), p=np.array(p, np.float32),
            p_rounded=np.array(p_rounded, np.float32), v=np.array(v, np.float32),
            sum_before=np.array(sum_before, np.float32, ndmin=1), sum_after=np.array(sum_after, np.float32, ndmin=1),
            lanes=np.array(lanes, np.float32), acc_before=float(acc_before), acc_after=float(acc_after)))


def _check_qkv(q, k, v, table: dict, types=_SDPA_TYPES) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, k, v as arrays of one of ``types`` (one batch and head), their head dim among the modelled ones
    in ``table``."""
    q, k, v = (np.asarray(x) for x in (q, k, v))
    if q.dtype not in types or k.dtype != q.dtype or v.dtype != q.dtype:
        names = " or all ".join(str(t) for t in types)
        raise InputError(f"q, k and v must all be {names}, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[1] not in table:
        raise InputError(f"head dim {q.shape[1]} is not among the modelled {sorted(table)}")
    return q, k, v


def _key_block(k: np.ndarray, v: np.ndarray, n: int, bn: int):
    """Key block n (bn rows of k and v, zero past the end), its column indices and which are in range."""
    cols = np.arange(n * bn, (n + 1) * bn)
    ok = cols < k.shape[0]
    kb = np.zeros((bn, k.shape[1]), k.dtype)
    vb = np.zeros((bn, v.shape[1]), v.dtype)
    kb[ok], vb[ok] = k[cols[ok]], v[cols[ok]]
    return kb, vb, cols, ok


def _chain(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``c + a·b`` as a chain of k16 bf16 fused dots (rows padded to 64, columns to 8)."""
    from ..numerics.gemm import gemm

    M, N = c.shape
    Mp, Np = -(-M // 64) * 64, -(-N // 8) * 8
    A = np.zeros((Mp, a.shape[1]), a.dtype)
    A[:M] = a
    B = np.zeros((b.shape[0], Np), b.dtype)
    B[:, :N] = b
    C = np.zeros((Mp, Np), np.float32)
    C[:M, :N] = c
    return gemm(A, B, C, instr=_MMA[a.dtype])[:M, :N]


def _chain8(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``c + a·b`` as a chain of ``mma.sync.m16n8k8`` fused dots (k ascending, 8 at a time; K a multiple of 8)."""
    from ..numerics.accumulate import BINDING, decode_operand, fdpa_chain
    from ..numerics.wgmma import operand_codes, operand_spec

    name = "bf16" if a.dtype == np.dtype(ml_dtypes.bfloat16) else "f16"
    prm = BINDING[(name, "f32")]
    (M, K), N = a.shape, b.shape[1]
    A = decode_operand(operand_codes(np.ascontiguousarray(a), name, prm).reshape(M, K)[..., None],
                       operand_spec(name, prm), kblk=8)
    B = decode_operand(operand_codes(np.ascontiguousarray(b), name, prm).reshape(1, K, N), operand_spec(name, prm),
                       kblk=8)
    cb = np.ascontiguousarray(c, np.float32).view(np.uint32).reshape(M, N)
    return fdpa_chain(A, B, cb, prm, kblk=8, rows_per_b=M).view(np.float32)


def _round(x, dtype) -> np.ndarray:
    """float32 ``x`` rounded to the 16-bit ``dtype`` (cvt.rn), or to e4m3 as Triton converts
    (cvt.rn.satfinite.e4m3x2.f32: finite overflow to ±448, NaN to 0x7F)."""
    from ..numerics.gemm import _convert

    if np.dtype(dtype) == np.dtype(ml_dtypes.float8_e4m3fn):
        from ..numerics.fp8 import encode, to_ml_dtypes

        return to_ml_dtypes(encode(np.ascontiguousarray(x, np.float32), "e4m3", "satfinite"), "e4m3")
    return _convert(np.ascontiguousarray(x, np.float32), np.dtype(dtype))


def _thread_of_column(n: int) -> np.ndarray:
    """The quad lane (0..3) that holds each column of an mma.sync C fragment row."""
    return (np.arange(n) % 8) // 2


def _lane_sums(p: np.ndarray, start=None, scale=None) -> np.ndarray:
    """(rows, 4): each quad lane's own columns (8j + 2·lane + {0, 1}) added in register order, onto ``start``
    (rows, 4: a running sum) when given; with ``scale`` (rows,) the first step is ``fma(start, scale, p0)``."""
    lane = _thread_of_column(p.shape[1])
    out = np.zeros((p.shape[0], 4), np.float32)
    for q4 in range(4):
        mine = p[:, lane == q4]
        if start is None:
            acc = mine[:, 0]
        elif scale is None:
            acc = add_f32(start[:, q4], mine[:, 0])
        else:
            acc = fma_f32_array(start[:, q4], scale, mine[:, 0])
        for j in range(1, mine.shape[1]):
            acc = add_f32(acc, mine[:, j])
        out[:, q4] = acc
    return out


def _quad(part: np.ndarray) -> np.ndarray:
    """The butterfly over a quad (shfl xor 2, then xor 1): ``(s0 + s2) + (s1 + s3)``."""
    return add_f32(add_f32(part[:, 0], part[:, 2]), add_f32(part[:, 1], part[:, 3]))


#: the split-KV kernel's tiles: head dim -> (kBlockM, kBlockN) (run_mha_fwd_splitkv_dispatch)
FA2_SPLIT_TRAITS = {64: (64, 256), 128: (64, 128)}


def fa2_num_splits(batch: int, heads: int, seqlen_q: int, seqlen_k: int, head_dim: int, sms: int = 132) -> int:
    """The number of key splits ATen's ``mha_fwd`` picks (``set_params_splitkv`` with num_splits 0, no dropout):
    FA2's ``num_splits_heuristic`` on batch · heads · ⌈Sq / 64⌉ row blocks, 2 · ``sms`` slots and the split
    kernel's key blocks, at most 128 splits."""
    bn = 256 if head_dim <= 64 else (128 if head_dim <= 128 else 64)
    n_blocks = -(-seqlen_k // bn)
    work = batch * heads * (-(-seqlen_q // 64))
    slots = 2 * sms
    if work >= np.float32(0.8) * np.float32(slots):
        return 1
    top = min(128, slots, n_blocks)
    eligible = [s == 1 or -(-n_blocks // s) != -(-n_blocks // (s - 1)) for s in range(1, top + 1)]
    eff = []
    for s, ok in zip(range(1, top + 1), eligible):
        waves = np.float32(work * s) / np.float32(slots)
        eff.append(np.float32(waves / np.float32(math.ceil(waves))) if ok else np.float32(0))
    best = max(eff) if eff else np.float32(0)
    for s, ok in zip(range(1, top + 1), eligible):
        if ok and eff[s - 1] >= np.float32(0.85) * best:
            return s
    return 1


def _fa2_rowblock(q, k, v, rows, blocks, bn, sl2, is_causal, masking_steps, check_inf, contract, trace=None):
    """One FA2 row block over key ``blocks`` (in the order run): the unnormalised float32 accumulator, the raw
    row max and each quad lane's running sum (rows, 4).  The first ``masking_steps`` blocks take Check_inf.
    ``trace`` (a :class:`Trace` whose row is in ``rows``) records every step of its row and column."""
    (Sq, D), Sk = q.shape, k.shape[0]
    acc = np.zeros((rows.size, D), np.float32)
    row_max = np.full(rows.size, -np.inf, np.float32)
    part = np.zeros((rows.size, 4), np.float32)          # each quad lane's running sum
    for i, n in enumerate(blocks):
        kb, vb, cols, ok = _key_block(k, v, n, bn)
        s = _chain(q[rows], np.ascontiguousarray(kb.T), np.zeros((rows.size, bn), np.float32))
        masked = ~ok[None, :]
        if is_causal:
            masked = masked | (cols[None, :] >= np.minimum(Sk, rows[:, None] + 1 + Sk - Sq))
        s = np.where(masked, np.float32(-np.inf), s)
        prev = row_max
        with np.errstate(invalid="ignore"):
            cur = np.fmax(prev, np.fmax.reduce(s, axis=1)) if i else np.fmax.reduce(s, axis=1)
        row_max = cur.astype(np.float32)
        r = None
        if i:
            inf_ok = check_inf and i < masking_steps
            m_cur = np.where(row_max == -np.inf, np.float32(0), row_max) if inf_ok else row_max
            with np.errstate(invalid="ignore"):
                r = spelled_f32("cuda:exp2f(x)", mul_f32(add_f32(prev, -m_cur), sl2))
            part = mul_f32(part, r[:, None]) if "sum" not in contract else part
            acc = mul_f32(acc, r[:, None])
        ms = np.where(row_max == -np.inf, np.float32(0), mul_f32(row_max, sl2))
        with np.errstate(invalid="ignore"):
            if "max" in contract:
                t = fma_f32_array(-row_max[:, None], np.broadcast_to(sl2, s.shape), mul_f32(s, sl2))
                t = np.where((row_max == -np.inf)[:, None], mul_f32(s, sl2), t)
            else:
                t = add_f32(mul_f32(s, sl2), -ms[:, None])
        p = spelled_f32("cuda:exp2f(x)", t)
        fused = i and "sum" in contract          # row_sum·scale + p0 as one FFMA (part not rescaled above)
        before = (part.copy(), acc.copy()) if trace is not None else None
        part = _lane_sums(p, part if i else None, scale=r if fused else None)
        acc = _chain(_round(p, q.dtype), vb, acc)           # cvt.rn.bf16x2.f32 (f16x2), then P·V
        if trace is not None:
            j = trace.at(rows)
            trace.step(block=n, cols=cols, s=s[j], masked=np.broadcast_to(masked, s.shape)[j].sum(),
                       m_prev=prev[j] if i else None, m=row_max[j], rescale=None if r is None else r[j], p=p[j],
                       p_rounded=_round(p[j], q.dtype), v=vb[:, trace.col], sum_before=before[0][j],
                       sum_after=part[j], acc_before=before[1][j, trace.col], acc_after=acc[j, trace.col])
    return acc, row_max, part


def _fa2_end(acc, row_max, part, ss, contract, split: bool):
    """``normalize_softmax_lse``: the quad sum, ``acc · (1/sum)`` and ``row_max·scale + __logf(sum)`` (a zero or
    NaN sum: 1 and -inf for a split, +inf otherwise)."""
    total = _quad(part)
    bad = (total == 0) | np.isnan(total)
    with np.errstate(all="ignore"):
        inv = np.where(bad, np.float32(1), spelled_f32("cuda:1.0f / x", total))
    out = mul_f32(acc, inv[:, None])
    lg = spelled_f32("cuda:__logf(x)", np.where(bad, np.float32(1), total))
    with np.errstate(invalid="ignore"):
        if "lse" in contract:
            body = fma_f32_array(row_max, np.broadcast_to(ss, row_max.shape), lg)
        else:
            body = add_f32(mul_f32(row_max, ss), lg)
    return out, np.where(bad, np.float32(-np.inf if split else np.inf), body)


def _fa2_combine(outs, lses, contract):
    """``combine_attn_seqk_parallel``: the splits' float32 O (already normalised) and LSEs merged with ``expf``
    and ``logf``; O summed over the splits in order (``o += scale · o_split``)."""
    L = np.stack(lses)                                           # (splits, rows)
    n = 1 << max(1, math.ceil(math.log2(len(lses))))             # kMaxSplits: padded slots are -inf
    pad = np.full((n - L.shape[0], L.shape[1]), -np.inf, np.float32)
    L = np.concatenate([L, pad]) if pad.size else L
    lmax = np.fmax.reduce(L, axis=0)
    lmax = np.where(lmax == -np.inf, np.float32(0), lmax)
    with np.errstate(invalid="ignore"):
        e = spelled_f32("cuda:expf(x)", add_f32(L, -lmax[None, :]))
    step = n // 2                                                # the butterfly (shfl xor n/2, ..., 1)
    while step:
        e = _butterfly(e, step)
        step //= 2
    total = e[0]
    bad = (total == 0) | np.isnan(total)
    with np.errstate(invalid="ignore"):
        lse = np.where(bad, np.float32(np.inf),
                       add_f32(spelled_f32("cuda:logf(x)", np.where(bad, np.float32(1), total)), lmax))
    o = np.zeros_like(outs[0])
    for l_s, o_s in zip(lses, outs):
        with np.errstate(invalid="ignore"):
            sc = spelled_f32("cuda:expf(x)", add_f32(l_s, -lse))
        o = fma_f32_array(np.broadcast_to(sc[:, None], o.shape), o_s, o) if "combine" in contract else \
            add_f32(o, mul_f32(sc[:, None], o_s))
    return o, lse


def _butterfly(e: np.ndarray, step: int) -> np.ndarray:
    """One ``x + shfl_xor(x, step)`` round over the first axis (lane l adds lane l ^ step)."""
    idx = np.arange(e.shape[0]) ^ step
    return add_f32(e, e[idx])


#: the FFMA contractions of PyTorch 2.11's FA2 kernels (sm_90 SASS)
FA2_CONTRACT = ("sum", "lse", "combine")


def fa2_forward(q, k, v, *, is_causal: bool = False, scale=None, contract=FA2_CONTRACT,
                num_splits: int = 1, trace: "Trace | None" = None) -> tuple[np.ndarray, np.ndarray]:
    """The FA2 schedule (module doc) on ``q`` (Sq, D), ``k`` and ``v`` (Sk, D) bf16 or f16 of one batch and head:
    ``(o (Sq, D), lse (Sq,) float32)``; ``num_splits`` > 1: the split-KV kernel and its combine
    (:func:`fa2_num_splits` says what ATen picks).  ``trace``: every step of one output element."""
    q, k, v = _check_qkv(q, k, v, FA2_TRAITS)
    (Sq, D), Sk = q.shape, k.shape[0]
    split = num_splits > 1
    bm, bn = FA2_SPLIT_TRAITS[D] if split else FA2_TRAITS[D][:2]
    ss = np.float32(1.0 / math.sqrt(D) if scale is None else scale)
    sl2 = np.float32(float(ss) * _LOG2E)                       # params.scale_softmax_log2 (host, double)
    even = Sq % bm == 0 and Sk % bn == 0
    masking_steps = 1 if not is_causal else -(-bm // bn) + (0 if even else 1)
    check_inf = is_causal or not even
    o = np.zeros((Sq, D), q.dtype)
    lse = np.zeros(Sq, np.float32)
    n_total = -(-Sk // bn)
    per = -(-n_total // num_splits)
    for m0 in range(0, Sq, bm):
        rows = np.arange(m0, min(m0 + bm, Sq))
        n_max = n_total
        if is_causal:
            n_max = min(n_max, -(-(m0 + bm + Sk - Sq) // bn))
        tr = trace if trace is not None and trace.row in rows else None
        if not split:
            acc, row_max, part = _fa2_rowblock(q, k, v, rows, range(n_max - 1, -1, -1), bn, sl2, is_causal,
                                               masking_steps, check_inf, contract, tr)
            out, lse[rows] = _fa2_end(acc, row_max, part, ss, contract, split=False)
            o[rows] = _round(out, q.dtype)
            if tr is not None:
                j = tr.at(rows)
                tr.end.update(kernel="flash_fwd_kernel", lanes=part[j].copy(), total=float(_quad(part)[j]),
                              acc=float(acc[j, tr.col]), out_f32=float(out[j, tr.col]),
                              out=float(o[tr.row, tr.col].astype(np.float32)), lse=float(lse[tr.row]),
                              row_max=float(row_max[j]))
            continue
        outs, lses = [], []
        for sp in range(num_splits):
            lo, hi = sp * per, min(n_max, (sp + 1) * per)
            if lo >= hi:                                           # an empty split: O 0, LSE -inf
                outs.append(np.zeros((rows.size, D), np.float32))
                lses.append(np.full(rows.size, -np.inf, np.float32))
                continue
            if tr is not None:
                tr.steps.append(dict(split=sp, blocks=(lo, hi - 1)))
            acc, row_max, part = _fa2_rowblock(q, k, v, rows, range(hi - 1, lo - 1, -1), bn, sl2, is_causal,
                                               masking_steps, check_inf, contract, tr)
            out, l_s = _fa2_end(acc, row_max, part, ss, contract, split=True)
            outs.append(out)
            lses.append(l_s)
        out, lse[rows] = _fa2_combine(outs, lses, contract)
        o[rows] = _round(out, q.dtype)
        if tr is not None:
            j = tr.at(rows)
            tr.end.update(kernel="flash_fwd_splitkv_kernel + combine", split_out=[float(x[j, tr.col]) for x in outs],
                          split_lse=[float(x[j]) for x in lses], out_f32=float(out[j, tr.col]),
                          out=float(o[tr.row, tr.col].astype(np.float32)), lse=float(lse[tr.row]))
    return o, lse


#: the memory-efficient backend (xformers' CUTLASS kernels in ATen, Sm80 instantiations on sm_90): head dim ->
#: (kQueriesPerBlock, kKeysPerBlock); warps split the key block in 32-column tiles
MEMEFF_TRAITS = {64: (64, 64), 128: (64, 128)}
_LOG2E_F = np.float32(1.4426950408889634)                    # kLog2e as float (0x3FB8AA3B)


def _fmnmx_max(x: np.ndarray) -> np.ndarray:
    """Each row's max as a thread's ``fmaxf`` chain from -inf computes it: NaN skipped (an all-NaN row gives
    -inf) and -0 below +0."""
    x = np.where(np.isnan(x), np.float32(-np.inf), np.asarray(x, np.float32))
    b = np.ascontiguousarray(x).view(np.int32).astype(np.int64)
    key = np.where(b < 0, -(b & 0x7FFFFFFF) - 1, b)              # the float order, -0 < +0
    return np.take_along_axis(x, key.argmax(axis=1)[:, None], axis=1)[:, 0]


def _atomic_max(start: np.ndarray, partials: np.ndarray) -> np.ndarray:
    """``atomicMaxFloat`` of each row's thread partials (rows, threads) onto ``start``: an int max of the bits for
    a value >= 0, an unsigned min otherwise.  Order-independent for non-NaN values (a thread's partial is an
    ``fmaxf`` from -inf, never NaN): the float max, except that a -0.0 partial (bits 0x80000000, the int
    minimum) never lands."""
    bits = np.ascontiguousarray(partials, np.float32).view(np.uint32)
    live = np.where(bits == np.uint32(0x80000000), np.float32(-np.inf), partials)
    return np.fmax(start, np.fmax.reduce(live, axis=1)).astype(np.float32)


def memeff_forward(q, k, v, *, is_causal: bool = False, scale=None,
                   trace: "Trace | None" = None) -> tuple[np.ndarray, np.ndarray]:
    """The memory-efficient backend's forward (``fmha_cutlassF_bf16_aligned_64x{64,128}_rf_sm80``, read from
    torch 2.11's kernel_forward.h and its sm_90 SASS) on ``q`` (Sq, D), ``k`` and ``v`` (Sk, D) of one batch
    and head: ``(o, lse float32)``; bit for bit with the recordings (fixtures/attention/efficient.npz).

    Per 64-query block, key blocks ascending (causal: up to the block's last query): ``S`` a chain of
    ``mma.sync.m16n8k8`` fused dots; ``u = rn(rn(scale·S)·log2e)`` (causal mask between the two products);
    the row max of each thread's 8 columns per 32-column warp tile, merged by shared-memory atomics;
    ``s = s·exp2f(m_old − m)`` when the max grew (O too, after the first block); ``p = exp2f(rn(u − m))``;
    each lane's 8 columns summed from 0, the quad ``(t0 + t1) + (t2 + t3)``, then ``s + W0 + W1 (+ W2 + W3)``
    over the warp tiles; ``O += rn16(p)·V`` (k8 chain, keys ascending, padded to 32).  The end:
    ``o = rn16(O · rcp.rn(s))``, ``lse = rn(m / log2e) + logf(s)`` (m -inf -> 0, s 0 -> 1); rows past Sq of
    the padded LSE are +inf."""
    q, k, v = _check_qkv(q, k, v, MEMEFF_TRAITS)
    (Sq, D), Sk = q.shape, k.shape[0]
    bq, bk = MEMEFF_TRAITS[D]
    sc = np.float32(1.0 / math.sqrt(D) if scale is None else scale)
    o = np.zeros((Sq, D), q.dtype)
    lse = np.zeros(Sq, np.float32)
    col = np.arange(bk)
    lane = _thread_of_column(bk)                             # the quad lane holding each column of a warp tile
    wcol = col // 32                                         # the warp tile (32 columns) of each column
    for m0 in range(0, Sq, bq):
        rows = np.arange(m0, min(m0 + bq, Sq))
        tr = trace if trace is not None and trace.row in rows else None
        nk = min(m0 + bq, Sk) if is_causal else Sk
        mi = np.full(rows.size, -np.inf, np.float32)
        sp = np.zeros(rows.size, np.float32)
        acc = np.zeros((rows.size, D), np.float32)
        for j, j0 in enumerate(range(0, nk, bk)):
            cols = j0 + col
            valid = cols < nk
            kb = np.zeros((bk, D), k.dtype)
            vb = np.zeros((bk, D), v.dtype)
            have = cols < Sk
            kb[have], vb[have] = k[cols[have]], v[cols[have]]
            x = _chain8(q[rows], np.ascontiguousarray(kb.T), np.zeros((rows.size, bk), np.float32))
            t = mul_f32(x, sc)
            if is_causal:
                t = np.where(cols[None, :] > rows[:, None], np.float32(-np.inf), t)
            u = mul_f32(t, _LOG2E_F)
            uv = np.where(valid[None, :], u, np.float32(-np.inf))
            parts = np.stack([_fmnmx_max(uv[:, (wcol == w) & (lane == ln)])
                              for w in range(bk // 32) for ln in range(4)], axis=1)
            m_prime = mi
            m_new = _atomic_max(mi, parts)
            changed = m_prime < m_new
            with np.errstate(invalid="ignore"):
                r = np.where(changed, spelled_f32("cuda:exp2f(x)", add_f32(m_prime, -m_new)), np.float32(1))
            sp = np.where(changed, mul_f32(sp, r), sp)
            if j:
                acc = mul_f32(acc, r[:, None])
            m_use = np.where(m_new == -np.inf, np.float32(0), m_new)
            with np.errstate(invalid="ignore"):
                p = np.where(valid[None, :], spelled_f32("cuda:exp2f(x)", add_f32(u, -m_use[:, None])),
                             np.float32(0))
            total = sp
            for w in range(bk // 32):                     # each lane from 0, then (t0 + t1) + (t2 + t3)
                t4 = _lane_sums(p[:, 32 * w:32 * (w + 1)], np.zeros((rows.size, 4), np.float32))
                total = add_f32(total, add_f32(add_f32(t4[:, 0], t4[:, 1]), add_f32(t4[:, 2], t4[:, 3])))
            sum_before = sp
            sp = total
            kk = -(-int(valid.sum()) // 32) * 32                 # the PV chain runs whole 32-key steps
            pb = _round(p, q.dtype)
            before = acc.copy() if tr is not None else None
            acc = _chain8(np.ascontiguousarray(pb[:, :kk]), np.ascontiguousarray(vb[:kk]), acc)
            if tr is not None:
                i = tr.at(rows)
                tr.step(block=j, cols=cols, s=t[i], masked=(~valid).sum() + (np.isneginf(t[i]) & valid).sum(),
                        m_prev=m_prime[i] if j else None, m=m_new[i], rescale=r[i] if j else None, p=p[i],
                        p_rounded=pb[i], v=vb[:, tr.col], sum_before=sum_before[i], sum_after=sp[i],
                        acc_before=before[i, tr.col], acc_after=acc[i, tr.col])
            mi = m_new
        denom = np.where(sp == 0, np.float32(1), sp)
        with np.errstate(all="ignore"):
            alpha = spelled_f32("cuda:1.0f / x", denom)
            out = mul_f32(acc, alpha[:, None])
            o[rows] = _round(out, q.dtype)
            m0v = np.where(mi == -np.inf, np.float32(0), mi)
            lse[rows] = add_f32(spelled_f32("cuda:x / y", m0v, np.broadcast_to(_LOG2E_F, m0v.shape)),
                                spelled_f32("cuda:logf(x)", denom))
        if tr is not None:
            i = tr.at(rows)
            tr.end.update(kernel="fmha_cutlassF (mem-efficient)", total=float(sp[i]), lanes=[],
                          acc=float(acc[i, tr.col]), out_f32=float(out[i, tr.col]),
                          out=float(o[tr.row, tr.col].astype(np.float32)), lse=float(lse[tr.row]))
    return o, lse


#: FlexAttention (torch 2.9-2.11) defaults on sm_90 for bf16: head dim -> (BLOCK_M, BLOCK_N, num_warps)
FLEX_DEFAULTS = {64: (128, 128, 4), 128: (128, 64, 8)}
#: the same for FP8 e4m3 q, k, v (recorded with torch 2.11: 64 x 64 and 4 warps at both head dims)
FLEX_FP8_DEFAULTS = {64: (64, 64, 4), 128: (64, 64, 4)}
_RCP_LN2 = np.float32(1.44269504)                            # the template's RCP_LN2 constexpr (0x3FB8AA3B)


SPARSE_BLOCK = 128                                           # create_block_mask's default BLOCK_SIZE
#: Inductor compiles FlexAttention with fewer queries than this to its flex_decoding template instead (split-KV
#: partials in 2-warp mma.sync kernels, then Inductor reductions combine them): recorded, not modelled
FLEX_DECODE_BELOW = 128
_LARGE_SPARSE_BLOCK = 1 << 30                                # the block mask of a call without one


def flex_kv_order(Sq: int, Sk: int, block_m: int, block_n: int, mask=None, sparse_q: int = SPARSE_BLOCK,
                  sparse_kv: int = SPARSE_BLOCK) -> list[tuple[list[int], list[int]]]:
    """Per BLOCK_M row block, the BLOCK_N key blocks FlexAttention's forward runs: (partial, full), each in the
    order run.  ``mask(q_idx, kv_idx)`` (numpy index grids -> bool) is the mask_mod of create_block_mask, which
    classifies sparse blocks (``sparse_q`` x ``sparse_kv`` of the Sq x Sk mask padded with False) as partial
    (some entries kept) or full (all kept), in ascending order; without a mask the call's block mask is one huge
    partial block.  Each sparse block runs as ``sparse_kv / BLOCK_N`` key blocks, and each of the two loops
    stops after ``min(blocks · that, max(⌈Sk / BLOCK_N⌉, 1))`` key blocks (``block_n_end``)."""
    n_end_cap = max(-(-Sk // block_n), 1)
    out = []
    for m0 in range(0, Sq, block_m):
        if mask is None:
            lists = [[0], []]
            skv = _LARGE_SPARSE_BLOCK
        else:
            skv = sparse_kv
            r = m0 // sparse_q
            qi = np.arange(r * sparse_q, (r + 1) * sparse_q)[:, None]
            nkv = -(-Sk // sparse_kv)
            lists = [[], []]
            for c in range(nkv):
                ki = np.arange(c * sparse_kv, (c + 1) * sparse_kv)[None, :]
                m = np.broadcast_to(np.asarray(mask(qi, ki), bool), (qi.shape[0], ki.shape[1])) & \
                    (qi < Sq) & (ki < Sk)            # the evaluated mask, padded with False
                if m.all():
                    lists[1].append(c)
                elif m.any():
                    lists[0].append(c)
        mult = skv // block_n
        row = []
        for blocks in lists:
            end = min(len(blocks) * mult, n_end_cap)
            subs = [c * mult + t for c in blocks for t in range(mult)][:end] if mult < 1 << 20 else \
                list(range(end))
            row.append(subs)
        out.append((row[0], row[1]))
    return out


def _causal(qi, ki):
    return qi >= ki


def flex_forward(q, k, v, *, is_causal: bool = False, scale=None, block_m=None, block_n=None,
                 score_mod=None, is_divisible=None,
                 trace: "Trace | None" = None) -> tuple[np.ndarray, np.ndarray]:
    """FlexAttention's forward template (torch 2.11; ``is_causal``: the block mask of ``q_idx >= kv_idx``) on
    ``q`` (Sq, D), ``k`` and ``v`` (Sk, D) bf16 or f16 of one batch and head, as read from the template
    (torch/_inductor/kernel/flex/templates) and from Triton 3.6's PTX and SASS of the same loop:
    ``(o, lse float32 natural log)``.  ``score_mod(qk, scale, q_idx, kv_idx)``: the unscaled float32 dot
    (rows, cols), SM_SCALE and the index grids -> the float32 scores (the identity is ``rn(qk·scale)``; a
    ``qk·scale ± x`` is one FMA, as LLVM contracts it).  ``is_divisible``: the template's IS_DIVISIBLE (default
    Inductor's rule: Sq and Sk multiples of 128).  e4m3 q, k, v: both dots are k32 e4m3 wgmma chains, P and the
    output go through ``cvt.rn.satfinite.e4m3x2.f32``, 64 x 64 tiles (:data:`FLEX_FP8_DEFAULTS`).  Bit for bit
    with the recordings (fixtures/attention/flex.npz).

    Per key block: ``s = rn(dot · SM_SCALE)`` (the dot a wgmma chain), or the score_mod; out-of-range
    (IS_DIVISIBLE False) and masked (a partial block of a mask) entries ``-inf``; ``t = rn(s·RCP_LN2)``; the
    row max of t merged with ``m_i``; ``alpha = ex2(m_i − m)``; ``p = ex2(rn(t − m))`` where a ``tl.where``
    stands between the product and the subtraction (LLVM hoists the multiply above the select), else
    ``ex2(fma(s, RCP_LN2, −m))``; ``l_i = fma(l_i, alpha, tl.sum(p))``; ``acc = acc·alpha`` then
    ``acc += rn(p) · v``.  At the end ``acc / l_i`` (div.full), ``lse = (m_i + log2 l_i)·ln 2``.  Key blocks
    in :func:`flex_kv_order`'s order."""
    q, k, v = _check_qkv(q, k, v, FLEX_DEFAULTS, tuple(_MMA))
    (Sq, D), Sk = q.shape, k.shape[0]
    dm, dn, _ = (FLEX_FP8_DEFAULTS if q.dtype.itemsize == 1 else FLEX_DEFAULTS)[D]
    bm, bn = block_m or dm, block_n or dn
    sm = np.float32(1.0 / math.sqrt(D) if scale is None else scale)
    divisible = (Sq % SPARSE_BLOCK == 0 and Sk % SPARSE_BLOCK == 0) if is_divisible is None else bool(is_divisible)
    o = np.zeros((Sq, D), q.dtype)
    lse = np.zeros(Sq, np.float32)
    order = flex_kv_order(Sq, Sk, bm, bn, _causal if is_causal else None)
    for (partial, full), m0 in zip(order, range(0, Sq, bm)):
        rows = np.arange(m0, min(m0 + bm, Sq))
        tr = trace if trace is not None and trace.row in rows else None
        acc = np.zeros((rows.size, D), np.float32)
        m_i = np.full(rows.size, -np.inf, np.float32)
        l_i = np.zeros(rows.size, np.float32)
        for n, is_full in [(n, False) for n in partial] + [(n, True) for n in full]:
            kb, vb, cols, ok = _key_block(k, v, n, bn)
            qk = _chain(q[rows], np.ascontiguousarray(kb.T), np.zeros((rows.size, bn), np.float32))
            with np.errstate(invalid="ignore", over="ignore"):
                s = mul_f32(qk, sm) if score_mod is None else \
                    np.asarray(score_mod(qk, sm, rows[:, None], cols[None, :]), np.float32)
            masked = np.broadcast_to(~ok[None, :], s.shape)
            selected = not divisible                        # the CHECK_BLOCK_BOUNDARY where
            if is_causal and not is_full:                   # the mask_mod where of a partial block
                masked = masked | ~_causal(rows[:, None], cols[None, :])
                selected = True
            s = np.where(masked, np.float32(-np.inf), s)
            with np.errstate(invalid="ignore"):
                t = mul_f32(s, _RCP_LN2)
                m_ij = np.fmax(m_i, np.fmax.reduce(t, axis=1)).astype(np.float32)
                mm = np.where(m_ij == -np.inf, np.float32(0), m_ij)
                alpha = spelled_f32("triton:tl.exp2(x)", add_f32(m_i, -mm))
                if selected:
                    p = spelled_f32("triton:tl.exp2(x)", add_f32(t, np.broadcast_to(-mm[:, None], s.shape)))
                else:
                    p = spelled_f32("triton:tl.exp2(x)", fma_f32_array(s, np.broadcast_to(_RCP_LN2, s.shape),
                                                                       np.broadcast_to(-mm[:, None], s.shape)))
                lanes = _lane_sums(p)
                l_prev = l_i
                l_i = fma_f32_array(l_i, alpha, _quad(lanes))   # tl.sum: Triton 3.6's PTX order
                acc = mul_f32(acc, alpha[:, None])
            before = acc.copy() if tr is not None else None
            acc = _chain(_round(p, q.dtype), vb, acc)
            if tr is not None:
                j = tr.at(rows)
                tr.step(block=n, cols=cols, s=s[j], masked=masked[j].sum(), m_prev=m_i[j], m=m_ij[j],
                        rescale=alpha[j], p=p[j], p_rounded=_round(p[j], q.dtype), v=vb[:, tr.col],
                        sum_before=l_prev[j], sum_after=l_i[j], lanes=lanes[j], acc_before=before[j, tr.col],
                        acc_after=acc[j, tr.col])
            m_i = m_ij
        l_i = np.where(l_i == 0, np.float32(1), l_i)
        with np.errstate(all="ignore"):
            out = spelled_f32("triton:x / y", acc, np.broadcast_to(l_i[:, None], acc.shape))
            o[rows] = _round(out, q.dtype)
            lse[rows] = mul_f32(add_f32(m_i, spelled_f32("triton:tl.log2(x)", l_i)), np.float32(math.log(2.0)))
        if tr is not None:
            j = tr.at(rows)
            tr.end.update(kernel="Inductor's flex_attention template", total=float(l_i[j]), lanes=[],
                          acc=float(acc[j, tr.col]), out_f32=float(out[j, tr.col]),
                          out=float(o[tr.row, tr.col].astype(np.float32)), lse=float(lse[tr.row]))
    return o, lse


_CONSTEXPR = re.compile(r"^\s*([A-Z_][A-Z0-9_]*)\s*:\s*tl\.constexpr\s*=\s*(.+?)\s*$", re.M)


def _flex_kernel(code: str) -> str:
    """The source of the FlexAttention kernel in Inductor's generated ``code`` (from its ``def`` up to the next
    top-level line), refusing code without exactly one."""
    starts = [m.start() for m in re.finditer(r"^def (triton_tem_\w+)\(", code, re.M)]
    if len(starts) != 1:
        raise InputError(f"expected one FlexAttention template kernel (def triton_tem_...) in the code, found "
                         f"{len(starts)}")
    rest = code[starts[0]:]
    end = re.search(r"\n(?=\S)", rest)
    return rest if end is None else rest[:end.start()]


def flex_config(code: str, head_dim: int, causal: bool) -> dict:
    """The keyword arguments of :func:`flex_forward` that Inductor's generated ``code`` of a
    FlexAttention call fixes (BLOCK_M, BLOCK_N, SM_SCALE; the score_mod), after checking it is a template the
    recordings established: no PRESCALE_QK, the head dim, the block mask's 128 blocks (or none) and
    HAS_FULL_BLOCKS as ``causal`` implies."""
    kern = _flex_kernel(code)
    const = {m.group(1): m.group(2) for m in _CONSTEXPR.finditer(kern)}
    need = ("BLOCK_M", "BLOCK_N", "SM_SCALE", "PRESCALE_QK", "QK_HEAD_DIM", "HAS_FULL_BLOCKS")
    missing = [n for n in need if n not in const]
    if missing:
        raise InputError(f"the code's template kernel sets no {', '.join(missing)}: not a FlexAttention forward")
    if "SPLIT_KV" in const:
        raise InputError("the code is Inductor's flex_decoding template (split-KV partials and a combine), which "
                         "wgref does not model")
    if const["PRESCALE_QK"] != "False":
        raise InputError("PRESCALE_QK=True (Q pre-scaled by SM_SCALE·log2 e) was not recorded")
    if int(const["QK_HEAD_DIM"]) != head_dim:
        raise InputError(f"the code was generated for head dim {const['QK_HEAD_DIM']}, the inputs have {head_dim}")
    if (const["HAS_FULL_BLOCKS"] == "True") != causal:
        raise InputError(f"the code's block mask {'has' if const['HAS_FULL_BLOCKS'] == 'True' else 'has no'} full "
                         f"blocks, which the {'causal' if causal else 'non-causal'} mask does not give")
    for n in ("SPARSE_Q_BLOCK_SIZE", "SPARSE_KV_BLOCK_SIZE"):
        if n in const and int(const[n]) not in (SPARSE_BLOCK, _LARGE_SPARSE_BLOCK):
            raise InputError(f"{n} {const[n]} was not recorded (recorded: {SPARSE_BLOCK}, none)")
    if const.get("ROWS_GUARANTEED_SAFE", "False") != "False":
        raise InputError("ROWS_GUARANTEED_SAFE=True (no -inf guard on the row max) was not recorded")
    out = {"block_m": int(const["BLOCK_M"]), "block_n": int(const["BLOCK_N"]),
           "scale": float(const["SM_SCALE"]), "score_mod": flex_score_mod(code)}
    if "IS_DIVISIBLE" in const:
        out["is_divisible"] = const["IS_DIVISIBLE"] == "True"
    return out


def flex_score_mod(code: str):
    """The score_mod of Inductor's generated FlexAttention ``code`` as ``(qk, scale, q_idx, kv_idx) -> s`` in
    float32 (``qk`` the unscaled dot; ``qk·scale ± x`` one FMA), or None for the identity; refused unless every
    line is one the recordings established."""
    m = re.search(r"n = get_bounded_indices\(offs_n[^\n]*\n(.*?)\n\s*if CHECK_BLOCK_BOUNDARY:", code, re.S)
    if m is None:
        raise InputError("no score modification section (after get_bounded_indices) in the code's forward block")
    lines = [ln.strip() for ln in m.group(1).splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return _score_program(lines)


_SCORE_LINE = re.compile(r"^(tmp\d+|post_mod_scores) = (.+)$")
_OPERAND = r"(tmp\d+|qk|m|n|\(qk\)|\(m\)|\(n\))"


def _score_program(lines: list[str]):
    """The score_mod lines as a function, or None when they only pass ``qk`` through."""
    prog = []
    for ln in lines:
        mm = _SCORE_LINE.match(ln)
        if mm is None:
            raise InputError(f"score_mod line {ln!r} is not one the recordings established")
        dst, expr = mm.groups()
        for kind, pat in (("copy", rf"^{_OPERAND}$"), ("binary", rf"^{_OPERAND} ([-+*]) {_OPERAND}$"),
                          ("tofloat", rf"^{_OPERAND}\.to\(tl\.float32\)$")):
            em = re.match(pat, expr)
            if em:
                prog.append((dst, kind, em.groups()))
                break
        else:
            raise InputError(f"score_mod line {ln!r} is not one the recordings established")
    if all(kind == "copy" for _, kind, _ in prog):
        return None

    def run(qk, scale, qi, ki):
        product = ("product",)                      # qk·SM_SCALE, not yet rounded: LLVM contracts it into an add
        env = {"qk": product, "m": np.asarray(qi, np.int32), "n": np.asarray(ki, np.int32)}

        def value(x):
            x = env[x.strip("()")]
            return mul_f32(qk, np.float32(scale)) if x is product else x

        for dst, kind, g in prog:
            if kind == "copy":
                env[dst] = env[g[0].strip("()")]
            elif kind == "tofloat":
                env[dst] = np.asarray(value(g[0])).astype(np.float32)
            else:
                a_, op, b_ = env[g[0].strip("()")], g[1], env[g[2].strip("()")]
                if op in "+-" and (a_ is product) != (b_ is product):
                    other = value(g[2] if a_ is product else g[0])
                    sign = np.float32(-1 if (op == "-" and b_ is product) else 1)
                    addend = -np.asarray(other, np.float32) if (op == "-" and a_ is product) else other
                    addend = np.broadcast_to(np.asarray(addend, np.float32), qk.shape)
                    env[dst] = fma_f32_array(qk * sign, np.broadcast_to(np.float32(scale), qk.shape), addend)
                    continue
                x, y = value(g[0]), value(g[2])
                if np.asarray(x).dtype == np.float32 or np.asarray(y).dtype == np.float32:
                    x, y = np.broadcast_arrays(np.asarray(x, np.float32), np.asarray(y, np.float32))
                    env[dst] = (mul_f32 if op == "*" else add_f32)(x, y if op != "-" else -y)
                else:
                    with np.errstate(over="ignore"):
                        env[dst] = {"+": np.add, "-": np.subtract, "*": np.multiply}[op](x, y).astype(np.int32)
        return np.broadcast_to(np.asarray(value("post_mod_scores"), np.float32), qk.shape)

    return run
