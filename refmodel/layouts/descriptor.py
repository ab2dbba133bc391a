"""wgmma shared-memory matrix descriptors and the canonical no-swizzle K-major layout.

Descriptor (64 bits, PTX ISA "Matrix Descriptor Format"; CUTLASS ``GmmaDescriptor``)::

    bits 13:0   start address >> 4          (shared-window byte address)
    bits 29:16  leading-dimension byte offset (LBO) >> 4
    bits 45:32  stride-dimension byte offset  (SBO) >> 4
    bits 51:49  matrix base offset              (only for the 128B/64B swizzles)
    bits 63:62  swizzle mode: 0 none, 1 128B, 2 64B, 3 32B
    all other bits reserved (zero)

Canonical K-major layout without swizzle (CUTLASS ``make_gmma_desc<Major::K>``,
INTERLEAVE: ``((8,m),2):((1,SBO),LBO)`` in 16-byte units).  The operand is an
R x K matrix (A: R = 64 = M; B: R = N, i.e. B transposed) whose rows are K-contiguous.
It is cut into *core matrices* of 8 rows x 16 bytes, each stored as 128
contiguous bytes (row r of the core matrix at byte 16*r).  Then::

    offset(row, kbyte) = (row // 8) * SBO + (kbyte // 16) * LBO + (row % 8) * 16 + kbyte % 16

LBO is the step between K-adjacent core matrices, SBO the step between 8-row
groups.  Every dense wgmma reads 32 bytes of K per row (tf32 K=8, f16/bf16 K=16,
8-bit K=32), i.e. two core matrices along K.  The default packing puts the two
K-halves of an 8-row group next to each other: LBO = 128, SBO = 256.

Only swizzle mode 0 is built here; the field is kept so descriptors round-trip.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..limits import limit
from ..validate import _describe, check_int
from ..errors import DTypeError, InputError

SWIZZLE_NAMES = {0: "none", 1: "128B", 2: "64B", 3: "32B"}
CORE_ROWS = 8
CORE_BYTES = 16  # bytes of one core-matrix row
CORE_MATRIX_BYTES = CORE_ROWS * CORE_BYTES

_ADDR_LIMIT = 1 << 18  # 14-bit field of 16-byte units
_FIELD_MASK = (0x3FFF) | (0x3FFF << 16) | (0x3FFF << 32) | (0x7 << 49) | (0x3 << 62)


def _check_offset(name: str, value: int) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise InputError(f"descriptor {name} must be an int, got {_describe(value)}")
    value = int(value)
    if value < 0 or value >= _ADDR_LIMIT or value % 16:
        raise InputError(f"descriptor {name} must be a multiple of 16 in 0..{_ADDR_LIMIT - 16} (a 14-bit field of "
                         f"16-byte units), got {_describe(value)}")
    return value


@dataclass(frozen=True)
class MatrixDescriptor:
    """One wgmma shared-memory matrix descriptor, fields in bytes (not >> 4)."""

    start_address: int = 0
    lbo: int = 0
    sbo: int = 0
    base_offset: int = 0
    swizzle: int = 0

    def __post_init__(self) -> None:
        _check_offset("start address", self.start_address)
        _check_offset("leading-dimension byte offset (LBO)", self.lbo)
        _check_offset("stride-dimension byte offset (SBO)", self.sbo)
        if isinstance(self.base_offset, (bool, np.bool_)) or not isinstance(self.base_offset, (int, np.integer)) \
                or not 0 <= int(self.base_offset) <= 7:
            raise InputError(f"descriptor base offset must be an int in 0..7 (a 3-bit field), "
                             f"got {_describe(self.base_offset)}")
        if isinstance(self.swizzle, (bool, np.bool_)) or not isinstance(self.swizzle, (int, np.integer)) \
                or int(self.swizzle) not in SWIZZLE_NAMES:
            raise InputError(f"descriptor swizzle mode must be 0 (none), 1 (128B), 2 (64B) or 3 (32B), "
                             f"got {_describe(self.swizzle)}")
        for f in ("start_address", "lbo", "sbo", "base_offset", "swizzle"):
            object.__setattr__(self, f, int(getattr(self, f)))

    def encode(self) -> int:
        """The 64-bit descriptor as a Python int."""
        return ((self.start_address >> 4)
                | (self.lbo >> 4) << 16
                | (self.sbo >> 4) << 32
                | int(self.base_offset) << 49
                | int(self.swizzle) << 62)

    def __int__(self) -> int:
        return self.encode()

    @classmethod
    def decode(cls, value: int) -> "MatrixDescriptor":
        """Split a 64-bit descriptor into its fields; reserved bits must be zero."""
        if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
            raise InputError(f"a descriptor must be an int, got {_describe(value)}")
        value = int(value)
        if value < 0 or value >= 1 << 64:
            raise InputError(f"a descriptor must fit in 64 unsigned bits, got {_describe(value)}")
        if value & ~_FIELD_MASK:
            raise InputError(f"descriptor {value:#018x} sets reserved bits {value & ~_FIELD_MASK:#x}; "
                             f"reserved bits must be zero")
        return cls(start_address=(value & 0x3FFF) << 4,
                   lbo=((value >> 16) & 0x3FFF) << 4,
                   sbo=((value >> 32) & 0x3FFF) << 4,
                   base_offset=(value >> 49) & 0x7,
                   swizzle=(value >> 62) & 0x3)

    def with_start(self, start_address: int) -> "MatrixDescriptor":
        """Same layout at another start address."""
        return MatrixDescriptor(start_address, self.lbo, self.sbo, self.base_offset, self.swizzle)

    def __str__(self) -> str:
        return (f"MatrixDescriptor({self.encode():#018x}: start={self.start_address:#x} lbo={self.lbo} "
                f"sbo={self.sbo} base_offset={self.base_offset} swizzle={SWIZZLE_NAMES[self.swizzle]})")


def kmajor_offsets(rows: int, row_bytes: int, *, lbo: int, sbo: int) -> np.ndarray:
    """(rows, row_bytes) array: byte offset of each byte of a K-major operand, no swizzle."""
    rows = check_int("rows", rows)
    row_bytes = check_int("row_bytes", row_bytes)
    if rows <= 0 or rows % CORE_ROWS:
        raise InputError(f"a K-major operand needs a positive multiple of 8 rows, got {_describe(rows)}")
    if row_bytes <= 0 or row_bytes % CORE_BYTES:
        raise InputError(f"a K-major operand row must be a positive multiple of 16 bytes, got {_describe(row_bytes)}")
    from .smem import check_tile

    check_int("rows", rows, limit="smem_rows")
    check_tile(rows, row_bytes, 1)
    _check_offset("LBO", lbo)
    _check_offset("SBO", sbo)
    r = np.arange(rows)[:, None]
    kb = np.arange(row_bytes)[None, :]
    return (r // CORE_ROWS) * sbo + (kb // CORE_BYTES) * lbo + (r % CORE_ROWS) * CORE_BYTES + kb % CORE_BYTES


def default_strides(row_bytes: int) -> tuple[int, int]:
    """(LBO, SBO) of the dense packing: K-halves of an 8-row group adjacent."""
    return CORE_MATRIX_BYTES, CORE_MATRIX_BYTES * (row_bytes // CORE_BYTES)


def _as_bytes(mat: np.ndarray) -> np.ndarray:
    mat = np.asarray(mat)
    if mat.ndim != 2:
        raise InputError(f"an operand tile must be 2-D (rows, K), got shape {mat.shape}")
    if mat.dtype.itemsize not in (1, 2, 4) or mat.dtype.kind not in "fiuV":
        raise DTypeError(f"operand elements must be 1, 2 or 4-byte numbers, got {mat.dtype.name}")
    # little-endian bytes of each element, K-contiguous
    return np.ascontiguousarray(mat).view(np.uint8).reshape(mat.shape[0], -1)


def canonical_kmajor_image(mat: np.ndarray, *, lbo: int | None = None,
                           sbo: int | None = None) -> tuple[np.ndarray, int, int]:
    """Shared-memory image (uint8, no swizzle) of a K-major operand tile (rows, K).

    Returns ``(image, lbo, sbo)``; the image starts at the descriptor's start
    address and is as long as the highest byte used (rounded up to 16).  Gaps left
    by non-dense strides are zero.
    """
    b = _as_bytes(mat)
    rows, row_bytes = b.shape
    dl, ds = default_strides(row_bytes) if row_bytes % CORE_BYTES == 0 else (16, 16)
    lbo = dl if lbo is None else lbo
    sbo = ds if sbo is None else sbo
    off = kmajor_offsets(rows, row_bytes, lbo=lbo, sbo=sbo)
    if np.unique(off).size != off.size:
        raise InputError(f"LBO={lbo} and SBO={sbo} make core matrices of a {rows}x{row_bytes}-byte "
                         f"operand overlap; strides must keep 128-byte core matrices apart")
    size = int(off.max()) + 1
    size = -(-size // 16) * 16
    img = np.zeros(size, dtype=np.uint8)
    img[off] = b
    return img, int(lbo), int(sbo)


def read_kmajor_image(image: np.ndarray, shape: tuple[int, int], dtype, *, lbo: int,
                      sbo: int) -> np.ndarray:
    """Inverse of :func:`canonical_kmajor_image`: the (rows, K) tile of ``dtype`` in an image."""
    dtype = np.dtype(dtype)
    rows, k = shape
    row_bytes = k * dtype.itemsize
    off = kmajor_offsets(rows, row_bytes, lbo=lbo, sbo=sbo)
    image = np.asarray(image, dtype=np.uint8).ravel()
    if off.max() >= image.size:
        raise InputError(f"a {rows}x{k} {dtype.name} operand with LBO={lbo}, SBO={sbo} needs "
                         f"{int(off.max()) + 1} bytes, the image has {image.size}")
    return np.ascontiguousarray(image[off]).view(dtype).reshape(rows, k)


# ----------------------------------------------------------------------------- addressing

#: How the descriptor's base-offset field enters the swizzle (see :func:`operand_addresses`).
#: The H200 answers "subtract": the swizzle phase is ``((address >> 7) - base_offset)``, masked
#: to the mode's bits (1, 2, 3 for 32B, 64B, 128B).  "ignore", "add" and "xor" were tried on
#: the same recordings and each mispredicts (fixtures/layouts, docs/layouts.md).
BASE_OFFSET_RULE = "subtract"
BASE_OFFSET_RULES = ("ignore", "subtract", "add", "xor")


def _swizzle_with_base(addr: np.ndarray, bits: int, base_offset: int, rule: str) -> np.ndarray:
    """Physical address of logical address ``addr`` for a swizzle of ``bits`` (B) with the
    descriptor's base offset applied by ``rule`` to the 128-byte line index."""
    if bits == 0:
        return addr
    line = addr >> 7
    if rule == "ignore":
        phase = line
    elif rule == "subtract":
        phase = line - base_offset
    elif rule == "add":
        phase = line + base_offset
    elif rule == "xor":
        phase = line ^ base_offset
    else:
        raise InputError(f"unknown base-offset rule {_describe(rule)}; rules are ignore, subtract, add, xor")
    return addr ^ ((phase & ((1 << bits) - 1)) << 4)


def operand_addresses(desc: "MatrixDescriptor | int", rows: int, k: int, elem_bytes: int, *,
                      major: str = "K", rule: str | None = None) -> np.ndarray:
    """(rows, k * elem_bytes) int64: the absolute shared address the hardware reads for each
    byte of an ``rows x k`` operand (A: 64 x K; B viewed as N x K) described by ``desc``.

    The start address plus the canonical layout's offsets (:class:`refmodel.layouts.smem.SmemLayout`)
    give the logical address; the swizzle then XORs address bits 4.. with the 128-byte
    line index (bits 7..), on the absolute address, the base-offset field entering by
    :data:`BASE_OFFSET_RULE`.
    """
    from .smem import SmemLayout
    from .swizzle import mode_from_desc_code

    if rule is not None and (not isinstance(rule, str) or rule not in BASE_OFFSET_RULES):
        raise InputError(f"rule must be None or one of {', '.join(BASE_OFFSET_RULES)}, got {_describe(rule)}")
    d = desc if isinstance(desc, MatrixDescriptor) else MatrixDescriptor.decode(desc)
    mode = mode_from_desc_code(d.swizzle)
    lay = SmemLayout(major, mode, elem_bytes, d.lbo, d.sbo)
    logical = d.start_address + lay.offsets(rows, k)
    return _swizzle_with_base(logical, mode.bits, int(d.base_offset), rule or BASE_OFFSET_RULE)


def describe(desc: "MatrixDescriptor | int") -> list[str]:
    """Notes on a descriptor: the fields, and what is legal but unusual (ignored fields,
    a swizzled start not on the pattern's period, a zero stride)."""
    from .swizzle import mode_from_desc_code

    d = desc if isinstance(desc, MatrixDescriptor) else MatrixDescriptor.decode(desc)
    mode = mode_from_desc_code(d.swizzle)
    notes = [f"start address {d.start_address:#x} ({d.start_address} bytes)",
             f"LBO {d.lbo} bytes, SBO {d.sbo} bytes, base offset {d.base_offset}, swizzle {mode.name}"]
    if mode.bits and d.start_address % mode.period and d.base_offset == 0:
        notes.append(f"the start is {d.start_address % mode.period} bytes into a {mode.period}-byte "
                     f"{mode.name} pattern: fine for a K step inside a swizzle row (+32 B), "
                     f"otherwise check the tile was written with the same absolute-address swizzle")
    if mode.bits == 0 and d.base_offset:
        notes.append("base offset is only meaningful for swizzled modes")
    if d.sbo == 0:
        notes.append("SBO is 0: every 8-row group reads the same bytes")
    return notes


def make_descriptor(start: int, *, major: str = "K", swizzle="none", rows: int, k: int, elem_bytes: int,
                    lbo: int | None = None, sbo: int | None = None, base_offset: int = 0,
                    k_step: int = 0, smem_size: int | None = None, smem_base: int = 0) -> MatrixDescriptor:
    """A validated descriptor for an ``rows x k`` operand tile stored at shared address ``start``
    in the dense canonical layout (or with the given LBO/SBO); it describes what one
    instruction reads (32 bytes of K per row).

    ``k_step`` (K-major, swizzled) advances the start by ``k_step * 32`` bytes inside the
    swizzle row, as CUTLASS does between instructions.  Rules, each a one-line error: the
    start is 16-byte aligned; a swizzled tile starts on its pattern (256/512/1024 bytes)
    unless a base offset says where the pattern began; the K step stays inside the swizzle
    row; every byte read lies inside ``[smem_base, smem_base + smem_size)``.
    """
    from .smem import _major, dense_strides
    from .swizzle import swizzle_mode

    m = swizzle_mode(swizzle)
    major = _major(major)
    if not isinstance(start, (int, np.integer)) or isinstance(start, (bool, np.bool_)) or start < 0 or start % 16:
        raise InputError(f"a descriptor's start address must be a non-negative multiple of 16 (one atom), got {_describe(start)}")
    start = int(start)
    k = check_int("k", k, 1)
    elem_bytes = check_int("elem_bytes", elem_bytes)
    if elem_bytes not in (1, 2, 4):
        raise InputError(f"element size must be 1, 2 or 4 bytes, got {_describe(elem_bytes)}")
    base_offset = check_int("base_offset", base_offset, 0, 7, rule="the descriptor's 3-bit base-offset field")
    k_step = check_int("k_step", k_step, 0, 3, rule="32-byte K steps inside a swizzle row of at most 128 bytes")
    smem_base = check_int("smem_base", smem_base, 0, limit("smem_address"), multiple=16,
                          rule="a shared-memory address, 16-byte aligned")
    if smem_size is not None:
        smem_size = check_int("smem_size", smem_size, 1, limit="smem_bytes", rule="bytes of shared memory")
    dl, ds = dense_strides(major, m, rows, k * elem_bytes if str(major).upper() == "K" else None)
    if m.bits and (start - base_offset * 128) % m.period:
        raise InputError(f"a {m.name}-swizzled tile must start on its {m.period}-byte pattern: start {start:#x} is "
                         f"{start % m.period} bytes in; if the tile was swizzled as if its pattern began there, "
                         f"set base_offset={(start >> 7) & 7}")
    if k_step:
        if str(major).upper() != "K" or not m.bits or k_step * 32 + 32 > m.width:
            raise InputError(f"a K step of {k_step} x 32 bytes must stay inside one {m.width}-byte swizzle row "
                             f"of a swizzled K-major tile")
        start += 32 * k_step
    d = MatrixDescriptor(start, dl if lbo is None else lbo, ds if sbo is None else sbo, base_offset, m.desc_code)
    if smem_size is not None:
        addr = operand_addresses(d, rows, 32 // elem_bytes, elem_bytes, major=major)  # one instruction's K
        lo, hi = int(addr.min()) - smem_base, int(addr.max()) - smem_base
        if lo < 0 or hi >= smem_size:
            raise InputError(f"the operand reads shared addresses {int(addr.min()):#x}..{int(addr.max()):#x}, past "
                             f"the {smem_size}-byte shared memory at {smem_base:#x}: check the start address and SBO")
    return d
