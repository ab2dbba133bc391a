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

from ..validate import _describe, as_array
from ..errors import InputError
from ..layouts.swizzle import swizzle_mode


def _pos(name: str, v, lo: int, hi: int) -> int:
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not lo <= v <= hi:
        raise InputError(f"{name} must be an int in {lo}..{hi}, got {_describe(v)}")
    return int(v)


def _pair(name: str, v) -> tuple:
    if isinstance(v, (str, bytes)) or not hasattr(v, "__len__") or len(v) != 2:
        raise InputError(f"{name} must be a pair (rows, cols), got {_describe(v)}")
    return tuple(v)


def tma_offsets(box: tuple[int, int], elem_bytes: int, mode="none", *, dst: int = 0,
                smem_base: int = 0) -> np.ndarray:
    """(box_rows, box_cols * e) shared byte offsets (relative to the image) of each box byte."""
    m = swizzle_mode(mode)
    box = _pair("box", box)
    br = _pos("box rows", box[0], 1, 256)
    bc = _pos("box columns", box[1], 1, 256)
    row_bytes = bc * elem_bytes
    if row_bytes % 16:
        raise InputError(f"a TMA box row must be a multiple of 16 bytes, got {bc} x {elem_bytes} = {row_bytes}")
    if m.bits and row_bytes > m.width:
        raise InputError(f"with {m.name} swizzle a TMA box row may be at most {m.width} bytes, got {row_bytes}")
    if isinstance(dst, bool) or not isinstance(dst, (int, np.integer)) or dst < 0 or dst % 128:
        raise InputError(f"the TMA destination must be a non-negative multiple of 128 bytes, got {_describe(dst)}")
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
    e = t.dtype.itemsize
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
    size = need if smem_size is None else int(smem_size)
    if size < need:
        raise InputError(f"the box needs {need} bytes of shared memory, the image has {size}")
    img = np.full(size, fill, dtype=np.uint8)
    img[off] = np.ascontiguousarray(vals).view(np.uint8).reshape(br, bc * e)
    return img


__all__ = ["tma_load", "tma_offsets"]
