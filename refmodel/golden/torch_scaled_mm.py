"""``torch._scaled_mm`` (cuBLASLt FP8 GEMM) as a schedule, with the kernel cuBLASLt picked.

:func:`refmodel.numerics.scaled_mm.scaled_mm` is the schedule of the unsplit nvjet kernels (fixtures/torch).
At small M x N with a long K, cuBLASLt runs split-K kernels instead (``nvjet_…_splitK_TNT`` plus
``splitKreduce_kernel``; fixtures/kernel_map): with ``use_fast_accum=True`` each split is a fresh k32
chain, the f32 partials are added in split order, then the epilogue scales and rounds — recorded on the
H200 for the shapes of :data:`RECORDED_SPLITS` (fixtures/cublas/scaled_mm_split.npz), where the unsplit
schedule misses up to 99 % of the outputs.  The split count is not in the kernel name: elsewhere a
split-K kernel is refused unless ``schedule=`` names it, and a call without ``kernel=`` in or next to a
split-K region warns (:class:`~refmodel.golden.ScheduleWarning`).
"""

from __future__ import annotations

from typing import Sequence, Union

import ml_dtypes
import numpy as np

from ..errors import DTypeError, InputError
from ..validate import _describe, as_array, as_float32, check_flag
from .kernel_regions import kernel_names, warn_if_switching
from .schedule import Schedule, load_schedule

VERSION = "cuBLASLt 13.1 (torch 2.11.0+cu130)"
# (M, N, K) -> split count of the fast-accumulation splitK kernels recorded on the H200
RECORDED_SPLITS = {(64, 64, 8192): 3, (128, 128, 16384): 6, (64, 256, 8192): 3}


def _gemm_kernel(kernel: Union[str, Sequence[str]]) -> str:
    names = kernel_names(kernel)
    gemm = [k for k in names if "nvjet" in k or "gemm" in k.lower() and "splitKreduce" not in k]
    if not gemm:
        raise InputError(f"no cuBLASLt GEMM kernel among {', '.join(n[:60] for n in names)[:200]}")
    return gemm[0]


def scaled_mm_schedule(M: int, N: int, K: int, *, use_fast_accum: bool, rowwise: bool, out_dtype: str,
                       fmt_a: str = "e4m3", fmt_b: str = "e4m3", kernel=None) -> Schedule:
    """The schedule of ``torch._scaled_mm`` at M x N x K: unsplit without ``kernel`` or for an unsplit
    kernel; for a ``splitK`` kernel the recorded split count, refused where none was recorded."""
    instr = f"wgmma.mma_async.sync.aligned.m64n8k32.f32.{fmt_a}.{fmt_b}"
    src = {"library": VERSION, "shape": f"{M}x{N}x{K}", "device": "H200"}
    base = dict(promote_every=None if use_fast_accum else 4, epilogue_scale="rowwise" if rowwise else "tensor",
                out_dtype=out_dtype)
    if kernel is None:
        return Schedule(instr, **base, source={**src, "evidence": "default: the unsplit kernel (fixtures/torch)"})
    name = _gemm_kernel(kernel)
    src["kernel"] = name
    if "splitK" not in name:
        return Schedule(instr, **base, source={**src, "evidence": "recorded: unsplit nvjet kernels (fixtures/torch)"})
    if not use_fast_accum:
        raise InputError(f"cuBLASLt ran a split-K kernel ({name[:80]}) at {M}x{N}x{K} with use_fast_accum=False: "
                         f"its split count is not determined by the recordings; pass schedule=")
    splits = RECORDED_SPLITS.get((M, N, K))
    if splits is None:
        raise InputError(f"cuBLASLt ran a split-K kernel ({name[:80]}) at {M}x{N}x{K}, whose split count was not "
                         f"recorded for this shape; pass schedule= (a stored or inferred Schedule)")
    return Schedule(instr, **base, splits=splits, split_align=128,
                    source={**src, "evidence": f"recorded: S = {splits} (fixtures/cublas/scaled_mm_split.npz)"})


def scaled_mm(a, b_nk, scale_a, scale_b, *, out_dtype: str = "bf16", use_fast_accum: bool = False,
              fmt_a: str = "e4m3", fmt_b: str = "e4m3", kernel=None, schedule=None) -> np.ndarray:
    """``torch._scaled_mm(a, b_nk.T, scale_a, scale_b, out_dtype, use_fast_accum)`` on Hopper, bit for bit
    for the kernel cuBLASLt ran: ``kernel`` (from torch's profiler) picks the schedule, ``schedule``
    runs a stored one; without either, a shape where cuBLASLt switches to split-K warns.  Arguments as
    :func:`refmodel.numerics.scaled_mm.scaled_mm` (whose checks it applies)."""
    from ..numerics import scaled_mm as unsplit

    a_ = as_array("a", a)
    b_ = as_array("b_nk", b_nk)
    if kernel is None and schedule is None:
        d = unsplit.scaled_mm(a, b_nk, scale_a, scale_b, out_dtype=out_dtype, use_fast_accum=use_fast_accum,
                              fmt_a=fmt_a, fmt_b=fmt_b)
        op = "scaled_mm_fast" if use_fast_accum else "scaled_mm_precise"
        warn_if_switching(op, a_.shape[0], b_.shape[0], a_.shape[1], "cuBLASLt (torch._scaled_mm)", stacklevel=3)
        return d
    if kernel is not None and schedule is not None:
        raise InputError("give kernel= or schedule=, not both")
    _check(a_, b_, out_dtype, use_fast_accum, fmt_a, fmt_b)
    sa, sb = as_float32("scale_a", scale_a), as_float32("scale_b", scale_b)
    M, K = a_.shape
    N = b_.shape[0]
    if schedule is not None:
        sched = load_schedule(schedule)
    else:
        sched = scaled_mm_schedule(M, N, K, use_fast_accum=use_fast_accum, rowwise=sa.ndim > 0,
                                   out_dtype=out_dtype, fmt_a=fmt_a, fmt_b=fmt_b, kernel=kernel)
    dt = _FP8
    av = a_.view(dt[fmt_a]) if a_.dtype == np.uint8 else a_
    bv = np.ascontiguousarray((b_.view(dt[fmt_b]) if b_.dtype == np.uint8 else b_).T)
    return sched.run(av, bv, scale_a=sa, scale_b=sb)


_FP8 = {"e4m3": np.dtype(ml_dtypes.float8_e4m3fn), "e5m2": np.dtype(ml_dtypes.float8_e5m2)}


def _check(a, b_nk, out_dtype, use_fast_accum, fmt_a, fmt_b) -> None:
    """The unsplit model's domain (refmodel.numerics.scaled_mm.scaled_mm), checked without computing it."""
    check_flag("use_fast_accum", use_fast_accum)
    for nm, f in (("fmt_a", fmt_a), ("fmt_b", fmt_b)):
        if not isinstance(f, str) or f not in _FP8:
            raise InputError(f"{nm} must be 'e4m3' or 'e5m2', got {_describe(f)}")
    for nm, x, f in (("a", a, fmt_a), ("b_nk", b_nk, fmt_b)):
        if x.dtype not in (np.dtype(np.uint8), _FP8[f]):
            raise DTypeError(f"{nm} must be uint8 codes or a {_FP8[f].name} array for {nm[0]}'s format {f}, got {x.dtype}")
        if x.ndim != 2:
            raise InputError(f"{nm} must be a 2-D array, got shape {x.shape}")
    if a.shape[1] != b_nk.shape[1]:
        raise InputError(f"a (M, K) and b_nk (N, K) must share K, got {a.shape} and {b_nk.shape}")
    if not isinstance(out_dtype, str) or out_dtype not in ("f32", "bf16", "f16"):
        raise InputError(f"out_dtype must be one of f32, bf16, f16, got {_describe(out_dtype)}")
    m, k = a.shape
    if m % 64 or b_nk.shape[0] % 8 or k % 128:
        raise InputError(f"this model covers M % 64 == 0, N % 8 == 0, K % 128 == 0; got {m}x{b_nk.shape[0]}x{k}")


__all__ = ["scaled_mm", "scaled_mm_schedule", "RECORDED_SPLITS"]
