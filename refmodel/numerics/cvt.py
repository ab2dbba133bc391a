"""PTX ``cvt`` packing/conversion forms of sm_90a, as data, and their model.

:data:`CVT_FORMS` is generated from the PTX rules below and is checked against
``ptxas -arch=sm_90a`` by the test suite (every listed form assembles, the
near misses do not).  :func:`cvt` takes the opcode with its modifiers, e.g.
``cvt.rn.satfinite.relu.e4m3x2.f32``, and the operands as numpy arrays.

Rules of sm_90a (PTX ISA "cvt", confirmed with ptxas 13.0):

* f32 -> f8x2 and f16x2 -> f8x2 must carry ``.satfinite`` and round with ``.rn``.
* f8x2 -> f16x2 rounds ``.rn`` (the conversion is exact) and takes no ``.satfinite``.
* f32 -> f16x2 / bf16x2 round ``.rn`` or ``.rz``; ``.relu`` and ``.satfinite`` optional.
* ``.relu`` and ``.satfinite`` may be written in either order.
* bf16x2 <-> f8x2 does not exist before sm_100.

Operand packing: the first source goes to the high half of the destination
(``d[15:8] = cvt(a)`` for f8x2, ``d[31:16] = cvt(a)`` for f16x2/bf16x2), and of a
packed source the high half converts into the high half.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DTypeError, FormError, InputError
from ..limits import check_limit
from ..validate import _describe, as_array, broadcast
from .formats import FORMATS, format_spec
from .fp8 import convert_codes
from .sweep import encode_f32_fast

_F8 = ("e4m3x2", "e5m2x2")
_H2 = ("f16x2", "bf16x2")


@dataclass(frozen=True)
class CvtForm:
    """One valid sm_90a cvt form.

    ``src``/``dst``: PTX types; ``rnd``: 'rn' or 'rz'; ``relu``, ``satfinite``: flags.
    ``operands``: names of the source operands ('a', 'b') the instruction takes.
    """

    rnd: str
    relu: bool
    satfinite: bool
    dst: str
    src: str

    @property
    def instr(self) -> str:
        mods = [self.rnd]
        if self.dst in _F8:  # PTX writes cvt.rn.satfinite{.relu}.f8x2type
            mods += ["satfinite"] * self.satfinite + ["relu"] * self.relu
        else:  # cvt.frnd2{.relu}{.satfinite}
            mods += ["relu"] * self.relu + ["satfinite"] * self.satfinite
        return ".".join(["cvt", *mods, self.dst, self.src])

    @property
    def operands(self) -> tuple[str, ...]:
        return ("a", "b") if self.src == "f32" else ("a",)

    @property
    def element_dst(self) -> str:
        return self.dst[:-2]  # e4m3x2 -> e4m3

    @property
    def element_src(self) -> str:
        return self.src[:-2] if self.src.endswith("x2") else self.src

    @property
    def ptx_types(self) -> tuple[str, ...]:
        """Register types of (d, sources...) for the inline-PTX generator."""
        reg = {"f32": "f32", "f16x2": "b32", "bf16x2": "b32", "e4m3x2": "b16", "e5m2x2": "b16"}
        return (reg[self.dst],) + tuple(reg[self.src] for _ in self.operands)


def _generate_forms() -> tuple[CvtForm, ...]:
    forms = []
    for dst in _F8:
        for src in ("f32", "f16x2"):
            for relu in (False, True):
                forms.append(CvtForm("rn", relu, True, dst, src))
    for src in _F8:
        for relu in (False, True):
            forms.append(CvtForm("rn", relu, False, "f16x2", src))
    for dst in _H2:
        for rnd in ("rn", "rz"):
            for relu in (False, True):
                for sat in (False, True):
                    forms.append(CvtForm(rnd, relu, sat, dst, "f32"))
    return tuple(forms)


CVT_FORMS: tuple[CvtForm, ...] = _generate_forms()
_BY_KEY = {(f.rnd, f.relu, f.satfinite, f.dst, f.src): f for f in CVT_FORMS}
_TYPES = set(_F8) | set(_H2) | {"f32"}


def parse_cvt(instr: str) -> CvtForm:
    """Parse and validate a cvt opcode (modifiers, no operands) against :data:`CVT_FORMS`."""
    if not isinstance(instr, str):
        raise InputError(f"instr must be a string such as 'cvt.rn.satfinite.e4m3x2.f32', got {_describe(instr)}")
    check_limit("instr_chars", len(instr), "instr (a cvt opcode)")
    words = instr.strip().rstrip(";").split()
    if not words:
        raise FormError(f"instr must be a cvt opcode such as 'cvt.rn.satfinite.e4m3x2.f32', got {_describe(instr)}")
    parts = words[0].split(".")
    if parts[0] != "cvt":
        raise FormError(f"not a cvt instruction: {_describe(instr)}")
    parts = parts[1:]
    if len(parts) < 2 or parts[-1] not in _TYPES or parts[-2] not in _TYPES:
        raise FormError(f"{_describe(instr)}: the last two fields must be the destination and source types, "
                        f"one of {', '.join(sorted(_TYPES))}")
    dst, src = parts[-2], parts[-1]
    mods = parts[:-2]
    rnd = [m for m in mods if m in ("rn", "rz", "rm", "rp", "rna", "rs")]
    flags = [m for m in mods if m not in rnd]
    unknown = [m for m in flags if m not in ("relu", "satfinite")]
    if unknown:
        raise FormError(f"{_describe(instr)}: unknown modifier .{unknown[0]}; allowed are a rounding mode, .relu, .satfinite")
    if len(rnd) != 1:
        raise FormError(f"{_describe(instr)}: exactly one rounding modifier is required (.rn{', .rz' if dst in _H2 else ''})")
    if len(set(flags)) != len(flags):
        raise FormError(f"{_describe(instr)}: a modifier is repeated")
    relu, sat = "relu" in flags, "satfinite" in flags
    key = (rnd[0], relu, sat, dst, src)
    if key in _BY_KEY:
        return _BY_KEY[key]
    # explain which rule is broken
    if dst in _F8 and src in ("f32", "f16x2") and not sat:
        raise FormError(f"{_describe(instr)}: conversion to .{dst} requires .satfinite on sm_90a")
    if dst in _F8 and src in ("f32", "f16x2") and rnd[0] != "rn":
        raise FormError(f"{_describe(instr)}: conversion to .{dst} rounds with .rn only")
    if src in _F8 and dst == "f16x2" and sat:
        raise FormError(f"{_describe(instr)}: .f16x2.{src} takes no .satfinite (the conversion is exact)")
    if src in _F8 and dst == "f16x2":
        raise FormError(f"{_describe(instr)}: .f16x2.{src} rounds with .rn only")
    if dst in _H2 and src == "f32":
        raise FormError(f"{_describe(instr)}: .{dst}.f32 rounds with .rn or .rz only")
    raise FormError(f"{_describe(instr)}: no cvt from .{src} to .{dst} on sm_90a; valid pairs are "
                    "f8x2<-f32, f8x2<-f16x2, f16x2<-f8x2, f16x2/bf16x2<-f32")


def _operand(name: str, v, kinds: tuple[str, ...], what: str) -> np.ndarray:
    arr = as_array(f"operand {name}", v, what=what)
    if arr.dtype == np.float32 and "f32" in kinds:
        return arr.view(np.uint32)
    for k in kinds:
        if k != "f32" and arr.dtype == np.dtype(k):
            return arr
    raise DTypeError(f"operand {name} must be {what}, got {arr.dtype}")


def cvt(instr: str, a, b=None) -> np.ndarray:
    """Model of one PTX cvt form, elementwise over numpy arrays (broadcast).

    * ``cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f32``: ``a``, ``b`` float32 (or their
      uint32 bit patterns) -> uint16, ``d[15:8] = cvt(a)``, ``d[7:0] = cvt(b)``.
    * ``cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f16x2``: ``a`` uint32 holding two f16
      -> uint16, ``d[15:8]`` from ``a[31:16]``.
    * ``cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2}``: ``a`` uint16 -> uint32, ``d[31:16]`` from ``a[15:8]``.
    * ``cvt.{rn,rz}{.relu}{.satfinite}.{f16x2,bf16x2}.f32``: ``a``, ``b`` float32 -> uint32,
      ``d[31:16] = cvt(a)``.
    """
    form = parse_cvt(instr)
    if form.src == "f32":
        if b is None:
            raise InputError(f"{form.instr} takes two operands a and b")
        ua = _operand("a", a, ("f32", "uint32"), "float32 (or uint32 bit patterns)")
        ub = _operand("b", b, ("f32", "uint32"), "float32 (or uint32 bit patterns)")
        ua, ub = broadcast(a=ua, b=ub)
        halves_src = ("f32", ua, ub)
    else:
        if b is not None:
            raise InputError(f"{form.instr} takes one packed operand a, got b too")
        width = "uint32" if form.src in _H2 else "uint16"
        ua = _operand("a", a, (width,), f"{width} (packed .{form.src})")
        half = 16 if width == "uint32" else 8
        mask = (1 << half) - 1
        ua = ua.astype(np.uint64)
        halves_src = (form.element_src, ua >> half, ua & mask)
    src, hi, lo = halves_src
    dst = form.element_dst
    kw = dict(saturate=form.satfinite, relu=form.relu, rz=form.rnd == "rz")
    if form.dst in _F8:
        kw["saturate"] = True  # every f8 destination saturates on sm_90a
    if src == "f32" and form.rnd == "rn":  # the branch-free kernel the 2**32 sweep proves
        enc = lambda v: encode_f32_fast(v.astype(np.uint32), dst, saturate=kw["saturate"],
                                        relu=kw["relu"])
    else:
        enc = lambda v: convert_codes(v, src, dst, **kw)
    hi_c = enc(hi).astype(np.uint32)
    lo_c = enc(lo).astype(np.uint32)
    shift = FORMATS[dst].bits
    out = (hi_c << shift) | lo_c
    return out.astype(np.uint16 if shift == 8 else np.uint32)
