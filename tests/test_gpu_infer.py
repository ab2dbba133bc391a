"""On the H200: inference rediscovers cuBLAS's split-K schedule and the repo's own FP8 kernel's
promotion, and `wgref infer` writes a schedule that `wgref golden --schedule` runs."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def test_infer_cublas_split_k_and_the_fp8_kernel():
    pytest.importorskip("torch")
    from gpu.libraries.gemm_targets import make_target
    from refmodel.verify.infer import infer_schedule

    t = make_target("cublas", dtype="bf16", out_dtype="bf16")
    rep = infer_schedule(t, M=64, N=64, K=8192, dtype="bf16", out_dtype="bf16", verify_outputs=50000,
                         log=lambda *a: None)
    assert rep.status == "found" and rep.schedule.splits == 6 and any("splitK" in k for k in t.kernels)
    t = make_target("gemm-fp8", dtype="e4m3", out_dtype="bf16")
    rep = infer_schedule(t, M=128, N=128, K=1024, dtype="e4m3", out_dtype="bf16", verify_outputs=50000,
                         log=lambda *a: None)
    assert rep.schedule is not None and rep.schedule.splits == 1 and rep.schedule.promote_every == 4


def test_wgref_infer_then_golden_schedule(tmp_path):
    pytest.importorskip("torch")
    from wgref.cli import main

    s = tmp_path / "s.json"
    assert main(["infer", "scaled-mm", "--shape", "64,64,8192", "--dtype", "e4m3", "--out-dtype", "bf16",
                 "--fast-accum", "--outputs", "40000", "-o", str(s)]) == 0
    sched = json.loads(s.read_text())
    assert sched["splits"] == 3 and "splitK" in sched["source"]["kernel"]
    from gpu.libraries.gemm_targets import make_target
    from refmodel.dtypes import bits_of
    from refmodel.verify.seeded import library_matrices

    a, b = library_matrices(3, "e4m3", 64, 64, 8192, lim=400.0)
    np.save(tmp_path / "a.npy", bits_of(a))
    np.save(tmp_path / "b.npy", bits_of(np.ascontiguousarray(b.T)))
    assert main(["golden", "scaled-mm", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--dtype", "e4m3",
                 "--out-dtype", "bf16", "--schedule", str(s), "-o", str(tmp_path / "d.npy")]) == 0
    lib = make_target("scaled-mm", dtype="e4m3", out_dtype="bf16", fast_accum=True)(a, b)
    assert np.array_equal(np.load(tmp_path / "d.npy"), bits_of(lib))


def test_fuzz_lib_against_its_inferred_schedule_and_a_wrong_one_shrunk(tmp_path):
    """wgref fuzz lib:cublas --schedule: the H200-inferred schedule (fixtures/schedules) holds on new
    calls; one split fewer is caught and shrunk to one row, one column and a few K positions."""
    pytest.importorskip("torch")
    from gpu.fuzz.schedule import fuzz_schedule
    from refmodel.golden.schedule import Schedule
    from refmodel.verify.fixtures import load_manifest, default_root

    man = load_manifest(default_root() / "schedules")
    meta = next(e["meta"] for e in man["entries"] if e["meta"]["name"] == "cublas_bf16_64x64x8192")
    s = Schedule.from_dict(meta["schedule"])
    s = s.replace(source={**s.source, "target": "cublas", "shape": "64x64x8192", "dtype": "bf16", "out": "bf16"})
    path = tmp_path / "s.json"
    path.write_text(s.to_json())
    from wgref.cli import main

    assert main(["fuzz", "lib:cublas", "--schedule", str(path), "--cases", "12", "--seed", "5",
                 "--out", str(tmp_path / "ok")]) == 0
    rep = fuzz_schedule(s.replace(splits=s.splits - 1), cases=6, out=tmp_path / "bad")
    assert rep.mismatches > 0 and 0 < rep.first["nonzero_k"] <= 8192
    z = np.load(rep.first["file"])
    i, j = rep.first["row"], rep.first["col"]
    # one dot product left: only row i of A and column j of B, and the library still disagrees there
    assert not np.any(np.delete(z["a"], i, axis=0)) and not np.any(np.delete(z["b"], j, axis=1))
    assert z["library"][i, j] != z["schedule"][i, j]
