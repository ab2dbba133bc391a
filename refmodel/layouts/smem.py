"""Canonical shared-memory layouts of wgmma operands: K-major and MN-major x every swizzle.

An operand is viewed as an ``R x K`` matrix: A is ``M x K`` (R = 64), B is viewed
transposed, ``N x K`` (R = N).  *K-major* stores each row's K elements contiguously
(the only option for tf32 / FP8 / int8); *MN-major* (``imm-trans = 1``, f16/bf16 only)
stores each K-column's R elements contiguously.  ``T = 16 / element bytes`` elements
fill one 16-byte atom; ``W = 16 * 2**B`` is the swizzle row width (B = 0..3 for none,
32B, 64B, 128B).  In bytes, relative to the descriptor's start address (PTX ISA
"Canonical Layouts", CuTe ``make_gmma_desc``), before the swizzle is applied::

    K-major, none:     (r//8)*SBO + (r%8)*16 + (kb//16)*LBO + kb%16      kb = byte in the row
    K-major, swizzled: (r//8)*SBO + (r%8)*W  + kb                         (LBO unused)
    MN-major, none:    (r//T)*SBO + (k%8)*16 + (k//8)*LBO + (r%T)*e       e = element bytes
    MN-major, swizzled:(r//(T*S))*LBO + (k%8)*W + (k//8)*SBO + (r%(T*S))*e   S = W/16

so LBO and SBO trade places between the no-swizzle and the swizzled MN-major layouts
(that is the PTX text, and a classic source of bugs, CUTLASS #1396/#1688).  Then the
hardware stores byte ``a`` at ``swizzle(a)`` (:mod:`refmodel.layouts.swizzle`), on the
*absolute* shared address.  What the descriptor's base-offset field does to that is in
:func:`refmodel.layouts.descriptor.operand_addresses`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..limits import check_limit, limit
from ..validate import _describe, as_array, check_int
from ..errors import InputError
from .swizzle import ATOM_BYTES, SwizzleMode, swizzle_mode

MAJORS = ("K", "MN")


def _major(major: str) -> str:
    m = major.upper() if isinstance(major, str) else None
    if m not in MAJORS:
        raise InputError(f"operand major must be 'K' or 'MN', got {_describe(major)}")
    return m


def _positive(name: str, v, multiple: int = 1, lim: str | None = None) -> int:
    if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)) or v <= 0 or v % multiple:
        what = f"a positive multiple of {multiple}" if multiple > 1 else "a positive int"
        raise InputError(f"{name} must be {what}, got {_describe(v)}")
    if lim is not None:
        check_limit(lim, int(v), name)
    return int(v)


def _elem_bytes(v) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or int(v) not in (1, 2, 4):
        raise InputError(f"element size must be 1, 2 or 4 bytes, got {_describe(v)}")
    return int(v)


def _address(name: str, v) -> int:
    """A non-negative, 16-byte aligned shared address inside the window a descriptor can reach."""
    return check_int(name, v, 0, limit("smem_address"), multiple=16, rule="a shared-memory address, 16-byte aligned")


def check_tile(rows: int, k: int, elem_bytes: int) -> None:
    """An R x K operand tile must fit in one CTA's shared memory (checked before any offsets exist)."""
    check_limit("smem_row_bytes", k * elem_bytes, f"a row of the tile (K x {elem_bytes} bytes)")
    check_limit("smem_bytes", rows * k * elem_bytes, f"the {rows} x {k} tile's bytes")


@dataclass(frozen=True)
class SmemLayout:
    """Where each byte of an ``R x K`` operand sits, relative to the start address (pre-swizzle).

    ``elem_bytes`` 1, 2 or 4; ``lbo``/``sbo`` in bytes as the descriptor holds them.
    """

    major: str
    mode: SwizzleMode
    elem_bytes: int
    lbo: int
    sbo: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "major", _major(self.major))
        object.__setattr__(self, "mode", swizzle_mode(self.mode))
        object.__setattr__(self, "elem_bytes", _elem_bytes(self.elem_bytes))
        if self.major == "MN" and self.elem_bytes != 2:
            raise InputError("an MN-major (transposed) operand must have 2-byte elements (f16/bf16); "
                             f"{self.elem_bytes}-byte elements must be K-major")
        for name, v in (("LBO", self.lbo), ("SBO", self.sbo)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)) or v < 0 or v % 16:
                raise InputError(f"{name} must be a non-negative multiple of 16 bytes, got {_describe(v)}")
            check_limit("desc_offset_bytes", int(v), f"{name} (a 14-bit descriptor field of 16-byte units)")
        object.__setattr__(self, "lbo", int(self.lbo))
        object.__setattr__(self, "sbo", int(self.sbo))

    @property
    def atom_elems(self) -> int:
        return ATOM_BYTES // self.elem_bytes

    def offsets(self, rows: int, k: int) -> np.ndarray:
        """(rows, k * elem_bytes) int64: logical byte offset of each byte of the operand."""
        rows = _positive("rows", rows, 8, "smem_rows")
        k = _positive("K", k)
        e, w = self.elem_bytes, self.mode.width
        check_tile(rows, k, e)
        if self.major == "K" and (k * e) % 16:
            raise InputError(f"a K-major row must be a whole number of 16-byte atoms (core-matrix rows): "
                             f"K = {k} x {e} bytes = {k * e} bytes is not a multiple of 16")
        if self.major == "MN" and k % 8:
            raise InputError(f"an MN-major operand's K must be a multiple of 8 (8 K-columns a core matrix), got {_describe(k)}")
        r = np.arange(rows, dtype=np.int64)[:, None]
        kb = np.arange(k * e, dtype=np.int64)[None, :]
        if self.major == "K":
            if self.mode.bits == 0:
                return (r // 8) * self.sbo + (r % 8) * 16 + (kb // 16) * self.lbo + kb % 16
            return (r // 8) * self.sbo + (r % 8) * w + kb
        kk, byte = kb // e, kb % e
        t = self.atom_elems
        if self.mode.bits == 0:
            return (r // t) * self.sbo + (kk % 8) * 16 + (kk // 8) * self.lbo + (r % t) * e + byte
        tw = w // e  # elements of one swizzled row
        return (r // tw) * self.lbo + (kk % 8) * w + (kk // 8) * self.sbo + (r % tw) * e + byte


def dense_strides(major: str, mode, rows: int, row_k_bytes: int | None = None) -> tuple[int, int]:
    """(LBO, SBO) of the dense canonical packing of an ``rows x K`` operand tile.

    K-major none: the two K core matrices of an 8-row group adjacent (LBO 128, SBO 256 for a
    32-byte K).  K-major swizzled: rows of ``W`` bytes, SBO = 8 W (LBO unused: 16).
    MN-major none: core matrices along R adjacent (SBO 128), K groups after all R (LBO).
    MN-major swizzled: atoms of 8 K-rows x W bytes; R blocks adjacent (LBO = 8 W), K
    groups after all R blocks (SBO).
    """
    major, m = _major(major), swizzle_mode(mode)
    rows = _positive("rows", rows, 8, "smem_rows")
    w = m.width
    if major == "K":
        if m.bits == 0:
            kb = 32 if row_k_bytes is None else _positive("row bytes", row_k_bytes, 16, "smem_row_bytes")
            return 128, 128 * (kb // 16)
        return 16, 8 * w
    if m.bits == 0:
        return 128 * (rows // 8), 128
    blocks = -(-rows * 2 // w)
    return 8 * w, 8 * w * blocks


def tile_image(tile: np.ndarray, major: str, mode, *, lbo: int | None = None, sbo: int | None = None,
               base: int = 0, size: int | None = None) -> np.ndarray:
    """uint8 shared-memory image of an ``R x K`` operand tile stored at absolute address ``base``.

    ``tile`` is the (R, K) matrix (A as is, B transposed) of 1-, 2- or 4-byte elements.
    The image starts at address ``base`` (which the swizzle sees) and is ``size`` bytes
    (default: up to the last byte used).  Bytes not covered are zero.
    """
    t = as_array("tile", tile)
    if t.ndim != 2:
        raise InputError(f"an operand tile must be 2-D (R, K), got shape {t.shape}")
    e = t.dtype.itemsize
    rows, k = t.shape
    base = _address("base", base)
    if size is not None:
        size = check_int("size", size, 0, limit="smem_bytes", rule="bytes of the shared-memory image")
    _positive("rows", rows, 8, "smem_rows")
    if e in (1, 2, 4) and k:
        check_tile(rows, k, e)
    dl, ds = dense_strides(major, mode, rows, k * e if _major(major) == "K" else None)
    lay = SmemLayout(major, mode, e, dl if lbo is None else lbo, ds if sbo is None else sbo)
    off = lay.offsets(rows, k)
    phys = np.asarray(lay.mode.swizzle(off + base)) - base
    if phys.min() < 0:
        raise InputError(f"base {base} makes the swizzled tile start before the image; "
                         f"align the base to the {lay.mode.period}-byte pattern")
    if np.unique(phys).size != phys.size:
        raise InputError(f"LBO={lay.lbo} and SBO={lay.sbo} make the {major}-major {lay.mode.name} "
                         f"tile overlap itself")
    need = int(phys.max()) + 1
    check_limit("smem_bytes", need, "the tile's image bytes (its strides spread it that far)")
    size = -(-need // 16) * 16 if size is None else size
    if size < need:
        raise InputError(f"the tile needs {need} bytes of image, size is {size}")
    img = np.zeros(size, dtype=np.uint8)
    img[phys] = np.ascontiguousarray(t).view(np.uint8).reshape(rows, k * e)
    return img


def rowmajor_offsets(rows: int, cols: int, elem_bytes: int, mode, *, base: int = 0) -> np.ndarray:
    """(rows, cols) physical byte offsets of a row-major tile as TMA boxes lay it out.

    The tile is cut into column blocks of ``W`` bytes (the swizzle width; the whole row
    for no swizzle), each block ``rows x W`` stored contiguously, blocks one after
    another; then the swizzle of the absolute address ``base + offset``.  This is the
    layout an epilogue writes with stmatrix and a TMA store reads back.
    """
    m = swizzle_mode(mode)
    rows = _positive("rows", rows, lim="smem_rows")
    cols = _positive("cols", cols)
    elem_bytes = _elem_bytes(elem_bytes)
    base = _address("base", base)
    check_tile(rows, cols, elem_bytes)
    row_bytes = cols * elem_bytes
    w = m.width if m.bits else row_bytes
    if row_bytes % w:
        raise InputError(f"a {m.name}-swizzled row-major tile needs rows of a multiple of {w} bytes, "
                         f"got {_describe(cols)} x {elem_bytes} = {_describe(row_bytes)}")
    r = np.arange(rows, dtype=np.int64)[:, None]
    cb = np.arange(cols, dtype=np.int64)[None, :] * elem_bytes
    logical = (cb // w) * rows * w + r * w + cb % w
    return np.asarray(m.swizzle(logical + base)) - base


__all__ = ["SmemLayout", "MAJORS", "dense_strides", "tile_image", "rowmajor_offsets"]
