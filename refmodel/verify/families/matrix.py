"""The matrix engine's input families: whole (M, K) and (K, N) operands of a library GEMM call.

Drawn by ``wgref fuzz lib:...`` (``gpu.fuzz.library``) from a numpy Generator; what each family
stresses is in the catalogue (:mod:`refmodel.verify.families`).
"""

from __future__ import annotations

import numpy as np

from ...dtypes import bits_of, element_dtype, from_bits
from ...errors import InputError
from ...numerics.sweep import encode_f32_fast
from ..seeded import FORMATS
from . import names

_SAFE_EXP = 56                      # wide/subnormal families: |exponent| <= 56 so products stay in f32
WIDE_TOP = 4                        # the wide family's largest exponent: sums of K <= 2048 products fit f16
FAMILIES = names("matrix")   # narrow, wide, special, cancel, zero, subnormal


def _fmt(dtype: str) -> tuple[int, int, int]:
    e, m, w, _ = FORMATS[dtype]
    return e, m, w


def _uint(width: int):
    return {8: np.uint8, 16: np.uint16, 32: np.uint32}[width]


def _compose(dtype: str, sign, efield, man) -> np.ndarray:
    """Element bits from sign, biased exponent field and mantissa arrays (e4m3's NaN code -> max)."""
    e, m, w = _fmt(dtype)
    bits = (np.asarray(sign, np.uint64) << np.uint64(e + m)) | (np.asarray(efield, np.uint64) << np.uint64(m)) \
        | np.asarray(man, np.uint64)
    if dtype == "e4m3":
        bits = np.where((bits & 0x7F) == 0x7F, bits - 1, bits)
    return bits.astype(_uint(w))


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


def _narrow(rng: np.random.Generator, dtype: str, shape) -> np.ndarray:
    """Standard normals times 2**randint(-3, 4), rounded to ``dtype`` (as bits)."""
    x = rng.standard_normal(shape).astype(np.float32)
    x *= _POW2[rng.integers(-3, 5, shape) + 3]
    fmax = float(from_bits(np.array([special_values(dtype)["max"]]), dtype).astype(np.float32)[0])
    np.clip(x, -fmax, fmax, out=x)
    if dtype in _ROUNDED:      # the same codes as x.astype(element_dtype(dtype)), several times faster
        return encode_f32_fast(x.view(np.uint32), dtype)
    return bits_of(x.astype(element_dtype(dtype))).copy()


def _random_exponent(rng: np.random.Generator, dtype: str, shape, lo: int, hi: int) -> np.ndarray:
    """Normal values with unbiased exponents uniform in [lo, hi] (kept inside the dtype's normals)."""
    e, m, _ = _fmt(dtype)
    bias = (1 << (e - 1)) - 1
    flo, fhi = max(1, lo + bias), min((1 << e) - 2 + (dtype == "e4m3"), hi + bias)
    return _compose(dtype, rng.integers(0, 2, shape), rng.integers(flo, fhi + 1, shape),
                    rng.integers(0, 1 << m, shape))


def _emin(dtype: str) -> int:
    """The smallest normal exponent of ``dtype``."""
    e, _, _ = _fmt(dtype)
    return 2 - (1 << (e - 1))


def _operand(rng: np.random.Generator, family: str, dtype: str, shape, role: str, K: int) -> np.ndarray:
    """One operand's bits (``role`` 'a' or 'b') in ``family``; see :func:`make_inputs`."""
    e, m, w = _fmt(dtype)
    sign = np.uint64(1 << (e + m))
    if family in ("narrow", "cancel"):
        return _narrow(rng, dtype, shape)
    if family == "wide":
        return _random_exponent(rng, dtype, shape, max(_emin(dtype), -_SAFE_EXP), WIDE_TOP)
    if family == "special":
        x = _narrow(rng, dtype, shape)
        sp = special_values(dtype)
        vals = np.array([sp["zero"], sp["inf"], sp["nan"], sp["max"], sp["min_subnormal"]], np.uint64)
        hit = rng.random(shape) < min(1 / 64, 1 / K)
        pick = vals[rng.integers(0, vals.size, shape)] | (rng.integers(0, 2, shape).astype(np.uint64) * sign)
        return np.where(hit, pick, x).astype(_uint(w))
    if family == "zero":
        zeros = (rng.integers(0, 2, shape).astype(np.uint64) * sign)
        return np.where(rng.random(shape) < 31 / 32, zeros, _narrow(rng, dtype, shape)).astype(_uint(w))
    if family == "subnormal":
        lo = _emin(dtype)
        if role == "b":     # large values: B times A's subnormals lands in the normal range
            top = min(-lo, _SAFE_EXP)
            return _random_exponent(rng, dtype, shape, top - 4, top)
        sub = _compose(dtype, rng.integers(0, 2, shape), 0, rng.integers(1, 1 << m, shape))
        low = _random_exponent(rng, dtype, shape, lo, lo + 2)
        return np.where(rng.random(shape) < 0.75, sub, low).astype(_uint(w))
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
