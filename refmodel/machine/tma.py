"""The shared-memory image a 2-D TMA tile load (``cp.async.bulk.tensor.2d``) writes.

The box's ``box_rows x box_cols`` elements starting at global element ``(row0, col0)``
are written row after row at the destination ``dst``; elements outside the tensor are
filled with zero (``OOB_FILL_NONE``).  Without swizzle the rows are dense (``box_cols * e``
bytes apart).  With a swizzle mode a row may be at most the swizzle width ``W``
(``box_cols * e <= W``) and rows sit ``W`` bytes apart — a narrower row is padded to the
full swizzle row, the padding left untouched (seen on the H200: a 16-byte box row under
the 128B swizzle lands every 128 bytes) — and each byte goes to ``swizzle(address)`` on
the absolute shared address (the XOR of 16-byte atoms of :mod:`refmodel.layouts.swizzle`).  The box's first column must start on
a 16-byte boundary of its row (``col0 * e % 16 == 0``, negative columns included): on the
H200 any other start faults with an illegal instruction (fixtures/layouts/tma_faults).

Worked example: e4m3 box 64 x 128 with 128B swizzle at a 1024-aligned ``dst``: box row
``i`` lands on 128-byte line i, its atom ``c`` at atom ``c ^ (i % 8)``; a 64 x 32 box under
the same swizzle still takes 128 bytes a row, its 2 atoms at ``0 ^ (i % 8)`` and ``1 ^ (i % 8)``.
"""

from __future__ import annotations

import numpy as np

from ..limits import SMEM_ADDRESS, check_limit, limit
from ..validate import _describe, as_array, check_int
from ..errors import InputError
from ..layouts.swizzle import swizzle_mode


def _pos(name: str, v, lo: int, hi: int) -> int:
    if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)) or not lo <= v <= hi:
        raise InputError(f"{name} must be an int in {lo}..{hi}, got {_describe(v)}")
    return int(v)


def _pair(name: str, v) -> tuple:
    try:
        ok = not isinstance(v, (str, bytes, dict, set)) and len(v) == 2
    except TypeError:   # no len (a 0-d array, a number)
        ok = False
    if not ok:
        raise InputError(f"{name} must be a pair (rows, cols), got {_describe(v)}")
    return tuple(v)


def tma_offsets(box: tuple[int, int], elem_bytes: int, mode="none", *, dst: int = 0,
                smem_base: int = 0) -> np.ndarray:
    """(box_rows, box_cols * e) shared byte offsets (relative to the image) of each box byte."""
    m = swizzle_mode(mode)
    box = _pair("box", box)
    br = _pos("box rows", box[0], 1, limit("tma_box"))
    bc = _pos("box columns", box[1], 1, limit("tma_box"))
    if isinstance(elem_bytes, (bool, np.bool_)) or not isinstance(elem_bytes, (int, np.integer)) \
            or int(elem_bytes) not in (1, 2, 4):
        raise InputError(f"element size must be 1, 2 or 4 bytes, got {_describe(elem_bytes)}")
    elem_bytes = int(elem_bytes)
    smem_base = check_int("smem_base", smem_base, 0, SMEM_ADDRESS, multiple=128,
                          rule="the shared address of the image's first byte: a TMA destination is 128-byte aligned")
    row_bytes = bc * elem_bytes
    if row_bytes % 16:
        raise InputError(f"a TMA box row must be a multiple of 16 bytes, got {bc} x {elem_bytes} = {row_bytes}")
    if m.bits and row_bytes > m.width:
        raise InputError(f"with {m.name} swizzle a TMA box row may be at most {m.width} bytes, got {row_bytes}")
    if isinstance(dst, (bool, np.bool_)) or not isinstance(dst, (int, np.integer)) or dst < 0 or dst % 128:
        raise InputError(f"the TMA destination must be a non-negative multiple of 128 bytes, got {_describe(dst)}")
    dst = int(dst)
    check_limit("smem_bytes", dst, "the TMA destination (a byte offset into shared memory)")
    pitch = m.width if m.bits else row_bytes  # swizzled rows are padded to the swizzle width
    i = np.arange(br, dtype=np.int64)[:, None]
    b = np.arange(row_bytes, dtype=np.int64)[None, :]
    logical = smem_base + dst + i * pitch + b
    return np.asarray(m.swizzle(logical)) - smem_base


def tma_load(tensor: np.ndarray, box: tuple[int, int], coords: tuple[int, int], mode="none", *,
             dst: int = 0, smem_size: int | None = None, smem_base: int = 0, fill: int = 0x5A) -> np.ndarray:
    """uint8 image (``smem_size`` bytes, ``fill`` where not written) after a TMA load of the
    ``box`` at ``coords`` (row, col) of the 2-D row-major ``tensor``."""
    t = as_array("tensor", tensor)
    if t.ndim != 2 or t.dtype.itemsize not in (1, 2, 4):
        raise InputError(f"the tensor must be 2-D with 1-, 2- or 4-byte elements, got {t.dtype.name} {t.shape}")
    if 0 in t.shape:
        raise InputError(f"the tensor must have at least one row and one column (a tensor map's dimensions are "
                         f">= 1), got shape {t.shape}")
    e = t.dtype.itemsize
    fill = check_int("fill", fill, 0, limit("byte_value"), rule="the byte left where the load writes nothing")
    if smem_size is not None:
        smem_size = check_int("smem_size", smem_size, 1, limit="smem_bytes", rule="bytes of the shared-memory image")
    off = tma_offsets(box, e, mode, dst=dst, smem_base=smem_base)
    br, bc = int(box[0]), int(box[1])
    coords = _pair("coords", coords)
    r0, c0 = (_pos("coords[0]", coords[0], -(1 << 31), (1 << 31) - 1), _pos("coords[1]", coords[1], -(1 << 31), (1 << 31) - 1))
    if (c0 * e) % 16:
        raise InputError(f"the box's first column {c0} is {c0 * e} bytes into a row: a TMA tile load needs a "
                         f"16-byte aligned start column (the H200 faults with an illegal instruction otherwise)")
    rows = np.arange(r0, r0 + br)[:, None]
    cols = np.arange(c0, c0 + bc)[None, :]
    inside = (rows >= 0) & (rows < t.shape[0]) & (cols >= 0) & (cols < t.shape[1])
    vals = np.zeros((br, bc), dtype=t.dtype)
    vals[inside] = t[np.clip(rows, 0, t.shape[0] - 1), np.clip(cols, 0, t.shape[1] - 1)][inside]
    need = int(off.max()) + 1
    check_limit("smem_bytes", need, "the shared-memory bytes the box reaches (destination + box)")
    size = need if smem_size is None else smem_size
    if size < need:
        raise InputError(f"the box needs {need} bytes of shared memory, the image has {size}")
    img = np.full(size, fill, dtype=np.uint8)
    img[off] = np.ascontiguousarray(vals).view(np.uint8).reshape(br, bc * e)
    return img


__all__ = ["tma_load", "tma_offsets"]
