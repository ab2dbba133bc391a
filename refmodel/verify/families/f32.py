"""The f32 engine's input families: float32 bit patterns (uint32, so NaN payloads survive) for the
f32 -> FP8/f16/bf16 cvt forms, drawn by the cvt recorder, ``wgref fuzz cvt`` and the tests; what each
family stresses is in the catalogue (:mod:`refmodel.verify.families`)."""

from __future__ import annotations

import numpy as np

from ...numerics.formats import format_spec


def _u32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.uint64).astype(np.uint32)


def ties_f32(rng: np.random.Generator, n: int, fmt: str) -> np.ndarray:
    """Values exactly half-way between two neighbouring codes of ``fmt`` (as float32),
    and their float32 neighbours one ulp either side."""
    spec = format_spec(fmt)
    from ...numerics.fp8 import decode_table

    table = decode_table(spec).astype(np.float64)
    codes = rng.integers(0, spec.max_code, n)  # positive finite, not the last
    mid = (table[codes] + table[codes + 1]) / 2  # exact: one more bit than fmt
    bits = _u32(mid.astype(np.float32).view(np.uint32))
    delta = rng.integers(-1, 2, n).astype(np.int64)
    bits = _u32(np.clip(bits.astype(np.int64) + delta, 0, 0x7F7FFFFF))
    sign = rng.integers(0, 2, n).astype(np.uint32) << 31
    return bits | sign


def boundary_f32(fmt: str) -> np.ndarray:
    """Every float32 near the edges of ``fmt``: max, overflow threshold, min normal,
    min subnormal, half of it; 64 float32 ulps either side, both signs."""
    spec = format_spec(fmt)
    pts = [spec.max, spec.max + 2.0 ** (spec.emax - spec.mbits - 1), spec.smallest_normal,
           spec.smallest_subnormal, spec.smallest_subnormal / 2, 1.0]
    out = []
    for p in pts:
        b = int(np.float32(p).view(np.uint32))
        out.append(np.arange(max(b - 64, 0), b + 65, dtype=np.int64))
    pos = _u32(np.concatenate(out))
    return np.concatenate([pos, pos | np.uint32(0x80000000)])


def specials_f32(rng: np.random.Generator, n: int) -> np.ndarray:
    """+-0, +-Inf, NaNs with random payloads and both signs, float32 subnormals."""
    fixed = _u32([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                  0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF, 0x00000001, 0x807FFFFF])
    nan = _u32(0x7F800000 | rng.integers(1, 1 << 23, n // 2)) | (
        rng.integers(0, 2, n // 2).astype(np.uint32) << 31)
    sub = _u32(rng.integers(1, 1 << 23, n - n // 2)) | (
        rng.integers(0, 2, n - n // 2).astype(np.uint32) << 31)
    return np.concatenate([fixed, nan, sub])


def range_f32(rng: np.random.Generator, n: int, lo_exp: int, hi_exp: int) -> np.ndarray:
    """Random float32 with exponents uniform in [lo_exp, hi_exp], random sign and mantissa."""
    e = rng.integers(lo_exp + 127, hi_exp + 128, n).astype(np.uint32)
    m = rng.integers(0, 1 << 23, n).astype(np.uint32)
    s = rng.integers(0, 2, n).astype(np.uint32)
    return (s << 31) | (e << 23) | m


def adversarial_f32(rng: np.random.Generator, n: int, targets=("e4m3", "e5m2", "f16", "bf16")) -> np.ndarray:
    """A shuffled mix: uniform bit patterns, ties and boundaries of every target format,
    specials, and values spread over each target's exponent range."""
    parts = [_u32(rng.integers(0, 1 << 32, n // 4, dtype=np.uint64)), specials_f32(rng, n // 16)]
    per = max(1, n // (4 * len(targets)))
    for t in targets:
        spec = format_spec(t)
        parts += [ties_f32(rng, per, t), boundary_f32(t),
                  range_f32(rng, per, spec.emin - spec.mbits - 3, min(spec.emax + 2, 127))]
    allv = np.concatenate(parts)
    if allv.size < n:
        allv = np.concatenate([allv, _u32(rng.integers(0, 1 << 32, n - allv.size, dtype=np.uint64))])
    rng.shuffle(allv)
    return allv[:n]


# the engine's spelling -> generator; ``boundary`` takes only the target format
GENERATORS = {"ties": ties_f32, "boundary": boundary_f32, "specials": specials_f32, "range": range_f32,
              "adversarial": adversarial_f32}
