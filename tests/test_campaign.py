"""Campaigns beyond one process, without a GPU: shards are disjoint and add up to the unsharded
campaign, merging refuses journals that do not belong together, and the multi-process and Ray
launchers run real workers with the CPU model standing in for the GPU (``--dry-run``)."""

import json
import subprocess
import sys

import pytest

from gpu.fuzz.cpu_engine import fuzz
from gpu.fuzz.cpu_engine import model_device as honest
from refmodel.errors import InputError
from refmodel.verify.journal import merge_journals, parse_shard, read_journal, split_shard
from test_fuzz import drops_last_k  # the planted-bug 'device' of the single-process tests

INSTR = "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3"


def _batches(journal):
    return {r["batch"]: r for r in read_journal(journal)[1:] if "batch" in r}


@pytest.mark.parametrize("hw", [honest, drops_last_k])
def test_shards_are_the_unsharded_campaign_dealt_round_robin(tmp_path, hw):
    kw = dict(seed=5, hw=hw, batch_tiles=12, progress=False, keep_going=True)
    whole = fuzz(INSTR, cases=150, out=tmp_path / "whole", **kw)
    for k in range(3):
        fuzz(INSTR, cases=50, out=tmp_path / f"s{k}", shard=(k, 3), **kw)
    ref = _batches(tmp_path / "whole" / "journal.jsonl")
    parts = [_batches(tmp_path / f"s{k}" / "journal.jsonl") for k in range(3)]
    for k, p in enumerate(parts):
        assert p and all(b % 3 == k for b in p)
    common = set(ref) & set().union(*parts)
    assert len(common) >= 6
    for b in common:
        got = next(p[b] for p in parts if b in p)
        assert got["job"] == ref[b]["job"]                       # batch b draws from seed (5, b) wherever it runs
        if got["tiles"] == ref[b]["tiles"]:                      # (the last batch of a run may be cut short)
            assert got["mismatches"] == ref[b]["mismatches"]
    merged = merge_journals([tmp_path / f"s{k}" for k in range(3)])
    assert merged.complete and merged.shards == [[0, 3], [1, 3], [2, 3]]
    assert merged.tiles == sum(r["tiles"] for p in parts for r in p.values())
    assert merged.outputs == sum(r["outputs"] for p in parts for r in p.values())
    assert (merged.mismatches > 0) == (hw is drops_last_k) == (whole.mismatches > 0)
    assert merged.mismatching_batches == sorted(b for p in parts for b, r in p.items() if r["mismatches"])
    if hw is drops_last_k:
        assert len(merged.repros) == 3 and all(r for r in merged.repros)


def test_resume_continues_a_shard_on_its_own_batches(tmp_path):
    fuzz(INSTR, cases=30, seed=2, out=tmp_path, hw=honest, batch_tiles=12, progress=False, shard=(1, 4))
    fuzz(INSTR, cases=60, seed=2, out=tmp_path, hw=honest, batch_tiles=12, progress=False, shard=(1, 4), resume=True)
    bs = sorted(_batches(tmp_path / "journal.jsonl"))
    assert bs == list(range(1, 4 * len(bs), 4))                # 1, 5, 9, ... without a gap or a repeat
    with pytest.raises(InputError, match="another campaign"):
        fuzz(INSTR, cases=90, seed=2, out=tmp_path, hw=honest, batch_tiles=12, progress=False, shard=(2, 4),
             resume=True)


def test_split_shard_covers_its_shard_exactly():
    for shard in ((0, 1), (3, 8), (7, 8)):
        for workers in (1, 2, 3, 5):
            subs = split_shard(shard, workers)
            own = [[b for b in range(2000) if b % n == i] for i, n in subs]
            flat = sorted(b for o in own for b in o)
            assert flat == [b for b in range(2000) if b % shard[1] == shard[0]]


def test_parse_shard_and_merge_refusals(tmp_path):
    assert parse_shard("3/16") == (3, 16)
    for bad in ("3", "16/16", "-1/4", "a/b", "1/0"):
        with pytest.raises(InputError, match="i/n"):
            parse_shard(bad)
    kw = dict(cases=20, hw=honest, batch_tiles=12, progress=False)
    fuzz(INSTR, seed=1, out=tmp_path / "a0", shard=(0, 2), **kw)
    fuzz(INSTR, seed=1, out=tmp_path / "a1", shard=(1, 2), **kw)
    fuzz(INSTR, seed=9, out=tmp_path / "b1", shard=(1, 2), **kw)
    fuzz(INSTR, seed=1, out=tmp_path / "c1", shard=(1, 3), **kw)
    with pytest.raises(InputError, match="seed differ"):
        merge_journals([tmp_path / "a0", tmp_path / "b1"])
    with pytest.raises(InputError, match="splits the campaign into 2"):
        merge_journals([tmp_path / "a0", tmp_path / "c1"])
    with pytest.raises(InputError, match="appears twice"):
        merge_journals([tmp_path / "a0", tmp_path / "a0" / "journal.jsonl"])
    part = merge_journals([tmp_path / "a1"])
    assert part.missing == ["0/2"] and not part.complete
    j = tmp_path / "a1" / "journal.jsonl"
    lines = j.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["batch"] = 2                                           # an even batch in the odd shard
    j.write_text("\n".join([lines[0], json.dumps(rec)] + lines[2:]) + "\n")
    with pytest.raises(InputError, match="does not belong to shard 1/2"):
        merge_journals([tmp_path / "a0", j])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no journal"):
        merge_journals([tmp_path / "empty"])


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "wgref.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_devices_runs_one_worker_process_per_entry_and_merges(tmp_path):
    r = _cli("fuzz", INSTR, "--cases", "60", "--seed", "4", "--devices", "0,0,0", "--dry-run", "--out", "camp",
             "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    assert rep["complete"] and rep["shards"] == [[0, 3], [1, 3], [2, 3]] and rep["mismatches"] == 0
    assert rep["tiles"] >= 60
    for k in range(3):
        head = read_journal(tmp_path / "camp" / f"shard-{k}" / "journal.jsonl")[0]["header"]
        assert head["shard"] == [k, 3] and head["seed"] == 4
    m = _cli("merge", "camp", cwd=tmp_path)
    assert m.returncode == 0 and "3 of 3 shards" in m.stdout
    # a host that is shard 1/2 of a bigger campaign splits it among its two workers: 1/4 and 3/4
    r = _cli("fuzz", INSTR, "--cases", "20", "--shard", "1/2", "--devices", "0,0", "--dry-run", "--out", "h1",
             "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["shards"] == [[1, 4], [3, 4]]
    bad = _cli("fuzz", "cvt", "--shard", "0/2", "--dry-run", cwd=tmp_path)
    assert bad.returncode == 2 and "apply to wgmma targets" in bad.stderr


def test_ray_runs_shards_as_tasks_and_brings_the_journals_home(tmp_path):
    ray = pytest.importorskip("ray")
    from gpu.fuzz.ray_campaign import run_ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        rep = run_ray([INSTR, "--cases", "30", "--seed", "4", "--dry-run"], 2, tmp_path, gpus_per_shard=0,
                      log=lambda *_: None)
    finally:
        ray.shutdown()
    assert rep.complete and rep.shards == [[0, 2], [1, 2]] and rep.mismatches == 0 and rep.tiles >= 60
    assert (tmp_path / "shard-1" / "journal.jsonl").exists()


def test_a_crashing_worker_is_restarted_and_loses_nothing(tmp_path):
    common = ["fuzz", INSTR, "--cases", "120", "--seed", "7", "--devices", "0,0,0", "--dry-run", "--json"]
    r = _cli(*common, "--out", "clean", cwd=tmp_path)
    f = _cli(*common, "--out", "faulty", "--inject-fault", "1:4", cwd=tmp_path)
    assert r.returncode == 0 and f.returncode == 0, f.stderr
    clean, faulty = (json.loads(x.stdout.strip().splitlines()[-1]) for x in (r, f))
    assert clean["restarts"] == [] and [x["shard"] for x in faulty["restarts"]] == ["1/3"]
    assert "injected fault" in (tmp_path / "faulty" / "shard-1" / "worker.log").read_text()
    for k in range(3):  # the crashed shard resumed where it stopped; every journal equals the clean run's
        want = {b: (x["job"], x["tiles"], x["outputs"]) for b, x in _batches(tmp_path / "clean" / f"shard-{k}" / "journal.jsonl").items()}
        got = {b: (x["job"], x["tiles"], x["outputs"]) for b, x in _batches(tmp_path / "faulty" / f"shard-{k}" / "journal.jsonl").items()}
        assert got == want
    for key in ("tiles", "outputs", "batches", "shards", "mismatches"):
        assert faulty[key] == clean[key]
    # a worker that keeps crashing is reported, not hidden
    bad = _cli(*common, "--out", "dead", "--inject-fault", "2:2", "--restarts", "0", cwd=tmp_path)
    assert bad.returncode == 2 and "shard-2" in bad.stderr


def test_merge_counts_gpu_engine_port_disagreements_and_fails_on_them(tmp_path):
    import json as _json

    from refmodel.verify.journal import merge_journals
    from wgref.cli import main as cli_main

    head = {"target": "e4m3", "seed": 1, "engine": "gpu", "batch_tiles": 8}
    for i in range(2):
        d = tmp_path / f"shard-{i}"
        d.mkdir()
        lines = [{"header": {**head, "shard": [i, 2]}}]
        lines += [{"batch": b, "tiles": 8, "outputs": 100, "mismatches": 0, "port_disagreements": int(b == 3),
                   "seconds": 0.5} for b in range(i, 6, 2)]
        (d / "journal.jsonl").write_text("".join(_json.dumps(x) + "\n" for x in lines))
    rep = merge_journals([tmp_path])
    assert (rep.outputs, rep.mismatches, rep.port_disagreements, rep.mismatching_batches) == (600, 0, 1, [3])
    assert cli_main(["merge", str(tmp_path)]) == 1


def test_a_malformed_inject_fault_is_refused_before_any_worker_starts(tmp_path):
    for bad in ("1-4", "x:2", "-1:3"):
        r = _cli("fuzz", INSTR, "--cases", "8", "--devices", "0,0", "--dry-run", "--inject-fault", bad,
                 "--out", "c", cwd=tmp_path)
        assert r.returncode == 2 and "--inject-fault" in r.stderr, (bad, r.stderr)
        assert not (tmp_path / "c").exists()      # no worker folder: refused up front
