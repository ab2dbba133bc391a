"""A golden model of ``torch._scaled_mm`` (cuBLASLt FP8 GEMM) on Hopper, established on the H200.

Recorded outputs of torch 2.11 / CUDA 13.0 on an H200 (fixtures/torch, fixtures/layers) are
reproduced bit for bit by this schedule, for every scaling mode torch runs on sm_90:

* the product runs as chains of ``wgmma ... k32.f32.{a}.{b}`` instructions along K (each
  instruction's rounded D the next one's C, see :mod:`refmodel.numerics.accumulate`);
* ``use_fast_accum=True`` (per tensor and row-wise only): no promotion, the whole K stays in the
  tensor core's accumulator; otherwise every 4 instructions (K = 128) a fresh chain's partial sum
  ``P`` enters a float32 accumulator (``acc`` starts at +0);
* per tensor (``scale_a``, ``scale_b`` scalars): ``acc += P``; epilogue ``D = RN(RN(sa*sb) * acc) + 0``
  (the ``+ 0`` turns a -0 into +0);
* row-wise (``scale_a`` (M, 1), ``scale_b`` (1, N)): ``acc += P``; epilogue
  ``D = RN(sa[m] * RN(sb[n] * acc))``;
* block-wise, DeepSeek style — scales per 1 x 128 or 128 x 128 block, :data:`SCALINGS`: at each
  promotion ``acc = fma(RN(sa*sb), P, acc)`` with the two blocks' scales (1x128 A with 128x128 B,
  and 128x128 A with 1x128 B); ``acc = fma(sb, RN(sa*P), acc)`` for 1x128 A with 1x128 B;
  no epilogue scaling;
* ``bias`` (N,), bf16 for a bf16 output, f16 for an f16 one: ``D = RN(D + float32(bias[n]))``;
* then RNE to the output dtype (float32, bfloat16 or float16; overflow to Inf).

Every float32 operation writes the canonical NaN 0x7FFFFFFF (then cvt to bf16/f16 keeps its top
bits).  Scale shapes are the logical ones: block scales as ``scale_a`` (M, K/128) or
(M/128, K/128) and ``scale_b`` (K/128, N/128) or (K/128, N) — what torch's scale tensors index,
whatever their strides.
"""

from __future__ import annotations

from typing import Optional

import ml_dtypes
import numpy as np

from ..errors import DTypeError, InputError
from ..validate import _describe, as_array, as_float32, check_flag
from .fp8 import round_to_format
from .gemm import gemm
from .gemm import zero_pad as _pad
from .promotion import canonical_nan_f32

_OUT = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
_FP8 = {"e4m3": np.dtype(ml_dtypes.float8_e4m3fn), "e5m2": np.dtype(ml_dtypes.float8_e5m2)}
_BIAS = {"bf16": np.dtype(ml_dtypes.bfloat16), "f16": np.dtype(np.float16)}

#: The scaling modes torch 2.11 runs on sm_90 (its order of preference): name -> (A's blocks, B's blocks)
SCALINGS = {
    "tensor": ("tensor", "tensor"),
    "row": ("row", "row"),
    "block_128x128_1x128": ("128x128", "1x128"),
    "block_1x128_128x128": ("1x128", "128x128"),
    "block_1x128_1x128": ("1x128", "1x128"),
}
#: How each block mode folds a promotion stage into the accumulator (refmodel.numerics.promotion)
BLOCK_PROMOTE_OP = {"block_128x128_1x128": "fma", "block_1x128_128x128": "fma", "block_1x128_1x128": "fma_row_first"}


def scale_shapes(scaling: str, M: int, N: int, K: int) -> tuple[tuple, tuple]:
    """The logical shapes of ``scale_a`` and ``scale_b`` in scaling mode ``scaling`` for a (M, K) x (K, N) GEMM."""
    ga, gb = SCALINGS[scaling]
    kb = -(-K // 128)
    sa = {"tensor": (), "row": (M, 1), "1x128": (M, kb), "128x128": (-(-M // 128), kb)}[ga]
    sb = {"tensor": (), "row": (1, N), "1x128": (kb, N), "128x128": (kb, -(-N // 128))}[gb]
    return sa, sb


def scaling_mode(sa_shape: tuple, sb_shape: tuple, M: int, N: int, K: int) -> str:
    """The scaling mode torch picks for these scale shapes (its order of preference; scales of one
    element are per tensor), or one sentence naming the shapes each mode needs."""
    if int(np.prod(sa_shape)) == 1 and int(np.prod(sb_shape)) == 1:
        return "tensor"
    for mode in SCALINGS:
        if mode != "tensor" and scale_shapes(mode, M, N, K) == (tuple(sa_shape), tuple(sb_shape)):
            return mode
    want = "; ".join(f"{m}: {scale_shapes(m, M, N, K)[0]} and {scale_shapes(m, M, N, K)[1]}" for m in SCALINGS)
    raise InputError(f"scale_a {tuple(sa_shape)} and scale_b {tuple(sb_shape)} match no scaling mode of "
                     f"torch._scaled_mm for {M}x{N}x{K}; the modes take ({want})")


def expand_block_scales(scaling: str, sa: np.ndarray, sb: np.ndarray, M: int, N: int):
    """Block scales as one scale per (row, K block) of A, (M, Kb), and per (K block, column) of B, (Kb, N)."""
    ga, gb = SCALINGS[scaling]
    sa_full = np.repeat(sa, 128, axis=0)[:M] if ga == "128x128" else sa
    sb_full = np.repeat(sb, 128, axis=1)[:, :N] if gb == "128x128" else sb
    return np.ascontiguousarray(sa_full, np.float32), np.ascontiguousarray(sb_full, np.float32)


def check_scaled_mm(a, b_nk, scale_a, scale_b, bias, out_dtype, use_fast_accum, fmt_a, fmt_b):
    """Every rule of the model's domain (torch's own refusals included), one sentence each; returns
    (typed a, typed b_nk, float32 scale_a, scale_b, typed bias or None, scaling mode)."""
    use_fast_accum = check_flag("use_fast_accum", use_fast_accum)
    for nm, f in (("fmt_a", fmt_a), ("fmt_b", fmt_b)):
        if not isinstance(f, str) or f not in _FP8:
            raise InputError(f"{nm} must be 'e4m3' or 'e5m2', got {_describe(f)}")
    if fmt_a == fmt_b == "e5m2":
        raise InputError("torch._scaled_mm refuses two e5m2 operands (cuBLASLt has no e5m2 x e5m2 FP8 GEMM)")
    a = as_array("a", a, what="an (M, K) array of FP8 codes")
    b_nk = as_array("b_nk", b_nk, what="an (N, K) array of FP8 codes")
    for nm, x, f in (("a", a, fmt_a), ("b_nk", b_nk, fmt_b)):
        if x.dtype not in (np.dtype(np.uint8), _FP8[f]):
            raise DTypeError(f"{nm} must be uint8 codes or a {_FP8[f].name} array for {nm[0]}'s format {f}, "
                             f"got {x.dtype}")
        if x.ndim != 2:
            raise InputError(f"{nm} must be a 2-D array, got shape {x.shape}")
    if a.shape[1] != b_nk.shape[1]:
        raise InputError(f"a (M, K) and b_nk (N, K) must share K, got {a.shape} and {b_nk.shape}")
    if not isinstance(out_dtype, str) or out_dtype not in _OUT:
        raise InputError(f"out_dtype must be one of {', '.join(_OUT)}, got {_describe(out_dtype)}")
    m, k = a.shape
    n = b_nk.shape[0]
    if n % 16 or k % 16 or 0 in (m, n, k):
        raise InputError(f"torch._scaled_mm needs K and N multiples of 16 (and M, N, K > 0); got {m}x{n}x{k}")
    sa = as_float32("scale_a", scale_a)
    sb = as_float32("scale_b", scale_b)
    mode = scaling_mode(sa.shape, sb.shape, m, n, k)
    if mode == "tensor":
        sa, sb = sa.reshape(()), sb.reshape(())
    if mode.startswith("block"):
        if use_fast_accum:
            raise InputError(f"torch._scaled_mm refuses use_fast_accum=True with block-wise scales ({mode})")
        ga, gb = SCALINGS[mode]
        if ga == "1x128" and m % 4:
            raise InputError(f"with 1x128 A scales and M = {m} not a multiple of 4, cuBLASLt reads the scales with a "
                             f"leading dimension rounded up to 4 (recorded on the H200: every such call differs): the "
                             f"output is undefined — pad M to a multiple of 4")
        kb = -(-k // 128)
        if kb % 4 and ((ga == "128x128" and m > 128) or (gb == "128x128" and n > 128)):
            raise InputError(f"with 128x128 block scales and K/128 = {kb} not a multiple of 4, cuBLASLt reads the "
                             f"scales of every 128-block after the first with a leading dimension rounded up to 4 "
                             f"(outside torch's scale tensor; recorded on the H200): the output is undefined — pad K "
                             f"to a multiple of 512 or keep {'M' if ga == '128x128' else 'N'} <= 128")
    bt = None
    if bias is not None:
        if out_dtype == "f32":
            raise InputError("torch._scaled_mm refuses a bias with out_dtype f32")
        bt = as_array("bias", bias, what="an (N,) bf16 or f16 array")
        if bt.dtype != _BIAS[out_dtype]:
            raise DTypeError(f"bias must be {_BIAS[out_dtype].name} for an {out_dtype} output (torch's rule), "
                             f"got {bt.dtype}")
        if bt.shape != (n,):
            raise InputError(f"bias must have shape (N,) = ({n},), got {bt.shape}")
    a = a.view(_FP8[fmt_a]) if a.dtype == np.uint8 else a
    b_nk = b_nk.view(_FP8[fmt_b]) if b_nk.dtype == np.uint8 else b_nk
    return a, b_nk, sa, sb, bt, mode


def _c(x) -> np.ndarray:
    return canonical_nan_f32(np.asarray(x, np.float32))


def epilogue(acc: np.ndarray, mode: str, scale_a=None, scale_b=None, bias: Optional[np.ndarray] = None,
             out_dtype: str = "f32") -> np.ndarray:
    """cuBLASLt's FP8 epilogue on the float32 accumulator: the per-tensor or row-wise scales (block
    scales were applied at promotion), the bias, then cvt.rn to ``out_dtype``; NaNs canonical."""
    acc = np.asarray(acc, np.float32)
    with np.errstate(all="ignore"):
        if mode == "tensor":
            d = _c(_c(_c(np.float32(scale_a) * np.float32(scale_b)) * acc) + np.float32(0))
        elif mode == "row":
            d = _c(scale_a * _c(scale_b * acc))
        else:
            d = _c(acc)
        if bias is not None:
            d = _c(d + np.asarray(bias).astype(np.float32))
    if out_dtype == "f32":
        return d
    return round_to_format(d, out_dtype, saturate=False).view(_OUT[out_dtype])


def scaled_mm(a, b_nk, scale_a, scale_b, *, bias=None, out_dtype: str = "bf16", use_fast_accum: bool = False,
              fmt_a: str = "e4m3", fmt_b: str = "e4m3") -> np.ndarray:
    """``torch._scaled_mm(a, b_nk.T, scale_a, scale_b, bias, out_dtype=, use_fast_accum=)`` on Hopper
    (the unsplit kernels).

    ``a`` (M, K) and ``b_nk`` (N, K): FP8 codes (uint8) or ml_dtypes float8 arrays of ``fmt_a`` /
    ``fmt_b``; float32 scales whose shapes pick the mode as torch does (module doc); ``bias`` (N,)
    bf16 (bf16 out) or f16 (f16 out).
    """
    a, b_nk, sa, sb, bias, mode = check_scaled_mm(a, b_nk, scale_a, scale_b, bias, out_dtype, use_fast_accum,
                                                  fmt_a, fmt_b)
    m, k = a.shape
    n = b_nk.shape[0]
    # M to whole 64-row tiles and K to whole 128-K promotion stages with zeros: rows are independent and
    # zero products leave a chain's sum as it is (recorded: M = 64..512 in steps of 64 and odd M, K = 64, 192, ...)
    mp, kp = -(-m // 64) * 64, -(-k // 128) * 128
    a = _pad(a, mp, kp)
    b = np.ascontiguousarray(_pad(b_nk, n, kp).T)
    instr = f"wgmma.mma_async.sync.aligned.m64n8k32.f32.{fmt_a}.{fmt_b}"
    if mode.startswith("block"):
        fa, fb = expand_block_scales(mode, sa, sb, m, n)
        fa = _pad(fa, mp, fa.shape[1])
        acc = gemm(a, b, instr=instr, promote_every=4, scale_a=fa, scale_b=fb, promote_op=BLOCK_PROMOTE_OP[mode])
    elif use_fast_accum:
        acc = gemm(a, b, instr=instr)
    else:
        acc = gemm(a, b, instr=instr, promote_every=4, scale_a=np.float32(1), scale_b=np.float32(1))
    return epilogue(np.asarray(acc)[:m], mode, sa, sb, bias, out_dtype)



__all__ = ["scaled_mm", "epilogue", "check_scaled_mm", "scaling_mode", "scale_shapes", "expand_block_scales",
           "SCALINGS", "BLOCK_PROMOTE_OP"]
