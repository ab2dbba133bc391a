"""Triton 3.6's tl.dot lowering on sm_90 by configuration: the rule against every surveyed PTX, the golden
model's choice of path, its refusals, and the recordings (fixtures/triton/lowering.npz)."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from refmodel.dtypes import bits_of
from refmodel.errors import InputError
from refmodel.golden import triton_lowering, triton_matmul

ROOT = Path(__file__).resolve().parent.parent
SURVEY = json.loads((ROOT / "docs" / "data" / "triton_lowering_survey.json").read_text())
E4, E5 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
DT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "e4m3": E4, "e5m2": E5}
# the survey's options: (A, B, input_precision, max_num_imprecise_acc (-1: not passed), accumulator)
OPTIONS = {"f16": ("f16", "f16", "none", -1, "f32"), "bf16": ("bf16", "bf16", "none", -1, "f32"),
           "tf32": ("f32", "f32", "tf32", -1, "f32"), "e4m3": ("e4m3", "e4m3", "none", -1, "f32"),
           "e4m3_imp0": ("e4m3", "e4m3", "none", 0, "f32"), "f16_acc16": ("f16", "f16", "none", -1, "f16")}


def _lower(r):
    ta, tb, prec, imp, acc = OPTIONS[r["opt"]]
    return triton_lowering(DT[ta], DT[tb], block_m=r["BM"], block_n=r["BN"], block_k=r["BK"], num_warps=r["warps"],
                           input_precision="tf32" if prec == "none" else prec,
                           max_num_imprecise_acc=None if imp == -1 else imp,
                           acc_dtype=np.float16 if acc == "f16" else np.float32, pattern=r["pattern"])


def _in_domain(r) -> bool:
    import importlib

    m = importlib.import_module("refmodel.golden.triton_lowering")   # the module (the package exports the function)
    return (r["BM"] in m.BLOCK_M and r["BN"] in m.BLOCK_N and r["BK"] in m.BLOCK_K and r["warps"] in m.NUM_WARPS
            and r["stages"] in m.NUM_STAGES and "error" not in r)


def test_the_rule_names_the_ptx_of_every_surveyed_configuration():
    rows = [r for r in SURVEY["configs"] if _in_domain(r)]
    assert len(rows) >= 296 and SURVEY["triton"] == "3.6.0"
    paths = set()
    for r in rows:
        low = _lower(r)
        want = set(r["mma"]) or ({"fma.rn.f32"} if r["fma_f32"] else set())
        assert want == {low.instr}, (r, low)
        assert low.fp8_upcast == (r["fp8_cvt"] > 0) and low.slice_add == (r["add_f32"] > 0), (r, low)
        assert r["tf32_cvt"] == 0                       # tf32 reads raw f32 bits on both paths
        paths.add((r["opt"], low.path))
    assert ("e4m3", "wgmma") in paths and ("e4m3", "mma.sync") in paths and ("e4m3_imp0", "wgmma") not in paths


def test_outside_the_survey_is_refused_in_one_sentence():
    a = np.zeros((64, 64), E4)
    for kw, what in ((dict(block_m=512), "block_m=512"), (dict(num_warps=16), "num_warps=16"),
                     (dict(num_stages=7), "num_stages=7"), (dict(block_k=512), "block_k=512")):
        cfg = dict(block_m=64, block_n=64, num_warps=4, block_k=64) | kw
        with pytest.raises(InputError, match=what) as e:
            triton_lowering(E4, E4, **cfg)
        assert "\n" not in str(e.value) and "not surveyed" in str(e.value)
    with pytest.raises(InputError, match="does not compile"):
        triton_lowering(E4, E4, block_m=64, block_n=64, num_warps=4, block_k=16)   # Triton refuses it too
    with pytest.raises(InputError, match="give block_m, block_n and num_warps"):
        triton_matmul(a, a, block_k=64)                 # FP8: the path decides the bits
    with pytest.raises(InputError, match="together"):
        triton_matmul(a, a, block_k=64, block_m=64)
    with pytest.raises(InputError, match="f16 accumulator was not recorded"):
        triton_matmul(a, a, block_k=64, block_m=32, block_n=64, num_warps=4, pattern="add", acc_dtype=np.float16)


def _fp8_inputs(seed=3):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((64, 256)) * 2.0 ** rng.integers(-6, 6, (64, 256))).clip(-448, 448).astype(E4)
    b = (rng.standard_normal((256, 16)) * 2.0 ** rng.integers(-6, 6, (256, 16))).clip(-448, 448).astype(E4)
    return a, b


def test_fp8_small_tiles_take_the_f16_mma_sync_path_and_differ_from_wgmma():
    a, b = _fp8_inputs()
    v3 = triton_matmul(a, b, block_k=64, block_m=64, block_n=64, num_warps=4)
    v2 = triton_matmul(a, b, block_k=64, block_m=32, block_n=64, num_warps=4)
    v2w2 = triton_matmul(a, b, block_k=64, block_m=64, block_n=64, num_warps=2)
    imp0 = triton_matmul(a, b, block_k=64, max_num_imprecise_acc=0)          # always MMAv2: no tile needed
    assert np.array_equal(bits_of(v2), bits_of(v2w2)) and np.array_equal(bits_of(v2), bits_of(imp0))
    assert np.mean(bits_of(v2) != bits_of(v3)) > 0.5                     # the 13-bit window vs f16 HMMA
    # the f16 path is closer to the exact sum than the FP8 wgmma chain
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(v2 - exact).mean() < np.abs(v3 - exact).mean()


def test_add_pattern_is_folded_unless_fp8_imprecise():
    a, b = _fp8_inputs(5)
    cfg = dict(block_k=64, block_m=64, block_n=64, num_warps=4)
    add, dot = (triton_matmul(a, b, pattern=p, **cfg) for p in ("add", "dot_acc"))
    # acc += dot: each BLOCK_K slice is a fresh wgmma chain from +0, then add.f32
    from refmodel.numerics.gemm import gemm

    acc = np.zeros((64, 16), np.float32)
    for k0 in range(0, 256, 64):
        acc = (acc + gemm(a[:, k0:k0 + 64], b[k0:k0 + 64], instr="wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3")
               ).astype(np.float32)
    assert np.array_equal(bits_of(add), bits_of(acc)) and not np.array_equal(bits_of(add), bits_of(dot))
    f16 = (a.astype(np.float16), b.astype(np.float16))
    assert np.array_equal(bits_of(triton_matmul(*f16, pattern="add", **cfg)), bits_of(triton_matmul(*f16, **cfg)))
    imp0 = [triton_matmul(a, b, pattern=p, max_num_imprecise_acc=0, **cfg) for p in ("add", "dot_acc")]
    assert np.array_equal(bits_of(imp0[0]), bits_of(imp0[1]))


def test_f16_bf16_tf32_sum_the_same_on_both_paths():
    rng = np.random.default_rng(9)
    for dt in (np.float16, ml_dtypes.bfloat16, np.float32):
        a = rng.standard_normal((64, 128)).astype(dt)
        b = rng.standard_normal((128, 8)).astype(dt)
        outs = [triton_matmul(a, b, block_k=32, block_m=bm, block_n=64, num_warps=w) for bm, w in ((16, 2), (64, 4))]
        assert np.array_equal(bits_of(outs[0]), bits_of(outs[1]))
        assert np.array_equal(bits_of(outs[0]), bits_of(triton_matmul(a, b, block_k=32)))   # no config needed


def test_lowering_fixture_replays_and_covers_both_paths():
    from refmodel.verify.fixtures import load_arrays, load_manifest
    from refmodel.verify.replay_golden import replay_triton_lowering

    d = ROOT / "fixtures" / "triton"
    e = next(e for e in load_manifest(d)["entries"] if e["kind"] == "triton_lowering")
    arrays = load_arrays(d, e)
    meta = e["meta"]
    paths = {triton_lowering(DT[meta["options"][c["opt"]][0]], DT[meta["options"][c["opt"]][1]], block_m=c["BM"],
                             block_n=c["BN"], block_k=c["BK"], num_warps=c["warps"], num_stages=c.get("stages"),
                             input_precision="tf32" if meta["options"][c["opt"]][2] == "none"
                             else meta["options"][c["opt"]][2],
                             max_num_imprecise_acc=None if meta["options"][c["opt"]][3] == -1
                             else meta["options"][c["opt"]][3]).path
             for c in meta["configs"]}
    assert paths == {"wgmma", "mma.sync", "fma"}
    for c in meta["configs"]:                           # the PTX recorded with each run names the rule's instruction
        o = meta["options"][c["opt"]]
        low = triton_lowering(DT[o[0]], DT[o[1]], block_m=c["BM"], block_n=c["BN"], block_k=c["BK"],
                              num_warps=c["warps"], num_stages=c.get("stages"),
                              input_precision="tf32" if o[2] == "none" else o[2],
                              max_num_imprecise_acc=None if o[3] == -1 else o[3],
                              acc_dtype=np.float16 if o[4] == "f16" else np.float32, pattern=c["pattern"])
        assert set(meta["ptx_mma"][c["name"]]) == ({low.instr} if low.path != "fma" else set()), c["name"]
    r = replay_triton_lowering(meta, arrays)
    assert r.mismatches == 0 and r.cases == e["cases"]
    bad = dict(arrays, hw_sha256=arrays["hw_sha256"].copy())
    bad["hw_sha256"][3, 1, 0] ^= 1
    assert replay_triton_lowering(meta, bad).mismatches == 128 * 128 - meta["corner"] ** 2


@pytest.mark.gpu
def test_the_gpu_runs_small_and_large_tiles_like_the_model():
    from gpu.kernels.runtime import gpu_available

    if not gpu_available():
        pytest.skip("needs a GPU")
    pytest.importorskip("triton")
    import torch

    from gpu.record.triton_lowering import _launch

    a, b = _fp8_inputs(11)
    ta, tb = (torch.from_numpy(x.view(np.uint8)).cuda().view(torch.float8_e4m3fn) for x in (a, b))
    for bm, bn, w, pattern in ((32, 16, 2, "dot_acc"), (64, 16, 4, "dot_acc"), (32, 16, 4, "add"), (64, 16, 4, "add")):
        cfg = dict(opt="e4m3", BM=bm, BN=bn, BK=64, warps=w, stages=None, pattern=pattern)
        c, _ = _launch(cfg, ta, tb)
        torch.cuda.synchronize()
        want = triton_matmul(a, b, block_k=64, block_m=bm, block_n=bn, num_warps=w, pattern=pattern)
        assert np.array_equal(c.cpu().numpy().view(np.uint32), bits_of(want)), cfg


def test_per_slice_sums_need_a_recorded_block_k():
    x = np.zeros((64, 256), np.float32)
    assert triton_matmul(x, np.zeros((256, 8), np.float32), block_k=256, block_m=64, block_n=64,
                         num_warps=4).shape == (64, 8)       # one chain: BLOCK_K free
    with pytest.raises(InputError, match="block_k=256 was not recorded with a per-slice sum"):
        triton_matmul(x, np.zeros((256, 8), np.float32), block_k=256, block_m=64, block_n=64, num_warps=4,
                      input_precision="tf32x3")
    a = np.zeros((64, 256), E4)
    with pytest.raises(InputError, match="per-slice sum"):
        triton_matmul(a, np.zeros((256, 8), E4), block_k=256, block_m=32, block_n=64, num_warps=4, pattern="add")
    # FP8 acc += tl.dot at BLOCK_K 256 on the wgmma path was recorded (fixtures/inductor, tensor_precise_m256)
    assert triton_matmul(a, np.zeros((256, 8), E4), block_k=256, block_m=64, block_n=64, num_warps=4,
                         pattern="add").shape == (64, 8)
