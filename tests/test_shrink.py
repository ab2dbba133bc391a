"""Shrinking finds a minimal reproducer of a deliberately wrong 'hardware'."""

import ml_dtypes
import numpy as np
import pytest

from refmodel.verify.case import WgmmaCase, load_case, save_case
from refmodel.errors import InputError
from refmodel.verify.shrink import shrink
from refmodel.numerics.wgmma import wgmma

INSTR = "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3"


def buggy_hw(case: WgmmaCase) -> np.ndarray:
    """A 'device' that flushes subnormal C to zero before adding (a plausible bug)."""
    c = case.c.copy()
    c[np.abs(c) < np.float32(2.0 ** -126)] = 0
    return case.with_(c=c).model()


def mismatch(case):
    return buggy_hw(case).view(np.uint32) != case.model().view(np.uint32)


def random_case(rng, chain=2):
    a = rng.integers(-20, 20, (3, 64, 32 * chain)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    b = rng.integers(-20, 20, (3, 32 * chain, 64)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    c = rng.standard_normal((3, 64, 64)).astype(np.float32)
    c[1, 17, 40] = np.float32(3e-39)  # one subnormal C in tile 1 ...
    a[1, 17, :] = 0  # ... with nothing beside it in its dot product, so it shows in D
    return WgmmaCase(INSTR, a, b, c, chain=chain)


def test_shrinks_to_one_subnormal_c():
    rng = np.random.default_rng(0)
    case = random_case(rng)
    assert mismatch(case).any()
    r = shrink(case, mismatch)
    m = r.case
    assert mismatch(m).any()
    assert m.form.n == 8 and m.chain == 1 and m.a.shape[0] == 1
    assert m.nonzeros() == 1 and np.count_nonzero(m.c) == 1  # only the subnormal C remains
    assert abs(float(m.c[np.nonzero(m.c)][0])) < 2.0 ** -126
    assert r.calls < 400 and any("N 64 -> 8" in s for s in r.log)


def test_replay_file_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    case = random_case(rng, chain=1)
    r = shrink(case, mismatch)
    p = save_case(tmp_path / "repro.npz", r.case, hardware=buggy_hw(r.case))
    back, hw = load_case(p)
    assert back.config() == r.case.config()
    assert np.array_equal(back.c.view(np.uint32), r.case.c.view(np.uint32))
    assert (hw.view(np.uint32) != back.model().view(np.uint32)).any()


def test_refuses_a_passing_case():
    rng = np.random.default_rng(2)
    case = random_case(rng)
    case.c[1, 17, 40] = 1.0
    with pytest.raises(InputError, match="does not fail"):
        shrink(case, mismatch)
