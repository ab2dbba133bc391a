"""The CuTe bridge: every layout of :mod:`refmodel.layouts` written as a CuTe ``shape:stride``
(with its ``Swizzle<B,M,S>``), and evaluated here with CuTe's own coordinate rules.

A CuTe layout maps a coordinate to an offset: ``L(c) = sum(c_i * d_i)`` over the flattened
modes, where an integer coordinate given for a tuple-shaped mode is first split
*colexicographically* (the first sub-mode varies fastest; the last takes the rest).  Shapes and
strides print as nested tuples, ``((8,8),(8,8)):((64,512),(1,8))``.

Two kinds of layout are built here (sources: CUTLASS ``cute/atom/mma_traits_sm90_gmma.hpp``,
``cute/atom/copy_traits_sm75.hpp`` / ``copy_traits_sm90.hpp``; the comments of ``make_gmma_desc``):

* **Shared-memory layouts** (smem, desc, swizzle): ``(row, k) -> element offset``; the swizzle
  acts on the *byte address*, as in CuTe's ``Swizzle<B,4,3> o smem_ptr[16b] o L``.  So the byte
  an element sits at is ``swizzle(offset_bytes + e * L(row, k))`` for ``e``-byte elements
  (:meth:`CuteLayout.__call__`).  The same map in pure element units is
  ``Swizzle<B, 4 - log2(e), 3> o L`` (:meth:`CuteLayout.element_form`), which is what a
  ``ComposedLayout`` evaluates without a pointer.  K-major, swizzled (``T = 16 / e`` elements
  per 16-byte unit, ``W = 16 * 2**B`` bytes per swizzled row)::

      Swizzle<B,4,3> o ((8,m),(T,2k)):((2^B*T, SBO/e),(1,T))          m = rows/8, 2k = K/T

  e.g. f16, 64 x 64, 128B: ``Swizzle<3,4,3> o ((8,8),(8,8)):((64,512),(1,8))``.
* **Thread-value layouts** (acc, a-frag, ldmatrix/stmatrix): ``(thread, value) -> index`` of
  the element in the tile.  wgmma fragments index the ``64 x C`` tile column-major
  (``row + 64 * col``), as CUTLASS's ``CLayout_64xN`` / ``ALayout_64x*``; value ``v`` is slot
  ``v % per`` of register ``v // per`` (``per`` elements a 32-bit register).  The accumulator::

      ((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))

  ldmatrix/stmatrix index ``num`` 8x8 b16 matrices, each row-major, one after another
  (``64 * matrix + 8 * row + col``): CuTe's ``SM75_*_LDSM_*`` / ``SM90_*_STSM_*`` traits in
  16-bit units (CuTe writes them in bits).

The strides are not typed in: each builder reads them off the refmodel map it mirrors (the
step of each mode), and :mod:`tests.test_cute_bridge` checks every element against the model
and against pycute.  Worked example: f16 K-major 128B, element (row 9, k 10) is at element
offset ``L = 1*64 + 1*512 + 2*1 + 1*8 = 586``, byte 1172 = 0b100_1001_0100; the swizzle XORs
bits 4..6 (0b001) with bits 7..9 (0b001): byte 1156.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dtypes import element_bytes
from ..errors import InputError
from ..validate import _describe, check_flag
from .descriptor import MatrixDescriptor
from .fragment import a_fragment_layout, accumulator_layout, check_acc_form
from .smem import SmemLayout, _major, dense_strides
from .stmatrix import LANES, fragment_map
from .swizzle import ATOM_BYTES, Swizzle, mode_from_desc_code, swizzle_mode

IntTuple = Any  # int or a (nested) tuple of ints

#: dtype name -> the CUTLASS element type a ``Layout_*_Atom<T>`` is instantiated with
CUTLASS_TYPES = {"f16": "half_t", "bf16": "bfloat16_t", "tf32": "tfloat32_t", "e4m3": "float_e4m3_t",
                 "e5m2": "float_e5m2_t", "s8": "int8_t", "u8": "uint8_t", "f32": "float", "s32": "int32_t"}
_ATOM_NAME = {0: "INTER", 1: "SW32", 2: "SW64", 3: "SW128"}


# ----------------------------------------------------------------------------- int tuples

def _is_tuple(x) -> bool:
    return isinstance(x, tuple)


def size(shape: IntTuple) -> int:
    """Product of all the modes of a shape."""
    return int(np.prod([size(s) for s in shape])) if _is_tuple(shape) else int(shape)


def _congruent(shape: IntTuple, stride: IntTuple) -> bool:
    if _is_tuple(shape) != _is_tuple(stride):
        return False
    if _is_tuple(shape):
        return len(shape) == len(stride) and all(_congruent(a, b) for a, b in zip(shape, stride))
    return True


def _check_ints(name: str, t: IntTuple, positive: bool) -> None:
    if _is_tuple(t):
        if not t:
            raise InputError(f"a CuTe {name} mode must not be empty")
        for x in t:
            _check_ints(name, x, positive)
        return
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)) or (positive and t < 1):
        raise InputError(f"a CuTe {name} holds {'positive ' if positive else ''}ints, got {_describe(t)}")


def crd2idx(coord, shape: IntTuple, stride: IntTuple):
    """CuTe's ``crd2idx``: the offset of ``coord`` (ints or numpy int arrays, elementwise).

    A tuple coordinate goes mode by mode; an integer for a tuple-shaped mode is split
    colexicographically first (``i % s0``, ``(i // s0) % s1``, ..., the last mode takes the rest).
    """
    if _is_tuple(coord):
        if not _is_tuple(shape) or len(coord) != len(shape):
            raise InputError(f"coordinate {coord} does not match the layout shape {fmt(shape)}")
        return sum(crd2idx(c, s, d) for c, s, d in zip(coord, shape, stride))
    if _is_tuple(shape):
        out, rest = 0, coord
        for i, (s, d) in enumerate(zip(shape, stride)):
            if i == len(shape) - 1:
                out = out + crd2idx(rest, s, d)
            else:
                n = size(s)
                out = out + crd2idx(rest % n, s, d)
                rest = rest // n
        return out
    return coord * stride


def fmt(t: IntTuple) -> str:
    """CuTe's printing of an IntTuple: ``((8,8),(8,8))``."""
    return "(" + ",".join(fmt(x) for x in t) + ")" if _is_tuple(t) else str(int(t))


# ----------------------------------------------------------------------------- the layout value

@dataclass(frozen=True)
class CuteLayout:
    """A CuTe layout ``shape:stride``, optionally composed with ``Swizzle<B,M,S>``.

    ``elem_bytes`` set: a shared-memory layout whose ``shape:stride`` gives element offsets and
    whose swizzle acts on byte addresses (CuTe's ``Swizzle o smem_ptr[8e b] o L``); calling it
    gives the byte address ``anchor + swizzle(offset + e * L(c) - anchor)`` (``offset``: the start
    byte address; ``anchor``: where the swizzle pattern begins, 128 x the descriptor's base
    offset).  ``elem_bytes`` None: a plain ``swizzle(offset + L(c))``.
    ``template`` is the CUTLASS-comment form with symbols, ``atom`` the CUTLASS name it mirrors.
    """

    shape: IntTuple
    stride: IntTuple
    swizzle: tuple[int, int, int] | None = None
    elem_bytes: int | None = None
    offset: int = 0
    anchor: int = 0
    template: str | None = None
    atom: str | None = None
    domain: str = ""
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        _check_ints("shape", self.shape, True)
        _check_ints("stride", self.stride, False)
        if not _congruent(self.shape, self.stride):
            raise InputError(f"CuTe shape {fmt(self.shape)} and stride {fmt(self.stride)} must have the same nesting")
        if self.swizzle is not None:
            Swizzle(*self.swizzle)  # validates B, M, S
            object.__setattr__(self, "swizzle", tuple(int(x) for x in self.swizzle))
        if self.elem_bytes is not None and self.elem_bytes not in (1, 2, 4):
            raise InputError(f"element size must be 1, 2 or 4 bytes, got {_describe(self.elem_bytes)}")

    @property
    def size(self) -> int:
        return size(self.shape)

    def index(self, *coord):
        """``shape:stride`` alone at ``coord`` (no offset, no swizzle)."""
        c = coord[0] if len(coord) == 1 else tuple(coord)
        return crd2idx(c, self.shape, self.stride)

    def __call__(self, *coord):
        """The layout at ``coord``: byte address (shared-memory layouts) or index."""
        lin = self.index(*coord)
        sw = Swizzle(*self.swizzle) if self.swizzle and self.swizzle[0] else None
        if self.elem_bytes is None:
            x = self.offset + lin
            return sw(x) if sw else x
        x = self.offset + lin * self.elem_bytes - self.anchor
        return self.anchor + (sw(x) if sw else x)

    def element_form(self) -> "CuteLayout":
        """The same map as a pure ``Swizzle<B, M - log2(e), S> o offset o shape:stride`` in
        element units (for a shared-memory layout whose swizzle pattern starts at 0)."""
        e = self.elem_bytes
        if e is None:
            return self
        if self.anchor or self.offset % e:
            raise InputError("only a layout whose swizzle pattern starts at address 0 has an element form")
        sw = None
        if self.swizzle:
            b, m, s = self.swizzle
            sw = (b, m - (e.bit_length() - 1), s)
        return CuteLayout(self.shape, self.stride, sw, None, self.offset // e, domain=self.domain)

    def layout_str(self) -> str:
        return f"{fmt(self.shape)}:{fmt(self.stride)}"

    def __str__(self) -> str:
        parts = []
        if self.swizzle:
            parts.append("Swizzle<{},{},{}>".format(*self.swizzle))
        if self.offset - self.anchor:
            off = self.offset - self.anchor
            parts.append(f"smem_ptr[{8 * self.elem_bytes}b]({off:#x})" if self.elem_bytes else str(off))
        parts.append(self.layout_str())
        text = " o ".join(parts)
        return f"{self.anchor:#x} + {text}" if self.anchor else text

    def describe(self) -> str:
        """One line for a diagram's notes: the layout, its domain, the CUTLASS name and form."""
        out = f"CuTe: {self}"
        if self.domain:
            out += f"  [{self.domain}]"
        if self.atom:
            out += f"; CUTLASS {self.atom}"
        if self.template:
            out += f"; CUTLASS form {self.template}"
        return out + "".join(f"; {n}" for n in self.notes)


# ----------------------------------------------------------------------------- helpers

def _dtype_bytes(dtype) -> tuple[int, str]:
    """(element bytes, CUTLASS type name) of a dtype name or an element size 1/2/4."""
    if isinstance(dtype, str):
        if dtype not in CUTLASS_TYPES or dtype in ("f32", "s32"):
            raise InputError(f"operand dtype must be one of f16, bf16, tf32, e4m3, e5m2, s8, u8, got {_describe(dtype)}")
        return element_bytes(dtype), CUTLASS_TYPES[dtype]
    if isinstance(dtype, (bool, np.bool_)) or not isinstance(dtype, (int, np.integer)) or int(dtype) not in (1, 2, 4):
        raise InputError(f"element size must be 1, 2 or 4 bytes (or a dtype name), got {_describe(dtype)}")
    return int(dtype), f"uint{8 * int(dtype)}_t"


def _steps(f, basis: list) -> list[int]:
    """Stride of each mode: how far ``f`` moves for one step of that mode from the origin."""
    zero = f(*[0] * len(basis[0]))
    return [int(f(*b)) - int(zero) for b in basis]


def _unit(n: int, i: int, v: int = 1) -> tuple[int, ...]:
    return tuple(v if j == i else 0 for j in range(n))


# ----------------------------------------------------------------------------- shared memory

def smem_layout(major: str = "K", swizzle="128B", dtype="f16", rows: int = 64, k: int | None = None,
                lbo: int | None = None, sbo: int | None = None) -> CuteLayout:
    """The canonical wgmma shared-memory layout of an ``rows x k`` operand as CuTe writes it
    (``make_gmma_desc``): ``(row, k) -> element``, swizzle on the byte address.

    ``dtype`` a dtype name or an element size (1, 2, 4 bytes); ``lbo``/``sbo`` in bytes (default:
    the dense canonical packing); ``k`` defaults as the smem diagram (one swizzled row, or 32
    bytes, for K-major; 16 for MN-major).  Evaluating it gives what
    :class:`~refmodel.layouts.smem.SmemLayout` ``.offsets`` then the swizzle give.
    """
    major, m = _major(major), swizzle_mode(swizzle)
    e, tname = _dtype_bytes(dtype)
    if k is None:
        k = (m.width // e if m.bits else 32 // e) if major == "K" else 16
    dl, ds = dense_strides(major, m, rows, k * e if major == "K" and isinstance(k, (int, np.integer)) else None)
    lay = SmemLayout(major, m, e, dl if lbo is None else lbo, ds if sbo is None else sbo)
    lay.offsets(rows, k)  # the model's rules on rows and K, with its messages
    rows, k = int(rows), int(k)
    t, s = ATOM_BYTES // e, 1 << m.bits

    off = lay.offsets(rows, k)[:, ::e] // e   # element offsets, from the model
    probe = lambda r, c: int(off[r, c])       # noqa: E731
    notes: list[str] = []
    if major == "K":
        shape = ((8, rows // 8), (t, k // t))
        basis = [(1, 0), (8, 0), (0, 1), (0, t)]
        tmpl = (f"Swizzle<{m.bits},4,3> o ((8,m),(T,2k)):(({s}T,SBO),(1,{'LBO' if not m.bits else 'T'}))")
        fill = f"T = {t}, m = {rows // 8}, 2k = {k // t}"
    else:
        per = t * s
        if rows % per == 0:
            r_shape = (t, s, rows // per)
        elif rows < per:
            r_shape = (t, rows // t, 1)
        else:
            r_shape = (t, s, -(-rows // per))
            notes.append(f"{rows} rows are not a whole number of {per}-row MN blocks: the last block is partial")
        shape = (r_shape, (8, k // 8))
        basis = [(1, 0), (t, 0), (per if m.bits else t, 0), (0, 1), (0, 8)]
        tmpl = ("Swizzle<0,4,3> o ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))" if not m.bits else
                f"Swizzle<{m.bits},4,3> o ((T,{s},m),(8,k)):((1,T,LBO),({s}T,SBO))")
        fill = f"T = {t}, m = {r_shape[2]}, k = {k // 8}"
        if not m.bits:   # no-swizzle MN-major: (T,1,m), the middle mode is the CUTLASS comment's 1
            shape = ((t, 1, rows // t), (8, k // 8))
            basis = [(1, 0), None, (t, 0), (0, 1), (0, 8)]
            fill = f"T = {t}, m = {rows // t}, k = {k // 8}"
    strides = []
    for i, b in enumerate(basis):
        mode, sub = _flat_index(shape, i)
        if shape[mode][sub] == 1 or b is None or b[0] >= rows or b[1] >= k:   # a mode the tile cannot step
            strides.append(_formula_stride(major, m, e, lay, mode, sub))
        else:
            strides.append(probe(*b) - probe(0, 0))
    stride = _nest(shape, strides)
    atom = f"GMMA::Layout_{major}_{_ATOM_NAME[m.bits]}_Atom<{tname}>"
    dom = f"(row, k) of {rows} x {k} -> {e}-byte element offset; Swizzle<{m.bits},4,3> on byte addresses; {fill}"
    return CuteLayout(shape, stride, (m.bits, 4, 3), e, 0, 0, tmpl, atom, dom, tuple(notes))


def _flat_index(shape: IntTuple, i: int) -> tuple[int, int]:
    """(mode, sub-mode) of the i-th leaf of a rank-2 shape of tuples."""
    n0 = len(shape[0])
    return (0, i) if i < n0 else (1, i - n0)


def _nest(shape: IntTuple, leaves: list[int]) -> IntTuple:
    n0 = len(shape[0])
    return (tuple(leaves[:n0]), tuple(leaves[n0:]))


def _formula_stride(major: str, m, e: int, lay: SmemLayout, mode: int, sub: int) -> int:
    """The stride of a mode the tile is too small to step (size-1 modes): the canonical
    layout's meaning of LBO/SBO, so the printed layout still names the descriptor's value."""
    t, s = ATOM_BYTES // e, 1 << m.bits
    if major == "K":
        return {(0, 0): s * t, (0, 1): lay.sbo // e, (1, 0): 1,
                (1, 1): lay.lbo // e if not m.bits else t}[(mode, sub)]
    if not m.bits:
        return {(0, 0): 1, (0, 1): t, (0, 2): lay.sbo // e, (1, 0): t, (1, 1): lay.lbo // e}[(mode, sub)]
    return {(0, 0): 1, (0, 1): t, (0, 2): lay.lbo // e, (1, 0): s * t, (1, 1): lay.sbo // e}[(mode, sub)]


def atom_layout(major: str = "K", swizzle="128B", dtype="f16") -> CuteLayout:
    """CUTLASS's ``GMMA::Layout_{K,MN}_{INTER,SW32,SW64,SW128}_Atom<T>``: one swizzle period,
    8 rows x W bytes (K-major) or W bytes x 8 K columns (MN-major), in element units.

    CUTLASS defines them in bits, ``Layout<Shape<_8,_1024>,Stride<_1024,_1>>`` for K-major 128B,
    and ``upcast``s to the element type; this is that upcast, read off the dense canonical layout
    of one atom-sized tile (the tests check the two agree on every element).
    """
    major, m = _major(major), swizzle_mode(swizzle)
    e, tname = _dtype_bytes(dtype)
    w = m.width // e   # elements of one swizzle row
    tile = smem_layout(major, m, e, 8 if major == "K" else max(8, w), w if major == "K" else 8)
    r, c = (8, w) if major == "K" else (w, 8)
    probe = lambda i, j: tile.index((i, j))   # noqa: E731
    stride = ((probe(1, 0) - probe(0, 0)), (probe(0, 1) - probe(0, 0)))
    return CuteLayout((r, c), stride, (m.bits, 4, 3), e, 0, 0, None,
                      f"GMMA::Layout_{major}_{_ATOM_NAME[m.bits]}_Atom<{tname}>",
                      f"(row, k) of one {r} x {c} atom -> {e}-byte element offset; Swizzle<{m.bits},4,3> on byte addresses")


def desc_layout(value, dtype: str = "f16", rows: int = 64, k: int | None = None, major: str = "K") -> CuteLayout:
    """What a wgmma descriptor makes the hardware read, as a CuTe layout at the descriptor's start
    address: evaluating it gives :func:`~refmodel.layouts.descriptor.operand_addresses` (absolute
    byte addresses, the base offset anchoring the swizzle pattern at ``128 * base_offset``)."""
    if isinstance(value, str):
        try:
            value = int(value.strip().replace("_", ""), 0)
        except ValueError:
            raise InputError(f"cannot parse {_describe(value)} as a 64-bit descriptor") from None
    d = MatrixDescriptor.decode(value)
    e, _ = _dtype_bytes(dtype)
    k = 32 // e if k is None else k
    m = mode_from_desc_code(d.swizzle)
    base = smem_layout(major, m, dtype, rows, k, d.lbo, d.sbo)
    anchor = 128 * d.base_offset if m.bits else 0
    notes = list(base.notes)
    if anchor:
        notes.append(f"base offset {d.base_offset}: the swizzle pattern starts at {anchor:#x} "
                     f"(phase = line - base offset), written {anchor:#x} + Swizzle o (start - {anchor:#x})")
    return CuteLayout(base.shape, base.stride, base.swizzle, e, d.start_address, anchor, base.template, base.atom,
                      f"descriptor {int(value):#018x}: " + base.domain.replace("element offset", "element")
                      + f"; start {d.start_address:#x}", tuple(notes))


def swizzle_layout(mode="128B", dtype="f16", lines: int = 8) -> CuteLayout:
    """A swizzle mode over ``lines`` 128-byte lines: ``(line, element) -> byte address``,
    ``Swizzle<B,4,3> o (lines, 128/e):(128/e, 1)``.  The swizzle alone is CuTe's functor; in
    element units it is ``Swizzle<B, 4 - log2(e), 3>``."""
    m = swizzle_mode(mode)
    e, _ = _dtype_bytes(dtype)
    if isinstance(lines, (bool, np.bool_)) or not isinstance(lines, (int, np.integer)) or lines < 1:
        raise InputError(f"lines must be a positive int, got {_describe(lines)}")
    per_line = 128 // e
    sw = Swizzle(m.bits, 4, 3)
    # strides from the byte map the swizzle diagram draws: element i of line r starts at byte r*128 + i*e
    stride = ((128 // e), 1)
    el = sw.m - (e.bit_length() - 1)
    return CuteLayout((int(lines), per_line), stride, (m.bits, 4, 3), e, 0, 0,
                      "Swizzle<B,4,3>: bits [4, 4+B) ^= bits [7, 7+B) of the byte address",
                      f"Swizzle<{m.bits},4,3> (in {e}-byte element units Swizzle<{m.bits},{el},3>)",
                      f"(line, element) of {lines} x {per_line} -> byte address")


def epilogue_layout(n: int = 64, dtype: str = "bf16", swizzle="128B") -> CuteLayout:
    """The 64 x N tile the epilogue's stmatrix slices write (and a TMA store reads):
    ``(row, col) -> element``, swizzle on byte addresses, mirroring
    :func:`~refmodel.layouts.smem.rowmajor_offsets` — column blocks of W bytes (the whole row
    without a swizzle), each 64 rows x W contiguous.  In CUTLASS terms the swizzled forms are
    ``tile_to_shape(GMMA::Layout_K_SW*_Atom<T>, (64, N))`` with the output's columns as "K"."""
    from .smem import rowmajor_offsets

    if not isinstance(dtype, str) or dtype not in ("f16", "bf16"):
        raise InputError(f"stmatrix stores 16-bit elements: the epilogue dtype must be f16 or bf16, got {_describe(dtype)}")
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 16 or n > 256 or n % 16:
        raise InputError(f"the epilogue stores 16-column slices: N must be a multiple of 16 in 16..256, got {_describe(n)}")
    m, e, n = swizzle_mode(swizzle), element_bytes(dtype), int(n)
    # pre-swizzle element offsets: the model's byte map with the swizzle undone (it is an involution)
    pre = np.asarray(m.swizzle(rowmajor_offsets(64, n, e, m))) // e
    w = (m.width if m.bits else n * e) // e
    blocks = n // w
    probe = lambda r, c: int(pre[r, c])   # noqa: E731
    col_stride = probe(0, w) - probe(0, 0) if blocks > 1 else 64 * w
    shape = (64, (w, blocks)) if blocks > 1 or m.bits else (64, n)
    stride = ((probe(1, 0) - probe(0, 0)), (probe(0, 1) - probe(0, 0), col_stride)) if shape != (64, n) else \
        (probe(1, 0) - probe(0, 0), probe(0, 1) - probe(0, 0))
    atom = (f"tile_to_shape(GMMA::Layout_K_{_ATOM_NAME[m.bits]}_Atom<{CUTLASS_TYPES[dtype]}>, (64,{n}))"
            if m.bits else None)
    return CuteLayout(shape, stride, (m.bits, 4, 3), e, 0, 0, None, atom,
                      f"(row, col) of the 64 x {n} {dtype} output tile -> element offset; "
                      f"Swizzle<{m.bits},4,3> on byte addresses")


# ----------------------------------------------------------------------------- thread-value layouts

def _tv_layout(rows: np.ndarray, cols: np.ndarray, v_shape: tuple[int, ...], threads: tuple[int, ...], index) -> tuple[IntTuple, IntTuple]:
    """(shape, stride) of a TV layout read off a refmodel map: ``rows/cols[t, reg, slot]``,
    value ``v = reg * per + slot``; ``index(row, col)`` is the codomain's linearisation.  Each
    stride is the step of its mode from the origin; the tests check every element."""
    r = rows.reshape(rows.shape[0], -1)
    c = cols.reshape(cols.shape[0], -1)

    def at(t: int, v: int) -> int:
        return int(index(int(r[t, v]), int(c[t, v])))

    t_steps, acc = [], 1
    for n in threads:
        t_steps.append(at(acc, 0) - at(0, 0))
        acc *= n
    v_steps, acc = [], 1
    for n in v_shape:   # a size-1 mode the map cannot step: the next tile (CUTLASS's stride for it)
        v_steps.append(at(0, acc) - at(0, 0) if acc < r.shape[1] else r.size)
        acc *= n
    return (tuple(threads), tuple(v_shape)), (tuple(t_steps), tuple(v_steps))


def acc_layout(n: int = 64, dtype: str = "f32") -> CuteLayout:
    """The wgmma accumulator fragment as CuTe's ``CLayout_64xN``: ``(thread, value) -> row + 64*col``;
    value ``v`` is element ``v`` (f32/s32: register ``v``; f16: register ``v // 2``, half ``v % 2``)."""
    rows, cols = accumulator_layout(n, dtype)
    n = int(n)
    notes = []
    try:
        check_acc_form(n, dtype)
    except InputError as err:
        notes.append(f"no such wgmma form ({err})")
    shape, stride = _tv_layout(rows, cols, (2, 2, n // 8), (4, 8, 4), lambda r, c: r + 64 * c)
    return CuteLayout(shape, stride, template="((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))",
                      atom=f"GMMA::CLayout_64xN<{n}>",
                      domain=f"(thread, value) -> row + 64*col of the 64 x {n} D tile; value v = "
                             + ("register v" if rows.shape[-1] == 1 else "register v/2, half v%2"),
                      notes=tuple(notes))


def a_frag_layout(dtype: str = "f16") -> CuteLayout:
    """The RS-form A fragment as CuTe's ``ALayout_64x8`` (tf32), ``ALayout_64x16`` (16-bit) or
    ``ALayout_64x32`` (8-bit): ``(thread, value) -> row + 64*k``; value ``v`` is slot ``v % per``
    of register ``v // per``."""
    rows, cols = a_fragment_layout(dtype)
    per = rows.shape[-1]
    kk = int(cols.max()) + 1
    v_shape = (2, 2) if per == 1 else (per, 2, 2)
    shape, stride = _tv_layout(rows, cols, v_shape, (4, 8, 4), lambda r, c: r + 64 * c)
    name = {1: "ALayout_64x8", 2: "ALayout_64x16", 4: "ALayout_64x32"}[per]
    slot = {1: "register v", 2: "register v/2, half v%2", 4: "register v/4, byte v%4"}[per]
    return CuteLayout(shape, stride, atom=f"GMMA::{name}",
                      domain=f"(thread, value) -> row + 64*k of the 64 x {kk} A tile; value v = {slot}")


def matrix_layout(op: str = "stmatrix", num: int = 4, trans: bool = False) -> CuteLayout:
    """ldmatrix/stmatrix ``.m8n8.x{num}[.trans].b16`` data holders as a TV layout:
    ``(lane, value) -> 64*matrix + 8*row + col``; value ``v`` is half ``v % 2`` of register ``v // 2``.
    CuTe's copy traits write the same map in bits (x16)."""
    if not isinstance(op, str) or op not in ("ldmatrix", "stmatrix"):
        raise InputError(f"op must be ldmatrix or stmatrix, got {_describe(op)}")
    trans = check_flag("trans", trans)
    mat, row, col = fragment_map(num, trans)
    num = int(num)
    idx = 64 * mat + 8 * row + col          # (32, num, 2)
    flat = idx.reshape(LANES, -1)           # value v = 2 * reg + half

    def at(t: int, v: int) -> int:
        return int(flat[t, v])

    threads, v_shape = (4, 8), (2, num)
    t_steps = [at(1, 0) - at(0, 0), at(4, 0) - at(0, 0)]
    v_steps = [at(0, 1) - at(0, 0), (at(0, 2) - at(0, 0)) if num > 1 else flat.size]
    if op == "ldmatrix":
        name = f"SM75_U16x{2 * num}_LDSM_T" if trans else f"SM75_U32x{num}_LDSM_N"
    else:
        name = f"SM90_U16x{2 * num}_STSM_T" if trans else f"SM90_U32x{num}_STSM_N"
    return CuteLayout((threads, v_shape), (tuple(t_steps), tuple(v_steps)), atom=name,
                      domain=f"(lane, value) -> 64*matrix + 8*row + col of {num} 8x8 b16 matrices; "
                             "value v = register v/2, half v%2 (CuTe's traits: the same in bits)")


# ----------------------------------------------------------------------------- by render kind

#: render kind -> the keyword options its diagram builder takes (refmodel/render/diagrams.py);
#: a test keeps this equal to the builders' signatures
KIND_OPTIONS: dict[str, tuple[str, ...]] = {
    "acc": ("n", "dtype"),
    "a-frag": ("dtype",),
    "stmatrix": ("num", "trans"),
    "ldmatrix": ("num", "trans"),
    "swizzle": ("mode", "dtype", "lines"),
    "smem": ("major", "mode", "dtype", "rows", "k", "lbo", "sbo"),
    "desc": ("value", "dtype", "rows", "k", "major"),
    "sparse-meta": ("dtype", "sel"),
    "epilogue": ("n", "dtype", "swizzle"),
    "sparse-compress": ("dtype", "sel"),
}

#: why a kind has no CuTe form
NO_CUTE_FORM = {
    "sparse-meta": ("no CuTe form: which lane and nibble of sp-meta carry a row's metadata depends on the "
                    "sp-sel immediate and half the lanes (16-bit types) are ignored, so it is not one "
                    "(thread, value) -> element map; CUTLASS passes the metadata as an opaque 32-bit "
                    "register per thread"),
    "sparse-compress": ("no CuTe form: 2:4 compression keeps 2 of every 4 values and records their positions, "
                        "a data-dependent selection, not a fixed coordinate -> offset map; the compressed "
                        "A itself is a dense K/2 operand (see smem / a-frag)"),
}


def layout_for(kind: str, **opts: Any) -> CuteLayout | None:
    """The :class:`CuteLayout` of a render kind with that diagram's options (None: no CuTe form)."""
    if not isinstance(kind, str) or kind not in KIND_OPTIONS:
        raise InputError(f"layout kind must be one of {', '.join(KIND_OPTIONS)}, got {_describe(kind)}")
    unknown = [k for k in opts if k not in KIND_OPTIONS[kind]]
    if unknown:
        raise InputError(f"the {kind} layout takes no option {_describe(unknown[0])}; its options are "
                         f"{', '.join(KIND_OPTIONS[kind])}")
    if kind in NO_CUTE_FORM:
        return None
    if kind == "acc":
        return acc_layout(**opts)
    if kind == "a-frag":
        return a_frag_layout(**opts)
    if kind in ("stmatrix", "ldmatrix"):
        return matrix_layout(kind, **opts)
    if kind == "swizzle":
        return swizzle_layout(**opts)
    if kind == "epilogue":
        return epilogue_layout(**opts)
    if kind == "smem":
        o = dict(opts)
        if "mode" in o:
            o["swizzle"] = o.pop("mode")
        return smem_layout(**o)
    return desc_layout(**opts)


def cute_layout(kind: str, **opts: Any) -> str | None:
    """One line for a diagram's notes / the CLI: the CuTe layout of ``kind`` with the render
    builder's options, its domain and CUTLASS name; None for kinds with no CuTe form
    (:data:`NO_CUTE_FORM` says why)."""
    lay = layout_for(kind, **opts)
    return None if lay is None else lay.describe()


__all__ = ["CuteLayout", "crd2idx", "size", "fmt", "smem_layout", "atom_layout", "desc_layout", "swizzle_layout", "epilogue_layout", "acc_layout",
           "a_frag_layout", "matrix_layout", "layout_for", "cute_layout", "KIND_OPTIONS", "NO_CUTE_FORM",
           "CUTLASS_TYPES"]
