"""The FP8 GEMM kernel of gpu/kernels/gemm_fp8.py as refmodel sees it, and the replayer of its fixtures
(kind ``gemm_kernel``, recorded by ``python -m gpu.record.gemm``)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ..dtypes import bits_of
from ..errors import InputError
from .replay import Result, _count, replayer

INSTR = "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"
BN, BK = 128, 128


def kernel_reference(a, b_nk, scale_a=None, scale_b=None, *, promote: bool = True, out: str = "bf16",
                     tensor_scales: bool = False) -> np.ndarray:
    """refmodel.gemm with the kernel's schedule: wgmma m64n128k32 e4m3 chains along K; with
    ``promote`` each K block of 128 (4 instructions) starts a fresh partial sum promoted into f32
    with ``fma(RN(sa[row, kb] * sb[kb, col // 128]), partial, acc)``; then bf16 (RNE) or f32.
    ``tensor_scales`` (with ``promote``): one float each, torch._scaled_mm's precise recipe
    (:func:`refmodel.numerics.scaled_mm.scaled_mm`: ``acc += partial``, ``D = RN(RN(sa * sb) * acc)``).
    Inputs are zero-padded to whole instruction tiles and the result cropped (padding rows and
    columns are independent of the kept ones)."""
    from ..numerics.gemm import gemm
    from ..numerics.scaled_mm import scaled_mm

    a = np.asarray(a).view(ml_dtypes.float8_e4m3fn)
    b_nk = np.asarray(b_nk).view(ml_dtypes.float8_e4m3fn)
    M, K = a.shape
    N = b_nk.shape[0]
    Mp, Np = -(-M // 64) * 64, -(-N // BN) * BN
    ap = np.zeros((Mp, K), a.dtype)
    ap[:M] = a
    if tensor_scales:
        if not promote:
            raise InputError("tensor_scales needs promote=True")
        one = np.float32(1)
        sa = one if scale_a is None else np.float32(np.asarray(scale_a, np.float32).reshape(-1)[0])
        sb = one if scale_b is None else np.float32(np.asarray(scale_b, np.float32).reshape(-1)[0])
        bnp = np.zeros((Np, K), a.dtype)
        bnp[:N] = b_nk
        d = scaled_mm(ap.view(np.uint8), bnp.view(np.uint8), sa, sb,
                      out_dtype="bf16" if out == "bf16" else "f32", use_fast_accum=False)
        return np.ascontiguousarray(d[:M, :N])
    bp = np.zeros((K, Np), a.dtype)
    bp[:, :N] = b_nk.T
    kw: dict[str, Any] = {}
    if promote:
        KB = K // BK
        sap = np.ones((Mp, KB), np.float32)
        sap[:M] = np.ones((M, KB), np.float32) if scale_a is None else scale_a
        sbp = np.ones((KB, Np // BN), np.float32) if scale_b is None else np.asarray(scale_b, np.float32)
        kw = {"promote_every": 4, "scale_a": sap, "scale_b": sbp}
    d = gemm(ap, bp, instr=INSTR, out_dtype="bf16" if out == "bf16" else None, **kw)
    return np.ascontiguousarray(d[:M, :N])


@replayer("gemm_kernel")
def replay_gemm_kernel(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    M, N, K = meta["M"], meta["N"], meta["K"]
    for k, shp in (("a", (M, K)), ("b_nk", (N, K)), ("d", (M, N))):
        if arrays[k].shape != shp:
            raise ValueError(f"gemm fixture: {k} has shape {arrays[k].shape}, meta implies {shp}")
    ref = kernel_reference(arrays["a"], arrays["b_nk"], arrays["scale_a"] if meta["promote"] else None,
                           arrays["scale_b"] if meta["promote"] else None, promote=meta["promote"], out=meta["out"],
                           tensor_scales=meta.get("recipe") == "tensor")
    return _count(bits_of(ref), arrays["d"], f"gemm {M}x{N}x{K}", {})


__all__ = ["kernel_reference", "INSTR"]
