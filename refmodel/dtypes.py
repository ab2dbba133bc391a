"""Element types and raw-bit views shared by every layer (the ground of refmodel).

``element_dtype('e4m3')`` is the numpy dtype wgref uses for typed arrays of a PTX
element type; :func:`bits_of` / :func:`raw_bits` / :func:`from_bits` convert between
typed arrays and unsigned integers of the same width for bit-for-bit work.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .errors import DTypeError, InputError

# element type name -> numpy dtype of the typed arrays wgref uses for it
ELEMENT_DTYPES: dict[str, np.dtype] = {
    "e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
    "e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "tf32": np.dtype(np.float32),  # tf32 travels in float32 containers
    "f32": np.dtype(np.float32),
    "s8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8),
    "s32": np.dtype(np.int32),
    "f64": np.dtype(np.float64),  # mma.sync's DMMA forms
}

_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

def element_dtype(name: str) -> np.dtype:
    """numpy dtype of the typed arrays for a PTX element type ('e4m3', 'f16', 's32', ...)."""
    if name not in ELEMENT_DTYPES:
        raise InputError(f"unknown element type {name!r}; known are {', '.join(ELEMENT_DTYPES)}")
    return ELEMENT_DTYPES[name]


def element_bytes(name: str) -> int:
    """Bytes one element of this type occupies in memory and registers."""
    return element_dtype(name).itemsize


def bits_of(x: np.ndarray) -> np.ndarray:
    """Unsigned view of any 1-, 2-, 4- or 8-byte array (a view when ``x`` is contiguous), for
    bit-for-bit comparison and editing; no dtype check (see :func:`raw_bits` for that)."""
    x = np.ascontiguousarray(x)
    return x.view(_UINT_OF_SIZE[x.dtype.itemsize])


def raw_bits(x: np.ndarray, name: str) -> np.ndarray:
    """View a typed array of element type ``name`` as unsigned integers of the same width."""
    from .validate import as_array

    dt = element_dtype(name)
    x = as_array(f"{name} data", x, what=f"a {dt.name} array")
    if x.dtype != dt:
        raise DTypeError(f"{name} data must be a {dt.name} array, got {x.dtype.name}")
    return np.ascontiguousarray(x).view(_UINT_OF_SIZE[dt.itemsize])


def from_bits(bits: np.ndarray, name: str) -> np.ndarray:
    """Inverse of :func:`raw_bits`: reinterpret unsigned integers as element type ``name``."""
    dt = element_dtype(name)
    u = _UINT_OF_SIZE[dt.itemsize]
    return np.ascontiguousarray(np.asarray(bits).astype(u, copy=False)).view(dt)
