"""FP8 (e4m3, e5m2) encode / decode, saturation policies and x2/x4 packing.

Encoding is one correctly rounded step (round to nearest, ties to even, with
subnormals) from the *exact* value of the input, whatever its width: a float64
input is never rounded through float32 first (ml_dtypes does that, so it turns
1 + 2**-4 + 2**-40 into 1.0; we give 1.125).

Overflow policies (``policy=``):

``satfinite``  what Hopper's ``cvt.rn.satfinite`` writes: results beyond the
               largest finite value, and +-Inf, become +-max (448 / 57344).
``nosat``      cuda_fp8.h's ``__NV_NOSAT`` software convention: overflow becomes
               NaN (e4m3 has no Inf) or +-Inf (e5m2).
``relu``       ``cvt.rn.satfinite.relu``: satfinite, and every negative result
               (-0 and -Inf included) becomes +0.

Every NaN input becomes the canonical NaN 0x7F (sign dropped), which is what the
H200 writes for all cvt forms (fixtures/cvt) and what cuda_fp8.h writes for
float and half inputs.

The same integer rounding kernel also produces f16 and bf16 (used by the
``cvt.rn.f16x2.f32`` packing forms); :func:`round_to_format` exposes it.
"""

from __future__ import annotations

import math

import ml_dtypes
import numba
import numpy as np

from .._parallel import parallel_ranges
from ..errors import DTypeError, InputError
from ..validate import _describe, as_array, broadcast, check_codes, check_flag
from .formats import FormatSpec, F16, BF16, F32, F64, format_spec, fp8_spec

POLICIES = ("satfinite", "nosat", "relu")

# source formats an encoder accepts, keyed by numpy dtype
_SOURCE_SPECS = {
    np.dtype(np.float64): (F64, np.uint64),
    np.dtype(np.float32): (F32, np.uint32),
    np.dtype(np.float16): (F16, np.uint16),
    np.dtype(ml_dtypes.bfloat16): (BF16, np.uint16),
}


@numba.njit(cache=True)
def _bitlen(v):
    n = 0
    while v:
        v >>= 1
        n += 1
    return n


@numba.njit(cache=True)
def _encode_one(bits, se, sm, src_ieee, de, dm, max_code, nan_code, inf_code,
                overflow_code, relu, rz):
    """Round one value, given as the bit pattern of a (se, sm) binary format, to the
    (de, dm) format.  ``src_ieee``: the source's all-ones exponent holds Inf/NaN
    (else only the all-ones magnitude is NaN, as in e4m3).  ``inf_code``: result for
    +-Inf input; ``overflow_code``: for a finite value that rounds past ``max_code``
    (both get the sign OR-ed in).  ``rz``: truncate instead of RNE.  Returns an int."""
    sign = (bits >> (se + sm)) & 1
    exp = (bits >> sm) & ((1 << se) - 1)
    man = bits & ((1 << sm) - 1)
    dsign = sign << (de + dm)
    if src_ieee:
        if exp == (1 << se) - 1:
            if man != 0:
                return nan_code
            if sign and relu:
                return 0
            return inf_code | dsign
    elif exp == (1 << se) - 1 and man == (1 << sm) - 1:
        return nan_code
    if sign and relu:
        return 0
    src_bias = (1 << (se - 1)) - 1
    if exp == 0:
        if man == 0:
            return dsign
        sig = man
        e0 = 1 - src_bias - sm  # value = sig * 2**e0
    else:
        sig = man | (1 << sm)
        e0 = exp - src_bias - sm
    lg = e0 + _bitlen(sig) - 1  # floor(log2(value))
    demin = 2 - (1 << (de - 1))  # 1 - bias
    top = lg if lg > demin else demin
    shift = top - dm - e0  # bits of sig below the destination quantum
    if shift <= 0:
        r = sig << (-shift)
    elif shift > 62:
        r = 0
    else:
        r = sig >> shift
        if not rz:
            rem = sig & ((1 << shift) - 1)
            half = 1 << (shift - 1)
            if rem > half or (rem == half and (r & 1)):
                r += 1
    code = ((top - demin) << dm) + r  # a carry out of r bumps the exponent field
    if code > max_code:
        return overflow_code | dsign
    return code | dsign


@numba.njit(cache=True, nogil=True)
def _encode_array(lo, hi, bits, out, se, sm, src_ieee, de, dm, max_code, nan_code, inf_code,
                  overflow_code, relu, rz):
    for i in range(lo, hi):
        out[i] = _encode_one(np.int64(bits[i]), se, sm, src_ieee, de, dm, max_code,
                             nan_code, inf_code, overflow_code, relu, rz)


def _policy_flags(policy: str) -> tuple[bool, bool]:
    if not isinstance(policy, str) or policy not in POLICIES:
        raise InputError(f"policy must be one of {', '.join(POLICIES)}, got {_describe(policy)}")
    return policy != "nosat", policy == "relu"


def _as_float_array(x) -> np.ndarray:
    arr = as_array("input dtype", x, what="float64, float32, float16 or bfloat16")
    if arr.dtype.kind in "iub":
        arr = arr.astype(np.float64)  # exact up to 2**53; larger integers round once
    if arr.dtype not in _SOURCE_SPECS:
        raise DTypeError(
            f"input dtype must be float64, float32, float16 or bfloat16, got {arr.dtype}")
    return arr


def encoder_params(dst: FormatSpec, saturate: bool, relu: bool, rz: bool = False) -> tuple:
    """(de, dm, max_code, nan_code, inf_code, overflow_code, relu, rz) for the kernels.

    Saturating: Inf and overflow give +-max.  Otherwise Inf gives Inf (NaN for e4m3),
    and overflow gives Inf/NaN under RNE but +-max under RZ (the IEEE 754 rule)."""
    special = dst.inf_code if dst.ieee_specials else dst.nan_code
    inf = dst.max_code if saturate else special
    overflow = dst.max_code if (saturate or rz) else special
    return dst.ebits, dst.mbits, dst.max_code, dst.nan_code, inf, overflow, bool(relu), bool(rz)


def _out_dtype(dst: FormatSpec):
    if dst.bits > 16:
        raise InputError(f"conversions target 8- or 16-bit formats, got {dst.name}")
    return np.uint8 if dst.bits == 8 else np.uint16


def convert_codes(codes, src: str | FormatSpec, dst: str | FormatSpec, *,
                  saturate: bool = True, relu: bool = False, rz: bool = False) -> np.ndarray:
    """Convert raw codes of one format (integer array) to codes of another (<= 16 bits)."""
    s, d = format_spec(src), format_spec(dst)
    saturate, relu, rz = (check_flag("saturate", saturate), check_flag("relu", relu), check_flag("rz", rz))
    c = np.ascontiguousarray(np.asarray(codes).astype(np.uint64)).reshape(-1)
    out = np.empty(c.size, dtype=_out_dtype(d))
    parallel_ranges(_encode_array, c.size, c, out, s.ebits, s.mbits, s.ieee_specials,
                    *encoder_params(d, saturate, relu, rz), min_piece=1 << 14)
    return out.reshape(np.shape(codes))


def round_to_format(x, fmt: str | FormatSpec, *, saturate: bool = True,
                    relu: bool = False, rz: bool = False) -> np.ndarray:
    """Codes of ``x`` rounded (RNE, or RZ with ``rz``; subnormals kept) to ``fmt``
    (e4m3, e5m2, f16, bf16).

    ``saturate``: overflow and +-Inf give +-max; otherwise Inf (IEEE-like formats)
    or NaN (e4m3).  ``relu``: negative results become +0.  NaN gives the canonical NaN.
    Returns uint8 codes for FP8 and uint16 codes for f16/bf16, shaped like ``x``.
    """
    dst = format_spec(fmt)
    saturate, relu, rz = (check_flag("saturate", saturate), check_flag("relu", relu), check_flag("rz", rz))
    out_dtype = _out_dtype(dst)
    arr = _as_float_array(x)
    src, utype = _SOURCE_SPECS[arr.dtype]
    bits = np.ascontiguousarray(arr).view(utype).reshape(-1)
    out = np.empty(bits.size, dtype=out_dtype)
    parallel_ranges(_encode_array, bits.size, bits, out, src.ebits, src.mbits, True,
                    *encoder_params(dst, saturate, relu, rz), min_piece=1 << 14)
    return out.reshape(arr.shape)


def encode(x, fmt: str | FormatSpec, policy: str = "satfinite") -> np.ndarray:
    """FP8 codes (uint8) of ``x`` (float64/32/16 or bfloat16) under an overflow policy.

    >>> hex(int(encode(np.float32(450.0), "e4m3")))   # 450 rounds to 448 = 0x7E
    '0x7e'
    """
    spec = fp8_spec(fmt)
    saturate, relu = _policy_flags(policy)
    return round_to_format(x, spec, saturate=saturate, relu=relu)


def encode_reference(x, fmt: str | FormatSpec, policy: str = "satfinite") -> np.ndarray:
    """Readable float64 formula for :func:`encode` (slow; used to test the kernel).

    q = x * 2**(m - max(floor(log2|x|), emin)) is exact in float64; rint() is RNE.
    """
    spec = fp8_spec(fmt)
    saturate, relu = _policy_flags(policy)
    v = _as_float_array(x).astype(np.float64).reshape(-1)
    out = np.empty(v.size, dtype=np.uint8)
    overflow = spec.max_code if saturate else (spec.inf_code if spec.ieee_specials else spec.nan_code)
    for i, xv in enumerate(v):
        sign = 0x80 if np.signbit(xv) else 0
        if np.isnan(xv):
            out[i] = spec.nan_code
            continue
        if relu and sign:
            out[i] = 0
            continue
        a = abs(xv)
        if np.isinf(a):
            out[i] = overflow | sign
            continue
        if a == 0:
            out[i] = sign
            continue
        lg = max(math.frexp(a)[1] - 1, spec.emin)  # frexp: a = m * 2**e, m in [0.5, 1), exact
        r = int(np.rint(math.ldexp(a, spec.mbits - lg)))  # exact scaling; rint is RNE
        code = ((lg - spec.emin) << spec.mbits) + r
        out[i] = (overflow if code > spec.max_code else code) | sign
    return out.reshape(np.shape(x))


# --------------------------------------------------------------------------- decode

def _decode_table(spec: FormatSpec) -> np.ndarray:
    from .formats import decode_scalar

    n = 1 << spec.bits
    vals = np.array([decode_scalar(c, spec) for c in range(n)], dtype=np.float64)
    out = vals.astype(np.float32)
    out.view(np.uint32)[np.isnan(vals)] = 0x7FFFFFFF
    return out


_TABLES: dict[str, np.ndarray] = {}


def decode_table(fmt: str | FormatSpec) -> np.ndarray:
    """float32 value of every code of an 8- or 16-bit format (NaN codes -> 0x7FFFFFFF)."""
    spec = format_spec(fmt)
    if spec.name not in _TABLES:
        _TABLES[spec.name] = _decode_table(spec)
    return _TABLES[spec.name]


def decode(codes, fmt: str | FormatSpec) -> np.ndarray:
    """float32 values of FP8 (uint8) codes; exact.  NaN codes decode to 0x7FFFFFFF."""
    spec = fp8_spec(fmt)
    # integer codes in 0..255, or an ml_dtypes array of this very format (an e5m2 array
    # is not e4m3 codes: refused, not reinterpreted)
    c = check_codes("FP8 codes", codes, 8, spec.name, typed=spec.dtype)
    return decode_table(spec)[c.astype(np.intp)]


def to_ml_dtypes(codes, fmt: str | FormatSpec) -> np.ndarray:
    """View uint8 codes as ml_dtypes.float8_e4m3fn / float8_e5m2 (no copy)."""
    spec = fp8_spec(fmt)
    return np.asarray(codes, dtype=np.uint8).view(spec.dtype)


# --------------------------------------------------------------------------- packing

def _check_codes(name: str, v) -> np.ndarray:
    return check_codes(name, v, 8, "FP8").astype(np.uint32)


def pack_x2(e0, e1) -> np.ndarray:
    """Pack two FP8 codes into a uint16 (.e4m3x2 / .e5m2x2): element 0 in bits 7:0."""
    a, b = broadcast(e0=_check_codes("e0", e0), e1=_check_codes("e1", e1))
    return (a | (b << np.uint32(8))).astype(np.uint16)


def unpack_x2(packed) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`pack_x2`: (element 0 = bits 7:0, element 1 = bits 15:8)."""
    p = check_codes("packed", packed, 16, "packed .x2").astype(np.uint32)
    return (p & 0xFF).astype(np.uint8), ((p >> 8) & 0xFF).astype(np.uint8)


def pack_x4(e0, e1, e2, e3) -> np.ndarray:
    """Pack four FP8 codes into a uint32 (.e4m3x4): element i in bits 8i+7:8i."""
    out = np.uint32(0)
    codes = broadcast(**{f"e{i}": _check_codes(f"e{i}", e) for i, e in enumerate((e0, e1, e2, e3))})
    for i, c in enumerate(codes):
        out = out | (c << np.uint32(8 * i))
    return np.asarray(out, dtype=np.uint32)


def unpack_x4(packed) -> tuple[np.ndarray, ...]:
    """Inverse of :func:`pack_x4`: four uint8 arrays, element 0 first."""
    p = check_codes("packed", packed, 32, "packed .x4").astype(np.uint32)
    return tuple(((p >> (8 * i)) & 0xFF).astype(np.uint8) for i in range(4))
