"""torchao's float8 layers on Hopper, bit for bit (torchao 0.18.0 on torch 2.11, recorded on the H200:
fixtures/layers, with every ``torch._scaled_mm`` call each layer made).

``Float8Linear`` (training; ``Float8LinearConfig.from_recipe_name(recipe)``), eager, bf16 ``x`` (M, K)
and weight ``w`` (N, K), output ``y = x @ w.T`` and, given ``grad_y`` (M, N), the two backward GEMMs:

===================  ==========================  ===========================  ==============================
recipe               y = x @ w.T (fast accum)    grad_x = grad_y @ w          grad_w = grad_y.T @ x
===================  ==========================  ===========================  ==============================
``tensorwise``       x, w e4m3, one scale each   grad_y e5m2, w e4m3; scalar  grad_y e5m2, x e4m3; scalar
                                                 scales, precise              scales, precise
``rowwise``          x per row, w per out        grad_y per row, w per        grad_y per column, x per
                     channel (e4m3, scales       column k; ``_scaled_mm``     column k; unit scales, then
                     rounded down to 2^n)        with unit scales, then       ``RN_bf16(out * (1/s_a)(1/s_b))``
                                                 ``RN_bf16(out * (1/s_a)(1/s_b))``
``rowwise_with_gw``  as rowwise                  as rowwise, w one scale      ``torch.mm`` in bf16 (cuBLAS)
``_hp``                                          (2^n) repeated per column
===================  ==========================  ===========================  ==============================

Each cast (:func:`cast_to_float8`): ``amax = max |x|`` (per tensor, or per row / column), ``scale =
RN32(RN64(1 / max(amax, 1e-12)) * F8MAX)`` in float64 (``float / tensor`` is ``reciprocal() * float``
in torch), rounded down to a power of two ``exp2(floor(log2(scale)))`` for the rowwise recipes, then
``x8 = fp8(clamp(RN32(x * scale), -F8MAX, F8MAX))``.  The GEMMs get ``1 / scale`` (``reciprocal``, f32).

The inference path (``Float8DynamicActivationFloat8WeightConfig``, per tensor or per row, e4m3,
``use_fast_accum=True``): ``scale = RN_bf16(amax) * RN32(1/448)`` rounded to bf16 then kept as f32
(amax and scale in the input's dtype), ``x8 = fp8(clamp(RN32(x / scale)))``, then one ``_scaled_mm``
with those scales and the bias fused (:func:`float8_inference`).
"""

from __future__ import annotations

from typing import Optional

import ml_dtypes
import numpy as np

from ..errors import DTypeError, InputError
from ..numerics.fp8 import round_to_format
from ..numerics.promotion import canonical_nan_f32
from ..numerics.scaled_mm import scaled_mm as _smm
from ..validate import _describe, as_array

RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")
GRANULARITIES = ("per_tensor", "per_row")
VERSION = "torchao 0.18.0 (torch 2.11.0+cu130)"
F8MAX = {"e4m3": 448.0, "e5m2": 57344.0}
EPS = 1e-12
_FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
_BF16 = np.dtype(ml_dtypes.bfloat16)


def amax_to_scale(amax: np.ndarray, fmt: str, *, pow2: bool) -> np.ndarray:
    """torchao's ``amax_to_scale``: float32 ``F8MAX / max(amax, 1e-12)`` through float64, optionally
    rounded down to a power of two."""
    with np.errstate(all="ignore"):
        a = np.asarray(amax).astype(np.float64)
        a = np.where(np.isnan(a), a, np.maximum(a, EPS))            # torch.clamp keeps a NaN
        s = ((1.0 / a) * F8MAX[fmt]).astype(np.float32)
        if pow2:
            s = round_down_to_power_of_2(s)
    return s


def round_down_to_power_of_2(s: np.ndarray) -> np.ndarray:
    """``exp2(floor(log2(s)))`` in float32 (0 -> 0, NaN -> NaN): the largest power of two <= s, from the
    exponent field (recorded scales are never within an ulp of a power of two; log2f's rounding there is
    not established)."""
    s = np.asarray(s, np.float32)
    with np.errstate(all="ignore"):
        m, e = np.frexp(s.astype(np.float64))
        p = np.ldexp(np.ones_like(m), e - 1).astype(np.float32)
    return np.where(np.isnan(s) | (s == 0) | np.isinf(s), s, p).astype(np.float32)


def _amax(x: np.ndarray, axis: Optional[int]) -> np.ndarray:
    """max |x| (a NaN wins, as torch's max / amax), per tensor (axis None) or over ``axis`` (keepdims)."""
    ax = np.abs(x.astype(np.float32))
    with np.errstate(invalid="ignore"):
        m = np.max(ax, axis=axis, keepdims=axis is not None)
        nan = np.isnan(ax).any(axis=axis, keepdims=axis is not None)
    return np.where(nan, np.float32(np.nan), m).astype(np.float32)


def cast_to_float8(x: np.ndarray, fmt: str, *, axis: Optional[int], pow2: bool) -> tuple[np.ndarray, np.ndarray]:
    """(FP8 codes as an ml_dtypes array, float32 scale) of torchao's dynamic cast of ``x`` (bf16):
    per tensor (``axis`` None) or with one scale per slice reduced over ``axis``."""
    scale = amax_to_scale(_amax(x, axis), fmt, pow2=pow2)
    with np.errstate(all="ignore"):
        t = canonical_nan_f32(x.astype(np.float32) * scale)
        t = np.where(np.isnan(t), t, np.clip(t, -F8MAX[fmt], F8MAX[fmt])).astype(np.float32)
    return t.astype(_FP8[fmt]), scale


def _recip(s: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return canonical_nan_f32(np.float32(1) / np.asarray(s, np.float32))


def _post_scaled(a8, b8_nk, fa, fb, post: np.ndarray) -> np.ndarray:
    """torchao's rowwise GEMM without fast accumulation: ``_scaled_mm`` with unit scales (bf16 out), then
    ``out *= post`` (bf16 in place: RN_bf16(float32(out) * post))."""
    d = _mm(a8, b8_nk, np.float32(1), np.float32(1), fa, fb, fast=False)
    return _to_bf16(d.astype(np.float32) * post)


def _to_bf16(x: np.ndarray) -> np.ndarray:
    """A float32 result of a torch CUDA kernel stored as bf16: the GPU's NaN (0x7FFFFFFF) through cvt.rn.bf16
    (0x7FFF; recorded), not ml_dtypes' canonical 0x7FC0."""
    with np.errstate(all="ignore"):
        return round_to_format(canonical_nan_f32(x), "bf16", saturate=False).view(_BF16)


def _mm(a8, b8_nk, sa, sb, fa, fb, *, fast: bool, bias=None) -> np.ndarray:
    """``torch._scaled_mm`` (its model pads K to whole promotion stages; recorded: K = 64, 192, 320, 448)."""
    return _smm(a8, b8_nk, sa, sb, bias=bias, out_dtype="bf16", use_fast_accum=fast, fmt_a=fa, fmt_b=fb)


def _check(x, w, grad_y, M_rule: str):
    x = as_array("x", x, what="an (M, K) bfloat16 array")
    w = as_array("w", w, what="an (N, K) bfloat16 array")
    for nm, v in (("x", x), ("w", w)) + ((("grad_y", grad_y),) if grad_y is not None else ()):
        if np.asarray(v).dtype != _BF16:
            raise DTypeError(f"{nm} must be a bfloat16 array (the recorded layers are bf16), got {np.asarray(v).dtype}")
        if np.asarray(v).ndim != 2:
            raise InputError(f"{nm} must be 2-D, got shape {np.asarray(v).shape}")
    M, K = x.shape
    N = w.shape[0]
    if w.shape[1] != K:
        raise InputError(f"x (M, K) and w (N, K) must share K, got {x.shape} and {w.shape}")
    if grad_y is not None and np.asarray(grad_y).shape != (M, N):
        raise InputError(f"grad_y must have shape (M, N) = ({M}, {N}), got {np.asarray(grad_y).shape}")
    if M % 16 or N % 16 or K % 16:
        raise InputError(f"torchao's float8 GEMMs need M, N and K multiples of 16 ({M_rule}); got M={M}, N={N}, K={K}")
    return x, w, (None if grad_y is None else np.asarray(grad_y))


def float8_linear(x, w, grad_y=None, *, recipe: str):
    """torchao ``Float8Linear`` (``Float8LinearConfig.from_recipe_name(recipe)``, no bias) on bf16 ``x``
    (M, K) and ``w`` (N, K): ``y`` (M, N), or ``(y, grad_x, grad_w)`` given ``grad_y`` (M, N) — every
    tensor bf16, bit for bit (module table)."""
    if not isinstance(recipe, str) or recipe not in RECIPES:
        raise InputError(f"recipe must be one of {', '.join(RECIPES)}, got {_describe(recipe)}")
    x, w, g = _check(x, w, grad_y, "recorded: 64..640")
    if recipe == "tensorwise":
        x8, sx = cast_to_float8(x, "e4m3", axis=None, pow2=False)
        w8, sw = cast_to_float8(w, "e4m3", axis=None, pow2=False)
        y = _mm(x8, w8, _recip(sx), _recip(sw), "e4m3", "e4m3", fast=True)
    else:
        x8, sx = cast_to_float8(x, "e4m3", axis=1, pow2=True)          # (M, 1)
        w8, sw = cast_to_float8(w, "e4m3", axis=1, pow2=True)          # (N, 1): per output channel
        y = _mm(x8, w8, _recip(sx), _recip(sw).T, "e4m3", "e4m3", fast=True)
    if g is None:
        return y
    wT = np.ascontiguousarray(w.T)                                     # (K, N)
    xT = np.ascontiguousarray(x.T)                                     # (K, M)
    if recipe == "tensorwise":
        g8, sg = cast_to_float8(g, "e5m2", axis=None, pow2=False)
        gx = _mm(g8, np.ascontiguousarray(w8.T), _recip(sg), _recip(sw), "e5m2", "e4m3", fast=False)
        gw = _mm(np.ascontiguousarray(g8.T), np.ascontiguousarray(x8.T), _recip(sg), _recip(sx), "e5m2", "e4m3",
                 fast=False)
        return y, gx, gw
    g8r, sgr = cast_to_float8(g, "e4m3", axis=1, pow2=True)           # per row of grad_y: (M, 1)
    if recipe == "rowwise":
        wk8, swk = cast_to_float8(wT, "e4m3", axis=1, pow2=True)       # per column k of w: (K, 1)
    else:
        wk8, s = cast_to_float8(wT, "e4m3", axis=None, pow2=True)      # one scale, repeated per column
        swk = np.full((wT.shape[0], 1), s, np.float32)
    with np.errstate(all="ignore"):
        post = canonical_nan_f32(_recip(sgr) * _recip(swk).T)          # (M, K)
    gx = _post_scaled(g8r, wk8, "e4m3", "e4m3", post)
    if recipe == "rowwise_with_gw_hp":
        from .cublas import cublas_matmul

        gw = cublas_matmul(np.ascontiguousarray(g.T), x)              # torch.mm in bf16: cuBLAS
        return y, gx, gw
    gc8, sgc = cast_to_float8(np.ascontiguousarray(g.T), "e4m3", axis=1, pow2=True)   # per column n: (N, 1)
    xk8, sxk = cast_to_float8(xT, "e4m3", axis=1, pow2=True)                          # per column k: (K, 1)
    with np.errstate(all="ignore"):
        post = canonical_nan_f32(_recip(sgc) * _recip(sxk).T)          # (N, K)
    gw = _post_scaled(gc8, xk8, "e4m3", "e4m3", post)
    return y, gx, gw


def float8_inference(x, w, bias=None, *, granularity: str):
    """torchao ``quantize_(Float8DynamicActivationFloat8WeightConfig(granularity=PerTensor() | PerRow()))``
    of a bf16 ``nn.Linear`` (``w`` (N, K), ``bias`` (N,) or None) applied to bf16 ``x`` (M, K): y (M, N)."""
    if not isinstance(granularity, str) or granularity not in GRANULARITIES:
        raise InputError(f"granularity must be one of {', '.join(GRANULARITIES)}, got {_describe(granularity)}")
    x, w, _ = _check(x, w, None, "recorded: 128x512x256, 192x384x320")
    axis = None if granularity == "per_tensor" else 1
    x8, sx = _inference_cast(x, axis)
    w8, sw = _inference_cast(w, axis)
    if axis is None:
        sx, sw = sx.reshape(1, 1), sw.reshape(1, 1)
    else:
        sw = sw.T
    if bias is not None:
        bias = as_array("bias", bias, what="an (N,) bfloat16 array")
        if bias.dtype != _BF16 or bias.shape != (w.shape[0],):
            raise InputError(f"bias must be a bfloat16 array of shape ({w.shape[0]},), got {bias.dtype} {bias.shape}")
    return _mm(x8, w8, sx, sw, "e4m3", "e4m3", fast=True, bias=bias)


def _inference_cast(x: np.ndarray, axis: Optional[int]):
    """torchao's inference quantization (``_choose_scale_float8`` / ``_quantize_affine_float8``): scale =
    amax / 448 in the input's dtype (bf16, ``amax * RN32(1/448)``), kept as float32; codes = fp8(clamp(x / scale))."""
    amax = _amax(x, axis).astype(_BF16).astype(np.float32)
    with np.errstate(all="ignore"):
        scale = _to_bf16(amax * np.float32(1 / 448.0)).astype(np.float32)
        t = canonical_nan_f32(x.astype(np.float32) / scale)
        t = np.where(np.isnan(t), t, np.clip(t, -448.0, 448.0)).astype(np.float32)
    return t.astype(ml_dtypes.float8_e4m3fn), scale
