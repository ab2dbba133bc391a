"""Layouts layer and machine layer: swizzles, canonical shared-memory layouts against the PTX
ISA's worked examples, descriptors, ldmatrix/stmatrix, wgmma through descriptors, the
epilogue, TMA images.  (Hardware agreement itself is replayed from fixtures/layouts by
test_fixtures.py; these tests check the defining properties and the error rules.)"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import refmodel
from refmodel.errors import DTypeError, FormError, InputError
from refmodel.layouts.descriptor import MatrixDescriptor, describe, operand_addresses
from refmodel.layouts.smem import SmemLayout, dense_strides, rowmajor_offsets, tile_image
from refmodel.layouts.stmatrix import MATRIX_FORMS, address_givers, fragment_map, parse_matrix_instr
from refmodel.layouts.swizzle import MODES, Swizzle, atom_table, swizzle_address, swizzle_mode
from refmodel.machine.epilogue import epilogue_addresses, epilogue_stmatrix, tile_from_image
from refmodel.machine.stmatrix import ldmatrix, stmatrix
from refmodel.machine.tma import tma_load
from refmodel.machine.wgmma import read_operand, wgmma_registers, wgmma_smem

RNG_SEED = 7071


# ----------------------------------------------------------------------------- swizzle

def _cute_swizzle(x: int, b: int, m: int, s: int) -> int:
    """CuTe's definition, written independently: yyy_msk = mask(B) << (M+S); x ^ ((x & yyy) >> S)."""
    yyy = ((1 << b) - 1) << (m + s)
    return x ^ ((x & yyy) >> s)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_swizzle_is_a_permutation_of_atoms_within_each_period(mode):
    period = max(mode.period, 128)
    a = np.arange(4 * period)
    p = np.asarray(mode.swizzle(a))
    assert np.array_equal(np.sort(p), a)                      # a bijection
    assert np.array_equal(p % 16, a % 16)                     # bytes never leave their atom
    assert np.array_equal(p // 128, a // 128)                 # atoms never leave their 128-byte line
    assert all(_cute_swizzle(int(x), mode.bits, 4, 3) == int(y) for x, y in zip(a[::7], p[::7]))


def test_swizzle_worked_example_and_names():
    assert swizzle_address(0x2A0, "128B") == 0x2F0           # line 5, atom 2 -> atom 7
    assert swizzle_address(0x2A0, "none") == 0x2A0
    assert str(Swizzle(3)) == "Swizzle<3,4,3>"
    assert swizzle_mode(128).name == "128B" and swizzle_mode("64b").name == "64B"
    assert [m.desc_code for m in MODES] == [0, 3, 2, 1]       # PTX: 0 none, 1 128B, 2 64B, 3 32B
    assert [m.tma_code for m in MODES] == [0, 1, 2, 3]        # CU_TENSOR_MAP_SWIZZLE_*


def test_atom_table_128b_is_column_xor_line():
    t = atom_table("128B")
    assert np.array_equal(t, np.arange(8)[None, :] ^ np.arange(8)[:, None])
    assert np.array_equal(atom_table("32B")[:, :2], [[0, 1], [1, 0]])


def test_swizzle_errors_name_the_rule():
    with pytest.raises(InputError, match="none, 32B, 64B, 128B"):
        swizzle_mode("256B")
    with pytest.raises(InputError, match="S >= B"):
        Swizzle(3, 4, 2)


# ----------------------------------------------------------------------------- canonical layouts vs PTX ISA examples

def _cute(shape_stride, coord):
    """Evaluate a flat CuTe layout ((s0, s1, ...), strides) at a 1-D coordinate (colexicographic)."""
    shape, stride = shape_stride
    off, c = 0, coord
    for s, d in zip(shape, stride):
        off += (c % s) * d
        c //= s
    return off


@pytest.mark.parametrize("case", [
    # PTX ISA "Canonical Layouts" examples: (major, mode, elem bytes, LBO, SBO, rows, K, row mode, col mode)
    ("K", "none", 4, 64 * 4, 32 * 4, 16, 8, ((8, 2), (4, 32)), ((4, 2), (1, 64))),
    ("MN", "none", 2, 128 * 2, 64 * 2, 16, 16, ((8, 1, 2), (1, 8, 64)), ((8, 2), (8, 128))),
    ("MN", "32B", 2, 128 * 2, 256 * 2, 32, 16, ((8, 2, 2), (1, 8, 128)), ((8, 2), (16, 256))),
    ("MN", "64B", 2, 256 * 2, 512 * 2, 64, 16, ((8, 4, 2), (1, 8, 256)), ((8, 2), (32, 512))),
], ids=["K-none-tf32", "MN-none-bf16", "MN-32B-bf16", "MN-64B-bf16"])
def test_layout_matches_ptx_worked_examples(case):
    major, mode, e, lbo, sbo, rows, k, rmode, cmode = case
    off = SmemLayout(major, mode, e, lbo, sbo).offsets(rows, k)
    for r in range(rows):
        for c in range(k):
            want = (_cute(rmode, r) + _cute(cmode, c)) * e
            assert off[r, c * e] == want, (r, c)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("major,e", [("K", 1), ("K", 2), ("K", 4), ("MN", 2)])
def test_dense_layouts_cover_their_bytes_once(mode, major, e):
    rows, k = 64, 32 // e
    lbo, sbo = dense_strides(major, mode, rows, 32 if major == "K" else None)
    off = SmemLayout(major, mode, e, lbo, sbo).offsets(rows, k)
    assert np.unique(off).size == off.size
    if major == "K" and mode.bits == 0:
        assert off.max() + 1 == rows * 32          # no-swizzle K-major packs densely


def test_mn_major_needs_16_bit_elements():
    with pytest.raises(InputError, match="2-byte elements"):
        SmemLayout("MN", "128B", 1, 16, 1024)


# ----------------------------------------------------------------------------- descriptors

def test_descriptor_round_trip_and_reserved_bits():
    d = MatrixDescriptor(0x1230, 128, 1024, 3, 1)
    assert MatrixDescriptor.decode(d.encode()) == d
    assert d.encode() == (0x123 | (8 << 16) | (64 << 32) | (3 << 49) | (1 << 62))
    with pytest.raises(InputError, match="reserved bits"):
        MatrixDescriptor.decode(d.encode() | (1 << 14))
    with pytest.raises(InputError, match="multiple of 16"):
        MatrixDescriptor(0x1238)
    assert any("K step" in n for n in describe(MatrixDescriptor(0x1220, 16, 1024, 0, 1)))


def test_base_offset_reads_a_pattern_that_starts_off_its_period():
    """PTX: base offset = (pattern start >> 7) & 7 for a pattern not on its 1024-byte boundary.
    A tile swizzled relative to its own start P (as if P were aligned) reads back exactly with
    that base offset — the H200's rule (fixtures/layouts) — and not without it."""
    rng = np.random.default_rng(RNG_SEED)
    tile = rng.integers(-8, 9, (64, 64)).astype(np.float16)      # 64 rows x 128 bytes
    for mode in ("128B", "64B", "32B"):
        m = swizzle_mode(mode)
        img0 = tile_image(tile[:, :m.width // 2], "K", mode)     # rows of one swizzle width, as if at 0
        for p in range(128, m.period, 128):
            img = np.zeros(p + img0.size, np.uint8)
            img[p:] = img0
            good = MatrixDescriptor(p, 16, 8 * m.width, (p >> 7) & 7, m.desc_code)
            got = read_operand(img, good, 64, 16, "f16", major="K")
            assert np.array_equal(got, tile[:, :16]), (mode, p)
            bad = MatrixDescriptor(p, 16, 8 * m.width, 0, m.desc_code)
            assert not np.array_equal(read_operand(img, bad, 64, 16, "f16"), tile[:, :16]), (mode, p)


def test_kstep_inside_a_swizzle_row_reads_the_next_k_slice():
    """CUTLASS advances the start address by 32 bytes per K step inside a 128B swizzle row."""
    rng = np.random.default_rng(RNG_SEED + 1)
    tile = rng.integers(-8, 9, (64, 64)).astype(np.float16)
    img = tile_image(tile, "K", "128B")
    for j in range(4):
        d = MatrixDescriptor(32 * j, 16, 1024, 0, 1)
        assert np.array_equal(read_operand(img, d, 64, 16, "f16"), tile[:, 16 * j:16 * (j + 1)])


def test_operand_read_outside_the_image_names_the_descriptor():
    img = np.zeros(4096, np.uint8)
    d = MatrixDescriptor(0, 128, 256, 0, 0)
    with pytest.raises(InputError, match="B descriptor.*outside the image"):
        read_operand(img, d.with_start(3968), 64, 16, "f16", name="B")
    with pytest.raises(DTypeError, match="uint8"):
        read_operand(np.zeros(16, np.float32), d, 8, 16, "f16")


# ----------------------------------------------------------------------------- wgmma through descriptors

FORMS = [("wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16", np.float16, ("K", "MN")),
         ("wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16", ml_dtypes.bfloat16, ("K", "MN")),
         ("wgmma.mma_async.sync.aligned.m64n24k32.f16.e4m3.e5m2", None, ("K",)),
         ("wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32", np.float32, ("K",)),
         ("wgmma.mma_async.sync.aligned.m64n16k32.s32.u8.s8", None, ("K",))]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("instr,dt,majors", FORMS, ids=lambda x: x.split(".")[-3] if isinstance(x, str) else "")
def test_wgmma_smem_equals_wgmma_on_the_tiles_it_was_given(instr, dt, majors, mode):
    f = refmodel.parse_wgmma(instr)
    rng = np.random.default_rng([RNG_SEED, f.n, mode.bits])
    da_t, db_t = refmodel.dtypes.element_dtype(f.dtype_a), refmodel.dtypes.element_dtype(f.dtype_b)
    a = rng.integers(-4, 5, (64, f.k)).astype(np.float32).astype(da_t) if da_t.kind == "f" or da_t.kind == "V" \
        else rng.integers(0, 100, (64, f.k)).astype(da_t)
    b = rng.integers(-4, 5, (f.k, f.n)).astype(np.float32).astype(db_t) if db_t.kind == "f" or db_t.kind == "V" \
        else rng.integers(-100, 100, (f.k, f.n)).astype(db_t)
    for ma in majors:
        for mb in majors:
            ia, ib = tile_image(a, ma, mode), tile_image(np.ascontiguousarray(b.T), mb, mode)
            off_b = -(-ia.size // 1024) * 1024
            img = np.zeros(off_b + ib.size, np.uint8)
            img[:ia.size], img[off_b:] = ia, ib
            la, sa = dense_strides(ma, mode, 64, 32 if ma == "K" else None)
            lb, sb = dense_strides(mb, mode, f.n, 32 if mb == "K" else None)
            d = wgmma_smem(instr, img, MatrixDescriptor(0, la, sa, 0, mode.desc_code).encode(),
                           MatrixDescriptor(off_b, lb, sb, 0, mode.desc_code).encode(),
                           imm_trans_a=int(ma == "MN"), imm_trans_b=int(mb == "MN"))
            assert np.array_equal(refmodel.dtypes.bits_of(d), refmodel.dtypes.bits_of(refmodel.wgmma(instr, a, b)))


def test_wgmma_registers_rs_equals_ss():
    instr = "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16"
    rng = np.random.default_rng(RNG_SEED + 2)
    a = rng.integers(-4, 5, (64, 16)).astype(np.float16)
    b = rng.integers(-4, 5, (16, 16)).astype(np.float16)
    img = np.concatenate([tile_image(a, "K", "none"), tile_image(np.ascontiguousarray(b.T), "K", "none")])
    da, db = MatrixDescriptor(0, 128, 256).encode(), MatrixDescriptor(2048, 128, 256).encode()
    c = rng.integers(-4, 5, (64, 16)).astype(np.float32)
    creg = refmodel.layouts.fragment.pack_accumulator(c, "f32")
    ss = wgmma_registers(instr, img, da, db, creg)
    rs = wgmma_registers(instr, img, refmodel.layouts.fragment.pack_a_fragment(a, "f16"), db, creg)
    assert np.array_equal(ss, rs)
    assert np.array_equal(refmodel.layouts.fragment.unpack_accumulator(ss, 16, "f32"), refmodel.wgmma(instr, a, b, c))


def test_wgmma_smem_rules():
    img = np.zeros(8192, np.uint8)
    d = MatrixDescriptor(0, 128, 256).encode()
    with pytest.raises(InputError, match="only for f16/bf16"):
        wgmma_smem("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", img, d, d, imm_trans_a=1)
    with pytest.raises(InputError, match="0 or 1"):
        wgmma_smem("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", img, d, d, imm_trans_b=2)
    with pytest.raises(InputError, match="descriptor"):
        wgmma_smem("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", img, "0x10", d)
    with pytest.raises(FormError):
        wgmma_smem("wgmma.mma_async.sync.aligned.m64n12k16.f32.f16.f16", img, d, d)


# ----------------------------------------------------------------------------- ldmatrix / stmatrix

def test_matrix_forms_are_data_and_bad_forms_name_the_rule():
    assert len(MATRIX_FORMS) == 2 * 3 * 2 * 3
    assert parse_matrix_instr("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16").trans
    with pytest.raises(FormError, match="sm_100"):
        parse_matrix_instr("stmatrix.sync.aligned.m16n8.x1.trans.shared.b8")
    with pytest.raises(FormError, match="no f32 form"):
        parse_matrix_instr("stmatrix.sync.aligned.m8n8.x4.shared.f32")
    with pytest.raises(FormError, match="x1, .x2 or .x4"):
        parse_matrix_instr("ldmatrix.sync.aligned.m8n8.x3.shared.b16")


def test_seed_striped_register_layout_of_thread_0():
    """Seed §5.3: thread 0's x4 registers hold row 0 / cols 0-1 of the four 8x8 matrices."""
    mat, row, col = fragment_map(4, False)
    assert [(int(mat[0, j, 0]), int(row[0, j, 0]), int(col[0, j, 0]), int(col[0, j, 1])) for j in range(4)] == \
        [(0, 0, 0, 1), (1, 0, 0, 1), (2, 0, 0, 1), (3, 0, 0, 1)]
    gm, gr = address_givers(2)
    assert list(gm[:16]) == [0] * 8 + [1] * 8 and list(gr[:8]) == list(range(8)) and gm[16] == -1


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_inverts_stmatrix(num, trans):
    rng = np.random.default_rng([RNG_SEED, num, trans])
    t = ".trans" if trans else ""
    regs = rng.integers(0, 1 << 32, (32, num), dtype=np.uint64).astype(np.uint32)
    addrs = rng.permutation(64)[:32] * 16
    img = rng.integers(0, 256, 1024, dtype=np.uint8)
    out = stmatrix(f"stmatrix.sync.aligned.m8n8.x{num}{t}.shared.b16", regs, addrs, img)
    assert np.array_equal(ldmatrix(f"ldmatrix.sync.aligned.m8n8.x{num}{t}.shared.b16", addrs, out), regs)
    touched = np.zeros(1024, bool)
    for a in addrs[:8 * num]:
        touched[a:a + 16] = True
    assert np.array_equal(out[~touched], img[~touched])        # nothing else written


def test_trans_is_the_transpose_of_each_8x8_matrix():
    rng = np.random.default_rng(RNG_SEED + 3)
    img = rng.integers(0, 256, 256, dtype=np.uint8)
    addrs = np.arange(32) * 16 % 256
    plain = ldmatrix("ldmatrix.sync.aligned.m8n8.x1.b16", addrs, img)
    trans = ldmatrix("ldmatrix.sync.aligned.m8n8.x1.trans.b16", addrs, img)
    m = img[:128].view(np.uint16).reshape(8, 8)
    halves = lambda r: np.stack([r & 0xFFFF, r >> 16], -1).reshape(8, 8).astype(np.uint16)  # noqa: E731
    assert np.array_equal(halves(plain[:, 0]), m) and np.array_equal(halves(trans[:, 0]), m.T)


def test_matrix_errors():
    img = np.zeros(512, np.uint8)
    regs = np.zeros((32, 1), np.uint32)
    with pytest.raises(InputError, match="16-byte aligned"):
        stmatrix("stmatrix.sync.aligned.m8n8.x1.shared.b16", regs, np.arange(32) * 16 + 2, img)
    with pytest.raises(InputError, match="overlap"):
        stmatrix("stmatrix.sync.aligned.m8n8.x1.shared.b16", regs, np.zeros(32, int), img)
    with pytest.raises(InputError, match="outside"):
        ldmatrix("ldmatrix.sync.aligned.m8n8.x1.shared.b16", np.full(32, 512), img)
    with pytest.raises(FormError, match="expected a stmatrix"):
        stmatrix("ldmatrix.sync.aligned.m8n8.x1.shared.b16", regs, np.arange(32) * 16, img)


# ----------------------------------------------------------------------------- epilogue

@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("out_type", ["f16", "bf16"])
def test_epilogue_writes_the_converted_tile_exactly_once(mode, out_type):
    n = 128
    rng = np.random.default_rng([RNG_SEED, mode.bits])
    acc = (rng.standard_normal((64, n)) * 100).astype(np.float32)
    img, addrs = epilogue_stmatrix(acc, out_type, mode)
    dt = np.float16 if out_type == "f16" else ml_dtypes.bfloat16
    want = acc.astype(dt).view(np.uint16)      # numpy/ml_dtypes RNE casts, independent of refmodel.cvt
    assert np.array_equal(tile_from_image(img, n, out_type, mode), want)
    assert addrs.shape == (n // 16, 128) and np.all(addrs % 16 == 0)
    assert np.unique(addrs[:, ::1]).size == addrs.size // 1   # every 16-byte row segment once


def test_epilogue_rules():
    with pytest.raises(InputError, match="multiple of 16"):
        epilogue_addresses(24)
    with pytest.raises(InputError, match="f16 or bf16"):
        epilogue_stmatrix(np.zeros((64, 16), np.float32), "f32")
    with pytest.raises(InputError, match="multiple of 128 bytes"):
        rowmajor_offsets(64, 32, 2, "128B")


# ----------------------------------------------------------------------------- TMA

def test_tma_no_swizzle_is_a_dense_row_major_box_with_zero_fill():
    t = (np.arange(40 * 48) % 65521 + 1).astype(np.uint16).reshape(40, 48)
    img = tma_load(t, (8, 16), (36, 8), "none", dst=128, smem_size=1024)
    box = img[128:128 + 256].view(np.uint16).reshape(8, 16)
    assert np.array_equal(box[:4], t[36:40, 8:24]) and not box[4:].any()
    assert np.all(img[:128] == 0x5A) and np.all(img[384:] == 0x5A)


@pytest.mark.parametrize("mode", ["32B", "64B", "128B"])
def test_tma_swizzled_rows_take_a_full_swizzle_row_and_unswizzle_back(mode):
    m = swizzle_mode(mode)
    t = (np.arange(64 * 64) + 1).astype(np.uint16).reshape(64, 64)
    for cols in (8, m.width // 2):
        img = tma_load(t, (16, cols), (0, 0), mode, smem_size=16 * m.width)
        phys = np.asarray(m.swizzle(np.arange(16)[:, None] * m.width + np.arange(2 * cols)[None, :]))
        got = img[phys].view(np.uint16).reshape(16, cols)
        assert np.array_equal(got, t[:16, :cols])


def test_tma_rules():
    t = np.zeros((8, 64), np.uint16)
    with pytest.raises(InputError, match="16-byte aligned start column"):
        tma_load(t, (8, 8), (0, 3), "none")
    with pytest.raises(InputError, match="at most 64 bytes"):
        tma_load(t, (8, 64), (0, 0), "64B")
    with pytest.raises(InputError, match="multiple of 128"):
        tma_load(t, (8, 8), (0, 0), "none", dst=64)


def test_layout_fuzzer_finds_and_saves_a_planted_wrong_read(tmp_path):
    """The fuzzer's layout family, with a fake device that misreads one register of one variant."""
    from gpu.fuzz.cpu_engine import fuzz_layout
    from refmodel.verify.replay_layouts import wgmma_model

    def fake(v, arr):
        bases = np.full(len(arr["images"]), 1024, np.uint32)
        d = wgmma_model(v, arr, bases)
        d[-1, 5, 0] ^= 1
        return d, bases

    rep = fuzz_layout("layout:m64n32k32", cases=16, batch=8, out=tmp_path, hw=fake)
    assert rep.mismatches == 2 and rep.tiles == 16 and rep.repro   # one planted bit per batch
    z = np.load(rep.repro)
    assert int(np.count_nonzero(z["hardware"] != z["refmodel"])) == 1
    ok = fuzz_layout("layout:bf16", cases=16, batch=8, out=tmp_path / "ok",
                     hw=lambda v, arr: (wgmma_model(v, arr, np.zeros(len(arr["images"]), np.uint32)),
                                        np.zeros(len(arr["images"]), np.uint32)))
    assert ok.mismatches == 0 and ok.tiles == 16 and ok.outputs > 0
    with pytest.raises(InputError, match="no layout variant"):
        fuzz_layout("layout:zz", cases=1, out=tmp_path)


@pytest.mark.parametrize("rs", [False, True])
def test_tagged_identity_probe_detects_any_register_permutation(rs):
    """The fragment probe of the H200 recordings: D = tagged A (B = I).  The model passes it,
    and swapping two registers of one thread, or two threads, is caught."""
    from gpu.record import layouts as R
    from refmodel.verify.replay_layouts import fragment_identity_errors, wgmma_model

    for instr in R.FRAGMENT_INSTRS:
        arr = R.fragment_cases(instr)
        d = wgmma_model((instr, rs, 0, 0, 1, 1), arr, np.zeros(len(arr["images"]), np.uint32))
        assert fragment_identity_errors(instr, arr["a_tags"], d) == 0, instr
        regs = d.copy()
        regs[:, 5, [1, 2]] = regs[:, 5, [2, 1]]
        threads = d.copy()
        threads[:, [1, 2]] = threads[:, [2, 1]]
        assert fragment_identity_errors(instr, arr["a_tags"], regs) > 0, instr
        assert fragment_identity_errors(instr, arr["a_tags"], threads) > 0, instr


def test_make_descriptor_rules_and_k_steps():
    from refmodel.layouts.descriptor import make_descriptor

    d = make_descriptor(0x2000, swizzle="128B", rows=64, k=64, elem_bytes=2, k_step=3, smem_size=0x4000)
    assert d.start_address == 0x2060 and d.sbo == 1024 and d.swizzle == 1
    with pytest.raises(InputError, match="must start on its 1024-byte pattern.*base_offset=4"):
        make_descriptor(0x1200, swizzle="128B", rows=64, k=64, elem_bytes=2)
    ok = make_descriptor(0x1200, swizzle="128B", rows=64, k=64, elem_bytes=2, base_offset=4)
    assert ok.base_offset == 4
    with pytest.raises(InputError, match="inside one 64-byte swizzle row"):
        make_descriptor(0, swizzle="64B", rows=64, k=32, elem_bytes=2, k_step=2)
    with pytest.raises(InputError, match="past the 4096-byte shared memory"):
        make_descriptor(0, swizzle="none", rows=64, k=16, elem_bytes=2, sbo=1024, smem_size=4096)
    with pytest.raises(InputError, match="multiple of 16"):
        make_descriptor(8, rows=64, k=16, elem_bytes=2)


def test_sparse_fuzzer_shrinks_to_the_nibble_that_matters(tmp_path):
    """A fake device that reads nibble 0b1001 as 0b0110: the fuzzer finds it and the
    shrinker's reproducer names exactly that nibble (and the elements it moves)."""
    from gpu.fuzz.cpu_engine import fuzz_sparse
    from refmodel.numerics.sparse import wgmma_sp
    from refmodel.verify.shrink_sparse import load_sparse_case

    def fake(job, x):
        meta = np.where(x["meta"] == 0b1001, 0b0110, x["meta"]).astype(np.uint8)
        return wgmma_sp(job["instr"], x["a"], meta, x["b"], x["c"], sp_sel=job["sp_sel"], scale_d=bool(job["scale_d"]),
                        imm_scale_a=job["imm_scale_a"], imm_scale_b=job["imm_scale_b"])

    rep = fuzz_sparse("sparse:m64n16k32.f32.f16", cases=16, out=tmp_path, hw=fake)
    assert rep.mismatches > 0 and rep.repro
    case, hw = load_sparse_case(rep.repro)
    m, n = rep.first["output"]
    assert rep.first["nibbles"] and set(rep.first["nibbles"].values()) == {"0b1001"}
    assert all(v == 0b0100 for ch, v in enumerate(case.meta[m]) if str(ch) not in rep.first["nibbles"]
               and ch not in rep.first["nibbles"])
    assert not np.array_equal(refmodel.dtypes.bits_of(hw)[m, n], refmodel.dtypes.bits_of(case.model())[m, n])
    clean = fuzz_sparse("sparse:m64n8k16.f32.tf32", cases=16, out=tmp_path / "ok",
                        hw=lambda job, x: wgmma_sp(job["instr"], x["a"], x["meta"], x["b"], x["c"],
                                                   sp_sel=job["sp_sel"], scale_d=bool(job["scale_d"]),
                                                   imm_scale_a=job["imm_scale_a"], imm_scale_b=job["imm_scale_b"]))
    assert clean.mismatches == 0 and clean.tiles == 16
