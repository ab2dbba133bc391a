"""How Triton 3.6 lowers ``tl.dot`` on sm_90, by kernel configuration (established on the H100/H200).

:func:`triton_lowering` answers, for a tiled-matmul kernel's configuration, which instructions Triton emits
and how the result sums; :func:`refmodel.golden.triton_matmul` uses it.  The rules, read from the PTX of
every surveyed configuration (``docs/data/triton_lowering_survey.json``, ``python -m gpu.record.triton_lowering
--survey``) and held bit for bit by the recordings (fixtures/triton/lowering.npz):

=============================================  ============================================================
configuration                                  what Triton emits
=============================================  ============================================================
f32 inputs, ``input_precision="ieee"``         FMA (``fma.rn.f32``), whatever the tile
FP8, ``max_num_imprecise_acc=0``               MMAv2 always: ``cvt.rn.f16x2.e4m3x2``/``e5m2x2`` then
                                               ``mma.sync.m16n8k16`` f16 (f32 or f16 accumulator)
``num_warps`` a multiple of 4 and ``BLOCK_M``  MMAv3: ``wgmma`` m64nNkK, N = min(BLOCK_N / wg_n, 256)
a multiple of 64                               with wg_m = min(num_warps/4, BLOCK_M/64) warpgroups along
                                               M and wg_n = num_warps/4/wg_m along N
otherwise (BLOCK_M 16/32, or 1 or 2 warps)     MMAv2: ``mma.sync.m16n8k16`` (f16, bf16; FP8 after the
                                               cvt to f16), ``m16n8k8`` tf32 (raw f32 bits, no cvt)
``acc += tl.dot(a, b)``                        folded into ``acc = tl.dot(a, b, acc)`` when
                                               max_num_imprecise_acc is 0 (every non-FP8 dot, and FP8
                                               with 0); FP8 otherwise: a fresh chain per BLOCK_K slice
                                               from +0, then ``add.f32`` into acc
=============================================  ============================================================

What it means for the bits: f16, bf16 and tf32 give the same output on MMAv2 and MMAv3 (an HMMA sums like a
wgmma of the same K); FP8 does not: MMAv3 is the FP8 wgmma (its 13-bit window), MMAv2 the f16 tensor core
on exact f16 copies, in Triton's K order (k = 0, 1 mod 4, then 2, 3 mod 4 in each 32-wide window).  So an
FP8 call needs its tile and warps; the others do not.

Established for BLOCK_M and BLOCK_N in {16, 32, 64, 128, 256}, BLOCK_K in {16, 32, 64, 128, 256} (FP8: 32 and
up, as Triton allows), num_warps in {1, 2, 4, 8} and num_stages in {1, ..., 6} or the default: the path does not
depend on num_stages (1 to 5 surveyed; 6 in a recorded Inductor template) or BLOCK_K (surveyed); the sums that
restart per BLOCK_K slice (tf32x3, FP8 with max_num_imprecise_acc, FP8 ``acc += tl.dot``) were recorded with
BLOCK_K 32, 64 and 128 only, and other BLOCK_K are refused for them.  Anything else is refused, not guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import ml_dtypes
import numpy as np

from ..errors import InputError
from ..validate import _describe

TRITON_VERSION = "3.6.0"
BLOCK_M = (16, 32, 64, 128, 256)
BLOCK_N = (16, 32, 64, 128, 256)
BLOCK_K = (16, 32, 64, 128, 256)     # FP8: 32 and up (Triton refuses a 16-wide FP8 dot)
NUM_WARPS = (1, 2, 4, 8)
RECORDED_BLOCK_K = (32, 64, 128)   # where a sum that restarts per BLOCK_K slice was recorded (either path)
#: FP8 ``acc += tl.dot`` on the wgmma path: BLOCK_K 256 too (fixtures/inductor: the tensor-wise precise
#: _scaled_mm template Inductor picked for M = 256)
RECORDED_BLOCK_K_WGMMA = (32, 64, 128, 256)
NUM_STAGES = (None, 1, 2, 3, 4, 5, 6)   # None: Triton's default; 6 from the Inductor recordings
PATTERNS = ("dot_acc", "add")

_NAMES = {np.dtype(np.float16): "f16", np.dtype(ml_dtypes.bfloat16): "bf16", np.dtype(np.float32): "f32",
          np.dtype(ml_dtypes.float8_e4m3fn): "e4m3", np.dtype(ml_dtypes.float8_e5m2): "e5m2"}
FP8 = ("e4m3", "e5m2")


@dataclass(frozen=True)
class TritonLowering:
    """What Triton 3.6 emits for one ``tl.dot`` configuration on sm_90.

    ``path``: "wgmma" (MMAv3), "mma.sync" (MMAv2) or "fma"; ``instr``: the PTX opcode of the MMA (for
    wgmma with the N Triton picks), or ``fma.rn.f32``; ``fp8_upcast``: FP8 operands converted to f16 first;
    ``slice_add``: ``acc += tl.dot`` kept as a fresh chain per BLOCK_K slice plus ``add.f32``."""

    path: str
    instr: str
    fp8_upcast: bool
    slice_add: bool

    def describe(self) -> str:
        what = {"wgmma": "MMAv3", "mma.sync": "MMAv2", "fma": "CUDA-core FMAs"}[self.path]
        s = f"{what}: {self.instr}"
        if self.fp8_upcast:
            s += " on FP8 operands converted to f16 (cvt.rn.f16x2.e4m3x2 / e5m2x2)"
        if self.slice_add:
            s += "; each BLOCK_K slice a fresh chain from +0, added into acc with add.f32"
        return s


def dtype_name(dt) -> str:
    """'f16', 'bf16', 'f32', 'e4m3' or 'e5m2' of a numpy dtype (or that name)."""
    if isinstance(dt, str) and dt in _NAMES.values():
        return dt
    try:
        d = np.dtype(dt)
    except TypeError:
        d = None
    if d not in _NAMES:
        raise InputError(f"Triton matmul inputs must be e4m3/e5m2, float16, bfloat16 or float32, got {_describe(dt)}")
    return _NAMES[d]


def _pick(name: str, v: Any, allowed: tuple) -> Any:
    if v is not None and (isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer))):
        raise InputError(f"{name} must be an int, got {_describe(v)}")
    if v not in allowed:
        shown = ", ".join("the default" if x is None else str(x) for x in allowed)
        raise InputError(f"{name}={_describe(v)} was not surveyed: Triton {TRITON_VERSION}'s lowering is established "
                         f"for {name} in {{{shown}}} only")
    return None if v is None else int(v)


def triton_lowering(dtype_a, dtype_b=None, *, block_m: int, block_n: int, block_k: int, num_warps: int,
                    num_stages: Optional[int] = None, input_precision: str = "tf32", max_num_imprecise_acc=None,
                    acc_dtype=np.float32, pattern: str = "dot_acc") -> TritonLowering:
    """The :class:`TritonLowering` of a Triton 3.6 tiled matmul's ``tl.dot`` on sm_90 (module table).
    Configurations outside the surveyed ones are refused in one sentence."""
    ta = dtype_name(dtype_a)
    tb = ta if dtype_b is None else dtype_name(dtype_b)
    if ta != tb and not (ta in FP8 and tb in FP8):
        raise InputError(f"a and b must have the same dtype (or both be FP8), got {ta} and {tb}")
    bm = _pick("block_m", block_m, BLOCK_M)
    bn = _pick("block_n", block_n, BLOCK_N)
    bk = _pick("block_k", block_k, BLOCK_K)
    w = _pick("num_warps", num_warps, NUM_WARPS)
    _pick("num_stages", num_stages, NUM_STAGES)
    if pattern not in PATTERNS:
        raise InputError(f"pattern must be 'dot_acc' (acc = tl.dot(a, b, acc)) or 'add' (acc += tl.dot(a, b)), "
                         f"got {_describe(pattern)}")
    if input_precision not in ("tf32", "tf32x3", "ieee"):
        raise InputError(f"input_precision must be 'tf32', 'tf32x3' or 'ieee', got {_describe(input_precision)}")
    if bk < 32 and (ta in FP8 or tb in FP8):
        raise InputError(f"block_k={bk} with FP8 inputs does not compile in Triton {TRITON_VERSION} (an FP8 dot's K "
                         f"is at least 32)")
    acc = "f16" if np.dtype(acc_dtype) == np.float16 else "f32"
    m = max_num_imprecise_acc
    if ta == "f32" and input_precision == "ieee":
        return TritonLowering("fma", "fma.rn.f32", False, False)
    fp8 = ta in FP8
    imp0 = (m == 0) or not fp8                   # Triton's default is 0 for every non-FP8 dot
    slice_add = pattern == "add" and not imp0
    per_slice = (ta == "f32" and input_precision == "tf32x3") or slice_add or \
        (fp8 and m is not None and 0 < m < 2 ** 30)
    v3 = w % 4 == 0 and bm % 64 == 0 and not (fp8 and m == 0)
    recorded = RECORDED_BLOCK_K_WGMMA if (v3 and fp8 and slice_add) else RECORDED_BLOCK_K
    if per_slice and bk not in recorded:
        raise InputError(f"block_k={bk} was not recorded with a per-slice sum (tf32x3, max_num_imprecise_acc, "
                         f"acc += tl.dot on FP8) on this path: those sums are "
                         f"established for block_k in {{{', '.join(map(str, recorded))}}}")
    if v3:
        wg = w // 4
        wg_m = min(wg, bm // 64)
        n = min(bn // (wg // wg_m), 256)
        k = {"f16": 16, "bf16": 16, "f32": 8}.get(ta, 32)
        types = f"{ta}.{tb}" if not ta == "f32" else "tf32.tf32"
        return TritonLowering("wgmma", f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.{acc}.{types}", False, slice_add)
    if ta == "f32":
        return TritonLowering("mma.sync", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", False, slice_add)
    src = "f16" if fp8 else ta
    return TritonLowering("mma.sync", f"mma.sync.aligned.m16n8k16.row.col.{acc}.{src}.{src}.{acc}", fp8, slice_add)


# ----------------------------------------------------------------------------- one tl.dot


def _pad(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    if x.shape == (rows, cols):
        return x
    out = np.zeros((rows, cols), x.dtype)
    out[:x.shape[0], :x.shape[1]] = x
    return out


def tl_dot(a, b, c, *, num_warps: int, num_stages: Optional[int] = None, input_precision: str = "tf32",
           max_num_imprecise_acc=None) -> np.ndarray:
    """One ``tl.dot(a, b, c, ...)`` of a Triton 3.6 kernel on sm_90, bit for bit: ``a`` (BLOCK_M, BLOCK_K) and
    ``b`` (BLOCK_K, BLOCK_N) typed (f16, bf16, f32, e4m3, e5m2), ``c`` (BLOCK_M, BLOCK_N) float32 or float16
    (the accumulator in); the block shapes and ``num_warps`` choose the path as :func:`triton_lowering` does.
    ``max_num_imprecise_acc=None`` is Triton's sm_90 default (2**30 for FP8).  What the Triton interpreter of
    :mod:`wgref.triton` runs for every ``tl.dot``."""
    from ..numerics.gemm import gemm
    from ..numerics.promotion import add_f32, fma_f32_array
    from .schedule import mma_sync_fp8_k_order, tf32x3_slice

    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    if a.ndim != 2 or b.ndim != 2 or c.ndim != 2 or a.shape[1] != b.shape[0] or c.shape != (a.shape[0], b.shape[1]):
        raise InputError(f"tl_dot takes a (M, K), b (K, N) and c (M, N), got {a.shape}, {b.shape} and {c.shape}")
    bm, bk = a.shape
    bn = b.shape[1]
    m = max_num_imprecise_acc
    ta, tb = dtype_name(a.dtype), dtype_name(b.dtype)
    if c.dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
        raise InputError(f"the accumulator c must be float32 or float16, got {c.dtype}")
    if m is not None and m >= 2 ** 30:
        m = None                                      # Triton's default on sm_90: no partial accumulator
    low = triton_lowering(a.dtype, b.dtype, block_m=bm, block_n=bn, block_k=bk, num_warps=num_warps,
                          num_stages=num_stages, input_precision=input_precision, max_num_imprecise_acc=m,
                          acc_dtype=c.dtype)
    acc = "f16" if c.dtype == np.float16 else "f32"
    if acc == "f16" and ta not in ("f16", *FP8):
        raise InputError(f"an f16 accumulator takes f16 or FP8 inputs, got {ta}")
    M, N = -(-bm // 64) * 64, -(-bn // 8) * 8          # the model's own tile: rows and columns are independent
    A, B, C = _pad(a, M, bk), _pad(b, bk, N), _pad(c, M, N)
    with np.errstate(all="ignore"):
        if low.path == "fma":
            d = c.astype(np.float32)
            for k in range(bk):
                d = fma_f32_array(a[:, k:k + 1].astype(np.float32), b[k:k + 1].astype(np.float32), d)
            return d
        if low.fp8_upcast:
            perm = mma_sync_fp8_k_order(bk)
            d = gemm(A.astype(np.float16)[:, perm], B.astype(np.float16)[perm], C,
                     instr=f"wgmma.mma_async.sync.aligned.m64n8k16.{acc}.f16.f16")
        elif ta in FP8:
            instr = f"wgmma.mma_async.sync.aligned.m64n8k32.{acc}.{ta}.{tb}"
            if m is None or m >= bk or acc == "f16":
                if acc == "f16" and m not in (None,) and m < bk:
                    raise InputError("max_num_imprecise_acc applies to an f32 accumulator, not float16")
                d = gemm(A, B, C, instr=instr)
            else:                                     # partial sums of ceil(m/32) instructions, added into C
                group = -(-int(m) // 32) * 32
                d = C
                for k0 in range(0, bk, group):        # the last group of the slice may be shorter
                    d = add_f32(d, gemm(A[:, k0:k0 + group], B[k0:k0 + group], instr=instr))
        elif ta == "f32" and input_precision == "tf32x3":
            d = tf32x3_slice(A, B, C, "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32")
        else:
            k = 8 if ta == "f32" else 16
            types = "tf32.tf32" if ta == "f32" else f"{ta}.{tb}"
            d = gemm(A, B, C, instr=f"wgmma.mma_async.sync.aligned.m64n8k{k}.{acc}.{types}")
    return np.ascontiguousarray(np.asarray(d)[:bm, :bn])
