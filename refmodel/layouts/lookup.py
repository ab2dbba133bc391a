"""Point lookups in the layouts: who holds element (row, col), and what one thread holds.

Every answer is read from the forward maps of this package (``fragment``, ``stmatrix``,
``sparse_meta``, ``descriptor``/``smem``), never from a restated formula, so a lookup is as
right as the model the H200 fixtures check.  The inverse of each map is built once per
form (cached) and checked to be a bijection onto the tile.

Two questions per layout:

* ``*_at(..., row, col)`` -- a dict naming the holder of one element;
* ``*_thread(..., thread)`` -- the list of what one thread (or lane) holds, in register
  order, each entry ``[row, col, register]`` plus the slot inside the register where a
  register holds more than one element.

The keys and entry shapes, which ``wgref layout --at/--thread --json`` prints as they are
(outside tools rely on them):

==============  ======================================================  ==========================================
layout          ``*_at`` keys                                           ``*_thread`` entry
==============  ======================================================  ==========================================
acc f32/s32     thread warp lane register half (half None)              [row, col, register]
acc f16         thread warp lane register half (0 = bits 15:0)          [row, col, register, half]
a-frag tf32     thread warp lane register half byte (both None)         [row, col, register]
a-frag f16/bf16 ... half 0/1, byte None                                 [row, col, register, half]
a-frag 8-bit    ... byte 0..3 (0 = bits 7:0), half None                 [row, col, register, byte]
ld/stmatrix     matrix matrix_row matrix_col address_lane lane          [row, col, register, half] (lane 0..31)
                register half
sparse-meta     thread warp lane nibble bit (bits bit..bit+3)           [row, chunk, bit]
==============  ======================================================  ==========================================

ldmatrix/stmatrix coordinates are those of the tile as ``wgref layout`` draws it: ``.x1``
one 8x8 matrix, ``.x2`` two stacked (16 x 8), ``.x4`` the epilogue's 16 x 16 with matrix 0
top-left, 1 bottom-left, 2 top-right, 3 bottom-right (:func:`matrix_origin`).

Worked example: ``acc_at(64, "f32", 17, 2)`` is ``{"thread": 37, "warp": 1, "lane": 5,
"register": 0, "half": None}``; ``acc_at(64, "f16", 0, 1)`` is thread 0, register 0,
half 1 (bits 31:16).

Bad input (a coordinate or thread outside the tile, a form that does not exist) raises
:class:`refmodel.errors.InputError` with one sentence naming the valid range.
"""

from __future__ import annotations

import functools

import numpy as np

from ..dtypes import element_bytes
from ..errors import InputError
from ..validate import _describe, check_int
from .descriptor import MatrixDescriptor, operand_addresses
from .fragment import THREADS, M, a_fragment_layout, accumulator_layout, check_acc_form
from .smem import SmemLayout, _major
from .sparse_meta import ROWS, check_sp_sel, meta_cols, meta_holders
from .stmatrix import LANES, _num, address_givers, fragment_map
from .swizzle import mode_from_desc_code

ACC_DTYPES = ("f32", "s32", "f16")
A_DTYPES = ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8")
OPERAND_DTYPES = A_DTYPES
MATRIX_OPS = ("ldmatrix", "stmatrix")


# ----------------------------------------------------------------------------- shared helpers

def _choice(name: str, v, allowed: tuple[str, ...]) -> str:
    if not isinstance(v, str) or v not in allowed:
        raise InputError(f"{name} must be one of {', '.join(allowed)}, got {_describe(v)}")
    return v


def _coord(name: str, v, size: int, what: str) -> int:
    return check_int(name, v, 0, size - 1, rule=what)


def _inverse(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """(R, C, 3) int array: (thread, register, slot) of each element of a fragment map
    (rows, cols of shape (threads, registers, slots)); every element held exactly once."""
    inv = np.full(shape + (3,), -1, dtype=np.int64)
    t, j, e = np.indices(rows.shape)
    inv[rows, cols] = np.stack([t, j, e], axis=-1)
    counts = np.zeros(shape, dtype=np.int64)
    np.add.at(counts, (rows.ravel(), cols.ravel()), 1)
    if not (counts == 1).all():  # pragma: no cover - a model bug, not bad input
        raise AssertionError("fragment map is not a bijection onto its tile")
    for a in (inv, rows, cols):
        a.setflags(write=False)  # shared through the caches
    return inv


def _holder(thread: int, register: int) -> dict:
    return {"thread": int(thread), "warp": int(thread) // 32, "lane": int(thread) % 32, "register": int(register)}


def _thread_entries(rows: np.ndarray, cols: np.ndarray, thread: int, slot: bool) -> list[list[int]]:
    out = []
    for j in range(rows.shape[1]):
        for e in range(rows.shape[2]):
            entry = [int(rows[thread, j, e]), int(cols[thread, j, e]), j]
            out.append(entry + [e] if slot else entry)
    return out


# ----------------------------------------------------------------------------- accumulator

@functools.cache
def _acc(n: int, dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, cols = accumulator_layout(n, dtype)
    return rows, cols, _inverse(rows, cols, (M, n))


def _acc_form(n, dtype) -> tuple[int, str]:
    dtype = _choice("accumulator type", dtype, ACC_DTYPES)
    return check_acc_form(n, dtype), dtype


def acc_at(n: int, dtype: str, row: int, col: int) -> dict:
    """Holder of accumulator element D[row, col] of m64nN (``dtype`` f32, s32 or f16):
    ``{"thread", "warp", "lane", "register", "half"}``; ``half`` is None for f32/s32, and
    for f16 the half of the 32-bit register (0 = bits 15:0, 1 = bits 31:16)."""
    n, dtype = _acc_form(n, dtype)
    row = _coord("row", row, M, f"the {M} rows of the m64n{n} accumulator")
    col = _coord("col", col, n, f"the {n} columns of the m64n{n} accumulator")
    t, j, e = (int(x) for x in _acc(n, dtype)[2][row, col])
    return {**_holder(t, j), "half": e if dtype == "f16" else None}


def acc_thread(n: int, dtype: str, thread: int) -> list[list[int]]:
    """The accumulator elements of one warpgroup thread (0..127), register by register:
    ``[row, col, register]`` for f32/s32, ``[row, col, register, half]`` for f16."""
    n, dtype = _acc_form(n, dtype)
    thread = _coord("thread", thread, THREADS, "the 128 threads of a warpgroup")
    rows, cols, _ = _acc(n, dtype)
    return _thread_entries(rows, cols, thread, dtype == "f16")


# ----------------------------------------------------------------------------- A fragment

@functools.cache
def _afrag(dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, cols = a_fragment_layout(dtype)
    return rows, cols, _inverse(rows, cols, (M, int(cols.max()) + 1))


def a_frag_k(dtype: str) -> int:
    """K of the RS-form A tile (32 bytes of K: tf32 8, 16-bit 16, 8-bit 32)."""
    return int(_afrag(_choice("A type", dtype, A_DTYPES))[1].max()) + 1


def a_frag_at(dtype: str, row: int, col: int) -> dict:
    """Holder of A[row, col] of the RS form (A from registers, 64 x K):
    ``{"thread", "warp", "lane", "register", "half", "byte"}``; ``half`` (0 = bits 15:0) is
    set for f16/bf16, ``byte`` (0 = bits 7:0) for the 8-bit types, neither for tf32."""
    dtype = _choice("A type", dtype, A_DTYPES)
    k = a_frag_k(dtype)
    row = _coord("row", row, M, f"the {M} rows of the A tile")
    col = _coord("col", col, k, f"K = {k} columns of a {dtype} A tile")
    t, j, e = (int(x) for x in _afrag(dtype)[2][row, col])
    size = element_bytes(dtype)
    return {**_holder(t, j), "half": e if size == 2 else None, "byte": e if size == 1 else None}


def a_frag_thread(dtype: str, thread: int) -> list[list[int]]:
    """The A elements of one thread (4 registers): ``[row, col, register]`` for tf32,
    ``[row, col, register, half]`` for f16/bf16, ``[row, col, register, byte]`` for 8-bit."""
    dtype = _choice("A type", dtype, A_DTYPES)
    thread = _coord("thread", thread, THREADS, "the 128 threads of a warpgroup")
    rows, cols, _ = _afrag(dtype)
    return _thread_entries(rows, cols, thread, element_bytes(dtype) != 4)


# ----------------------------------------------------------------------------- ldmatrix / stmatrix

def matrix_origin(num: int, j: int) -> tuple[int, int]:
    """(row, col) of matrix ``j``'s top-left element in the drawn tile: x4 as the epilogue's
    16 x 16 (0 top-left, 1 bottom-left, 2 top-right, 3 bottom-right), x2 stacked, x1 alone."""
    num = _num(num)
    j = check_int("matrix", j, 0, num - 1, rule=f"the {num} matrices of .x{num}")
    return 8 * (j % 2), 8 * (j // 2)


def matrix_tile_shape(num: int) -> tuple[int, int]:
    """(rows, cols) of the drawn tile: x1 8 x 8, x2 16 x 8, x4 16 x 16."""
    num = _num(num)
    return (16 if num > 1 else 8), (16 if num == 4 else 8)


@functools.cache
def _matrix(num: int, trans: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, cols) in tile coordinates, each (32, num, 2), and the inverse."""
    mat, row, col = fragment_map(num, trans)
    origin = np.array([matrix_origin(num, j) for j in range(num)])  # (num, 2)
    rows = row + origin[mat, 0]
    cols = col + origin[mat, 1]
    return rows, cols, _inverse(rows, cols, matrix_tile_shape(num))


def _matrix_form(op, num, trans) -> tuple[str, int, bool]:
    op = _choice("op", op, MATRIX_OPS)
    if not isinstance(trans, (bool, np.bool_)):
        raise InputError(f"trans must be True or False, got {_describe(trans)}")
    return op, _num(num), bool(trans)


def matrix_at(op: str, num: int, trans: bool, row: int, col: int) -> dict:
    """Who moves element (row, col) of an ``op .m8n8.x{num}[.trans].b16`` tile:
    ``{"matrix", "matrix_row", "matrix_col", "address_lane", "lane", "register", "half"}``.

    ``address_lane`` gives the address of the element's 16-byte row (row ``matrix_row`` of
    the matrix in memory); ``lane``'s register ``register`` holds the element in ``half``
    (0 = bits 15:0).  (row, col) are tile coordinates (:func:`matrix_origin`)."""
    op, num, trans = _matrix_form(op, num, trans)
    h, w = matrix_tile_shape(num)
    row = _coord("row", row, h, f"the {h} rows of the .x{num} tile")
    col = _coord("col", col, w, f"the {w} columns of the .x{num} tile")
    lane, j, half = (int(x) for x in _matrix(num, trans)[2][row, col])
    r0, c0 = matrix_origin(num, j)
    mrow = row - r0
    givers_m, givers_r = address_givers(num)
    giver = int(np.flatnonzero((givers_m == j) & (givers_r == mrow))[0])
    return {"matrix": j, "matrix_row": mrow, "matrix_col": col - c0, "address_lane": giver,
            "lane": lane, "register": j, "half": half}


def matrix_thread(op: str, num: int, trans: bool, lane: int) -> list[list[int]]:
    """What lane ``lane`` (0..31) holds: ``[row, col, register, half]`` per 16-bit half, in
    tile coordinates (register j is matrix j)."""
    op, num, trans = _matrix_form(op, num, trans)
    lane = _coord("lane", lane, LANES, "ldmatrix/stmatrix are warp instructions: 32 lanes")
    rows, cols, _ = _matrix(num, trans)
    return _thread_entries(rows, cols, lane, True)


def matrix_address_row(op: str, num: int, lane: int) -> list[int] | None:
    """``[row, col]`` (tile coordinates) of the first of the 8 elements (16 bytes) whose row
    address lane ``lane`` gives, or None: only lanes 0 .. 8*num-1 give addresses."""
    op, num, _ = _matrix_form(op, num, False)
    lane = _coord("lane", lane, LANES, "ldmatrix/stmatrix are warp instructions: 32 lanes")
    givers_m, givers_r = address_givers(num)
    j, r = int(givers_m[lane]), int(givers_r[lane])
    if j < 0:
        return None
    r0, c0 = matrix_origin(num, j)
    return [r0 + r, c0]


# ----------------------------------------------------------------------------- sparse metadata

def _sparse_form(dtype, sel) -> tuple[str, int]:
    dtype = _choice("sparse A type", dtype, A_DTYPES)
    return dtype, check_sp_sel(dtype, sel)


def sparse_meta_at(dtype: str, sel: int, row: int, chunk: int) -> dict:
    """Holder of the metadata nibble of (row, chunk) of a sparse 64 x K A (chunk: 4 elements,
    a pair for tf32): ``{"thread", "warp", "lane", "nibble", "bit"}``, the nibble in bits
    ``bit .. bit+3`` (``bit = 4 * nibble``) of that thread's sp-meta register."""
    dtype, sel = _sparse_form(dtype, sel)
    cols = meta_cols(dtype)
    row = _coord("row", row, ROWS, "the 64 rows of the sparse A")
    chunk = _coord("chunk", chunk, cols, f"the {cols} metadata chunks of each {dtype} row")
    thread, pos = meta_holders(dtype, sel)
    t, p = int(thread[row, chunk]), int(pos[row, chunk])
    return {"thread": t, "warp": t // 32, "lane": t % 32, "nibble": p, "bit": 4 * p}


def sparse_meta_thread(dtype: str, sel: int, thread: int) -> list[list[int]]:
    """The nibbles thread ``thread`` supplies, ``[row, chunk, bit]`` in bit order (empty for a
    thread whose sp-meta the hardware ignores under this sp-sel)."""
    dtype, sel = _sparse_form(dtype, sel)
    thread = _coord("thread", thread, THREADS, "the 128 threads of a warpgroup")
    holders, pos = meta_holders(dtype, sel)
    rows, chunks = np.nonzero(holders == thread)
    return sorted(([int(r), int(c), 4 * int(pos[r, c])] for r, c in zip(rows, chunks)), key=lambda e: e[2])


# ----------------------------------------------------------------------------- descriptors

def descriptor_element(value: int, dtype: str, rows: int, k: int | None, major: str, row: int,
                       kidx: int) -> dict:
    """Where the H200 reads element (row, kidx) of a ``rows x k`` operand (A: 64 x K; B viewed
    as N x K) described by the 64-bit descriptor ``value``.

    Returns ``{"address", "last", "logical", "start", "offset", "swizzle"}``: ``address`` is
    the absolute shared byte address of the element's first byte (swizzle and base offset
    included, :func:`refmodel.layouts.descriptor.operand_addresses`), ``last`` that of its
    last byte, ``logical`` the address before the swizzle (start + the canonical layout's
    ``offset``).  ``k`` None: one wgmma's K (32 bytes)."""
    d = MatrixDescriptor.decode(value)
    dtype = _choice("operand type", dtype, OPERAND_DTYPES)
    major = _major(major)
    e = element_bytes(dtype)
    if major == "MN" and e != 2:
        raise InputError(f"an MN-major (transposed) operand must be f16/bf16; {dtype} must be K-major")
    k = 32 // e if k is None else k
    rows = check_int("rows", rows, 8, multiple=8, limit="smem_rows", rule="rows of the operand tile")
    k = check_int("k", k, 1, rule="K of the operand tile")
    row = _coord("row", row, rows, f"the {rows} rows of the operand")
    kidx = _coord("k index", kidx, k, f"K = {k} of the operand")
    mode = mode_from_desc_code(d.swizzle)
    addr = operand_addresses(d, rows, k, e, major=major)
    offset = int(SmemLayout(major, mode, e, d.lbo, d.sbo).offsets(rows, k)[row, kidx * e])
    return {"address": int(addr[row, kidx * e]), "last": int(addr[row, kidx * e + e - 1]),
            "logical": d.start_address + offset, "start": d.start_address, "offset": offset,
            "swizzle": mode.name}


def descriptor_address(value: int, dtype: str, rows: int, k: int | None, major: str, row: int,
                       kidx: int) -> int:
    """The absolute shared byte address the H200 reads for element (row, kidx) (its first
    byte) of the operand described by ``value``; see :func:`descriptor_element`."""
    return descriptor_element(value, dtype, rows, k, major, row, kidx)["address"]


__all__ = ["acc_at", "acc_thread", "a_frag_at", "a_frag_thread", "a_frag_k", "matrix_at", "matrix_thread",
           "matrix_address_row", "matrix_origin", "matrix_tile_shape", "sparse_meta_at", "sparse_meta_thread",
           "descriptor_element", "descriptor_address", "ACC_DTYPES", "A_DTYPES", "OPERAND_DTYPES", "MATRIX_OPS"]
