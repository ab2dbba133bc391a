"""Sparse metadata in other libraries' storage orders: PyTorch's semi-structured (CUTLASS
backend) meta tensor and CUTLASS's SM90 sparse-GEMM tensor E.

Both converters work on wgref's nibble matrix only (``meta`` (M, K/4) uint8, one nibble
``idx0 | idx1 << 2`` per row and 4-element chunk; tf32: (M, K/2), one nibble per pair,
0b0100 / 0b1110), so they are pure layout: the nibble values pass through unchanged, only
their places move.  M x K is a whole matrix; a 64-row wgmma tile's meta is the M = 64 case.

**PyTorch** (``torch.sparse._semi_structured_conversions``, read in torch 2.13.0; tested
bit for bit against ``sparse_semi_structured_from_dense_cutlass`` /
``sparse_semi_structured_to_dense_cutlass`` in tests/test_sparse_formats.py):

* meta dtype int16 (f16, bf16, float32) or int32 (int8); element ``(r, j)`` of the logical
  matrix packs the nibbles of chunks ``q*j .. q*j+q-1`` of row r, chunk ``q*j + i`` at bits
  ``4i`` (q = 4 nibbles per int16, 8 per int32); float32 (wgref tf32) uses one nibble per
  pair with the same 0b0100 / 0b1110 codes;
* that (M, C) matrix is then scattered into the stored (M, C) tensor: rows permuted in groups
  of 32 (int16) / 16 (int32) — row ``r`` goes to ``r//G*G + (r%8)*I + (r%G)//8`` with
  (G, I) = (32, 4) or (16, 2) — then the off-diagonal elements of every 2 x 2 block swapped
  (even row/odd column <-> odd row/even column), then stored column-major interleaved by 2
  (flat offset ``(c//2)*2M + 2r + c%2``): CUTLASS 2.x's ColumnMajorInterleaved<2> for Sm80;
* shapes torch accepts (and so do we): M % 32 == 0 (int16) or M % 16 == 0 (int32), and an
  even number of meta columns: K % 32 (f16/bf16), K % 64 (8-bit), K % 16 (tf32).  torch 2.13
  has no fp8 in this path (float8_e4m3fn goes through cuSPARSELt, whose metadata is opaque);
  e4m3/e5m2/u8 are given the int8 layout (same 8-bit 2:4 hardware format), tested through
  torch's int8 path on the same bytes.

**CUTLASS SM90** (NVIDIA/cutlass 7107b05535f8977f5ecb9d01ee203205b1fd9bc4, derived, not run):

* ``include/cutlass/gemm/collective/builders/sm90_sparse_config.inl``, ``Sm90GemmSparseConfig``:
  tensor E is laid out in logical A coordinates (m, k) by ``TensorEAtom`` — a (64, KA) atom,
  KA = ``MinTileShapeK`` = min(CTA tile K, 128) (the builder's choice), built with
  ``make_ordered_layout``: 16-bit ``((8,2,4),(16,2,KA/32))`` steps ``((3,1,5),(0,4,2))``;
  tf32 ``((8,2,4),(8,2,KA/16))`` same steps; 8-bit (64, KA) row-major — and ``fill_layoutE``
  tiles atoms along M first (stride 64*KA), then along K (stride M*KA);
* a logical offset o names byte ``o // S`` (``sparse_elem<S, uint8_t>``: S = 8 for 16- and
  8-bit, 4 for tf32 — two chunks a byte), nibble ``(o % S) // chunk``: the lower chunk in the
  low nibble (cute's sub-byte order, as ``include/cutlass/transform/kernel/
  sm90_sparse_gemm_compressor.hpp`` writes it through ``recast<uint4_t>``);
* the mainloop (``sm90_sparse_mma_tma_gmma_ss_warpspecialized.hpp``) TMA-copies atoms to shared
  memory unchanged (SmemLayoutAtomE = TensorEAtom, identity swizzle) and loads each thread's
  32-bit sp-meta register through the atom's ``ELayout_64x32/64x64/64x16``
  (``include/cute/atom/mma_traits_sm90_gmma_sparse.hpp``); :func:`cutlass_sm90_meta_registers`
  follows that path, and tests hold it equal to the H200-verified :func:`.sparse_meta.pack_meta`
  (both sp-sel halves: CUTLASS's ELayout gives lane bit 1 stride 0, so it fills both pairs).

Worked example (f16, CTA tile K 64, so KA = 64 and the atom's flat strides are m (8,2,4):
(64,16,1024), k (16,2,2): (1,512,32)): row 9, chunk 5 is logical (m, k) = (9, 20), m = 1 + 8*1,
k = 4 + 16*1, offset 1*64 + 1*16 + 4*1 + 1*512 = 596: byte 74, high nibble
(:func:`cutlass_sm90_offsets`).  In torch's f16 layout the same nibble is bits 4..7 of
logical element (9, 1): row 9//32*32 + (9%8)*4 + (9%32)//8 = 5, column 1 (odd row, odd column:
no swap), flat offset (1//2)*128 + 2*5 + 1 = 11 — element (2, 3) of the stored (64, 4) tensor.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..limits import check_limit
from ..validate import _describe, as_array
from .sparse_meta import ROWS, _kind

# --------------------------------------------------------------------------- common checks


def _chunk(dtype_a: str) -> int:
    """Logical A elements one nibble covers: 2 (tf32 pair) or 4."""
    return 2 if _kind(dtype_a) == "tf32" else 4


def _check_nibbles(meta, dtype_a: str) -> np.ndarray:
    mt = as_array("meta", meta)
    if mt.dtype.kind not in "iu" or mt.ndim != 2:
        raise InputError(f"meta must be a 2-D integer nibble matrix (M, K/{_chunk(dtype_a)}), got {_describe(mt)}")
    if mt.size and (mt.min() < 0 or mt.max() > 15):
        raise InputError("metadata nibbles must be in 0..15")
    return mt.astype(np.uint8)


# --------------------------------------------------------------------------- PyTorch

def _torch_params(dtype_a: str) -> tuple[type, int, int, int]:
    """(numpy meta dtype, nibbles per element, row group G, interweave I)."""
    kind = _kind(dtype_a)
    return (np.int32, 8, 16, 2) if kind == "8" else (np.int16, 4, 32, 4)


def _torch_offsets(m: int, ncols: int, dtype_a: str) -> np.ndarray:
    """(m, ncols) flat offset in torch's stored meta of each logical meta element."""
    _, _, group, inter = _torch_params(dtype_a)
    r = np.arange(m)[:, None] + np.zeros((1, ncols), np.int64)
    c = np.arange(ncols)[None, :] + np.zeros((m, 1), np.int64)
    r = r // group * group + (r % 8) * inter + (r % group) // 8
    swap = ((r % 2 == 0) & (c % 2 == 1)).astype(np.int64) - ((r % 2 == 1) & (c % 2 == 0)).astype(np.int64)
    r, c = r + swap, c - swap
    return (c // 2) * (2 * m) + 2 * r + c % 2


def _torch_shape_check(m: int, cols: int, dtype_a: str, what: str) -> int:
    """Check an (m, nibble cols) matrix fits torch's layout; returns torch's meta columns."""
    _, q, group, _ = _torch_params(dtype_a)
    ch = _chunk(dtype_a)
    if m % group:
        raise InputError(f"{what} for torch's {dtype_a} sparse layout needs a multiple of {group} rows, got {_describe(m)}")
    if cols % (2 * q):
        raise InputError(f"{what} for torch's {dtype_a} sparse layout needs K a multiple of {2 * q * ch} "
                         f"(an even number of meta columns), got K = {cols * ch}")
    return cols // q


def to_torch_semi_structured_meta(meta, dtype_a: str) -> np.ndarray:
    """torch's CUTLASS-backend meta tensor (M, K/16 int16, or K/32 int32 for 8-bit; tf32:
    (M, K/8) int16) of a wgref nibble matrix (M, K/4) — (M, K/2) for tf32."""
    mt = _check_nibbles(meta, dtype_a)
    m, cols = mt.shape
    nc = _torch_shape_check(m, cols, dtype_a, "meta")
    dt, q, _, _ = _torch_params(dtype_a)
    packed = np.zeros((m, nc), np.uint32)
    for i in range(q):
        packed |= mt[:, i::q].astype(np.uint32) << np.uint32(4 * i)
    out = np.empty(m * nc, np.uint32)
    out[_torch_offsets(m, nc, dtype_a).ravel()] = packed.ravel()
    wide = np.uint16 if dt is np.int16 else np.uint32
    return out.astype(wide).view(dt).reshape(m, nc)


def from_torch_semi_structured_meta(meta_torch, dtype_a: str) -> np.ndarray:
    """wgref's (M, K/4) uint8 nibbles ((M, K/2) for tf32) of torch's stored meta tensor."""
    dt, q, _, _ = _torch_params(dtype_a)
    t = as_array("meta_torch", meta_torch)
    if t.ndim != 2 or t.dtype.kind not in "iu" or t.dtype.itemsize != np.dtype(dt).itemsize:
        raise InputError(f"meta_torch for {dtype_a} must be a 2-D {np.dtype(dt).name} array (torch's meta), "
                         f"got {_describe(t)}")
    m, nc = t.shape
    _torch_shape_check(m, nc * q, dtype_a, "meta_torch")
    bits = t.view(np.uint16 if dt is np.int16 else np.uint32).astype(np.uint32).ravel()
    packed = bits[_torch_offsets(m, nc, dtype_a)]
    out = np.empty((m, nc * q), np.uint8)
    for i in range(q):
        out[:, i::q] = (packed >> np.uint32(4 * i)) & 0xF
    return out


# --------------------------------------------------------------------------- CUTLASS SM90

def _ordered_layout(shape: tuple, order: tuple) -> tuple[tuple, tuple]:
    """cute ``make_ordered_layout`` on flat modes: the stride of a mode is the product of
    the sizes of all modes of lower order."""
    strides = tuple(int(np.prod([s for s, o in zip(shape, order) if o < oi], dtype=np.int64)) for oi in order)
    return shape, strides


def cutlass_sm90_atom_k(dtype_a: str, tile_k: int) -> int:
    """K extent (logical elements) of CUTLASS's metadata atom: min(tile_k, 128), which must
    be a multiple of the basic block (64 for 8-bit, 32 for 16-bit, 16 for tf32)."""
    kind = _kind(dtype_a)
    block = {"8": 64, "16": 32, "tf32": 16}[kind]
    if isinstance(tile_k, (bool, np.bool_)) or not isinstance(tile_k, (int, np.integer)) or tile_k <= 0:
        raise InputError(f"tile_k must be a positive int (the CTA tile's K), got {_describe(tile_k)}")
    ka = min(int(tile_k), 128)
    if ka % block:
        raise InputError(f"tile_k for {dtype_a} sparse GEMM must make min(tile_k, 128) a multiple of {block}, "
                         f"got {_describe(tile_k)}")
    return ka


def _atom_modes(dtype_a: str, ka: int) -> tuple[tuple, tuple, tuple, tuple]:
    """(m shape, m strides, k shape, k strides) of TensorEAtom, flat, in logical units."""
    kind = _kind(dtype_a)
    if kind == "8":
        return (ROWS,), (ka,), (ka,), (1,)
    k0 = 16 if kind == "16" else 8
    shape = (8, 2, 4, k0, 2, ka // (2 * k0))
    _, st = _ordered_layout(shape, (3, 1, 5, 0, 4, 2))
    return shape[:3], st[:3], shape[3:], st[3:]


def _colex(idx: np.ndarray, shape: tuple, strides: tuple) -> np.ndarray:
    out = np.zeros_like(idx)
    for s, d in zip(shape, strides):
        out += (idx % s) * d
        idx = idx // s
    return out


def _check_mk(m, k, dtype_a: str, tile_k) -> int:
    """The atom K, after checking m and k (positive multiples of the atom, at most the element limit)."""
    ka = cutlass_sm90_atom_k(dtype_a, tile_k)
    for name, v, mult in (("m", m, ROWS), ("k", k, ka)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v <= 0 or v % mult:
            raise InputError(f"{name} must be a positive multiple of {mult} for CUTLASS's {dtype_a} metadata "
                             f"atom (tile_k {_describe(tile_k)}), got {_describe(v)}")
    check_limit("elements", int(m) * int(k), f"m x k ({_describe(m)} x {_describe(k)})")
    return ka


def _check_e(e, dtype_a: str, m: int, k: int, tile_k) -> np.ndarray:
    _check_mk(m, k, dtype_a, tile_k)
    s = _e_sparsity(dtype_a)
    if e.dtype != np.uint8 or e.shape != (m * k // s,):
        raise InputError(f"e_bytes must be a 1-D uint8 array of {m * k // s} bytes for a {m} x {k} {dtype_a} A, "
                         f"got {_describe(e)}")
    return e


def cutlass_sm90_offsets(m: int, k: int, dtype_a: str, tile_k: int) -> np.ndarray:
    """(m, k) logical offset in CUTLASS's tensor E (``fill_layoutE``, batch 1) of each logical A
    element; byte ``offset // S``, S = 8 (4 for tf32).  m % 64 == 0 and k % atom K == 0."""
    ka = _check_mk(m, k, dtype_a, tile_k)
    ms, mst, ks, kst = _atom_modes(dtype_a, ka)
    rows, cols = np.arange(m, dtype=np.int64), np.arange(k, dtype=np.int64)
    ro = _colex(rows % ROWS, ms, mst) + (rows // ROWS) * (ROWS * ka)
    co = _colex(cols % ka, ks, kst) + (cols // ka) * (int(m) * ka)
    return ro[:, None] + co[None, :]


def _e_sparsity(dtype_a: str) -> int:
    return 4 if _kind(dtype_a) == "tf32" else 8


def to_cutlass_sm90_meta(meta, dtype_a: str, tile_k: int) -> np.ndarray:
    """CUTLASS SM90 tensor E bytes (uint8, M*K/8 of them; tf32 M*K/4) of a wgref nibble
    matrix (M, K/4) — (M, K/2) for tf32 — for a kernel whose CTA tile has K ``tile_k``."""
    mt = _check_nibbles(meta, dtype_a)
    ch, s = _chunk(dtype_a), _e_sparsity(dtype_a)
    m, cols = mt.shape
    if cols % 2:
        raise InputError(f"meta must have an even number of nibble columns (two a byte), got {cols}")
    off = cutlass_sm90_offsets(m, cols * ch, dtype_a, tile_k)[:, ::s]       # first element of each byte
    out = np.zeros(m * cols // 2, np.uint8)
    out[(off // s).ravel()] = (mt[:, 0::2] | (mt[:, 1::2] << 4)).ravel()
    return out


def from_cutlass_sm90_meta(e_bytes, dtype_a: str, m: int, k: int, tile_k: int) -> np.ndarray:
    """wgref's (m, k/4) uint8 nibbles ((m, k/2) for tf32) of CUTLASS SM90 tensor E bytes."""
    e = _check_e(as_array("e_bytes", e_bytes), dtype_a, m, k, tile_k)
    ch, s = _chunk(dtype_a), _e_sparsity(dtype_a)
    off = cutlass_sm90_offsets(m, k, dtype_a, tile_k)[:, ::s]
    b = e[off // s]
    out = np.empty((m, k // ch), np.uint8)
    out[:, 0::2], out[:, 1::2] = b & 0xF, b >> 4
    return out


# ELayout of the MMA atoms (mma_traits_sm90_gmma_sparse.hpp): thread modes (2,2,8,4), value
# modes; strides into the (64, K_instr) tile, column-major (m + 64 k).
_ELAYOUT = {
    "16": (((2, 2, 8, 4), (1024, 0, 1, 16)), ((16, 2), (64, 8)), 32),     # ELayout_64x32
    "8": (((2, 2, 8, 4), (8, 2048, 1, 16)), ((32,), (64,)), 64),          # ELayout_64x64
    "tf32": (((2, 2, 8, 4), (512, 0, 1, 16)), ((8, 2), (64, 8)), 16),     # ELayout_64x16
}


def cutlass_sm90_elayout(dtype_a: str) -> tuple[np.ndarray, np.ndarray]:
    """(m, k), each (128, values): the tile coordinate CUTLASS's ELayout gives each thread's
    metadata value (32 values a thread; tf32 16), in register order."""
    (ts, tst), (vs, vst), kin = _ELAYOUT[_kind(dtype_a)]
    t = _colex(np.arange(128, dtype=np.int64), ts, tst)[:, None]
    v = _colex(np.arange(int(np.prod(vs)), dtype=np.int64), vs, vst)[None, :]
    lin = t + v
    return lin % ROWS, lin // ROWS


def cutlass_sm90_meta_registers(e_bytes, dtype_a: str, m: int, k: int, tile_k: int,
                                atom_m: int = 0, atom_k: int = 0) -> np.ndarray:
    """(128,) uint32 sp-meta registers CUTLASS's mainloop loads for MMA atom (atom_m, atom_k)
    (rows 64*atom_m.., instruction-K block atom_k) from tensor E bytes, via the atom's ELayout."""
    e = _check_e(as_array("e_bytes", e_bytes), dtype_a, m, k, tile_k)
    ch, s = _chunk(dtype_a), _e_sparsity(dtype_a)
    kin = _ELAYOUT[_kind(dtype_a)][2]
    off = cutlass_sm90_offsets(m, k, dtype_a, tile_k)
    for name, v, n in (("atom_m", atom_m, m // ROWS), ("atom_k", atom_k, k // kin)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < n:
            raise InputError(f"{name} must be an int in 0..{n - 1}, got {_describe(v)}")
    em, ek = cutlass_sm90_elayout(dtype_a)
    o = off[em[:, ::ch] + ROWS * atom_m, ek[:, ::ch] + kin * atom_k]       # (128, 8): one per nibble
    nib = (e[o // s] >> (4 * ((o % s) // ch))).astype(np.uint32) & 0xF
    return (nib << (4 * np.arange(8, dtype=np.uint32))).sum(axis=1, dtype=np.uint32)


__all__ = ["to_torch_semi_structured_meta", "from_torch_semi_structured_meta", "to_cutlass_sm90_meta",
           "from_cutlass_sm90_meta", "cutlass_sm90_offsets", "cutlass_sm90_atom_k", "cutlass_sm90_elayout",
           "cutlass_sm90_meta_registers"]
