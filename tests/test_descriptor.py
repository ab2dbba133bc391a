"""Matrix descriptors and the canonical no-swizzle K-major image."""

import ml_dtypes
import numpy as np
import pytest

from refmodel.layouts.descriptor import (MatrixDescriptor, canonical_kmajor_image, default_strides,
                                 kmajor_offsets, read_kmajor_image)
from refmodel.errors import InputError


def test_encode_fields():
    d = MatrixDescriptor(start_address=0x400, lbo=128, sbo=256)
    v = d.encode()
    assert v & 0x3FFF == 0x40
    assert (v >> 16) & 0x3FFF == 8
    assert (v >> 32) & 0x3FFF == 16
    assert v == 0x0000_0010_0008_0040
    assert int(d) == v


def test_swizzle_and_base_offset_bits():
    assert MatrixDescriptor(swizzle=1).encode() == 1 << 62
    assert MatrixDescriptor(swizzle=3).encode() == 3 << 62
    assert MatrixDescriptor(base_offset=5).encode() == 5 << 49


@pytest.mark.parametrize("fields", [(0, 0, 0, 0, 0), (0x3FFF0, 0x3FFF0, 0x3FFF0, 7, 3),
                                    (16, 2048, 8192, 1, 2), (0x1230, 128, 256, 0, 0)])
def test_round_trip(fields):
    d = MatrixDescriptor(*fields)
    assert MatrixDescriptor.decode(d.encode()) == d
    assert d.encode() < 1 << 64


def test_with_start_keeps_layout():
    t = MatrixDescriptor(0, 128, 256)
    d = t.with_start(0x200)
    assert d.encode() == t.encode() | (0x200 >> 4)


@pytest.mark.parametrize("kw", [dict(start_address=8), dict(start_address=1 << 18), dict(lbo=-16),
                                dict(sbo=24), dict(base_offset=8), dict(swizzle=4), dict(lbo=1.5)])
def test_bad_fields(kw):
    with pytest.raises(InputError):
        MatrixDescriptor(**kw)


def test_decode_rejects_reserved_bits():
    with pytest.raises(InputError):
        MatrixDescriptor.decode(1 << 14)
    with pytest.raises(InputError):
        MatrixDescriptor.decode(1 << 48)
    with pytest.raises(InputError):
        MatrixDescriptor.decode(-1)


def test_offsets_core_matrix_structure():
    off = kmajor_offsets(64, 32, lbo=128, sbo=256)
    # a core matrix (8 rows x 16 bytes) is 128 contiguous bytes, row r at 16*r
    assert (off[:8, :16].ravel() == np.arange(128)).all()
    assert off[0, 16] == 128        # K-adjacent core matrix: + LBO
    assert off[8, 0] == 256         # next 8-row group: + SBO
    assert off[63, 31] == 7 * 256 + 128 + 7 * 16 + 15
    assert np.unique(off).size == off.size == 2048


def test_default_strides():
    assert default_strides(32) == (128, 256)


@pytest.mark.parametrize("dtype,k", [(np.float32, 8), (np.float16, 16), (ml_dtypes.bfloat16, 16),
                                     (ml_dtypes.float8_e4m3fn, 32), (np.int8, 32), (np.uint8, 32)])
def test_image_round_trip(dtype, k):
    rng = np.random.default_rng(7)
    mat = rng.integers(0, 256, size=(64, k * np.dtype(dtype).itemsize), dtype=np.uint8).view(dtype)
    img, lbo, sbo = canonical_kmajor_image(mat)
    assert (lbo, sbo) == (128, 256) and img.size == 2048
    back = read_kmajor_image(img, (64, k), dtype, lbo=lbo, sbo=sbo)
    assert (back.view(np.uint8) == mat.view(np.uint8)).all()


def test_image_element_placement_f16():
    mat = np.zeros((16, 16), dtype=np.float16)
    mat[9, 10] = 1.0  # row 9: group 1, row 1 in core; col 10 -> byte 20: K-half 1, byte 4
    img, lbo, sbo = canonical_kmajor_image(mat)
    pos = np.flatnonzero(img)
    assert list(pos) == [sbo + lbo + 16 + 5]  # high byte 0x3C of 1.0 (little endian, low byte 0)
    assert img[sbo + lbo + 16 + 5] == 0x3C


def test_alternative_strides():
    rng = np.random.default_rng(3)
    mat = rng.integers(-128, 128, size=(32, 32), dtype=np.int8)
    # K-halves stored as two separate 512-byte panels
    img, lbo, sbo = canonical_kmajor_image(mat, lbo=512, sbo=128)
    assert img.size == 1024
    assert (read_kmajor_image(img, (32, 32), np.int8, lbo=512, sbo=128) == mat).all()
    # padded strides leave zero gaps
    img, _, _ = canonical_kmajor_image(mat, lbo=256, sbo=512)
    assert img.size == 3 * 512 + 256 + 128
    assert (read_kmajor_image(img, (32, 32), np.int8, lbo=256, sbo=512) == mat).all()


def test_image_errors():
    with pytest.raises(InputError):
        canonical_kmajor_image(np.zeros((12, 16), np.float16))
    with pytest.raises(InputError):
        canonical_kmajor_image(np.zeros((64, 16), np.float16), lbo=64, sbo=128)  # overlap
    with pytest.raises(InputError):
        canonical_kmajor_image(np.zeros((64, 4), np.float16))  # 8-byte rows
    with pytest.raises(InputError):
        read_kmajor_image(np.zeros(100, np.uint8), (64, 16), np.float16, lbo=128, sbo=256)
