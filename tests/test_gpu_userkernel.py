"""On an H200: the demo DeepGEMM-style kernel matches refmodel.numerics.gemm bit for bit, and its
planted bugs are caught and shrunk (gpu marker)."""

import pytest

from gpu.fuzz.userkernel import fuzz_user_kernel
from gpu.kernels.demo_gemm import DemoFP8Gemm

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("out", ["f32", "bf16"])
def test_demo_kernel_matches_schedule(out):
    k = DemoFP8Gemm(out=out)
    r = fuzz_user_kernel(k, k.schedule, m=128, n=256, k=1024, cases=10, shrink=False)
    assert r.mismatches == 0, r.first


@pytest.mark.parametrize("bug", ["drop_last_k", "promote_interval"])
def test_planted_bugs_are_caught(bug, tmp_path):
    k = DemoFP8Gemm(out="bf16", bug=bug)
    r = fuzz_user_kernel(k, DemoFP8Gemm(out="bf16").schedule, m=128, n=256, k=1024, cases=10, out=tmp_path)
    assert r.mismatches > 0 and r.minimal["m"] == 64 and r.repro
    # docs/verifier.md: "two planted bugs are caught and shrunk to one nonzero input per operand"
    assert r.minimal["nonzero_a"] == 1 and r.minimal["nonzero_b"] == 1, r.shrink_log
