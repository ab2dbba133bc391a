"""Golden model of cuSPARSELt's 2:4 sparse GEMM on Hopper, as PyTorch calls it
(``torch.sparse.to_sparse_semi_structured(a)`` + ``torch.mm``; ``torch._cslt_compress`` +
``torch._cslt_sparse_mm``), recorded on the H200 (cuSPARSELt 0.8.0 in torch 2.11, fixtures/cusparselt).

What reproduces it bit for bit (:class:`refmodel.golden.Schedule` executed by refmodel):

==================================  ==========================================================
kernel (``sm90_xmma_sparse_gemm_…``)  schedule
==================================  ==========================================================
``…segment_k_off…``                 one chain of sparse wgmma (``.sp`` k32 f16/bf16, k64 e4m3)
                                    over K, f32 accumulator, cvt.rn to the output dtype
``…segment_k_on…``                  K in S segments (each a fresh chain), f32 partials added
                                    pairwise (a tree) with add.f32; S and the order are not in the kernel name:
                                    known for the recorded shapes (:data:`RECORDED`), refused
                                    elsewhere unless ``schedule=`` names them
``…split_k_kernel…``                a further split-K reduction: not modelled (refused)
==================================  ==========================================================

``a`` is (M, K) dense and already 2:4 pruned along K (PyTorch's convention), ``b`` (K, N); any M and N
(zero-padded inside to the instruction), K a multiple of the instruction's K.
"""

from __future__ import annotations

import re
from typing import Sequence, Union

import ml_dtypes
import numpy as np

from ..errors import DTypeError, InputError
from ..validate import _describe, as_array
from .kernel_regions import kernel_names, ScheduleWarning, warn_if_switching
from .schedule import OUT_DTYPES, Schedule, load_schedule

_IN = {np.dtype(np.float16): "f16", np.dtype(ml_dtypes.bfloat16): "bf16", np.dtype(ml_dtypes.float8_e4m3fn): "e4m3"}
_KINSTR = {"f16": 32, "bf16": 32, "e4m3": 64}
VERSION = "cuSPARSELt 0.8.0 (torch 2.11.0+cu130)"

# segment-K schedules recorded on the H200: (dtype, M, N, K, tile) -> (segments, reduction order, evidence)
RECORDED = {
    ("f16", 64, 64, 8192, "128x256x64"): (8, "tree", "2 calls, 8,192 outputs, 0 mismatches (the reverse order fits "
                                                     "too, split order misses 1)"),
    ("f16", 1024, 1024, 4096, "128x256x64"): (4, "tree", "262,144 outputs (256 rows) checked, 0 mismatches (split "
                                                         "order fits too, reverse misses 1 of 4,096 sampled)"),
    ("e4m3", 64, 64, 8192, "128x64x256"): (4, "tree", "4,096 recorded outputs, 0 mismatches; inferred on the H200 "
                                                      "and verified on 1,003,520 outputs (fixtures/schedules): "
                                                      "tree or reverse, split order misses"),
}


def _kernel_of(kernel: Union[str, Sequence[str]]) -> str:
    names = kernel_names(kernel)
    sparse = [k for k in names if "sparse_gemm" in k or "cusparselt" in k]
    if not sparse:
        raise InputError(f"no cuSPARSELt kernel among {', '.join(n[:60] for n in names)[:200]}: "
                         f"cusparselt_matmul models sm90_xmma_sparse_gemm_... kernels")
    split = [k for k in sparse if "split_k" in k]
    return split[0] if split else sparse[0]


def cusparselt_schedule(dtype: str, M: int, N: int, K: int, *, out_dtype: str,
                        kernel: Union[str, Sequence[str], None] = None) -> Schedule:
    """The schedule of the cuSPARSELt call for ``dtype`` ('f16', 'bf16', 'e4m3') at M x N x K: one chain
    without ``kernel``; from the kernel name otherwise (refused where the name implies segments or a
    split whose count was not recorded for this shape)."""
    instr = f"wgmma.mma_async.sp.sync.aligned.m64n8k{_KINSTR[dtype]}.f32.{dtype}.{dtype}"
    src = {"library": VERSION, "shape": f"{M}x{N}x{K}", "device": "H200"}
    if kernel is None:
        return Schedule(instr, out_dtype=out_dtype, source={**src, "evidence": "default: one K chain"})
    name = _kernel_of(kernel)
    tile = re.search(r"tilesize(\d+x\d+x\d+)", name)
    src["kernel"] = name
    if "split_k" in name:
        raise InputError(f"cuSPARSELt ran a split-K kernel ({name[:90]}) at {M}x{N}x{K}: its split count and "
                         f"reduction are not modelled; pass schedule= (a stored or inferred Schedule)")
    if "segment_k_on" in name:
        key = (dtype, M, N, K, tile.group(1) if tile else "?")
        if key not in RECORDED:
            raise InputError(f"cuSPARSELt ran a segment-K kernel ({name[:90]}) at {M}x{N}x{K}, whose segment count "
                             f"was not recorded for this shape; pass schedule= (a stored or inferred Schedule)")
        segs, order, evidence = RECORDED[key]
        return Schedule(instr, splits=segs, split_align=64, reduce=order, out_dtype=out_dtype,
                        source={**src, "evidence": f"recorded: {evidence}"})
    return Schedule(instr, out_dtype=out_dtype, source={**src, "evidence": "recorded: segment_k_off kernels are one K chain"})


def cusparselt_matmul(a, b, *, out_dtype, kernel=None, schedule=None) -> np.ndarray:
    """cuSPARSELt's ``a @ b`` for a 2:4-pruned ``a`` (M, K) and a dense ``b`` (K, N), bit for bit.

    ``out_dtype``: numpy.float16 / ml_dtypes.bfloat16 / numpy.float32 or 'f16' / 'bf16' / 'f32'
    (f16/bf16 inputs: their own dtype is what torch.mm returns).  ``kernel``: the kernel name(s) from
    torch's profiler (decides the schedule; refused where it implies an unrecorded split);
    ``schedule``: a :class:`Schedule` (or its JSON / file) to run instead.  Without either, a shape
    in or next to a region where cuSPARSELt was seen running segment-K or split-K kernels gives a
    :class:`~refmodel.golden.ScheduleWarning`.
    """
    a = as_array("a", a)
    b = as_array("b", b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or 0 in a.shape or 0 in b.shape:
        raise InputError(f"a must be (M, K) and b (K, N) with M, N, K > 0, got {a.shape} and {b.shape}")
    if np.dtype(a.dtype) not in _IN or a.dtype != b.dtype:
        raise DTypeError(f"a and b must share one of float16, bfloat16, float8_e4m3fn, got {a.dtype} and {b.dtype}")
    dtype = _IN[np.dtype(a.dtype)]
    od = _out_name(out_dtype)
    M, K = a.shape
    N = b.shape[1]
    if K % _KINSTR[dtype]:
        raise InputError(f"K must be a multiple of {_KINSTR[dtype]} for {dtype} (the sparse instruction's K), got {K}")
    _check_2_4(a)
    if schedule is not None:
        if kernel is not None:
            raise InputError("give kernel= or schedule=, not both")
        sched = load_schedule(schedule)
        if sched.out_dtype not in (None, od):
            raise InputError(f"the schedule stores {sched.out_dtype}, the call asks for {od}")
        sched = sched.replace(out_dtype=od)
    else:
        sched = cusparselt_schedule(dtype, M, N, K, out_dtype=od, kernel=kernel)
        if kernel is None:
            warn_if_switching(f"sparse_{dtype}", M, N, K, "cuSPARSELt", stacklevel=3)
    if sched.splits > 1 and _has_specials(a, b):
        import warnings

        warnings.warn("cuSPARSELt's segment-K reduction is verified on ordinary inputs only: on the special family "
                      "(NaN, ±Inf, max-magnitude elements) the H200 matched no reduction order tried "
                      "(bench/results/schedules_h200/cusparselt_f16_64x64x8192.json)", ScheduleWarning, stacklevel=2)
    Mp = -(-M // 64) * 64
    ap = a if Mp == M else np.concatenate([a, np.zeros((Mp - M, K), a.dtype)])
    return sched.run(ap, b)[:M]


def _has_specials(a: np.ndarray, b: np.ndarray) -> bool:
    """NaN, Inf or a largest-magnitude element in either operand."""
    for x in (a, b):
        f = np.abs(x.astype(np.float32))
        if not np.isfinite(f).all() or (f == np.float32(float(ml_dtypes.finfo(x.dtype).max))).any():
            return True
    return False


def _out_name(out_dtype) -> str:
    if isinstance(out_dtype, str) and out_dtype in OUT_DTYPES:
        return out_dtype
    try:
        dt = np.dtype(out_dtype)
    except TypeError:
        dt = None
    for k, v in OUT_DTYPES.items():
        if dt == v:
            return k
    raise InputError(f"out_dtype must be numpy.float16, ml_dtypes.bfloat16, numpy.float32 or 'f16'/'bf16'/'f32', "
                     f"got {_describe(out_dtype)}")


def _check_2_4(a: np.ndarray) -> None:
    from ..dtypes import bits_of

    M, K = a.shape
    bits = bits_of(np.ascontiguousarray(a))
    sign = {1: 0x80, 2: 0x8000}[a.dtype.itemsize]
    nz = (bits & ~np.asarray(sign, bits.dtype)) != 0
    counts = nz.reshape(M, K // 4, 4).sum(-1)
    bad = np.argwhere(counts > 2)
    if bad.size:
        r, g = (int(v) for v in bad[0])
        raise InputError(f"a is not 2:4 sparse along K: row {r}, columns {4 * g}..{4 * g + 3} hold "
                         f"{int(counts[r, g])} nonzeros (prune it first, e.g. refmodel.prune_2_4)")


__all__ = ["cusparselt_matmul", "cusparselt_schedule", "RECORDED", "ScheduleWarning"]
