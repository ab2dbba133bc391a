"""The user-kernel fuzzing API, without a GPU: Python 'kernels' with planted bugs."""

import ml_dtypes
import numpy as np
import pytest

from gpu.fuzz.userkernel import compare_output, fp8_kernel_schedule, fuzz_user_kernel
from gpu.kernels.demo_gemm import DemoFP8Gemm
from refmodel.errors import DTypeError, InputError

SCHED = fp8_kernel_schedule("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3", promote_every=4, out_dtype="bf16")


def correct(a, b_nk, sa, sb):
    return SCHED.expected(a, b_nk, sa, sb)


def drops_last_k_block(a, b_nk, sa, sb):
    """Forgets the last 128-wide K block (and its scales)."""
    k = a.shape[1]
    if k <= 128:
        return SCHED.expected(np.zeros_like(a), b_nk, sa, sb)
    return SCHED.expected(a[:, :k - 128], b_nk[:, :k - 128], sa[:, :-1], sb[:-1])


def test_correct_kernel_passes():
    r = fuzz_user_kernel(correct, SCHED, m=64, n=128, k=512, cases=5)
    assert r.mismatches == 0 and r.cases == 5 and r.outputs == 5 * 64 * 128


def test_dropped_k_block_is_caught_and_shrunk(tmp_path):
    r = fuzz_user_kernel(drops_last_k_block, SCHED, m=128, n=256, k=512, cases=5, out=tmp_path)
    assert r.mismatches > 0 and r.repro
    mn = r.minimal
    assert mn["m"] == 64 and mn["n"] == 128 and mn["k"] == 128  # one tile, one scale block
    assert mn["nonzero_a"] == 1 and mn["nonzero_b"] == 1
    z = np.load(r.repro)
    assert (z["got"] != z["want"]).any()


def test_shape_rules():
    with pytest.raises(InputError, match="M % 64"):
        fuzz_user_kernel(correct, SCHED, m=60, n=128, k=512)


def test_demo_kernel_source_has_the_schedule():
    src = DemoFP8Gemm(promote=4, bug="promote_interval").source()
    assert "#define STAGE_EVERY 8" in src and "m64n128k32.f32.e4m3.e4m3" in src
    assert "#define SKIP_LAST 1" in DemoFP8Gemm(bug="drop_last_k").source()


@pytest.mark.parametrize("wrong", [np.float32, np.float64])
def test_kernel_returning_another_dtype_is_refused(wrong):
    """Bit for bit includes the dtype: float32/float64 where bf16 is expected is no match,
    even when its values round to the right bf16 (they are exactly the bf16 values here)."""
    def widened(a, b_nk, sa, sb):
        return SCHED.expected(a, b_nk, sa, sb).astype(wrong)

    with pytest.raises(DTypeError, match=r"returned float(32|64) but .* expects bfloat16"):
        fuzz_user_kernel(widened, SCHED, m=64, n=128, k=512, cases=1)


def test_compare_output_is_the_comparison_step():
    want = np.zeros((2, 2), ml_dtypes.bfloat16)
    assert compare_output(want.copy(), want).ok
    with pytest.raises(DTypeError):
        compare_output(want.astype(np.float32), want)
    with pytest.raises(InputError, match="shape"):
        compare_output(np.zeros((2, 3), ml_dtypes.bfloat16), want)
