"""Model of one warp-level ``mma.sync`` instruction on sm_90a: ``D = A·B + C`` as the H200 computes it.

Established on the H200 (fixtures/mma_sync, every form, seven input families); sm_90 has no FP8 or
m8n8k4 tensor-core path, so ptxas (CUDA 13.0) lowers those forms to other instructions, and the model
follows the lowering:

===============  ==========================================================================
family           what the hardware does (SASS of ``nvcc -arch=sm_90a``, CUDA 13.0)
===============  ==========================================================================
f16, bf16, tf32  one HMMA: the wgmma fused dot of the same types (:data:`accumulate.BINDING`)
                 over the instruction's K, from C
e4m3/e5m2        F2FP unpacks to f16 (exact); HMMA over the k with k mod 4 in {0, 1} from +0,
                 HMMA over k mod 4 in {2, 3} chained on it (f16 fused dot, f16 or f32 acc);
                 then one FADD/HADD2 of C, round to nearest, canonical NaN
f16 m8n8k4       scalar FP32 code: f32 D: t = +0, t = FFMA(a_k, b_k, t) for k = 0..3,
                 D = FADD(C, t); f16 D: t01 = FFMA(a1, b1, FMUL(a0, b0)), t23 likewise,
                 D = F2F.f16(FADD(FADD(C, t01), t23)); canonical NaN
f64              DMMA: a k-order chain of correctly rounded FMAs from C
                 (:mod:`refmodel.numerics.fma64`: NaN = first NaN of (b, acc, a), quieted)
s8/u8/s4/u4      exact integer dot product + C, wrapping mod 2^32 (``.satfinite``: clamped)
b1               C + popc(a AND b) or popc(a XOR b) over K, wrapping
===============  ==========================================================================

Operands are typed arrays of :func:`refmodel.layouts.mma_fragment.matrix_shape` with any leading batch
dimensions (s4/u4 values in int8/uint8, b1 in uint8 0/1).
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, InputError
from ..mma_sync_forms import MmaSyncForm, element_codes, from_codes, matrix_shape, parse_mma_sync, typed_dtype
from ..validate import as_array, check_instr
from .accumulate import BINDING, decode_operand, fdpa_chain
from .fma64 import fma_chain
from .wgmma import operand_codes, operand_spec

EXAMPLE_INSTR = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
_CANON = {"f32": np.uint32(0x7FFFFFFF), "f16": np.uint16(0x7FFF)}


def _check(name: str, x, t: str, shape: tuple[int, ...], form: MmaSyncForm) -> np.ndarray:
    dt = typed_dtype(t)
    x = as_array(name, x, what=f"a {dt.name} array")
    if x.dtype != dt:
        raise DTypeError(f"{name} must be {dt.name} for .{t} in {form.name}, got {x.dtype.name}")
    if x.ndim < len(shape) or tuple(x.shape[-len(shape):]) != shape:
        raise InputError(f"{name} must have shape (..., {', '.join(map(str, shape))}) for {form.name}, "
                         f"got {tuple(x.shape)}")
    element_codes(x, t)    # range of s4/u4/b1 values
    return x


def prepare(instr: str, a, b, c=None):
    """Validate one call: (form, a, b, c, batch) with a, b, c as (P, M, K), (P, K, 8), (P, M, 8)
    (P = the broadcast batch; quad-pair forms fold their 4 products into it)."""
    form = parse_mma_sync(check_instr("instr", instr, EXAMPLE_INSTR))
    sa, sb, sc = (matrix_shape(form, o) for o in "abc")
    a = _check("a", a, form.dtype_a, sa, form)
    b = _check("b", b, form.dtype_b, sb, form)
    if c is None:
        c = np.zeros(sc, typed_dtype(form.dtype_c))
    c = _check("c", c, form.dtype_c, sc, form)
    try:
        batch = np.broadcast_shapes(a.shape[:-len(sa)], b.shape[:-len(sb)], c.shape[:-len(sc)])
    except ValueError:
        raise InputError(f"batch dimensions of a {a.shape[:-len(sa)]}, b {b.shape[:-len(sb)]}, "
                         f"c {c.shape[:-len(sc)]} do not broadcast") from None
    a, b, c = (np.broadcast_to(x, batch + s).reshape((-1,) + s[-2:]) for x, s in ((a, sa), (b, sb), (c, sc)))
    return form, a, b, c, batch


def mma_sync(instr: str, a, b, c=None) -> np.ndarray:
    """D of one ``mma.sync.aligned`` instruction (see the module table), typed like the D type, shape
    ``(*batch, *matrix_shape(form, 'd'))``.  ``c=None`` is +0 (integers 0).

    >>> import numpy as np
    >>> a = np.ones((16, 16), np.float16); b = np.ones((16, 8), np.float16)
    >>> float(mma_sync("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", a, b)[0, 0])
    16.0
    """
    form, a, b, c, batch = prepare(instr, a, b, c)
    d = _FAMILY[form.family](form, a, b, c)
    return d.reshape(batch + matrix_shape(form, "d"))


# ----------------------------------------------------------------------------- families


def _integer(form: MmaSyncForm, a, b, c) -> np.ndarray:
    av, bv = a.astype(np.int64), b.astype(np.int64)
    if form.bitop == "xor":
        dot = np.einsum("pmk,pkn->pmn", av, 1 - bv) + np.einsum("pmk,pkn->pmn", 1 - av, bv)
    else:
        dot = np.einsum("pmk,pkn->pmn", av, bv)
    exact = dot + c.astype(np.int64)
    if form.satfinite:
        return np.clip(exact, -2 ** 31, 2 ** 31 - 1).astype(np.int32)
    return ((exact + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)


def _fused(form: MmaSyncForm, a, b, c, p, dtype_a: str, dtype_b: str, kblk: int) -> np.ndarray:
    """fdpa_chain of (P, M, K) x (P, K, 8) + C in blocks of kblk (chained), D bits (P, M, 8)."""
    P, M, K = a.shape
    ca = operand_codes(a, dtype_a, p).reshape(-1, K)
    cb = operand_codes(b, dtype_b, p).reshape(P, K, form.n)
    A = decode_operand(ca[..., None], operand_spec(dtype_a, p), kblk=kblk)
    B = decode_operand(cb, operand_spec(dtype_b, p), kblk=kblk)
    cbits = np.ascontiguousarray(c).view(np.uint32 if c.dtype.itemsize == 4 else np.uint16)
    return fdpa_chain(A, B, cbits.astype(np.uint32).reshape(-1, form.n), p, kblk=kblk, rows_per_b=M).reshape(P, M, form.n)


def _hmma(form: MmaSyncForm, a, b, c) -> np.ndarray:
    p = BINDING[(form.family, form.dtype_d)]
    bits = _fused(form, a, b, c, p, form.dtype_a, form.dtype_b, form.k)
    return from_codes(bits, form.dtype_d)


def _fp8(form: MmaSyncForm, a, b, c) -> np.ndarray:
    p = BINDING[("f16", form.dtype_d)]
    k = np.arange(form.k)
    order = np.concatenate([k[k % 4 < 2], k[k % 4 >= 2]])
    a16 = a.astype(np.float16)[:, :, order]           # e4m3/e5m2 -> f16 is exact (NaN stays NaN)
    b16 = b.astype(np.float16)[:, order, :]
    dt = typed_dtype(form.dtype_d)
    zero = np.zeros(c.shape, dt)
    t = from_codes(_fused(form, a16, b16, zero, p, "f16", "f16", form.k // 2), form.dtype_d)
    with np.errstate(all="ignore"):
        d = (t + c).astype(dt)                        # FADD / HADD2: one rounding to nearest
    return _canonical(d, form.dtype_d)


def _canonical(d: np.ndarray, t: str) -> np.ndarray:
    bits = np.ascontiguousarray(d).view(np.uint32 if t == "f32" else np.uint16).copy()
    bits[np.isnan(d)] = _CANON[t]
    return bits.view(d.dtype)


def _quad_pair(form: MmaSyncForm, a, b, c) -> np.ndarray:
    """The scalar FP32 code ptxas emits for m8n8k4 on sm_90 (products of f16 are exact in f32)."""
    av, bv = a.astype(np.float32), b.astype(np.float32)
    c32 = c.astype(np.float32)
    with np.errstate(all="ignore"):
        prod = [av[:, :, k:k + 1] * bv[:, k:k + 1, :] for k in range(4)]     # FMUL: exact
        if form.dtype_d == "f32":
            t = np.zeros(c32.shape, np.float32)
            for k in range(4):
                t = prod[k] + t                                         # FFMA(a_k, b_k, t)
            d = c32 + t
        else:
            t01 = prod[1] + prod[0]
            t23 = prod[3] + prod[2]
            d = ((c32 + t01) + t23).astype(np.float16)
    return _canonical(d, form.dtype_d)


def _dmma(form: MmaSyncForm, a, b, c) -> np.ndarray:
    bits = fma_chain(np.ascontiguousarray(a).view(np.uint64), np.ascontiguousarray(b).view(np.uint64),
                     np.ascontiguousarray(c).view(np.uint64))
    return bits.view(np.float64)


_FAMILY = {"f16": _hmma, "bf16": _hmma, "tf32": _hmma, "fp8": _fp8, "f16q": _quad_pair, "f64": _dmma,
           "int8": _integer, "int4": _integer, "b1": _integer}
