"""The input-family catalogue (refmodel.verify.families): every engine draws exactly the families the
catalogue lists for it, under the names it lists, and the families do what they say they stress."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from refmodel.errors import InputError
from refmodel.verify import families as F
from refmodel.verify import seeded
from refmodel.verify.families import f32, gemm, matrix, operand, tile
from refmodel.wgmma_forms import parse_wgmma

BF16 = "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16"
E4M3 = "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3"
S8 = "wgmma.mma_async.sync.aligned.m64n16k32.s32.s8.s8"


def test_catalogue_is_consistent():
    used = set()
    for e in F.ENGINES:
        spell = e.names()
        assert len(set(spell)) == len(spell), f"{e.name} spells two families alike"
        for s, fam in e.families:
            assert fam in F.FAMILY, f"{e.name}:{s} names {fam}, which the catalogue lacks"
            used.add(fam)
    assert used == set(F.FAMILY), f"families no engine draws: {set(F.FAMILY) - used}"
    assert len(F.FAMILY) == len(F.CATALOGUE)
    for f in F.CATALOGUE:
        assert f.stresses and set(f.kinds) <= {"float", "int", "f32"}
    with pytest.raises(InputError, match="no input engine 'nope'"):
        F.names("nope")
    with pytest.raises(InputError, match="no input family 'nope'"):
        F.engine("tile").family("nope")


def test_every_engine_draws_what_the_catalogue_says():
    assert tuple(tile.GENERATORS) == F.names("tile")
    assert tuple(f.name for f in tile.FLOAT_FAMILIES + tile.INT_FAMILIES) == F.names("tile")
    assert seeded.FAMILIES == F.names("seeded")
    assert matrix.FAMILIES == F.names("matrix")
    assert gemm.FAMILIES == F.names("gemm")
    assert operand.FAMILIES == F.names("operand")
    assert tuple(f32.GENERATORS) == F.names("f32")
    # exactness comes from the catalogue
    assert {f.name for f in tile.FLOAT_FAMILIES + tile.INT_FAMILIES if f.exact} == \
        {s for s, fam in F.engine("tile").families if F.FAMILY[fam].exact}


def test_the_gpu_generator_takes_its_family_codes_from_the_catalogue():
    from gpu.kernels.generator import GEN_SOURCE

    for i, name in enumerate(F.names("seeded")):
        assert f"#define WG_FAM_{name.upper()} {i}\n" in GEN_SOURCE


def test_catalogue_table_lists_every_family_and_engine():
    t = F.catalogue_table()
    for f in F.CATALOGUE:
        assert f"| `{f.name}`" in t
    for e in F.ENGINES:
        assert f" {e.name} |" in t.splitlines()[0]


def _f32(x):
    return np.asarray(x).astype(np.float32)


def test_tile_families_stress_what_they_claim():
    form = parse_wgmma(BF16)
    rng = np.random.default_rng(0)
    by = {f.name: f for f in tile.families_for(form)}
    a, b, c = by["random_bits"].make(form, rng, 4, 1)
    x = _f32(a)
    assert np.isnan(x).any() and ((x != 0) & (np.abs(x) < 2.0 ** -126)).any()     # NaNs and subnormals
    a, b, c = by["finite_bits"].make(form, rng, 4, 1)
    assert np.isfinite(_f32(a)).all() and np.isfinite(_f32(b)).all()
    a, b, c = by["overflow"].make(form, rng, 4, 1)
    assert np.abs(_f32(a)).min() >= 2.0 ** 126
    a, b, c = by["zero_rows"].make(form, rng, 4, 1)
    zero_rows = (_f32(a) == 0).all(axis=-1)
    assert zero_rows.any() and np.signbit(_f32(a)[zero_rows]).any() and (~np.signbit(_f32(a)[zero_rows])).any()
    a, b, c = by["small_int"].make(form, rng, 4, 1)
    assert (_f32(a) == np.round(_f32(a))).all() and by["small_int"].exact
    ia, ib, ic = next(f for f in tile.families_for(parse_wgmma(S8)) if f.name == "int_c_limits").make(
        parse_wgmma(S8), rng, 2, 1)
    assert np.abs(ic.astype(np.int64)).min() >= 2**31 - (1 << 21) - 1


def test_matrix_families_stress_what_they_claim():
    rng = np.random.default_rng(1)
    for name in F.names("matrix"):
        a, b = matrix.make_inputs(rng, name, "bf16", 32, 16, 64)
        assert a.shape == (32, 64) and b.shape == (64, 16) and a.dtype == ml_dtypes.bfloat16
    a, b = matrix.make_inputs(rng, "cancel", "bf16", 32, 16, 64)
    prod = _f32(a).astype(np.float64)[:, :, None] * _f32(b).astype(np.float64)[None]
    assert (prod[:, 0::2] + prod[:, 1::2] == 0).all()           # each pair of products cancels exactly
    a, _ = matrix.make_inputs(rng, "zero", "e4m3", 64, 16, 256)
    assert (_f32(a) == 0).mean() > 0.9
    a, b = matrix.make_inputs(rng, "special", "f16", 64, 64, 64)
    assert np.isnan(_f32(a)).any() or np.isnan(_f32(b)).any()
    with pytest.raises(InputError, match="unknown input family 'nope'"):
        matrix.make_inputs(rng, "nope", "bf16", 8, 8, 8)


def test_gemm_operand_and_f32_families():
    class Sched:
        instr = "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"
        scale_block = 128

    rng = np.random.default_rng(2)
    for name in F.names("gemm"):
        a, b, sa, sb = gemm.make_case(rng, name, 64, 128, 256, Sched)
        assert a.shape == (64, 256) and b.shape == (128, 256) and sa.shape == (64, 2) and sb.shape == (2, 1)
    _, _, sa, sb = gemm.make_case(rng, "uniform_scales", 64, 128, 256, Sched)
    assert (sa == 1).all() and (sb == 1).all()
    a, *_ = gemm.make_case(rng, "sparse", 64, 128, 256, Sched)
    assert (a == 0).mean() > 0.8
    for name in F.names("operand"):
        x = operand.random_operand(rng, "f16", (64, 32), name)
        assert x.shape == (64, 32) and x.dtype == np.float16
    assert (operand.random_operand(rng, "bf16", (64, 32), "ints").astype(np.float32) % 1 == 0).all()
    bits = f32.GENERATORS["specials"](rng, 64)
    assert np.isnan(bits.view(np.float32)).any() and np.isinf(bits.view(np.float32)).any()


def test_seeded_families_per_tile():
    """Every batch of >= 7 tiles has every seeded family; 'zero' tiles are mostly signed zeros and
    'cancel' tiles cancel in pairs (one in 16 off by an ulp)."""
    fams = seeded.tile_families(3, 4, 7)
    assert sorted(fams.tolist()) == list(range(7))
    bits = seeded.generate(("bf16", "bf16", "f32"), 16, 16, 3, 4, 7)
    a, b, _ = seeded.typed(("bf16", "bf16", "f32"), bits)
    zero = list(fams).index(F.names("seeded").index("zero"))
    assert (_f32(a[zero]) == 0).mean() > 0.9
    cancel = list(fams).index(F.names("seeded").index("cancel"))
    ta, tb = _f32(a[cancel]).astype(np.float64), _f32(b[cancel]).astype(np.float64)
    assert (ta[:, 0::2] == ta[:, 1::2]).all()
    assert ((tb[0::2] == -tb[1::2]).mean()) > 0.8
