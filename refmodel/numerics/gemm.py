"""A GEMM as a chain of wgmma instructions along K, optionally promoted into float32
CUDA-core accumulators (the DeepGEMM scheme for FP8).

Without promotion (``promote_every=None``) the tensor core accumulates the whole K:
instruction t computes ``D_t = A_t·B_t + D_{t-1}`` (``D_{-1} = c`` or +0), each D
rounded by the accumulator numerics of :mod:`refmodel.accumulate`.

With ``promote_every=n`` the K instructions are cut into stages of n.  Each stage is
a chain started with scale-d = 0 (C = +0), and its result ``P`` is added into a
float32 accumulator ``acc`` (initialised with ``c`` or +0)::

    s   = RN32(scale_a[i, kb] * scale_b[kb, j // block_n])      # one float32 multiply
    "fma"       acc = RN32(s * P + acc)                          # one fused multiply-add
    "mul_add"   acc = RN32(acc + RN32(s * P))                    # multiply, then add
    "fma_exact" acc = RN32(scale_a * scale_b * P + acc)          # exact, one rounding
    "fma_row_first" acc = RN32(scale_b * RN32(scale_a * P) + acc) # cuBLASLt 1x128 x 1x128

``"fma"`` is what DeepGEMM's ``final_accum += scale_a * scale_b * accum`` compiles to
(FMUL for the combined scale, then FFMA); ``"fma_exact"`` rounds the exact four-operand
value once (no GPU instruction does this; it bounds what the scale product costs).
RN32 is IEEE round-to-nearest-even to float32 with subnormals.  The fused operations
are computed exactly (Dekker product, error-free sums, round-to-odd in float64, then
RN32: one correct rounding; see :func:`refmodel.accumulate.fma_f32`).  The whole
promoted GEMM runs in one numba kernel (:func:`refmodel.accumulate.fdpa_chain`).
A NaN from the float32 arithmetic is the canonical 0x7FFFFFFF.

Scales (cast to float32 first):

* ``scale_a``: None (1), a scalar, or shape (M, Kb): one scale per row and block of
  K/Kb columns of K (DeepGEMM's 1x128 activation tiles: Kb = K/128).
* ``scale_b``: None (1), a scalar, or shape (Kb, Nb): one per block of K/Kb rows and
  N/Nb columns (DeepGEMM's 128x128 weight tiles: Kb = K/128, Nb = N/128).

A promotion stage must lie inside one scale block (K/Kb a multiple of n * instr K).
Scales need ``promote_every``: they are applied when partial sums are promoted.

Finally the result is converted to ``out_dtype`` (f32, f16 or bf16; RNE, overflow
to Inf) with :func:`refmodel.numerics.fp8.round_to_format`.
"""

from __future__ import annotations

from typing import Optional

import ml_dtypes
import numpy as np

from .accumulate import (PROMOTE_OPS, decode_operand, fdpa_chain, fma_f32, int_dot_chain,  # noqa: F401
                         promote)
from ..errors import DTypeError, InputError
from .fp8 import round_to_format
from ..dtypes import bits_of, element_dtype, from_bits
from ..validate import _describe, as_array, as_float32, check_instr
from .wgmma import (Params, _check_params, operand_codes,
                    operand_spec)
from ..wgmma_forms import M as M_INSTR, parse_wgmma

_OUT_DTYPES = {"f32": np.dtype(np.float32), "float32": np.dtype(np.float32),
               "f16": np.dtype(np.float16), "float16": np.dtype(np.float16),
               "bf16": np.dtype(ml_dtypes.bfloat16), "bfloat16": np.dtype(ml_dtypes.bfloat16),
               "s32": np.dtype(np.int32), "int32": np.dtype(np.int32)}


# ----------------------------------------------------------------------------- validation


def _matrix(name, x, type_name, shape_rule):
    dt = element_dtype(type_name)
    x = as_array(name, x, what=f"a {dt.name} array")
    if x.dtype != dt:
        raise DTypeError(f"{name} must be {dt.name} for .{type_name}, got {x.dtype.name}")
    if x.ndim != 2:
        raise InputError(f"{name} must be a 2-D array {shape_rule}, got shape {tuple(x.shape)}")
    return x


def _scales(scale, name, rows, K, stage_k, N=None):
    """Per-stage scale vectors: returns f(stage) -> vector over rows (A) or columns (B)."""
    if scale is None:
        one = np.ones(rows, np.float32)
        return lambda s: one
    arr = as_float32(name, scale, what="None, a real number or a 2-D array of float32 scales")
    if arr.ndim == 0:
        v = np.full(rows, arr, np.float32)
        return lambda s: v
    if arr.ndim != 2:
        raise InputError(f"{name} must be a scalar or a 2-D array, got shape {arr.shape}")
    if name == "scale_a":
        if arr.shape[0] != rows:
            raise InputError(f"scale_a must have shape (M, Kb) = ({rows}, Kb), got {arr.shape}")
        kb = arr.shape[1]
    else:
        kb, nb = arr.shape
        if nb == 0 or N % nb:
            raise InputError(f"scale_b must have shape (Kb, Nb) with Nb dividing N = {N}, got {arr.shape}")
    if kb == 0 or K % kb:
        raise InputError(f"{name} has {kb} blocks along K, which must divide K = {K}")
    block_k = K // kb
    if block_k % stage_k:
        raise InputError(f"a promotion stage ({stage_k} of K) must lie inside one {name} block, "
                         f"but the block is K/{kb} = {block_k}")
    if name == "scale_a":
        return lambda s: np.ascontiguousarray(arr[:, (s * stage_k) // block_k])
    rep = N // arr.shape[1]
    return lambda s: np.repeat(arr[(s * stage_k) // block_k], rep)


def _out_dtype(out_dtype):
    if out_dtype is None:
        return None
    try:
        key = out_dtype if isinstance(out_dtype, str) else np.dtype(out_dtype).name
    except (TypeError, ValueError):
        key = None
    if key not in _OUT_DTYPES:
        raise InputError(f"out_dtype must be f32, f16 or bf16 (or s32 for integer forms), got {_describe(out_dtype)}")
    return _OUT_DTYPES[key]


def zero_pad(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """``x`` (2-D) in the top-left corner of a zero (rows, cols) array (``x`` itself, contiguous, when it
    already has that shape): zero rows and zero products change no GEMM output."""
    if x.shape == (rows, cols):
        return np.ascontiguousarray(x)
    out = np.zeros((rows, cols), x.dtype)
    out[:x.shape[0], :x.shape[1]] = x
    return out


def _convert(x: np.ndarray, dt: Optional[np.dtype]) -> np.ndarray:
    if dt is None or x.dtype == dt:
        return x
    if x.dtype == np.int32 or dt == np.int32:
        raise InputError(f"integer results stay int32; out_dtype {dt.name} needs a floating-point form")
    if dt == np.float32:
        return x.astype(np.float32)  # f16 -> f32 is exact
    fmt = "f16" if dt == np.float16 else "bf16"
    return round_to_format(x, fmt, saturate=False).view(dt)


# ----------------------------------------------------------------------------- public


def gemm(a, b, c=None, *, instr: str, promote_every: Optional[int] = None, scale_a=None,
         scale_b=None, out_dtype=None, promote_op: str = "fma",
         params: Optional[Params] = None) -> np.ndarray:
    """``D = A·B (+ C)`` of a wgmma chain along K (see module doc for promotion and scales).

    ``a`` (M, K) and ``b`` (K, N) typed as the instruction's A and B; M a multiple of 64,
    K of the instruction's K, N of its N (columns are independent, so wider N is the
    same instruction repeated).  ``c`` (M, N): the first instruction's C (accumulator
    dtype), or with ``promote_every`` the float32 accumulator's start.
    Returns the accumulator dtype (float32 when promoting) or ``out_dtype``.
    """
    form = parse_wgmma(check_instr("instr", instr, "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"))
    p = _check_params(form, params)
    a = _matrix("a", a, form.dtype_a, "(M, K)")
    b = _matrix("b", b, form.dtype_b, "(K, N)")
    Mr, K = a.shape
    if Mr == 0 or Mr % M_INSTR:
        raise InputError(f"M must be a positive multiple of 64, got {Mr}")
    if K == 0 or K % form.k:
        raise InputError(f"K must be a positive multiple of {form.k} for {form.shape}, got {K}")
    if b.shape[0] != K:
        raise InputError(f"b must have shape (K, N) with K = {K} (from a), got {tuple(b.shape)}")
    N = b.shape[1]
    if N == 0 or N % form.n:
        raise InputError(f"N must be a positive multiple of {form.n} for {form.shape}, got {N}")
    if not isinstance(promote_op, str) or promote_op not in PROMOTE_OPS:
        raise InputError(f"promote_op must be one of {', '.join(PROMOTE_OPS)}, got {_describe(promote_op)}")
    odt = _out_dtype(out_dtype)
    n_instr = K // form.k
    if promote_every is not None:
        if isinstance(promote_every, bool) or not isinstance(promote_every, (int, np.integer)) \
                or promote_every <= 0 or n_instr % promote_every:
            raise InputError(f"promote_every must be a positive divisor of the number of "
                             f"instructions K/{form.k} = {n_instr}, got {_describe(promote_every)}")
        if form.family == "int8":
            raise InputError("promote_every applies to floating-point forms; integer wgmma accumulates exactly in s32")
    elif scale_a is not None or scale_b is not None:
        raise InputError("scale_a/scale_b need promote_every: the scales are applied when partial sums are promoted")
    c_dtype = np.dtype(np.float32) if promote_every is not None else element_dtype(form.dtype_d)
    if c is not None:
        c = as_array("c", c, what=f"a {c_dtype.name} array")
        if c.dtype != c_dtype:
            why = "the float32 promotion accumulator" if promote_every is not None else f"the .{form.dtype_d} accumulator"
            raise DTypeError(f"c must be {c_dtype.name} for {why}, got {c.dtype.name}")
        if c.shape != (Mr, N):
            raise InputError(f"c must have shape (M, N) = ({Mr}, {N}), got {tuple(c.shape)}")

    kblk = p.k_group or form.k
    if form.family == "int8":
        clamp = p.clamps(form.satfinite)
        c0 = np.zeros((Mr, N), np.int32) if c is None else c
        return _convert(int_dot_chain(a, b[None], c0, clamp, kblk=kblk, rows_per_b=Mr), odt)

    A = decode_operand(operand_codes(a, form.dtype_a, p)[..., None],
                       operand_spec(form.dtype_a, p), kblk=kblk)
    B = decode_operand(operand_codes(b, form.dtype_b, p)[None], operand_spec(form.dtype_b, p),
                       kblk=kblk)
    if promote_every is None:
        cbits = np.zeros((Mr, N), np.uint32) if c is None else bits_of(c).astype(np.uint32)
        bits = fdpa_chain(A, B, cbits, p, kblk=kblk, rows_per_b=Mr)
        return _convert(from_bits(bits, form.dtype_d), odt)

    blocks_per_stage = promote_every * form.k // kblk
    stage_k = promote_every * form.k
    n_stages = n_instr // promote_every
    sa = _scales(scale_a, "scale_a", Mr, K, stage_k)
    sb = _scales(scale_b, "scale_b", N, K, stage_k, N)
    acc = np.zeros((Mr, N), np.float32) if c is None else np.array(c, np.float32, order="C")
    rows = np.stack([sa(s) for s in range(n_stages)])
    cols = np.stack([sb(s) for s in range(n_stages)])
    fdpa_chain(A, B, np.zeros((Mr, N), np.uint32), p, kblk=kblk, rows_per_b=Mr,
               promote_nblk=blocks_per_stage, scale_rows=rows, scale_cols=cols,
               promote_op=promote_op, acc_f32=acc)
    return _convert(acc, odt)
