"""gpu.fuzz.library (``wgref fuzz lib:...``): the campaign loop with the golden models standing in for the
libraries (CPU), planted and NaN-payload mismatches, skipped split-K calls, the input families, the journal
(resume, shards, merge), the CLI; and one gpu-marked test against the real libraries on the H200."""

from __future__ import annotations

import json

import numpy as np
import pytest

import gpu.libraries.torch_cublas as TL
import refmodel.verify.families.matrix as MX
import refmodel.verify.library_calls as LC
from gpu.fuzz.library import fuzz_library
from gpu.libraries.torch_cublas import CallRefused
from refmodel.dtypes import bits_of
from refmodel.errors import InputError
from refmodel.verify.families.matrix import make_inputs, special_values
from refmodel.verify.journal import merge_journals, read_journal
from refmodel.verify.library_calls import FAMILIES, GoldenRunner, draw_call, golden_triton
from refmodel.verify.seeded import FORMATS

TARGETS = ("triton", "cublas", "scaled-mm")
DTYPES = ("e4m3", "e5m2", "f16", "bf16", "f32")


@pytest.fixture
def small(monkeypatch):
    """Small shapes, so the golden models run in milliseconds (the draws are otherwise unchanged)."""
    for name, v in (("TRITON_MN", (64, 128)), ("TRITON_K_BLOCKS", 3), ("CUBLAS_MN", (64, 128)),
                    ("CUBLAS_K", (64, 128, 256)), ("SCALED_MM_M", (64,)), ("SCALED_MM_N", (16, 64)),
                    ("SCALED_MM_K_BLOCKS", 3)):
        monkeypatch.setattr(LC, name, v)


class FlipRunner(GoldenRunner):
    """The golden models, with one output bit flipped in the ``at``-th call (shard 0/1: batch ``at``)."""

    def __init__(self, at: int, index: int = 5):
        self.at, self.index, self.n = at, index, 0

    def _flip(self, res):
        d, kernels = res
        if self.n == self.at:
            d = d.copy()
            bits_of(d).reshape(-1)[self.index] ^= 1
        self.n += 1
        return d, kernels

    def triton(self, x, cfg):
        return self._flip(super().triton(x, cfg))

    def cublas(self, x, cfg):
        return self._flip(super().cublas(x, cfg))

    def scaled_mm(self, x, cfg):
        return self._flip(super().scaled_mm(x, cfg))


def _records(path):
    recs = read_journal(path / "journal.jsonl")
    return recs[0]["header"], [r for r in recs[1:] if "batch" in r]


# ----------------------------------------------------------------------------- the loop

@pytest.mark.parametrize("target", TARGETS)
def test_golden_runner_finds_nothing_and_shards_merge_to_the_whole(target, small, tmp_path):
    rep = fuzz_library(f"lib:{target}", cases=4, seed=3, out=tmp_path / "all", runner=GoldenRunner())
    assert (rep.calls, rep.batches, rep.mismatches, rep.skipped) == (4, 4, 0, 0) and rep.outputs > 0
    head, recs = _records(tmp_path / "all")
    assert head == {"target": f"lib:{target}", "seed": 3, "engine": "library"}
    assert [r["batch"] for r in recs] == [0, 1, 2, 3]
    assert all(r["tiles"] == 1 and r["mismatches"] == 0 and r["skipped"] is False for r in recs)
    assert sum(r["outputs"] for r in recs) == rep.outputs
    for i in range(2):
        fuzz_library(target, cases=2, seed=3, out=tmp_path / f"s{i}", shard=(i, 2), runner=GoldenRunner())
        h, part = _records(tmp_path / f"s{i}")
        assert h["shard"] == [i, 2] and [r["batch"] for r in part] == [i, i + 2]
        assert [r["job"] for r in part] == [recs[i]["job"], recs[i + 2]["job"]]
    merged = merge_journals([tmp_path / "s0", tmp_path / "s1"])
    assert merged.complete and merged.batches == 4 and merged.tiles == 4
    assert merged.outputs == rep.outputs and merged.mismatches == 0 and merged.mismatching_batches == []


@pytest.mark.parametrize("target", TARGETS)
def test_a_flipped_bit_in_batch_2_is_reported_and_saved(target, small, tmp_path):
    rep = fuzz_library(target, cases=4, seed=1, out=tmp_path, runner=FlipRunner(at=2))
    assert rep.mismatches == 1 and rep.calls == 4
    _, recs = _records(tmp_path)
    assert [r["mismatches"] for r in recs] == [0, 0, 1, 0]
    assert rep.first["batch"] == 2 and (rep.first["row"], rep.first["col"]) == (0, 5)
    assert rep.first["job"] == recs[2]["job"] and "D[0,5]" in rep.first["minimal"]
    path = tmp_path / "mismatch_batch2.npz"
    assert rep.repro == str(path) and recs[2]["mismatch_file"] == str(path)
    with np.load(path) as z:
        assert np.count_nonzero(z["library"] != z["golden"]) == 1
        cfg = json.loads(str(z["config"]))
        assert cfg["batch"] == 2 and cfg["target"] == f"lib:{target}"
        cfg0, fam, x = draw_call(target, 1, 2)
        assert cfg["config"] == cfg0 and cfg["family"] == fam
        for k, v in x.items():           # the inputs, as bits (scales as float32)
            want = bits_of(v) if k in ("a", "b", "b_nk") else np.asarray(v, np.float32)
            assert np.array_equal(z[k], want)


def test_a_changed_nan_payload_is_a_mismatch(small, tmp_path):
    """Bits are compared as they are: a NaN with another payload is a mismatch."""
    for b in range(400):
        cfg, fam, x = draw_call("triton", 0, b)
        if fam == "special" and np.isnan(golden_triton(x, cfg).astype(np.float32)).any():
            break
    else:
        pytest.fail("no special-family Triton call with a NaN output among the first 400 batches")

    class Payload(GoldenRunner):
        def triton(self, x, cfg):
            d, k = super().triton(x, cfg)
            d = d.copy()
            i = np.flatnonzero(np.isnan(d.astype(np.float32)))[0]
            bits_of(d).reshape(-1)[i] ^= 2       # still a NaN, another payload
            assert np.isnan(d.astype(np.float32).reshape(-1)[i])
            return d, k

    rep = fuzz_library("triton", cases=1, seed=0, shard=(b, b + 1), out=tmp_path, runner=Payload())
    assert rep.mismatches == 1 and rep.first["batch"] == b


def test_an_unrecorded_split_k_is_skipped_not_a_mismatch(small, tmp_path):
    class SplitK(GoldenRunner):
        def cublas(self, x, cfg):
            d, _ = super().cublas(x, cfg)
            return d, ["nvjet_sm90_tst_64x32_64x16_1x2_h_bz_splitK_NNT",
                       "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>(...)"]

        def scaled_mm(self, x, cfg):
            d, _ = super().scaled_mm(x, cfg)
            return d, ["nvjet_sm90_qqsss_64x32_128x16_1x2_h_bz_algo2_splitK_TNT"]

    for target, why in (("cublas", "was not recorded"), ("scaled-mm", "split-K")):
        rep = fuzz_library(target, cases=3, seed=2, out=tmp_path / target, runner=SplitK())
        assert (rep.calls, rep.skipped, rep.mismatches, rep.outputs) == (3, 3, 0, 0)
        _, recs = _records(tmp_path / target)
        assert all(r["skipped"] is True and why in r["why"] and r["outputs"] == 0 for r in recs)
        assert "splitK" in recs[0]["kernels"][0]
        assert merge_journals([tmp_path / target]).mismatches == 0


def test_a_refused_configuration_is_skipped_with_the_reason(small, tmp_path):
    class Refuses(GoldenRunner):
        def triton(self, x, cfg):
            raise CallRefused("Triton refused it: CompilationError: nope")

    rep = fuzz_library("triton", cases=2, out=tmp_path, runner=Refuses())
    assert rep.skipped == 2 and rep.mismatches == 0
    assert all("CompilationError" in r["why"] for r in _records(tmp_path)[1])


def test_resume_continues_after_the_journal_and_refuses_another_campaign(small, tmp_path):
    fuzz_library("scaled-mm", cases=2, seed=5, out=tmp_path, runner=GoldenRunner())
    rep = fuzz_library("scaled-mm", cases=5, seed=5, out=tmp_path, resume=True, runner=GoldenRunner())
    assert rep.calls == 5 and rep.batches == 5
    assert [r["batch"] for r in _records(tmp_path)[1]] == [0, 1, 2, 3, 4]
    whole = fuzz_library("scaled-mm", cases=5, seed=5, out=tmp_path / "whole", runner=GoldenRunner())
    assert whole.outputs == rep.outputs
    with pytest.raises(InputError, match="another campaign"):
        fuzz_library("scaled-mm", cases=6, seed=6, out=tmp_path, resume=True, runner=GoldenRunner())
    with pytest.raises(InputError, match="another campaign"):
        fuzz_library("triton", cases=6, seed=5, out=tmp_path, resume=True, runner=GoldenRunner())


def test_bad_arguments_are_one_sentence_errors(tmp_path):
    for kw, msg in ((dict(target="lib:nope"), "lib:triton, lib:cublas, lib:scaled-mm"),
                    (dict(shard=(2, 2)), "shard"), (dict(seed=-1), "seed"), (dict(cases=0), "cases")):
        args = {"target": "triton", "cases": 1, "out": tmp_path, "runner": GoldenRunner(), **kw}
        with pytest.raises(InputError, match=msg):
            fuzz_library(args.pop("target"), **args)


# ----------------------------------------------------------------------------- draws and inputs

def test_draws_follow_the_library_rules(small):
    for b in range(300):
        t, _, _ = draw_call("triton", 9, b)
        kinstr = {"e4m3": 32, "e5m2": 32, "f16": 16, "bf16": 16, "f32": 8}[t["dtype"]]
        assert t["block_k"] % kinstr == 0 and t["K"] % t["block_k"] == 0 and t["M"] % LC.TRITON_BM == 0
        assert t["imp"] is None or (t["dtype"] in ("e4m3", "e5m2") and t["imp"] % 32 == 0 and t["imp"] <= t["block_k"])
        assert (t["input_precision"] is not None) == (t["dtype"] == "f32")
        s, _, x = draw_call("scaled-mm", 9, b)
        assert s["M"] % 64 == 0 and s["N"] % 16 == 0 and s["K"] % 128 == 0
        assert x["b_nk"].shape == (s["N"], s["K"]) and (s["scaling"] != "row" or s["out"] == "bf16")
        assert s["scaling"] != "row" or (x["scale_a"].shape, x["scale_b"].shape) == ((s["M"], 1), (1, s["N"]))
    seen = {draw_call("triton", 9, b)[0]["imp"] for b in range(300)}
    assert {None, 0, 32, 64, 96, 128} <= seen
    c1, f1, x1 = draw_call("cublas", 4, 7)
    c2, f2, x2 = draw_call("cublas", 4, 7)
    assert c1 == c2 and f1 == f2 and np.array_equal(bits_of(x1["a"]), bits_of(x2["a"]))


def _fields(x: np.ndarray, dtype: str):
    e, m, _, _ = FORMATS[dtype]
    u = bits_of(x).astype(np.int64)
    return (u >> m) & ((1 << e) - 1), u & ((1 << m) - 1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_input_families_have_their_properties(dtype):
    rng = np.random.default_rng(0)
    inp = {f: make_inputs(rng, f, dtype, 128, 64, 256) for f in FAMILIES}
    sp = special_values(dtype)
    for f, (a, b) in inp.items():
        assert a.shape == (128, 256) and b.shape == (256, 64)
        if f != "special":
            assert not np.isnan(a.astype(np.float32)).any() and np.isfinite(b.astype(np.float32)).all(), f
    a, b = inp["special"]
    v = a.astype(np.float32)
    mag = bits_of(a).astype(np.int64) & ~(1 << (8 * a.itemsize - 1))
    assert np.isnan(v).any() and (mag == sp["max"]).any() and (mag == sp["min_subnormal"]).any()
    if dtype != "e4m3":
        assert np.isinf(v).any()
    hits = np.mean(np.isin(mag, [sp["inf"], sp["nan"], sp["max"]]))       # 3 of the 5 kinds
    assert 0.3 / 256 < hits < 1.2 / 256                                    # of min(1/64, 1/K) = 1/256
    a, b = inp["cancel"]
    e, m, _, _ = FORMATS[dtype]
    assert np.array_equal(bits_of(a)[:, 1::2], bits_of(a)[:, 0::2])
    assert np.array_equal(bits_of(b)[1::2], bits_of(b)[0::2] ^ (1 << (e + m)))
    a, _ = inp["zero"]
    assert np.mean(a.astype(np.float32) == 0) > 0.9 and np.signbit(a.astype(np.float32)[a.astype(np.float32) == 0]).any()
    ef, man = _fields(inp["subnormal"][0], dtype)
    assert 0.7 < np.mean((ef == 0) & (man != 0)) < 0.8 and np.all(ef <= 3)
    big = np.abs(inp["subnormal"][1].astype(np.float64))
    assert big.min() >= 2.0 ** (min((1 << (e - 1)) - 2, 56) - 4)          # products of the two are normal
    ef, _ = _fields(inp["wide"][0], dtype)
    assert np.unique(ef).size >= 10 and np.abs(inp["wide"][0].astype(np.float64)).max() < 2.0 ** (MX.WIDE_TOP + 1)
    assert np.all(np.abs(inp["narrow"][0].astype(np.float32)) < 2 ** 10)


def test_cancel_pairs_make_the_products_cancel():
    a, b = make_inputs(np.random.default_rng(1), "cancel", "f16", 64, 64, 64)
    p = a.astype(np.float64)[:, :, None] * b.astype(np.float64)[None, :, :]     # exact f16 products
    assert np.all(p[:, 0::2] + p[:, 1::2] == 0) and np.any(p != 0)


# ----------------------------------------------------------------------------- the CLI

def _cli(capsys, *argv):
    from wgref.cli import main

    rc = main(list(argv))
    return rc, capsys.readouterr()


def test_cli_library_targets(small, tmp_path, capsys, monkeypatch):
    rc, cap = _cli(capsys, "fuzz", "lib:nope", "--out", str(tmp_path))
    assert rc == 2 and "lib:triton, lib:cublas, lib:scaled-mm" in cap.err
    for extra in (["--dry-run"], ["--devices", "0"], ["--engine", "gpu"]):
        rc, cap = _cli(capsys, "fuzz", "lib:triton", "--out", str(tmp_path), *extra)
        assert rc == 2 and "do not apply to lib: targets" in cap.err, extra
    monkeypatch.setattr(TL, "TorchRunner", GoldenRunner)
    rc, cap = _cli(capsys, "fuzz", "lib:scaled-mm", "--cases", "3", "--seed", "2", "--out", str(tmp_path / "a"),
                   "--shard", "1/2", "--json")
    rep = json.loads(cap.out)
    assert rc == 0 and rep["calls"] == 3 and rep["mismatches"] == 0 and rep["target"] == "lib:scaled-mm"
    assert read_journal(tmp_path / "a" / "journal.jsonl")[0]["header"]["shard"] == [1, 2]
    rc, cap = _cli(capsys, "fuzz", "lib:cublas", "--cases", "2", "--out", str(tmp_path / "b"))
    assert rc == 0 and "2 cublas calls (0 skipped)" in cap.out and " 0 mismatches" in cap.out
    monkeypatch.setattr(TL, "TorchRunner", lambda: FlipRunner(at=1))
    rc, cap = _cli(capsys, "fuzz", "lib:triton", "--cases", "3", "--out", str(tmp_path / "c"))
    assert rc == 1 and "1 mismatches" in cap.out and "first mismatch:" in cap.out and "mismatch_batch1.npz" in cap.out
    monkeypatch.setattr(TL, "TorchRunner", GoldenRunner)
    rc, cap = _cli(capsys, "fuzz", "lib:triton", "--cases", "4", "--out", str(tmp_path / "c"), "--resume")
    assert rc == 1 and "4 triton calls" in cap.out and "1 mismatches" in cap.out   # the journaled one counts


# ----------------------------------------------------------------------------- the H200

@pytest.mark.gpu
@pytest.mark.parametrize("target", TARGETS)
def test_library_calls_on_the_gpu_match_their_golden_models(target, tmp_path, request):
    """The real library (cuBLAS through torch, torch._scaled_mm, Triton) on 3 drawn calls, bit for bit."""
    for mod in ["torch"] + (["triton"] if target == "triton" else []):
        if request.config.getoption("--require-gpu"):
            __import__(mod)
        else:
            pytest.importorskip(mod)
    rep = fuzz_library(target, cases=3, seed=0, out=tmp_path, progress=True)
    journal = (tmp_path / "journal.jsonl").read_text()
    assert rep.calls == 3 and rep.outputs > 0, journal
    assert rep.mismatches == 0, (rep.first, journal)
