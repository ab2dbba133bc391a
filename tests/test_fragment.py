"""Register fragment maps of wgmma: bijections, worked examples, packing round trips."""

import ml_dtypes
import numpy as np
import pytest

from refmodel.errors import DTypeError, InputError
from refmodel.layouts.fragment import (a_fragment_layout, accumulator_layout, element_dtype,
                               pack_a_fragment, pack_accumulator, render_accumulator_layout,
                               unpack_a_fragment, unpack_accumulator)
from refmodel.wgmma_forms import WGMMA_FORMS

RNG = np.random.default_rng(1234)


def _random_typed(shape, name):
    dt = element_dtype(name)
    u = {1: np.uint8, 2: np.uint16, 4: np.uint32}[dt.itemsize]
    return RNG.integers(0, np.iinfo(u).max, size=shape, dtype=u, endpoint=True).view(dt)


def _assert_bijection(rows, cols, shape):
    hits = np.zeros(shape, dtype=int)
    np.add.at(hits, (rows.ravel(), cols.ravel()), 1)
    assert (hits == 1).all(), "every element must be held by exactly one register slot"


@pytest.mark.parametrize("dtype_d", ["f32", "s32", "f16"])
@pytest.mark.parametrize("n", list(range(8, 257, 8)))
def test_accumulator_bijection(n, dtype_d):
    rows, cols = accumulator_layout(n, dtype_d)
    per = 2 if dtype_d == "f16" else 1
    assert rows.shape == (128, n // 2 // per, per)
    _assert_bijection(rows, cols, (64, n))


def test_accumulator_regs_match_form_table():
    for f in WGMMA_FORMS:
        assert accumulator_layout(f.n, f.dtype_d)[0].shape[1] == f.d_regs


@pytest.mark.parametrize("dtype_a,k,per", [("tf32", 8, 1), ("f16", 16, 2), ("bf16", 16, 2),
                                           ("e4m3", 32, 4), ("e5m2", 32, 4), ("s8", 32, 4), ("u8", 32, 4)])
def test_a_fragment_bijection(dtype_a, k, per):
    rows, cols = a_fragment_layout(dtype_a)
    assert rows.shape == (128, 4, per)
    _assert_bijection(rows, cols, (64, k))


def test_accumulator_worked_examples():
    rows, cols = accumulator_layout(8, "f32")
    # thread 0: regs 0..3 -> (0,0) (0,1) (8,0) (8,1)
    assert [(rows[0, i, 0], cols[0, i, 0]) for i in range(4)] == [(0, 0), (0, 1), (8, 0), (8, 1)]
    # thread 37: w=1 g=1 q=1 -> row 17, col 2
    assert (rows[37, 0, 0], cols[37, 0, 0]) == (17, 2)
    # thread 127: w=3 g=7 q=3 -> rows 55/63, cols 6/7
    assert [(rows[127, i, 0], cols[127, i, 0]) for i in range(4)] == [(55, 6), (55, 7), (63, 6), (63, 7)]
    rows16, cols16 = accumulator_layout(16, "f32")
    assert (rows16[0, 4, 0], cols16[0, 4, 0]) == (0, 8)  # element 4 is the next 8-column block
    rh, ch = accumulator_layout(8, "f16")
    assert [(rh[0, 0, e], ch[0, 0, e]) for e in range(2)] == [(0, 0), (0, 1)]
    assert [(rh[0, 1, e], ch[0, 1, e]) for e in range(2)] == [(8, 0), (8, 1)]


def test_a_fragment_worked_examples():
    r, c = a_fragment_layout("tf32")
    assert [(r[5, i, 0], c[5, i, 0]) for i in range(4)] == [(1, 1), (9, 1), (1, 5), (9, 5)]
    r, c = a_fragment_layout("e4m3")
    # thread 5: g=1 q=1; register 0 bytes = (1, 4..7); register 1 = row 9; register 2 = cols 20..23
    assert [(r[5, 0, e], c[5, 0, e]) for e in range(4)] == [(1, 4), (1, 5), (1, 6), (1, 7)]
    assert (r[5, 1, 0], c[5, 1, 0]) == (9, 4)
    assert (r[5, 2, 0], c[5, 2, 0]) == (1, 20)
    assert (r[5, 3, 3], c[5, 3, 3]) == (9, 23)
    r, c = a_fragment_layout("f16")
    assert [(r[0, j, 0], c[0, j, 0]) for j in range(4)] == [(0, 0), (8, 0), (0, 8), (8, 8)]


def test_pack_accumulator_bits_f16():
    m = np.zeros((64, 8), dtype=np.float16)
    m[0, 0], m[0, 1] = 1.0, -2.0  # 0x3C00, 0xC000
    regs = pack_accumulator(m, "f16")
    assert regs.shape == (128, 2) and regs.dtype == np.uint32
    assert regs[0, 0] == 0xC0003C00
    assert (np.delete(regs.ravel(), 0) == 0).all()


def test_pack_accumulator_bits_f32_s32():
    m = np.zeros((64, 16), dtype=np.float32)
    # row 9 = g + 8*((i>>1)&1) -> g=1, bit 1 of i set; col 11 = 2q + (i&1) + 8*(i>>2) -> q=1,
    # i&1 = 1, i>>2 = 1: i = 7, thread 4*g + q = 5
    m[9, 11] = 1.5
    regs = pack_accumulator(m, "f32")
    assert regs[5, 7] == np.float32(1.5).view(np.uint32)
    s = np.zeros((64, 8), dtype=np.int32)
    s[63, 7] = -1
    assert pack_accumulator(s, "s32")[127, 3] == 0xFFFFFFFF


@pytest.mark.parametrize("dtype_d", ["f32", "s32", "f16"])
@pytest.mark.parametrize("n", [8, 24, 128, 256])
def test_accumulator_round_trip_with_leading_dims(n, dtype_d):
    m = _random_typed((2, 3, 64, n), dtype_d)
    regs = pack_accumulator(m, dtype_d)
    assert regs.shape == (2, 3, 128, n // (4 if dtype_d == "f16" else 2))
    back = unpack_accumulator(regs, n, dtype_d)
    assert back.dtype == element_dtype(dtype_d)
    assert (back.view(np.uint8) == m.view(np.uint8)).all()  # bit exact, NaNs included


@pytest.mark.parametrize("dtype_a,k", [("tf32", 8), ("f16", 16), ("bf16", 16), ("e4m3", 32),
                                       ("e5m2", 32), ("s8", 32), ("u8", 32)])
def test_a_fragment_round_trip(dtype_a, k):
    a = _random_typed((5, 64, k), dtype_a)
    regs = pack_a_fragment(a, dtype_a)
    assert regs.shape == (5, 128, 4)
    assert (unpack_a_fragment(regs, dtype_a).view(np.uint8) == a.view(np.uint8)).all()


def test_a_fragment_bytes_little_endian():
    a = np.zeros((64, 32), dtype=np.uint8)
    a[0, 0:4] = [1, 2, 3, 4]
    a[8, 16:20] = [5, 6, 7, 8]
    regs = pack_a_fragment(a, "u8")
    assert regs[0, 0] == 0x04030201
    assert regs[0, 3] == 0x08070605


def test_errors():
    with pytest.raises(DTypeError):
        pack_accumulator(np.zeros((64, 8), np.float64), "f32")
    with pytest.raises(DTypeError):
        pack_a_fragment(np.zeros((64, 16), np.float16), "bf16")
    with pytest.raises(InputError):
        pack_a_fragment(np.zeros((64, 8), ml_dtypes.bfloat16), "bf16")
    with pytest.raises(InputError):
        accumulator_layout(12, "f32")
    with pytest.raises(InputError):
        accumulator_layout(8, "bf16")
    with pytest.raises(InputError):
        unpack_accumulator(np.zeros((128, 3), np.uint32), 8, "f32")


def test_render():
    text = render_accumulator_layout(8, "f16", rows=2)
    lines = text.splitlines()
    assert len(lines) == 3
    assert lines[1].split()[1:3] == ["T0:r0.0", "T0:r0.1"]
