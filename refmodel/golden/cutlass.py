"""Golden model of CUTLASS's Python-DSL (CuTe DSL) Hopper dense GEMM examples, recorded on the H200
from ``nvidia-cutlass-dsl`` 4.8.1 itself (``python -m gpu.record.cutlass``; fixtures/cutlass).

=============================================  ==========================================================
example (CUTLASS ``examples/python/CuTeDSL``)   schedule that reproduces it bit for bit
=============================================  ==========================================================
``hopper/.../dense_gemm.py``                    one wgmma chain over all of K (SS operands, the first
(``HopperWgmmaGemmKernel``)                     instruction with scale-d = 0, ascending K), f32 or f16
                                                accumulator, whatever the tile (64x64 .. 128x256) and
                                                cluster (1x1, 2x1, 1x2); epilogue ``cvt.rn`` to the
                                                output (no ``.satfinite``: overflow to Inf; f16 -> f32
                                                exact)
``hopper/.../dense_gemm_fp8_2xacc.py``          FP8 wgmma chains of ``mma_promotion_interval``
(``mma_promotion_interval`` = p)                instructions, each restarted from 0 and added into a
                                                second f32 accumulator (``add.f32``); recorded with
                                                unit ``scale_a``/``scale_b`` (other scales: not modelled)
=============================================  ==========================================================

So the example's FP8 GEMM without 2xacc has the plain 13-bit-aligned wgmma chain over all of K
(``docs/accumulator.md``): the accuracy loss DeepGEMM's promotion and the 2xacc variant exist to fix.
"""

from __future__ import annotations

from typing import Optional

import ml_dtypes
import numpy as np

from ..errors import DTypeError, InputError
from ..validate import _describe, as_array, strict_options

_IN = {np.dtype(ml_dtypes.float8_e4m3fn): ("e4m3", 32), np.dtype(ml_dtypes.float8_e5m2): ("e5m2", 32),
       np.dtype(ml_dtypes.bfloat16): ("bf16", 16), np.dtype(np.float16): ("f16", 16)}
_OUT = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


@strict_options
def cutlass_dense_gemm(a, b, *, acc_dtype: str = "f32", out_dtype=np.float32,
                       mma_promotion_interval: Optional[int] = None) -> np.ndarray:
    """The output, bit for bit, of CUTLASS's CuTe-DSL Hopper dense GEMM example for ``a`` (M, K) and
    ``b`` (K, N) (e4m3, e5m2, bf16 or f16; both the same dtype), ``acc_dtype`` "f32" or "f16" (f16:
    f16 inputs and FP8 only), stored as ``out_dtype`` (float32, float16, bfloat16).

    ``mma_promotion_interval=p``: the FP8 ``dense_gemm_fp8_2xacc`` example (f32 accumulator) with
    unit scales (as recorded): partial chains of p instructions added into f32.
    M must be a multiple of 64, N of 8, K of the instruction's K (32 FP8, 16 otherwise).
    """
    a = as_array("a", a)
    b = as_array("b", b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise InputError(f"a must be (M, K) and b (K, N), got {a.shape} and {b.shape}")
    if a.dtype != b.dtype or np.dtype(a.dtype) not in _IN:
        raise DTypeError(f"a and b must share one of e4m3, e5m2, bfloat16, float16, got {a.dtype} and {b.dtype}")
    name, kinstr = _IN[np.dtype(a.dtype)]
    if not isinstance(acc_dtype, str) or acc_dtype not in ("f32", "f16") or (acc_dtype == "f16" and name == "bf16"):
        raise InputError(f"acc_dtype must be 'f32', or 'f16' for f16/FP8 inputs, got {_describe(acc_dtype)}")
    try:
        od = np.dtype(out_dtype) if not isinstance(out_dtype, str) and out_dtype is not None else None
    except (TypeError, ValueError):
        od = None
    if od not in _OUT:
        raise InputError(f"out_dtype must be numpy.float32, numpy.float16 or ml_dtypes.bfloat16, got {_describe(out_dtype)}")
    M, K = a.shape
    if M % 64 or b.shape[1] % 8 or K % kinstr:
        raise InputError(f"M must be a multiple of 64, N of 8 and K of {kinstr}, got {M}x{b.shape[1]}x{K}")
    p = mma_promotion_interval
    if p is not None:
        if name not in ("e4m3", "e5m2") or acc_dtype != "f32":
            raise InputError("mma_promotion_interval is the FP8 2xacc example's: e4m3/e5m2 inputs, f32 accumulator")
        if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 1 or (K // kinstr) % p:
            raise InputError(f"mma_promotion_interval must be a positive int dividing K/32 = {K // kinstr}, "
                             f"got {_describe(p)}")
    return cutlass_schedule(name, acc_dtype=acc_dtype, out_dtype=od, mma_promotion_interval=p).run(a, b)


def cutlass_schedule(dtype: str, *, acc_dtype: str = "f32", out_dtype=np.float32,
                     mma_promotion_interval: Optional[int] = None):
    """The :class:`~refmodel.golden.Schedule` of the CuTe-DSL Hopper GEMM example: one wgmma chain over K
    (``acc_dtype`` accumulator), or with ``mma_promotion_interval=p`` (the FP8 2xacc example) chains of p
    instructions added into f32 (mul_add, unit scales); ``cvt.rn`` to ``out_dtype``."""
    from .schedule import Schedule

    kinstr = 32 if dtype in ("e4m3", "e5m2") else 16
    od = np.dtype(out_dtype)
    out = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}.get(od, "bf16")
    return Schedule(f"wgmma.mma_async.sync.aligned.m64n8k{kinstr}.{acc_dtype}.{dtype}.{dtype}",
                    promote_every=None if mma_promotion_interval is None else int(mma_promotion_interval),
                    promote_op="mul_add", out_dtype=out,
                    source={"library": "CUTLASS CuTe DSL 4.8.1 (dense_gemm.py / dense_gemm_fp8_2xacc.py)",
                            "device": "H200", "evidence": "recorded: fixtures/cutlass"})
