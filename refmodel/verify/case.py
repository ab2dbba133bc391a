"""One wgmma test case (a chain of instructions on one or more tiles) and its replay file.

A replay file (``.npz``) holds the operands as raw bits, the configuration, the
hardware's output (raw bits) when known, and free-form notes (seed, how it was
shrunk).  ``wgref replay FILE`` recomputes refmodel and diffs it against the stored
hardware output (and re-runs the hardware when a GPU is present).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ..errors import WgrefError, InputError
from ..dtypes import bits_of, element_dtype
from ..fileio import load_npz, save_npz
from ..limits import MAX_JSON_BYTES, MAX_JSON_DEPTH
from ..validate import check_flag, check_int, check_json_text, check_real_scalar, dumps_strict
from ..wgmma_forms import M, WgmmaForm, parse_wgmma

@dataclass
class WgmmaCase:
    """``chain`` wgmmas along K: a (T, 64, K*chain), b (T, K*chain, N), c (T, 64, N)."""

    instr: str
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    rs: bool = False
    scale_d: bool = True
    imm_scale_a: int = 1
    imm_scale_b: int = 1
    chain: int = 1
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def form(self) -> WgmmaForm:
        return parse_wgmma(self.instr)

    def with_(self, **changes) -> "WgmmaCase":
        return replace(self, **changes)

    def config(self) -> dict[str, Any]:
        return {"instr": self.instr, "rs": self.rs, "scale_d": self.scale_d,
                "imm_scale_a": self.imm_scale_a, "imm_scale_b": self.imm_scale_b,
                "chain": self.chain}

    def model(self) -> np.ndarray:
        """refmodel's D: the chain of instructions, each one's D the next one's C."""
        from ..numerics.wgmma import wgmma

        f = self.form
        d = self.c
        for s in range(self.chain):
            ks = slice(s * f.k, (s + 1) * f.k)
            d = wgmma(self.instr, self.a[..., ks], self.b[..., ks, :], d,
                      scale_d=self.scale_d if s == 0 else True,
                      imm_scale_a=self.imm_scale_a, imm_scale_b=self.imm_scale_b)
        return d

    def nonzeros(self) -> int:
        return int(sum(np.count_nonzero(bits_of(x)) for x in (self.a, self.b, self.c)))


def save_case(path: str | Path, case: WgmmaCase, *, hardware: Optional[np.ndarray] = None) -> Path:
    """Write a replay file (raw bits + JSON configuration)."""
    path = Path(path)
    arrays = {"a": bits_of(case.a), "b": bits_of(case.b), "c": bits_of(case.c),
              "config": np.array(config_text({**case.config(), "notes": case.notes}, DENSE_REPLAY))}
    if hardware is not None:
        arrays["hardware"] = bits_of(hardware)
    save_npz(path, **arrays)  # atomically: a killed writer leaves no partial file
    return path


# ----------------------------------------------------------------------------- file formats
# Every JSON structure wgref reads back (replay configurations here and in shrink_sparse, journal
# headers and records in journal.py) is checked by one declarative schema: field -> Field(kind,
# range, ...), applied by check_fields.  Nothing is read with bool()/int() on trust.

MAX_CONFIG_CHARS = MAX_JSON_BYTES   # a replay file's JSON configuration (notes and shrink log included)
_MISSING = object()


def _show(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _json_type(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def value_depth(v: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0), counted without recursion and
    stopping once it passes ``limit``."""
    best, stack = 0, [(v, 1)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, (dict, list)):
            best = max(best, d)
            if best > limit:
                return best
            stack.extend((y, d + 1) for y in (x.values() if isinstance(x, dict) else x))
    return best


class JSONSyntaxError(InputError):
    """The text is not JSON at all (a reader may treat it as a torn line)."""


def parse_json(text: str, where: str) -> Any:
    """One strict JSON value (no NaN/Infinity constants), nested at most :data:`MAX_JSON_DEPTH`
    deep; anything else is one InputError naming ``where``."""
    def no_constant(c):
        raise ValueError(f"non-standard JSON constant {c}")

    try:
        v = json.loads(text, parse_constant=no_constant)
    except RecursionError:
        raise InputError(f"{where} nests deeper than {MAX_JSON_DEPTH} levels (limit 'json_depth')") from None
    except json.JSONDecodeError as e:
        raise JSONSyntaxError(f"{where} is not valid JSON ({e.msg} at character {e.pos})") from None
    except (ValueError, TypeError) as e:
        raise InputError(f"{where} is not strict JSON ({str(e)[:80]})") from None
    if value_depth(v) > MAX_JSON_DEPTH:
        raise InputError(f"{where} nests deeper than {MAX_JSON_DEPTH} levels (limit 'json_depth')")
    return check_json_text(v, where, text=text)


@dataclass(frozen=True)
class Field:
    """One field of a JSON object: its ``kind`` (``int``, ``flag``, ``real``, ``str``, ``object``,
    ``strings``: a list of strings, ``ints``: a list of ints), the range ``lo``..``hi`` (for
    ``str``/lists: the largest length), whether it is ``required``, whether JSON null is allowed,
    its ``default`` when absent, and an extra ``rule`` (value -> error text or None)."""

    kind: str
    lo: Optional[float] = None
    hi: Optional[float] = None
    required: bool = False
    null: bool = False
    default: Any = _MISSING
    rule: Any = None
    length: Optional[int] = None   # lists: exactly this many items


def _check_value(name: str, v: Any, f: Field) -> Any:
    if v is None and f.null:
        return None
    k = f.kind
    if k == "flag":
        return check_flag(name, v)
    if k == "int":
        return check_int(name, v, None if f.lo is None else int(f.lo), None if f.hi is None else int(f.hi))
    if k == "real":
        x = check_real_scalar(name, v, finite=True)
        if (f.lo is not None and x < f.lo) or (f.hi is not None and x > f.hi):
            rng = f">= {f.lo}" if f.hi is None else f"from {f.lo} to {f.hi}"
            raise InputError(f"{name} must be a finite number {rng}, got {_show(v)}")
        return x
    if k == "str":
        if not isinstance(v, str):
            raise InputError(f"{name} must be a string, got {_json_type(v)} {_show(v)}")
        if "\x00" in v:
            raise InputError(f"{name} must not contain NUL characters, got {_show(v)}")
        if f.hi is not None and len(v) > f.hi:
            raise InputError(f"{name} must be at most {int(f.hi)} characters long, got {len(v)}")
        return v
    if k == "object":
        if not isinstance(v, dict):
            raise InputError(f"{name} must be a JSON object, got {_json_type(v)} {_show(v)}")
        return v
    if k in ("strings", "ints"):
        if not isinstance(v, list) or (f.length is not None and len(v) != f.length) or \
                (f.hi is not None and len(v) > f.hi):
            n = f"{f.length} " if f.length is not None else ""
            raise InputError(f"{name} must be a list of {n}{'strings' if k == 'strings' else 'integers'}, "
                             f"got {_json_type(v)} {_show(v)}")
        item = Field("str", hi=4096) if k == "strings" else Field("int")
        return [_check_value(f"{name}[{i}]", x, item) for i, x in enumerate(v)]
    raise AssertionError(f"unknown field kind {k!r}")


def check_fields(where: str, obj: Any, schema: dict[str, Field]) -> dict[str, Any]:
    """``obj`` checked against ``schema``: a JSON object with only the schema's keys, every
    required one present, each value of its field's kind and range (flags come back as bools);
    absent fields with a default get it.  One InputError naming ``where`` and the field."""
    if not isinstance(obj, dict):
        raise InputError(f"{where} must be a JSON object, got {_json_type(obj)}")
    unknown = sorted(k for k in obj if k not in schema)
    missing = sorted(k for k, f in schema.items() if f.required and k not in obj)
    if unknown or missing:
        got = ", ".join(_show(k)[1:-1] if isinstance(k, str) else _show(k) for k in unknown[:5])
        raise InputError(f"{where} must have only the keys {', '.join(schema)}"
                         + (f" (required: {', '.join(k for k, f in schema.items() if f.required)})"
                            if missing else "")
                         + (f"; unknown: {got}" if unknown else f"; missing: {', '.join(missing)}"))
    out: dict[str, Any] = {}
    for k, f in schema.items():
        if k not in obj:
            if f.default is not _MISSING:
                out[k] = dict(f.default) if isinstance(f.default, dict) else f.default
            continue
        try:
            v = _check_value(k, obj[k], f)
            why = f.rule(v) if f.rule is not None and v is not None else None
        except WgrefError as e:
            raise InputError(f"{where}: {e}") from None
        if why:
            raise InputError(f"{where}: {k} {why}, got {_show(obj[k])}")
        out[k] = v
    return out


def _plus_minus_one(v: int) -> Optional[str]:
    return None if v in (1, -1) else "must be 1 or -1"


# the fields every replay file's configuration has (dense here, sparse in shrink_sparse)
REPLAY_COMMON: dict[str, Field] = {
    "instr": Field("str", hi=200, required=True),
    "rs": Field("flag", default=False),
    "scale_d": Field("flag", default=True),
    "imm_scale_a": Field("int", -1, 1, default=1, rule=_plus_minus_one),
    "imm_scale_b": Field("int", -1, 1, default=1, rule=_plus_minus_one),
    "notes": Field("object", default={}),
}
DENSE_REPLAY: dict[str, Field] = {**REPLAY_COMMON, "chain": Field("int", 1, 1 << 20, default=1)}
DENSE_ARRAYS = ("a", "b", "c", "hardware", "config")


def replay_config(path, z: dict, schema: dict[str, Field], arrays: tuple[str, ...]) -> dict[str, Any]:
    """The checked configuration of a replay file's arrays ``z`` (dense or sparse ``schema``):
    only the arrays ``arrays`` may be present, ``config`` is one JSON string of the schema."""
    if "config" not in z:
        raise InputError(f"{path} is not a wgref replay file: it has no 'config' entry")
    extra = sorted(set(z) - set(arrays))
    if extra:
        raise InputError(f"{path}: arrays {', '.join(map(repr, extra[:5]))} do not belong in this replay file "
                         f"(it holds only {', '.join(arrays)})")
    raw = z["config"]
    if raw.ndim != 0 or raw.dtype.kind != "U":
        raise InputError(f"{path}: the 'config' entry must be one JSON string, got a {raw.dtype} array of "
                         f"shape {raw.shape}")
    text = str(raw[()])
    if len(text) > MAX_CONFIG_CHARS:
        raise InputError(f"{path}: the 'config' entry is longer than {MAX_CONFIG_CHARS} characters")
    try:
        cfg = parse_json(text, "the 'config' entry")
        return check_fields("config", cfg, schema)
    except InputError as e:
        raise InputError(f"{path}: bad replay configuration: {e}") from None


def config_text(cfg: dict[str, Any], schema: dict[str, Field]) -> str:
    """The JSON text a replay file stores for ``cfg``: strict JSON (NaN as "nan") that its loader
    accepts, checked before anything is written."""
    text = dumps_strict(cfg)
    check_fields("config", parse_json(text, "the configuration"), schema)
    return text


def typed_array(path, z: dict, key: str, type_name: str, shape: tuple) -> np.ndarray:
    """Array ``key`` of a replay file: the raw bits of ``type_name`` data, of exactly ``shape``."""
    if key not in z:
        raise InputError(f"{path} is not a wgref replay file: it has no array {key!r}")
    dt = element_dtype(type_name)
    raw = z[key]
    if raw.dtype.kind != "u" or raw.dtype.itemsize != dt.itemsize:
        raise InputError(f"{path}: array {key!r} must hold the raw {dt.itemsize * 8}-bit patterns of "
                         f".{type_name} data, got {raw.dtype}")
    if raw.shape != shape:
        want = "(" + ", ".join(str(d) for d in shape) + ")"
        raise InputError(f"{path}: array {key!r} must have shape {want} for this configuration, "
                         f"got {raw.shape}")
    return np.ascontiguousarray(raw).view(dt)


def load_case(path: str | Path) -> tuple[WgmmaCase, Optional[np.ndarray]]:
    """Read a replay file: (case, hardware D or None).  Every field is checked against
    :data:`DENSE_REPLAY`: a configuration that does not match the arrays (a chain of 0, extra
    K columns, a wrong tile count) or holds no tile at all is refused, never replayed as a
    vacuous match."""
    z = load_npz(path)
    cfg = replay_config(path, z, DENSE_REPLAY, DENSE_ARRAYS)
    try:
        f = parse_wgmma(cfg["instr"])
    except WgrefError as e:
        raise InputError(f"{path}: bad replay configuration: {e}") from None
    for k in ("imm_scale_a", "imm_scale_b"):
        if cfg[k] == -1 and not f.has_imm_scale:
            raise InputError(f"{path}: bad replay configuration: {k} must be 1 for .{f.dtype_a} wgmma "
                             "(no imm-scale operands), got -1")
    kw = {k: cfg[k] for k in ("rs", "scale_d", "imm_scale_a", "imm_scale_b", "chain")}
    if "a" not in z or z["a"].ndim != 3:
        raise InputError(f"{path}: array 'a' must be 3-D (tiles, 64, K * chain)")
    t, kc = z["a"].shape[0], f.k * kw["chain"]
    if t == 0:
        raise InputError(f"{path} holds no tiles: nothing to replay")
    a = typed_array(path, z, "a", f.dtype_a, (t, M, kc))
    b = typed_array(path, z, "b", f.dtype_b, (t, kc, f.n))
    c = typed_array(path, z, "c", f.dtype_d, (t, M, f.n))
    hw = typed_array(path, z, "hardware", f.dtype_d, (t, M, f.n)) if "hardware" in z else None
    return WgmmaCase(instr=f.instr, a=a, b=b, c=c, notes=cfg["notes"], **kw), hw
