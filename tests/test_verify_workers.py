"""wgref verify on worker processes (refmodel.verify.workers): the same rows, in the same order, as the
serial replay; errors keep their class name and short text; --jobs is checked."""

import shutil

import pytest

from refmodel.verify import replay_sfu
from refmodel.verify.fixtures import FixtureError, default_root, write_index
from refmodel.verify.workers import ReplayError, _init, _rebuild, default_jobs, verify_all
from wgref.cli import main as cli_main

ROOT = default_root()
FEATURES = ["torch", "wgmma_forms", "sparse"]


def _row(feature, entry, res):
    if isinstance(res, Exception):
        return feature, entry.get("file"), type(res).__name__, getattr(res, "short", None)
    return feature, entry.get("file"), res.cases, res.mismatches, res.complete, res.scope, res.details


@pytest.mark.skipif(not (ROOT / "torch" / "manifest.json").exists(), reason="no fixtures")
def test_workers_give_the_serial_rows_in_order(tmp_path):
    root = tmp_path / "fx"
    for f in FEATURES:
        shutil.copytree(ROOT / f, root / f)
    with open(root / "torch" / "scaled_mm_128x256x1024.npz", "ab") as fh:     # one refused fixture
        fh.write(b"tampered")
    write_index(root)
    serial = [_row(*r) for r in verify_all(root, jobs=1)]
    parallel = [_row(*r) for r in verify_all(root, jobs=2, min_seconds=0)]
    assert parallel == serial
    assert ("torch", "scaled_mm_128x256x1024.npz", "FixtureError", "sha256 mismatch") in parallel
    assert sum(r[2] for r in serial if isinstance(r[2], int) and len(r) > 4) > 0


def test_errors_come_back_with_their_class_name_and_short_text():
    e = _rebuild(("FixtureError", "a long message", "sha256 mismatch", True))
    assert type(e) is FixtureError and e.short == "sha256 mismatch" and str(e) == "a long message"
    e = _rebuild(("ZeroDivisionError", "division by zero", None, False))
    assert isinstance(e, ReplayError) and type(e).__name__ == "ZeroDivisionError" and e.short == "division by zero"


def test_a_worker_starts_with_the_parents_switches():
    before = replay_sfu.EXHAUSTIVE
    try:
        _init({"threads": 1, "sfu_exhaustive": True})
        assert replay_sfu.EXHAUSTIVE is True
    finally:
        replay_sfu.EXHAUSTIVE = before
        import numba
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)


def test_default_jobs_is_the_cpus_up_to_4():
    assert 1 <= default_jobs() <= 4


@pytest.mark.parametrize("bad", ["0", "-2", "two", "1.5", "65"])
def test_jobs_must_be_a_process_count(bad, capsys):
    with pytest.raises(SystemExit) as ex:
        cli_main(["verify", "--jobs", bad])
    assert ex.value.code == 2
    assert "--jobs must be a whole number of processes in 1..64" in capsys.readouterr().err


def test_a_small_tree_replays_in_this_process(tmp_path, monkeypatch):
    """A few short fixtures are not worth starting workers: the rows come from this process."""
    import refmodel.verify.workers as wk

    root = tmp_path / "fx"
    shutil.copytree(ROOT / "torch", root / "torch")
    write_index(root)

    def no_pool(*a, **k):
        raise AssertionError("a worker pool was started")
    monkeypatch.setattr(wk, "ProcessPoolExecutor", no_pool)
    rows = list(wk.verify_all(root, jobs=2))
    assert rows and all(not isinstance(r, Exception) and r.mismatches == 0 for _, _, r in rows)
