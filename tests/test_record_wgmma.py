"""The wgmma campaign on the CPU, with a fake device: plan, inputs, oracles, fixtures, resume."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from gpu.record import wgmma as rw
from refmodel.verify.families import tile as fam_tile
from gpu.kernels.isolate import IsolatedRunner
from refmodel.errors import DeviceError, FormError
from refmodel.verify.fixtures import load_arrays, load_manifest
from refmodel.verify.replay_wgmma import replay_wgmma_seeded, seeded_inputs
from refmodel.dtypes import element_dtype, raw_bits
from refmodel.wgmma_forms import WGMMA_FORMS


def fake_model(instr, a, b, c=None, *, scale_d=True, imm_scale_a=1, imm_scale_b=1):
    """One wgmma: exact products rounded once to the accumulator type (not the real arithmetic)."""
    job = rw.Job(instr, scale_d=scale_d, imm_scale_a=imm_scale_a, imm_scale_b=imm_scale_b)
    with np.errstate(all="ignore"):
        ex = rw.exact_oracle(job, a, b, c)
        if job.form.family == "int8":
            return ((ex + 2**31) % 2**32 - 2**31).astype(np.int32)
        return ex.astype(element_dtype(job.form.dtype_d))


def fake_hw(job, a, b, c):
    return rw.model_chain(fake_model, job, a, b, c)


def test_plan():
    jobs = rw.plan_jobs(4)
    keys = [j.key for j in jobs]
    assert len(keys) == len(set(keys))
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", k) for k in keys)
    tier0 = [j for j in jobs if j.tier == 0]
    assert len(tier0) == 40 and {j.form.n for j in tier0} == {8, 256}
    assert jobs[: len(tier0)] == tier0
    ss = {j.instr for j in jobs if not j.rs and j.scale_d and j.chain == 1 and j.imm_scale_a == 1}
    assert ss == {f.instr for f in WGMMA_FORMS}
    assert any(j.chain == 48 for j in jobs) and any(j.rs and j.chain == 40 for j in jobs)
    assert all(j.imm_scale_a == j.imm_scale_b == 1 for j in jobs if j.form.family == "int8")


@pytest.mark.parametrize("combo", sorted({(f.family, f.dtype_d, f.dtype_a, f.dtype_b, f.satfinite)
                                          for f in WGMMA_FORMS}))
@pytest.mark.parametrize("chain", [1, 4, 48])
def test_inputs_and_exactness(combo, chain):
    form = next(f for f in WGMMA_FORMS if (f.family, f.dtype_d, f.dtype_a, f.dtype_b, f.satfinite) == combo
                and f.n == 16)
    job = rw.Job(form.instr, chain=chain)
    rng = np.random.default_rng(0)
    a, b, c, idx, names = rw.make_inputs(job, rng, 2)
    nf = len(rw.families_for(form))
    assert a.shape == (2 * nf, 64, form.k * chain) and a.dtype == element_dtype(form.dtype_a)
    assert b.shape == (2 * nf, form.k * chain, 16) and b.dtype == element_dtype(form.dtype_b)
    assert c.shape == (2 * nf, 64, 16) and c.dtype == element_dtype(form.dtype_d)
    assert list(np.bincount(idx)) == [2] * nf and len(names) == nf
    for fi, fam in enumerate(rw.families_for(form)):
        sel = idx == fi
        if not fam.exact:
            continue
        ex = rw.exact_oracle(job, a[sel], b[sel], c[sel])
        if form.family == "int8":
            assert np.abs(ex).max() < 2**31
        else:
            # every partial sum of the exact family is an exactly representable integer
            for s in range(1, chain + 1):
                part = rw.exact_oracle(rw.Job(form.instr, chain=s), a[sel][..., :form.k * s],
                                       b[sel][..., :form.k * s, :], c[sel])
                back = part.astype(element_dtype(form.dtype_d)).astype(np.float64)
                assert (back == part).all() and (part == np.round(part)).all()
    if form.family != "int8":
        fam = dict(zip(names, range(nf)))
        rb = idx == fam["random_bits"]
        assert np.isnan(c[rb].astype(np.float32)).any() or form.dtype_d == "f32"
        fb = idx == fam["finite_bits"]
        assert np.isfinite(a[fb].astype(np.float32)).all() and np.isfinite(c[fb].astype(np.float32)).all()
        sub = c[idx == fam["subnormal_c"]].astype(np.float64)
        spec = fam_tile.SPECS[form.dtype_d]
        assert (np.abs(sub) < spec.smallest_normal).all() and (sub != 0).all()
    else:
        lim = fam_tile._fam_int_c_limits(form, rng, 1, 1)[2].astype(np.int64)
        assert (np.abs(lim) > 2**31 - 2**22).all()


def _run(tmp_path, jobs, **kw):
    lines = []
    kw.setdefault("hw", fake_hw)
    kw.setdefault("model", fake_model)
    res = rw.run_campaign(jobs, out=tmp_path / "fx", state=tmp_path / "fx" / "wgmma_campaign" / "state.jsonl",
                          seconds=kw.pop("seconds", 600), tiles=2, log=lines.append, **kw)
    return res, lines


JOBS = [rw.Job("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"),
        rw.Job("wgmma.mma_async.sync.aligned.m64n16k32.f16.e4m3.e5m2", rs=True, chain=3, scale_d=False),
        rw.Job("wgmma.mma_async.sync.aligned.m64n8k32.satfinite.s32.s8.u8", chain=2),
        rw.Job("wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32", imm_scale_a=-1, tier=3)]


def test_campaign_ok_fixtures_and_resume(tmp_path):
    res, lines = _run(tmp_path, JOBS)
    assert [r.status for r in res] == ["ok"] * 4, lines
    assert all(r.exact_checked > 0 and r.exact_bad == 0 and r.mismatches == 0 for r in res)
    man = load_manifest(tmp_path / "fx" / "wgmma")
    files = {e["file"]: e for e in man["entries"]}
    assert len(files) == 3  # tier 3 job: no sample by default (representative)
    e = files[JOBS[1].key + ".npz"]
    assert e["kind"] == "wgmma_seeded"               # seeds + digests: the inputs rebuild from the seed
    for k in ("instr", "rs", "scale_d", "imm_scale_a", "imm_scale_b", "chain", "seed", "tiles", "d_sha256"):
        assert k in e["meta"]
    assert e["meta"]["rs"] is True and e["meta"]["chain"] == 3 and e["meta"]["scale_d"] is False
    arr = load_arrays(tmp_path / "fx" / "wgmma", e)
    a, b, c, _ = seeded_inputs(e["meta"])
    assert a.dtype == np.uint8 and a.shape[1:] == (64, 96)
    assert c.dtype == np.uint16 and arr["d_rows"].shape[1:] == (4, 16)
    assert e["cases"] == a.shape[0] * 64 * 16
    # the fake hardware is not refmodel's arithmetic: the replay runs (inputs rebuilt, checked) and counts
    r = replay_wgmma_seeded(e["meta"], arr)
    assert r.cases == e["cases"]
    # resume: nothing reruns
    res2, lines2 = _run(tmp_path, JOBS)
    assert res2 == [] and any("already done" in x for x in lines2)


def test_campaign_time_budget(tmp_path):
    res, lines = _run(tmp_path, JOBS, seconds=-1)
    assert res == [] and any("time budget" in x for x in lines)


def test_campaign_survives_errors(tmp_path):
    def hw(job, a, b, c):
        if job.form.family == "fp8":
            raise DeviceError("simulated illegal address")
        return fake_hw(job, a, b, c)

    res, lines = _run(tmp_path, JOBS, hw=hw)
    assert [r.status for r in res] == ["ok", "error", "ok", "ok"]
    assert "simulated illegal address" in res[1].error
    man = load_manifest(tmp_path / "fx" / "wgmma")
    assert {e["meta"]["model"] for e in man["entries"]} == {"present"}
    # the failed job is retried on the next run, the others are not
    res2, _ = _run(tmp_path, JOBS)
    assert [r.key for r in res2] == [JOBS[1].key]


def test_campaign_without_model_records_nothing(tmp_path):
    """A job with no model to compare with is an error and writes no fixture (it used to be
    recorded as 'model missing' with exit 0)."""
    res, _ = _run(tmp_path, JOBS, model=None)
    assert {r.status for r in res} == {"error"} and all("no model" in r.error for r in res)
    assert not (tmp_path / "fx" / "wgmma").exists()


@pytest.mark.parametrize("recorder, module", [("record.wgmma", "refmodel.numerics.wgmma"),
                                              ("record.forms", "refmodel.numerics.wgmma"),
                                              ("record.torch", "refmodel.numerics.scaled_mm"),
                                              ("record.cvt", "refmodel.numerics.cvt")])
def test_recorder_refuses_to_run_without_the_model(recorder, module, tmp_path, monkeypatch, capsys):
    """A recorder that cannot import the model exits 2 with one line, before touching a GPU,
    and writes nothing (record_wgmma used to say 'model missing' and exit 0)."""
    import importlib
    import sys

    mod = importlib.import_module(f"gpu.{recorder}")
    monkeypatch.setitem(sys.modules, module, None)  # import of it now raises ModuleNotFoundError

    def no_gpu(*a, **k):
        raise AssertionError("the recorder touched the GPU before checking the model")

    monkeypatch.setattr("gpu.kernels.runtime.device_info", no_gpu)
    monkeypatch.setattr("gpu.kernels.runtime.require_device", no_gpu)
    if hasattr(mod, "device_info"):
        monkeypatch.setattr(mod, "device_info", no_gpu)
    rc = mod.main(["--out", str(tmp_path / "fx")] + (["--no-isolate"] if recorder == "record.wgmma" else []))
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "cannot compare with the model" in err and module in err
    assert not (tmp_path / "fx").exists()


def test_campaign_model_mismatch_saved(tmp_path):
    def bad_model(instr, a, b, c=None, **kw):
        d = fake_model(instr, a, b, c, **kw)
        bits = raw_bits(d, "f32").copy()
        bits[0, 0, 0] ^= 1
        return bits.view(np.float32)

    res, _ = _run(tmp_path, JOBS[:1], model=bad_model)
    assert res[0].status == "MISMATCH" and res[0].mismatches == 1
    man = load_manifest(tmp_path / "fx" / "wgmma")
    e = next(e for e in man["entries"] if e["file"].endswith("__mismatch.npz"))
    arr = load_arrays(tmp_path / "fx" / "wgmma", e)
    assert arr["d"].shape[0] == 1 and (arr["d"] != arr["d_model"]).sum() == 1


def test_campaign_model_error(tmp_path):
    def broken(*a, **k):
        raise NotImplementedError("tf32 not yet")

    res, _ = _run(tmp_path, JOBS[:1], model=broken)
    assert res[0].status == "model error" and "tf32 not yet" in res[0].error


def test_campaign_layout_failure_is_diagnosed_not_recorded(tmp_path):
    def swapped_rows(job, a, b, c):
        d = fake_hw(job, a, b, c)
        return d[:, ::-1].copy()

    res, _ = _run(tmp_path, JOBS[:1], hw=swapped_rows)
    assert res[0].status.endswith("LAYOUT") and res[0].exact_bad > 0
    assert not (tmp_path / "fx" / "wgmma" / "manifest.json").exists()
    diag = list((tmp_path / "fx" / "wgmma_campaign" / "diagnostics").glob("*.npz"))
    assert len(diag) == 1
    with np.load(diag[0]) as z:
        assert {"a", "b", "c", "d", "exact", "meta"} <= set(z.files)
    assert "EXACT ORACLE FAILED" in rw.summarize([json.loads(x) for x in
                                                  (tmp_path / "fx" / "wgmma_campaign" / "state.jsonl").read_text().splitlines()])


def test_cli_list(capsys):
    assert rw.main(["--list", "--max-tier", "0", "--forms", "m64n8k16"]) == 0
    out = capsys.readouterr().out
    assert "m64n8k16.f32.bf16.bf16_ss_sd1_imm_p1_p1_chain1" in out


def test_isolated_runner():
    r = IsolatedRunner(timeout=60)
    try:
        assert (r.call("numpy", "arange", 4) == np.arange(4)).all()
        pid = r._proc.pid
        with pytest.raises(FormError):
            r.call("refmodel.wgmma_forms", "parse_wgmma", "wgmma.bad")
        assert r._proc.pid == pid  # input errors keep the worker
        with pytest.raises(DeviceError, match="died"):
            r.call("os", "_exit", 3)
        assert r.call("math", "sqrt", 16.0) == 4.0  # restarted
        with pytest.raises(DeviceError, match="did not finish"):
            r.call("time", "sleep", 30, timeout=1)
        val, err = r.try_call("operator", "truediv", 1, 0)
        assert val is None and "ZeroDivisionError" in err
        assert r.call("operator", "add", 2, 3) == 5
    finally:
        r.close()
