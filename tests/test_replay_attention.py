"""The attention fixture plumbing: gpu.record.attention --fixture turns a recording directory into an
attention_seeded fixture, and refmodel.verify.replay_attention replays it (a recording made up here from the
drafts: it checks the packing, the digests and the input rebuild, not the hardware); FA2's split heuristic and
FlexAttention's key-block order against values worked out from their sources."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

import gpu.record.attention as R
from refmodel.golden import attention as A
from refmodel.verify import replay_attention as RA
from refmodel.verify.fixtures import load_arrays, load_manifest


def _fake_recording(tmp_path, cases):
    """A recording directory of the flash backend whose 'hardware' outputs are the FA2 draft's."""
    arrays, runs = {}, []
    meta = {"seed": R.SEED, "families": R.FAMILIES, "case_index": R.CASE_INDEX}
    for i in cases:
        c = R.CASES[i]
        for j, fam in enumerate(R.FAMILIES):
            q, k, v = RA.attention_inputs(meta, {**c, "index": i}, j)
            o, lse = zip(*(A.fa2_forward_draft(q[b, h], k[b, h], v[b, h], is_causal=c["causal"],
                                               num_splits=A.fa2_num_splits(c["B"], c["H"], c["S"], c["S"], c["D"]))
                           for b in range(c["B"]) for h in range(c["H"])))
            name = R.case_name(i, fam)
            ow = np.stack(o).view(np.uint16).reshape(c["B"], c["H"], c["S"], c["D"])
            lw = np.stack(lse).view(np.uint32).reshape(c["B"], c["H"], c["S"])
            arrays[f"o_{name}"], arrays[f"lse_{name}"] = ow, lw
            arrays[f"lseshape_{name}"] = np.array(lw.shape)
    np.savez(tmp_path / "attention_flash.npz", **arrays)
    runs.append({"backend": "flash", "errors": {}, "codes": {}, "torch": "made-up", "triton": "made-up",
                 "device": "none (a test)", "cudnn": 0})
    (tmp_path / "attention.json").write_text(json.dumps({"seed": R.SEED, "families": R.FAMILIES, "cases": R.CASES,
                                                         "case_index": R.CASE_INDEX, "runs": runs}))


def test_fixture_round_trip(tmp_path, monkeypatch):
    rec = tmp_path / "rec"
    rec.mkdir()
    _fake_recording(rec, [0, 2])
    print(R.write_fixtures(str(rec), str(tmp_path / "fx"), ["flash"]))
    d = tmp_path / "fx" / "attention"
    entry = load_manifest(d)["entries"][0]
    arrays = load_arrays(d, entry)

    def model(backend):
        def run(q, k, v, c, code):
            ns = A.fa2_num_splits(c["B"], c["H"], c["S"], c["S"], c["D"])
            o, lse = zip(*(A.fa2_forward_draft(q[b, h], k[b, h], v[b, h], is_causal=c["causal"], num_splits=ns)
                           for b in range(q.shape[0]) for h in range(q.shape[1])))
            return (np.stack(o).reshape(q.shape[:3] + (v.shape[3],)), np.stack(lse).reshape(q.shape[:3]))
        return run

    monkeypatch.setattr(RA, "_model", model)
    res = RA.replay_attention(entry["meta"], arrays)
    assert res.mismatches == 0 and res.cases == entry["cases"]
    bad = dict(arrays)
    bad["o_sha256"] = arrays["o_sha256"].copy()
    bad["o_sha256"][1, 2, 0] ^= 1
    res = RA.replay_attention(entry["meta"], bad)
    assert res.mismatches > 0 and "digest differs" in " ".join(res.details)


def test_inputs_are_the_recorders():
    meta = {"seed": R.SEED, "families": R.FAMILIES, "case_index": R.CASE_INDEX}
    got = RA.attention_codes(meta, {**R.CASES[3], "index": 3}, 2)
    want = R.qkv_codes(3, 2)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert hashlib.sha256(got[0].tobytes()).digest() != hashlib.sha256(got[1].tobytes()).digest()


@pytest.mark.parametrize("b,h,s,d,want", [(2, 2, 128, 64, 1), (2, 2, 128, 128, 1), (2, 2, 200, 64, 1),
                                          (2, 2, 200, 128, 2), (4, 16, 256, 64, 1), (4, 16, 256, 128, 1),
                                          (2, 2, 512, 128, 4), (2, 2, 1024, 128, 4)])
def test_fa2_num_splits(b, h, s, d, want):
    """num_splits_heuristic worked by hand from FA2 v2.7.4's flash_api.cpp (264 slots on 132 SMs)."""
    assert A.fa2_num_splits(b, h, s, s, d) == want


def test_flex_kv_order():
    """Causal S 200, BLOCK_M 128, BLOCK_N 64: create_block_mask pads the 200 x 200 mask with False, so sparse
    block (1, 0) (rows 128..255, of which 200..255 padding) is partial, not full: row block 1 runs keys
    0..255 as partial blocks, ascending.  At S 256 the diagonal (partial) block runs before the full one;
    without a mask, every key block ascending."""
    causal = A.flex_kv_order(200, 200, 128, 64, lambda qi, ki: qi >= ki)
    assert causal == [([0, 1], []), ([0, 1, 2, 3], [])]
    assert A.flex_kv_order(256, 256, 128, 64, lambda qi, ki: qi >= ki) == [([0, 1], []), ([2, 3], [0, 1])]
    assert A.flex_kv_order(200, 200, 128, 64) == [([0, 1, 2, 3], []), ([0, 1, 2, 3], [])]
    assert A.flex_kv_order(256, 256, 128, 128, lambda qi, ki: qi >= ki) == [([0], []), ([1], [0])]
