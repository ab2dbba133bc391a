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
