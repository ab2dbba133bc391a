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

from ..errors import InputError
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


#: the scaling mode a cuBLASLt FP8 kernel name shows (torch 2.11, sm_90; cuBLASLt names A and B the other
#: way round from torch): name fragment -> torch's mode; a name with none of them is per tensor
KERNEL_MODES = {"Ablk128_Bvec128": "block_1x128_128x128", "Avec128_Bblk128": "block_128x128_1x128",
                "Avec128_Bvec128": "block_1x128_1x128", "_ovscale_": "row"}


def kernel_mode(name: str) -> str:
    """The scaling mode of a cuBLASLt FP8 GEMM kernel from its name (module table)."""
    for frag, mode in KERNEL_MODES.items():
        if frag in name:
            return mode
    return "tensor"


def scaled_mm(a, b_nk, scale_a, scale_b, *, bias=None, out_dtype: str = "bf16", use_fast_accum: bool = False,
              fmt_a: str = "e4m3", fmt_b: str = "e4m3", kernel=None, schedule=None) -> np.ndarray:
    """``torch._scaled_mm(a, b_nk.T, scale_a, scale_b, bias, out_dtype, use_fast_accum)`` on Hopper, bit for
    bit for the kernel cuBLASLt ran, in every scaling mode (per tensor, row-wise, the three block-wise
    ones; :mod:`refmodel.numerics.scaled_mm`): ``kernel`` (from torch's profiler) picks the schedule,
    ``schedule`` runs a stored one; without either, a shape where cuBLASLt switches to split-K warns.
    A split-K kernel is modelled for per-tensor scales with ``use_fast_accum=True`` and no bias at the
    recorded shapes (:data:`RECORDED_SPLITS`); any other split-K call is refused."""
    from ..numerics import scaled_mm as unsplit

    a_, b_, sa, sb, bias_, mode = unsplit.check_scaled_mm(a, b_nk, scale_a, scale_b, bias, out_dtype,
                                                          use_fast_accum, fmt_a, fmt_b)
    M, K = a_.shape
    N = b_.shape[0]
    if kernel is not None and schedule is not None:
        raise InputError("give kernel= or schedule=, not both")
    name = None
    if kernel is not None:
        name = _gemm_kernel(kernel)
        km = kernel_mode(name)
        if km != mode:
            raise InputError(f"the kernel {name[:80]} runs {km} scaling, but the scales given are {mode} "
                             f"(shapes {tuple(np.shape(sa))} and {tuple(np.shape(sb))})")
        if ("_bias_" in name) != (bias is not None):
            raise InputError(f"the kernel {name[:80]} {'adds' if '_bias_' in name else 'adds no'} bias, but "
                             f"bias={'None' if bias is None else 'an array'} was given")
    if schedule is None and (name is None or "splitK" not in name):
        d = unsplit.scaled_mm(a_, b_, sa, sb, bias=bias_, out_dtype=out_dtype, use_fast_accum=use_fast_accum,
                              fmt_a=fmt_a, fmt_b=fmt_b)
        if name is None and mode in ("tensor", "row"):
            op = "scaled_mm_fast" if use_fast_accum else "scaled_mm_precise"
            warn_if_switching(op, M, N, K, "cuBLASLt (torch._scaled_mm)", stacklevel=3)
        elif name is None:
            warn_if_switching("scaled_mm_precise", M, N, K, f"cuBLASLt (torch._scaled_mm, {mode} scales)",
                              stacklevel=3)
        return d
    if mode not in ("tensor", "row") or bias is not None:
        raise InputError(f"a split-K cuBLASLt kernel with {mode} scales{' and a bias' if bias is not None else ''} "
                         f"is not modelled (its split count and where the scales and bias enter were not "
                         f"established on the H200)")
    if schedule is not None:
        sched = load_schedule(schedule)
    else:
        sched = scaled_mm_schedule(M, N, K, use_fast_accum=use_fast_accum, rowwise=mode == "row",
                                   out_dtype=out_dtype, fmt_a=fmt_a, fmt_b=fmt_b, kernel=kernel)
    bv = np.ascontiguousarray(b_.T)
    return sched.run(a_, bv, scale_a=sa, scale_b=sb)


_FP8 = {"e4m3": np.dtype(ml_dtypes.float8_e4m3fn), "e5m2": np.dtype(ml_dtypes.float8_e5m2)}


__all__ = ["scaled_mm", "scaled_mm_schedule", "RECORDED_SPLITS", "kernel_mode", "KERNEL_MODES"]
