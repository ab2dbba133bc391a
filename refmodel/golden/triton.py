"""Golden model of the standard Triton tiled matmul on Hopper (Triton 3.6, recorded on the H200).

The kernel: ``acc = tl.zeros((BM, BN), tl.float32)``; for each BLOCK_K slice
``acc = tl.dot(a_blk, b_blk, acc, input_precision=..., max_num_imprecise_acc=...)``; store
``acc.to(out_dtype)``.  What Triton emits (read from the PTX of the recorded kernels,
fixtures/triton) and what reproduces it bit for bit:

=====================================  ==============================================================
inputs / options                       schedule (refmodel.gemm)
=====================================  ==============================================================
f16, bf16                              wgmma k16 (f32 accumulator) chained over the whole K
f16 / FP8 with an f16 ``acc``          wgmma k16 / k32 with the f16 accumulator (``.f16.f16.f16``,
(``acc_dtype=numpy.float16``)          ``.f16.e4m3.e4m3``) chained over the whole K, then ``acc.to(out)``
                                       (H200 recordings f16acc_*: 0 mismatches)
f32, ``input_precision="tf32"``        wgmma tf32 k8 on the raw f32 bits (no cvt: the tensor core
                                       ignores the low 13 bits) chained over the whole K
f32, ``input_precision="tf32x3"``      per BLOCK_K slice: big = cvt.rna.tf32(x), small = x - big;
                                       P = small_a·big_b (fresh chain), P += big_a·small_b,
                                       NaNs of P replaced by +0 (so an Inf input gives Inf, not
                                       NaN), Q = big_a·big_b chained on P; acc = acc + Q (add.f32)
f32, ``input_precision="ieee"``        CUDA-core FMAs in K order: acc = fma(a[k], b[k], acc),
                                       k = 0 .. K-1 (one correctly rounded FMA each)
e4m3/e5m2, ``max_num_imprecise_acc=m``  wgmma k32 chain cut, inside each BLOCK_K slice, into groups of
(0 < m <= BLOCK_K)                     ceil(m/32) instructions (the last group of a slice may be
                                       shorter: m = 96, BLOCK_K = 128 adds after 3, then 1; H200
                                       recordings of m = 32, 64, 96, 128); each group's partial sum is added into the f32
                                       accumulator (``add.f32``: refmodel's promotion, unit scales)
e4m3/e5m2, ``max_num_imprecise_acc``   one wgmma k32 chain over the whole K, no promotion: Triton's
None (default)                         sm_90 default is 2**30, and its wgmma lowering keeps a partial
                                       accumulator only when m <= BLOCK_K (H200: no ``add.f32`` in
                                       the PTX, 0 mismatches on the recordings).  An explicit
                                       m > BLOCK_K does not compile in Triton 3.6 (``python -m
                                       gpu.record.triton --explore D --only fp8_imp256_bk128_w4``
                                       reports its CompilationError): refused
e4m3/e5m2, ``max_num_imprecise_acc=0``  cvt to f16 (exact), ``mma.sync.m16n8k16.f32.f16.f16`` chained
                                       over K in :func:`mma_sync_fp8_k_order`; the H200's mma.sync
                                       sums like wgmma k16 f16 (0 mismatches on the recordings)
=====================================  ==============================================================
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ..errors import DTypeError, InputError

from ..numerics.gemm import _convert
from ..validate import _describe, as_array, strict_options
from .schedule import FMA, MMA_SYNC_F16, MMA_SYNC_F16_F16, Schedule, mma_sync_fp8_k_order, rna_tf32  # noqa: F401

_FP8 = {np.dtype(ml_dtypes.float8_e4m3fn): "e4m3", np.dtype(ml_dtypes.float8_e5m2): "e5m2"}
_OUT = {np.dtype(np.float32): None, np.dtype(ml_dtypes.bfloat16): "bf16", np.dtype(np.float16): "f16"}
_OUT_NAME = {np.dtype(np.float32): "f32", np.dtype(ml_dtypes.bfloat16): "bf16", np.dtype(np.float16): "f16"}


def _out(out_dtype) -> np.dtype:
    try:
        od = np.dtype(out_dtype) if not isinstance(out_dtype, str) and out_dtype is not None else None
    except (TypeError, ValueError):
        od = None
    if od is None or od not in _OUT:
        raise InputError(f"out_dtype must be numpy.float32, ml_dtypes.bfloat16 or numpy.float16, got {_describe(out_dtype)}")
    return od


def _instr(a: np.ndarray, b: np.ndarray, input_precision: Any) -> str:
    if not isinstance(input_precision, str) or input_precision not in ("tf32", "tf32x3", "ieee"):
        raise InputError(f"input_precision must be 'tf32', 'tf32x3' or 'ieee', got {_describe(input_precision)}")
    da, db = np.dtype(a.dtype), np.dtype(b.dtype)
    if da != np.float32 and input_precision != "tf32":
        raise InputError(f"input_precision applies to float32 inputs only (Triton's f16/bf16/FP8 dot has one "
                         f"precision); got input_precision={input_precision!r} with {da} inputs")
    if da in _FP8 and db in _FP8:
        return f"wgmma.mma_async.sync.aligned.m64n8k32.f32.{_FP8[da]}.{_FP8[db]}"
    if da != db:
        raise DTypeError(f"a and b must have the same dtype (or both be FP8), got {da} and {db}")
    if da == np.float16:
        return "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"
    if da == np.dtype(ml_dtypes.bfloat16):
        return "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"
    if da == np.float32:
        return "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32"
    raise DTypeError(f"Triton matmul inputs must be e4m3/e5m2, float16, bfloat16 or float32, got {da}")


def _instr_for(dt: np.dtype, input_precision: Any, dt_b=None) -> str:
    return _instr(np.empty(0, dt), np.empty(0, dt if dt_b is None else np.dtype(dt_b)), input_precision)


@strict_options
def triton_schedule(dtype, K: int, *, block_k: int, input_precision: str = "tf32", max_num_imprecise_acc=None,
                    out_dtype=np.float32, acc_dtype=np.float32, dtype_b=None, block_m=None, block_n=None,
                    num_warps=None, num_stages=None, pattern: str = "dot_acc") -> Schedule:
    """The :class:`~refmodel.golden.Schedule` of the Triton tiled matmul for inputs of ``dtype`` (a numpy
    dtype: e4m3, e5m2, float16, bfloat16, float32) and K, with the kernel's options (module table);
    ``dtype_b``: B's dtype where it differs (mixed FP8: e4m3 x e5m2).

    ``block_m``, ``block_n``, ``num_warps`` (together) and ``num_stages``, ``pattern`` are the kernel's
    configuration: they choose MMAv3 (wgmma) or MMAv2 (mma.sync) as Triton 3.6 does
    (:func:`refmodel.golden.triton_lowering.triton_lowering`).  f16, bf16 and tf32 sum the same on both, so
    they may be left out there; an FP8 dot needs them (unless ``max_num_imprecise_acc=0``, always MMAv2)."""
    from .triton_lowering import dtype_name, triton_lowering

    dt = np.dtype(dtype)
    instr = _instr_for(dt, input_precision, dtype_b)
    from ..wgmma_forms import parse_wgmma

    kinstr = parse_wgmma(instr).k
    if isinstance(block_k, (bool, np.bool_)) or not isinstance(block_k, (int, np.integer)) or block_k <= 0 or K % block_k:
        raise InputError(f"block_k must be a positive int dividing K = {K}, got {_describe(block_k)}")
    if block_k % kinstr:
        raise InputError(f"block_k must be a multiple of the instruction's K = {kinstr}, got {block_k}")
    od = _out(out_dtype)
    out = _OUT_NAME[od]
    src = {"library": "Triton 3.6", "kernel": "tl.dot tiled matmul (gpu.libraries.triton)", "device": "H200",
           "evidence": "recorded: fixtures/triton"}
    m = max_num_imprecise_acc
    if m is not None and (isinstance(m, (bool, np.bool_)) or not isinstance(m, (int, np.integer)) or m < 0):
        raise InputError(f"max_num_imprecise_acc must be None or an int >= 0, got {_describe(m)}")
    acc = _acc_name(acc_dtype)
    fp8 = dt in _FP8
    config = (block_m, block_n, num_warps)
    if any(x is not None for x in config) and not all(x is not None for x in config):
        raise InputError("give block_m, block_n and num_warps together (the kernel's BLOCK_M, BLOCK_N, num_warps)")
    if pattern not in ("dot_acc", "add"):
        raise InputError(f"pattern must be 'dot_acc' (acc = tl.dot(a, b, acc)) or 'add' (acc += tl.dot(a, b)), "
                         f"got {_describe(pattern)}")
    low = None
    if all(x is not None for x in config):
        low = triton_lowering(dt, dtype_b if dtype_b is not None else dt, block_m=block_m, block_n=block_n,
                              block_k=block_k, num_warps=num_warps, num_stages=num_stages,
                              input_precision=input_precision, max_num_imprecise_acc=m, acc_dtype=acc_dtype,
                              pattern=pattern)
        src = {**src, "lowering": low.describe(), "evidence": "recorded: fixtures/triton (lowering.npz and the rest)"}
    else:
        if num_stages is not None:
            raise InputError("num_stages goes with block_m, block_n and num_warps")
        if fp8 and m != 0:
            raise InputError("an FP8 tl.dot lowers to wgmma (BLOCK_M a multiple of 64 and 4 or 8 warps) or to "
                             "mma.sync on f16 copies (smaller tiles, 1 or 2 warps), and the two sum differently: "
                             "give block_m, block_n and num_warps")
        dtype_name(dt)
    if fp8 and (m == 0 or (low is not None and low.path == "mma.sync")):
        if low is not None and low.slice_add and acc == "f16":
            raise InputError("acc += tl.dot(...) with an f16 accumulator was not recorded: not modelled")
        return Schedule(MMA_SYNC_F16_F16 if acc == "f16" else MMA_SYNC_F16, k_order="triton_fp8_mma_sync",
                        operand_cvt="f16", promote_every=block_k // 16 if low is not None and low.slice_add else None,
                        out_dtype=out, out_nan="gpu" if acc == "f16" and out == "f32" else None, source=src)
    if acc == "f16":
        if dt not in (np.dtype(np.float16), *_FP8):
            raise InputError(f"an f16 accumulator takes f16 or FP8 inputs (the wgmma forms with an f16 D), got {dt}")
        if m is not None and (fp8 or m != 0):
            raise InputError("max_num_imprecise_acc applies to an f32 accumulator, not acc_dtype=float16")
        if low is not None and low.slice_add:
            raise InputError("acc += tl.dot(...) with an f16 accumulator was not recorded: not modelled")
        # acc.to(tl.float32) of an f16 accumulator is cvt.f32.f16: every NaN comes out 0x7FFFFFFF
        return Schedule(instr.replace(".f32.", ".f16.", 1), out_dtype=out,
                        out_nan="gpu" if out == "f32" else None, source=src)
    if fp8:
        if m is not None and m > block_k:
            raise InputError(f"max_num_imprecise_acc must be <= block_k = {block_k} (Triton refuses to compile "
                             f"a larger one), got {_describe(m)}")
        if low is not None and low.slice_add:
            if m is not None and m < block_k:
                raise InputError(f"acc += tl.dot(...) with max_num_imprecise_acc = {m} < BLOCK_K = {block_k} was not "
                                 f"recorded (the dot's own partial sums, then the add): not modelled")
            return Schedule(instr, promote_every=block_k // kinstr, out_dtype=out, source=src)
        if m is None:  # Triton's default (2**30 > BLOCK_K): no partial accumulator, one chain over all of K
            return Schedule(instr, out_dtype=out, source=src)
        group = -(-int(m) // kinstr)           # instructions per partial sum, restarting at every slice
        return Schedule(instr, promote_every=group, restart_every=block_k, out_dtype=out, source=src)
    if m not in (None, 0):
        raise InputError("max_num_imprecise_acc applies to FP8 inputs only")
    if dt == np.float32 and input_precision == "ieee":
        return Schedule(FMA, out_dtype=out, source=src)
    if dt == np.float32 and input_precision == "tf32x3":
        return Schedule(instr, emulation="tf32x3", restart_every=block_k, out_dtype=out, source=src)
    return Schedule(instr, out_dtype=out, source=src)


@strict_options
def triton_matmul(a, b, *, block_k: int, input_precision: str = "tf32", max_num_imprecise_acc=None,
                  out_dtype=np.float32, acc_dtype=np.float32, block_m=None, block_n=None, num_warps=None,
                  num_stages=None, pattern: str = "dot_acc") -> np.ndarray:
    """The output, bit for bit, of the standard Triton tiled matmul for ``a`` (M, K) and ``b`` (K, N)
    in the kernel's input dtype (see the module table for what is modelled): :func:`triton_schedule`
    run by :meth:`Schedule.run`.  ``acc_dtype=numpy.float16``: the kernel's ``acc`` is f16
    (``tl.dot(a, b, acc, out_dtype=tl.float16)``).

    ``block_m``, ``block_n``, ``num_warps`` (and ``num_stages``, ``pattern``: ``"dot_acc"`` for
    ``acc = tl.dot(a, b, acc)``, ``"add"`` for ``acc += tl.dot(a, b)``) are the kernel's configuration;
    Triton 3.6 lowers to wgmma or to mma.sync by them (:func:`refmodel.golden.triton_lowering`).  An FP8 dot
    needs them; f16, bf16 and tf32 sum the same either way.  Rows and columns of the output are
    independent, so M need only be a multiple of 64 and N of 8 (the model's own tiling); K a multiple of
    ``block_k``.
    """
    a = as_array("a", a)
    b = as_array("b", b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise InputError(f"a must be (M, K) and b (K, N), got {a.shape} and {b.shape}")
    _instr(a, b, input_precision)               # the input-type and precision rules
    M, K = a.shape
    N = b.shape[1]
    sched = triton_schedule(a.dtype, K, block_k=block_k, input_precision=input_precision,
                            max_num_imprecise_acc=max_num_imprecise_acc, out_dtype=out_dtype, acc_dtype=acc_dtype,
                            dtype_b=b.dtype, block_m=block_m, block_n=block_n, num_warps=num_warps,
                            num_stages=num_stages, pattern=pattern)
    if M % 64 or N % 8:
        raise InputError(f"M must be a multiple of 64 and N of 8, got M={M}, N={N}")
    with np.errstate(all="ignore"):
        return sched.run(a, b)


def _acc_name(acc_dtype) -> str:
    try:
        dt = np.dtype(acc_dtype)
    except TypeError:
        dt = None
    if dt == np.float32:
        return "f32"
    if dt == np.float16:
        return "f16"
    raise InputError(f"acc_dtype must be numpy.float32 or numpy.float16, got {_describe(acc_dtype)}")


def _store(acc: np.ndarray, od: np.dtype) -> np.ndarray:
    """``acc.to(out_dtype)`` (cvt.rn: to nearest even, overflow to Inf): refmodel.gemm's output rule."""
    return _convert(acc, od)


