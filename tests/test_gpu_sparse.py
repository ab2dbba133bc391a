"""On an H200: sparse wgmma (every family, SS and RS, both sp-sel values, any-nibble metadata,
garbage in the metadata lanes not read) against refmodel.wgmma_sp, the tagged probes of the
metadata layout, and `wgref fuzz sparse` end to end (gpu marker)."""

import numpy as np
import pytest

from gpu.record import sparse as R
from refmodel.dtypes import bits_of
from refmodel.layouts.fragment import unpack_accumulator
from refmodel.numerics.sparse import wgmma_sp
from refmodel.verify.replay_sparse import probe_model
from refmodel.wgmma_sp_forms import parse_wgmma_sp

pytestmark = pytest.mark.gpu

JOBS = [j for j in R.plan_jobs() if j["instr"].split("aligned.")[1].startswith(("m64n8k", "m64n136k", "m64n256k"))]


@pytest.mark.parametrize("job", JOBS[::3], ids=lambda j: f"{j['instr'].split('aligned.')[1]}-rs{int(j['rs'])}-sel{j['sp_sel']}")
def test_sparse_job_matches_refmodel(job):
    from gpu.kernels.sparse import SpVariant, run_wgmma_sp

    f = parse_wgmma_sp(job["instr"])
    x = R.job_inputs(job, seed=("test", 1))
    v = SpVariant(job["instr"], job["rs"], job["sp_sel"], 0, 0, job["imm_scale_a"], job["imm_scale_b"])
    d, _ = run_wgmma_sp(v, x["images"], x["desc_a"], x["desc_b"], x["meta_regs"], x["c_regs"],
                        np.full(R.TILES, job["scale_d"], np.int32), x["a_regs"] if job["rs"] else None)
    hw = unpack_accumulator(d, f.n, f.dtype_d)
    m = wgmma_sp(job["instr"], x["a"], x["meta"], x["b"], x["c"], sp_sel=job["sp_sel"], scale_d=bool(job["scale_d"]),
                 imm_scale_a=job["imm_scale_a"], imm_scale_b=job["imm_scale_b"])
    bad = np.argwhere(bits_of(hw) != bits_of(m))
    assert bad.size == 0, f"{len(bad)} mismatches, first (tile, row, col) {bad[0].tolist()}"


@pytest.mark.parametrize("probe", [p for p in R.PROBES if "tf32" not in p[0]], ids=lambda p: f"{p[0].split('aligned.')[1]}-rs{int(p[1])}-sel{p[2]}")
def test_tagged_probe_any_nibble(probe):
    from gpu.kernels.sparse import SpVariant, run_wgmma_sp

    instr, rs, sel = probe
    arr = R.probe_cases(instr, 4, illegal=True, tag="gpu-test")
    d, bases = run_wgmma_sp(SpVariant(instr, rs, sel), arr["images"], arr["desc_a"], arr["desc_b"], arr["meta"],
                            arr["c_regs"], arr["scale_d"], arr["a_regs"] if rs else None)
    assert np.array_equal(d, probe_model({"instr": instr, "rs": rs, "sp_sel": sel}, arr, bases))


def test_fuzz_sparse_end_to_end(tmp_path):
    from gpu.fuzz.cpu_engine import fuzz_sparse

    rep = fuzz_sparse("sparse:m64n64k", cases=64, seed=3, out=tmp_path)
    assert rep.tiles == 64 and rep.outputs > 0 and rep.mismatches == 0 and rep.repro is None


@pytest.mark.parametrize("chain", R.CHAINS[::2], ids=lambda c: f"{c[3]}x{c[0].split('aligned.')[1]}-rs{int(c[1])}")
def test_sparse_chain_matches_gemm_sp(chain):
    from gpu.kernels.sparse import SpVariant, run_wgmma_sp
    from refmodel.numerics.sparse import gemm_sp

    instr, rs, sel, n = chain
    f = parse_wgmma_sp(instr)
    x = R.chain_cases(instr, rs, sel, n, 4)
    d, _ = run_wgmma_sp(SpVariant(instr, rs, sel, chain=n), x["images"], x["desc_a"], x["desc_b"], x["meta_regs"],
                        x["c_regs"], np.ones(4, np.int32), x["a_regs"] if rs else None, a_step=x["a_step"],
                        b_step=x["b_step"])
    hw = unpack_accumulator(d, f.n, f.dtype_d)
    m = np.stack([gemm_sp(instr, x["a"][i], x["meta"][i], x["b"][i], x["c"][i], sp_sel=sel) for i in range(4)])
    assert np.array_equal(bits_of(hw), bits_of(m.astype(hw.dtype)))
