"""The tile engine's input families: whole 64 x N wgmma tiles (A, B, C) from a numpy Generator.

Drawn by the wgmma recorders (``gpu.record.wgmma``, ``gpu.record.forms``), the CPU-model fuzz
engine (``wgref fuzz <form>``) and the tests; what each family stresses is in the catalogue
(:mod:`refmodel.verify.families`).  A family's generator takes ``(form, rng, tiles, chain)`` and
returns the typed ``(a, b, c)`` arrays of ``tiles`` tiles, A (T, 64, K*chain), B (T, K*chain, N),
C (T, 64, N).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...dtypes import element_dtype, from_bits
from ...numerics.formats import BF16, E4M3, E5M2, F16, F32, FormatSpec
from ...wgmma_forms import M, WgmmaForm
from . import ENGINE, FAMILY

SPECS: dict[str, FormatSpec] = {"e4m3": E4M3, "e5m2": E5M2, "f16": F16, "bf16": BF16, "tf32": F32, "f32": F32}
_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32}
TF32_MASK = np.uint32(0xFFFFE000)


def _nonfinite(bits: np.ndarray, spec: FormatSpec) -> np.ndarray:
    mag = bits.astype(np.uint64) & spec.mag_mask
    if spec.ieee_specials:
        return mag >= spec.inf_code
    return mag == spec.mag_mask


def _max_field(spec: FormatSpec) -> int:
    return spec.max_code >> spec.mbits


def _uniform_bits(rng, shape, nbits: int) -> np.ndarray:
    return rng.integers(0, 1 << nbits, size=shape, dtype=np.uint64).astype(_UINT[nbits])


def _finite_bits(rng, shape, spec: FormatSpec, nbits: int) -> np.ndarray:
    b = _uniform_bits(rng, shape, nbits)
    bad = _nonfinite(b, spec)
    b[bad] &= _UINT[nbits](~(1 << (spec.bits - 2)) & ((1 << nbits) - 1))  # clear top exponent bit
    return b


def _values(rng, shape, spec: FormatSpec, elo: int, ehi: int, nbits: int, *, sub: bool = False) -> np.ndarray:
    """Random sign and mantissa, exponent field for unbiased exponents in [elo, ehi] (finite)."""
    lo = 0 if sub else max(1, elo + spec.bias)
    lo = min(lo, _max_field(spec))
    hi = max(lo, min(_max_field(spec), ehi + spec.bias))
    fld = rng.integers(lo, hi + 1, size=shape, dtype=np.uint64)
    man = rng.integers(0, 1 << spec.mbits, size=shape, dtype=np.uint64)
    sgn = rng.integers(0, 2, size=shape, dtype=np.uint64)
    b = (sgn << np.uint64(spec.bits - 1)) | (fld << np.uint64(spec.mbits)) | man
    b = np.where(_nonfinite(b, spec), b - np.uint64(1), b)  # e4m3 S.1111.111 -> max finite
    return b.astype(_UINT[nbits])


def _subnormals(rng, shape, spec: FormatSpec, nbits: int) -> np.ndarray:
    man = rng.integers(1, 1 << spec.mbits, size=shape, dtype=np.uint64)
    sgn = rng.integers(0, 2, size=shape, dtype=np.uint64)
    return ((sgn << np.uint64(spec.bits - 1)) | man).astype(_UINT[nbits])


class _Ops:
    """Per-form helpers: specs, widths and typed conversion of the three operands."""

    def __init__(self, form: WgmmaForm, tiles: int, chain: int):
        self.form, self.tiles, self.chain = form, tiles, chain
        kk = form.k * chain
        self.shapes = {"a": (tiles, M, kk), "b": (tiles, kk, form.n), "c": (tiles, M, form.n)}
        self.names = {"a": form.dtype_a, "b": form.dtype_b, "c": form.dtype_d}

    def spec(self, op: str) -> FormatSpec:
        return SPECS[self.names[op]]

    def nbits(self, op: str) -> int:
        return 8 * element_dtype(self.names[op]).itemsize

    def typed(self, op: str, bits: np.ndarray, *, tf32_clean: bool = True) -> np.ndarray:
        if self.names[op] == "tf32" and tf32_clean:
            bits = bits & TF32_MASK
        return from_bits(bits, self.names[op])


def _float_family(gen: Callable) -> Callable:
    def make(form, rng, tiles, chain):
        ops = _Ops(form, tiles, chain)
        return gen(ops, rng)
    return make


def _fam_random_bits(ops, rng):
    return tuple(ops.typed(o, _uniform_bits(rng, ops.shapes[o], ops.nbits(o)), tf32_clean=False) for o in "abc")


def _fam_finite_bits(ops, rng):
    return tuple(ops.typed(o, _finite_bits(rng, ops.shapes[o], ops.spec(o), ops.nbits(o)), tf32_clean=False)
                 for o in "abc")


def _fam_narrow_band(ops, rng):
    lk = int(np.log2(ops.form.k))
    a = _values(rng, ops.shapes["a"], ops.spec("a"), -1, 1, ops.nbits("a"))
    b = _values(rng, ops.shapes["b"], ops.spec("b"), -1, 1, ops.nbits("b"))
    c = _values(rng, ops.shapes["c"], ops.spec("c"), 0, lk + 1, ops.nbits("c"))
    return ops.typed("a", a), ops.typed("b", b), ops.typed("c", c)


def _fam_wide_spread(ops, rng):
    a = _values(rng, ops.shapes["a"], ops.spec("a"), -200, 200, ops.nbits("a"), sub=True)
    b = _values(rng, ops.shapes["b"], ops.spec("b"), -200, 200, ops.nbits("b"), sub=True)
    c = _values(rng, ops.shapes["c"], ops.spec("c"), -40, 40, ops.nbits("c"))
    return ops.typed("a", a), ops.typed("b", b), ops.typed("c", c)


def _fam_large_c(ops, rng):
    a = _values(rng, ops.shapes["a"], ops.spec("a"), -2, 2, ops.nbits("a"))
    b = _values(rng, ops.shapes["b"], ops.spec("b"), -2, 2, ops.nbits("b"))
    mc = ops.spec("c").mbits
    c = _values(rng, ops.shapes["c"], ops.spec("c"), mc - 3, mc + 3, ops.nbits("c"))
    return ops.typed("a", a), ops.typed("b", b), ops.typed("c", c)


def _fam_subnormal_c(ops, rng):
    sa, sb = ops.spec("a"), ops.spec("b")
    a = _values(rng, ops.shapes["a"], sa, -500, sa.emin + 2, ops.nbits("a"), sub=True)
    b = _values(rng, ops.shapes["b"], sb, -500, sb.emin + 2, ops.nbits("b"), sub=True)
    rows = rng.random(ops.shapes["a"][:2]) < 0.25
    a[rows] = 0
    c = _subnormals(rng, ops.shapes["c"], ops.spec("c"), ops.nbits("c"))
    return ops.typed("a", a), ops.typed("b", b), ops.typed("c", c)


def _fam_zero_rows(ops, rng):
    a = _values(rng, ops.shapes["a"], ops.spec("a"), -1, 1, ops.nbits("a"))
    b = _values(rng, ops.shapes["b"], ops.spec("b"), -1, 1, ops.nbits("b"))
    c = _values(rng, ops.shapes["c"], ops.spec("c"), -1, 1, ops.nbits("c"))
    zsign = lambda shape, nb: (rng.integers(0, 2, size=shape).astype(np.uint64) << np.uint64(nb - 1)).astype(_UINT[nb])  # noqa: E731
    ra = rng.random(ops.shapes["a"][:2]) < 0.25                      # zero rows of A
    a[ra] = zsign(a[ra].shape, ops.nbits("a"))
    cb = rng.random((ops.shapes["b"][0], ops.shapes["b"][2])) < 0.25  # zero columns of B
    bt = b.transpose(0, 2, 1)
    bt[cb] = zsign(bt[cb].shape, ops.nbits("b"))
    zc = rng.random(ops.shapes["c"]) < 0.5
    c[zc] = zsign(c[zc].shape, ops.nbits("c"))
    return ops.typed("a", a), ops.typed("b", b), ops.typed("c", c)


def _fam_overflow(ops, rng):
    sa, sb, sc = ops.spec("a"), ops.spec("b"), ops.spec("c")
    a = _values(rng, ops.shapes["a"], sa, sa.emax - 1, sa.emax, ops.nbits("a"))
    b = _values(rng, ops.shapes["b"], sb, sb.emax - 1, sb.emax, ops.nbits("b"))
    c = _values(rng, ops.shapes["c"], sc, sc.emax, sc.emax, ops.nbits("c"))
    c[rng.random(ops.tiles) < 0.5] = 0
    return ops.typed("a", a), ops.typed("b", b), ops.typed("c", c)


def _small_int_limits(form: WgmmaForm, chain: int) -> tuple[int, int]:
    """(max |a|,|b|, max |c|) keeping every partial sum exact in the accumulator."""
    room = 1800 if form.dtype_d == "f16" else 1 << 22
    ab = int(min(8, max(1, np.sqrt((room - 64) / (form.k * chain)))))
    return ab, 64


def _fam_small_int(ops, rng):
    ab, cc = _small_int_limits(ops.form, ops.chain)
    a = rng.integers(-ab, ab + 1, size=ops.shapes["a"]).astype(np.float64)
    b = rng.integers(-ab, ab + 1, size=ops.shapes["b"]).astype(np.float64)
    c = rng.integers(-cc, cc + 1, size=ops.shapes["c"]).astype(np.float64)
    conv = lambda x, o: x.astype(element_dtype(ops.names[o]))  # noqa: E731  (exact: small ints)
    return conv(a, "a"), conv(b, "b"), conv(c, "c")


_INT_EXTREMES = {"s8": np.array([-128, -127, -1, 0, 1, 126, 127], np.int64),
                 "u8": np.array([0, 1, 127, 128, 254, 255], np.int64)}


def _int_ops(form, tiles, chain):
    ops = _Ops(form, tiles, chain)
    return ops, (lambda o, x: x.astype(element_dtype(ops.names[o])))


def _fam_int_random(form, rng, tiles, chain):
    ops, conv = _int_ops(form, tiles, chain)
    a = _uniform_bits(rng, ops.shapes["a"], 8).view(element_dtype(form.dtype_a))
    b = _uniform_bits(rng, ops.shapes["b"], 8).view(element_dtype(form.dtype_b))
    c = rng.integers(-(1 << 20), 1 << 20, size=ops.shapes["c"])
    return a, b, conv("c", c)


def _fam_int_extremes(form, rng, tiles, chain):
    ops, conv = _int_ops(form, tiles, chain)
    a = rng.choice(_INT_EXTREMES[form.dtype_a], size=ops.shapes["a"])
    b = rng.choice(_INT_EXTREMES[form.dtype_b], size=ops.shapes["b"])
    c = rng.integers(-(1 << 20), 1 << 20, size=ops.shapes["c"])
    return conv("a", a), conv("b", b), conv("c", c)


def _fam_int_c_limits(form, rng, tiles, chain):
    ops, conv = _int_ops(form, tiles, chain)
    a = rng.choice(_INT_EXTREMES[form.dtype_a], size=ops.shapes["a"])
    b = rng.choice(_INT_EXTREMES[form.dtype_b], size=ops.shapes["b"])
    r = rng.integers(0, 1 << 21, size=ops.shapes["c"])
    hi = rng.random(ops.shapes["c"]) < 0.5
    c = np.where(hi, (2**31 - 1) - r, -(2**31) + r)
    return conv("a", a), conv("b", b), conv("c", c)


def _fam_int_random_c(form, rng, tiles, chain):
    ops, conv = _int_ops(form, tiles, chain)
    a = _uniform_bits(rng, ops.shapes["a"], 8).view(element_dtype(form.dtype_a))
    b = _uniform_bits(rng, ops.shapes["b"], 8).view(element_dtype(form.dtype_b))
    c = _uniform_bits(rng, ops.shapes["c"], 32).view(np.int32)
    return a, b, c


# name -> generator (form, rng, tiles, chain) -> (a, b, c); the catalogue says what each stresses
GENERATORS: dict[str, Callable] = {
    "small_int": _float_family(_fam_small_int),
    "random_bits": _float_family(_fam_random_bits),
    "finite_bits": _float_family(_fam_finite_bits),
    "narrow_band": _float_family(_fam_narrow_band),
    "wide_spread": _float_family(_fam_wide_spread),
    "large_c": _float_family(_fam_large_c),
    "subnormal_c": _float_family(_fam_subnormal_c),
    "zero_rows": _float_family(_fam_zero_rows),
    "overflow": _float_family(_fam_overflow),
    "int_random": _fam_int_random,
    "int_extremes": _fam_int_extremes,
    "int_c_limits": _fam_int_c_limits,
    "int_random_c": _fam_int_random_c,
}


@dataclass(frozen=True)
class TileFamily:
    """A family as the tile engine draws it: its name, generator and whether results are exact."""

    name: str
    make: Callable  # (form, rng, tiles, chain) -> (a, b, c) typed
    exact: bool = False


def _families(float_kind: bool) -> tuple[TileFamily, ...]:
    out = []
    for spelling, fam in ENGINE["tile"].families:
        f = FAMILY[fam]
        if ("float" in f.kinds) == float_kind:
            out.append(TileFamily(spelling, GENERATORS[spelling], f.exact))
    return tuple(out)


FLOAT_FAMILIES = _families(True)    # float forms (f16, bf16, tf32, e4m3, e5m2)
INT_FAMILIES = _families(False)     # int8 forms


def families_for(form: WgmmaForm) -> tuple[TileFamily, ...]:
    """The families the tile engine draws for a form, in draw order."""
    return INT_FAMILIES if form.family == "int8" else FLOAT_FAMILIES


def tile_inputs(form: WgmmaForm, chain: int, rng: np.random.Generator, tiles: int,
                families: tuple[TileFamily, ...] | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(a, b, c, family index per tile, family names): ``tiles`` tiles of every family, concatenated."""
    fams = families if families is not None else families_for(form)
    parts = [f.make(form, rng, tiles, chain) for f in fams]
    a, b, c = (np.concatenate([p[i] for p in parts]) for i in range(3))
    idx = np.repeat(np.arange(len(fams), dtype=np.int16), tiles)
    return a, b, c, idx, [f.name for f in fams]
