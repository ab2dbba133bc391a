"""JAX/XLA's GPU dot (``jnp.dot`` under ``jax.jit``) as refmodel computes it, from the optimized HLO.

XLA (JAX 0.11, the H200's CUDA 13 plugin) compiles a bf16/f16 ``dot`` into a Triton GEMM fusion
(``%gemm_fusion_dot_computation``); for a long K it splits K itself: the fusion's operands are reshaped
to ``[M, S, K/S]`` and ``[S, K/S, N]`` with the split as a batch dimension, the fusion writes f32
partials ``f32[S, M, N]``, and a separate ``reduce(..., dimensions={0})`` adds them before the
``convert`` to the output type.  :func:`xla_schedule` reads S and the chunk from that HLO; inside a
chunk the dot is one tensor-core chain (``wgmma m64nNk16``, the chain-break probe on the H200 saw
breaks exactly at the chunk edges).

The order in which XLA's reduction kernel adds the S partials is not in the HLO (the reduction
emitter picks its thread tiling by shape).  It was inferred on the H200 for the recorded calls
(:data:`REDUCE_ORDERS`, from ``fixtures/schedules/xla_*``; ``tests/test_xla.py`` checks the table
against those fixtures): for any other (S, M, N, dtype) :func:`xla_dot` refuses rather than guess —
infer it (``wgref infer xla --shape M,N,K``) and pass ``reduce=``.
"""

from __future__ import annotations

import re
from typing import Optional

import numpy as np

from ..errors import InputError
from .schedule import Schedule

# (dtype, S, M, N) -> (reduce order, out_nan): inferred on the H200, 10^6 outputs each (fixtures/schedules)
REDUCE_ORDERS = {
    ("f16", 64, 64, 64): ("lanes32-strided-down", None),
    ("bf16", 32, 128, 128): ("lanes16-strided-down", "canonical"),
    ("bf16", 16, 256, 128): ("sequential", "canonical"),
}
INSTR = {"bf16": "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16",
         "f16": "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"}

_FUSION = re.compile(r"%\S*gemm_fusion\S*_computation\s*\(parameter_0:\s*(\w+)\[([\d,]*)\],\s*parameter_1:\s*"
                     r"(\w+)\[([\d,]*)\]\)\s*->\s*(\w+)\[([\d,]*)\]")
_DOT = re.compile(r"dot\(%parameter_0,\s*%parameter_1\),\s*(lhs_batch_dims=\{(\d*)\},\s*)?lhs_contracting_dims=\{(\d+)\}")
_REDUCE = re.compile(r"reduce\(%\S+,\s*%\S+\),\s*dimensions=\{(\d+)\}")


def parse_split(hlo: str) -> dict:
    """What the optimized HLO says of the dot: ``{"dtype", "M", "N", "K", "splits", "chunk"}``.
    One clear error when the text has no Triton GEMM fusion of the form above."""
    if not isinstance(hlo, str) or not hlo.strip():
        raise InputError("hlo must be the optimized HLO text (jax.jit(f).lower(a, b).compile().as_text())")
    m = _FUSION.search(hlo)
    d = _DOT.search(hlo)
    if m is None or d is None:
        raise InputError("the HLO has no Triton GEMM fusion (%gemm_fusion_dot_computation with a dot): "
                         "refmodel knows only that form of XLA's dot")
    dt = {"bf16": "bf16", "f16": "f16"}.get(m.group(1))
    if dt is None or m.group(3) != m.group(1):
        raise InputError(f"the fusion's operands must both be bf16 or f16, got {m.group(1)} and {m.group(3)}")
    lhs = [int(x) for x in m.group(2).split(",") if x]
    rhs = [int(x) for x in m.group(4).split(",") if x]
    out = [int(x) for x in m.group(6).split(",") if x]
    contract = int(d.group(3))
    if d.group(2):                           # split-K: lhs [M, S, K/S] (batch dim 1), out f32[S, M, N]
        b = int(d.group(2))
        r = _REDUCE.search(hlo)
        if len(lhs) != 3 or len(out) != 3 or m.group(5) != "f32" or r is None or int(r.group(1)) != 0:
            raise InputError("the split-K fusion must write f32[S, M, N] partials reduced over dimension 0")
        S, chunk = lhs[b], lhs[contract]
        M = lhs[[i for i in range(3) if i not in (b, contract)][0]]
        return {"dtype": dt, "M": M, "N": out[2], "K": S * chunk, "splits": S, "chunk": chunk}
    if len(lhs) != 2 or len(rhs) != 2 or len(out) != 2:
        raise InputError(f"an unsplit GEMM fusion must be [M, K] x [K, N], got {lhs} x {rhs}")
    M, K = (lhs[0], lhs[1]) if contract == 1 else (lhs[1], lhs[0])
    return {"dtype": dt, "M": M, "N": out[1], "K": K, "splits": 1, "chunk": K}


def xla_schedule(hlo: str, *, reduce: Optional[str] = None, out_nan: Optional[str] = None) -> Schedule:
    """The :class:`Schedule` of the dot that ``hlo`` compiles: chunks and split count from the HLO, the
    partials' reduction order from :data:`REDUCE_ORDERS` (or ``reduce=``/``out_nan=``); refuses an
    unrecorded split-K reduction rather than guess."""
    p = parse_split(hlo)
    S = p["splits"]
    src = {"library": "JAX/XLA", "evidence": "the optimized HLO", "shape": f"{p['M']}x{p['N']}x{p['K']}",
           "target": "xla", "dtype": p["dtype"], "out": p["dtype"]}
    if S == 1:
        return Schedule(INSTR[p["dtype"]], out_dtype=p["dtype"], out_nan=out_nan, source=src)
    if reduce is None:
        known = REDUCE_ORDERS.get((p["dtype"], S, p["M"], p["N"]))
        if known is None:
            raise InputError(f"XLA's reduction of {S} split-K partials of a {p['M']}x{p['N']} {p['dtype']} dot was "
                             f"not recorded (its order is not in the HLO): infer it (wgref infer xla --shape "
                             f"{p['M']},{p['N']},{p['K']}) and pass reduce=")
        reduce, out_nan = known
        src["evidence"] += f" + the reduction order inferred on the H200 for {S} partials of {p['M']}x{p['N']}"
    return Schedule(INSTR[p["dtype"]], splits=S, split_align=p["chunk"], reduce=reduce, out_dtype=p["dtype"],
                    out_nan=out_nan, source=src)


def xla_dot(a, b, *, hlo: str, reduce: Optional[str] = None, out_nan: Optional[str] = None) -> np.ndarray:
    """D of ``jnp.dot(a, b)`` as the H200 computes it under the optimized HLO ``hlo`` (module doc)."""
    s = xla_schedule(hlo, reduce=reduce, out_nan=out_nan)
    a = np.asarray(a)
    b = np.asarray(b)
    want = s.source["shape"]
    if f"{a.shape[0]}x{b.shape[1]}x{a.shape[1]}" != want or a.shape[1] != b.shape[0]:
        raise InputError(f"a and b must be the HLO's shapes (M x N x K = {want}), got {a.shape} and {b.shape}")
    return s.run(a, b)


__all__ = ["xla_dot", "xla_schedule", "parse_split", "REDUCE_ORDERS"]
