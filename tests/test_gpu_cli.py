"""On an H200: the verifying commands end to end, and GPU-resident inputs (gpu marker)."""

import json
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

pytestmark = pytest.mark.gpu

INSTR = "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e5m2"


def wgref(*args):
    return subprocess.run([sys.executable, "-m", "wgref.cli", *args], capture_output=True, text=True)


def test_fuzz_command_json(tmp_path):
    r = wgref("fuzz", INSTR, "--cases", "96", "--seed", "5", "--out", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads(r.stdout)
    assert rep["outputs"] >= 96 * 64 * 64 and rep["mismatches"] == 0
    r2 = wgref("fuzz", INSTR, "--cases", "192", "--seed", "5", "--out", str(tmp_path), "--resume")  # tqdm bar
    assert r2.returncode == 0 and " 0 mismatches" in r2.stdout, r2.stdout + r2.stderr[-2000:]
    lines = (tmp_path / "journal.jsonl").read_text().splitlines()
    assert sum(json.loads(x).get("tiles", 0) for x in lines[1:]) >= 192


def test_replay_command_reruns_on_the_gpu(tmp_path):
    from refmodel.verify.case import WgmmaCase, save_case
    from gpu.kernels.wgmma import run_case

    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (2, 64, 64), dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    b = rng.integers(0, 256, (2, 64, 64), dtype=np.uint8).view(ml_dtypes.float8_e5m2)
    c = rng.standard_normal((2, 64, 64)).astype(np.float32)
    case = WgmmaCase(INSTR, a, b, c, rs=True, chain=2, imm_scale_b=-1)
    p = save_case(tmp_path / "case.npz", case, hardware=run_case(case))
    r = wgref("replay", str(p), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    reps = json.loads(r.stdout)["reports"]
    assert len(reps) == 2 and all(x["mismatches"] == 0 for x in reps)  # recorded and live


def test_cupy_and_torch_cuda_inputs():
    import cupy as cp

    import refmodel

    x = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    assert np.array_equal(refmodel.encode(cp.asarray(x), "e4m3"), refmodel.encode(x, "e4m3"))
    back = refmodel.encode(cp.asarray(x), "e4m3", as_framework=True)
    assert isinstance(back, cp.ndarray) and np.array_equal(back.get(), refmodel.encode(x, "e4m3"))
    torch = pytest.importorskip("torch")
    a = torch.randn(64, 32, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(32, 8, device="cuda").to(torch.float8_e4m3fn)
    d = refmodel.wgmma("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", a, b, as_framework=True)
    assert d.device.type == "cuda" and d.dtype == torch.float32
    ref = refmodel.wgmma("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", a.cpu(), b.cpu())
    assert np.array_equal(d.cpu().numpy().view(np.uint32), ref.view(np.uint32))


def test_fuzz_command_cvt(tmp_path):
    r = wgref("fuzz", "cvt", "--cases", "4096", "--seed", "2", "--out", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads(r.stdout)
    assert rep["outputs"] >= 4096 * 1024 and rep["mismatches"] == 0
