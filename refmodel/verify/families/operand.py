"""The operand engine's input families: one operand tile of any element type, element by element,
from a numpy Generator (the sparse wgmma recorder and fuzzer, ``gpu.record.sparse``); what each
family stresses is in the catalogue (:mod:`refmodel.verify.families`)."""

from __future__ import annotations

import numpy as np

from ...dtypes import element_dtype
from . import names

FAMILIES = names("operand")   # ints, wide, narrow, bits


def random_operand(rng, dtype: str, shape, family: str) -> np.ndarray:
    """A ``dtype`` array of ``shape`` in ``family`` (integer types: uniform over the type, whatever the family)."""
    dt = element_dtype(dtype)
    n = int(np.prod(shape))
    if dtype in ("s8", "u8"):
        return rng.integers(np.iinfo(dt).min, np.iinfo(dt).max + 1, n).astype(dt).reshape(shape)
    if family == "bits":
        w = dt.itemsize
        u = rng.integers(0, 1 << (8 * w), n, dtype=np.uint64).astype({1: np.uint8, 2: np.uint16, 4: np.uint32}[w])
        return u.view(dt).reshape(shape)
    if family == "ints":
        return rng.integers(-8, 9, n).astype(np.float32).astype(dt).reshape(shape)
    e = rng.integers(-12, 12, n) if family == "wide" else rng.integers(-3, 4, n)
    x = rng.standard_normal(n) * 2.0 ** e
    return x.astype(np.float32).astype(dt).reshape(shape)
