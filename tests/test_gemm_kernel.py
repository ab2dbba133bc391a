"""The FP8 GEMM kernel (gpu/kernels/gemm_fp8.py): its source assembles for sm_90a, its event trace passes
the pipeline checker (and its broken variants are flagged), and on an H200 it equals
refmodel.gemm with the same schedule bit for bit (gpu marker; fixtures/gemm replays in CI)."""

import shutil
import subprocess

import numpy as np
import pytest

from gpu.kernels.gemm_fp8 import GemmConfig, kernel_source, trace
from refmodel.machine.pipeline import BROKEN, check


@pytest.mark.parametrize("cfg", [GemmConfig(), GemmConfig(promote=False), GemmConfig(out="f32", stages=3)],
                         ids=["promote-bf16", "nopromote-bf16", "promote-f32-3stages"])
def test_kernel_trace_passes_the_checker(cfg):
    rep = check(trace(cfg, K=1024))
    assert not rep.errors and not rep.warnings, [h.message for h in rep.hazards][:3]
    # wait_group 0 after every k-block: at most one group in flight at any point
    assert max(rep.in_flight(i) for i in range(len(rep.events))) == 1


@pytest.mark.parametrize("broken,kind", [("lax_wait", "acc_in_flight"), ("no_proxy_fence", "generic_write_async_read"),
                                         ("early_reuse", "smem_overwrite_in_flight")])
def test_broken_kernel_variants_are_flagged(broken, kind):
    assert broken in BROKEN
    kinds = {h.kind for h in check(trace(GemmConfig(), K=1024, broken=broken)).errors}
    assert kind in kinds, kinds


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed (CUDA toolkit)")
@pytest.mark.parametrize("cfg", [GemmConfig(), GemmConfig(promote=False, out="f32")], ids=["promote-bf16", "plain-f32"])
def test_kernel_assembles_for_sm90a(cfg, tmp_path):
    from gpu.kernels.runtime import PRELUDE

    src = tmp_path / "k.cu"
    src.write_text(PRELUDE + kernel_source(cfg))
    r = subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-Xptxas", "-v",
                        "-o", str(tmp_path / "k.cubin"), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "0 bytes spill stores" in r.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("case", [(256, 384, 512, "normal", True, "bf16"), (208, 400, 1024, "bits", False, "f32"),
                                  (1008, 1040, 512, "wide", True, "f32")], ids=str)
def test_kernel_equals_refmodel_gemm(case):
    import cupy as cp

    from gpu.kernels.gemm_fp8 import gemm_fp8, reference
    from gpu.record.gemm import inputs
    from refmodel.dtypes import bits_of

    M, N, K, fam, promote, out = case
    cfg = GemmConfig(promote=promote, out=out)
    a, b, sa, sb = inputs(M, N, K, fam, 99)
    d, _ = gemm_fp8(a, b, sa if promote else None, sb if promote else None, cfg=cfg)
    ref = bits_of(reference(a, b, sa if promote else None, sb if promote else None, cfg=cfg))
    hw = cp.asnumpy(d).view(ref.dtype)
    assert np.array_equal(hw, ref), f"{int(np.count_nonzero(hw != ref))} mismatches"
