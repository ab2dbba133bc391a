"""stmatrix and ldmatrix as the hardware executes them: registers + per-lane addresses + image.

``stmatrix(instr, regs, addrs, smem)`` returns the new shared-memory image;
``ldmatrix(instr, addrs, smem)`` returns the registers.  ``regs`` is uint32 (32, num):
register ``j`` of lane ``l``; ``addrs`` (32,) byte offsets into ``smem`` (uint8), of which
lanes ``0 .. 8*num-1`` are used (the others are ignored, as on the hardware).
The fragment map is :mod:`refmodel.layouts.stmatrix`.
"""

from __future__ import annotations

import numpy as np

from ..validate import _describe, as_array, check_registers
from ..errors import DTypeError, InputError
from ..layouts.stmatrix import LANES, MatrixForm, fragment_map, parse_matrix_instr

ROW_BYTES = 16


def _image(smem) -> np.ndarray:
    s = as_array("the shared-memory image", smem)
    if s.dtype != np.uint8 or s.ndim != 1:
        raise DTypeError(f"the shared-memory image must be a 1-D uint8 array, got {s.dtype.name} "
                         f"with shape {s.shape}")
    return s


def _addresses(form: MatrixForm, addrs, size: int) -> np.ndarray:
    a = as_array("addrs", addrs)
    if a.shape != (LANES,):
        raise InputError(f"addrs must have shape (32,): one address per lane, got {a.shape}")
    if a.dtype.kind not in "iu":
        raise DTypeError(f"addrs must be integer byte offsets, got {a.dtype.name}")
    used = a[: form.address_lanes].astype(np.int64)
    bad = np.flatnonzero(used % ROW_BYTES)
    if bad.size:
        raise InputError(f"lane {bad[0]} gives address {used[bad[0]]}: {form.op} row addresses must be "
                         f"16-byte aligned")
    bad = np.flatnonzero((used < 0) | (used + ROW_BYTES > size))
    if bad.size:
        raise InputError(f"lane {bad[0]} gives address {used[bad[0]]}: its 16-byte row runs outside "
                         f"the {size}-byte image")
    return used


def _element_offsets(form: MatrixForm, used: np.ndarray) -> np.ndarray:
    """(32, num, 2) byte offset of the element in each register half."""
    mat, row, col = fragment_map(form.num, form.trans)
    return used[mat * 8 + row] + 2 * col


def stmatrix(instr: str, regs, addrs, smem) -> np.ndarray:
    """The image after ``stmatrix``: each lane's registers stored to the rows the address
    lanes point at.  Rows given by two lanes must not overlap (the hardware's order is
    not defined)."""
    form = parse_matrix_instr(instr, "stmatrix")
    img = _image(smem)
    r = as_array("regs", regs)
    if r.shape != (LANES, form.num):
        raise InputError(f"regs for {form.instr} must have shape (32, {form.num}), got {r.shape}")
    if r.dtype.kind not in "iu":
        raise DTypeError(f"regs must be uint32 register images, got {r.dtype.name}")
    r = check_registers("regs", r)
    used = _addresses(form, addrs, img.size)
    rows = used[:, None] + np.arange(ROW_BYTES)[None, :]
    if np.unique(rows).size != rows.size:
        dup = [int(x) for x in used if np.count_nonzero(np.abs(used - x) < ROW_BYTES) > 1][:2]
        raise InputError(f"stmatrix rows overlap (addresses {dup}): which lane's data lands is not "
                         f"defined; give every row its own 16 bytes")
    r = r.astype(np.uint32)
    halves = np.stack([r & 0xFFFF, r >> 16], axis=-1).astype(np.uint16)   # (32, num, 2)
    off = _element_offsets(form, used)
    out = img.copy()
    out[off] = (halves & 0xFF).astype(np.uint8)
    out[off + 1] = (halves >> 8).astype(np.uint8)
    return out


def ldmatrix(instr: str, addrs, smem) -> np.ndarray:
    """uint32 (32, num) registers after ``ldmatrix`` from the rows the address lanes give."""
    form = parse_matrix_instr(instr, "ldmatrix")
    img = _image(smem)
    used = _addresses(form, addrs, img.size)
    off = _element_offsets(form, used)
    halves = img[off].astype(np.uint32) | (img[off + 1].astype(np.uint32) << 8)
    return (halves[..., 0] | (halves[..., 1] << 16)).astype(np.uint32)


__all__ = ["stmatrix", "ldmatrix"]
