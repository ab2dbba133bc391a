"""refmodel.golden.triton_matmul: the schedules that reproduce Triton's tiled matmul (fixtures/triton
replays the H200 recordings in test_fixtures.py); here the schedule identities and the refusals."""

import ml_dtypes
import numpy as np
import pytest

import refmodel
from refmodel.dtypes import bits_of
from refmodel.errors import DTypeError, InputError
from refmodel.golden import triton_matmul

RNG = np.random.default_rng(11)


def _fp8(shape):
    return (RNG.standard_normal(shape) * 2.0 ** RNG.integers(-4, 5, shape)).clip(-400, 400).astype(ml_dtypes.float8_e4m3fn)


@pytest.mark.parametrize("imp,block_k,every", [(32, 128, 1), (64, 128, 2), (128, 128, 4), (256, 128, 4), (64, 64, 2)])
def test_fp8_promotes_every_min_of_imprecise_and_block(imp, block_k, every):
    a, b = _fp8((64, 512)), _fp8((512, 16))
    want = refmodel.gemm(a, b, instr="wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", promote_every=every)
    got = triton_matmul(a, b, block_k=block_k, max_num_imprecise_acc=imp)
    assert np.array_equal(bits_of(got), bits_of(want))
    chain = refmodel.gemm(a, b, instr="wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3")
    assert not np.array_equal(bits_of(got), bits_of(chain))  # the promotion is visible on these inputs


def test_f16_bf16_tf32_are_plain_chains_and_block_k_does_not_matter():
    for dt, instr in ((np.float16, "m64n8k16.f32.f16.f16"), (ml_dtypes.bfloat16, "m64n8k16.f32.bf16.bf16"),
                      (np.float32, "m64n8k8.f32.tf32.tf32")):
        a = RNG.standard_normal((64, 256)).astype(dt)
        b = RNG.standard_normal((256, 8)).astype(dt)
        want = refmodel.gemm(a, b, instr="wgmma.mma_async.sync.aligned." + instr)
        for bk in (32, 64, 128):
            assert np.array_equal(bits_of(triton_matmul(a, b, block_k=bk)), bits_of(want))
    out = triton_matmul(a, b, block_k=32, out_dtype=ml_dtypes.bfloat16)
    assert out.dtype == ml_dtypes.bfloat16


def test_unmodelled_paths_are_refused_with_the_reason():
    a, b = _fp8((64, 128)), _fp8((128, 8))
    with pytest.raises(InputError, match="mma.sync"):
        triton_matmul(a, b, block_k=64, max_num_imprecise_acc=0)
    with pytest.raises(InputError, match="default"):
        triton_matmul(a, b, block_k=64)
    x = np.zeros((64, 64), np.float32)
    for prec in ("tf32x3", "ieee"):
        with pytest.raises(InputError, match=prec):
            triton_matmul(x, x, block_k=32, input_precision=prec)
    with pytest.raises(InputError, match="block_k"):
        triton_matmul(x, x, block_k=48)
    with pytest.raises(DTypeError):
        triton_matmul(x, x.astype(np.float16), block_k=32)
