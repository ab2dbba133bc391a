"""refmodel.verify.seeded_sparse (the numpy twin of the sparse GPU engine's generator) against the
host build of gpu.kernels.sparse_runner.SP_GEN_SOURCE, its digest plan, and the
``device_model_sparse`` replayer on digests of the host build of the engine's model."""

import time

import numpy as np
import pytest

from refmodel.verify.seeded import FAMILIES, key
from refmodel.verify.seeded_sparse import (
    ANY_NIBBLE_ONE_IN,
    KEY_GARBAGE,
    KEY_META,
    LEGAL_NIBBLES,
    SEED,
    TILES,
    any_nibble_tiles,
    digest,
    generate_sparse,
    job_variants,
    model_bits,
    sparse_jobs_plan,
)
from refmodel.wgmma_sp_forms import WGMMA_SP_FORMS

PLAN = sparse_jobs_plan()


def _mix(f) -> tuple:
    return (f.dtype_a, f.dtype_b, f.dtype_d, f.satfinite)


MIXES = sorted({_mix(f) for f in WGMMA_SP_FORMS})


def _batch_with_both_metadata(seed: int, start: int, tiles: int, tf32: bool) -> int:
    """The first batch from ``start`` with legal and any-nibble 2:4 tiles (tf32: ``start``)."""
    if tf32:
        return start
    for b in range(start, start + 200):
        anyn = any_nibble_tiles(key(seed, b, KEY_META), tiles)
        if anyn.any() and not anyn.all():
            return b
    raise AssertionError("no batch with both legal and any-nibble tiles")


def test_the_twin_has_the_gpu_source_constants():
    from gpu.kernels import sparse_runner as S
    from refmodel.layouts.sparse_meta import LEGAL_24

    assert (S.KEY_META, S.KEY_GARBAGE, S.ANY_NIBBLE_ONE_IN) == (KEY_META, KEY_GARBAGE, ANY_NIBBLE_ONE_IN)
    table = "{" + ", ".join(f"0x{int(v):X}u" for v in LEGAL_NIBBLES) + "}"
    assert f"legal[6] = {table};" in S.SP_GEN_SOURCE
    assert sorted(LEGAL_NIBBLES.tolist()) == sorted(LEGAL_24)


@pytest.mark.parametrize("mix", MIXES, ids=lambda m: ".".join(map(str, m[:3])) + (".sat" if m[3] else ""))
def test_the_numpy_twin_is_the_host_build_on_every_sparse_form(mix):
    """Every sparse form of the mix (its planned job), 8 tiles (every family), a batch with legal and
    any-nibble metadata tiles: every array generate_host builds, bit for bit and dtype for dtype."""
    from gpu.kernels.sparse_runner import generate_host

    n = 0
    for j, (f, job) in enumerate(zip(WGMMA_SP_FORMS, PLAN)):
        if _mix(f) != mix:
            continue
        tf32 = f.dtype_a == "tf32"
        b = _batch_with_both_metadata(13, 3 * j, 8, tf32)
        want, got = generate_host(job, 13, b, 8), generate_sparse(job, 13, b, 8)
        assert set(got) == set(want)
        for k in want:
            assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, (f.instr, k)
            assert np.array_equal(got[k], want[k]), (f.instr, k, int(np.count_nonzero(got[k] != want[k])))
        assert set(got["fams"].tolist()) == set(range(len(FAMILIES)))
        if not tf32:
            anyn = any_nibble_tiles(key(13, b, KEY_META), 8)     # both kinds of tile in the batch
            assert anyn.any() and not anyn.all()
            assert np.isin(got["meta"][~anyn], LEGAL_NIBBLES.astype(np.uint8)).all()
        n += 1
    assert n >= 18


def test_the_twin_metadata_and_garbage():
    """tf32: 0b0100 / 0b1110 only; 2:4: the any-nibble tiles hold every nibble, illegal ones included,
    about one tile in ANY_NIBBLE_ONE_IN; garbage is 32-bit noise; another batch differs."""
    from refmodel.layouts.sparse_meta import ILLEGAL_24

    tf = next(j for j in PLAN if ".tf32." in j["instr"])
    assert set(np.unique(generate_sparse(tf, 3, 9, 16)["meta"]).tolist()) == {0b0100, 0b1110}
    job = next(j for j in PLAN if j["instr"].endswith("m64n64k64.f32.e4m3.e4m3"))
    x = generate_sparse(job, 3, 9, 64)
    anyn = any_nibble_tiles(key(3, 9, KEY_META), 64)
    assert 4 <= anyn.sum() <= 30
    assert set(np.unique(x["meta"][anyn]).tolist()) == set(range(16))
    assert set(ILLEGAL_24) <= set(np.unique(x["meta"][anyn]).tolist())
    assert set(np.unique(x["meta"][~anyn]).tolist()) == set(LEGAL_NIBBLES.tolist())
    assert x["garbage"].dtype == np.uint32 and len(np.unique(x["garbage"])) > 64 * 128 - 8
    assert int(x["garbage"].max()) > 1 << 31
    y = generate_sparse(job, 3, 10, 64)
    assert not np.array_equal(x["meta"], y["meta"]) and not np.array_equal(x["garbage"], y["garbage"])


def test_the_plan_covers_every_form_and_every_variant():
    assert len(PLAN) == len(WGMMA_SP_FORMS) == 528
    assert [j["instr"] for j in PLAN] == [f.instr for f in WGMMA_SP_FORMS]
    assert PLAN == sparse_jobs_plan()
    seen: dict[tuple, set] = {}
    for f, j in zip(WGMMA_SP_FORMS, PLAN):
        v = (j["rs"], j["sp_sel"], j["scale_d"], (j["imm_scale_a"], j["imm_scale_b"]))
        assert v in job_variants(f)
        seen.setdefault(_mix(f), set()).add(v)
    for f in WGMMA_SP_FORMS:
        assert seen[_mix(f)] == set(job_variants(f)), _mix(f)
    assert TILES == len(FAMILIES) == 7 and SEED == 20261201


# ----------------------------------------------------------------------------- the replayer

SAMPLE = [j for j, f in enumerate(WGMMA_SP_FORMS) if f.n in (8, 48, 136, 256)]


def _host_fixture(idx):
    """meta and digests of the HOST build of the engine (SparseRunner(device=False): generator,
    kept positions, model) on the jobs ``idx`` of the plan (sample job i draws batch i)."""
    from gpu.kernels.sparse_runner import SparseRunner
    from gpu.record.device_model import digest as gpu_digest

    jobs = [PLAN[j] for j in idx]
    port, outputs = [], 0
    for i, jb in enumerate(jobs):
        run = SparseRunner(jb, device=False)
        x = run.generate(SEED, i, TILES)
        m = run.model(x)
        assert m.dtype == np.uint32 and m.shape == (TILES, 64 * run.N)
        port.append(np.frombuffer(gpu_digest(m), np.uint8))
        outputs += m.size
    meta = {"seed": SEED, "tiles": TILES, "jobs": jobs, "plan": "refmodel.verify.seeded_sparse.sparse_jobs_plan"}
    return meta, np.stack(port), outputs


def test_model_bits_is_the_runner_layout_and_digest():
    """model_bits (numpy twin + wgmma_sp) == the host runner's model and its refmodel() bits, the
    layout SparseRunner.hardware/model return ((T, 64*N) uint32, row-major, f16 zero-extended), and
    the digest is gpu.record.device_model.digest."""
    from gpu.kernels.sparse_runner import SparseRunner
    from gpu.record.device_model import digest as gpu_digest

    for j in SAMPLE[::5]:
        jb = PLAN[j]
        run = SparseRunner(jb, device=False)
        x = run.generate(SEED, j, TILES)
        got = model_bits(jb, generate_sparse(jb, SEED, j, TILES))
        assert got.dtype == np.uint32 and got.shape == (TILES, 64 * run.N)
        assert np.array_equal(got, run.model(x)) and np.array_equal(got, run.refmodel(x)), jb
        if run.acc_w == 16:
            assert int(got.max()) <= 0xFFFF
        assert digest(got) == gpu_digest(got) == gpu_digest(run.model(x))


def test_the_sparse_replayer_recomputes_host_digests_and_flags_a_wrong_one():
    from refmodel.verify.replay import REPLAYERS, load_plugins
    from refmodel.verify.replay_golden import replay_device_model_sparse

    load_plugins()
    assert REPLAYERS["device_model_sparse"] is replay_device_model_sparse
    meta, port, outputs = _host_fixture(SAMPLE)
    ok = replay_device_model_sparse(meta, {"port_sha256": port, "hw_sha256": port.copy()})
    assert ok.mismatches == 0 and ok.cases == 2 * outputs and ok.complete, ok.details
    quick = replay_device_model_sparse(meta, {"port_sha256": port, "hw_sha256": port.copy()}, full=False)
    assert quick.mismatches == 0 and not quick.complete and "every 8th" in quick.scope
    assert quick.cases == 2 * sum(TILES * 64 * WGMMA_SP_FORMS[j].n for j in SAMPLE[::8])
    bad = port.copy()
    bad[3, 17] ^= 0x40
    res = replay_device_model_sparse(meta, {"port_sha256": port, "hw_sha256": bad})
    n3 = TILES * 64 * WGMMA_SP_FORMS[SAMPLE[3]].n
    assert res.mismatches == n3 and len(res.details) == 1
    assert "hardware" in res.details[0] and meta["jobs"][3]["instr"] in res.details[0]
    res = replay_device_model_sparse(meta, {"port_sha256": bad, "hw_sha256": bad})
    assert res.mismatches == 2 * n3 and "GPU port" in res.details[0]
    with pytest.raises(ValueError, match="jobs but digests"):
        replay_device_model_sparse({**meta, "jobs": meta["jobs"][:-1]}, {"port_sha256": port, "hw_sha256": port})


@pytest.mark.slow
def test_the_full_sparse_replay_covers_every_planned_job_in_time():
    """The full replay over all 528 planned jobs x 7 tiles (wrong digests: every output counted,
    so every job was rebuilt and run) within a minute on the CI host."""
    from refmodel.verify.replay_golden import replay_device_model_sparse

    meta = {"seed": SEED, "tiles": TILES, "jobs": PLAN}
    zero = np.zeros((len(PLAN), 32), np.uint8)
    t0 = time.time()
    res = replay_device_model_sparse(meta, {"port_sha256": zero, "hw_sha256": zero})
    secs = time.time() - t0
    total = sum(TILES * 64 * f.n for f in WGMMA_SP_FORMS)
    assert res.cases == res.mismatches == 2 * total and len(res.details) == 2 * len(PLAN)
    print(f"full device_model_sparse replay: {len(PLAN)} jobs, {total} outputs, {secs:.1f}s")
    assert secs < 120


def test_the_recorder_on_host_runners_writes_a_fixture_the_replayer_passes(tmp_path, monkeypatch, capsys):
    """gpu.record.device_model_sparse end to end on host runners (numpy for cupy, the port standing
    in for the hardware, a sample of the plan): the fixture it writes replays with 0 mismatches
    through `wgref verify`'s loader; a generator that disagrees with the twin writes nothing, exit 1."""
    import sys
    import types

    import gpu.kernels.sparse_runner as S
    import gpu.record.device_model_sparse as rec
    from gpu.kernels import runtime
    from refmodel.verify.replay import verify_all

    class HostRunner(S.SparseRunner):
        def __init__(self, job, device=True, model_kernel="gather"):
            super().__init__(job, device=False, model_kernel=model_kernel)
            self.hardware = self.model

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(asnumpy=np.asarray))
    monkeypatch.setattr(S, "SparseRunner", HostRunner)
    monkeypatch.setattr(runtime, "device_info", lambda: {"device": "host test"})
    monkeypatch.setattr(rec, "sparse_jobs_plan", lambda: [PLAN[j] for j in SAMPLE[::6]])
    assert rec.record(str(tmp_path / "fx"), workers=0) == 0
    rows = list(verify_all(tmp_path / "fx"))
    assert len(rows) == 1
    feature, entry, res = rows[0]
    assert feature == "device_model" and entry["file"] == "sparse.npz" and entry["kind"] == "device_model_sparse"
    assert not isinstance(res, Exception) and res.mismatches == 0 and res.cases == entry["cases"] > 0
    assert entry["meta"]["plan"] == rec.PLAN and entry["provenance"]["recorder"] == "gpu.record.device_model_sparse"
    assert "port vs hardware 0 differ" in capsys.readouterr().out

    def wrong(*a):
        x = rec_generate(*a)
        x["garbage"][0, 0] ^= 1
        return x

    rec_generate = rec.generate_sparse
    monkeypatch.setattr(rec, "generate_sparse", wrong)
    assert rec.record(str(tmp_path / "bad"), workers=0) == 1
    assert not (tmp_path / "bad").exists()
    assert "differs from the numpy twin" in capsys.readouterr().err
