"""Register fragments of the warp-level ``mma.sync`` forms: which lane and register hold which element.

Notation: lane ``l`` in 0..31, group ``g = l >> 2``, thread-in-group ``t = l & 3``; ``E = 32 / bits``
elements per 32-bit register (1 tf32, 2 f16/bf16, 4 8-bit, 8 4-bit, 32 b1); value ``v`` of a thread
counts elements in register order (register ``v // E``, bits ``[(v % E) * bits, ...)``, low first; f64
holds one value per 64-bit register).  For every form but f16 ``m8n8k4``:

* A (M x K, row): register ``j`` holds row ``g + 8 * (j & 1)`` (m16 shapes; ``g`` for m8), columns
  ``(j >> 1) * 4E + t * E + e`` (m16) or ``j * 4E + t * E + e`` (m8; one register).
* B (K x N, col): register ``j`` holds rows ``j * 4E + t * E + e`` of column ``g``.
* C/D (M x N): value ``v`` is row ``g + 8 * (v >> 1)``, column ``2t + (v & 1)``; f16 accumulators pack
  values 2r and 2r+1 in register r; f64 accumulators one value per register.

f16 ``m8n8k4`` is the quad-pair form: quad pair ``p`` (lanes ``4p..4p+3`` and ``4p+16..4p+19``) computes its own
8 x 8 x 4 product; within it ``r = l & 3`` and ``h = l >> 4`` (0 low lanes, 1 high):

* A .row: value ``i`` (0..3) is row ``r + 4h``, column ``i``; A .col: row ``i + 4h``, column ``r``.
* B .row: row ``r``, column ``i + 4h``; B .col: row ``i``, column ``r + 4h``.
* C/D f16 (8 values): row ``r + 4h``, column ``i``.
* C/D f32 (8 values): row ``(l & 1) + (i & 2) + 4h``, column ``(i & 4) + (l & 2) + (i & 1)``.

The maps come from the PTX ISA's fragment figures (CuTe's ``mma_traits_sm70/80/89/90`` agree); the
hardware fixtures hold them: the kernel only loads these registers, runs the instruction and stores D.
The matrices of one warp's instruction have shape (M, K), (K, 8), (M, 8) with a leading axis of 4 for
the quad-pair form (one product per quad pair).
"""

from __future__ import annotations

import functools

import numpy as np

from ..errors import InputError
from ..validate import as_array
from ..mma_sync_forms import (OPERANDS, TYPE_BITS, TYPED, MmaSyncForm, _check_operand, _form,  # noqa: F401
                              element_codes, from_codes, matrix_shape, operand_types, parse_mma_sync,
                              typed_dtype)

LANES = 32

@functools.lru_cache(maxsize=None)
def _layout(instr: str, operand: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    f = parse_mma_sync(instr)
    t_name = operand_types(f)[operand]
    bits = TYPE_BITS[t_name]
    lane = np.arange(LANES)[:, None]
    g, t = lane >> 2, lane & 3
    if f.quad_pair:
        vals = 4 if operand in "ab" else 8
        i = np.arange(vals)[None, :]
        r, h = lane & 3, lane >> 4
        qp = (lane >> 2) & 3
        if operand == "a":
            rows, cols = (r + 4 * h, i + 0 * r) if f.alayout == "row" else (i + 4 * h, r + 0 * i)
        elif operand == "b":
            rows, cols = (r + 0 * i, i + 4 * h) if f.blayout == "row" else (i + 0 * r, r + 4 * h)
        elif t_name == "f16":
            rows, cols = r + 4 * h + 0 * i, i + 0 * r
        else:
            rows, cols = (lane & 1) + (i & 2) + 4 * h, (i & 4) + (lane & 2) + (i & 1)
        shp = np.broadcast_shapes(qp.shape, rows.shape, cols.shape, i.shape[1:] and (LANES, vals))
        return tuple(np.broadcast_to(x, shp).astype(np.int64).copy() for x in (qp, rows, cols))
    E = 1 if bits >= 32 else 32 // bits
    if operand in "cd":
        v = np.arange(4 if f.m == 16 else 2)[None, :]
        rows, cols = g + 8 * (v >> 1), 2 * t + (v & 1)
    elif operand == "a":
        nregs = f.m * f.k // LANES // E
        v = np.arange(nregs * E)[None, :]
        j, e = v // E, v % E
        if f.m == 16:
            rows, cols = g + 8 * (j & 1), (j >> 1) * 4 * E + t * E + e
        else:
            rows, cols = g + 0 * v, j * 4 * E + t * E + e
    else:
        nregs = f.k * f.n // LANES // E
        v = np.arange(nregs * E)[None, :]
        j, e = v // E, v % E
        rows, cols = j * 4 * E + t * E + e, g + 0 * v
    shp = np.broadcast_shapes(rows.shape, cols.shape)
    return (np.zeros(shp, np.int64), np.broadcast_to(rows, shp).astype(np.int64),
            np.broadcast_to(cols, shp).astype(np.int64))


def fragment_layout(form, operand: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(problem, row, col), each (32, values): the element of ``operand`` ('a', 'b', 'c', 'd') that value
    ``v`` of lane ``l`` holds.  ``problem`` is the quad pair for f16 m8n8k4 and 0 otherwise."""
    f = _form(form)
    p, r, c = _layout(f.instr, _check_operand(operand))
    return p.copy(), r.copy(), c.copy()


def pack(form, operand: str, x) -> np.ndarray:
    """(..., *matrix_shape) typed operand -> (..., 32, regs) register words (uint32; uint64 for f64)."""
    f = _form(form)
    t = operand_types(f)[_check_operand(operand)]
    shape = matrix_shape(f, operand)
    x = as_array(operand.upper(), x)
    if x.ndim < len(shape) or tuple(x.shape[-len(shape):]) != shape:
        raise InputError(f"{operand.upper()} of {f.name} must have shape (..., {', '.join(map(str, shape))}), "
                         f"got {tuple(x.shape)}")
    codes = element_codes(x, t)
    p, r, c = fragment_layout(f, operand)
    sel = codes[..., p, r, c] if f.quad_pair else codes[..., r, c]       # (..., 32, values)
    bits = TYPE_BITS[t]
    E = 1 if bits >= 32 else 32 // bits
    sel = sel.reshape(sel.shape[:-1] + (-1, E))
    shifts = (np.arange(E, dtype=np.uint64) * np.uint64(bits))
    words = np.bitwise_or.reduce(sel << shifts, axis=-1)
    return words.astype(np.uint64 if bits == 64 else np.uint32)


def unpack(form, operand: str, regs) -> np.ndarray:
    """Inverse of :func:`pack`: (..., 32, regs) register words -> (..., *matrix_shape) typed operand."""
    f = _form(form)
    t = operand_types(f)[_check_operand(operand)]
    bits = TYPE_BITS[t]
    E = 1 if bits >= 32 else 32 // bits
    p, r, c = fragment_layout(f, operand)
    regs = as_array(f"{operand.upper()} registers", regs)
    nregs = p.shape[1] // E
    if regs.ndim < 2 or regs.shape[-2:] != (LANES, nregs):
        raise InputError(f"{operand.upper()} registers of {f.name} must have shape (..., 32, {nregs}), "
                         f"got {tuple(regs.shape)}")
    w = regs.astype(np.uint64)[..., None]
    shifts = np.arange(E, dtype=np.uint64) * np.uint64(bits)
    mask = np.uint64((1 << bits) - 1) if bits < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    vals = ((w >> shifts) & mask).reshape(regs.shape[:-2] + (LANES, nregs * E))
    out = np.zeros(regs.shape[:-2] + matrix_shape(f, operand), np.uint64)
    if f.quad_pair:
        out[..., p, r, c] = vals
    else:
        out[..., r, c] = vals
    return from_codes(out, t)


# ----------------------------------------------------------------------------- lookups and text


def _slots(form: MmaSyncForm, operand: str) -> int:
    bits = TYPE_BITS[operand_types(form)[operand]]
    return 1 if bits >= 32 else 32 // bits


def holder(form, operand: str, row: int, col: int, problem: int = 0) -> dict:
    """Who holds element (row, col) of ``operand`` (of quad pair ``problem`` in the m8n8k4 form):
    ``{"lane", "register", "slot", "bits"}`` (slot: the element's place in its register, bits its bit range)."""
    f = _form(form)
    shape = matrix_shape(f, operand)
    rows, cols = shape[-2:]
    if not (0 <= int(row) < rows and 0 <= int(col) < cols):
        raise InputError(f"{operand.upper()} of {f.name} is {rows} x {cols}; ({row}, {col}) is outside it")
    if not 0 <= int(problem) < (4 if f.quad_pair else 1):
        raise InputError(f"problem must be 0..3 for the quad-pair form and 0 otherwise, got {problem}")
    p, r, c = fragment_layout(f, operand)
    lane, v = (int(x[0]) for x in np.nonzero((p == problem) & (r == row) & (c == col)))
    E = _slots(f, operand)
    w = TYPE_BITS[operand_types(f)[operand]]
    return {"lane": lane, "register": v // E, "slot": v % E,
            "bits": [(v % E) * w + w - 1, (v % E) * w] if E > 1 else None}


def held(form, operand: str, lane: int) -> list[dict]:
    """What ``lane`` holds of ``operand``, value by value: ``{"problem", "row", "col", "register", "slot"}``."""
    f = _form(form)
    if not 0 <= int(lane) < LANES:
        raise InputError(f"lane must be 0..31, got {lane}")
    p, r, c = fragment_layout(f, operand)
    E = _slots(f, operand)
    return [{"problem": int(p[lane, v]), "row": int(r[lane, v]), "col": int(c[lane, v]), "register": v // E,
             "slot": v % E} for v in range(p.shape[1])]


def render_fragment(form, operand: str, problem: int = 0) -> str:
    """Text grid of ``operand``: each element's holder as ``L<lane>.r<register>[.<slot>]``."""
    f = _form(form)
    shape = matrix_shape(f, operand)
    rows, cols = shape[-2:]
    p, r, c = fragment_layout(f, operand)
    E = _slots(f, operand)
    cell = np.empty((rows, cols), dtype=object)
    for lane in range(LANES):
        for v in range(p.shape[1]):
            if p[lane, v] == problem:
                cell[r[lane, v], c[lane, v]] = f"L{lane}.r{v // E}" + (f".{v % E}" if E > 1 else "")
    width = max(len(str(x)) for x in cell.ravel())
    what = {"a": "A (M x K)", "b": "B (K x N)", "c": "C (M x N)", "d": "D (M x N)"}[operand]
    title = f"{f.instr}: {what}" + (f", quad pair {problem} (lanes {4 * problem}..{4 * problem + 3} and "
                                     f"{4 * problem + 16}..{4 * problem + 19})" if f.quad_pair else "")
    lines = [title, "      " + " ".join(f"{j:>{width}}" for j in range(cols))]
    for i in range(rows):
        lines.append(f"{i:>5} " + " ".join(f"{cell[i, j]:>{width}}" for j in range(cols)))
    return "\n".join(lines) + "\n"
