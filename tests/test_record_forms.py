"""gpu.record.forms (a compact fixture for every one of the 528 dense forms) on the CPU with a
fake device: the plan, inputs, bookkeeping, fixture writing, and the replayer that CI runs.
The fake 'hardware' is refmodel itself and everything is written to tmp dirs only."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpu.record import forms as rf
from gpu.record import wgmma as rw
from refmodel.verify.fixtures import FixtureError, check_index, load_arrays, load_manifest
from refmodel.verify.replay import verify_all
from refmodel.verify.replay_forms import forms_covered, replay_forms
from refmodel.wgmma_forms import WGMMA_FORMS

SUBSET = ("m64n8k", "m64n24k", "m64n256k")  # every type combination, both SS and RS


def _model():
    from refmodel.numerics.wgmma import wgmma

    return wgmma


def fake_hw(job, a, b, c):
    return rw.model_chain(_model(), job, a, b, c)


def test_plan_covers_every_form_and_option():
    jobs = rf.plan_jobs()
    assert {j.instr for j in jobs} == {f.instr for f in WGMMA_FORMS} and len(WGMMA_FORMS) == 528
    assert len({j.key for j in jobs}) == len(jobs) == 2 * 528
    for combo in {rf._combo(f) for f in WGMMA_FORMS}:
        cj = [j for j in jobs if rf._combo(j.form) == combo]
        for rs in (False, True):
            sel = [j for j in cj if j.rs == rs]
            assert {j.scale_d for j in sel} == {True, False}, (combo, rs)
            imms = {(j.imm_scale_a, j.imm_scale_b) for j in sel}
            assert imms == (set(rf.IMMS) if combo[0] != "int8" else {(1, 1)}), (combo, rs)


def _record(tmp_path, hw=fake_hw, forms=SUBSET):
    jobs = [j for j in rf.plan_jobs() if any(p in j.instr for p in forms)]
    lines: list[str] = []
    rc = rf.record(jobs, hw=hw, model=_model(), out=tmp_path / "fx", prov={"device": "fake (test)"},
                   diag=tmp_path / "diag", log=lines.append)
    return rc, jobs, lines


def test_record_and_replay_every_job(tmp_path):
    rc, jobs, lines = _record(tmp_path)
    assert rc == 0, lines
    root = tmp_path / "fx"
    assert check_index(root) == []
    man = load_manifest(root / "wgmma_forms")
    assert {e["kind"] for e in man["entries"]} == {"wgmma_forms"}
    assert forms_covered(man["entries"]) == {j.instr for j in jobs}
    rows = list(verify_all(root))
    assert rows and all(not isinstance(r, Exception) and r.mismatches == 0 and r.cases == e["cases"]
                        for _, e, r in rows), rows
    e = man["entries"][0]
    arrays = load_arrays(root / "wgmma_forms", e)
    # one flipped output bit is found
    arrays["d"] = arrays["d"].copy()
    arrays["d"][5] ^= 1
    assert replay_forms(e["meta"], arrays).mismatches == 1
    arrays["d"][5] ^= 1
    # a trimmed meta (one job fewer) is refused, not skipped
    meta = json.loads(json.dumps(e["meta"]))
    meta["jobs"].pop()
    meta["forms"] = sorted({j["instr"] for j in meta["jobs"]})
    with pytest.raises(FixtureError, match="every stored output needs its job"):
        replay_forms(meta, arrays)


def test_sample_inputs_are_what_the_outputs_depend_on(tmp_path):
    """Replaying the compact sample in a zero-padded tile gives the full tile's outputs."""
    job = next(j for j in rf.plan_jobs() if "m64n24k16.f32.bf16" in j.instr and j.rs)
    a, b, c, idx, _ = rf.make_job_inputs(job)
    assert a.shape[0] == len(rf.FLOAT_FAMILIES)
    d = fake_hw(job, a, b, c)
    rows, cols = rf.sample_positions(job, a.shape[0])
    assert rows.shape == (3, rf.ROWS) and cols.shape == (3, rf.COLS)
    from refmodel.dtypes import raw_bits
    from refmodel.verify.replay_forms import compact, expand

    f = job.form
    part = compact(raw_bits(a, f.dtype_a), raw_bits(b, f.dtype_b), raw_bits(c, f.dtype_d),
                   raw_bits(d, f.dtype_d), rows, cols, idx)
    a2, b2, c2 = expand(job.instr, 1, part)
    d2 = raw_bits(fake_hw(job, a2, b2, c2), f.dtype_d)
    t = np.arange(3)[:, None, None]
    assert (d2[t, rows[:, :, None], cols[:, None, :]] == part["d"]).all()


def test_mismatch_fails_loudly_and_writes_nothing(tmp_path):
    def flipped(job, a, b, c):
        d = fake_hw(job, a, b, c)
        if job.rs and "m64n8k32.f32.e4m3.e5m2" in job.instr:
            d = d.copy()
            d.view(np.uint32)[0, 0, 0] ^= 1
        return d

    rc, _, lines = _record(tmp_path, hw=flipped, forms=("m64n8k",))
    assert rc == 1
    assert any(ln.startswith("FAIL") and "m64n8k32.f32.e4m3.e5m2_rs" in ln for ln in lines)
    assert not (tmp_path / "fx").exists()
    with np.load(tmp_path / "diag" / "record_forms_mismatches.npz") as z:
        assert any(k.endswith("|d_model") for k in z.files)


def test_record_refuses_without_model(tmp_path):
    jobs = rf.plan_jobs()[:2]
    with pytest.raises(RuntimeError, match="no model"):
        rf.record(jobs, hw=fake_hw, model=None, out=tmp_path, prov={})


def test_main_with_a_fake_device(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("gpu.kernels.runtime.device_info", lambda: {"device": "fake (test)", "driver": "-"})
    monkeypatch.setattr(rf, "hardware", lambda job, a, b, c, isolate=False: fake_hw(job, a, b, c))
    rc = rf.main(["--out", str(tmp_path / "fx"), "--forms", "m64n16k8.f32.tf32", "--workers", "1",
                  "--diag", str(tmp_path / "diag")])
    assert rc == 0, capsys.readouterr()
    e = load_manifest(tmp_path / "fx" / "wgmma_forms")["entries"]
    assert [x["file"] for x in e] == ["tf32_f32.npz"] and e[0]["meta"]["forms"] == [
        "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32"]


def test_list_needs_no_gpu(capsys):
    assert rf.main(["--list"]) == 0
    assert capsys.readouterr().out.strip().endswith("1056 jobs, 528 forms")


def test_kernel_sources_are_unique_per_configuration():
    jobs = [j for j in rf.plan_jobs() if "m64n8k" in j.instr]
    srcs = rf.kernel_sources(jobs)
    assert len(srcs) == len(set(srcs)) <= len(jobs) and all("wgmma_kernel" in s for s in srcs)
