"""The compiled draws (refmodel.verify.families.draws) are the Generator's own: same numbers, same
stream position after, for every method, bound and shape the input families use."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from refmodel.verify.families import draws, matrix, pcg64

NUMPY_DRAWS = SimpleNamespace(standard_normal=lambda rng, shape: rng.standard_normal(shape),
                              integers=lambda rng, lo, hi, shape: rng.integers(lo, hi, shape),
                              random=lambda rng, shape: rng.random(shape))


@pytest.mark.parametrize("seed", [0, 7, 20261206, [3, 1]])
def test_each_draw_is_the_generators_and_keeps_the_stream(seed):
    ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
    bounds = [(-3, 5), (0, 2), (0, 5), (1, 8), (1, 4), (0, 1 << 10), (1, 1 << 23), (113, 142), (0, 1 << 31),
              (-(1 << 40), 1 << 40), (5, 6)]
    shapes = [(0,), (1,), (7,), (3, 5), (64, 129), (1 << 14,)]
    for i in range(60):                        # interleaved: each call continues the other's stream
        shape = shapes[i % len(shapes)]
        kind = i % 3
        if kind == 0:
            a, b = draws.standard_normal(ours, shape), theirs.standard_normal(shape)
        elif kind == 1:
            lo, hi = bounds[i % len(bounds)]
            a, b = draws.integers(ours, lo, hi, shape), theirs.integers(lo, hi, shape)
        else:
            a, b = draws.random(ours, shape), theirs.random(shape)
        assert a.shape == b.shape and a.dtype == b.dtype
        assert np.array_equal(a.view(np.uint64) if a.dtype == np.float64 else a,
                              b.view(np.uint64) if b.dtype == np.float64 else b), (i, shape)
        # the narrow forms: integers as uint8 / uint16, doubles only compared, float32 normals
        if kind == 0:
            a, b = pcg64.standard_normal(ours, _n(shape), np.float32), theirs.standard_normal(_n(shape))
            b = b.astype(np.float32)
        elif kind == 1:
            lo, hi = (0, 2) if i % 2 else (1, 1 << 10)
            dt = np.uint8 if hi <= 256 else np.uint16
            a, b = draws.integers(ours, lo, hi, shape, dt), theirs.integers(lo, hi, shape).astype(dt)
        else:
            thr = (0.75, 1 / 64, 31 / 32)[i % 3]
            a, b = draws.below(ours, thr, shape), theirs.random(shape) < thr
        assert a.shape == b.shape and a.dtype == b.dtype
        assert np.array_equal(a.view(np.uint64) if a.dtype == np.float64 else a,
                              b.view(np.uint64) if b.dtype == np.float64 else b), (i, shape)
    assert ours.bit_generator.state == theirs.bit_generator.state
    assert ours.integers(0, 1 << 62) == theirs.integers(0, 1 << 62)


def _n(shape) -> int:
    return int(np.prod(shape))


@pytest.mark.parametrize("seed", [1, 99])
def test_scale_by_integers_is_the_drawn_exponents_applied(seed):
    """pcg64.scale_by_integers (draw and scale in one pass) is clip(x * table[integers(low, high)]) and
    leaves the stream where the integers call would; a range it does not cover leaves x alone."""
    ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
    table = np.exp2(np.arange(-3, 5)).astype(np.float32)
    for n in (0, 1, 13, 5000):
        x = (theirs.standard_normal(n) * 300).astype(np.float32)
        ours.standard_normal(n)
        want = np.clip(x * table[theirs.integers(-3, 5, n) + 3], np.float32(-448), np.float32(448))
        assert pcg64.scale_by_integers(ours, x, -3, 5, table, 448.0)
        assert np.array_equal(x.view(np.uint32), want.view(np.uint32))
    assert ours.bit_generator.state == theirs.bit_generator.state
    y = np.ones(4, np.float32)
    assert not pcg64.scale_by_integers(ours, y, 0, 1 << 33, table, 1.0)       # a range of 2**33 values
    assert not pcg64.scale_by_integers(np.random.Generator(np.random.Philox(1)), y, -3, 5, table, 1.0)
    assert np.array_equal(y, np.ones(4, np.float32)) and ours.bit_generator.state == theirs.bit_generator.state


@pytest.mark.parametrize("dtype", ["e4m3", "e5m2", "f16", "bf16", "tf32", "f32"])
def test_matrix_families_draw_what_numpy_draws(dtype, monkeypatch):
    """make_inputs (compiled draws and kernels) gives the same matrices, call after call, as its numpy
    formulas through the Generator's methods (every family, odd shapes, K = 1536 puts the special
    family at its 1/K rate)."""
    seq = [(fam, 64, 24, 1536) for fam in matrix.FAMILIES] + [(fam, 3, 5, 8) for fam in matrix.FAMILIES]
    ours, theirs = np.random.default_rng(34), np.random.default_rng(34)
    got = [matrix.make_inputs(ours, c[0], dtype, *c[1:]) for c in seq]
    monkeypatch.setattr(matrix, "draws", NUMPY_DRAWS)
    monkeypatch.setattr(matrix, "_operand", matrix._operand_formula)
    want = [matrix.make_inputs(theirs, c[0], dtype, *c[1:]) for c in seq]
    for (fam, *_), (ga, gb), (wa, wb) in zip(seq, got, want):
        for g, w in ((ga, wa), (gb, wb)):
            assert g.dtype == w.dtype and np.array_equal(g.view(np.uint8), w.view(np.uint8)), (fam, dtype)


@pytest.mark.parametrize("dtype", ["e4m3", "e5m2", "f16", "bf16", "f32"])
def test_prune_rows_2_4_is_the_stable_argsort_rule(dtype):
    """The compiled rank rule keeps what a stable descending argsort of each group keeps: ties (many
    equal magnitudes, +-0), NaN as the largest, Inf, in every position of the group; and on random
    codes (NaN payloads of both signs, subnormals)."""
    from refmodel.dtypes import element_dtype
    from refmodel.verify.seeded import prune_rows_2_4, prune_rows_2_4_formula

    rng = np.random.default_rng(24)
    pool = np.array([0.0, -0.0, 1.0, -1.0, 2.0, 0.5, np.nan, -np.inf, np.inf, 3.0, -3.0], np.float32)
    if dtype == "e4m3":
        pool = pool[np.isfinite(pool) | np.isnan(pool)]
    a = rng.choice(pool, (37, 256)).astype(element_dtype(dtype))
    b = (rng.standard_normal((5, 64)) * 4).astype(np.float32).astype(element_dtype(dtype))
    w = np.dtype(element_dtype(dtype)).itemsize
    c = rng.integers(0, 1 << (8 * w), (41, 128), dtype=np.uint64).astype(f"u{w}").view(element_dtype(dtype))
    small = rng.integers(0, 4, (41, 128)).astype(f"u{w}") | (rng.integers(0, 2, (41, 128)).astype(f"u{w}") << (8 * w - 1))
    d = np.where(rng.random((41, 128)) < 0.5, c.view(f"u{w}"), small).view(element_dtype(dtype))  # many ties
    for x in (a, b, c, d):
        got, want = prune_rows_2_4(x), prune_rows_2_4_formula(x)
        assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8), want.view(np.uint8))


def test_other_bit_generators_and_ranges_fall_back_to_numbas_draws():
    """Philox is not inlined (numba's Generator methods draw), nor are ranges of one value or of 2**32
    and more: the numbers and the stream are numpy's all the same."""
    from refmodel.verify.families import pcg64

    ours, theirs = np.random.Generator(np.random.Philox(5)), np.random.Generator(np.random.Philox(5))
    assert pcg64.random(ours, 4) is None
    for _ in range(3):
        assert np.array_equal(draws.standard_normal(ours, (100,)), theirs.standard_normal(100))
        assert np.array_equal(draws.integers(ours, -3, 5, (100,)), theirs.integers(-3, 5, 100))
        assert np.array_equal(draws.integers(ours, 0, 200, (100,), np.uint8), theirs.integers(0, 200, 100))
        assert np.array_equal(draws.below(ours, 0.25, (100,)), theirs.random(100) < 0.25)
    assert ours.integers(0, 1 << 62, 4).tolist() == theirs.integers(0, 1 << 62, 4).tolist()
    ours, theirs = np.random.default_rng(9), np.random.default_rng(9)
    for lo, hi in ((5, 6), (0, 1 << 32), (-(1 << 40), 1 << 40), (0, (1 << 32) - 1)):
        assert np.array_equal(draws.integers(ours, lo, hi, (50,)), theirs.integers(lo, hi, 50))
        assert np.array_equal(draws.random(ours, (7,)), theirs.random(7))
    assert ours.bit_generator.state == theirs.bit_generator.state
