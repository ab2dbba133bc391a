"""Sparse wgmma metadata: which thread's ``sp-meta`` register holds which nibble (seed §17).

The metadata of a 64 x K sparse A is one 4-bit nibble per row and chunk (``idx0 | idx1 << 2``:
the positions inside a 4-element chunk of the two kept elements; for tf32, one nibble per
2-element pair: 0b0100 keeps element 0, 0b1110 keeps element 1 — a tf32 element is two
16-bit halves of the 2:4 hardware).  Warp w supplies rows 16w .. 16w+15.  For row
``m = 16w + 8h + g`` (g = m % 8, h = (m % 16) // 8) and chunk ``c``, the nibble sits in
thread ``32w + lane`` at nibble position ``p`` (bits 4p .. 4p+3) of its 32-bit register::

    16-bit (f16, bf16; K=32, c in 0..7) and tf32 (K=16, pair c in 0..7), sp-sel s in {0, 1}:
        lane = 4g + (c >> 2) + 2s        p = 4h + (c & 3)
    8-bit (e4m3, e5m2, s8, u8; K=64, c in 0..15), sp-sel 0:
        lane = 4g + h + 2 (c >> 3)        p = c & 7

So with sp-sel 0 the 16-bit forms read lanes 0 and 1 of each group of four (sp-sel 1: lanes 2
and 3), while 8-bit forms read all four.  Found on the H200 with tagged probes (random
nibbles in every lane and position, B = identity: D shows where each kept element went) —
fixtures/sparse — and equal to the lead from the PTX ISA's figures.

Worked example (f16, sp-sel 0): row 9 (w 0, h 1, g 1), chunk 5 → lane 4 + 1 = 5, bits 20..23.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..validate import _describe, as_array, check_registers

ROWS = 64
LEGAL_24 = (0b0100, 0b1000, 0b1100, 0b1001, 0b1101, 0b1110)   # idx0 < idx1
LEGAL_TF32 = (0b0100, 0b1110)
ILLEGAL_24 = (0b0000, 0b0101, 0b1010, 0b1111)                  # idx0 == idx1 (PTX: undefined)


def _kind(dtype_a: str) -> str:
    if not isinstance(dtype_a, str):
        raise InputError(f"sparse A type must be f16, bf16, tf32, e4m3, e5m2, s8 or u8, got {_describe(dtype_a)}")
    if dtype_a in ("f16", "bf16"):
        return "16"
    if dtype_a == "tf32":
        return "tf32"
    if dtype_a in ("e4m3", "e5m2", "s8", "u8"):
        return "8"
    raise InputError(f"sparse A type must be f16, bf16, tf32, e4m3, e5m2, s8 or u8, got {_describe(dtype_a)}")


def meta_cols(dtype_a: str) -> int:
    """Nibbles per row: 8 (16-bit K=32 and tf32 K=16) or 16 (8-bit K=64)."""
    return 16 if _kind(dtype_a) == "8" else 8


def check_sp_sel(dtype_a: str, sp_sel) -> int:
    if isinstance(sp_sel, (bool, np.bool_)) or not isinstance(sp_sel, (int, np.integer)):
        raise InputError(f"sp_sel must be an int, got {_describe(sp_sel)}")
    allowed = (0,) if _kind(dtype_a) == "8" else (0, 1)
    if int(sp_sel) not in allowed:
        raise InputError(f"sp_sel must be {' or '.join(map(str, allowed))} for {dtype_a} sparse wgmma, "
                         f"got {_describe(sp_sel)}")
    return int(sp_sel)


def meta_holders(dtype_a: str, sp_sel: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(thread, position), each (64, cols): the warpgroup thread (0..127) and nibble position
    (0..7) holding the metadata nibble of each row and chunk."""
    kind = _kind(dtype_a)
    s = check_sp_sel(dtype_a, sp_sel)
    m = np.arange(ROWS)[:, None]
    c = np.arange(meta_cols(dtype_a))[None, :]
    w, h, g = m // 16, (m % 16) // 8, m % 8
    if kind == "8":
        lane, pos = 4 * g + h + 2 * (c >> 3), c & 7
    else:
        lane, pos = 4 * g + (c >> 2) + 2 * s, 4 * h + (c & 3)
    return np.broadcast_to(32 * w + lane, (ROWS, c.shape[1])).copy(), np.broadcast_to(pos, (ROWS, c.shape[1])).copy()


def pack_meta(meta, dtype_a: str, sp_sel: int = 0, *, fill=0) -> np.ndarray:
    """(128,) uint32 sp-meta registers for a (64, cols) nibble matrix (uint8, values 0..15).
    Register nibbles no (row, chunk) maps to get ``fill`` (an int, or a (128,) uint32 array
    whose other nibbles are kept: the garbage the hardware does not read)."""
    mt = as_array("meta", meta)
    cols = meta_cols(dtype_a)
    if mt.shape != (ROWS, cols) or mt.dtype.kind not in "iu":
        raise InputError(f"meta for {dtype_a} must be integers of shape (64, {cols}), got {mt.dtype} {mt.shape}")
    if mt.size and (mt.min() < 0 or mt.max() > 15):
        raise InputError("metadata nibbles must be in 0..15")
    thread, pos = meta_holders(dtype_a, sp_sel)
    regs = _fill_registers(fill)
    shift = (4 * pos).astype(np.uint32)
    np.bitwise_and.at(regs, thread.ravel(), ~(np.uint32(0xF) << shift.ravel()))
    np.bitwise_or.at(regs, thread.ravel(), (mt.astype(np.uint32) << shift).ravel())
    return regs


def _fill_registers(fill) -> np.ndarray:
    """(128,) uint32 starting registers from ``fill``: an int in 0..2**32-1 or 128 such integers."""
    if isinstance(fill, (int, np.integer)) and not isinstance(fill, (bool, np.bool_)):
        if not 0 <= int(fill) < 1 << 32:
            raise InputError(f"fill must be a 32-bit register value (0..2**32-1), got {_describe(fill)}")
        return np.full(128, int(fill), np.uint32)
    f = as_array("fill", fill)
    if f.shape != (128,) or f.dtype.kind not in "iu":
        raise InputError(f"fill must be an int or 128 integer registers (one per thread), got {_describe(fill)}")
    if f.size and (int(f.min()) < 0 or int(f.max()) >= 1 << 32):
        raise InputError("fill registers must be 32-bit values (0..2**32-1)")
    return f.astype(np.uint32)


def unpack_meta(regs, dtype_a: str, sp_sel: int = 0) -> np.ndarray:
    """(64, cols) uint8 nibbles the hardware reads from (128,) sp-meta registers."""
    r = as_array("sp-meta registers", regs)
    if r.shape != (128,) or r.dtype.kind not in "iu":
        raise InputError(f"sp-meta registers must be 128 integers (one per thread), got {r.dtype} {r.shape}")
    r = check_registers("sp-meta registers", r)
    thread, pos = meta_holders(dtype_a, sp_sel)
    return ((r[thread] >> (4 * pos).astype(np.uint32)) & 0xF).astype(np.uint8)


__all__ = ["meta_holders", "pack_meta", "unpack_meta", "meta_cols", "check_sp_sel", "LEGAL_24", "LEGAL_TF32",
           "ILLEGAL_24"]
