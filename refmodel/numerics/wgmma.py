"""Model of one dense wgmma instruction: ``D = A·B + C`` with Hopper's accumulator numerics.

Operands are typed numpy arrays in math orientation (the register / shared-memory
layouts live in :mod:`refmodel.fragment`):

=======  ============================  ===================================
operand  shape                         dtype
=======  ============================  ===================================
a        (..., 64, K)                  float8_e4m3fn / float8_e5m2 / float16 /
                                       bfloat16 / float32 (tf32) / int8 / uint8
b        (..., K, N)                   same rule, from the form's B type
c        (..., 64, N), optional        float32 (.f32), float16 (.f16), int32 (.s32)
=======  ============================  ===================================

Leading batch dimensions broadcast.  The numerics (one fused truncated sum per
instruction, see :mod:`refmodel.accumulate`) come from :data:`refmodel.accumulate.BINDING`;
pass ``params=`` to try another hypothesis.

>>> import numpy as np, ml_dtypes
>>> a = np.ones((64, 32), ml_dtypes.float8_e4m3fn); b = np.ones((32, 8), ml_dtypes.float8_e4m3fn)
>>> float(wgmma("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", a, b)[0, 0])
32.0
"""

from __future__ import annotations

from typing import Optional, Union

import numpy as np

from .accumulate import (AccumParams, IntAccumParams, decode_operand, fdpa, fdpa_chain,
                         int_dot, int_dot_chain, params_for, tf32_spec)
from ..errors import DTypeError, InputError
from .formats import BF16, E4M3, E5M2, F16, FormatSpec
from ..dtypes import bits_of, element_dtype, from_bits
from ..limits import check_limit
from ..validate import _describe, as_array, check_flag, check_instr, check_int
from ..wgmma_forms import M, WgmmaForm, parse_wgmma

Params = Union[AccumParams, IntAccumParams]

_SPECS = {"e4m3": E4M3, "e5m2": E5M2, "f16": F16, "bf16": BF16}
EXAMPLE_INSTR = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"


# ----------------------------------------------------------------------------- validation


def _check_array(name: str, x, type_name: str, tail: tuple[int, int], form: WgmmaForm,
                 role: str) -> np.ndarray:
    dt = element_dtype(type_name)
    x = as_array(name, x, what=f"a {dt.name} array")
    if x.dtype != dt:
        raise DTypeError(f"{name} must be {dt.name} for {role} .{type_name}, got {x.dtype.name}")
    if x.ndim < 2 or tuple(x.shape[-2:]) != tail:
        raise InputError(f"{name} must have shape (..., {tail[0]}, {tail[1]}) for {form.shape}, "
                         f"got {tuple(x.shape)}")
    return x


def _check_scales(form: WgmmaForm, scale_d, imm_scale_a, imm_scale_b) -> None:
    check_flag("scale_d", scale_d)
    for name, v in (("imm_scale_a", imm_scale_a), ("imm_scale_b", imm_scale_b)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or int(v) not in (1, -1):
            raise InputError(f"{name} must be 1 or -1, got {_describe(v)}")
        if v == -1 and not form.has_imm_scale:
            raise InputError(f"{name} must be 1 for integer wgmma (the .{form.dtype_a} forms "
                             f"have no imm-scale operands), got -1")


def _check_params(form: WgmmaForm, params: Optional[Params]) -> Params:
    p = params_for(form) if params is None else params
    want = IntAccumParams if form.family == "int8" else AccumParams
    if not isinstance(p, want):
        raise InputError(f"params for {form.dtype_a} inputs must be a {want.__name__}, "
                         f"got {type(p).__name__}")
    if isinstance(p, AccumParams) and p.acc != form.dtype_d:
        raise InputError(f"params accumulate into {p.acc} but the form's accumulator is "
                         f".{form.dtype_d}")
    if p.k_group is not None and (p.k_group <= 0 or form.k % p.k_group):
        raise InputError(f"k_group must divide K = {form.k}, got {p.k_group}")
    return p


def prepare(instr: str, a, b, c, scale_d=True, imm_scale_a=1, imm_scale_b=1,
            params: Optional[Params] = None):
    """Validate one wgmma call; returns (form, params, a, b, c, batch shape) with a, b, c
    broadcast to the common batch shape (c is zeros when None or ``scale_d`` is false)."""
    form = parse_wgmma(check_instr("instr", instr, EXAMPLE_INSTR))
    p = _check_params(form, params)
    _check_scales(form, scale_d, imm_scale_a, imm_scale_b)
    a = _check_array("a", a, form.dtype_a, (M, form.k), form, "A")
    b = _check_array("b", b, form.dtype_b, (form.k, form.n), form, "B")
    if c is not None:
        c = _check_array("c", c, form.dtype_d, (M, form.n), form, "the accumulator")
    shapes = [a.shape[:-2], b.shape[:-2]] + ([c.shape[:-2]] if c is not None else [])
    try:
        batch = np.broadcast_shapes(*shapes)
    except ValueError:
        raise InputError("batch dimensions of a " + str(a.shape[:-2]) + ", b " + str(b.shape[:-2])
                         + (", c " + str(c.shape[:-2]) if c is not None else "")
                         + " do not broadcast") from None
    check_limit("batch_elements", int(np.prod(batch, dtype=object)) * M * max(form.n, form.k),
                "the broadcast batch's elements (batch x 64 x N)")
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    cdt = element_dtype(form.dtype_d)
    if c is None or not scale_d:
        c = np.zeros(batch + (M, form.n), dtype=cdt)  # scale-d = 0: C is +0
    else:
        c = np.broadcast_to(c, batch + c.shape[-2:])
    return form, p, a, b, c, batch


# ----------------------------------------------------------------------------- operands


def operand_spec(type_name: str, p: AccumParams) -> FormatSpec:
    """FormatSpec of a floating-point wgmma input type as the tensor core reads it."""
    return tf32_spec(p.tf32_ignored_bits) if type_name == "tf32" else _SPECS[type_name]


def operand_codes(x: np.ndarray, type_name: str, p: AccumParams, negate: bool = False) -> np.ndarray:
    """Unsigned integer codes of a typed operand in :func:`operand_spec` format: the raw
    bits, for tf32 the f32 container shifted right by ``p.tf32_ignored_bits``;
    ``negate`` flips every sign bit (imm-scale = -1)."""
    bits = bits_of(x)
    u = bits.dtype.type
    spec = operand_spec(type_name, p)
    if type_name == "tf32":
        bits = bits >> u(p.tf32_ignored_bits)
    if negate:
        bits = bits ^ u(spec.sign_mask)
    return bits


def operand_values(x: np.ndarray, type_name: str, p: AccumParams) -> np.ndarray:
    """Exact float64 values of a typed operand as the tensor core reads it (tf32: the
    ignored low bits of the f32 container cleared)."""
    x = np.asarray(x)
    if type_name == "tf32":
        mask = np.uint32((0xFFFFFFFF << p.tf32_ignored_bits) & 0xFFFFFFFF)
        x = (np.ascontiguousarray(x).view(np.uint32) & mask).view(np.float32)
    return x.astype(np.float64)


# ----------------------------------------------------------------------------- public


def wgmma(instr: str, a, b, c=None, *, scale_d: bool = True, imm_scale_a: int = 1,
          imm_scale_b: int = 1, params: Optional[Params] = None) -> np.ndarray:
    """D of one ``wgmma.mma_async`` instruction (numba kernel).

    ``instr``: the full opcode, e.g. ``wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3``.
    ``a`` (..., 64, K), ``b`` (..., K, N), ``c`` (..., 64, N) typed arrays (see module doc).
    ``scale_d=False``: D = A·B (C ignored, taken as +0).  ``imm_scale_a/b=-1``: that
    operand negated (every sign bit flipped).  ``params``: override the BINDING row.
    Returns D with the accumulator's dtype, shape (*batch, 64, N).
    """
    form, p, a, b, c, batch = prepare(instr, a, b, c, scale_d, imm_scale_a, imm_scale_b, params)
    K, N = form.k, form.n
    nbatch = int(np.prod(batch, dtype=np.int64))
    kblk = p.k_group or K
    if form.family == "int8":
        clamp = p.clamps(form.satfinite)
        out = int_dot_chain(a.reshape(-1, K), b.reshape(nbatch, K, N), c.reshape(-1, N), clamp,
                            kblk=kblk, rows_per_b=M)
        return out.reshape(batch + (M, N))
    ca = operand_codes(a, form.dtype_a, p, imm_scale_a == -1).reshape(-1, K)
    cb = operand_codes(b, form.dtype_b, p, imm_scale_b == -1).reshape(nbatch, K, N)
    A = decode_operand(ca[..., None], operand_spec(form.dtype_a, p), kblk=kblk)
    B = decode_operand(cb, operand_spec(form.dtype_b, p), kblk=kblk)
    bits = fdpa_chain(A, B, bits_of(c).astype(np.uint32).reshape(-1, N), p, kblk=kblk, rows_per_b=M)
    return from_bits(bits, form.dtype_d).reshape(batch + (M, N))


def wgmma_reference(instr: str, a, b, c=None, *, scale_d: bool = True, imm_scale_a: int = 1,
                    imm_scale_b: int = 1, params: Optional[Params] = None) -> np.ndarray:
    """Same as :func:`wgmma`, computed with the readable float64 formula
    :func:`refmodel.accumulate.fdpa` (slow; the tests hold the two bit-identical)."""
    form, p, a, b, c, batch = prepare(instr, a, b, c, scale_d, imm_scale_a, imm_scale_b, params)
    with np.errstate(all="ignore"):  # NaN / Inf inputs are expected here
        return _reference(form, p, a, b, c, imm_scale_a, imm_scale_b)


def _reference(form: WgmmaForm, p: Params, a, b, c, imm_scale_a: int, imm_scale_b: int) -> np.ndarray:
    K = form.k
    kblk = p.k_group or K
    if form.family == "int8":
        clamp = p.clamps(form.satfinite)
        av = a.astype(np.int64)[..., :, None, :]        # (..., 64, 1, K)
        bv = np.swapaxes(b.astype(np.int64), -1, -2)[..., None, :, :]  # (..., 1, N, K)
        d = c.astype(np.int64)
        for k0 in range(0, K, kblk):
            d = int_dot(av[..., k0:k0 + kblk], bv[..., k0:k0 + kblk], d, clamp)
        return d
    av = operand_values(a, form.dtype_a, p) * imm_scale_a
    bv = operand_values(b, form.dtype_b, p) * imm_scale_b
    av = av[..., :, None, :]
    bv = np.swapaxes(bv, -1, -2)[..., None, :, :]
    fa, fb = operand_spec(form.dtype_a, p), operand_spec(form.dtype_b, p)
    d = np.asarray(c)
    for k0 in range(0, K, kblk):
        d = fdpa(av[..., k0:k0 + kblk], bv[..., k0:k0 + kblk], d.astype(np.float64), p, fa, fb)
    return d
