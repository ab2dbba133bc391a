"""The matrix engine's input families: whole (M, K) and (K, N) operands of a library GEMM call.

Drawn by ``wgref fuzz lib:...`` (``gpu.fuzz.library``) from a numpy Generator; what each family
stresses is in the catalogue (:mod:`refmodel.verify.families`).
"""

from __future__ import annotations

import numba
import numpy as np

from ...dtypes import bits_of, element_dtype, from_bits
from ...errors import InputError
from ...numerics.sweep import encode_f32_fast
from ..seeded import FORMATS
from . import draws, names

_SAFE_EXP = 56                      # wide/subnormal families: |exponent| <= 56 so products stay in f32
WIDE_TOP = 4                        # the wide family's largest exponent: sums of K <= 2048 products fit f16
FAMILIES = names("matrix")   # narrow, wide, special, cancel, zero, subnormal


def _fmt(dtype: str) -> tuple[int, int, int]:
    e, m, w, _ = FORMATS[dtype]
    return e, m, w


def _uint(width: int):
    return {8: np.uint8, 16: np.uint16, 32: np.uint32}[width]


def _compose_formula(dtype: str, sign, efield, man) -> np.ndarray:
    """Element bits from sign, biased exponent field and mantissa arrays (e4m3's NaN code -> max);
    numpy formulas (:func:`_compose` is the compiled loop, tested equal)."""
    e, m, w = _fmt(dtype)
    bits = (np.asarray(sign, np.uint64) << np.uint64(e + m)) | (np.asarray(efield, np.uint64) << np.uint64(m)) \
        | np.asarray(man, np.uint64)
    if dtype == "e4m3":
        bits = np.where((bits & 0x7F) == 0x7F, bits - 1, bits)
    return bits.astype(_uint(w))


@numba.njit(cache=True, nogil=True)
def _compose_kernel(sign, efield, man, sh_sign, sh_exp, e4m3, out):
    for i in range(out.size):
        b = (np.int64(sign[i]) << sh_sign) | (np.int64(efield[i]) << sh_exp) | np.int64(man[i])
        if e4m3 and (b & 0x7F) == 0x7F:
            b -= 1
        out[i] = b


def _compose(dtype: str, sign, efield, man) -> np.ndarray:
    """Element bits (``dtype``'s unsigned word) from sign, biased exponent field and mantissa integer
    arrays of one shape (sign and exponent field uint8, the mantissa the word); e4m3's NaN code
    becomes its max."""
    e, m, w = _fmt(dtype)
    man = np.ascontiguousarray(man)
    out = np.empty(man.size, _uint(w))
    _compose_kernel(np.ascontiguousarray(sign).reshape(-1), np.ascontiguousarray(efield).reshape(-1),
                    man.reshape(-1), e + m, m, dtype == "e4m3", out)
    return out.reshape(man.shape)


def special_values(dtype: str) -> dict[str, int]:
    """Bits of +0, +Inf (e4m3 has none: its max), a quiet NaN, the max finite and the min subnormal."""
    e, m, _ = _fmt(dtype)
    emax = (1 << e) - 1
    if dtype == "e4m3":
        return {"zero": 0, "inf": 0x7E, "nan": 0x7F, "max": 0x7E, "min_subnormal": 1}
    return {"zero": 0, "inf": emax << m, "nan": (emax << m) | (1 << (m - 1)),
            "max": ((emax - 1) << m) | ((1 << m) - 1), "min_subnormal": 1}


_POW2 = np.exp2(np.arange(-3, 5)).astype(np.float32)     # 2**-3 .. 2**4, exact
_ROUNDED = ("e4m3", "e5m2", "f16", "bf16")              # rounded by refmodel's float32 RNE kernel (= the casts)


def _narrow_formula(rng: np.random.Generator, dtype: str, shape) -> np.ndarray:
    """Standard normals times 2**randint(-3, 4), rounded to ``dtype`` (as bits): numpy formulas
    (:func:`_narrow` draws the same and is tested equal)."""
    x = draws.standard_normal(rng, shape).astype(np.float32)
    x *= _POW2[draws.integers(rng, -3, 5, shape) + 3]
    fmax = _fmax(dtype)
    np.clip(x, -fmax, fmax, out=x)
    return _encode(x, dtype)


@numba.njit(cache=True, nogil=True)
def _scaled_kernel(normal, k, fmax, out):
    """out = clip(float32(normal) * 2**k, -fmax, fmax) (float32; normals are never NaN)."""
    for i in range(out.size):
        x = np.float32(normal[i]) * _POW2[k[i] + 3]
        out[i] = min(max(x, -fmax), fmax)


def _fmax(dtype: str) -> float:
    return float(from_bits(np.array([special_values(dtype)["max"]]), dtype).astype(np.float32)[0])


def _encode(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype in _ROUNDED:      # the same codes as x.astype(element_dtype(dtype)), several times faster
        return encode_f32_fast(x.view(np.uint32), dtype)
    return bits_of(x.astype(element_dtype(dtype))).copy()


def _narrow(rng: np.random.Generator, dtype: str, shape) -> np.ndarray:
    """Standard normals times 2**randint(-3, 4), rounded to ``dtype`` (as bits).  On PCG64 the normals
    are drawn as float32 and the exponents drawn and applied in one pass (:mod:`.pcg64`)."""
    if draws.pcg64 is not None:
        x = draws.pcg64.standard_normal(rng, draws._size(shape), np.float32)
        if x is not None and draws.pcg64.scale_by_integers(rng, x, -3, 5, _POW2, _fmax(dtype)):
            return _encode(x.reshape(shape), dtype)
        assert x is None, "the normals were drawn: the exponents must be too"
    normal = draws.standard_normal(rng, shape)
    k = draws.integers(rng, -3, 5, shape)
    x = np.empty(normal.shape, np.float32)
    _scaled_kernel(normal.reshape(-1), k.reshape(-1), np.float32(_fmax(dtype)), x.reshape(-1))
    return _encode(x, dtype)


def _random_exponent_formula(rng: np.random.Generator, dtype: str, shape, lo: int, hi: int) -> np.ndarray:
    """Normal values with unbiased exponents uniform in [lo, hi] (kept inside the dtype's normals)."""
    e, m, _ = _fmt(dtype)
    bias = (1 << (e - 1)) - 1
    flo, fhi = max(1, lo + bias), min((1 << e) - 2 + (dtype == "e4m3"), hi + bias)
    return _compose_formula(dtype, draws.integers(rng, 0, 2, shape), draws.integers(rng, flo, fhi + 1, shape),
                    draws.integers(rng, 0, 1 << m, shape))


def _random_exponent(rng: np.random.Generator, dtype: str, shape, lo: int, hi: int) -> np.ndarray:
    """Normal values with unbiased exponents uniform in [lo, hi] (kept inside the dtype's normals)."""
    e, m, w = _fmt(dtype)
    bias = (1 << (e - 1)) - 1
    flo, fhi = max(1, lo + bias), min((1 << e) - 2 + (dtype == "e4m3"), hi + bias)
    return _compose(dtype, draws.integers(rng, 0, 2, shape, np.uint8),
                    draws.integers(rng, flo, fhi + 1, shape, np.uint8),
                    draws.integers(rng, 0, 1 << m, shape, _uint(w)))


def _emin(dtype: str) -> int:
    """The smallest normal exponent of ``dtype``."""
    e, _, _ = _fmt(dtype)
    return 2 - (1 << (e - 1))


def _operand_formula(rng: np.random.Generator, family: str, dtype: str, shape, role: str, K: int) -> np.ndarray:
    """One operand's bits (``role`` 'a' or 'b') in ``family``; see :func:`make_inputs`.  numpy formulas:
    :func:`_operand` draws the same numbers and is tested equal."""
    e, m, w = _fmt(dtype)
    sign = np.uint64(1 << (e + m))
    if family in ("narrow", "cancel"):
        return _narrow_formula(rng, dtype, shape)
    if family == "wide":
        return _random_exponent_formula(rng, dtype, shape, max(_emin(dtype), -_SAFE_EXP), WIDE_TOP)
    if family == "special":
        x = _narrow_formula(rng, dtype, shape)
        sp = special_values(dtype)
        vals = np.array([sp["zero"], sp["inf"], sp["nan"], sp["max"], sp["min_subnormal"]], np.uint64)
        hit = draws.random(rng, shape) < min(1 / 64, 1 / K)
        pick = vals[draws.integers(rng, 0, vals.size, shape)] | (draws.integers(rng, 0, 2, shape).astype(np.uint64) * sign)
        return np.where(hit, pick, x).astype(_uint(w))
    if family == "zero":
        zeros = (draws.integers(rng, 0, 2, shape).astype(np.uint64) * sign)
        return np.where(draws.random(rng, shape) < 31 / 32, zeros, _narrow_formula(rng, dtype, shape)).astype(_uint(w))
    if family == "subnormal":
        lo = _emin(dtype)
        if role == "b":     # large values: B times A's subnormals lands in the normal range
            top = min(-lo, _SAFE_EXP)
            return _random_exponent_formula(rng, dtype, shape, top - 4, top)
        sub = _compose_formula(dtype, draws.integers(rng, 0, 2, shape), 0, draws.integers(rng, 1, 1 << m, shape))
        low = _random_exponent_formula(rng, dtype, shape, lo, lo + 2)
        return np.where(draws.random(rng, shape) < 0.75, sub, low).astype(_uint(w))
    raise InputError(f"unknown input family {family!r}; known are {', '.join(FAMILIES)}")


@numba.njit(cache=True, nogil=True)
def _pick_kernel(hit, base, sg, sign, x, out):
    """out = base | sg * sign where hit, else x (base, x, out: the element's word; sg uint8)."""
    for i in range(out.size):
        out[i] = (np.int64(base[i]) | (np.int64(sg[i]) * sign)) if hit[i] else np.int64(x[i])


def _pick(hit, base, sg, sign: int, x, w: int) -> np.ndarray:
    """``np.where(hit, base | sg * sign, x)`` as ``w``-bit words, in one compiled pass (``base`` and
    ``x`` ``w``-bit words, ``sg`` uint8)."""
    out = np.empty(hit.size, _uint(w))
    _pick_kernel(hit.reshape(-1), np.ascontiguousarray(base, _uint(w)).reshape(-1), sg.reshape(-1),
                 np.int64(sign), np.ascontiguousarray(x, _uint(w)).reshape(-1), out)
    return out.reshape(hit.shape)


def _operand(rng: np.random.Generator, family: str, dtype: str, shape, role: str, K: int) -> np.ndarray:
    """One operand's bits (``role`` 'a' or 'b') in ``family``; see :func:`make_inputs`."""
    e, m, w = _fmt(dtype)
    sign = 1 << (e + m)
    if family in ("narrow", "cancel"):
        return _narrow(rng, dtype, shape)
    if family == "wide":
        return _random_exponent(rng, dtype, shape, max(_emin(dtype), -_SAFE_EXP), WIDE_TOP)
    if family == "special":
        x = _narrow(rng, dtype, shape)
        sp = special_values(dtype)
        vals = np.array([sp["zero"], sp["inf"], sp["nan"], sp["max"], sp["min_subnormal"]], _uint(w))
        hit = draws.below(rng, min(1 / 64, 1 / K), shape)
        picked = vals[draws.integers(rng, 0, vals.size, shape, np.uint8)]
        return _pick(hit, picked, draws.integers(rng, 0, 2, shape, np.uint8), sign, x, w)
    if family == "zero":
        sg = draws.integers(rng, 0, 2, shape, np.uint8)
        hit = draws.below(rng, 31 / 32, shape)
        return _pick(hit, np.zeros(sg.shape, _uint(w)), sg, sign, _narrow(rng, dtype, shape), w)
    if family == "subnormal":
        lo = _emin(dtype)
        if role == "b":     # large values: B times A's subnormals lands in the normal range
            top = min(-lo, _SAFE_EXP)
            return _random_exponent(rng, dtype, shape, top - 4, top)
        sg = draws.integers(rng, 0, 2, shape, np.uint8)
        man = draws.integers(rng, 1, 1 << m, shape, _uint(w))
        low = _random_exponent(rng, dtype, shape, lo, lo + 2)
        # the subnormal (exponent field 0) where a uniform draw is below 0.75, else the low normal
        return _pick(draws.below(rng, 0.75, shape), man, sg, sign, low, w)
    raise InputError(f"unknown input family {family!r}; known are {', '.join(FAMILIES)}")


def make_inputs(rng: np.random.Generator, family: str, dtype: str, M: int, N: int, K: int):
    """A (M, K) and B (K, N) of ``dtype`` (typed ml_dtypes/numpy arrays) in one input family.

    narrow: normals times 2**randint(-3, 4); wide: exponents uniform from the smallest normal one
    (at least -56) up to :data:`WIDE_TOP` (products span most of the range, sums stay finite in
    f16); special: narrow with min(1/64, 1/K) of the elements ±0, ±Inf (e4m3: ±max), ±NaN, ±max,
    ±min subnormal (about two per dot product, so most outputs are not NaN); cancel: narrow with
    A[:, 2i+1] = A[:, 2i] and B[2i+1] = -B[2i] (each pair of products cancels exactly); zero: 31/32
    of the elements ±0; subnormal: A 3/4 subnormals and 1/4 of the lowest normal binades, B large
    (about 2**-emin, at most 2**56) so the products are normal numbers."""
    if K % 2 and family == "cancel":
        raise InputError(f"the cancel family pairs K columns: K must be even, got {K}")
    a = _operand(rng, family, dtype, (M, K), "a", K)
    b = _operand(rng, family, dtype, (K, N), "b", K)
    if family == "cancel":
        e, m, _ = _fmt(dtype)
        a[:, 1::2] = a[:, 0::2]
        b[1::2] = b[0::2] ^ a.dtype.type(1 << (e + m))
    return from_bits(a, dtype), from_bits(b, dtype)
