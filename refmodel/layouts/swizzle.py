"""Shared-memory swizzles of sm_90a: none, 32B, 64B, 128B.

A swizzle permutes 16-byte *atoms* (the unit the seed §7 calls the swizzle atom) inside
each row of a repeating pattern.  As a function of the byte address ``a`` it is CuTe's
``Swizzle<B, 4, 3>``::

    swizzle(a) = a ^ (((a >> 7) & (2**B - 1)) << 4)        B = 0, 1, 2, 3

i.e. the atom index inside a ``16 * 2**B``-byte row (address bits 4..4+B) is XORed with
the low ``B`` bits of the 128-byte line index (address bits 7..7+B).  The pattern repeats
every ``128 * 2**B`` bytes (256 B for 32B, 512 B for 64B, 1024 B for 128B).  Bytes
inside an atom never move, which is why a TMA "unswizzle" gives back a clean row-major
tile (seed §7).

Worked example (128B, B = 3): address 0x2A0 = 0b10_1010_0000 is line 5 (bits 7..9 =
0b101), atom 2 (bits 4..6 = 0b010); 2 ^ 5 = 7, so the byte lands at 0x2F0.

The descriptor's 2-bit swizzle field encodes the modes as 0 none, 1 128B, 2 64B, 3 32B
(PTX ISA "Matrix Descriptor Format"); the TMA encodes them differently
(CU_TENSOR_MAP_SWIZZLE_NONE/32B/64B/128B = 0/1/2/3): :data:`MODES` holds both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..validate import _describe, as_array, check_int
from ..errors import InputError

ATOM_BYTES = 16


ADDRESS_LIMIT = 1 << 62


def addresses(x):
    """A byte address (int) or an array of them (int64), each in 0..2**62 - 1 — the one rule for every
    address a swizzle takes (negative ones, non-integers and narrow integer arrays that would wrap are
    refused or widened, never computed modulo 2**8)."""
    if isinstance(x, (bool, np.bool_)):
        raise InputError(f"a swizzle address must be an integer byte address, got {_describe(x)}")
    if isinstance(x, (int, np.integer)):
        v = int(x)
        if not 0 <= v < ADDRESS_LIMIT:
            raise InputError(f"swizzle addresses are byte addresses in 0..2**62 - 1, got {v}")
        return v
    a = as_array("addresses", x)
    if a.dtype.kind not in "iu":
        raise InputError(f"swizzle addresses must be integers, got {a.dtype.name}")
    if a.size and (int(a.min()) < 0 or int(a.max()) >= ADDRESS_LIMIT):
        bad = int(a.min()) if int(a.min()) < 0 else int(a.max())
        raise InputError(f"swizzle addresses are byte addresses in 0..2**62 - 1, got {bad}")
    return a.astype(np.int64)


@dataclass(frozen=True)
class Swizzle:
    """CuTe ``Swizzle<B, M, S>``: ``x ^ ((x >> S) & mask(B)) << M``... on the bits of ``x``.

    Exactly: yyy = bits [M+S, M+S+B) of x, zzz = bits [M, M+B); result = x ^ (yyy >> S).
    For shared-memory byte addresses sm_90a uses M = 4 (16-byte atoms) and S = 3.
    """

    b: int
    m: int = 4
    s: int = 3

    def __post_init__(self) -> None:
        for name, v in (("B", self.b), ("M", self.m), ("S", self.s)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)) or v < 0:
                raise InputError(f"Swizzle<B,M,S> needs non-negative int parameters, got {name}={_describe(v)}")
            object.__setattr__(self, name.lower(), int(v))
        if self.b + self.m + self.s > 62:
            raise InputError(f"Swizzle<B,M,S> fields are bits of a 64-bit address: B + M + S must be at most 62, "
                             f"got B={_describe(self.b)}, M={_describe(self.m)}, S={_describe(self.s)}")
        if self.s < self.b:
            raise InputError(f"Swizzle<B,M,S> needs S >= B (no overlapping bit fields), got B={self.b}, S={self.s}")

    def __call__(self, x):
        """Swizzle an address or an integer array of addresses (elementwise): byte addresses in
        0..2**62 - 1 (arrays of any integer dtype come back as int64)."""
        x = addresses(x)
        if self.b == 0:
            return x
        mask = ((1 << self.b) - 1) << (self.m + self.s)
        return x ^ ((x & mask) >> self.s)

    @property
    def period(self) -> int:
        """Bytes after which the pattern repeats (for M=4, S=3: 128 * 2**B)."""
        return 1 << (self.m + self.s + self.b) if self.b else 1 << self.m

    def __str__(self) -> str:
        return f"Swizzle<{self.b},{self.m},{self.s}>"


@dataclass(frozen=True)
class SwizzleMode:
    """One sm_90a swizzle mode with its encodings."""

    name: str          # 'none', '32B', '64B', '128B'
    bits: int          # B of Swizzle<B,4,3>
    desc_code: int     # wgmma descriptor bits 63:62
    tma_code: int      # CUtensorMapSwizzle enum value

    @property
    def swizzle(self) -> Swizzle:
        return Swizzle(self.bits, 4, 3)

    @property
    def width(self) -> int:
        """Bytes of one swizzled row (16 for none: one atom)."""
        return ATOM_BYTES << self.bits

    @property
    def period(self) -> int:
        """Bytes after which the pattern repeats (the alignment a tile should have)."""
        return 128 << self.bits if self.bits else ATOM_BYTES


MODES: tuple[SwizzleMode, ...] = (
    SwizzleMode("none", 0, 0, 0),
    SwizzleMode("32B", 1, 3, 1),
    SwizzleMode("64B", 2, 2, 2),
    SwizzleMode("128B", 3, 1, 3),
)
_BY_NAME = {m.name: m for m in MODES}
_BY_NAME.update({m.name.lower(): m for m in MODES})
_BY_DESC = {m.desc_code: m for m in MODES}


def swizzle_mode(mode) -> SwizzleMode:
    """A :class:`SwizzleMode` from its name ('none', '32B', '64B', '128B'), a SwizzleMode, or
    a width in bytes (0/16 none, 32, 64, 128)."""
    if isinstance(mode, SwizzleMode):
        return mode
    if isinstance(mode, str) and mode in _BY_NAME:
        return _BY_NAME[mode]
    if isinstance(mode, (int, np.integer)) and not isinstance(mode, bool):
        widths = {0: "none", 16: "none", 32: "32B", 64: "64B", 128: "128B"}
        if int(mode) in widths:
            return _BY_NAME[widths[int(mode)]]
    raise InputError(f"swizzle mode must be one of none, 32B, 64B, 128B, got {_describe(mode)}")


def mode_from_desc_code(code: int) -> SwizzleMode:
    """The mode a descriptor's 2-bit swizzle field (0 none, 1 128B, 2 64B, 3 32B) selects."""
    if isinstance(code, bool) or not isinstance(code, (int, np.integer)) or int(code) not in _BY_DESC:
        raise InputError(f"descriptor swizzle field must be 0..3, got {_describe(code)}")
    code = int(code)
    return _BY_DESC[code]


def swizzle_address(addr, mode) -> np.ndarray | int:
    """Where the byte at logical shared address ``addr`` is stored under ``mode``."""
    return swizzle_mode(mode).swizzle(addr)


def atom_table(mode, lines: int | None = None) -> np.ndarray:
    """(lines, atoms per row) table: physical 16-byte atom index of logical atom ``c`` of
    128-byte line ``r`` (the "which 16-byte atom goes where" view).

    For 128B: row r's atom c sits at atom ``c ^ (r % 8)``.  ``lines`` defaults to one period.
    """
    m = swizzle_mode(mode)
    lines = (1 << m.bits) if lines is None else check_int("lines", lines, 1, limit="diagram_lines")
    per_line = 128 // ATOM_BYTES
    r = np.arange(lines)[:, None]
    c = np.arange(per_line)[None, :]
    addr = r * 128 + c * ATOM_BYTES
    return (np.asarray(m.swizzle(addr)) % 128) // ATOM_BYTES


__all__ = ["Swizzle", "SwizzleMode", "MODES", "swizzle_mode", "mode_from_desc_code",
           "swizzle_address", "atom_table", "ATOM_BYTES"]
