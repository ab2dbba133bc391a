"""Golden model of cuBLAS GEMMs on Hopper (cuBLAS 13.1.0.3 through torch 2.11+cu130, recorded on the H200).

What reproduces the recorded ``torch.matmul`` (bf16, f16) and ``torch._scaled_mm`` (e4m3, unit
scales, f32 out, ``use_fast_accum=False``) calls bit for bit (``python tools/cublas_fit.py``
recomputes every count, and the rejected alternatives, from fixtures/cublas):

=========================================  =================================================================
kernel that ran                            schedule (refmodel.gemm)
=========================================  =================================================================
``nvjet_sm90_{tst,hsh}_*`` (no splitK)      one wgmma k16 chain (f32 accumulator) over all of K, cvt.rn
``nvjet_sm90_{tst,hsh}_*_splitK`` +         K cut into S chunks of ``round_up(ceil(K/S), 64)`` (the last one
``splitKreduce_kernel<..., float, ...>``    takes what is left); each chunk a fresh wgmma k16 chain from +0;
                                            the f32 partials added in split order ``((P0+P1)+P2)+...``
                                            (RN f32 adds), then one cvt.rn to bf16/f16
``cutlass_75_tensorop_s1688gemm_bf16_*``    the same with ``mma.sync m16n8k8`` (a chain of fused 8-term
+ ``splitKreduce_kernel<..., bf16 ...>``    groups), chunks of ``round_up(ceil(K/S), 8)`` (CUTLASS's
                                            gemm_k_size), f32 partials (NOT rounded to bf16), f32 adds
``nvjet_sm90_qqsss_*`` (e4m3, f32 out)      per chunk a wgmma k32 chain promoted into f32 every 4
                                            instructions (K = 128, :func:`refmodel.scaled_mm`'s schedule);
                                            splitK chunks aligned to 128
=========================================  =================================================================

The split count S is not in the kernel name; :func:`cublas_schedule` returns the S found for each
recorded (kernel, shape) and says when the data did not pin it down (see its table).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional, Sequence, Union

import ml_dtypes
import numpy as np

from ..errors import DTypeError, InputError
from ..validate import _describe, as_array, strict_options
from .schedule import split_bounds  # noqa: F401 (cuBLAS's and CUTLASS's gemm_k_size rule; public here too)

_BF16 = np.dtype(ml_dtypes.bfloat16)
_E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
_E5M2 = np.dtype(ml_dtypes.float8_e5m2)
_NAMES = {np.dtype(np.float16): "f16", _BF16: "bf16", _E4M3: "e4m3", _E5M2: "e5m2"}
_OUT = {"f32": np.dtype(np.float32), "bf16": _BF16, "f16": np.dtype(np.float16)}
_REDUCE = {None: None, "f32": None, "bf16": _BF16, "f16": np.dtype(np.float16)}

#: The tensor-core instructions a cuBLAS kernel chains along K.
INSTRS = ("wgmma", "mma.sync.m16n8k8")


def _dtype_name(a: np.ndarray, b: np.ndarray) -> str:
    da, db = np.dtype(a.dtype), np.dtype(b.dtype)
    if da not in _NAMES or db not in _NAMES:
        raise DTypeError(f"a and b must be bfloat16, float16, float8_e4m3fn or float8_e5m2 arrays, got {da} and {db}")
    na, nb = _NAMES[da], _NAMES[db]
    if na != nb and not (na in ("e4m3", "e5m2") and nb in ("e4m3", "e5m2")):
        raise DTypeError(f"a and b must have the same dtype (or both be FP8), got {da} and {db}")
    return na


def _wgmma(na: str, nb: str) -> str:
    if na in ("e4m3", "e5m2"):
        return f"wgmma.mma_async.sync.aligned.m64n8k32.f32.{na}.{nb}"
    return f"wgmma.mma_async.sync.aligned.m64n8k16.f32.{na}.{na}"


def _check(a, b, splits, split_align, instr, reduce_dtype, out_dtype):
    a = as_array("a", a, what="an (M, K) array")
    b = as_array("b", b, what="a (K, N) array")
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or 0 in a.shape or 0 in b.shape:
        raise InputError(f"a must be (M, K) and b (K, N) with M, N, K > 0, got {a.shape} and {b.shape}")
    name = _dtype_name(a, b)
    fp8 = name in ("e4m3", "e5m2")
    if instr is None:
        instr = "wgmma"
    if not isinstance(instr, str) or instr not in INSTRS:
        raise InputError(f"instr must be None, 'wgmma' or 'mma.sync.m16n8k8', got {_describe(instr)}")
    if instr == "mma.sync.m16n8k8" and name not in ("bf16", "f16"):
        raise InputError(f"mma.sync.m16n8k8 takes bf16 or f16 inputs, got {name}")
    if not (reduce_dtype is None or isinstance(reduce_dtype, str)) or reduce_dtype not in _REDUCE:
        raise InputError(f"reduce_dtype must be None, 'f32', 'bf16' or 'f16', got {_describe(reduce_dtype)}")
    if out_dtype is None:
        out_dtype = "f32" if fp8 else name
    if not isinstance(out_dtype, str) or out_dtype not in _OUT:
        raise InputError(f"out_dtype must be None, 'f32', 'bf16' or 'f16', got {_describe(out_dtype)}")
    if split_align is None:
        split_align = 128 if fp8 else (8 if instr == "mma.sync.m16n8k8" else 64)
    if fp8 and (isinstance(split_align, bool) or not isinstance(split_align, (int, np.integer))
                or split_align <= 0 or split_align % 128):
        raise InputError(f"split_align must be a positive multiple of 128 for FP8 (whole promotion stages), "
                         f"got {_describe(split_align)}")
    return a, b, name, fp8, instr, split_align, out_dtype


@strict_options
def split_partials(a, b, *, splits: int = 1, split_align: Optional[int] = None,
                   instr: Optional[str] = None) -> list[np.ndarray]:
    """The float32 partial sums, one per split, before the reduction (see :func:`cublas_matmul`)."""
    a, b, name, fp8, instr, split_align, _ = _check(a, b, splits, split_align, instr, None, None)
    chunk = matmul_schedule(name, splits=1, split_align=split_align, instr=instr, reduce_dtype=None, out_dtype=None,
                            dtype_b=_NAMES[np.dtype(b.dtype)])    # one fresh chain: the f32 partial of a chunk
    bnd = split_bounds(a.shape[1], splits, split_align)
    return [np.ascontiguousarray(chunk.run(a[:, k0:k1], b[k0:k1]), dtype=np.float32)
            for k0, k1 in zip(bnd[:-1], bnd[1:])]


#: cuBLAS's epilogues on sm_90 (nvjet kernels, torch 2.11; fixtures/layers), by kernel-name fragment
EPILOGUES = {
    "bz": "D = cvt(acc)  (beta = 0: C is not read)",
    "bias": "D = cvt(RN(acc + bias[n]))  (F.linear's bias; addmm with a 1-D C and alpha = beta = 1)",
    "badd": "D = cvt(RN(cvt(acc) + C))  (alpha = beta = 1, no split-K: C added to the rounded output)",
    "bx": "D = cvt(fma(alpha, acc, RN(beta * C)))  (any other alpha, beta; no split-K)",
    "bx_splitK": "D = cvt(fma(beta, C, RN(alpha * acc)))  (split-K: in splitKreduce, after the partials' sum)",
}


def epilogue_kind(*, split: bool, bias: bool, c: bool, alpha: float, beta: float, kernel: Optional[str] = None) -> str:
    """Which of :data:`EPILOGUES` cuBLAS runs for this call: from the kernel name when given (checked
    against the arguments), else from torch's and cuBLAS's rules as recorded."""
    if bias:
        kind = "bias"
    elif not c or beta == 0:
        kind = "bz"
    elif split:
        kind = "bx_splitK"
    elif alpha == 1 and beta == 1:
        kind = "badd"
    else:
        kind = "bx"
    if kernel is not None:
        frag = "bias" if "_bias_" in kernel or "splitK_bias" in kernel else \
            "badd" if "_badd_" in kernel else "bx" if "_bx_" in kernel else "bz" if "_bz_" in kernel else None
        want = {"bx_splitK": "bx"}.get(kind, kind)
        if frag is not None and frag != want:
            raise InputError(f"the kernel {kernel[:70]} runs the '{frag}' epilogue, but these arguments ask for "
                             f"'{want}' ({EPILOGUES[kind]})")
    if kind == "bz" and alpha != 1:
        raise InputError(f"alpha = {alpha} with no C (or beta = 0) was not recorded on the H200: cuBLAS's "
                         f"scaling of a lone product is not established (scale the output yourself, or pass alpha=1)")
    return kind


def apply_epilogue(acc: np.ndarray, kind: str, out_dtype: str, *, bias=None, c=None, alpha: float = 1.0,
                   beta: float = 1.0) -> np.ndarray:
    """One of :data:`EPILOGUES` on the float32 accumulator ``acc`` (NaNs canonical), then cvt.rn."""
    from ..numerics.gemm import _convert
    from ..numerics.promotion import canonical_nan_f32 as cn
    from ..numerics.promotion import fma_f32_array
    from .schedule import OUT_DTYPES

    od = OUT_DTYPES[out_dtype]
    acc = np.asarray(acc, np.float32)
    al, be = np.float32(alpha), np.float32(beta)
    with np.errstate(all="ignore"):
        if kind == "bz":
            d = acc
        elif kind == "bias":
            d = cn(acc + np.asarray(bias).astype(np.float32))
        elif kind == "badd":
            d = cn(_convert(acc, od).astype(np.float32) + np.asarray(c).astype(np.float32))
        else:
            cc = np.broadcast_to(np.asarray(c).astype(np.float32), acc.shape)
            x, y, z = (al, acc, cn(be * cc)) if kind == "bx" else (be, cc, cn(al * acc))
            d = fma_f32_array(x, y, z)
    return _convert(cn(d), od)


def _check_epilogue_args(a, b, bias, c, alpha, beta, out_dtype):
    """The epilogue arguments against the (B,) M x N output; returns typed bias, c, float alpha, beta."""
    M, N = a.shape[-2], b.shape[-1]
    for nm, v in (("alpha", alpha), ("beta", beta)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not np.isfinite(v):
            raise InputError(f"{nm} must be a finite real number, got {_describe(v)}")
    od = _OUT[out_dtype]
    if bias is not None:
        if c is not None:
            raise InputError("give bias= (F.linear) or c= (addmm), not both")
        bias = as_array("bias", bias, what="an (N,) array")
        if bias.shape != (N,):
            raise InputError(f"bias must have shape (N,) = ({N},), got {bias.shape}")
        if bias.dtype != od:
            raise DTypeError(f"bias must be {od.name} like the output, got {bias.dtype}")
        if alpha != 1 or beta != 1:
            raise InputError("bias= is F.linear's bias: alpha and beta stay 1 (use c= for addmm)")
    if c is not None:
        c = as_array("c", c, what="an array broadcastable to the output")
        if c.dtype != od:
            raise DTypeError(f"c must be {od.name} like the output, got {c.dtype}")
        out_shape = a.shape[:-2] + (M, N) if a.ndim == 3 else (M, N)
        try:
            np.broadcast_shapes(c.shape, out_shape)
        except ValueError:
            raise InputError(f"c of shape {c.shape} does not broadcast to the output {out_shape}") from None
        if c.ndim == 1 and alpha == 1 and beta == 1:       # torch's addmm takes the bias epilogue then
            c, bias = None, c
    return bias, c, float(alpha), float(beta)


@strict_options
def cublas_matmul(a, b, *, bias=None, c=None, alpha: float = 1.0, beta: float = 1.0, splits: Optional[int] = None,
                  split_align: Optional[int] = None, instr: Optional[str] = None, reduce_dtype: Optional[str] = None,
                  out_dtype: Optional[str] = None, kernel=None, schedule=None,
                  input_precision: Optional[str] = None) -> np.ndarray:
    """cuBLAS's ``a @ b`` on Hopper, bit for bit for the recorded kernels (module table), with its epilogues.

    ``a`` (M, K), ``b`` (K, N): bfloat16, float16 or FP8 (e4m3/e5m2; unit scales, the precise
    ``use_fast_accum=False`` mode); batched ``a`` (B, M, K) with ``b`` (B, K, N) or (K, N)
    (``torch.bmm`` / ``matmul``: every batch the same schedule).  Epilogues (:data:`EPILOGUES`):
    ``bias`` (N,) — ``F.linear(x, w, bias)``; ``c``, ``alpha``, ``beta`` — ``torch.addmm(c, a, b,
    beta=, alpha=)`` / ``baddbmm`` (c broadcastable to the output; a 1-D c with alpha = beta = 1 is
    the bias epilogue, as torch runs it).  ``splits``: split-K count S (1 = no split-K).
    ``split_align``: chunk alignment along K (None: 64 for wgmma bf16/f16, 128 for FP8, 8 for
    mma.sync.m16n8k8).  ``instr``: None/'wgmma' (nvjet kernels) or 'mma.sync.m16n8k8'
    (``cutlass_75_tensorop_s1688gemm``).  ``reduce_dtype``: None/'f32' keeps the partials in float32
    (every recorded call); 'bf16'/'f16' rounds each partial first (a refuted hypothesis, kept for
    comparison).  ``out_dtype``: None (the input dtype; f32 for FP8), 'f32', 'bf16' or 'f16'.
    ``kernel``: the kernel name(s) torch's profiler showed: the schedule and the epilogue come from
    :func:`cublas_schedule` (an unrecorded split-K shape is refused); ``schedule``: a stored or
    inferred :class:`~refmodel.golden.Schedule` to run.  With none of ``splits``, ``kernel`` and
    ``schedule``, a shape where cuBLAS was seen switching to split-K warns
    (:class:`~refmodel.golden.ScheduleWarning`) and the bits are those of one K chain.
    float32 inputs: ``input_precision="tf32"`` (``torch.backends.cuda.matmul.allow_tf32 = True``) runs
    :mod:`refmodel.golden.cublas_tf32` for the kernels given (``kernel=`` needed; recorded shapes only);
    without TF32 cuBLAS runs SIMT sgemm kernels, which are not modelled.
    """
    a_ = np.asarray(a) if isinstance(a, np.ndarray) else None
    if a_ is not None and a_.dtype == np.float32 or input_precision is not None:
        return _tf32(a, b, bias=bias, c=c, alpha=alpha, beta=beta, kernel=kernel, input_precision=input_precision,
                     others={"splits": splits, "split_align": split_align, "instr": instr, "reduce_dtype": reduce_dtype,
                             "schedule": schedule}, out_dtype=out_dtype)
    given = [nm for nm, v in (("splits", splits), ("kernel", kernel), ("schedule", schedule)) if v is not None]
    if len(given) > 1:
        raise InputError(f"give one of splits=, kernel= and schedule=, got {' and '.join(given)}")
    a = as_array("a", a, what="an (M, K) or (B, M, K) array")
    b = as_array("b", b, what="a (K, N) or (B, K, N) array")
    if a.ndim == 3 or b.ndim == 3:
        if a.ndim != 3 or b.ndim not in (2, 3) or (b.ndim == 3 and b.shape[0] != a.shape[0]):
            raise InputError(f"batched inputs are a (B, M, K) with b (B, K, N) or (K, N), got {a.shape} and {b.shape}")
        bs = [b[i] if b.ndim == 3 else b for i in range(a.shape[0])]
        od = out_dtype or ("f32" if _dtype_name(a, b) in ("e4m3", "e5m2") else _dtype_name(a, b))
        bias_, c_, al, be = _check_epilogue_args(a, b, bias, c, alpha, beta, od)
        cb = None if c_ is None else np.broadcast_to(c_, (a.shape[0], a.shape[1], b.shape[-1]))
        outs = [cublas_matmul(a[i], bs[i], bias=bias_, c=None if cb is None else cb[i], alpha=al, beta=be,
                              splits=splits, split_align=split_align, instr=instr, reduce_dtype=reduce_dtype,
                              out_dtype=out_dtype, kernel=kernel, schedule=schedule) for i in range(a.shape[0])]
        return np.stack(outs)
    epi = bias is not None or c is not None or alpha != 1 or beta != 1
    if schedule is not None:
        from .schedule import load_schedule

        if epi:
            raise InputError("schedule= runs a stored schedule without cuBLAS's epilogues: give no bias, c, alpha, beta")
        return load_schedule(schedule).run(a, b)
    name = None
    if kernel is not None:
        if a.ndim != 2 or b.ndim != 2:
            raise InputError(f"a must be (M, K) and b (K, N), got {a.shape} and {b.shape}")
        cs = cublas_schedule(kernel, a.shape[0], b.shape[1], a.shape[1])
        name = _gemm_kernel(kernel)
        if not cs.determined:
            import warnings

            from .kernel_regions import ScheduleWarning

            warnings.warn(f"the split count of this cuBLAS call was not determined by its recording ({cs.note[:120]}): "
                          f"S = {cs.splits} is assumed", ScheduleWarning, stacklevel=2)
        kw = cs.kwargs()
        if instr is not None and instr != kw["instr"]:
            raise InputError(f"instr={instr!r} contradicts the kernel, which runs {kw['instr']}")
        splits, split_align, instr = kw["splits"], split_align or kw["split_align"], kw["instr"]
        reduce_dtype = reduce_dtype or kw["reduce_dtype"]
    warn = splits is None
    splits = 1 if splits is None else splits
    a, b, name_dt, fp8, instr, split_align, out_dtype = _check(a, b, splits, split_align, instr,
                                                               reduce_dtype, out_dtype)
    if warn:
        from .kernel_regions import warn_if_switching

        warn_if_switching("scaled_mm_precise" if fp8 else f"matmul_{name_dt}", a.shape[0], b.shape[1], a.shape[1],
                          "cuBLAS", stacklevel=4)
    if not epi:
        sched = matmul_schedule(name_dt, splits=splits, split_align=split_align, instr=instr,
                                reduce_dtype=reduce_dtype, out_dtype=out_dtype, dtype_b=_NAMES[np.dtype(b.dtype)])
        return sched.run(a, b)
    if fp8 or instr != "wgmma":
        raise InputError("cuBLAS's bias / C epilogues were recorded for bf16 and f16 nvjet kernels only")
    bias, c, alpha, beta = _check_epilogue_args(a, b, bias, c, alpha, beta, out_dtype)
    kind = epilogue_kind(split=splits > 1, bias=bias is not None, c=c is not None, alpha=alpha, beta=beta,
                         kernel=name)
    sched = matmul_schedule(name_dt, splits=splits, split_align=split_align, instr=instr, reduce_dtype=reduce_dtype,
                            out_dtype=None, dtype_b=_NAMES[np.dtype(b.dtype)])
    acc = sched.run(a, b)
    return apply_epilogue(acc, kind, out_dtype, bias=bias, c=c, alpha=alpha, beta=beta)


def _tf32(a, b, *, bias, c, alpha, beta, kernel, input_precision, others, out_dtype) -> np.ndarray:
    """float32 inputs: cuBLAS's TF32 kernels (refmodel.golden.cublas_tf32), or one sentence why not."""
    from .cublas_tf32 import tf32_matmul

    da = getattr(a, "dtype", None)
    if input_precision is not None and da is not None and np.dtype(da) != np.float32:
        raise InputError(f"input_precision applies to float32 inputs (cuBLAS's TF32 kernels), got {np.dtype(da)} a")
    if input_precision != "tf32":
        raise InputError("float32 inputs: pass input_precision='tf32' for torch.backends.cuda.matmul.allow_tf32 = True "
                         "(cuBLAS's TF32 kernels); full-precision float32 GEMMs run SIMT sgemm kernels, not modelled, "
                         f"got input_precision={_describe(input_precision)}")
    bad = [k for k, v in others.items() if v is not None]
    if bad:
        raise InputError(f"the TF32 model takes its schedule from kernel=, not {', '.join(bad)}")
    if out_dtype not in (None, "f32"):
        raise InputError(f"a TF32 GEMM of float32 inputs writes float32, got out_dtype={_describe(out_dtype)}")
    if kernel is None:
        raise InputError("cuBLAS's TF32 kernels split K by shape-specific counts: pass kernel= (the names torch's "
                         "profiler shows)")
    a = as_array("a", a, what="an (M, K) or (B, M, K) float32 array")
    b = as_array("b", b, what="a (K, N) or (B, K, N) float32 array")
    if a.dtype != np.float32 or b.dtype != np.float32:
        raise DTypeError(f"TF32 takes float32 a and b, got {a.dtype} and {b.dtype}")
    if a.ndim == 3:
        if b.ndim not in (2, 3) or (b.ndim == 3 and b.shape[0] != a.shape[0]):
            raise InputError(f"batched inputs are a (B, M, K) with b (B, K, N) or (K, N), got {a.shape} and {b.shape}")
        cb = None if c is None else np.broadcast_to(np.asarray(c), (a.shape[0], a.shape[1], b.shape[-1]))
        return np.stack([_tf32(a[i], b[i] if b.ndim == 3 else b, bias=bias, c=None if cb is None else cb[i],
                               alpha=alpha, beta=beta, kernel=kernel, input_precision="tf32", others={},
                               out_dtype=None) for i in range(a.shape[0])])
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise InputError(f"a must be (M, K) and b (K, N), got {a.shape} and {b.shape}")
    bias, c, alpha, beta = _check_epilogue_args(a, b, bias, c, alpha, beta, "f32")
    return tf32_matmul(a, b, kernel=kernel, bias=bias, c=c, alpha=alpha, beta=beta)


def matmul_schedule(dtype: str, *, splits: int, split_align: int, instr: str, reduce_dtype: Optional[str],
                    out_dtype: Optional[str], source: Optional[dict] = None, dtype_b: Optional[str] = None):
    """The :class:`~refmodel.golden.Schedule` of a cuBLAS matmul: each of ``splits`` chunks a fresh chain
    (wgmma k16, FP8 k32 with promotion every 4, or mma.sync k8), partials added in split order."""
    from .schedule import Schedule

    fp8 = dtype in ("e4m3", "e5m2")
    if instr == "mma.sync.m16n8k8":
        i = f"mma.sync.aligned.m16n8k8.row.col.f32.{dtype}.{dtype}.f32"
    else:
        i = _wgmma(dtype, dtype_b or dtype)
    return Schedule(i, promote_every=4 if fp8 else None, splits=splits, split_align=split_align,
                    partial_dtype=reduce_dtype or "f32", out_dtype=out_dtype,
                    source=source or {"library": "cuBLAS 13.1 (torch 2.11.0+cu130)", "evidence": "fixtures/cublas"})


@dataclass(frozen=True)
class CublasSchedule:
    """The :func:`cublas_matmul` arguments for one cuBLAS call, and how sure the data made us."""

    splits: int
    split_align: int
    instr: str
    reduce_dtype: Optional[str] = None
    determined: bool = True                      # False: several split counts fit the recording
    consistent_splits: tuple = field(default=())  # split counts with 0 mismatches, when not determined
    note: str = ""

    def schedule(self, dtype: str, out_dtype: str):
        """This call as a :class:`~refmodel.golden.Schedule` for inputs of ``dtype``."""
        return matmul_schedule(dtype, splits=self.splits, split_align=self.split_align, instr=self.instr,
                               reduce_dtype=self.reduce_dtype, out_dtype=out_dtype,
                               source={"library": "cuBLAS 13.1 (torch 2.11.0+cu130)", "device": "H200",
                                       "evidence": "recorded (fixtures/cublas)" + (f": {self.note}" if self.note else "")})

    def kwargs(self) -> dict:
        """Keyword arguments for :func:`cublas_matmul`."""
        d = asdict(self)
        return {k: d[k] for k in ("splits", "split_align", "instr", "reduce_dtype")}


#: Split counts found for the recorded split-K calls: (kernel family, M, N, K) -> (S, determined, note).
_RECORDED_SPLITS = {
    ("nvjet_sm90_tst_64x32_64x16_1x2_h_bz_splitK_NNT", 64, 64, 8192): (6, (), ""),
    ("nvjet_sm90_hsh_64x32_64x16_1x2_h_bz_splitK_NNT", 64, 64, 8192): (6, (), ""),
    ("nvjet_sm90_tst_64x32_64x16_2x4_h_bz_splitK_NNT", 128, 128, 16384): (11, (), ""),
    ("nvjet_sm90_tst_64x16_64x16_1x1_h_bz_splitK_NNT", 16, 16, 4096): (3, (), ""),
    ("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_NNT", 1, 1024, 4096): (
        3, (2, 3, 4, 5, 6, 8, 10, 16, 22, 32, 64),
        "1024 bf16 outputs do not tell these split counts apart; 3 is a guess (same K as 16x16x4096)"),
    ("cutlass_75_tensorop_s1688gemm_bf16_64x64_nn_align1", 257, 129, 1000): (14, (), ""),
    # fixtures/layers (F.linear, addmm, matmul; python -m gpu.record.layers)
    **{(f"nvjet_sm90_{t}_64x32_64x16_2x4_h_bz_splitK{b}_TNT", 128, 256, 4096): (3, (), "")
       for t in ("tst", "hsh") for b in ("", "_bias")},
    **{(f"nvjet_sm90_{t}_64x32_64x16_1x2_h_{e}_splitK_NNT", 64, 64, 8192): (6, (), "")
       for t in ("tst", "hsh") for e in ("bx", "bz")},
    **{(f"nvjet_sm90_{t}_64x32_64x16_1x2_h_bz_splitK_bias_NNT", 64, 64, 8192): (6, (), "") for t in ("tst", "hsh")},
    **{(f"nvjet_sm90_{t}_64x32_64x16_1x4_h_bz_splitK_NNT", 64, 64, 4096): (3, (), "") for t in ("tst", "hsh")},
    **{(f"nvjet_sm90_{t}_64x32_64x16_1x2_h_bz_splitK{b}_TNT", 64, 64, 8192): (
        6, (4, 6, 7, 8, 9, 10, 11) if (t, b) == ("hsh", "_bias") else tuple(range(2, 12)),
        "the recorded data (cancel / zero families) does not tell the split counts apart; 6 is a guess (the NNT "
        "kernel's count at this shape)") for t in ("tst", "hsh") for b in ("", "_bias")},
    ("nvjet_sm90_qqsss_64x32_128x16_1x2_h_bz_algo2_splitK_TNT", 64, 64, 8192): (
        6, ("any",),
        "the float32 sums of the 128-K promotion stages are exact on this data, so every split count "
        "with 128-aligned chunks gives the same output; 6 is a guess (the bf16 64x64x8192 split count)"),
}


def _gemm_kernel(kernels: Union[str, Sequence[str]]) -> str:
    if isinstance(kernels, str):
        kernels = [kernels]
    if not isinstance(kernels, (list, tuple)) or not all(isinstance(k, str) for k in kernels):
        raise InputError(f"kernels must be a kernel name or a list of names, got {_describe(kernels)}")
    for k in kernels:
        if k.startswith("nvjet_sm90_"):
            return k
        if "cutlass_75_tensorop_s1688gemm" in k:
            return k[k.index("cutlass_75_tensorop_s1688gemm"):].split(">")[0].split("(")[0]
    raise InputError(f"no nvjet_sm90 or cutlass_75_tensorop_s1688gemm GEMM kernel among {_describe(list(kernels))}")


@strict_options
def cublas_schedule(kernels: Union[str, Sequence[str]], M: int, N: int, K: int) -> CublasSchedule:
    """The schedule of a cuBLAS call from the kernel names torch's profiler recorded and its shape.

    No-split nvjet kernels need nothing more; for split-K kernels the split count comes from the
    recorded table (cuBLAS's heuristic is not modelled), so an unrecorded split-K shape is refused.
    """
    for nm, v in (("M", M), ("N", N), ("K", K)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
            raise InputError(f"{nm} must be a positive int, got {_describe(v)}")
    g = _gemm_kernel(kernels)
    fp8 = g.startswith("nvjet_sm90_qq")
    if g.startswith("cutlass_75_tensorop_s1688gemm"):
        names = [kernels] if isinstance(kernels, str) else kernels
        instr, align, split = "mma.sync.m16n8k8", 8, any("splitKreduce" in k for k in names)
    else:
        instr, align, split = "wgmma", 128 if fp8 else 64, "_splitK" in g
    if not split:
        note = "" if instr == "wgmma" else "no cutlass_75 call without split-K was recorded: an extrapolation"
        return CublasSchedule(splits=1, split_align=align, instr=instr, note=note)
    key = (g, int(M), int(N), int(K))
    if key not in _RECORDED_SPLITS:
        raise InputError(f"the split count of {_describe(g)} for {M}x{N}x{K} was not recorded (it is not in the kernel name)")
    s, cons, note = _RECORDED_SPLITS[key]
    return CublasSchedule(splits=s, split_align=align, instr=instr, determined=not cons,
                          consistent_splits=cons, note=note)
