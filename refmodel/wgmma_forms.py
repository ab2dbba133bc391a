"""Every valid dense ``wgmma.mma_async.sync.aligned`` form of sm_90a, as data.

Derived from the PTX ISA ("Asynchronous Warpgroup Level Matrix Multiply-Accumulate",
wgmma.mma_async) and confirmed form by form with ``ptxas -arch=sm_90a`` (CUDA 13.0):
the test suite assembles every row and a set of near misses.

======================  ===  ==============  ===================================
A x B                   K    D (accumulator)  N
======================  ===  ==============  ===================================
tf32 x tf32             8    f32             8..256 step 8
f16 x f16               16   f16 or f32      8..256 step 8
bf16 x bf16             16   f32             8..256 step 8
e4m3/e5m2 x e4m3/e5m2   32   f16 or f32      8..256 step 8 (all four mixes)
s8/u8 x s8/u8           32   s32             8, 16, 24, 32, 48..256 step 16
                                             (all four mixes, optional .satfinite)
======================  ===  ==============  ===================================

M is always 64.  Only f16/bf16 accept the transpose immediates (MN-major operands
in shared memory); tf32/FP8/int8 must be K-major.  The integer forms take no
imm-scale-a/b.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import FormError
from .validate import opcode

M = 64
_N_STEP8 = tuple(range(8, 257, 8))
_N_INT = (8, 16, 24, 32) + tuple(range(48, 257, 16))

# family: (K, allowed accumulators, allowed A/B types (same set for both), N set)
_FAMILIES = {
    "tf32": (8, ("f32",), ("tf32",), _N_STEP8),
    "f16": (16, ("f16", "f32"), ("f16",), _N_STEP8),
    "bf16": (16, ("f32",), ("bf16",), _N_STEP8),
    "fp8": (32, ("f16", "f32"), ("e4m3", "e5m2"), _N_STEP8),
    "int8": (32, ("s32",), ("s8", "u8"), _N_INT),
}
_FAMILY_OF = {"tf32": "tf32", "f16": "f16", "bf16": "bf16", "e4m3": "fp8", "e5m2": "fp8",
              "s8": "int8", "u8": "int8"}

# element width in bits of each input type (tf32 travels in 32-bit containers)
INPUT_BITS = {"tf32": 32, "f16": 16, "bf16": 16, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8}


@dataclass(frozen=True)
class WgmmaForm:
    """One valid dense wgmma form (m64nNkK)."""

    n: int
    k: int
    dtype_d: str
    dtype_a: str
    dtype_b: str
    satfinite: bool = False

    m: int = M

    @property
    def family(self) -> str:
        return _FAMILY_OF[self.dtype_a]

    @property
    def shape(self) -> str:
        return f"m{self.m}n{self.n}k{self.k}"

    @property
    def instr(self) -> str:
        sat = ".satfinite" if self.satfinite else ""
        return (f"wgmma.mma_async.sync.aligned.{self.shape}{sat}."
                f"{self.dtype_d}.{self.dtype_a}.{self.dtype_b}")

    @property
    def has_imm_scale(self) -> bool:
        """imm-scale-a/b operands exist (all but the integer forms)."""
        return self.family != "int8"

    @property
    def has_transpose(self) -> bool:
        """imm-trans-a/b operands exist (f16 and bf16 only)."""
        return self.family in ("f16", "bf16")

    @property
    def d_regs(self) -> int:
        """32-bit accumulator registers per thread: N/2 (f32, s32) or N/4 (f16)."""
        return self.n // 4 if self.dtype_d == "f16" else self.n // 2

    @property
    def a_regs(self) -> int:
        """32-bit registers per thread holding A in the RS form (64*K elements / 128 threads)."""
        return M * self.k * INPUT_BITS[self.dtype_a] // 32 // 128


def _generate() -> tuple[WgmmaForm, ...]:
    forms = []
    for fam, (k, accs, types, ns) in _FAMILIES.items():
        for d in accs:
            for a in types:
                for b in types:
                    if fam != "fp8" and fam != "int8" and a != b:
                        continue
                    for n in ns:
                        forms.append(WgmmaForm(n, k, d, a, b))
                        if fam == "int8":
                            forms.append(WgmmaForm(n, k, d, a, b, satfinite=True))
    return tuple(forms)


WGMMA_FORMS: tuple[WgmmaForm, ...] = _generate()
_BY_INSTR = {f.instr: f for f in WGMMA_FORMS}

_RE = re.compile(r"^wgmma\.mma_async\.sync\.aligned\.m(\d+)n(\d+)k(\d+)((?:\.\w+)*)$")


MAX_OPCODE = 120   # longer than any sm_90a wgmma opcode: refused before parsing (no huge echoes or ints)


def parse_wgmma(instr: str) -> WgmmaForm:
    """Validate a wgmma opcode (operands after a space are ignored) against the table.

    >>> parse_wgmma("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e5m2").k
    32
    """
    op = opcode(instr, "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", MAX_OPCODE)
    if op in _BY_INSTR:
        return _BY_INSTR[op]
    if ".sp." in op or op.startswith("wgmma.mma_async.sp"):
        raise FormError(f"{op!r}: sparse wgmma (.sp) is not a dense form")
    m = _RE.match(op)
    if not m:
        raise FormError(f"{op!r} is not of the form wgmma.mma_async.sync.aligned.m64nNkK[.satfinite].dtype.atype.btype")
    mm, n, k = int(m.group(1)), int(m.group(2)), int(m.group(3))
    fields = [f for f in m.group(4).split(".") if f]
    sat = "satfinite" in fields
    fields = [f for f in fields if f != "satfinite"]
    if mm != M:
        raise FormError(f"{op!r}: M must be 64, got {mm}")
    if len(fields) != 3:
        raise FormError(f"{op!r}: expected three types .dtype.atype.btype after the shape, got {len(fields)}")
    d, a, b = fields
    if a not in _FAMILY_OF:
        raise FormError(f"{op!r}: unknown A type .{a}; valid are {', '.join(_FAMILY_OF)}")
    fam = _FAMILY_OF[a]
    fk, accs, types, ns = _FAMILIES[fam]
    if b not in types or (fam in ("tf32", "f16", "bf16") and b != a):
        allowed = " or ".join(f".{t}" for t in types) if fam in ("fp8", "int8") else f".{a}"
        raise FormError(f"{op!r}: with A .{a}, B must be {allowed}, got .{b}")
    if d not in accs:
        raise FormError(f"{op!r}: {a} inputs accumulate into {' or '.join('.' + x for x in accs)}, got .{d}")
    if k != fk:
        raise FormError(f"{op!r}: K must be {fk} for .{a} inputs, got {k}")
    if n not in ns:
        if fam == "int8":
            raise FormError(f"{op!r}: N must be 8, 16, 24, 32 or a multiple of 16 up to 256 for integer wgmma, got {n}")
        raise FormError(f"{op!r}: N must be a multiple of 8 in 8..256, got {n}")
    if sat and fam != "int8":
        raise FormError(f"{op!r}: .satfinite exists only for the integer (s32) forms")
    raise FormError(f"{op!r}: not a valid sm_90a wgmma form")  # pragma: no cover - table is complete


def forms(family: str | None = None, *, n: int | None = None) -> list[WgmmaForm]:
    """Filter :data:`WGMMA_FORMS` by family ('tf32', 'f16', 'bf16', 'fp8', 'int8') and N."""
    return [f for f in WGMMA_FORMS if (family is None or f.family == family) and (n is None or f.n == n)]
