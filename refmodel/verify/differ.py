"""Bit-level differ: compares two arrays of any supported dtype bit for bit.

Reports the count and rate of mismatches, the first and the worst one with their
position (case, row, column), both values in hex and decimal, the distance in ulps,
which fields differ (sign / exponent / mantissa), and NaN-vs-NaN payload differences
(a mismatch unless ``nan_equal=True``).  Output as text, JSON or JUnit XML.

>>> import numpy as np
>>> r = diff(np.float32([1.0, 2.0]), np.float32([1.0, np.nextafter(np.float32(2), np.float32(3))]))
>>> r.mismatches, r.worst.ulps
(1, 1)
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Optional
from xml.sax.saxutils import escape, quoteattr

import ml_dtypes
import numpy as np

from ..errors import DTypeError, InputError
from ..numerics.formats import FormatSpec, format_spec
from ..validate import _describe, as_array, check_codes, check_flag, check_int, dumps_strict

# numpy dtype -> (format spec or None for integers, unsigned view type)
_FLOAT_KINDS = {
    np.dtype(np.float64): ("f64", np.uint64),
    np.dtype(np.float32): ("f32", np.uint32),
    np.dtype(np.float16): ("f16", np.uint16),
    np.dtype(ml_dtypes.bfloat16): ("bf16", np.uint16),
    np.dtype(ml_dtypes.float8_e4m3fn): ("e4m3", np.uint8),
    np.dtype(ml_dtypes.float8_e5m2): ("e5m2", np.uint8),
}


@dataclass
class Mismatch:
    """One differing element."""

    index: tuple[int, ...]
    position: dict[str, int]
    got_hex: str
    want_hex: str
    got: str
    want: str
    ulps: Optional[int]          # None when one side is NaN
    fields: list[str]            # subset of sign / exponent / mantissa (floats) or ["value"]
    nan_payload: bool = False    # both NaN, different bits


@dataclass
class DiffReport:
    """Result of :func:`diff`."""

    dtype: str
    total: int
    mismatches: int
    nan_equal: bool
    first: Optional[Mismatch] = None
    worst: Optional[Mismatch] = None
    samples: list[Mismatch] = field(default_factory=list)
    name: str = "diff"

    @property
    def rate(self) -> float:
        return self.mismatches / self.total if self.total else 0.0

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rate"] = self.rate
        d["ok"] = self.ok
        return d

    def to_json(self) -> str:
        return dumps_strict(self.to_dict())

    def to_text(self) -> str:
        head = (f"{self.name}: {self.mismatches} of {self.total} {self.dtype} values differ "
                f"({self.rate:.3g}){' [NaN payloads ignored]' if self.nan_equal else ''}")
        if self.ok:
            return head
        lines = [head]
        for label, m in (("first", self.first), ("worst", self.worst)):
            lines.append(f"  {label:<5} {_where(m)}: got {m.got_hex} ({m.got}) want {m.want_hex} ({m.want})"
                         f"; {_distance(m)}; differs in {', '.join(m.fields)}"
                         + ("; NaN payload only" if m.nan_payload else ""))
        return "\n".join(lines)

    def to_junit(self, suite: str = "wgref") -> str:
        """JUnit XML, well-formed whatever the names hold: characters XML 1.0 forbids (control
        characters, lone surrogates, U+FFFE/U+FFFF) are written as visible ``\\xNN`` escapes."""
        if not isinstance(suite, str):
            raise InputError(f"suite must be a string, got {_describe(suite)}")
        text = _xml_text(self.to_text())
        body = ""
        if not self.ok:
            body = (f"<failure message={quoteattr(text.split(chr(10))[0])}>"
                    f"{escape(text)}</failure>")
        return (f'<?xml version="1.0" encoding="UTF-8"?>\n'
                f'<testsuite name={quoteattr(_xml_text(suite))} tests="1" failures="{0 if self.ok else 1}">\n'
                f'  <testcase classname={quoteattr(_xml_text(suite))} name={quoteattr(_xml_text(self.name))}>'
                f'{body}</testcase>\n'
                f'</testsuite>\n')


# characters XML 1.0 does not allow (anything but #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] |
# [#x10000-#x10FFFF]): C0 controls, lone surrogates, U+FFFE, U+FFFF
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(s: str) -> str:
    """``s`` with every character XML 1.0 forbids replaced by a visible escape (\\x01, \\udc80)."""
    return _XML_FORBIDDEN.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                              else f"\\u{ord(m.group()):04x}", s)


def _distance(m: Mismatch) -> str:
    if m.ulps is None:
        return "NaN involved"
    return f"{m.ulps} apart" if m.fields == ["value"] else f"{m.ulps} ulp"


def _where(m: Mismatch) -> str:
    return ", ".join(f"{k} {v}" for k, v in m.position.items()) if m.position else str(m.index)


def _fmt_of(arr: np.ndarray, fmt: str | FormatSpec | None, which: str = "got") -> tuple[Optional[FormatSpec], np.ndarray]:
    """(format spec or None for integers, unsigned bit view)."""
    if fmt is not None:
        spec = format_spec(fmt)
        # integer codes must fit the format's width; a typed array must be that format's
        # own dtype (a float32 array is not e4m3 codes: refused, never reinterpreted)
        own = next((dt for dt, (n, _) in _FLOAT_KINDS.items() if n == spec.name), None)
        return spec, check_codes(which, arr, spec.bits, spec.name, typed=own)
    if arr.dtype in _FLOAT_KINDS:
        name, utype = _FLOAT_KINDS[arr.dtype]
        return format_spec(name), np.ascontiguousarray(arr).view(utype)
    if arr.dtype.kind in "iu":
        return None, arr
    raise DTypeError(f"cannot diff arrays of dtype {arr.dtype}; supported: float64/32/16, bfloat16, "
                     "float8_e4m3fn, float8_e5m2, and integer types (or integer codes with fmt=)")


def _ordered(bits: np.ndarray, spec: FormatSpec) -> np.ndarray:
    """Map bit patterns to integers whose difference is the distance in ulps."""
    b = bits.astype(np.int64) if spec.bits < 64 else bits.view(np.int64)
    mag = b & spec.mag_mask
    return np.where(b & spec.sign_mask if spec.bits < 64 else b < 0, -mag, mag)


def _is_nan(bits: np.ndarray, spec: FormatSpec) -> np.ndarray:
    mag = bits.astype(np.uint64) & np.uint64(spec.mag_mask)
    if spec.ieee_specials:
        return mag > np.uint64(spec.inf_code)
    return mag == np.uint64(spec.mag_mask)


def _value_str(bits: int, spec: Optional[FormatSpec]) -> str:
    if spec is None:
        return str(bits)
    from ..numerics.formats import decode_scalar

    return repr(decode_scalar(int(bits), spec))


def diff(got, want, *, fmt: str | FormatSpec | None = None, nan_equal: bool = False,
         labels: tuple[str, ...] = ("case", "row", "col"), max_samples: int = 10,
         name: str = "diff") -> DiffReport:
    """Compare ``got`` (e.g. refmodel) with ``want`` (e.g. the hardware) bit for bit.

    ``fmt``: read integer arrays as codes of a format (``"e4m3"``, ``"f32"``...).
    ``labels``: names of the last dimensions for positions (default case, row, col).
    """
    g = as_array("got", got, what="a numeric array (cannot diff anything else)")
    w = as_array("want", want, what="a numeric array (cannot diff anything else)")
    max_samples = check_int("max_samples", max_samples, 0, 1 << 16, rule="mismatches listed in the report")
    nan_equal = check_flag("nan_equal", nan_equal)
    if not isinstance(labels, (tuple, list)) or not all(isinstance(v, str) for v in labels):
        raise InputError(f"labels must be a tuple of dimension names, got {_describe(labels)}")
    if not isinstance(name, str):
        raise InputError(f"name must be a string, got {_describe(name)}")
    if g.shape != w.shape:
        raise InputError(f"shapes differ: got {g.shape}, want {w.shape}")
    spec_g, gb = _fmt_of(g, fmt, "got")
    spec_w, wb = _fmt_of(w, fmt, "want")
    if (spec_g is None) != (spec_w is None) or (spec_g and spec_w and spec_g.name != spec_w.name) \
            or (spec_g is None and g.dtype != w.dtype):
        raise DTypeError(f"dtypes differ: got {g.dtype}, want {w.dtype}")
    spec = spec_g
    neq = gb != wb
    if spec is not None:
        gn, wn = _is_nan(gb, spec), _is_nan(wb, spec)
        payload = gn & wn & neq
        if nan_equal:
            neq = neq & ~(gn & wn)
        ulps = np.abs(_ordered(gb, spec) - _ordered(wb, spec))
        ulps_nan = gn | wn
    else:
        payload = np.zeros(g.shape, bool)
        ulps = np.abs(gb.astype(np.int64) - wb.astype(np.int64)) if gb.dtype.itemsize < 8 else \
            np.abs(gb.astype(object) - wb.astype(object))
        ulps_nan = np.zeros(g.shape, bool)
    bad = np.flatnonzero(neq.reshape(-1))
    dtype_name = spec.name if spec is not None else str(g.dtype)
    rep = DiffReport(dtype=dtype_name, total=int(g.size), mismatches=int(bad.size),
                     nan_equal=nan_equal, name=name)
    if not bad.size:
        return rep
    flat_u = np.where(ulps_nan, np.iinfo(np.int64).max, ulps).reshape(-1) if spec is not None \
        else ulps.reshape(-1)
    worst_i = int(bad[np.argmax(flat_u[bad])])

    def make(i: int) -> Mismatch:
        idx = tuple(int(v) for v in np.unravel_index(i, g.shape))
        pos = dict(zip(labels[-len(idx):] if len(idx) <= len(labels) else
                       [f"dim{j}" for j in range(len(idx))], idx)) if idx else {}
        gv, wv = int(gb.reshape(-1)[i]), int(wb.reshape(-1)[i])
        width = (spec.bits if spec else g.dtype.itemsize * 8 + 3) // 4
        if spec is not None:
            fields = []
            if (gv ^ wv) & spec.sign_mask:
                fields.append("sign")
            if (gv ^ wv) & (((1 << spec.ebits) - 1) << spec.mbits):
                fields.append("exponent")
            if (gv ^ wv) & ((1 << spec.mbits) - 1):
                fields.append("mantissa")
            u = None if ulps_nan.reshape(-1)[i] else int(ulps.reshape(-1)[i])
            ghex, whex = f"0x{gv:0{width}X}", f"0x{wv:0{width}X}"
        else:
            fields, u = ["value"], int(ulps.reshape(-1)[i])
            mask = (1 << (8 * g.dtype.itemsize)) - 1
            ghex, whex = f"0x{gv & mask:0{width}X}", f"0x{wv & mask:0{width}X}"
        return Mismatch(idx, pos, ghex, whex, _value_str(gv, spec), _value_str(wv, spec), u, fields,
                        bool(payload.reshape(-1)[i]))

    rep.first = make(int(bad[0]))
    rep.worst = make(worst_i)
    rep.samples = [make(int(i)) for i in bad[:max_samples]]
    return rep
