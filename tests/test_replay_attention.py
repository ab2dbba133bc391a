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
            o, lse = zip(*(A.fa2_forward(q[b, h], k[b, h], v[b, h], is_causal=c["causal"],
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
            o, lse = zip(*(A.fa2_forward(q[b, h], k[b, h], v[b, h], is_causal=c["causal"], num_splits=ns)
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


# ----------------------------------------------------------------------------- the recorded fixtures decide

def _recorded(backend, name):
    """(meta, case, arrays, case position) of one recorded case of fixtures/attention/<backend>.npz."""
    from pathlib import Path

    d = Path(__file__).resolve().parent.parent / "fixtures" / "attention"
    entry = next(e for e in load_manifest(d)["entries"] if e["file"] == f"{backend}.npz")
    arrays = load_arrays(d, entry)
    i = next(i for i, c in enumerate(entry["meta"]["cases"]) if c["name"] == name)
    return entry["meta"], entry["meta"]["cases"][i], arrays, i


def _head0_mismatches(backend, name, run, families=range(6)):
    """(O, LSE) words of batch 0, head 0 that ``run(q, k, v, causal)`` gets wrong against the recording (the
    fixture's raw rows of O and the whole LSE), over ``families``."""
    meta, c, arrays, i = _recorded(backend, name)
    bad_o = bad_l = 0
    for j in families:
        q, k, v = RA.attention_inputs(meta, c, j)
        o, lse = run(q[0, 0], k[0, 0], v[0, 0], c["causal"])
        ow = RA.o_words(o)[:RA.ROWS]
        bad_o += int(np.count_nonzero(ow != arrays[f"o{i}"][j]))
        bad_l += int(np.count_nonzero(np.asarray(lse, np.float32).view(np.uint32) != arrays[f"lse{i}"][j][:c["S"]]))
    return bad_o, bad_l


def test_the_recordings_decide_fa2s_contractions():
    """On the split-KV case (2 splits) the SASS's three FFMA sites give every recorded word; leaving the LSE
    FFMA out, or contracting the max (which the SASS does not), does not."""
    ns = 2
    name = "b2h2_s200_d128_full"
    assert A.fa2_num_splits(2, 2, 200, 200, 128) == ns

    def fa2(contract):
        return lambda q, k, v, causal: A.fa2_forward(q, k, v, is_causal=causal, contract=contract, num_splits=ns)

    assert _head0_mismatches("flash", name, fa2(A.FA2_CONTRACT)) == (0, 0)
    assert sum(_head0_mismatches("flash", name, fa2(("sum", "combine")))) > 0
    assert sum(_head0_mismatches("flash", name, fa2(("max",) + A.FA2_CONTRACT))) > 0
    assert sum(_head0_mismatches("flash", name, lambda q, k, v, causal: A.fa2_forward(q, k, v, is_causal=causal))) > 0


def test_the_recordings_decide_flexs_exponent_and_fp8_dots():
    """IS_DIVISIBLE False (S 200) puts a tl.where between the scale and the subtraction: ex2(rn(t - m)), not
    the FMA form; the FP8 template's dots are the e4m3 wgmma's, not exact float sums."""
    name = "b2h2_s200_d64_full"
    flex = lambda q, k, v, causal: A.flex_forward(q, k, v, is_causal=causal)  # noqa: E731
    assert _head0_mismatches("flex", name, flex) == (0, 0)
    assert sum(_head0_mismatches("flex", name, lambda q, k, v, causal: A.flex_forward(
        q, k, v, is_causal=causal, is_divisible=True))) > 0
    fp8 = "b2h2_s200_d64_full_e4m3"
    assert _head0_mismatches("flex", fp8, flex) == (0, 0)

    def exact(a, b, c):
        return (c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)

    real = A._chain
    try:
        A._chain = exact
        assert sum(_head0_mismatches("flex", fp8, flex)) > 0
    finally:
        A._chain = real


def test_the_backends_are_different_kernels():
    """The efficient backend's recording is not FA2's bits (nor the reverse): each backend needs its schedule."""
    name = "b2h2_s128_d64_full"
    mem = lambda q, k, v, causal: A.memeff_forward(q, k, v, is_causal=causal)  # noqa: E731
    fa2 = lambda q, k, v, causal: A.fa2_forward(q, k, v, is_causal=causal)  # noqa: E731
    assert _head0_mismatches("efficient", name, mem) == (0, 0)
    assert sum(_head0_mismatches("efficient", name, fa2)) > 0
    assert _head0_mismatches("flash", name, fa2) == (0, 0)
    assert sum(_head0_mismatches("flash", name, mem)) > 0


def test_a_quick_replay_checks_the_large_cases_head0_words():
    """full=False (CI's replay) models batch 0, head 0 of a large case with the whole call's B·H (FA2's split
    choice: this 4 x 16 call runs unsplit, one head alone would take 2 splits) and compares its raw words; a
    flipped recorded word is found, and a model that ignored the call's B·H would differ."""
    meta, c, arrays, i = _recorded("flash", "b4h16_s256_d128_full")
    assert RA._slow(c) and A.fa2_num_splits(4, 16, 256, 256, 128) == 1 and A.fa2_num_splits(1, 1, 256, 256, 128) == 2
    sub_meta = {**meta, "cases": [c]}
    sub = {"o_sha256": arrays["o_sha256"][i:i + 1], "lse_sha256": arrays["lse_sha256"][i:i + 1],
           "o0": arrays[f"o{i}"], "lse0": arrays[f"lse{i}"]}
    r = RA.replay_attention(sub_meta, sub, full=False)
    assert r.mismatches == 0 and not r.complete and r.cases == 6 * (RA.ROWS * 128 + 256)
    bad = dict(sub, o0=sub["o0"].copy())
    bad["o0"][3, 2, 5] ^= 1
    assert RA.replay_attention(sub_meta, bad, full=False).mismatches == 1
    q, k, v = RA.attention_inputs(meta, c, 0)
    alone, _ = A.sdpa(q[:1, :1], k[:1, :1], v[:1, :1], return_lse=True)
    assert not np.array_equal(alone.view(np.uint16)[0, 0, :RA.ROWS], arrays[f"o{i}"][0])


def test_causal_with_fewer_keys_than_queries():
    """300 queries, 150 keys, causal: the recorded flash kernel aligns the diagonal bottom-right (queries 0..149
    see no key: O 0, LSE +inf), the efficient kernel top-left (query 0 sees key 0); both models give the
    recorded words."""
    name = "b2h2_s300_k150_d128_causal"
    meta, c, arrays, i = _recorded("flash", name)
    assert not arrays[f"o{i}"].any() and np.all(arrays[f"lse{i}"][:, :150] == np.float32(np.inf).view(np.uint32))
    assert np.all(arrays[f"lse{i}"][0, 150:] != np.float32(np.inf).view(np.uint32))     # narrow: all finite

    def sdpa(backend):                   # one head of the 2 x 2 call (efficient's LSE padded to 32 rows: cut)
        def run(q, k, v, causal):
            o, lse = A.sdpa(q[None, None], k[None, None], v[None, None], is_causal=causal, backend=backend,
                            return_lse=True, batch_heads=4)
            return o[0, 0], lse[0, 0, :q.shape[0]]
        return run
    assert _head0_mismatches("flash", name, sdpa("flash")) == (0, 0)
    meta, c, arrays, i = _recorded("efficient", name)
    assert arrays[f"o{i}"].any()
    assert _head0_mismatches("efficient", name, sdpa("efficient")) == (0, 0)
