"""Argument checks shared by every public entry point (the ground of refmodel).

Each helper either returns a clean value (a native-byte-order numpy array, a Python
bool / int / str) or raises one :mod:`refmodel.errors` exception whose one sentence
names the rule that was broken, so that no bad argument ever reaches numpy or numba
internals (and comes back as an IndexError from somewhere deep) or is silently
accepted (``None`` read as NaN, a float32 array read as FP8 codes).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from .errors import DTypeError, InputError

# dtype kinds numpy arrays of numbers have: bool, signed, unsigned, float
_REAL_KINDS = "biuf"


def _describe(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return f"a {x.dtype} array of shape {x.shape}"
    r = repr(x)
    return r if len(r) <= 40 else r[:37] + "..."


def native(arr: np.ndarray) -> np.ndarray:
    """The same values in native byte order (big-endian arrays are converted, not refused)."""
    if arr.dtype.byteorder not in ("=", "|") and not arr.dtype.isnative:
        return arr.astype(arr.dtype.newbyteorder("="))
    return arr


def as_array(name: str, x: Any, *, what: str = "a numeric array") -> np.ndarray:
    """``np.asarray(x)`` in native byte order, refusing what is not numbers at all:
    None, strings, bytes, complex numbers, Python ints beyond 64 bits, objects."""
    if x is None or isinstance(x, (str, bytes, dict, set)):
        raise DTypeError(f"{name} must be {what}, got {_describe(x)}")
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError, OverflowError):
        raise DTypeError(f"{name} must be {what} (a rectangular array of numbers), "
                         f"got {_describe(x)}") from None
    if arr.dtype.kind == "O":
        raise DTypeError(f"{name} must be {what}, got {_describe(x)} (an object array: None, "
                         "an integer beyond 64 bits, or mixed types)")
    if arr.dtype.kind == "c":
        raise DTypeError(f"{name} must be {what}; complex numbers are not accepted, got {arr.dtype}")
    if arr.dtype.kind in "USVMm" and not _is_ml_float(arr.dtype):
        raise DTypeError(f"{name} must be {what}, got {arr.dtype} data")
    return native(arr)


def as_real(name: str, x: Any, *, what: str = "a real number or array of real numbers") -> np.ndarray:
    """Like :func:`as_array`, and the dtype must be bool, integer or float (ml_dtypes floats too)."""
    arr = as_array(name, x, what=what)
    if arr.dtype.kind not in _REAL_KINDS and not _is_ml_float(arr.dtype):
        raise DTypeError(f"{name} must be {what}, got {arr.dtype}")
    return arr


def _is_ml_float(dt: np.dtype) -> bool:
    """True for the ml_dtypes float types (float8_*, bfloat16, ...), which numpy calls kind 'V'."""
    return dt.kind == "V" and dt.type.__module__.startswith("ml_dtypes")


def as_float32(name: str, x: Any, *, what: str = "a float32 scalar or array") -> np.ndarray:
    """A real number/array converted to float32 (values beyond float32 become +-Inf)."""
    arr = as_real(name, x, what=what)
    with np.errstate(over="ignore"):
        return arr.astype(np.float64).astype(np.float32) if arr.dtype.kind != "f" else \
            arr.astype(np.float32)


def check_str(name: str, v: Any, example: str) -> str:
    """A non-empty string (the instruction, format or option name)."""
    if not isinstance(v, str) or not v.strip():
        raise InputError(f"{name} must be a non-empty string such as {example!r}, got {_describe(v)}")
    return v


def check_flag(name: str, v: Any) -> bool:
    """True/False, or the integers 1/0 (Python or numpy scalars, not arrays, strings or floats)."""
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)) and int(v) in (0, 1):
        return bool(v)
    raise InputError(f"{name} must be True/False (or 1/0), got {_describe(v)}")


def check_int(name: str, v: Any, lo: int | None = None, hi: int | None = None) -> int:
    """An integer (not a bool, float or string) in [lo, hi]."""
    if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iu":
        v = v[()]
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise InputError(f"{name} must be an integer, got {_describe(v)}")
    v = int(v)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = (f"from {lo} to {hi}" if hi is not None else f">= {lo}") if lo is not None else f"<= {hi}"
        raise InputError(f"{name} must be an integer {rng}, got {v}")
    return v


def check_real_scalar(name: str, v: Any, *, finite: bool = False) -> float:
    """A real number (Python, numpy scalar or 0-d array) as a Python float."""
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, np.floating, np.integer)):
        raise InputError(f"{name} must be a real number, got {_describe(v)}")
    try:
        f = float(v)
    except OverflowError:
        raise InputError(f"{name} must fit in a double, got {_describe(v)}") from None
    if finite and not math.isfinite(f):
        raise InputError(f"{name} must be a finite number, got {f!r}")
    return f


def broadcast(**arrays: np.ndarray) -> list[np.ndarray]:
    """np.broadcast_arrays with a one-sentence error naming the operands and their shapes."""
    try:
        return list(np.broadcast_arrays(*arrays.values()))
    except ValueError:
        shapes = ", ".join(f"{k} {tuple(v.shape)}" for k, v in arrays.items())
        raise InputError(f"operand shapes do not broadcast: {shapes}") from None


def check_codes(name: str, x: Any, bits: int, fmt_name: str | None = None, *,
                typed: Any = None) -> np.ndarray:
    """Raw codes of a ``bits``-wide format as an unsigned array (8, 16, 32 or 64 bits wide).

    Integer arrays must hold values in 0 .. 2**bits - 1; a typed (non-integer) array is
    accepted only when it is the format's own dtype ``typed`` (an e5m2 array is not e4m3
    codes, a float32 array is not FP8 codes) and is then viewed as its bits."""
    width = next(w for w in (8, 16, 32, 64) if w >= bits)
    utype = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
    label = fmt_name or f"{bits}-bit"
    arr = as_array(name, x, what=f"an integer array of {label} codes")
    if arr.dtype.kind in "iu":
        hi = (1 << bits) - 1
        if arr.size:
            lo_v, hi_v = int(arr.min()), int(arr.max())
            if lo_v < 0 or hi_v > hi:
                raise InputError(f"{name} must hold {label} codes in 0..{hi}, "
                                 f"got {lo_v if lo_v < 0 else hi_v}")
        return arr.astype(utype)
    want = np.dtype(typed) if typed is not None else None
    if want is not None and arr.dtype == want and want.itemsize * 8 == width:
        return np.ascontiguousarray(arr).view(utype)
    raise DTypeError(f"{name} must be an integer array of {label} codes"
                     + (f" or a {want.name} array" if want is not None else "")
                     + f", got {arr.dtype}")


def json_safe(obj: Any) -> Any:
    """Replace non-finite floats by the strings 'nan', 'inf', '-inf' (strict JSON has no NaN)."""
    if isinstance(obj, float) or isinstance(obj, np.floating):
        f = float(obj)
        if math.isnan(f):
            return "nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return f
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def dumps_strict(obj: Any, **kw) -> str:
    """``json.dumps`` that never emits NaN / Infinity (see :func:`json_safe`)."""
    import json

    return json.dumps(json_safe(obj), allow_nan=False, **kw)
