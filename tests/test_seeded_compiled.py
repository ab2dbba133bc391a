"""The compiled input generator of the device_model fixtures and the GPU engine
(:func:`refmodel.verify.seeded.generate_operand`) against its numpy formulas
(:func:`~refmodel.verify.seeded.generate_operand_formula`): every format, every operand role, every
family, tiles past 2**12 rows/columns (the hash keeps 12 bits of each) and keys above 2**63."""

import numpy as np
import pytest

from refmodel.verify.seeded import FAMILIES, FORMATS, generate_operand, generate_operand_formula, key, tile_families


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("kdim", [1, 0, -1])
def test_compiled_generator_equals_the_formulas(fmt, kdim):
    for seed, batch, tiles, rows, cols in ((1, 0, 14, 64, 32), (2026, 7, 7, 33, 17), (5, 3, 9, 16, 4100)):
        fams = tile_families(seed, batch, tiles)
        assert set(range(len(FAMILIES))) <= set(fams.tolist())
        k = key(seed, batch, kdim + 1)
        got = generate_operand(k, fams, rows, cols, kdim, fmt)
        want = generate_operand_formula(k, fams, rows, cols, kdim, fmt)
        assert got.dtype == want.dtype == np.uint32 and got.shape == want.shape
        assert np.array_equal(got, want), (fmt, kdim, seed)
    big = (1 << 64) - 12345                      # a key above 2**63
    fams = tile_families(9, 9, 7)
    assert np.array_equal(generate_operand(big, fams, 8, 8, kdim, fmt),
                          generate_operand_formula(big, fams, 8, 8, kdim, fmt))


@pytest.mark.parametrize("dtype", ["e4m3", "e5m2", "f16", "bf16"])
def test_matrix_inputs_round_like_the_casts(dtype):
    """The library-call input families round with refmodel's RNE kernel instead of the ml_dtypes /
    numpy cast; both give the same codes on every binade, on exact ties (odd and even) and on
    subnormals, inside the clipped range the families use."""
    import ml_dtypes  # noqa: F401  (element_dtype's types)

    from refmodel.dtypes import bits_of, element_dtype
    from refmodel.numerics.fp8 import round_to_format
    from refmodel.verify.families.matrix import special_values
    from refmodel.dtypes import from_bits

    rng = np.random.default_rng(34)
    fmax = float(from_bits(np.array([special_values(dtype)["max"]]), dtype).astype(np.float32)[0])
    words = rng.integers(0, 1 << 32, 1 << 21, dtype=np.uint64).astype(np.uint32)
    mbits = {"e4m3": 3, "e5m2": 2, "f16": 10, "bf16": 7}[dtype]
    half = np.uint32(1 << (22 - mbits))                          # the tie bit below the kept mantissa
    ties = (words & ~np.uint32((1 << (23 - mbits)) - 1)) | half
    x = np.concatenate([words, ties]).view(np.float32)
    x = np.clip(x[np.isfinite(x)], -fmax, fmax).astype(np.float32)
    assert np.array_equal(round_to_format(x, dtype), bits_of(x.astype(element_dtype(dtype))))


def test_narrow_family_is_the_recorded_stream():
    """_narrow with the fast rounding gives the bits of its first (cast) version on one stream."""
    from refmodel.dtypes import bits_of, element_dtype, from_bits
    from refmodel.verify.families.matrix import _narrow, special_values

    for dtype in ("e4m3", "e5m2", "f16", "bf16", "tf32"):
        got = _narrow(np.random.default_rng(5), dtype, (64, 256))
        rng = np.random.default_rng(5)
        x = rng.standard_normal((64, 256)).astype(np.float32) * np.exp2(rng.integers(-3, 5, (64, 256))).astype(np.float32)
        fmax = float(from_bits(np.array([special_values(dtype)["max"]]), dtype).astype(np.float32)[0])
        want = bits_of(np.clip(x, -fmax, fmax).astype(element_dtype(dtype)))
        assert np.array_equal(got, want), dtype
