"""Sparse metadata in other libraries' orders (refmodel/layouts/sparse_formats.py).

The PyTorch tests run torch's own CPU conversion functions
(``torch.sparse._semi_structured_conversions``, tested with torch 2.13.0+cpu) and are skipped
where torch is not installed — CI does not install torch, so they run only on a developer's
machine with it.  The CUTLASS tests need nothing: CUTLASS cannot run here, so they check the
derived layout's own consistency and, above all, that the per-thread registers a CUTLASS
mainloop would load equal the H200-verified ``sparse_meta.pack_meta``.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from refmodel.dtypes import bits_of, from_bits
from refmodel.errors import InputError
from refmodel.layouts import sparse_formats as sf
from refmodel.layouts.sparse_meta import pack_meta
from refmodel.numerics.sparse import compress, decompress

FORMS = {
    "f16": "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16",
    "bf16": "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.bf16.bf16",
    "tf32": "wgmma.mma_async.sp.sync.aligned.m64n8k16.f32.tf32.tf32",
    "s8": "wgmma.mma_async.sp.sync.aligned.m64n8k64.s32.s8.s8",
    "e4m3": "wgmma.mma_async.sp.sync.aligned.m64n8k64.f32.e4m3.e4m3",
}
FORM_K = {"f16": 32, "bf16": 32, "tf32": 16, "s8": 64, "e4m3": 64}
PAIRS = np.array([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)])


def _chunk(dt: str) -> int:
    return 2 if dt == "tf32" else 4


def _dense_2_4(rng, m: int, k: int, dt: str, *, exact: bool = True) -> np.ndarray:
    """Random M x K A with 2:4 (tf32 1:2) structure; ``exact``: every chunk keeps exactly its
    quota of nonzeros (so the metadata is unique), else some kept elements are zeroed too."""
    ch = _chunk(dt)
    if ch == 4:
        idx = PAIRS[rng.integers(0, 6, (m, k // 4))]
    else:
        idx = rng.integers(0, 2, (m, k // 2, 1))
    mask = np.zeros((m, k // ch, ch), bool)
    np.put_along_axis(mask, idx, True, axis=-1)
    mask = mask.reshape(m, k)
    if not exact:
        mask &= rng.random((m, k)) < 0.6
    sign = rng.choice([-1, 1], (m, k))
    if dt in ("f16", "tf32"):
        v = (rng.integers(1, 100, (m, k)) * sign).astype(np.float16 if dt == "f16" else np.float32)
    elif dt == "bf16":
        f = (rng.integers(1, 100, (m, k)) * sign).astype(np.float32)
        v = from_bits((f.view(np.uint32) >> 16).astype(np.uint16), "bf16")
    elif dt == "s8":
        v = (rng.integers(1, 128, (m, k)) * sign).astype(np.int8)
    else:  # e4m3 codes 0x01..0x7e with a random sign: never a zero or NaN
        v = from_bits((rng.integers(1, 0x7F, (m, k)) | np.where(sign < 0, 0x80, 0)).astype(np.uint8), dt)
    z = from_bits(np.zeros((m, k), bits_of(v).dtype), dt)
    return np.where(mask, v, z)


def _wgref_compress(dense: np.ndarray, dt: str) -> tuple[np.ndarray, np.ndarray]:
    """wgref's compress on a whole M x K A, tile by tile; (values (M, K/2), nibbles (M, K/chunk))."""
    m, k = dense.shape
    kf = FORM_K[dt]
    t = dense.reshape(m // 64, 64, k // kf, kf).transpose(0, 2, 1, 3)
    comp, meta = compress(t, FORMS[dt])
    return (comp.transpose(0, 2, 1, 3).reshape(m, k // 2),
            meta.transpose(0, 2, 1, 3).reshape(m, k // _chunk(dt)))


def _wgref_decompress(comp: np.ndarray, meta: np.ndarray, dt: str) -> np.ndarray:
    m, kc = comp.shape
    kf = FORM_K[dt]
    c = comp.reshape(m // 64, 64, 2 * kc // kf, kf // 2).transpose(0, 2, 1, 3)
    n = meta.reshape(m // 64, 64, 2 * kc // kf, kf // _chunk(dt)).transpose(0, 2, 1, 3)
    return decompress(c, n, FORMS[dt]).transpose(0, 2, 1, 3).reshape(m, 2 * kc)


# --------------------------------------------------------------------------- PyTorch


def _torch_conv():
    torch = pytest.importorskip("torch")
    from torch.sparse import _semi_structured_conversions as conv
    return torch, conv


def _to_torch(torch, x: np.ndarray, dt: str):
    if dt == "bf16":
        return torch.from_numpy(bits_of(x).view(np.int16).copy()).view(torch.bfloat16)
    if dt == "e4m3":  # torch's CUTLASS path has no fp8: the same bytes through its int8 layout
        return torch.from_numpy(bits_of(x).view(np.int8).copy())
    return torch.from_numpy(np.ascontiguousarray(x))


def _from_torch(torch, t, dt: str) -> np.ndarray:
    if dt == "bf16":
        return from_bits(t.view(torch.int16).numpy().view(np.uint16), "bf16")
    if dt == "e4m3":
        return from_bits(t.numpy().view(np.uint8), "e4m3")
    return t.numpy()


TORCH_CASES = [("f16", 64, 64), ("f16", 128, 128), ("bf16", 64, 96), ("bf16", 96, 64), ("tf32", 64, 32),
               ("tf32", 32, 48), ("s8", 64, 128), ("s8", 16, 64), ("e4m3", 64, 192)]


@pytest.mark.parametrize("dt,m,k", TORCH_CASES)
def test_torch_meta_bit_for_bit(dt, m, k):
    """wgref's compress + to_torch_semi_structured_meta = torch's own meta, bit for bit, and the
    kept values agree too (both keep a chunk's elements in increasing order)."""
    torch, conv = _torch_conv()
    rng = np.random.default_rng(zlib.crc32(f"{dt}{m}x{k}".encode()))
    for _ in range(3):
        dense = _dense_2_4(rng, m, k, dt)
        if m % 64:   # torch allows M = 32 / 16, wgmma tiles are 64 rows: the nibbles by hand
            nz = bits_of(dense).reshape(m, k // _chunk(dt), _chunk(dt)) != 0
            if dt == "tf32":
                nib = np.where(nz[..., 0], 0b0100, 0b1110).astype(np.uint8)
            else:
                pos = np.sort(np.argsort(~nz, axis=-1, kind="stable")[..., :2], axis=-1)
                nib = (pos[..., 0] | pos[..., 1] << 2).astype(np.uint8)
            comp = None
        else:
            comp, nib = _wgref_compress(dense, dt)
        t_sparse, t_meta = conv.sparse_semi_structured_from_dense_cutlass(_to_torch(torch, dense, dt))
        ours = sf.to_torch_semi_structured_meta(nib, dt)
        assert ours.dtype == t_meta.numpy().dtype and ours.shape == tuple(t_meta.shape)
        np.testing.assert_array_equal(ours, t_meta.numpy())
        np.testing.assert_array_equal(sf.from_torch_semi_structured_meta(t_meta.numpy(), dt), nib)
        if comp is not None:
            np.testing.assert_array_equal(bits_of(_from_torch(torch, t_sparse, dt)), bits_of(comp))


@pytest.mark.parametrize("dt,m,k", [c for c in TORCH_CASES if c[1] % 64 == 0])
def test_torch_dense_reconstructions_agree(dt, m, k):
    """With chunks holding fewer nonzeros than their quota (torch and wgref then pick different
    padding positions, so the metas differ): torch's meta read by wgref rebuilds the dense A
    with wgref's decompress, and wgref's meta written for torch rebuilds it with torch's."""
    torch, conv = _torch_conv()
    rng = np.random.default_rng(zlib.crc32(f"{dt}{m}x{k}loose".encode()))
    dense = _dense_2_4(rng, m, k, dt, exact=False)
    comp, nib = _wgref_compress(dense, dt)
    t_sparse, t_meta = conv.sparse_semi_structured_from_dense_cutlass(_to_torch(torch, dense, dt))
    theirs = _wgref_decompress(_from_torch(torch, t_sparse, dt), sf.from_torch_semi_structured_meta(t_meta.numpy(), dt),
                               dt)
    np.testing.assert_array_equal(bits_of(theirs), bits_of(dense))
    back = conv.sparse_semi_structured_to_dense_cutlass(_to_torch(torch, comp, dt),
                                                        torch.from_numpy(sf.to_torch_semi_structured_meta(nib, dt)))
    np.testing.assert_array_equal(bits_of(_from_torch(torch, back, dt)), bits_of(dense))


def test_torch_has_no_fp8_in_its_cutlass_conversion():
    """Why e4m3 is tested through torch's int8 path: torch refuses float8 there."""
    torch, conv = _torch_conv()
    with pytest.raises(RuntimeError, match="Invalid datatype"):
        conv.sparse_semi_structured_from_dense_cutlass(torch.zeros(64, 64, dtype=torch.float8_e4m3fn))


@pytest.mark.parametrize("dt,m,k", [("f16", 64, 16), ("s8", 64, 32), ("f16", 48, 64), ("s8", 8, 64)])
def test_torch_shapes_refused_where_torch_fails(dt, m, k):
    """Shapes torch's own conversion cannot store (odd meta columns, row groups) are refused."""
    torch, conv = _torch_conv()
    with pytest.raises(RuntimeError):
        conv.sparse_semi_structured_from_dense_cutlass(torch.zeros(m, k, dtype=torch.half if dt == "f16" else torch.int8))
    with pytest.raises(InputError):
        sf.to_torch_semi_structured_meta(np.full((m, k // 4), 4, np.uint8), dt)


def test_torch_layout_without_torch():
    """Runs everywhere: the docstring's worked example, and the stored order is a permutation."""
    nib = np.zeros((64, 16), np.uint8)
    nib[9, 5] = 0xB
    t = sf.to_torch_semi_structured_meta(nib, "f16")
    assert t.shape == (64, 4) and t.dtype == np.int16
    assert np.argwhere(t != 0).tolist() == [[2, 3]] and int(t[2, 3]) == 0xB0
    rng = np.random.default_rng(7)
    for dt, m, cols in (("f16", 128, 16), ("s8", 48, 32), ("tf32", 64, 8)):
        x = rng.integers(0, 16, (m, cols)).astype(np.uint8)
        assert np.array_equal(sf.from_torch_semi_structured_meta(sf.to_torch_semi_structured_meta(x, dt), dt), x)
    with pytest.raises(InputError):
        sf.from_torch_semi_structured_meta(np.zeros((64, 4), np.int32), "f16")


# --------------------------------------------------------------------------- CUTLASS SM90

CUTLASS_CASES = [("f16", 32), ("f16", 64), ("bf16", 128), ("f16", 256), ("tf32", 16), ("tf32", 32),
                 ("tf32", 64), ("tf32", 128), ("e4m3", 64), ("s8", 128), ("u8", 192)]
KIN = {"f16": 32, "bf16": 32, "tf32": 16, "e4m3": 64, "s8": 64, "u8": 64}


def _case(dt, tile_k):
    ka = sf.cutlass_sm90_atom_k(dt, tile_k)
    return 128, 2 * ka, ka


@pytest.mark.parametrize("dt,tile_k", CUTLASS_CASES)
def test_cutlass_offsets_are_a_permutation_and_round_trip(dt, tile_k):
    m, k, _ = _case(dt, tile_k)
    off = sf.cutlass_sm90_offsets(m, k, dt, tile_k)
    assert np.array_equal(np.sort(off.ravel()), np.arange(m * k))
    rng = np.random.default_rng(1)
    nib = rng.integers(0, 16, (m, k // _chunk(dt))).astype(np.uint8)
    e = sf.to_cutlass_sm90_meta(nib, dt, tile_k)
    assert e.shape == (m * k // (4 if dt == "tf32" else 8),)
    assert np.array_equal(sf.from_cutlass_sm90_meta(e, dt, m, k, tile_k), nib)
    eb = rng.integers(0, 256, e.shape).astype(np.uint8)
    assert np.array_equal(sf.to_cutlass_sm90_meta(sf.from_cutlass_sm90_meta(eb, dt, m, k, tile_k), dt, tile_k), eb)


@pytest.mark.parametrize("dt,tile_k", CUTLASS_CASES)
def test_cutlass_mainloop_registers_equal_h200_pack_meta(dt, tile_k):
    """For every MMA atom of a 128 x 2KA A, the sp-meta register each thread loads through
    CUTLASS's ELayout equals pack_meta's (the H200-verified layout) — for 16-bit and tf32 both
    sp-sel halves at once (CUTLASS fills lanes 0,1 and 2,3 of each quad alike)."""
    m, k, _ = _case(dt, tile_k)
    ch, kin = _chunk(dt), KIN[dt]
    nib = np.random.default_rng(2).integers(0, 16, (m, k // ch)).astype(np.uint8)
    e = sf.to_cutlass_sm90_meta(nib, dt, tile_k)
    for am in range(m // 64):
        for ak in range(k // kin):
            tile = nib[64 * am:64 * am + 64, ak * kin // ch:(ak + 1) * kin // ch]
            want = pack_meta(tile, dt, 0) if kin == 64 else pack_meta(tile, dt, 0, fill=pack_meta(tile, dt, 1))
            np.testing.assert_array_equal(sf.cutlass_sm90_meta_registers(e, dt, m, k, tile_k, am, ak), want)


@pytest.mark.parametrize("dt,tile_k", CUTLASS_CASES)
def test_cutlass_atom_gives_each_thread_one_aligned_word(dt, tile_k):
    """The reason CUTLASS permutes E ("vectorized loads from smem"): through the derived atom,
    each thread's 8 nibbles are bytes 4w..4w+3 of tensor E, low nibble first, and each nibble's
    chunk is contiguous in logical K."""
    m, k, _ = _case(dt, tile_k)
    ch, s, kin = _chunk(dt), (4 if dt == "tf32" else 8), KIN[dt]
    off = sf.cutlass_sm90_offsets(m, k, dt, tile_k)
    em, ek = sf.cutlass_sm90_elayout(dt)
    for am, ak in ((0, 0), (1, k // kin - 1)):
        o = off[em + 64 * am, ek + kin * ak].reshape(128, 8, ch)
        assert np.array_equal(o - o[..., :1], np.broadcast_to(np.arange(ch), o.shape))
        first = o[..., 0]
        byte, half = first // s, (first % s) // ch
        assert np.all(byte[:, 0] % 4 == 0)
        assert np.array_equal(byte - byte[:, :1], np.broadcast_to(np.repeat(np.arange(4), 2), (128, 8)))
        assert np.array_equal(half, np.broadcast_to(np.tile([0, 1], 4), (128, 8)))


def test_cutlass_atom_matches_hand_derivation():
    """The atoms written out by hand from sm90_sparse_config.inl's Step tuples (n = KA / block)."""
    def by_hand_16(mm, kk, n, k0):   # ((8,2,4),(k0,2,n)) steps ((3,1,5),(0,4,2))
        m0, m1, m2 = mm % 8, (mm // 8) % 2, mm // 16
        a, b, c = kk % k0, (kk // k0) % 2, kk // (2 * k0)
        return a + m1 * k0 + c * 2 * k0 + m0 * 2 * k0 * n + b * 16 * k0 * n + m2 * 32 * k0 * n
    mm, kk = np.meshgrid(np.arange(64), np.arange(128), indexing="ij")
    assert np.array_equal(sf.cutlass_sm90_offsets(64, 128, "f16", 128), by_hand_16(mm, kk, 4, 16))
    assert np.array_equal(sf.cutlass_sm90_offsets(64, 128, "tf32", 128), by_hand_16(mm, kk, 8, 8))
    assert np.array_equal(sf.cutlass_sm90_offsets(64, 128, "s8", 128), mm * 128 + kk)
    big = sf.cutlass_sm90_offsets(192, 256, "f16", 64)                # atoms: M first, then K
    assert big[64, 0] == 64 * 64 and big[0, 64] == 192 * 64 and big[130, 70] == 2 * 4096 + 192 * 64 + big[2, 6]
    assert sf.cutlass_sm90_offsets(64, 64, "f16", 64)[9, 20] == 596   # the docstring's example


@pytest.mark.parametrize("call", [
    lambda: sf.cutlass_sm90_atom_k("f16", 48),
    lambda: sf.cutlass_sm90_atom_k("s8", 32),
    lambda: sf.cutlass_sm90_atom_k("f16", True),
    lambda: sf.cutlass_sm90_offsets(96, 64, "f16", 64),
    lambda: sf.cutlass_sm90_offsets(64, 96, "f16", 64),
    lambda: sf.to_cutlass_sm90_meta(np.zeros((64, 16), np.uint8) + 16, "f16", 64),
    lambda: sf.to_cutlass_sm90_meta(np.zeros((64, 16), np.float32), "f16", 64),
    lambda: sf.from_cutlass_sm90_meta(np.zeros(511, np.uint8), "f16", 64, 64, 64),
    lambda: sf.cutlass_sm90_meta_registers(np.zeros(512, np.uint8), "f16", 64, 64, 64, 0, 2),
    lambda: sf.to_cutlass_sm90_meta(np.zeros((64, 16), np.uint8), "f32", 64),
])
def test_cutlass_bad_arguments_refused(call):
    with pytest.raises(InputError):
        call()
