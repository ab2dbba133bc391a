"""Adversarial file formats, flags and the CLI guard (issue 16): replay files (dense and sparse),
fuzz journals and ``wgref merge``, every ``wgref fuzz`` / ``wgref golden`` flag, and what the
command line does with a bug, a closed pipe, Ctrl-C and unprintable names.

The properties:

* a replay file or journal whose structure is wrong anywhere (a value of the wrong JSON type in
  any field, a list where an object belongs, NaN / negative / fractional / duplicated counts,
  ``shard [0, 0]``, 100 000-deep nesting, a torn line) loads cleanly or gives one
  :class:`~refmodel.errors.InputError` -- never another exception -- and the dense and sparse
  replay loaders accept exactly the same values of their common fields (one checker);
* ``wgref merge`` never changes a journal (byte for byte), and reports a torn last line;
* every bad value of a ``wgref fuzz`` flag, and every option that does not apply to the target,
  is exit 2 with one stderr line before any worker starts, a GPU is touched or --out is created;
* the CLI never shows a traceback: a bug is exit 2 and one line naming the command, a closed
  pipe exits quietly, Ctrl-C exits 130, surrogates in names are printed escaped.

CI runs the deterministic ``ci`` Hypothesis profile (tests/conftest.py); every case tried is
counted in ``adversarial_counter``.
"""

from __future__ import annotations

import io
import json
import math
import os
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from refmodel.errors import InputError, WgrefError
from refmodel.verify.case import DENSE_REPLAY, REPLAY_COMMON, WgmmaCase, load_case, save_case
from refmodel.verify.journal import merge_journals, read_journal, scan_journal
from refmodel.verify.shrink_sparse import SPARSE_REPLAY, SparseCase, load_sparse_case, save_sparse_case
from wgref.cli import main

from cli_harness import run_cli

ROOT = Path(__file__).resolve().parent.parent
SCALE = 20 if os.environ.get("HYPOTHESIS_PROFILE") == "thorough" else 1
INSTR = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"
SP_F16 = "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16"


def n(k: int) -> int:
    return k * SCALE


# ----------------------------------------------------------------------------- helpers

def check_cli(argv, *, want=None):
    rc, out, err = run_cli(argv)
    assert "Traceback" not in err and "Traceback" not in out, (argv, err)
    assert rc in (0, 1, 2, 3), (argv, rc, err)
    if rc == 2:
        assert err.count("\n") == 1 and err.strip(), f"{argv}: stderr must be one line, got {err!r}"
    if want is not None:
        assert rc == want, (argv, rc, out, err)
    return rc, out, err


def outcome(fn, *args, **kw):
    """Success or one one-line WgrefError: anything else fails the property."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args, **kw)
    except WgrefError as e:
        assert str(e) and "\n" not in str(e), repr(str(e))
        return e
    except Exception as e:  # noqa: BLE001 - the property under test
        pytest.fail(f"{getattr(fn, '__name__', fn)} raised {type(e).__name__}: {str(e)[:300]}")


# any JSON value: what a hand-edited or corrupted file may hold where a field belongs
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.sampled_from([0, 1, -1, 2, 2**63, -0]),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([0.0, 1.0, 0.5, -1.5, 1e300]),
    st.text(max_size=8), st.sampled_from(["", "false", "true", "0", "1", "no", "yes", "nan", "-1", INSTR]),
)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)), max_leaves=6)
# what json.dumps can write but strict JSON has not: NaN and +-Infinity
specials = st.sampled_from([math.nan, math.inf, -math.inf])


def _is_flag(v) -> bool:
    return isinstance(v, bool) or (type(v) is int and v in (0, 1))


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


# ----------------------------------------------------------------------------- replay files

def _dense_case() -> WgmmaCase:
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 5, (1, 64, 32)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    b = rng.integers(-4, 5, (1, 32, 8)).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    return WgmmaCase(INSTR, a, b, np.zeros((1, 64, 8), np.float32))


def _sparse_case() -> SparseCase:
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, (64, 16)).astype(np.float16)
    b = rng.integers(-3, 4, (32, 8)).astype(np.float16)
    return SparseCase(SP_F16, a, np.full((64, 8), 0b0100, np.uint8), b, np.zeros((64, 8), np.float32))


@pytest.fixture(scope="module")
def replay_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("replay")
    dc, sc = _dense_case(), _sparse_case()
    save_case(d / "dense.npz", dc, hardware=dc.model())
    save_sparse_case(d / "sparse.npz", sc, hardware=sc.model())
    out = {}
    for name in ("dense", "sparse"):
        with np.load(d / f"{name}.npz") as z:
            out[name] = {k: z[k] for k in z.files}
    return out


def _write(path: Path, arrays: dict, cfg=None, cfg_text=None) -> Path:
    arrays = dict(arrays)
    if cfg_text is not None:
        arrays["config"] = np.array(cfg_text)
    elif cfg is not None:
        arrays["config"] = np.array(json.dumps(cfg))
    np.savez(path, **arrays)
    return path


def _load(which):
    return load_case if which == "dense" else load_sparse_case


@settings(max_examples=n(120))
@given(which=st.sampled_from(["dense", "sparse"]), key=st.sampled_from(sorted(set(DENSE_REPLAY) | set(SPARSE_REPLAY))
                                                                       + ["extra", "sparse"]),
       value=json_values)
def test_any_field_of_a_replay_file_holding_any_json_value(replay_files, tmp_path_factory, which, key, value,
                                                           adversarial_counter):
    """Each field of a replay configuration replaced by any JSON value: loaded with the value
    the checker allows, or one InputError; a flag is never read with bool() ("false" is refused)."""
    adversarial_counter["cases"] += 1
    z = replay_files[which]
    cfg = json.loads(str(z["config"]))
    cfg[key] = value
    p = _write(tmp_path_factory.mktemp("f") / "r.npz", z, cfg)
    res = outcome(_load(which), p)
    schema = DENSE_REPLAY if which == "dense" else SPARSE_REPLAY
    if key not in schema:
        assert isinstance(res, InputError) and "only the keys" in str(res)
        return
    f = schema[key]
    if f.kind == "flag" and not _is_flag(value):
        assert isinstance(res, InputError), f"{key}={value!r} accepted"
    if f.kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
        assert isinstance(res, InputError), f"{key}={value!r} accepted"
    if not isinstance(res, WgrefError):
        case, _ = res
        assert isinstance(case.scale_d, bool) and isinstance(case.rs, bool)
        assert case.imm_scale_a in (1, -1) and case.imm_scale_b in (1, -1)
    check_cli(["replay", str(p), "--cpu"])


@settings(max_examples=n(60))
@given(key=st.sampled_from(sorted(k for k in REPLAY_COMMON if k != "instr")), value=json_values)
def test_dense_and_sparse_loaders_agree_on_their_common_fields(replay_files, tmp_path_factory, key, value,
                                                             adversarial_counter):
    """One checker: the dense and the sparse loader accept exactly the same values of the fields
    every replay file has (the sparse loader read ``"scale_d": "false"`` as true)."""
    adversarial_counter["cases"] += 1
    d = tmp_path_factory.mktemp("both")
    verdicts = []
    for which in ("dense", "sparse"):
        z = replay_files[which]
        cfg = json.loads(str(z["config"]))
        cfg[key] = value
        res = outcome(_load(which), _write(d / f"{which}.npz", z, cfg))
        verdicts.append(isinstance(res, WgrefError))
    assert verdicts[0] == verdicts[1], (key, value, verdicts)


@pytest.mark.parametrize("which", ["dense", "sparse"])
@pytest.mark.parametrize("text,msg", [
    ('{"instr": "' + INSTR + '", "scale_d": "false"}', "scale_d must be"),
    ('[1, 2, 3]', "must be a JSON object"),
    ('"just a string"', "must be a JSON object"),
    ('{"instr": 5}', "instr must be a string"),
    ('{"instr": "x", "notes": []}', "notes must be a JSON object"),
    ('{"instr": "x", "imm_scale_a": NaN}', "not strict JSON"),
    ('{"instr": "x", "imm_scale_a": 1.0}', "must be an integer"),
    ('{"instr": "x", "rs": 2}', "rs must be"),
    ('{"instr": "x", "notes": ' + _deep(100_000) + '}', "nests deeper"),
    ('{"instr": "x", "notes": {"a": ' + _deep(80) + '}}', "nests deeper"),
    ("[" * 100_000, "nests deeper"),
    ("{" * 100_000, "not valid JSON"),
    ('{"instr": ', "not valid JSON"),
    ("", "not valid JSON"),
])
def test_malformed_replay_configurations(replay_files, tmp_path, which, text, msg, adversarial_counter):
    adversarial_counter["cases"] += 1
    if which == "sparse" and text.startswith("{\"instr\""):
        text = text.replace("{", '{"sparse": true, ', 1)
    p = _write(tmp_path / "r.npz", replay_files[which], cfg_text=text)
    with pytest.raises(InputError, match=msg):
        _load(which)(p)
    rc, _, err = check_cli(["replay", str(p), "--cpu"], want=2)


@pytest.mark.parametrize("which", ["dense", "sparse"])
@pytest.mark.parametrize("change,msg", [
    (lambda z: z.update(config=np.arange(3)), "one JSON string"),
    (lambda z: z.update(config=np.array([json.dumps({"instr": INSTR})] * 2)), "one JSON string"),
    (lambda z: z.update(extra=np.zeros(3)), "do not belong"),
    (lambda z: z.pop("c"), "no array 'c'"),
    (lambda z: z.update(c=z["c"].astype(np.float32)), "raw 32-bit patterns"),
])
def test_malformed_replay_arrays(replay_files, tmp_path, which, change, msg, adversarial_counter):
    adversarial_counter["cases"] += 1
    z = dict(replay_files[which])
    change(z)
    p = _write(tmp_path / "r.npz", z)
    with pytest.raises(InputError, match=msg):
        _load(which)(p)
    check_cli(["replay", str(p), "--cpu"], want=2)


def test_zero_tile_replay_file_is_refused_not_a_vacuous_match(replay_files, tmp_path, adversarial_counter):
    adversarial_counter["cases"] += 1
    z = {k: (v[:0] if k != "config" else v) for k, v in replay_files["dense"].items()}
    p = _write(tmp_path / "empty.npz", z)
    with pytest.raises(InputError, match="no tiles: nothing to replay"):
        load_case(p)
    rc, out, err = check_cli(["replay", str(p), "--cpu"], want=2)
    assert "nothing to replay" in err


def test_sparse_replay_file_values_are_checked(replay_files, tmp_path, adversarial_counter):
    z = dict(replay_files["sparse"])
    cfg = json.loads(str(z["config"]))
    for change, msg in ((dict(sp_sel=2), "sp_sel must be"), (dict(sparse=False), "must be true"),
                        (dict(sparse="false"), "sparse must be"), (dict(imm_scale_b=0), "1 or -1"),
                        (dict(instr="wgmma.mma_async.sp.sync.aligned.m64n16k32.f32.f16.f16"), "must have shape")):
        adversarial_counter["cases"] += 1
        p = _write(tmp_path / "s.npz", z, {**cfg, **change})
        with pytest.raises(InputError, match=msg):
            load_sparse_case(p)
    adversarial_counter["cases"] += 1
    p = _write(tmp_path / "s.npz", {**z, "meta": np.full((64, 8), 17, np.uint8)}, cfg)
    with pytest.raises(InputError, match="4-bit nibbles"):
        load_sparse_case(p)
    back, hw = load_sparse_case(_write(tmp_path / "ok.npz", z, cfg))   # the saved file itself loads
    assert back.scale_d is True and hw is not None


def test_a_replay_file_that_would_not_load_back_is_never_written(tmp_path):
    case = _dense_case()
    case.notes["deep"] = json.loads(_deep(100))
    with pytest.raises(InputError, match="nests deeper"):
        save_case(tmp_path / "x.npz", case)
    assert not (tmp_path / "x.npz").exists()
    case.notes = {"nan": math.nan}          # strict JSON: written as "nan", read back
    back, _ = load_case(save_case(tmp_path / "y.npz", case))
    assert back.notes == {"nan": "nan"}


# ----------------------------------------------------------------------------- journals

HEAD = {"target": "fp8", "seed": 3, "batch_tiles": 8}


def _rec(b, **kw):
    return {"batch": b, "job": "x", "tiles": 8, "outputs": 100, "mismatches": 0, "seconds": 0.25, **kw}


def _journal(d: Path, shard=(0, 1), batches=None, head=None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    h = dict(head or HEAD)
    if shard[1] > 1:
        h["shard"] = list(shard)
    recs = [{"header": h}] + [_rec(b) for b in (batches if batches is not None else range(shard[0], 8, shard[1]))]
    p = d / "journal.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return p


def _merge_keeps_files(paths, files):
    """merge (library and CLI): outcome, and the files byte-identical afterwards."""
    before = {f: f.read_bytes() for f in files}
    res = outcome(merge_journals, paths)
    rc, out, err = check_cli(["merge", *map(str, paths)])
    for f, raw in before.items():
        assert f.read_bytes() == raw, f"merge changed {f}"
    return res, rc, out, err


HEADER_KEYS = ["target", "seed", "engine", "families", "rs", "chain", "scale_d", "batch_tiles", "shard", "extra"]
RECORD_KEYS = ["batch", "tiles", "outputs", "mismatches", "seconds", "job", "port_disagreements",
               "tiles_copied_back", "repro", "skipped", "kernels", "why", "extra", "header"]


@settings(max_examples=n(150))
@given(data=st.data(), line=st.integers(0, 3), value=json_values)
def test_any_field_of_a_journal_holding_any_json_value(tmp_path_factory, data, line, value, adversarial_counter):
    """A field of the header or of a batch record (or the header itself) replaced by any JSON
    value: merged with the value the format allows, or one InputError; counts are never summed
    unless they are ints >= 0, and the file is never changed."""
    adversarial_counter["cases"] += 1
    j = _journal(tmp_path_factory.mktemp("j"))
    recs = [json.loads(x) for x in j.read_text().splitlines()]
    if line == 0:
        key = data.draw(st.sampled_from(HEADER_KEYS + ["<whole header>"]))
        if key == "<whole header>":
            recs[0] = {"header": value}
        else:
            recs[0]["header"][key] = value
    else:
        key = data.draw(st.sampled_from(RECORD_KEYS))
        recs[line][key] = value
    j.write_text("".join(json.dumps(r) + "\n" for r in recs))
    res, rc, out, err = _merge_keeps_files([j], [j])
    if isinstance(res, WgrefError):
        assert rc == 2
        return
    for attr in ("batches", "tiles", "outputs", "mismatches", "port_disagreements"):
        v = getattr(res, attr)
        assert type(v) is int and v >= 0, (attr, v)
    assert math.isfinite(res.worker_seconds) and res.worker_seconds >= 0 and res.mismatches <= res.outputs
    if key in ("batch", "tiles", "outputs", "mismatches", "port_disagreements", "tiles_copied_back", "seed"):
        assert type(value) is int and value >= 0, (key, value)


@pytest.mark.parametrize("mutate,msg", [
    (lambda r: r[1].update(tiles=-8), "tiles must be an integer from 0"),
    (lambda r: r[1].update(outputs=100.5), "outputs must be an integer"),
    (lambda r: r[1].update(outputs=1e400), "not strict JSON"),
    (lambda r: r[1].update(mismatches="3"), "mismatches must be an integer"),
    (lambda r: r[1].update(mismatches=True), "mismatches must be an integer"),
    (lambda r: r[1].update(mismatches=101), "must not exceed outputs"),
    (lambda r: r[1].update(seconds=-1), "seconds must be a finite number"),
    (lambda r: r[1].update(batch=-2), "batch must be an integer from 0"),
    (lambda r: r[2].update(batch=r[1]["batch"]), "appears twice"),
    (lambda r: r[0]["header"].update(shard=[0, 0]), "shard must be"),
    (lambda r: r[0]["header"].update(shard=[3, 2]), "shard must be"),
    (lambda r: r[0]["header"].update(shard="0/2"), "shard must be a list"),
    (lambda r: r[0]["header"].update(seed=-1), "seed must be"),
    (lambda r: r[0].update(header=[1, 2]), "must be a JSON object"),
    (lambda r: r.insert(2, {"header": HEAD}), "second header"),
    (lambda r: r.insert(2, [1, 2, 3]), "must be a JSON object"),
    (lambda r: r.insert(2, {"note": "hi"}), "only the keys"),
    (lambda r: r.pop(0), "journal header"),
    (lambda r: r[1].update(repro="a\x00b"), "NUL"),
])
def test_malformed_journal_records(tmp_path, mutate, msg, adversarial_counter):
    adversarial_counter["cases"] += 1
    j = _journal(tmp_path / "a")
    recs = [json.loads(x) for x in j.read_text().splitlines()]
    mutate(recs)
    j.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(InputError, match=msg):
        merge_journals([j])
    with pytest.raises(InputError, match=msg):
        read_journal(j)
    _merge_keeps_files([j], [j])


@pytest.mark.parametrize("text,msg", [
    ('{"batch": 1, "tiles": 8, "outputs": NaN, "mismatches": 0, "seconds": 0.1}\n', "not strict JSON"),
    ('{"batch": 1, "tiles": 8, "outputs": 8, "mismatches": 0, "seconds": Infinity}\n', "not strict JSON"),
    (_deep(100_000) + "\n", "nests deeper"),
    ('{"batch": ' + "9" * 5000 + '}\n', "not strict JSON"),
    ("x" * (2 << 20) + "\n", "longer than"),
    ('{"batch": 1, "tiles": 8, "outputs": 8,\n{"batch": 2}\n', "line 3 is not a journal record"),
])
def test_bad_journal_lines(tmp_path, text, msg, adversarial_counter):
    adversarial_counter["cases"] += 1
    j = _journal(tmp_path / "a", batches=[0])
    j.write_text(j.read_text() + text + json.dumps(_rec(5)) + "\n")
    with pytest.raises(InputError, match=msg):
        merge_journals([j])
    _merge_keeps_files([j], [j])


def test_a_journal_path_that_is_not_a_file(tmp_path, adversarial_counter):
    os.mkfifo(tmp_path / "fifo")
    for p, msg in ((tmp_path / "fifo", "not a journal file"), (tmp_path / "none", "does not exist")):
        adversarial_counter["cases"] += 1
        with pytest.raises(InputError, match=msg):
            merge_journals([p])
        check_cli(["merge", str(p)], want=2)


@settings(max_examples=n(80))
@given(cut=st.integers(1, 120), shard=st.sampled_from([(0, 1), (1, 2)]), flip=st.integers(0, 400),
       x=st.integers(0, 255))
def test_merge_leaves_any_journal_byte_identical(tmp_path_factory, cut, shard, flip, x, adversarial_counter):
    """A journal torn anywhere in its last line, or with a byte flipped anywhere: ``wgref merge``
    merges it, reports a torn line or refuses it -- and the file is byte for byte what it was."""
    adversarial_counter["cases"] += 1
    d = tmp_path_factory.mktemp("m")
    j = _journal(d / f"shard-{shard[0]}", shard=shard)
    raw = bytearray(j.read_bytes())
    last = raw.rindex(b"\n", 0, len(raw) - 1) + 1
    torn = bytes(raw[: last + min(cut, len(raw) - last - 2)])       # the last record cut short
    if flip < len(torn):
        t = bytearray(torn)
        t[flip] ^= x
        torn = bytes(t)
    j.write_bytes(torn)
    res, rc, out, err = _merge_keeps_files([j], [j])
    if flip >= len(torn):   # only the cut: merged, the torn line reported
        lines = torn.count(b"\n") + 1
        assert not isinstance(res, WgrefError) and res.torn == [f"{j} line {lines}"] and "torn last line" in out


def test_torn_journal_merge_reports_resume_repairs(tmp_path, adversarial_counter):
    """merge reads a live journal (a worker appending) without cutting it; only the resuming
    writer cuts its own torn line, fsynced, and then appends cleanly."""
    from gpu.fuzz.cpu_engine import fuzz, model_device

    adversarial_counter["cases"] += 1
    out = tmp_path / "camp"
    kw = dict(cases=24, seed=2, batch_tiles=8, hw=model_device, progress=False, out=out)
    fuzz(INSTR, **kw)
    j = out / "journal.jsonl"
    whole = j.read_bytes()
    j.write_bytes(whole + b'{"batch": 3, "job": "x", "tiles"')
    torn = j.read_bytes()
    rep = merge_journals([j])
    assert j.read_bytes() == torn and rep.torn == [f"{j} line 5"] and rep.batches == 3
    rc, text, _ = check_cli(["merge", str(out)], want=0)
    assert "torn last line not counted" in text and j.read_bytes() == torn
    rc, text, _ = check_cli(["merge", str(out), "--json"], want=0)
    assert json.loads(text)["torn"] == [f"{j} line 5"] and j.read_bytes() == torn
    with pytest.warns(UserWarning, match="torn last line"):
        assert len(read_journal(j, repair=False)) == 4
    assert j.read_bytes() == torn
    with pytest.warns(UserWarning, match="torn last line"):     # the writer repairs, then appends
        again = fuzz(INSTR, **{**kw, "cases": 32}, resume=True)
    assert again.tiles >= 32 and again.batches == 4
    recs = scan_journal(j)
    assert recs.torn_line is None and [r["batch"] for r in recs.records[1:]] == [0, 1, 2, 3]
    # a last record without its newline: counted by readers, completed by the resuming writer
    j.write_bytes(j.read_bytes()[:-1])
    assert merge_journals([j]).batches == 4 and not j.read_bytes().endswith(b"\n")
    fuzz(INSTR, **{**kw, "cases": 40}, resume=True)
    assert [r["batch"] for r in scan_journal(j).records[1:]] == [0, 1, 2, 3, 4]


def test_journal_appends_are_fsynced(tmp_path, monkeypatch, adversarial_counter):
    from gpu.fuzz.cpu_engine import fuzz, model_device

    adversarial_counter["cases"] += 1
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    rep = fuzz(INSTR, cases=32, seed=1, batch_tiles=8, hw=model_device, progress=False, out=tmp_path)
    assert rep.batches == 4 and len(synced) >= 1 + rep.batches   # the header's write, then every record


# ----------------------------------------------------------------------------- wgref fuzz flags

@pytest.fixture
def no_work(monkeypatch):
    """Anything that would start work fails the test: the GPU check, workers, every engine."""
    import gpu.fuzz.campaign as C
    import gpu.fuzz.cpu_engine as E
    import gpu.fuzz.library as L
    import gpu.kernels.runtime as R

    def boom(*a, **k):
        raise AssertionError("work started before the flags were checked")

    for mod, name in ((R, "require_device"), (R, "device_count"), (C, "run_workers"), (E, "fuzz"),
                      (E, "fuzz_cvt"), (E, "fuzz_layout"), (E, "fuzz_sparse"), (L, "fuzz_library")):
        monkeypatch.setattr(mod, name, boom)
    import gpu.fuzz.gpu_engine as G
    monkeypatch.setattr(G, "fuzz_device", boom)


@pytest.fixture(scope="module")
def spots(tmp_path_factory):
    d = tmp_path_factory.mktemp("spots")
    (d / "afile").write_text("x")
    return d


BAD_FLAGS = {
    "--cases": ["-5", "0", str(10**13), "1.5", "nan", "1_0", "", "0x10", "1e3", "٣"],
    "--time": ["nan", "inf", "-1", "0", "", "1x", "1e400", "-inf", "0s", "1_0", "5 m m"],
    "--seed": ["-1", str(2**63), "1.0", "", "x"],
    "--chain": ["0", "-1", "129", "2.5"],
    "--batch-tiles": ["0", "-1", "1000000"],
    "--devices": ["", ",", "0,,1", "a", "-1", ",".join(["0"] * 300), "1.5", " "],
    "--shard": ["0/0", "1/1", "-1/2", "a/b", "1/2/3", "", "٣/٤", str(10**30) + "/2"],
    "--inject-fault": ["1-4", "-1:2", "1:", ":", "a:b"],
    "--families": ["", ",", "nope", "cancel,,random_bits", " "],
    "--out": ["afile", "afile/sub", "", "/dev/null"],
}
EXTRA_BAD = [   # (target, argv) whose combination is refused
    ("", []), ("  ", []), (",", []), ("layout:", []), ("sparse:zzz", []), ("lib:nope", []), ("cvt.bogus", []),
    ("layouts", []), (INSTR, ["--restarts", "3"]), (INSTR, ["--devices", "0", "--restarts", "-1"]),
    (INSTR, ["--devices", "0", "--restarts", "101"]), (INSTR, ["--devices", "all", "--dry-run"]),
    (INSTR, ["--families", "int_random"]),   # an int8 family for an fp8 form
]
# options that do not apply, per target kind
NOT_APPLYING = {
    "lib:triton": ["--devices 0", "--dry-run", "--engine gpu", "--engine cpu", "--inject-fault 0:1",
                   "--batch-tiles 8", "--families cancel", "--operand rs", "--chain 2", "--keep-going"],
    "cvt": ["--shard 0/2", "--resume", "--devices 0", "--dry-run", "--chain 2", "--operand ss", "--batch-tiles 4"],
    "layout": ["--shard 0/2", "--resume", "--keep-going", "--families cancel", "--batch-tiles 8"],
    "layout --engine gpu": ["--shard 0/2", "--resume", "--keep-going", "--families cancel", "--chain 2", "--dry-run"],
    "sparse:f16 --engine gpu": ["--devices 0", "--resume", "--chain 1", "--operand rs"],
    "sparse:f16": ["--devices 0", "--inject-fault 1:1", "--resume", "--chain 1"],
    f"{INSTR} --engine gpu": ["--dry-run", "--families cancel", "--keep-going"],
}


def _fuzz_argv(target, spots, extra):
    return ["fuzz", target, "--out", str(spots / "never"), "--cases", "8", *extra]


@settings(max_examples=n(150), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_bad_fuzz_flag_is_refused_before_any_work(spots, no_work, data, adversarial_counter):
    adversarial_counter["cases"] += 1
    flag = data.draw(st.sampled_from(sorted(BAD_FLAGS)))
    value = data.draw(st.sampled_from(BAD_FLAGS[flag]))
    if flag == "--out" and value and not value.startswith("/"):
        value = str(spots / value)
    extra = data.draw(st.sampled_from([[], ["--dry-run"], ["--json"], ["--devices", "0,0", "--dry-run"]]))
    if flag == "--devices":
        extra = [e for e in extra if e not in ("--devices", "0,0")]
    argv = ["fuzz", INSTR, "--out", str(spots / "never"), *extra, flag, value]
    rc, out, err = check_cli(argv, want=2)
    assert not (spots / "never").exists() and out == ""
    assert (flag in err or flag.lstrip("-") in err or "shard" in err or "target" in err), err


@pytest.mark.parametrize("target,extra", EXTRA_BAD)
def test_bad_fuzz_targets_and_combinations(spots, no_work, target, extra, adversarial_counter):
    adversarial_counter["cases"] += 1
    check_cli(_fuzz_argv(target, spots, extra), want=2)
    assert not (spots / "never").exists()


@pytest.mark.parametrize("target,opt", [(t, o) for t, opts in NOT_APPLYING.items() for o in opts])
def test_fuzz_options_that_do_not_apply_are_refused(spots, no_work, target, opt, adversarial_counter):
    adversarial_counter["cases"] += 1
    t, *more = target.split()
    rc, out, err = check_cli(_fuzz_argv(t, spots, more + opt.split()), want=2)
    assert opt.split()[0] in err and "do not apply" in err


def test_fuzz_api_refuses_the_same_values(tmp_path, adversarial_counter):
    from gpu.fuzz.cpu_engine import fuzz, fuzz_cvt, fuzz_layout, fuzz_sparse, model_device

    calls = [
        lambda: fuzz(INSTR, cases=-5, hw=model_device, out=tmp_path / "a"),
        lambda: fuzz(INSTR, cases=8, seconds=math.nan, hw=model_device, out=tmp_path / "a"),
        lambda: fuzz(INSTR, cases=8, seed=-1, hw=model_device, out=tmp_path / "a"),
        lambda: fuzz(INSTR, cases=8, chain=0, hw=model_device, out=tmp_path / "a"),
        lambda: fuzz(INSTR, cases=8, shard=(0, 0), hw=model_device, out=tmp_path / "a"),
        lambda: fuzz(INSTR, cases=8, families=[], hw=model_device, out=tmp_path / "a"),
        lambda: fuzz(INSTR, cases=8, rs="no", hw=model_device, out=tmp_path / "a"),
        lambda: fuzz("", cases=8, hw=model_device, out=tmp_path / "a"),
        lambda: fuzz_cvt("cvt", cases=0, hw=lambda *a: None, out=tmp_path / "a"),
        lambda: fuzz_layout("layoutz", cases=8, hw=lambda *a: None, out=tmp_path / "a"),
        lambda: fuzz_sparse("sparse", cases=8, seconds=-1, hw=lambda *a: None, out=tmp_path / "a"),
    ]
    for call in calls:
        adversarial_counter["cases"] += 1
        with pytest.raises(InputError):
            call()
    assert not (tmp_path / "a").exists()


def test_user_kernel_fuzzer_refuses_bad_arguments(adversarial_counter):
    from gpu.fuzz.userkernel import Schedule, fuzz_user_kernel

    sched = Schedule("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3", promote_every=4, out_dtype="bf16")
    for kw in (dict(families=()), dict(cases=-1), dict(seed=-3), dict(m=0), dict(run=None)):
        adversarial_counter["cases"] += 1
        args = {"run": lambda *a: None, "sched": sched, **kw}
        with pytest.raises(InputError):
            fuzz_user_kernel(args.pop("run"), args.pop("sched"), **args)


# ----------------------------------------------------------------------------- wgref golden flags

GOLDEN_OPTS = {"--block-k": "32", "--input-precision": "ieee", "--imp": "0", "--scale-a": "2", "--scale-b": "2",
               "--fast-accum": None, "--acc": "f16", "--promotion-interval": "4", "--kernel": "k", "--splits": "2"}
GOLDEN_TAKES = {"triton": {"--block-k", "--input-precision", "--imp", "--acc"},
                "scaled-mm": {"--scale-a", "--scale-b", "--fast-accum", "--kernel"},
                "cutlass": {"--acc", "--promotion-interval"}, "cublas": {"--kernel", "--splits"},
                "cusparselt": {"--kernel"}}


@pytest.fixture(scope="module")
def gold(tmp_path_factory):
    d = tmp_path_factory.mktemp("gold")
    np.save(d / "a.npy", np.full((64, 32), 0x38, np.uint8))
    np.save(d / "b.npy", np.full((32, 64), 0x38, np.uint8))
    return d


@pytest.mark.parametrize("lib,opt", [(lib, o) for lib in GOLDEN_TAKES for o in GOLDEN_OPTS
                                     if o not in GOLDEN_TAKES[lib]])
def test_golden_refuses_options_its_library_ignores(gold, lib, opt, adversarial_counter):
    adversarial_counter["cases"] += 1
    v = GOLDEN_OPTS[opt]
    argv = ["golden", lib, str(gold / "a.npy"), str(gold / "b.npy"), "--dtype", "e4m3", "-o", str(gold / "o.npy"),
            opt, *([v] if v is not None else [])]
    rc, out, err = check_cli(argv, want=2)
    assert opt in err and "does not take" in err and not (gold / "o.npy").exists()


@pytest.mark.parametrize("extra,msg", [
    (["--block-k", "0"], "--block-k must be"), (["--block-k", "32", "--imp", "-1"], "--imp must be"),
])
def test_golden_bad_values(gold, extra, msg, adversarial_counter):
    adversarial_counter["cases"] += 1
    rc, _, err = check_cli(["golden", "triton", str(gold / "a.npy"), str(gold / "b.npy"), "--dtype", "e4m3",
                            "-o", str(gold / "o.npy"), *extra], want=2)
    assert msg in err


@pytest.mark.parametrize("scale", ["abc", "nan", "inf", "1e39"])
def test_golden_scaled_mm_scale_values(gold, scale, adversarial_counter):
    adversarial_counter["cases"] += 1
    rc, _, err = check_cli(["golden", "scaled-mm", str(gold / "a.npy"), str(gold / "b.npy"), "--dtype", "e4m3",
                            "-o", str(gold / "o.npy"), "--scale-a", scale], want=2)
    assert "--scale-a" in err


@pytest.mark.parametrize("out", ["/dev/null", "a.npy", "b.npy", "."])
def test_golden_output_is_checked_before_any_work(gold, out, adversarial_counter):
    adversarial_counter["cases"] += 1
    before = {p: p.read_bytes() for p in (gold / "a.npy", gold / "b.npy")}
    target = out if out.startswith("/") else str(gold / out)
    check_cli(["golden", "cublas", str(gold / "a.npy"), str(gold / "b.npy"), "--dtype", "e4m3", "-o", target],
              want=2)
    assert all(p.read_bytes() == raw for p, raw in before.items())
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_golden_still_runs(gold):
    rc, out, _ = check_cli(["golden", "triton", str(gold / "a.npy"), str(gold / "b.npy"), "--dtype", "e4m3",
                            "--block-k", "32", "--block-m", "64", "--block-n", "64", "--num-warps", "4",
                            "-o", str(gold / "d.npy")], want=0)
    assert np.load(gold / "d.npy").shape == (64, 64)


# ----------------------------------------------------------------------------- the CLI guard

@pytest.mark.parametrize("exc", [ZeroDivisionError("division by zero"), RecursionError("maximum recursion"),
                                 KeyError("x"), MemoryError(), OSError(5, "Input/output error"),
                                 ValueError("multi\nline\nmessage"), AttributeError("'NoneType' object")])
@pytest.mark.parametrize("cmd,argv", [("formats", ["formats", "e4m3"]), ("fuzz", ["fuzz", INSTR, "--dry-run"]),
                                      ("merge", ["merge", "x"])])
def test_an_internal_error_is_one_line_naming_the_command(monkeypatch, exc, cmd, argv, adversarial_counter):
    import wgref.cli as cli

    adversarial_counter["cases"] += 1

    def broken(args):
        raise exc

    monkeypatch.setitem(cli.COMMANDS, cmd, broken)
    rc, out, err = check_cli(argv, want=2)
    assert err.startswith(f"wgref {cmd}: internal error: {type(exc).__name__}") and "report" in err


def test_wgref_errors_keep_their_exact_line(monkeypatch):
    import wgref.cli as cli

    monkeypatch.setitem(cli.COMMANDS, "formats", lambda a: (_ for _ in ()).throw(InputError("bad thing")))
    assert run_cli(["formats", "e4m3"])[1:] == ("", "wgref: error: bad thing\n")
    monkeypatch.setitem(cli.COMMANDS, "formats", lambda a: (_ for _ in ()).throw(InputError("two\nlines")))
    rc, _, err = check_cli(["formats", "e4m3"], want=2)
    assert err == "wgref: error: two\\nlines\n"


def test_interrupt_and_broken_pipe_in_process(monkeypatch, adversarial_counter):
    import wgref.cli as cli

    for exc, want in ((KeyboardInterrupt(), 130), (BrokenPipeError(32, "Broken pipe"), 141)):
        adversarial_counter["cases"] += 1
        monkeypatch.setitem(cli.COMMANDS, "formats", lambda a, e=exc: (_ for _ in ()).throw(e))
        rc, out, err = run_cli(["formats", "e4m3"])
        assert rc == want and err.count("\n") <= 1 and "Traceback" not in err


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("trace")
    assert main(["pipeline", "gen", "--k-iters", "400", "--broken", "lax_wait", "-o", str(d / "t.jsonl")]) == 0
    return d / "t.jsonl"


@pytest.mark.parametrize("argv", [["pipeline", "check", "{trace}"], ["pipeline", "check", "{trace}", "--json"],
                                  ["formats", "e4m3"], ["formats", "e5m2", "--json"], ["-h"]])
def test_closed_pipe_exits_quietly(trace, argv, adversarial_counter):
    """``wgref pipeline check t.jsonl | head``: the reader goes away; no traceback, no second
    complaint at interpreter exit."""
    adversarial_counter["cases"] += 1
    p = subprocess.Popen([sys.executable, "-m", "wgref.cli", *[a.format(trace=trace) for a in argv]],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    p.stdout.close()
    err = p.stderr.read().decode()
    rc = p.wait(timeout=120)
    assert rc in (0, 1, 141) and err == "", (rc, err)


def test_head_of_a_long_report(trace, adversarial_counter):
    adversarial_counter["cases"] += 1
    r = subprocess.run(f"{sys.executable} -m wgref.cli formats e4m3 --json | head -c 10; "
                       f"{sys.executable} -m wgref.cli pipeline check {trace} --json | head -c 10",
                       shell=True, capture_output=True, text=True, cwd=ROOT)
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr


@pytest.mark.parametrize("argv", [["merge", "bad\udcff.jsonl"], ["fuzz", "\udcff\udcfe", "--dry-run"],
                                  ["replay", "x\udc80.npz", "--cpu"], ["merge", "bad\udcff\u00e9.jsonl"]])
def test_surrogates_in_names_are_printed_escaped(argv, monkeypatch, adversarial_counter):
    adversarial_counter["cases"] += 1
    raw = io.BytesIO()
    strict = io.TextIOWrapper(raw, encoding="ascii", errors="strict")   # what a C-locale terminal gives
    monkeypatch.setattr(sys, "stderr", strict)
    rc = main(argv)
    strict.flush()
    line = raw.getvalue().decode("ascii")
    assert rc == 2 and line.count("\n") == 1 and "\\udc" in line
    assert strict.errors == "strict"   # put back as it was
    env = dict(os.environ, PYTHONIOENCODING="ascii")
    r = subprocess.run([sys.executable, "-m", "wgref.cli", *argv], capture_output=True, cwd=ROOT, env=env)
    assert r.returncode == 2 and r.stderr.count(b"\n") == 1 and b"Traceback" not in r.stderr, r.stderr
