"""Fixtures: manifests, sha256 refusal, and the replay of every recorded hardware result."""

import json
import shutil

import numpy as np
import pytest

from refmodel.errors import InputError
from refmodel.verify.fixtures import default_root, iter_entries, load_arrays, write_fixture
from refmodel.verify.replay import verify_all

ROOT = default_root()
HAVE = any(True for _ in iter_entries(ROOT)) if ROOT.exists() else False


def test_write_and_refuse_modified(tmp_path):
    e = write_fixture("demo", "x", {"a": np.arange(5)}, kind="cvt", cases=5,
                      meta={"forms": []}, provenance={"device": "none"}, root=tmp_path)
    man = json.loads((tmp_path / "demo" / "manifest.json").read_text())
    assert man["entries"][0]["sha256"] == e.sha256
    assert np.array_equal(load_arrays(tmp_path / "demo", man["entries"][0])["a"], np.arange(5))
    with open(tmp_path / "demo" / "x.npz", "ab") as f:
        f.write(b"tampered")
    with pytest.raises(InputError, match="refusing a modified fixture"):
        load_arrays(tmp_path / "demo", man["entries"][0])


@pytest.mark.skipif(not HAVE, reason="no fixtures recorded yet")
def test_fixture_files_match_manifests():
    for feature, directory, entry in iter_entries(ROOT):
        load_arrays(directory, entry)  # raises on a sha256 mismatch


@pytest.mark.skipif(not HAVE, reason="no fixtures recorded yet")
@pytest.mark.parametrize("feature", sorted({f for f, _, _ in iter_entries(ROOT)}) if HAVE else [])
def test_replay_every_fixture_bit_exact(feature):
    """Every hardware output recorded on the H200 is reproduced by refmodel, bit for bit.
    For the cvt sweeps this recomputes all 2**32 float32 inputs per form (chunk hashes)."""
    # the default: everything, but the SFU sweeps (about 30 s a form for all 2**32 inputs) on the quick chunks;
    # wgref verify --sfu-exhaustive recomputes them all; and the attention recordings' larger cases (B·H·Sq·Sk·D
    # over replay_attention.QUICK_COST) on batch 0, head 0's raw words, which wgref verify (full) checks whole
    # the features of many long entries replay on worker processes, as wgref verify does
    from refmodel.verify import workers

    jobs = workers.default_jobs() if feature in ("schedules", "device_model", "attention") else 1
    rows = list(workers.verify_all(ROOT, features=[feature], full=feature not in ("sfu", "attention"), jobs=jobs))
    assert rows
    for _, entry, res in rows:
        assert not isinstance(res, Exception), f"{entry['file']}: {res}"
        assert res.mismatches == 0, f"{entry['file']}: {res.details}"
        if entry["kind"].startswith("sfu_"):
            assert res.cases > 0 and not res.complete and "of 256 chunks" in res.scope or "pairs" in res.scope
            continue
        if entry["kind"] == "attention_seeded":     # every case, the large ones on head (0, 0)'s raw words
            from refmodel.verify.replay_attention import _slow

            big = sum(_slow(c) for c in entry["meta"]["cases"])
            assert not res.complete and f"of {big} large cases of {len(entry['meta']['cases'])}" in res.scope
            assert 0 < res.cases < entry["cases"], entry["file"]
            continue
        assert res.complete and res.cases >= entry["cases"], entry["file"]
        if entry["kind"] == "cvt_sweep":
            assert res.scope == f"all {len(entry['meta']['forms'])}×2^32 sweep inputs recomputed"
            assert res.cases == entry["cases"] + sum(entry["meta"]["sample_n"] for f in entry["meta"]["forms"]
                                                     if f["saturate"])


# ----------------------------------------------------------------------------- inventory, refusals, summary

import hashlib  # noqa: E402

from refmodel.verify.fixtures import (FixtureError, check_entry_file, check_index, load_manifest,  # noqa: E402
                                      write_index)
from refmodel.verify.replay import REPLAYERS, load_plugins  # noqa: E402
from wgref.cli import main as cli_main  # noqa: E402

needs_fixtures = pytest.mark.skipif(not HAVE, reason="no fixtures recorded yet")


def _copy(tmp_path, *features):
    """A tmp copy of some features of the real tree, signed off as a tree of its own."""
    root = tmp_path / "fx"
    for f in features:
        shutil.copytree(ROOT / f, root / f)
    write_index(root)
    assert check_index(root) == []
    return root


def _rewrite_manifest(directory, fn):
    man = load_manifest(directory)
    fn(man)
    (directory / "manifest.json").write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")


def _verify_json(root, *extra):
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cli_main(["verify", "--fixtures", str(root), "--json", *extra])
    return rc, json.loads(buf.getvalue())


@needs_fixtures
def test_index_matches_the_tree():
    """fixtures/INDEX.json is current: every feature, manifest hash, count and file."""
    assert check_index(ROOT) == [], [str(e) for _, _, e in check_index(ROOT)]


@needs_fixtures
def test_deleted_fixture_and_entry_is_named(tmp_path):
    """Deleting a fixture and its manifest entry used to pass silently."""
    root = _copy(tmp_path, "wgmma")
    victim = "m64n8k16.f32.f16.f16_ss_sd1_imm_p1_p1_chain1.npz"
    (root / "wgmma" / victim).unlink()
    _rewrite_manifest(root / "wgmma", lambda m: m.update(entries=[e for e in m["entries"] if e["file"] != victim]))
    probs = check_index(root)
    shorts = {(thing, e.short) for _, thing, e in probs}
    assert (victim, "file missing") in shorts
    assert ("manifest.json", "entries missing") in shorts and ("manifest.json", "cases missing") in shorts
    assert ("manifest.json", "manifest sha256 mismatch") in shorts


@needs_fixtures
def test_deleted_torch_fixture_fails_verify_naming_it(tmp_path):
    root = _copy(tmp_path, "torch")
    name = "scaled_mm_128x256x1024.npz"
    (root / "torch" / name).unlink()
    _rewrite_manifest(root / "torch", lambda m: m.update(entries=[]))
    rc, out = _verify_json(root)
    assert rc == 1 and not out["ok"]
    assert any(e["fixture"] == name and e["short"] == "file missing" for e in out["errors"])
    assert name in out["summary"] and "could not be checked" in out["summary"]


@needs_fixtures
def test_missing_and_extra_feature(tmp_path):
    root = _copy(tmp_path, "torch", "cvt")
    shutil.rmtree(root / "cvt")
    (root / "extra").mkdir()
    (root / "extra" / "manifest.json").write_text('{"feature": "extra", "entries": []}\n')
    shorts = {(f, e.short) for f, _, e in check_index(root)}
    assert ("cvt", "feature missing") in shorts and ("extra", "feature not in INDEX.json") in shorts
    (root / "INDEX.json").unlink()
    assert [e.short for _, _, e in check_index(root)] == ["missing"]


@needs_fixtures
def test_trimmed_meta_fails_even_when_re_signed(tmp_path):
    """A manifest whose meta lists fewer forms than the fixture has outputs: refused by the
    inventory, and (after a re-sign) by the replayer's own meta/arrays check."""
    root = _copy(tmp_path, "torch")
    _rewrite_manifest(root / "torch", lambda m: m["entries"][0]["meta"]["cases"].pop())
    assert {e.short for _, _, e in check_index(root)} == {"manifest sha256 mismatch"}
    write_index(root)  # someone re-signs the trimmed manifest
    rc, out = _verify_json(root)
    assert rc == 1 and len(out["errors"]) == 1
    assert out["errors"][0]["short"] == "meta and arrays disagree" and "d9" in out["errors"][0]["error"]


@needs_fixtures
@pytest.mark.parametrize("entry", ["f16x2_to_f8x2.npz", "f32_fp8_sweep.npz"])
def test_replayers_refuse_trimmed_meta(entry):
    load_plugins()
    e = next(e for f, _, e in iter_entries(ROOT) if e["file"] == entry)
    arrays = load_arrays(ROOT / "cvt", e)
    meta = json.loads(json.dumps(e["meta"]))
    meta["forms"].pop()
    with pytest.raises(FixtureError, match="no form in meta"):
        REPLAYERS[e["kind"]](meta, arrays, full=False)


@pytest.mark.parametrize("name", ["../x.npz", "/tmp/x.npz", "a/b.npz", "..", "", "a\\b.npz"])
def test_entry_paths_outside_the_folder_are_refused(name, tmp_path):
    with pytest.raises(FixtureError, match="plain names inside their feature folder"):
        check_entry_file(name)
    with pytest.raises(FixtureError, match="plain names"):
        load_arrays(tmp_path, {"file": name, "sha256": "0"})


def test_write_fixture_refuses_paths_and_signs_the_index(tmp_path):
    with pytest.raises(FixtureError, match="plain names"):
        write_fixture("demo", "../escape", {"a": np.arange(3)}, kind="cvt", cases=3, meta={}, provenance={},
                      root=tmp_path)
    write_fixture("demo", "x", {"a": np.arange(3)}, kind="cvt", cases=3, meta={"forms": []}, provenance={},
                  root=tmp_path)
    idx = json.loads((tmp_path / "INDEX.json").read_text())["features"]["demo"]
    assert idx["entries"] == 1 and idx["cases"] == 3 and idx["files"] == ["x.npz"]
    assert check_index(tmp_path) == []


@needs_fixtures
def test_entry_pointing_outside_is_refused_by_verify(tmp_path):
    root = _copy(tmp_path, "torch")
    shutil.copy(root / "torch" / "scaled_mm_128x256x1024.npz", root / "outside.npz")
    _rewrite_manifest(root / "torch", lambda m: m["entries"][0].update(file="../outside.npz"))
    write_index(root)
    rc, out = _verify_json(root)
    assert rc == 1 and out["errors"][0]["short"] == "path outside its folder"
    assert "../outside.npz" in out["errors"][0]["error"]


@needs_fixtures
def test_summary_counts_and_names_unreadable_fixtures(tmp_path, capsys):
    """A refused fixture used to leave the summary at '0 mismatches' with exit 1."""
    root = _copy(tmp_path, "torch")
    with open(root / "torch" / "scaled_mm_128x256x1024.npz", "ab") as f:
        f.write(b"tampered")
    rc = cli_main(["verify", "--fixtures", str(root)])
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 1
    assert ("0 fixtures checked, 0 hardware outputs, 0 mismatches, 1 fixture(s) could not be checked: "
            "torch/scaled_mm_128x256x1024.npz (sha256 mismatch)") in out[-1]
    rc, js = _verify_json(root)
    assert rc == 1 and [e["short"] for e in js["errors"]] == ["sha256 mismatch"]


def test_verify_default_checks_everything(monkeypatch, capsys):
    """The default replays every stored output (full=True); --quick is the named subset."""
    import refmodel.verify.workers as wk

    seen = []

    def fake_verify_all(root, *, full, features, progress, jobs):
        seen.append(full)
        return iter([])

    monkeypatch.setattr(wk, "verify_all", fake_verify_all)
    for argv, want in ((["verify"], True), (["verify", "--full"], True), (["verify", "--quick"], False)):
        cli_main(argv)
        assert seen[-1] is want, argv
    capsys.readouterr()


def test_no_fixtures_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WGREF_FIXTURES", str(tmp_path / "none"))
    assert cli_main(["verify"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no fixtures found" in err and "WGREF_FIXTURES" in err
