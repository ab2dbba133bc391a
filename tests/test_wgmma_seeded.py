"""fixtures/wgmma as seeds + digests (kind wgmma_seeded, tools/shrink_wgmma.py): the inputs rebuild from the
seed bit for bit, and a wrong model, a changed generator or a tampered digest is caught."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from refmodel.verify.fixtures import FixtureError, load_arrays, load_manifest
from refmodel.verify.replay_wgmma import SEEDED_ROWS, replay_wgmma_seeded, seeded_inputs

ROOT = Path(__file__).resolve().parent.parent
D = ROOT / "fixtures" / "wgmma"


@pytest.fixture(scope="module")
def entries():
    return [e for e in load_manifest(D)["entries"] if e["kind"] == "wgmma_seeded"]


def test_every_job_is_stored_as_seeds_and_digests(entries):
    assert len(entries) == 324
    for e in entries:
        arrays = load_arrays(D, e)
        assert set(arrays) == {"d_rows"} and arrays["d_rows"].shape[1] == len(SEEDED_ROWS)
        assert e["cases"] == arrays["d_rows"].shape[0] * 64 * arrays["d_rows"].shape[2]


@pytest.mark.parametrize("i", [0, 100, 323])
def test_the_inputs_rebuild_and_the_model_matches(entries, i):
    e = entries[i]
    r = replay_wgmma_seeded(e["meta"], load_arrays(D, e))
    assert r.mismatches == 0 and r.cases == e["cases"]


def _nan_job(entries):
    return next(e for e in entries if "f32.e4m3.e4m3" in e["meta"]["instr"] and e["meta"]["chain"] == 1)


def test_a_wrong_output_is_counted(entries):
    e = _nan_job(entries)
    arrays = {k: v.copy() for k, v in load_arrays(D, e).items()}
    arrays["d_rows"][0, 0, 0] ^= 1
    r = replay_wgmma_seeded(e["meta"], arrays)
    assert r.mismatches == 1 and "kept rows" in r.details[0]
    meta = copy.deepcopy(e["meta"])
    meta["d_sha256"] = "0" * 64                     # the rows outside the kept ones
    r = replay_wgmma_seeded(meta, load_arrays(D, e))
    assert r.mismatches == e["cases"] - load_arrays(D, e)["d_rows"].size and "sha256" in r.details[0]


def test_a_changed_generator_is_named(entries):
    e = _nan_job(entries)
    meta = copy.deepcopy(e["meta"])
    meta["seed"] = [meta["seed"][0], meta["seed"][1] + 1]
    with pytest.raises(FixtureError, match="generator changed"):
        replay_wgmma_seeded(meta, load_arrays(D, e))
    a, b, c, fam = seeded_inputs(e["meta"])
    assert a.shape[0] == len(e["meta"]["tiles"]) == fam.size
    assert set(fam.tolist()) <= set(range(len(e["meta"]["families"])))
