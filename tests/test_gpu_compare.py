"""gpu.kernels.compare.differing_rows equals cupy's (a != b).any(axis=1) on every word size and shape,
with and without a skip mask (gpu marker); numpy arrays are compared on the host; its source assembles for
sm_90a (host, with nvcc)."""

import numpy as np
import pytest
from host_cxx import assemble_sm90a, needs_nvcc


@pytest.mark.gpu
@pytest.mark.parametrize("shape,dtype", [((777, 512), np.uint32), ((64, 64, 24), np.uint32), ((300, 7), np.uint32),
                                         ((129, 1000), np.uint16), ((50, 3, 5), np.uint8), ((1, 1), np.uint32),
                                         ((4096, 16384), np.uint32)], ids=str)
def test_differing_rows_is_cupys_any(shape, dtype):
    import cupy as cp

    from gpu.kernels.compare import differing_rows

    rng = np.random.default_rng(sum(shape))
    a = rng.integers(0, np.iinfo(dtype).max, shape, dtype=dtype, endpoint=True)
    b = a.copy()
    flat = b.reshape(shape[0], -1)
    for r in rng.choice(shape[0], size=max(1, shape[0] // 7), replace=False):     # one differing word each
        flat[r, rng.integers(flat.shape[1])] ^= dtype(1 << int(rng.integers(8 * np.dtype(dtype).itemsize)))
    flat[-1, -1] ^= dtype(1)                                                     # the very last word
    skip = rng.random(shape[0]) < 0.3
    da, db, ds = cp.asarray(a), cp.asarray(b), cp.asarray(skip)
    want = np.flatnonzero((a != b).reshape(shape[0], -1).any(axis=1))
    assert np.array_equal(cp.asnumpy(differing_rows(da, db)), want)
    assert np.array_equal(cp.asnumpy(differing_rows(da, db, skip=ds)), want[~skip[want]])
    assert cp.asnumpy(differing_rows(da, da)).size == 0


@pytest.mark.gpu
def test_differing_rows_refuses_mismatched_arrays():
    import cupy as cp

    from gpu.kernels.compare import differing_rows
    from refmodel.errors import InputError

    with pytest.raises(InputError, match="one shape and dtype"):
        differing_rows(cp.zeros((4, 4), cp.uint32), cp.zeros((4, 5), cp.uint32))
    with pytest.raises(InputError, match="skip must have shape"):
        differing_rows(cp.zeros((4, 4), cp.uint32), cp.zeros((4, 4), cp.uint32), skip=cp.zeros(3, bool))


@needs_nvcc
def test_the_kernel_assembles_for_sm90a(tmp_path):
    from gpu.kernels.compare import SOURCE

    r = assemble_sm90a(SOURCE, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]


def test_differing_rows_on_host_arrays():
    """numpy in (a host runner standing in for the device): the same rows, the same refusals."""
    from gpu.kernels.compare import differing_rows
    from refmodel.errors import InputError

    rng = np.random.default_rng(5)
    a = rng.integers(0, 2 ** 16, (40, 3, 8), dtype=np.uint16)
    b = a.copy()
    b[[0, 7, 39], 2, 7] ^= 1
    b[13, 0, 0] ^= 0x8000
    skip = np.zeros(40, bool)
    skip[7] = True
    assert differing_rows(a, b).tolist() == [0, 7, 13, 39]
    assert differing_rows(a, b, skip=skip).tolist() == [0, 13, 39]
    assert differing_rows(a, a).size == 0 and differing_rows(a, b).dtype == np.int64
    with pytest.raises(InputError, match="one shape and dtype"):
        differing_rows(a, b.astype(np.uint32))
    with pytest.raises(InputError, match="skip must have shape"):
        differing_rows(a, b, skip=skip[:3])
