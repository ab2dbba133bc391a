"""A golden model of ``torch._scaled_mm`` (cuBLASLt FP8 GEMM) on Hopper, established on the H200.

Recorded outputs of torch 2.11 / CUDA 13.0 on an H200 are reproduced bit for bit
(fixtures/torch) by this schedule:

* the product runs as a chain of e4m3 ``wgmma ... k32.f32`` instructions along K (each
  instruction's rounded D the next one's C, see :mod:`refmodel.accumulate`);
* ``use_fast_accum=False``: every 4 instructions (K = 128) the partial sum is added
  into a float32 accumulator (``acc += partial``, the first instruction of each stage
  with scale-d = 0); ``use_fast_accum=True``: no promotion at all, the whole K stays in
  the tensor core's accumulator;
* the scales are applied once, in the epilogue: per-tensor ``D = RN(RN(sa * sb) * acc)``;
  row-wise (``scale_a`` (M, 1), ``scale_b`` (1, N)) ``D = RN(sa[m] * RN(sb[n] * acc))``;
* then RNE to the output dtype (float32, bfloat16 or float16).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..errors import DTypeError, InputError
from ..validate import _describe, as_array, as_float32, check_flag
from .fp8 import round_to_format
from .gemm import gemm

_OUT = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


def scaled_mm(a, b_nk, scale_a, scale_b, *, out_dtype: str = "bf16", use_fast_accum: bool = False,
              fmt_a: str = "e4m3", fmt_b: str = "e4m3") -> np.ndarray:
    """``torch._scaled_mm(a, b_nk.T, scale_a, scale_b, out_dtype, use_fast_accum)`` on Hopper.

    ``a`` (M, K) and ``b_nk`` (N, K): FP8 codes (uint8) or ml_dtypes float8 arrays;
    scales: float32 scalars (per tensor) or ``scale_a`` (M, 1) with ``scale_b`` (1, N).
    """
    dt = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
    use_fast_accum = check_flag("use_fast_accum", use_fast_accum)
    for nm, f in (("fmt_a", fmt_a), ("fmt_b", fmt_b)):
        if not isinstance(f, str) or f not in dt:
            raise InputError(f"{nm} must be 'e4m3' or 'e5m2', got {_describe(f)}")
    a = as_array("a", a, what="an (M, K) array of FP8 codes")
    b_nk = as_array("b_nk", b_nk, what="an (N, K) array of FP8 codes")
    for nm, x, f in (("a", a, fmt_a), ("b_nk", b_nk, fmt_b)):
        if x.dtype not in (np.dtype(np.uint8), np.dtype(dt[f])):
            raise DTypeError(f"{nm} must be uint8 codes or a {np.dtype(dt[f]).name} array for "
                             f"{nm[0]}'s format {f}, got {x.dtype}")
        if x.ndim != 2:
            raise InputError(f"{nm} must be a 2-D array, got shape {x.shape}")
    if a.shape[1] != b_nk.shape[1]:
        raise InputError(f"a (M, K) and b_nk (N, K) must share K, got {a.shape} and {b_nk.shape}")
    a = a.view(dt[fmt_a]) if a.dtype == np.uint8 else a
    b = np.ascontiguousarray(b_nk.view(dt[fmt_b]) if b_nk.dtype == np.uint8 else b_nk).T
    m, k = a.shape
    n = b.shape[1]
    if not isinstance(out_dtype, str) or out_dtype not in _OUT:
        raise InputError(f"out_dtype must be one of {', '.join(_OUT)}, got {_describe(out_dtype)}")
    if m % 64 or n % 8 or k % 128:
        raise InputError(f"this model covers M % 64 == 0, N % 8 == 0, K % 128 == 0; got {m}x{n}x{k}")
    instr = f"wgmma.mma_async.sync.aligned.m64n8k32.f32.{fmt_a}.{fmt_b}"
    if use_fast_accum:
        acc = gemm(a, np.ascontiguousarray(b), instr=instr).astype(np.float32)
    else:
        acc = gemm(a, np.ascontiguousarray(b), instr=instr, promote_every=4,
                   scale_a=np.float32(1), scale_b=np.float32(1))
    sa = as_float32("scale_a", scale_a)
    sb = as_float32("scale_b", scale_b)
    with np.errstate(all="ignore"):
        if sa.ndim == 0 and sb.ndim == 0:
            d = np.float32(sa * sb) * acc
        elif sa.shape == (m, 1) and sb.shape == (1, n):
            d = sa * (sb * acc).astype(np.float32)
        else:
            raise InputError(f"scales must be two scalars, or scale_a (M, 1) and scale_b (1, N); "
                             f"got {sa.shape} and {sb.shape}")
    d = d.astype(np.float32)
    if out_dtype == "f32":
        return d
    return round_to_format(d, out_dtype, saturate=False).view(_OUT[out_dtype])
