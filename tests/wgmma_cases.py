"""Input generators for the accumulator tests: random and adversarial typed operands."""

from __future__ import annotations

import numpy as np

from refmodel.numerics.formats import format_spec
from refmodel.dtypes import element_dtype

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}
# element type -> format of its bits (tf32 travels in an f32 container)
_FMT = {"e4m3": "e4m3", "e5m2": "e5m2", "f16": "f16", "bf16": "bf16", "tf32": "f32", "f32": "f32"}

KINDS = ("bits", "finite", "mixed", "subnormal", "extreme", "small_int")


def _finite_codes(rng, spec, shape):
    """Uniformly random finite codes (both signs)."""
    mag = rng.integers(0, spec.max_code + 1, shape, dtype=np.int64)
    return mag | (rng.integers(0, 2, shape, dtype=np.int64) << (spec.bits - 1))


def codes(rng: np.random.Generator, name: str, shape, kind: str) -> np.ndarray:
    """Raw codes (int64) of element type ``name`` drawn by ``kind``:

    bits: every bit pattern (NaN, Inf, subnormals, ...); finite: random finite codes;
    mixed: per element zero / subnormal / max / NaN / Inf / random; subnormal: exponent
    field 0; extreme: largest and smallest magnitudes; small_int: small integers.
    """
    spec = format_spec(_FMT[name])
    shape = tuple(shape)
    sign = rng.integers(0, 2, shape, dtype=np.int64) << (spec.bits - 1)
    if kind == "bits":
        return rng.integers(0, 1 << spec.bits, shape, dtype=np.int64)
    if kind == "finite":
        return _finite_codes(rng, spec, shape)
    if kind == "subnormal":
        return rng.integers(0, 1 << spec.mbits, shape, dtype=np.int64) | sign
    if kind == "extreme":
        hi = spec.max_code - rng.integers(0, 4, shape, dtype=np.int64)
        lo = rng.integers(0, 4, shape, dtype=np.int64)
        return np.where(rng.random(shape) < 0.5, hi, lo) | sign
    if kind == "small_int":
        v = rng.integers(-4, 5, shape).astype(np.float64)
        return _encode(v, name)
    if kind == "mixed":
        out = _finite_codes(rng, spec, shape)
        u = rng.random(shape)
        sub = rng.integers(0, 1 << spec.mbits, shape, dtype=np.int64) | sign
        out = np.where(u < 0.15, sign, out)                                 # +-0
        out = np.where((u >= 0.15) & (u < 0.3), sub, out)                    # subnormals
        out = np.where((u >= 0.3) & (u < 0.4), spec.max_code | sign, out)    # +-max
        if spec.ieee_specials:
            out = np.where((u >= 0.4) & (u < 0.42), spec.inf_code | sign, out)  # +-Inf
            nan = spec.inf_code | 1
        else:
            nan = spec.mag_mask
        out = np.where((u >= 0.42) & (u < 0.43), nan | sign, out)           # NaN
        return out
    raise ValueError(kind)


def _encode(v: np.ndarray, name: str) -> np.ndarray:
    dt = element_dtype(name)
    return v.astype(np.float32).astype(dt).view(_UINT[dt.itemsize]).astype(np.int64)


def typed(c: np.ndarray, name: str) -> np.ndarray:
    """View int codes as the typed array of element type ``name``."""
    dt = element_dtype(name)
    return np.asarray(c).astype(_UINT[dt.itemsize]).view(dt)


def operand(rng, name, shape, kind) -> np.ndarray:
    """A typed random operand; tf32 operands also get random ignored low bits."""
    c = codes(rng, name, shape, kind)
    if name == "tf32":
        c = c ^ rng.integers(0, 1 << 13, c.shape, dtype=np.int64) if kind != "small_int" else c
    return typed(c, name)


def cancel_pairs(rng, a: np.ndarray, b: np.ndarray):
    """Make products cancel: the second half of K repeats the first half with B negated."""
    K = a.shape[-1]
    h = K // 2
    a = a.copy()
    b = b.copy()
    a[..., h:2 * h] = a[..., :h]
    b[..., h:2 * h, :] = -b[..., :h, :]
    return a, b


def bits_of(x: np.ndarray) -> np.ndarray:
    """Unsigned view of a typed array (for bit-exact comparisons)."""
    x = np.ascontiguousarray(x)
    return x.view(_UINT[x.dtype.itemsize])
