"""Sparse wgmma (refmodel.numerics.sparse, layouts.sparse_meta, machine.sparse): compression,
metadata registers, the accumulator, and the sp-sel rule as ptxas enforces it.

Independent evidence: the dense reference formula over the decompressed A, the metadata
formulas of PTX/H200 restated here, values built by hand, and ptxas itself.

Numerics identity (checked below on every floating family and int8): for legal metadata,
``wgmma_sp(A_c, meta, B, C)`` equals, bit for bit, one dense fused dot product over the full K
with the decompressed A, *provided the B rows a row of A drops hold no Inf/NaN* (the dense
product 0 * Inf is NaN; the sparse hardware never forms it).  The extra zero products cannot
move ``e_max``: C is always a term of the fused sum, and either it is zero (and takes ``e_zero``
itself) or its exponent is at least the accumulator's smallest normal exponent (-126 / -14),
above every binding's ``e_zero`` (-133 / -21).  int8 sums are exact, so there it always holds.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

import ml_dtypes
import numpy as np
import pytest

from refmodel.dtypes import bits_of, element_dtype
from refmodel.errors import DTypeError, FormError, InputError
from refmodel.layouts.descriptor import MatrixDescriptor
from refmodel.layouts.fragment import pack_a_fragment, pack_accumulator, unpack_accumulator
from refmodel.layouts.smem import tile_image
from refmodel.layouts.sparse_meta import ILLEGAL_24, LEGAL_24, LEGAL_TF32, meta_holders, pack_meta, unpack_meta
from refmodel.machine.sparse import wgmma_sp_registers
from refmodel.numerics.accumulate import params_for
from refmodel.numerics.sparse import compress, decompress, kept_positions, prune_2_4, wgmma_sp, wgmma_sp_reference
from refmodel.numerics.wgmma import _reference as dense_reference
from refmodel.wgmma_forms import WgmmaForm
from refmodel.wgmma_sp_forms import WGMMA_SP_FORMS, parse_wgmma_sp

SP = "wgmma.mma_async.sp.sync.aligned."
A_TYPES = {"f16": SP + "m64n8k32.f32.f16.f16", "bf16": SP + "m64n8k32.f32.bf16.bf16",
           "tf32": SP + "m64n8k16.f32.tf32.tf32", "e4m3": SP + "m64n8k64.f32.e4m3.e4m3",
           "e5m2": SP + "m64n8k64.f32.e5m2.e5m2", "s8": SP + "m64n8k64.s32.s8.s8", "u8": SP + "m64n8k64.s32.u8.u8"}
rng = np.random.default_rng(20261202)


def _nonzero(dtype: str, shape) -> np.ndarray:
    """Random values of ``dtype`` that are all nonzero (and finite)."""
    if dtype in ("s8", "u8"):
        v = rng.integers(1, 100, shape) * (rng.choice([-1, 1], shape) if dtype == "s8" else 1)
        return v.astype(element_dtype(dtype))
    v = rng.uniform(1, 2, shape) * rng.choice([-1, 1], shape) * 2.0 ** rng.integers(-3, 3, shape)
    return v.astype(np.float32).astype(element_dtype(dtype))


def _sparse_dense(form, batch=()) -> tuple[np.ndarray, np.ndarray]:
    """(dense A with random 2:4 / 1:2 structure, the positions kept per chunk) built by hand."""
    keep = 2 if form.chunk == 4 else 1
    shape = batch + (64, form.meta_cols)
    r = rng.random(shape + (form.chunk,))
    pos = np.sort(np.argsort(r, axis=-1)[..., :keep], axis=-1)   # random distinct positions, increasing
    vals = _nonzero(form.dtype_a, shape + (keep,))
    chunks = np.zeros(shape + (form.chunk,), element_dtype(form.dtype_a))
    np.put_along_axis(chunks, pos, vals, axis=-1)
    return chunks.reshape(batch + (64, form.k)), pos


# ----------------------------------------------------------------------------- compress / decompress

@pytest.mark.parametrize("dtype", sorted(A_TYPES))
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_compress_decompress_round_trip(dtype, batch):
    f = parse_wgmma_sp(A_TYPES[dtype])
    a, pos = _sparse_dense(f, batch)
    ac, meta = compress(a, f)
    assert ac.shape == batch + (64, f.k_compressed) and meta.shape == batch + (64, f.meta_cols)
    assert meta.dtype == np.uint8
    if f.chunk == 4:
        np.testing.assert_array_equal(meta, pos[..., 0] | (pos[..., 1] << 2))
    else:
        np.testing.assert_array_equal(meta, np.where(pos[..., 0] == 0, 0b0100, 0b1110))
    # the kept values in order, straight from the dense A
    want = np.take_along_axis(a.reshape(batch + (64, f.meta_cols, f.chunk)), pos, axis=-1)
    np.testing.assert_array_equal(bits_of(ac), bits_of(want).reshape(ac.shape))
    back = decompress(ac, meta, f)
    np.testing.assert_array_equal(bits_of(back), bits_of(a))


@pytest.mark.parametrize("dtype", ["f16", "tf32", "e4m3", "s8"])
def test_compress_names_first_offending_row_and_chunk(dtype):
    f = parse_wgmma_sp(A_TYPES[dtype])
    a, _ = _sparse_dense(f)
    a = a.copy()
    # row 5, chunk 3 and row 9, chunk 0 get a chunk full of nonzeros; row 5 chunk 3 comes first
    a[9, 0:f.chunk] = _nonzero(dtype, f.chunk)
    a[5, 3 * f.chunk:4 * f.chunk] = _nonzero(dtype, f.chunk)
    with pytest.raises(InputError, match=rf"row 5, chunk 3 \(columns {3 * f.chunk}\.\.{4 * f.chunk - 1}\) has "
                                         rf"{f.chunk} nonzeros"):
        compress(a, f)
    a[5, 3 * f.chunk:4 * f.chunk] = 0
    with pytest.raises(InputError, match="row 9, chunk 0"):
        compress(a, f)


@pytest.mark.parametrize("dtype", sorted(A_TYPES))
def test_compress_all_zero_and_one_nonzero_chunks(dtype):
    """Documented choice: the kept zeros go to the lowest free positions, in increasing order."""
    f = parse_wgmma_sp(A_TYPES[dtype])
    a = np.zeros((64, f.k), element_dtype(dtype))
    v = _nonzero(dtype, 8)
    if f.chunk == 4:
        a[0, 4 + 2] = v[0]          # chunk 1: one nonzero at 2 -> positions (0, 2)
        a[1, 0] = v[1]              # chunk 0: one nonzero at 0 -> (0, 1)
        a[2, 8 + 3] = v[2]          # chunk 2: at 3 -> (0, 3)
        a[3, 1] = v[3]              # chunk 0: at 1 -> (0, 1)
        ac, meta = compress(a, f)
        assert meta[0, 0] == 0b0100 and meta[0, 1] == (0 | 2 << 2)
        assert meta[1, 0] == 0b0100 and meta[2, 2] == (0 | 3 << 2) and meta[3, 0] == 0b0100
        assert bits_of(ac)[0, 2] == 0 and bits_of(ac)[0, 3] == bits_of(v[:1])[0]
        assert bits_of(ac)[3, 1] == bits_of(v[3:4])[0]
    else:
        a[0, 3] = v[0]              # pair 1: element 1 -> 0b1110
        ac, meta = compress(a, f)
        assert meta[0, 1] == 0b1110 and bits_of(ac)[0, 1] == bits_of(v[:1])[0]
    assert (meta[10:] == 0b0100).all() and (bits_of(ac)[10:] == 0).all()   # all-zero chunks
    np.testing.assert_array_equal(bits_of(decompress(ac, meta, f)), bits_of(a))


@pytest.mark.parametrize("dtype", sorted(A_TYPES))
def test_compress_keeps_the_rule_for_every_chunk_pattern(dtype):
    """Every legal nonzero pattern of a chunk (random rows of them) keeps the positions of the rule
    written as a stable sort: nonzeros first, then free positions, each in index order; the lowest
    ``keep`` of them, increasing."""
    f = parse_wgmma_sp(A_TYPES[dtype])
    keep = 2 if f.chunk == 4 else 1
    rng = np.random.default_rng(34)
    legal = [m for m in range(1 << f.chunk) if bin(m).count("1") <= keep]
    masks = np.array(legal)[rng.integers(0, len(legal), (3, 64, f.meta_cols))]
    nz = (masks[..., None] >> np.arange(f.chunk)) & 1 == 1
    vals = _nonzero(dtype, nz.size).reshape(nz.shape)
    a = np.where(nz, vals, np.zeros((), vals.dtype)).reshape(3, 64, f.k).astype(element_dtype(dtype))
    ac, meta = compress(a, f)
    order = np.sort(np.argsort(~nz, axis=-1, kind="stable")[..., :keep], axis=-1)
    np.testing.assert_array_equal(kept_positions(meta, f),
                                  (order + f.chunk * np.arange(f.meta_cols)[:, None]).reshape(3, 64, -1))
    np.testing.assert_array_equal(bits_of(decompress(ac, meta, f)), bits_of(a))


@pytest.mark.parametrize("dtype", ["f16", "bf16", "e4m3", "e5m2"])
def test_compress_negative_zero_counts_as_zero(dtype):
    f = parse_wgmma_sp(A_TYPES[dtype])
    a, _ = _sparse_dense(f)
    a = a.copy()
    a[0, :4] = np.array([1.0, -0.0, 2.0, -0.0], np.float32).astype(element_dtype(dtype))
    ac, meta = compress(a, f)
    assert meta[0, 0] == (0 | 2 << 2)


def test_compress_wrong_dtype_and_shape():
    f = parse_wgmma_sp(A_TYPES["f16"])
    with pytest.raises(DTypeError, match="a must be float16"):
        compress(np.zeros((64, 32), np.float32), f)
    with pytest.raises(InputError, match=r"shape \(\.\.\., 64, 32\)"):
        compress(np.zeros((64, 16), np.float16), f)


def test_decompress_refuses_equal_indices():
    f = parse_wgmma_sp(A_TYPES["f16"])
    meta = np.full((64, 8), 0b0100, np.uint8)
    meta[3, 2] = 0b0101
    with pytest.raises(InputError, match="same K position twice"):
        decompress(np.zeros((64, 16), np.float16), meta, f)


# ----------------------------------------------------------------------------- prune

@pytest.mark.parametrize("dtype", sorted(A_TYPES))
def test_prune_keeps_largest_magnitudes(dtype):
    f = parse_wgmma_sp(A_TYPES[dtype])
    a = _nonzero(dtype, (2, 64, f.k))
    p = prune_2_4(a, f)
    keep = 2 if f.chunk == 4 else 1
    ch = a.astype(np.float64).reshape(2, 64, f.meta_cols, f.chunk)
    pc = p.astype(np.float64).reshape(ch.shape)
    for idx in np.ndindex(ch.shape[:-1]):
        mags = np.abs(ch[idx])
        order = sorted(range(f.chunk), key=lambda i: (-mags[i], i))   # ties: lower index first
        want = np.zeros(f.chunk)
        want[order[:keep]] = ch[idx][order[:keep]]
        np.testing.assert_array_equal(pc[idx], want)
    compress(p, f)   # what prune returns compresses


def test_prune_ties_and_nan():
    f = parse_wgmma_sp(A_TYPES["f16"])
    a = np.zeros((64, 32), np.float16)
    a[0, :4] = [3, -3, 3, 1]           # ties: lower index wins -> 0, 1
    a[1, :4] = [1, np.nan, 5, 7]       # NaN counts as the largest -> 1 (NaN), 3
    a[2, :4] = [-np.inf, np.nan, 1, 2]  # NaN ties with Inf: lower index -> 0, 1
    p = prune_2_4(a, f).astype(np.float64)
    np.testing.assert_array_equal(p[0, :4], [3, -3, 0, 0])
    assert np.isnan(p[1, 1]) and p[1, 3] == 7 and p[1, 0] == 0 and p[1, 2] == 0
    assert p[2, 0] == -np.inf and np.isnan(p[2, 1]) and (p[2, 2:4] == 0).all()
    t = parse_wgmma_sp(A_TYPES["tf32"])
    x = np.zeros((64, 16), np.float32)
    x[0, :4] = [2, -2, 1, -5]
    np.testing.assert_array_equal(prune_2_4(x, t)[0, :4], [2, 0, 0, -5])


# ----------------------------------------------------------------------------- kept positions

@pytest.mark.parametrize("nib", range(16))
def test_kept_positions_every_nibble(nib):
    f = parse_wgmma_sp(A_TYPES["f16"])
    meta = np.full((64, 8), 0b0100, np.uint8)
    meta[7, 5] = nib
    pos = kept_positions(meta, f)
    assert pos.shape == (64, 16)
    assert pos[7, 10] == 20 + (nib & 3) and pos[7, 11] == 20 + (nib >> 2)   # idx0 = bits 1:0, idx1 = bits 3:2
    assert pos[0, 0] == 0 and pos[0, 1] == 1
    t = parse_wgmma_sp(A_TYPES["tf32"])
    tm = np.full((64, 8), 0b0100, np.uint8)
    tm[7, 5] = nib
    if nib in LEGAL_TF32:
        assert kept_positions(tm, t)[7, 5] == 10 + (nib == 0b1110)
    else:
        with pytest.raises(InputError, match=rf"0b{nib:04b} at row 7, pair 5"):
            kept_positions(tm, t)


def test_meta_nibble_range_and_dtype():
    f = parse_wgmma_sp(A_TYPES["f16"])
    with pytest.raises(InputError, match="0..15"):
        kept_positions(np.full((64, 8), 16, np.uint8), f)
    with pytest.raises(DTypeError, match="integer nibbles"):
        kept_positions(np.zeros((64, 8), np.float32), f)
    with pytest.raises(InputError, match=r"\(\.\.\., 64, 8\)"):
        kept_positions(np.zeros((64, 16), np.uint8), f)


# ----------------------------------------------------------------------------- metadata registers

def _holder_formula(dtype: str, sel: int, m: int, c: int) -> tuple[int, int]:
    """The H200 layout as stated in the PTX-derived lead (restated here, not imported)."""
    w, h, g = m // 16, (m % 16) // 8, m % 8
    if dtype in ("e4m3", "e5m2", "s8", "u8"):
        return 32 * w + 4 * g + h + 2 * (c >> 3), c & 7
    return 32 * w + 4 * g + (c >> 2) + 2 * sel, 4 * h + (c & 3)


@pytest.mark.parametrize("dtype,sel", [(d, s) for d in sorted(A_TYPES) for s in ((0,) if d in ("e4m3", "e5m2", "s8", "u8")
                                                                                   else (0, 1))])
def test_meta_holders_formula_and_pack_unpack(dtype, sel):
    thread, pos = meta_holders(dtype, sel)
    cols = 16 if dtype in ("e4m3", "e5m2", "s8", "u8") else 8
    assert thread.shape == pos.shape == (64, cols)
    for m in range(64):
        for c in range(cols):
            assert (thread[m, c], pos[m, c]) == _holder_formula(dtype, sel, m, c)
    # each (thread, nibble) holds at most one (row, chunk)
    assert len(set(zip(thread.ravel().tolist(), pos.ravel().tolist()))) == 64 * cols
    meta = rng.integers(0, 16, (64, cols)).astype(np.uint8)
    regs = pack_meta(meta, dtype, sel)
    for m in range(64):
        for c in range(cols):
            t, p = _holder_formula(dtype, sel, m, c)
            assert (int(regs[t]) >> (4 * p)) & 0xF == meta[m, c]
    np.testing.assert_array_equal(unpack_meta(regs, dtype, sel), meta)
    # garbage where nothing maps changes nothing; packing over garbage keeps it
    garbage = rng.integers(0, 1 << 32, 128, dtype=np.uint64).astype(np.uint32)
    dirty = pack_meta(meta, dtype, sel, fill=garbage)
    np.testing.assert_array_equal(unpack_meta(dirty, dtype, sel), meta)
    used = np.zeros(128, np.uint64)
    for t, p in zip(thread.ravel(), pos.ravel()):
        used[t] |= np.uint64(0xF) << np.uint64(4 * p)
    np.testing.assert_array_equal(dirty.astype(np.uint64) & ~used & np.uint64(0xFFFFFFFF),
                                  garbage.astype(np.uint64) & ~used & np.uint64(0xFFFFFFFF))
    fresh = regs.copy()
    fresh ^= (~used & np.uint64(0xFFFFFFFF)).astype(np.uint32)   # flip every unread bit
    np.testing.assert_array_equal(unpack_meta(fresh, dtype, sel), meta)


def test_sixteen_bit_sel0_and_sel1_use_disjoint_lanes():
    t0, _ = meta_holders("f16", 0)
    t1, _ = meta_holders("f16", 1)
    assert set((t0 % 4).ravel()) == {0, 1} and set((t1 % 4).ravel()) == {2, 3}
    t8, _ = meta_holders("e4m3", 0)
    assert set((t8 % 4).ravel()) == {0, 1, 2, 3}


def test_sp_sel_rule_errors():
    for bad in (2, -1, True, 1.0, "0"):
        with pytest.raises(InputError, match="sp_sel must be"):
            meta_holders("f16", bad)
    with pytest.raises(InputError, match="sp_sel must be 0 for e4m3"):
        meta_holders("e4m3", 1)
    with pytest.raises(InputError, match="sp_sel must be 0 for .s8"):
        wgmma_sp(A_TYPES["s8"], np.zeros((64, 32), np.int8), np.full((64, 16), 4, np.uint8),
                 np.zeros((64, 8), np.int8), sp_sel=1)
    with pytest.raises(InputError, match="sp_sel must be 0 or 1 for .tf32"):
        wgmma_sp(A_TYPES["tf32"], np.zeros((64, 8), np.float32), np.full((64, 8), 4, np.uint8),
                 np.zeros((16, 8), np.float32), sp_sel=2)
    with pytest.raises(InputError, match="sparse A type must be"):
        meta_holders("f32")


def test_pack_meta_errors():
    with pytest.raises(InputError, match=r"shape \(64, 16\)"):
        pack_meta(np.zeros((64, 8), np.uint8), "s8")
    with pytest.raises(InputError, match="0..15"):
        pack_meta(np.full((64, 8), 20, np.uint8), "f16")
    with pytest.raises(InputError, match="128 integers"):
        unpack_meta(np.zeros(64, np.uint32), "f16")
    with pytest.raises(InputError, match="fill must be an int or 128 integer registers"):
        pack_meta(np.zeros((64, 8), np.uint8), "f16", fill=np.zeros(3, np.uint32))
    with pytest.raises(InputError, match="32-bit register value"):
        pack_meta(np.zeros((64, 8), np.uint8), "f16", fill=-1)


# ----------------------------------------------------------------------------- forms table

def test_forms_table():
    assert len(WGMMA_SP_FORMS) == 528
    fams = {(f.family, f.dtype_d) for f in WGMMA_SP_FORMS}
    assert fams == {("tf32", "f32"), ("f16", "f16"), ("f16", "f32"), ("bf16", "f32"), ("fp8", "f16"), ("fp8", "f32"),
                    ("int8", "s32")}
    for f in WGMMA_SP_FORMS:
        assert f.k == {"tf32": 16, "f16": 32, "bf16": 32, "fp8": 64, "int8": 64}[f.family]
        assert f.k_compressed * 2 == f.k and f.meta_cols * f.chunk == f.k
        assert f.sp_sels == ((0,) if f.family in ("fp8", "int8") else (0, 1))
        assert parse_wgmma_sp(f.instr) is f
        assert parse_wgmma_sp(f.instr + " {d}, a, b, meta, 0, p;") is f


@pytest.mark.parametrize("instr,msg", [
    (SP + "m64n8k16.f32.f16.f16", "K must be 32"),
    (SP + "m64n8k33.f32.f16.f16", "twice a dense K"),
    (SP + "m64n7k32.f32.f16.f16", "n"),
    (SP + "m64n8k32.f32.bf16.f16", ""),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", "is not of the form"),
    ("mma.sp.sync", "is not of the form"),
    (42, "must be a string"),
])
def test_parse_wgmma_sp_errors(instr, msg):
    with pytest.raises(FormError, match=msg) as e:
        parse_wgmma_sp(instr)
    assert "\n" not in str(e.value)


# ----------------------------------------------------------------------------- the accumulator

def _family_forms(ns=(8, 24, 256)) -> list[str]:
    seen, out = set(), []
    for f in WGMMA_SP_FORMS:
        key = (f.dtype_a, f.dtype_b, f.dtype_d, f.satfinite)
        if f.n in ns and (key, f.n) not in seen:
            seen.add((key, f.n))
            out.append(f.instr)
    return out


FAMILY_FORMS = _family_forms()


def _operand(dtype: str, shape, kind: str) -> np.ndarray:
    dt = element_dtype(dtype)
    n = int(np.prod(shape))
    if dtype in ("s8", "u8"):
        lo, hi = int(np.iinfo(dt).min), int(np.iinfo(dt).max)
        v = rng.choice([lo, hi, lo + 1, hi - 1, 0], n) if kind == "extreme" else rng.integers(lo, hi + 1, n)
        return v.astype(dt).reshape(shape)
    if kind == "bits":   # every code: NaN, Inf, subnormals, -0
        w = dt.itemsize
        return rng.integers(0, 1 << (8 * w), n, dtype=np.uint64).astype(
            {1: np.uint8, 2: np.uint16, 4: np.uint32}[w]).view(dt).reshape(shape)
    if kind == "subnormal":
        tiny = float(ml_dtypes.finfo(dt).smallest_subnormal) if dtype != "tf32" else 2.0 ** -149
        return (rng.integers(-7, 8, n) * tiny).astype(np.float32).astype(dt).reshape(shape)
    e = rng.integers(-14, 14, n) if kind == "wide" else rng.integers(-2, 3, n)
    return (rng.standard_normal(n) * 2.0 ** e).astype(np.float32).astype(dt).reshape(shape)


def _case(form, kind: str, legal: bool = True):
    pool = LEGAL_TF32 if form.dtype_a == "tf32" else (LEGAL_24 if legal else np.arange(16))
    meta = rng.choice(np.asarray(pool), (64, form.meta_cols)).astype(np.uint8)
    ak = "extreme" if kind == "cancel" else kind
    a = _operand(form.dtype_a, (64, form.k_compressed), ak)
    b = _operand(form.dtype_b, (form.k, form.n), ak)
    if kind == "cancel" and form.family != "int8":
        # compressed columns 2c, 2c+1 of row m hit B rows 4c+i0, 4c+i1: make them cancel
        a[:, 1::2] = (-a[:, 0::2].astype(np.float32)).astype(a.dtype)
        pos = kept_positions(meta, form)
        for m in range(0, 64, 3):
            b[pos[m, 1::2]] = b[pos[m, 0::2]]
    if form.dtype_d == "s32":
        big = kind in ("extreme", "bits")
        c = (rng.choice([2**31 - 1, -2**31, 2**31 - 100, -2**31 + 100], (64, form.n)) if big else
             rng.integers(-1000, 1000, (64, form.n))).astype(np.int32)
    else:
        c = _operand(form.dtype_d, (64, form.n), "wide" if kind in ("wide", "bits") else kind
                     if kind == "subnormal" else "narrow")
    return a, meta, b, c


@pytest.mark.parametrize("instr", FAMILY_FORMS, ids=[i.split("aligned.")[1] for i in FAMILY_FORMS])
def test_wgmma_sp_matches_reference(instr):
    form = parse_wgmma_sp(instr)
    kinds = ["narrow", "wide", "bits", "subnormal", "cancel"] if form.family != "int8" else ["narrow", "extreme",
                                                                                               "cancel"]
    for i, kind in enumerate(kinds):
        for legal in (True, False):
            a, meta, b, c = _case(form, kind, legal)
            sa, sb = ((1, 1), (-1, 1), (1, -1), (-1, -1))[i % 4] if form.has_imm_scale else (1, 1)
            for scale_d in (True, False):
                fast = wgmma_sp(instr, a, meta, b, c, scale_d=scale_d, imm_scale_a=sa, imm_scale_b=sb)
                slow = wgmma_sp_reference(instr, a, meta, b, c, scale_d=scale_d, imm_scale_a=sa, imm_scale_b=sb)
                assert fast.dtype == element_dtype(form.dtype_d) and fast.shape == (64, form.n)
                np.testing.assert_array_equal(bits_of(fast), bits_of(np.asarray(slow).astype(fast.dtype)),
                                              err_msg=f"{kind} legal={legal} scale_d={scale_d} imm=({sa},{sb})")


def test_int8_saturation_at_int32_limits():
    """satfinite clamps, plain wraps: 127 * 127 * 32 kept products on top of C = int32 max."""
    for sat, want in ((True, 2**31 - 1), (False, None)):
        instr = SP + ("m64n8k64.satfinite.s32.s8.s8" if sat else "m64n8k64.s32.s8.s8")
        a = np.full((64, 32), 127, np.int8)
        b = np.full((64, 8), 127, np.int8)
        c = np.full((64, 8), 2**31 - 1, np.int32)
        meta = np.full((64, 16), 0b1110, np.uint8)
        d = wgmma_sp(instr, a, meta, b, c)
        exact = 2**31 - 1 + 32 * 127 * 127
        assert (d == (want if sat else np.int32(np.int64(exact) - 2**32))).all()


def test_wgmma_sp_batch_dims():
    instr = SP + "m64n16k32.f32.f16.f16"
    f = parse_wgmma_sp(instr)
    a = _operand("f16", (3, 64, 16), "narrow")
    meta = rng.choice(LEGAL_24, (3, 64, 8)).astype(np.uint8)
    b = _operand("f16", (32, 16), "narrow")
    d = wgmma_sp(instr, a, meta, b)
    assert d.shape == (3, 64, 16)
    for i in range(3):
        np.testing.assert_array_equal(bits_of(d[i]), bits_of(wgmma_sp(instr, a[i], meta[i], b)))
    with pytest.raises(InputError, match="do not broadcast"):
        wgmma_sp(instr, a, meta[:2], b)
    assert f.k == 32


def test_equal_indices_add_both_products():
    """Nibble 0b0101 (idx0 = idx1 = 1): both kept elements multiply B's row 4c+1 (H200: deterministic)."""
    instr = SP + "m64n8k32.f32.f16.f16"
    a = np.zeros((64, 16), np.float16)
    a[0, 0], a[0, 1] = 3, 5
    meta = np.full((64, 8), 0b0100, np.uint8)
    meta[0, 0] = 0b0101
    b = np.zeros((32, 8), np.float16)
    b[1] = np.arange(8)
    b[0] = 100
    d = wgmma_sp(instr, a, meta, b)
    np.testing.assert_array_equal(d[0], 8 * np.arange(8, dtype=np.float32))
    assert (d[1:] == 0).all()


def _dense_full_k(form, a_dense, b, c, scale_d, sa, sb):
    """One dense fused dot product over the whole K (the dense formula, not the sparse code)."""
    df = WgmmaForm(form.n, form.k, form.dtype_d, form.dtype_a, form.dtype_b, form.satfinite)
    cc = c if scale_d else np.zeros_like(c)
    with np.errstate(all="ignore"):
        return np.asarray(dense_reference(df, params_for(form.dense), a_dense, b, cc, sa, sb)).astype(c.dtype)


@pytest.mark.parametrize("instr", [i for i in FAMILY_FORMS if "m64n24" in i],
                         ids=[i.split("aligned.")[1] for i in FAMILY_FORMS if "m64n24" in i])
def test_sparse_equals_dense_on_decompressed_a(instr):
    """The numerics identity of the module docstring, with B's non-finite values removed."""
    form = parse_wgmma_sp(instr)
    for i, kind in enumerate(["narrow", "wide", "bits", "subnormal", "cancel"]):
        if form.family == "int8" and kind in ("bits", "subnormal"):
            kind = "extreme"
        a, meta, b, c = _case(form, kind)
        if form.family != "int8":
            bad = ~np.isfinite(b.astype(np.float64))
            b = np.where(bad, np.zeros_like(b), b).astype(b.dtype)
        sa, sb = ((1, 1), (-1, 1), (1, -1), (-1, -1))[i % 4] if form.has_imm_scale else (1, 1)
        for scale_d in (True, False):
            sp = wgmma_sp(instr, a, meta, b, c, scale_d=scale_d, imm_scale_a=sa, imm_scale_b=sb)
            dn = _dense_full_k(form, decompress(a, meta, form), b, c, scale_d, sa, sb)
            np.testing.assert_array_equal(bits_of(sp), bits_of(dn), err_msg=f"{kind} scale_d={scale_d}")


def test_sparse_differs_from_dense_only_through_inf_times_zero():
    """Where the identity stops: an Inf in a B row that row 0 drops makes the dense sum NaN."""
    instr = SP + "m64n8k32.f32.f16.f16"
    form = parse_wgmma_sp(instr)
    a = np.ones((64, 16), np.float16)
    meta = np.full((64, 8), 0b0100, np.uint8)       # keeps positions 0, 1 of every chunk
    b = np.ones((32, 8), np.float16)
    b[2, 0] = np.inf                                 # dropped by every row
    c = np.zeros((64, 8), np.float32)
    sp = wgmma_sp(instr, a, meta, b, c)
    dn = _dense_full_k(form, decompress(a, meta, form), b, c, True, 1, 1)
    assert (sp[:, 0] == 16).all() and np.isnan(dn[:, 0]).all()
    np.testing.assert_array_equal(sp[:, 1:], dn[:, 1:])


def test_tiny_terms_do_not_break_the_identity():
    """All kept products far below e_zero and C a nonzero subnormal: still identical, because a
    nonzero C's exponent (>= -126 for f32, -14 for f16) is above e_zero (-133 / -21)."""
    for instr, dt in ((SP + "m64n8k32.f32.bf16.bf16", ml_dtypes.bfloat16), (SP + "m64n8k32.f16.f16.f16", np.float16)):
        form = parse_wgmma_sp(instr)
        e = -75 if dt is ml_dtypes.bfloat16 else -12
        a = (rng.uniform(1, 2, (64, 16)) * rng.choice([-1, 1], (64, 16)) * 2.0 ** e).astype(np.float32).astype(dt)
        b = (rng.uniform(1, 2, (32, 8)) * rng.choice([-1, 1], (32, 8)) * 2.0 ** e).astype(np.float32).astype(dt)
        cdt = element_dtype(form.dtype_d)
        c = (rng.integers(1, 64, (64, 8)) * float(ml_dtypes.finfo(cdt).smallest_subnormal)).astype(cdt)
        meta = rng.choice(LEGAL_24, (64, 8)).astype(np.uint8)
        sp = wgmma_sp(instr, a, meta, b, c)
        dn = _dense_full_k(form, decompress(a, meta, form), b, c, True, 1, 1)
        np.testing.assert_array_equal(bits_of(sp), bits_of(dn))


def test_k_group_param_splits_the_kept_products():
    """The two-block alternative (which the H200 contradicts) really is a different model."""
    from dataclasses import replace
    instr = SP + "m64n32k32.f32.f16.f16"
    form = parse_wgmma_sp(instr)
    a, meta, b, c = _case(form, "wide")
    one = wgmma_sp(instr, a, meta, b, c)
    two = wgmma_sp(instr, a, meta, b, c, params=replace(params_for(form.dense), k_group=8))
    assert (bits_of(one) != bits_of(two)).any()
    with pytest.raises(InputError, match="k_group must divide"):
        wgmma_sp(instr, a, meta, b, c, params=replace(params_for(form.dense), k_group=5))


def test_wgmma_sp_argument_errors():
    instr = SP + "m64n8k32.f32.f16.f16"
    a, meta, b = np.zeros((64, 16), np.float16), np.full((64, 8), 4, np.uint8), np.zeros((32, 8), np.float16)
    with pytest.raises(DTypeError, match="a_compressed must be float16"):
        wgmma_sp(instr, a.astype(np.float32), meta, b)
    with pytest.raises(InputError, match=r"b must have shape \(\.\.\., 32, 8\)"):
        wgmma_sp(instr, a, meta, b[:16])
    with pytest.raises(InputError, match="imm_scale_a must be 1 or -1"):
        wgmma_sp(instr, a, meta, b, imm_scale_a=2)
    with pytest.raises(InputError, match="no imm-scale"):
        wgmma_sp(SP + "m64n8k64.s32.s8.s8", np.zeros((64, 32), np.int8), np.full((64, 16), 4, np.uint8),
                 np.zeros((64, 8), np.int8), imm_scale_b=-1)


# ----------------------------------------------------------------------------- machine level

def _image(a_c: np.ndarray, b: np.ndarray, b_off: int = 4096) -> tuple[np.ndarray, int, int]:
    """Shared-memory image (compressed A K-major at 0, B^T K-major at b_off, no swizzle) and
    descriptors, built from tile_image and the descriptor fields."""
    ia = tile_image(np.ascontiguousarray(a_c), "K", "none")
    ib = tile_image(np.ascontiguousarray(b.T), "K", "none")
    img = np.zeros(b_off + ib.size, np.uint8)
    img[:ia.size], img[b_off:] = ia, ib
    ea, eb = a_c.dtype.itemsize, b.dtype.itemsize
    da = MatrixDescriptor(0, 128, 128 * (a_c.shape[1] * ea // 16)).encode()
    db = MatrixDescriptor(b_off, 128, 128 * (b.shape[0] * eb // 16)).encode()
    return img, da, db


@pytest.mark.parametrize("instr", [SP + "m64n16k32.f32.f16.f16", SP + "m64n24k32.f16.f16.f16",
                                   SP + "m64n8k32.f32.bf16.bf16", SP + "m64n16k16.f32.tf32.tf32",
                                   SP + "m64n32k64.f32.e4m3.e5m2", SP + "m64n8k64.satfinite.s32.u8.s8"])
def test_registers_equal_math_level(instr):
    form = parse_wgmma_sp(instr)
    for sel in form.sp_sels:
        for rs in (False, True):
            a, meta, b, c = _case(form, "narrow" if form.family != "int8" else "extreme")
            img, da, db = _image(a, b)
            garbage = rng.integers(0, 1 << 32, 128, dtype=np.uint64).astype(np.uint32)
            mregs = pack_meta(meta, form.dtype_a, sel, fill=garbage)
            a_op = pack_a_fragment(a, form.dtype_a) if rs else da
            got = wgmma_sp_registers(instr, img, a_op, db, mregs, pack_accumulator(c, form.dtype_d), sp_sel=sel)
            want = wgmma_sp(instr, a, meta, b, c, sp_sel=sel)
            np.testing.assert_array_equal(bits_of(unpack_accumulator(got, form.n, form.dtype_d)), bits_of(want))
            if form.sp_sels == (0, 1):   # the other selector reads other lanes: the garbage
                other = wgmma_sp_registers(instr, img, a_op, db, mregs, None, sp_sel=1 - sel) if \
                    form.dtype_a != "tf32" else None
                if other is not None:
                    wrong = wgmma_sp(instr, a, unpack_meta(mregs, form.dtype_a, 1 - sel), b, None)
                    np.testing.assert_array_equal(bits_of(unpack_accumulator(other, form.n, form.dtype_d)),
                                                  bits_of(wrong))


def test_registers_errors():
    instr = SP + "m64n8k64.f32.e4m3.e4m3"
    with pytest.raises(InputError, match="imm-trans is only for f16/bf16"):
        wgmma_sp_registers(instr, np.zeros(8192, np.uint8), 0, 0, np.zeros(128, np.uint32), imm_trans_a=1)
    with pytest.raises(InputError, match=r"A registers must be uint32 of shape \(128, 4\)"):
        wgmma_sp_registers(instr, np.zeros(8192, np.uint8), np.zeros((128, 3), np.uint32), 0, np.zeros(128, np.uint32))


# ----------------------------------------------------------------------------- ptxas and sp-sel

NVCC = shutil.which("nvcc")
PTXAS_CASES = [("f16", SP + "m64n8k32.f32.f16.f16", (0, 1)), ("tf32", SP + "m64n8k16.f32.tf32.tf32", (0, 1)),
               ("e4m3", SP + "m64n8k64.f32.e4m3.e4m3", (0,)), ("s8", SP + "m64n8k64.s32.s8.s8", (0,))]


@pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH: cannot ask ptxas about sp-sel")
def test_ptxas_accepts_exactly_the_valid_sp_sel():
    """ptxas (sm_90a) accepts sp-sel 0/1 for 16-bit and tf32 and only 0 for 8-bit; refmodel's
    WgmmaSpForm.sp_sels must say the same."""
    from gpu.kernels.runtime import PRELUDE
    from gpu.kernels.sparse import SpVariant, sp_kernel_source

    jobs = []
    for tag, instr, valid in PTXAS_CASES:
        assert parse_wgmma_sp(instr).sp_sels == valid
        src = sp_kernel_source(SpVariant(instr))
        for sel in (0, 1, 2, 3):
            s = re.sub(r"(%\d+), 0, p", lambda m: f"{m.group(1)}, {sel}, p", src)
            assert s != src or sel == 0
            jobs.append((tag, sel, sel in valid, PRELUDE + s))
    with tempfile.TemporaryDirectory() as tmp:
        def build(job):
            tag, sel, _, text = job
            cu = os.path.join(tmp, f"{tag}_{sel}.cu")
            with open(cu, "w") as fh:
                fh.write(text)
            return subprocess.run([NVCC, "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-std=c++17",
                                   "-o", cu[:-3] + ".cubin", cu], capture_output=True, text=True, timeout=300)
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max(1, min(4, os.cpu_count() or 1))) as ex:
            results = list(ex.map(build, jobs))
    for (tag, sel, ok, _), r in zip(jobs, results):
        if ok:
            assert r.returncode == 0, f"{tag} sp-sel {sel}: ptxas refused a valid selector:\n{r.stderr[-2000:]}"
        else:
            assert r.returncode != 0, f"{tag} sp-sel {sel}: ptxas accepted an invalid selector"
            want = "expected to be 0 or 1" if tag in ("f16", "tf32") else "expected to be 0"
            assert want in r.stderr and f"unexpected value '{sel}'" in r.stderr, r.stderr[-2000:]
