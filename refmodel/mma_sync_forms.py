"""Every warp-level ``mma.sync.aligned`` form sm_90a accepts, as data.

Derived from the PTX ISA ("Warp-level matrix multiply-accumulate instructions: mma") and confirmed
row by row with ``ptxas -arch=sm_90a`` (CUDA 13.0): the test suite assembles every form and the near
misses around it (other K, other accumulator pairings, .col A layouts, sm_120a's wider FP8 K).

=================  ===========================  ====================  ===========================
A x B              shapes (M n8 K)              D . C                 notes
=================  ===========================  ====================  ===========================
f16 x f16          m8n8k4                       f16.f16, f32.f16,     quad-pair form; .row/.col
                                                f32.f32               for A and B (all four)
f16 x f16          m16n8k8, m16n8k16            f16.f16, f32.f32
bf16 x bf16        m16n8k8, m16n8k16            f32.f32
tf32 x tf32        m16n8k4, m16n8k8             f32.f32
e4m3/e5m2 (mixes)  m16n8k16, m16n8k32           f16.f16, f32.f32      sm_89+; no FP8 unit on sm_90
f64 x f64          m8n8k4, m16n8k4/k8/k16       f64.f64               DMMA
s8/u8 (mixes)      m8n8k16, m16n8k16, m16n8k32  s32.s32               optional .satfinite
s4/u4 (mixes)      m8n8k32, m16n8k32, m16n8k64  s32.s32               optional .satfinite
b1 x b1            m8n8k128, m16n8k128,         s32.s32               .xor.popc or .and.popc
                   m16n8k256
=================  ===========================  ====================  ===========================

N is always 8.  Every form except f16 ``m8n8k4`` is ``.row.col`` (A row-major, B column-major).
94 forms in all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .errors import FormError, InputError
from .validate import opcode

N = 8
PREFIX = "mma.sync.aligned."

#: element width in bits of each input / accumulator type
TYPE_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "f64": 64, "s8": 8, "u8": 8,
             "s4": 4, "u4": 4, "b1": 1, "f32": 32, "s32": 32}

# family: (input types (A and B from the same set), (M, K) shapes, (D, C) pairs, mixed A/B allowed)
_FAMILIES = {
    "f16": (("f16",), ((16, 8), (16, 16)), (("f16", "f16"), ("f32", "f32")), False),
    "f16q": (("f16",), ((8, 4),), (("f16", "f16"), ("f32", "f16"), ("f32", "f32")), False),
    "bf16": (("bf16",), ((16, 8), (16, 16)), (("f32", "f32"),), False),
    "tf32": (("tf32",), ((16, 4), (16, 8)), (("f32", "f32"),), False),
    "fp8": (("e4m3", "e5m2"), ((16, 16), (16, 32)), (("f16", "f16"), ("f32", "f32")), True),
    "f64": (("f64",), ((8, 4), (16, 4), (16, 8), (16, 16)), (("f64", "f64"),), False),
    "int8": (("s8", "u8"), ((8, 16), (16, 16), (16, 32)), (("s32", "s32"),), True),
    "int4": (("s4", "u4"), ((8, 32), (16, 32), (16, 64)), (("s32", "s32"),), True),
    "b1": (("b1",), ((8, 128), (16, 128), (16, 256)), (("s32", "s32"),), False),
}
_FAMILY_OF = {"f16": "f16", "bf16": "bf16", "tf32": "tf32", "e4m3": "fp8", "e5m2": "fp8", "f64": "f64",
              "s8": "int8", "u8": "int8", "s4": "int4", "u4": "int4", "b1": "b1"}
BITOPS = ("xor", "and")
LAYOUTS = ("row", "col")


@dataclass(frozen=True)
class MmaSyncForm:
    """One valid ``mma.sync.aligned`` form of sm_90a."""

    m: int
    k: int
    dtype_d: str
    dtype_a: str
    dtype_b: str
    dtype_c: str
    alayout: str = "row"
    blayout: str = "col"
    satfinite: bool = False
    bitop: str = ""          # "xor" or "and" for b1, else ""

    n: int = N

    @property
    def family(self) -> str:
        """'f16', 'f16q' (the m8n8k4 quad-pair form), 'bf16', 'tf32', 'fp8', 'f64', 'int8', 'int4' or 'b1'."""
        fam = _FAMILY_OF[self.dtype_a]
        return "f16q" if fam == "f16" and (self.m, self.k) == (8, 4) else fam

    @property
    def shape(self) -> str:
        return f"m{self.m}n{self.n}k{self.k}"

    @property
    def quad_pair(self) -> bool:
        """m8n8k4 f16: each quad pair (lanes 4i..4i+3 and 4i+16..4i+19) runs its own 8 x 8 x 4 product."""
        return self.family == "f16q"

    @property
    def is_float(self) -> bool:
        return self.family in ("f16", "f16q", "bf16", "tf32", "fp8", "f64")

    @property
    def instr(self) -> str:
        sat = ".satfinite" if self.satfinite else ""
        tail = f".{self.bitop}.popc" if self.bitop else ""
        return (f"{PREFIX}{self.shape}.{self.alayout}.{self.blayout}{sat}."
                f"{self.dtype_d}.{self.dtype_a}.{self.dtype_b}.{self.dtype_c}{tail}")

    @property
    def name(self) -> str:
        """The instruction without its ``mma.sync.aligned.`` prefix."""
        return self.instr[len(PREFIX):]

    def _regs(self, count: int, t: str) -> int:
        bits = TYPE_BITS[t]
        word = 64 if bits == 64 else 32
        threads = 8 if self.quad_pair else 32
        return count * bits // word // threads

    @property
    def a_regs(self) -> int:
        """Registers per thread holding A (32-bit; 64-bit for f64)."""
        return self._regs(self.m * self.k, self.dtype_a)

    @property
    def b_regs(self) -> int:
        return self._regs(self.k * self.n, self.dtype_b)

    @property
    def c_regs(self) -> int:
        return self._regs(self.m * self.n, self.dtype_c)

    @property
    def d_regs(self) -> int:
        return self._regs(self.m * self.n, self.dtype_d)


def _generate() -> tuple[MmaSyncForm, ...]:
    out = []
    for fam, (types, shapes, accs, mixed) in _FAMILIES.items():
        for m, k in shapes:
            for d, c in accs:
                for a in types:
                    for b in types:
                        if a != b and not mixed:
                            continue
                        if fam == "f16q":
                            for la in LAYOUTS:
                                for lb in LAYOUTS:
                                    out.append(MmaSyncForm(m, k, d, a, b, c, la, lb))
                        elif fam in ("int8", "int4"):
                            out.append(MmaSyncForm(m, k, d, a, b, c))
                            out.append(MmaSyncForm(m, k, d, a, b, c, satfinite=True))
                        elif fam == "b1":
                            for op in BITOPS:
                                out.append(MmaSyncForm(m, k, d, a, b, c, bitop=op))
                        else:
                            out.append(MmaSyncForm(m, k, d, a, b, c))
    return tuple(out)


MMA_SYNC_FORMS: tuple[MmaSyncForm, ...] = _generate()
_BY_INSTR = {f.instr: f for f in MMA_SYNC_FORMS}
FAMILIES = tuple(_FAMILIES)

_RE = re.compile(r"^mma\.sync\.aligned\.m(\d+)n(\d+)k(\d+)((?:\.[\w:]+)*)$")
MAX_OPCODE = 80


def parse_mma_sync(instr: str) -> MmaSyncForm:
    """Validate an ``mma.sync`` opcode (operands after a space are ignored) against the table.

    >>> parse_mma_sync("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32").family
    'fp8'
    """
    op = opcode(instr, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", MAX_OPCODE)
    if op in _BY_INSTR:
        return _BY_INSTR[op]
    if op.startswith("mma.sp") or ".sp." in op:
        raise FormError(f"{op!r}: sparse mma (mma.sp) is not modelled")
    m = _RE.match(op)
    if not m:
        raise FormError(f"{op!r} is not of the form mma.sync.aligned.mMnNkK.alayout.blayout[.satfinite]"
                        f".dtype.atype.btype.ctype[.bitop.popc]")
    mm, n, k = int(m.group(1)), int(m.group(2)), int(m.group(3))
    fields = [f for f in m.group(4).split(".") if f]
    if any(f.startswith("kind::") for f in fields):
        raise FormError(f"{op!r}: .kind:: forms (f8f6f4, mxf4, ...) are sm_120a instructions, not sm_90a")
    if n != N:
        raise FormError(f"{op!r}: N must be 8 for mma.sync, got {n}")
    lay = [f for f in fields if f in LAYOUTS]
    sat = "satfinite" in fields
    bitop = [f for f in fields if f in BITOPS]
    types = [f for f in fields if f not in LAYOUTS and f not in BITOPS and f not in ("satfinite", "popc")]
    if len(lay) != 2:
        raise FormError(f"{op!r}: expected the two layouts .alayout.blayout after the shape")
    if len(types) != 4:
        raise FormError(f"{op!r}: expected four types .dtype.atype.btype.ctype, got {len(types)}")
    d, a, b, c = types
    if a not in _FAMILY_OF:
        raise FormError(f"{op!r}: unknown A type .{a}; valid are {', '.join(_FAMILY_OF)}")
    fam = _FAMILY_OF[a]
    if fam == "f16" and (mm, k) == (8, 4):
        fam = "f16q"
    cand = [f for f in MMA_SYNC_FORMS if f.dtype_a == a]
    shapes = sorted({(f.m, f.k) for f in cand})
    if (mm, k) not in shapes:
        shown = ", ".join(f"m{x}n8k{y}" for x, y in shapes)
        raise FormError(f"{op!r}: .{a} inputs come in the shapes {shown}, got m{mm}n{n}k{k}")
    cand = [f for f in cand if (f.m, f.k) == (mm, k)]
    if b not in {f.dtype_b for f in cand}:
        allowed = " or ".join(sorted(f".{x}" for x in {f.dtype_b for f in cand}))
        raise FormError(f"{op!r}: with A .{a}, B must be {allowed}, got .{b}")
    pairs = sorted({(f.dtype_d, f.dtype_c) for f in cand})
    if (d, c) not in pairs:
        shown = ", ".join(f".{x}/.{y}" for x, y in pairs)
        raise FormError(f"{op!r}: {a} inputs at m{mm}n8k{k} take D/C types {shown}, got .{d}/.{c}")
    if tuple(lay) != ("row", "col") and fam != "f16q":
        raise FormError(f"{op!r}: only f16 m8n8k4 takes layouts other than .row.col, got .{lay[0]}.{lay[1]}")
    if sat and fam not in ("int8", "int4"):
        raise FormError(f"{op!r}: .satfinite exists only for the s8/u8/s4/u4 forms")
    if fam == "b1" and (len(bitop) != 1 or "popc" not in fields):
        raise FormError(f"{op!r}: b1 forms end in .xor.popc or .and.popc")
    if fam != "b1" and (bitop or "popc" in fields):
        raise FormError(f"{op!r}: .xor/.and .popc belong to the b1 forms only")
    raise FormError(f"{op!r}: not a valid sm_90a mma.sync form")  # pragma: no cover - the table is complete


def forms(family: str | None = None) -> list[MmaSyncForm]:
    """Filter :data:`MMA_SYNC_FORMS` by family (see :data:`FAMILIES`)."""
    if family is not None and family not in _FAMILIES:
        raise FormError(f"family must be one of {', '.join(_FAMILIES)}, got {family!r}")
    return [f for f in MMA_SYNC_FORMS if family is None or f.family == family]


# ----------------------------------------------------------------------------- typed operands

#: numpy dtype of typed arrays of each mma.sync element type (4-bit and b1 values in 8-bit integers)
TYPED = {"f16": "float16", "bf16": "bfloat16", "tf32": "float32", "e4m3": "float8_e4m3fn",
         "e5m2": "float8_e5m2", "f64": "float64", "s8": "int8", "u8": "uint8", "s4": "int8", "u4": "uint8",
         "b1": "uint8", "f32": "float32", "s32": "int32"}
_RANGE = {"s4": (-8, 7), "u4": (0, 15), "b1": (0, 1)}
OPERANDS = ("a", "b", "c", "d")


def typed_dtype(t: str) -> np.dtype:
    """numpy dtype of typed arrays of element type ``t`` (s4/u4/b1 values live in int8/uint8)."""
    import ml_dtypes

    name = TYPED[t]
    return np.dtype(getattr(ml_dtypes, name, None) or getattr(np, name))


def _form(form) -> MmaSyncForm:
    return form if isinstance(form, MmaSyncForm) else parse_mma_sync(form)


def matrix_shape(form, operand: str) -> tuple[int, ...]:
    """Shape of one warp's operand: (M, K), (K, 8) or (M, 8); quad-pair forms lead with 4."""
    f = _form(form)
    shp = {"a": (f.m, f.k), "b": (f.k, f.n), "c": (f.m, f.n), "d": (f.m, f.n)}[_check_operand(operand)]
    return ((4,) + shp) if f.quad_pair else shp


def operand_types(form: MmaSyncForm) -> dict[str, str]:
    """{'a': A type, 'b': ..., 'c': ..., 'd': ...} of a form."""
    return {"a": form.dtype_a, "b": form.dtype_b, "c": form.dtype_c, "d": form.dtype_d}


def _check_operand(operand: str) -> str:
    if operand not in OPERANDS:
        raise InputError(f"operand must be one of 'a', 'b', 'c', 'd', got {operand!r}")
    return operand


def element_codes(x, t: str) -> np.ndarray:
    """Unsigned codes (uint64) of a typed array of element type ``t`` (the low ``bits`` bits of each value)."""
    dt = typed_dtype(t)
    x = np.asarray(x)
    if x.dtype != dt:
        raise InputError(f"{t} data must be a {dt.name} array, got {x.dtype.name}")
    if t in _RANGE:
        lo, hi = _RANGE[t]
        if x.size and (int(x.min()) < lo or int(x.max()) > hi):
            raise InputError(f"{t} values must lie in {lo}..{hi}, got {int(x.min())}..{int(x.max())}")
    u = np.ascontiguousarray(x).view(f"u{dt.itemsize}").astype(np.uint64)
    bits = TYPE_BITS[t]
    return u & np.uint64((1 << bits) - 1) if bits < 64 else u


def from_codes(codes: np.ndarray, t: str) -> np.ndarray:
    """Inverse of :func:`element_codes`: typed values from unsigned codes (s4 sign-extended)."""
    dt = typed_dtype(t)
    bits = TYPE_BITS[t]
    c = np.asarray(codes).astype(np.uint64)
    if t == "s4":
        v = c.astype(np.int64) & 15
        return np.where(v >= 8, v - 16, v).astype(np.int8)
    if bits < 8:
        return (c & np.uint64((1 << bits) - 1)).astype(np.uint8)
    return c.astype(f"u{dt.itemsize}").view(dt)


