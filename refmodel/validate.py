"""Argument checks shared by every public entry point (the ground of refmodel).

Each helper either returns a clean value (a native-byte-order numpy array, a Python
bool / int / str) or raises one :mod:`refmodel.errors` exception whose one sentence
names the rule that was broken, so that no bad argument ever reaches numpy or numba
internals (and comes back as an IndexError from somewhere deep) or is silently
accepted (``None`` read as NaN, a float32 array read as FP8 codes).
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import numbers
import re
import reprlib
from typing import Any, Callable

import numpy as np

from .errors import DTypeError, InputError
from .limits import LIMITS, MAX_JSON_BYTES, MAX_JSON_DEPTH, check_limit, show_value

# dtype kinds numpy arrays of numbers have: bool, signed, unsigned, float
_REAL_KINDS = "biuf"


#: the longest excerpt of a user's value an error message quotes
EXCERPT_CHARS = 60

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = EXCERPT_CHARS
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6
_REPR.maxlevel = 3


def excerpt(x: Any) -> str:
    """A short text naming a user's value in a message (at most ~80 characters, whatever the
    value: a 5,000-character string, a 10**5000 integer, a deep list, an object whose repr fails)."""
    if isinstance(x, np.ndarray):
        shape = str(x.shape) if x.ndim <= 8 else f"({x.ndim} dimensions)"
        return f"a {x.dtype} array of shape {shape}"
    if isinstance(x, (bool, np.bool_)):
        return repr(bool(x))
    if isinstance(x, (int, np.integer)):
        return show_value(int(x))
    if isinstance(x, (str, bytes)):
        r = repr(x[:EXCERPT_CHARS])
        return r if len(x) <= EXCERPT_CHARS else f"{r[:-1]}...{r[-1]} ({len(x)} characters)"
    try:
        r = _REPR.repr(x)
    except Exception:  # noqa: BLE001 - a value whose repr fails is still named
        r = f"a {type(x).__name__}"
    return r if len(r) <= EXCERPT_CHARS + 20 else r[:EXCERPT_CHARS] + "..."


_describe = excerpt


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


# a code point no UTF-8 text holds: a lone UTF-16 surrogate (JSON's "\\ud800" without its pair, or a
# byte that was not UTF-8, decoded with surrogateescape)
_SURROGATE = re.compile("[\ud800-\udfff]")
# where a JSON text may decode to one: a surrogate itself, or a \\uD800..\\uDFFF escape
_SURROGATE_IN_JSON = re.compile(r"[\ud800-\udfff]|\\u[dD][89a-fA-F]")


def check_text(name: str, v: str) -> str:
    """The rule for text a user gives (a trace's role, tag, id or barrier name; every string of a
    JSON document wgref reads: replay configurations, journals, manifests, schedules): Unicode
    scalar values only.  A lone surrogate is no character -- it cannot be printed, written as
    UTF-8 or compared with what a kernel's source says -- so it is refused where the text comes
    in, in one sentence naming the field and the position."""
    m = _SURROGATE.search(v)
    if m is not None:
        raise InputError(f"{name} must be Unicode text, but character {m.start()} is a lone surrogate "
                         f"U+{ord(m.group()):04X} (a \\u escape without its pair, or bytes that are not "
                         f"UTF-8), got {excerpt(v)}")
    return v


def check_json_text(obj: Any, where: str, *, text: str | None = None) -> Any:
    """``obj`` (a decoded JSON value) if every string in it, keys included, passes :func:`check_text`;
    the field is named in the error (``where``, then the path: ``trace line 3: field 't'``).  With the
    JSON ``text`` it came from, a text that holds no surrogate and no \\uD800..\\uDFFF escape is
    passed without walking ``obj``."""
    if text is not None and _SURROGATE_IN_JSON.search(text) is None:
        return obj
    stack = [(obj, "")]
    while stack:
        o, path = stack.pop()
        if isinstance(o, str):
            check_text(f"{where}{path and ': ' + path}", o)
        elif isinstance(o, dict):
            for k, v in o.items():
                if isinstance(k, str):
                    check_text(f"{where}{path and ': ' + path}: a key", k)
                stack.append((v, f"{path}[{k!r}]" if path else f"field {k!r}"))
        elif isinstance(o, (list, tuple)):
            stack.extend((v, f"{path or 'item'}[{i}]") for i, v in enumerate(o))
    return obj


def check_flag(name: str, v: Any, *, allow_none: bool = False) -> bool | None:
    """The one boolean checker: True/False, numpy bools, or the integers 1/0 (Python or numpy
    scalars, 0-d arrays of those); never a string ("no" and "false" are refused, not read as
    true), a float, None (unless ``allow_none``), another integer or an array."""
    if v is None and allow_none:
        return None
    if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "biu":
        v = v[()]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)) and int(v) in (0, 1):
        return bool(v)
    raise InputError(f"{name} must be True/False (or 1/0){' or None' if allow_none else ''}, "
                     f"got {_describe(v)}")


def check_int(name: str, v: Any, lo: int | None = None, hi: int | None = None, *,
              multiple: int | None = None, limit: str | None = None, rule: str | None = None) -> int:
    """The one integer checker: an integer (a Python or numpy integer or a 0-d integer array;
    never a bool, a float -- 1.0 and NaN included --, a string or None) in [lo, hi], a multiple of
    ``multiple``, and at most the limit named ``limit`` (:mod:`refmodel.limits`).  ``rule`` is
    added to the message (why the range is what it is)."""
    if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iu":
        v = v[()]
    why = f" ({rule})" if rule else ""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise InputError(f"{name} must be an integer{why}, got {_describe(v)}")
    v = int(v)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = (f"from {lo} to {hi}" if hi is not None else f">= {lo}") if lo is not None else f"<= {hi}"
        raise InputError(f"{name} must be an integer {rng}{why}, got {show_value(v)}")
    if limit is not None:
        check_limit(limit, v, name)
    if multiple and v % multiple:
        raise InputError(f"{name} must be a multiple of {multiple}{why}, got {show_value(v)}")
    return v


def check_choice(name: str, v: Any, choices) -> Any:
    """One of ``choices`` (compared by equality after a type check: an unhashable or exotic value
    is refused with the list, never a TypeError)."""
    for c in choices:
        same_kind = isinstance(v, type(c)) and isinstance(v, (bool, np.bool_)) == isinstance(c, bool)
        if same_kind and v == c:
            return c
    raise InputError(f"{name} must be one of {', '.join(map(str, choices))}, got {_describe(v)}")


def check_instr(name: str, v: Any, example: str) -> str:
    """An instruction opcode string of a sane length, before any parser sees it (so a 5,000-character
    string is refused in one short sentence instead of echoed)."""
    if not isinstance(v, str):
        raise InputError(f"{name} must be a string such as {example!r}, got {_describe(v)}")
    check_limit("instr_chars", len(v), f"{name} (an opcode)")
    return v


def opcode(instr: Any, example: str, max_chars: int) -> str:
    """The opcode of an instruction string (operands after a space are ignored), refused in one sentence
    (:class:`~refmodel.errors.FormError`) when it is not a string or longer than ``max_chars``: the prelude of
    every form parser (wgmma, sparse wgmma, mma.sync)."""
    from .errors import FormError

    if not isinstance(instr, str):
        shown = repr(instr)
        raise FormError(f"instr must be a string such as {example!r}, got "
                        f"{shown if len(shown) <= 80 else shown[:77] + '...'}")
    op = instr.strip().split()[0] if instr.strip() else ""
    if len(op) > max_chars:
        raise FormError(f"instr must be an opcode of at most {max_chars} characters, got one of {len(op)} "
                        f"({op[:40]!r}...)")
    return op


def check_registers(name: str, x: Any, shape: tuple | None = None) -> np.ndarray:
    """32-bit register images as uint32: an integer array whose values fit 32 bits (0..2**32-1;
    int32 arrays are taken as the same 32 bits), never wrapped modulo 2**32 or read from floats."""
    arr = as_array(name, x, what="an integer array of 32-bit register values")
    if shape is not None and arr.shape != tuple(shape):
        raise InputError(f"{name} must have shape {tuple(shape)}, got {arr.shape}")
    if arr.dtype == np.int32:
        return np.ascontiguousarray(arr).view(np.uint32)
    if arr.dtype.kind not in "iu":
        raise DTypeError(f"{name} must be an integer array of 32-bit register values (uint32), got {arr.dtype}")
    return check_codes(name, arr, 32, "32-bit register")


def strict_options(fn: Callable) -> Callable:
    """Refuse options a function does not take with one sentence naming the ones it does
    (instead of Python's TypeError), e.g. a cuBLAS-only option given to the Triton model."""
    sig = inspect.signature(fn)
    names = [p.name for p in sig.parameters.values() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        unknown = [k for k in kwargs if k not in sig.parameters]
        if unknown:
            raise InputError(f"{fn.__name__} does not take the option {_describe(unknown[0])}; it applies to "
                             f"another model (its options are {', '.join(names)})")
        try:
            sig.bind(*args, **kwargs)
        except TypeError as e:
            raise InputError(f"{fn.__name__}: {e}") from None
        return fn(*args, **kwargs)

    return wrapper


_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_depth(text: str) -> int:
    """How deep the brackets of a JSON text nest (strings skipped), without parsing it."""
    depth = top = 0
    for m in _JSON_TOKENS.finditer(text):
        t = m.group()
        if t in "[{":
            depth += 1
            top = max(top, depth)
        elif t in "]}":
            depth -= 1
    return top


def loads_json(text: str, what: str, *, max_depth: int = MAX_JSON_DEPTH, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """``json.loads`` for a document a user gave: its size and nesting bounded (:mod:`refmodel.limits`)
    before parsing, and every failure -- bad JSON, an integer of more than 4300 digits, a nesting
    that would recurse too deep -- one :class:`InputError` naming ``what``."""
    if not isinstance(text, str):
        raise InputError(f"{what} must be JSON text, got {_describe(text)}")
    if len(text) > max_bytes:
        check_limit("json_bytes", len(text), f"{what} (characters)")
    if json_depth(text) > max_depth:
        raise InputError(f"{what} nests deeper than {max_depth} levels (limit 'json_depth': "
                         f"{LIMITS['json_depth'].reason})")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{what} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except (ValueError, RecursionError) as e:
        raise InputError(f"{what} is not valid JSON ({str(e)[:80]})") from None
    return check_json_text(obj, what, text=text)


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
