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
    rows = list(verify_all(ROOT, full=True, features=[feature]))
    assert rows
    for _, entry, res in rows:
        assert not isinstance(res, Exception), f"{entry['file']}: {res}"
        assert res.mismatches == 0, f"{entry['file']}: {res.details}"
        assert res.cases == entry["cases"] or entry["kind"] == "cvt_sweep", entry["file"]
