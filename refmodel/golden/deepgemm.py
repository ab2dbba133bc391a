"""DeepGEMM's SM90 FP8 GEMM (``deep_gemm.fp8_gemm_nt``, DeepGEMM 2.6.1) as refmodel computes it.

Per DeepGEMM's source (``impls/sm90_fp8_gemm_1d2d.cuh``) and confirmed on the H200
(``fixtures/deepgemm``, ``python -m gpu.record.deepgemm``): each 128-wide K block is a chain of 4
``wgmma.m64nNk32.f32.e4m3.e4m3`` into a fresh accumulator, then on the CUDA cores
``final = fma(sa[m, kb] * sb[kb, n], accum, final)`` (``promote_op="fma"``: one product of the two
scales, then one fused multiply-add; the other two orders the recording rules out), and the bf16
output is ``cvt.rn``.  ``sfa`` is one float32 scale per row and 128 of K (1 x 128), ``sfb`` one per
128 x 128 block of B (N, K), as DeepGEMM's ``per_token_cast_to_fp8`` / ``per_block_cast_to_fp8`` make.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..errors import InputError
from ..numerics.gemm import gemm

INSTR = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"
PROMOTE_OP = "fma"


def fp8_gemm_nt(a8: np.ndarray, sfa: np.ndarray, b8: np.ndarray, sfb: np.ndarray, *,
                promote_op: str = PROMOTE_OP) -> np.ndarray:
    """bf16 D (M, N) of ``deep_gemm.fp8_gemm_nt((a8, sfa), (b8, sfb), d)``: ``a8`` (M, K) and ``b8``
    (N, K) e4m3 codes (uint8) or float8_e4m3fn, ``sfa`` (M, K/128), ``sfb`` (ceil(N/128), K/128) float32."""
    a8 = np.asarray(a8)
    b8 = np.asarray(b8)
    if a8.ndim != 2 or b8.ndim != 2 or a8.shape[1] != b8.shape[1] or a8.shape[1] % 128:
        raise InputError(f"a8 must be (M, K) and b8 (N, K) with K a multiple of 128, got {a8.shape} and {b8.shape}")
    M, K = a8.shape
    N = b8.shape[0]
    sfa = np.asarray(sfa, np.float32)
    sfb = np.asarray(sfb, np.float32)
    if sfa.shape != (M, K // 128) or sfb.shape != (-(-N // 128), K // 128):
        raise InputError(f"sfa must be (M, K/128) = {(M, K // 128)} and sfb (ceil(N/128), K/128) = "
                         f"{(-(-N // 128), K // 128)}, got {sfa.shape} and {sfb.shape}")
    Mp = -(-M // 64) * 64                      # the model takes M % 64 == 0: zero rows are independent
    ap = np.zeros((Mp, K), np.uint8)
    ap[:M] = a8.view(np.uint8)
    sap = np.ones((Mp, K // 128), np.float32)
    sap[:M] = sfa
    sb = np.repeat(sfb, 128, axis=0)[:N].T.copy()          # (K/128, N): one scale per column
    bk = np.ascontiguousarray(b8.view(np.uint8).T).view(ml_dtypes.float8_e4m3fn)
    d = gemm(ap.view(ml_dtypes.float8_e4m3fn), bk, instr=INSTR, promote_every=4, scale_a=sap, scale_b=sb,
             out_dtype="bf16", promote_op=promote_op)
    return np.asarray(d)[:M]


__all__ = ["fp8_gemm_nt", "INSTR", "PROMOTE_OP"]
