"""Adversarial reading: atomic INDEX.json writes, symlinked fixture entries, malformed INDEX and
manifest structures, bounded npz/npy reading (huge header claims, zip bombs, many members, files that
are not what they claim, FIFOs and devices), bounded JSON.

The properties: a file whose header claims a huge array is refused before anything is allocated; a
member a command does not need is never read; a malformed structure is one clean error; INDEX.json is
never left truncated.  Every test runs under the ``no_clobber`` guard (tests/cli_harness.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from refmodel import fileio
from refmodel.errors import InputError
from refmodel.verify import fixtures as fx

from cli_harness import check_cli, n, refused

pytestmark = pytest.mark.usefixtures("no_clobber")

ROOT = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------- fixtures tree

def _tree(base: Path) -> Path:
    root = Path(tempfile.mkdtemp(dir=base))
    fx.write_fixture("demo", "x", {"a": np.arange(5)}, kind="cvt", cases=5, meta={"forms": []},
                     provenance={"device": "none"}, root=root)
    fx.write_fixture("demo", "y", {"b": np.arange(3)}, kind="cvt", cases=3, meta={"forms": []},
                     provenance={"device": "none"}, root=root)
    assert fx.check_index(root) == []
    return root


@pytest.mark.parametrize("fault", ["fsync", "write", "replace", "interrupt"])
def test_index_write_is_atomic(tmp_path, monkeypatch, fault, adversarial_counter):
    """A fault while INDEX.json is rewritten leaves the previous INDEX.json, byte for byte,
    and no temporary file."""
    adversarial_counter["cases"] += 1
    root = _tree(tmp_path)
    before = (root / "INDEX.json").read_bytes()
    (root / "demo" / "manifest.json").write_text((root / "demo" / "manifest.json").read_text() + " ")
    real_fdopen = os.fdopen

    if fault == "fsync":
        monkeypatch.setattr(fileio.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(5, "I/O error")))
    elif fault == "write":
        def fdopen(fd, mode="r", *a, **kw):
            f = real_fdopen(fd, mode, *a, **kw)
            w = f.write

            def half(text):
                w(text[: len(text) // 2])
                raise OSError(28, "No space left on device")
            f.write = half
            return f
        monkeypatch.setattr(fileio.os, "fdopen", fdopen)
    elif fault == "replace":
        monkeypatch.setattr(fileio.os, "replace", lambda a, b: (_ for _ in ()).throw(OSError(13, "denied")))
    else:
        monkeypatch.setattr(fileio.os, "replace", lambda a, b: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises((InputError, KeyboardInterrupt)):
        fx.write_index(root)
    monkeypatch.undo()
    assert (root / "INDEX.json").read_bytes() == before
    assert sorted(p.name for p in root.iterdir()) == ["INDEX.json", "demo"]
    # and the command line: one line, exit 2
    monkeypatch.setattr(fileio.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(5, "I/O error")))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = fx.main(["--root", str(root), "--reindex"])
    assert rc == 2 and err.getvalue().count("\n") == 1 and "I/O error" in err.getvalue()
    assert (root / "INDEX.json").read_bytes() == before


def test_symlinked_fixture_entry_is_refused_not_followed(tmp_path, outside, adversarial_counter):
    root = _tree(tmp_path)
    d = root / "demo"
    # a copy outside the tree with the same bytes (so its sha256 matches): still refused
    ext = tmp_path / "elsewhere.npz"
    shutil.copy(d / "x.npz", ext)
    (d / "x.npz").unlink()
    os.symlink(ext, d / "x.npz")
    entry = next(e for e in fx.load_manifest(d)["entries"] if e["file"] == "x.npz")
    for call in (lambda: fx.load_arrays(d, entry), lambda: fx.build_index(root), lambda: fx.write_index(root)):
        adversarial_counter["cases"] += 1
        with pytest.raises(fx.FixtureError, match="symlink .* outside its folder"):
            call()
    probs = fx.check_index(root)
    assert [(t, e.short) for _, t, e in probs] == [("x.npz", "symlink outside its folder")]
    adversarial_counter["cases"] += 1
    rc, out, err = check_cli(["verify", "--fixtures", root, "--json"])
    rows = json.loads(out)
    assert rc == 1 and any(e["fixture"] == "x.npz" and e["short"] == "symlink outside its folder"
                           for e in rows["errors"])
    adversarial_counter["cases"] += 1
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert fx.main(["--root", str(root), "--reindex"]) == 2
    assert err.getvalue().count("\n") == 1 and "x.npz" in err.getvalue()
    # a symlink to a sibling inside the folder is a plain alias: allowed
    (d / "x.npz").unlink()
    shutil.copy(ext, d / "real.npz")
    os.symlink("real.npz", d / "x.npz")
    assert np.array_equal(fx.load_arrays(d, entry)["a"], np.arange(5))


# malformed structures: a valid document, one value replaced by junk

JUNK = st.one_of(st.just([]), st.just({}), st.just([1, 2]), st.just({"a": 1}), st.just("12"), st.just(""),
                 st.just(None), st.just(True), st.just(-1), st.just(1.5), st.just(2 ** 70), st.just("x" * 5000),
                 st.just("DEEP"), st.text(max_size=5), st.integers(-3, 3))


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


def _replace(obj, path, value):
    if not path:
        return value
    obj = json.loads(json.dumps(obj))
    cur = obj
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = value
    return obj


def _dump(obj) -> str:
    text = json.dumps(obj)
    deep = "[" * 100000 + "]" * 100000
    return text.replace('"DEEP"', deep)


@settings(max_examples=n(80))
@given(data=st.data(), which=st.sampled_from(["manifest", "INDEX"]), junk=JUNK)
def test_malformed_index_and_manifest_structures(tmp_path_factory, data, which, junk, adversarial_counter):
    """Lists where objects belong, strings where numbers belong, 100000-deep nesting: one
    FixtureError from the loaders, problem rows from check_index and `wgref verify`, exit 1/2
    with one line from the command lines -- never a traceback or a RecursionError."""
    adversarial_counter["cases"] += 1
    root = _tree(tmp_path_factory.mktemp("malformed"))
    f = root / "demo" / "manifest.json" if which == "manifest" else root / "INDEX.json"
    doc = json.loads(f.read_text())
    path = data.draw(st.sampled_from(list(_paths(doc))))
    f.write_text(_dump(_replace(doc, path, junk)))
    loader = (lambda: fx.load_manifest(root / "demo")) if which == "manifest" else (lambda: fx.load_index(root))
    try:
        loader()
    except fx.FixtureError as e:
        assert str(e) and "\n" not in str(e) and len(str(e)) < 400, str(e)
    probs = fx.check_index(root)  # never raises
    for _, _, e in probs:
        assert isinstance(e, fx.FixtureError)
    rc, out, err = check_cli(["verify", "--fixtures", root, "--quick"])
    assert rc in (1, 2) or not probs
    err_buf = io.StringIO()
    with contextlib.redirect_stderr(err_buf), contextlib.redirect_stdout(io.StringIO()):
        rc = fx.main(["--root", str(root)])
    assert rc in (0, 1)


@pytest.mark.parametrize("text,msg", [
    ("[" * 100000 + "]" * 100000, "json_depth"),
    ('{"feature": "demo", "entries": {"file": "x.npz"}}', "entries must be a list"),
    ('{"feature": "demo", "entries": [{"file": "x.npz", "kind": "cvt", "cases": "5", "sha256": "%s", '
     '"meta": {}, "provenance": {}}]}' % ("0" * 64), "entries[0].cases must be an integer"),
    ('{"feature": "demo", "entries": [["x.npz"]]}', "entries[0] must be an object"),
    ('[]', "must be an object"),
    ('{"feature": "demo", "entries": []', "not valid JSON"),
    ("\xff\xfe", "cannot read"),
])
def test_malformed_manifest_messages(tmp_path, text, msg, adversarial_counter):
    adversarial_counter["cases"] += 1
    root = _tree(tmp_path)
    (root / "demo" / "manifest.json").write_text(text, encoding="latin-1")
    with pytest.raises(fx.FixtureError, match=msg.replace("[", r"\[").replace("]", r"\]")):
        fx.load_manifest(root / "demo")
    assert [e.short for _, _, e in fx.check_index(root)] == ["unreadable manifest"]


@pytest.mark.parametrize("text,msg", [
    ("[" * 100000 + "]" * 100000, "json_depth"),
    ('{"features": []}', "features must be an object"),
    ('{"features": {"demo": {"manifest_sha256": 5, "entries": 1, "cases": 1, "files": []}}}', "sha256"),
    ('{"features": {"demo": {"manifest_sha256": "%s", "entries": "1", "cases": 1, "files": []}}}' % ("a" * 64),
     "entries must be an integer"),
    ('{"features": {"demo": {"manifest_sha256": "%s", "entries": 1, "cases": 1, "files": "x.npz"}}}' % ("a" * 64),
     "files must be a list"),
    ('{"features": {"demo": {"manifest_sha256": "%s", "entries": 1, "cases": 1, "files": [], "x": 1}}}'
     % ("a" * 64), "unknown key"),
])
def test_malformed_index_messages(tmp_path, text, msg, adversarial_counter):
    adversarial_counter["cases"] += 1
    root = _tree(tmp_path)
    (root / "INDEX.json").write_text(text)
    with pytest.raises(fx.FixtureError, match=msg):
        fx.load_index(root)
    assert [thing for _, thing, _ in fx.check_index(root)] == ["INDEX.json"]


# ----------------------------------------------------------------------------- bounded npz / npy

def _header(shape, descr="<f8", fortran=False) -> bytes:
    b = io.BytesIO()
    np.lib.format.write_array_header_1_0(b, {"descr": descr, "fortran_order": fortran, "shape": tuple(shape)})
    return b.getvalue()


@settings(max_examples=n(60))
@given(shape=st.lists(st.one_of(st.integers(0, 10), st.integers(10 ** 5, 10 ** 13)), min_size=1, max_size=4),
       descr=st.sampled_from(["<f8", "|u1", "<f4", "<c16", "|V2", "<u2", "|S100000"]),
       pad=st.integers(0, 64), where=st.sampled_from(["npy", "npz"]))
def test_header_claiming_a_huge_array_is_refused_before_allocating(tmp_path_factory, shape, descr, pad, where,
                                                                  adversarial_counter):
    adversarial_counter["cases"] += 1
    d = tmp_path_factory.mktemp("hdr")
    raw = _header(shape, descr) + b"\0" * pad
    if where == "npy":
        p = d / "h.npy"
        p.write_bytes(raw)
        call = lambda: fileio.load_npy(p)  # noqa: E731
        spec = str(p)
    else:
        p = d / "h.npz"
        with zipfile.ZipFile(p, "w") as z:
            z.writestr("a.npy", raw)
        call = lambda: fileio.load_npz(p)["a"]  # noqa: E731
        spec = f"{p}:a"
    declared = int(np.prod([int(s) for s in shape], dtype=object)) * np.dtype(descr).itemsize
    try:
        x = call()
        assert x.nbytes == declared <= pad
    except InputError as e:
        if declared > fileio.MAX_ARRAY_BYTES:
            assert "array_bytes" in str(e), str(e)
        else:
            assert "truncated" in str(e) or "more data" in str(e), str(e)
    check_cli(["diff", spec, spec])


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    """An archive with a small good member and a real zip bomb (256 MiB of zeros in ~256 KB),
    and one whose bomb member's header truthfully declares 5 GiB."""
    d = tmp_path_factory.mktemp("bombs")
    good = io.BytesIO()
    np.save(good, np.arange(8, dtype=np.float32))
    chunk = b"\0" * (1 << 24)
    with zipfile.ZipFile(d / "bomb.npz", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("good.npy", good.getvalue())
        with z.open("bomb.npy", "w", force_zip64=True) as f:
            f.write(_header((1 << 28,), "|u1"))
            for _ in range(16):
                f.write(chunk)
    with zipfile.ZipFile(d / "huge.npz", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("good.npy", good.getvalue())
        with z.open("bomb.npy", "w", force_zip64=True) as f:
            f.write(_header((5 << 30,), "|u1"))
            for _ in range(4):
                f.write(chunk)
    with zipfile.ZipFile(d / "liar.npz", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("good.npy", good.getvalue())
        with z.open("bomb.npy", "w", force_zip64=True) as f:  # claims 8 bytes, holds 64 MiB
            f.write(_header((8,), "|u1"))
            for _ in range(4):
                f.write(chunk)
    np.save(d / "want.npy", np.arange(8, dtype=np.float32))
    return d


def _zip_reads(monkeypatch):
    """Count the bytes read out of zip members."""
    seen = {"bytes": 0}
    real = zipfile.ZipExtFile.read

    def read(self, n=-1):
        b = real(self, n)
        seen["bytes"] += len(b)
        return b
    monkeypatch.setattr(zipfile.ZipExtFile, "read", read)
    real_into = zipfile.ZipExtFile.readinto

    def readinto(self, b):
        k = real_into(self, b)
        seen["bytes"] += k or 0
        return k
    monkeypatch.setattr(zipfile.ZipExtFile, "readinto", readinto)
    return seen


@pytest.mark.parametrize("archive", ["bomb.npz", "huge.npz", "liar.npz"])
def test_zip_bomb_member_not_needed_is_never_read(bombs, archive, monkeypatch, adversarial_counter):
    adversarial_counter["cases"] += 2
    seen = _zip_reads(monkeypatch)
    z = fileio.load_npz(bombs / archive)
    assert list(z) == ["good", "bomb"] and np.array_equal(z["good"], np.arange(8))
    rc, out, err = check_cli(["diff", f"{bombs / archive}:good", bombs / "want.npy"])
    assert rc == 0, err
    assert seen["bytes"] < 1 << 20, seen


@pytest.mark.parametrize("archive,msg", [("huge.npz", "array_bytes"), ("liar.npz", "more data than its header")])
def test_zip_bomb_member_that_is_needed_is_refused_by_its_header(bombs, archive, msg, monkeypatch,
                                                                 adversarial_counter):
    adversarial_counter["cases"] += 2
    seen = _zip_reads(monkeypatch)
    with pytest.raises(InputError, match=msg):
        fileio.load_npz(bombs / archive)["bomb"]
    refused(["diff", f"{bombs / archive}:bomb", bombs / "want.npy"], msg)
    assert seen["bytes"] < 1 << 20, seen


@settings(max_examples=n(12))
@given(count=st.sampled_from([0, 1, 7, 4096, 4097, 20000]), junk=st.booleans())
def test_many_members(tmp_path_factory, count, junk, adversarial_counter):
    adversarial_counter["cases"] += 1
    p = tmp_path_factory.mktemp("many") / "m.npz"
    good = io.BytesIO()
    np.save(good, np.arange(2))
    with zipfile.ZipFile(p, "w") as z:
        for i in range(count):
            z.writestr(f"a{i}.npy" if not junk else f"a{i}", good.getvalue())
    try:
        arch = fileio.load_npz(p)
    except InputError as e:
        assert count > fileio.MAX_NPZ_MEMBERS and "npz_members" in str(e)
        refused(["diff", f"{p}:a0", f"{p}:a0"], "npz_members")
        return
    assert count <= fileio.MAX_NPZ_MEMBERS and len(arch) == count
    if count and junk:
        with pytest.raises(InputError, match="not an array"):
            arch["a0"]
    if count:
        check_cli(["diff", f"{p}:a0", f"{p}:a0"])


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04", b"\x93NUMPY", b"hello", b"\x93NUMPY\x03\x00"])
def test_npz_and_npy_that_are_not_what_they_claim(tmp_path, content, adversarial_counter):
    adversarial_counter["cases"] += 2
    (tmp_path / "f.npy").write_bytes(content)
    (tmp_path / "f.npz").write_bytes(content)
    with pytest.raises(InputError):
        fileio.load_npy(tmp_path / "f.npy")
    with pytest.raises(InputError):
        fileio.load_npz(tmp_path / "f.npz")
    refused(["diff", tmp_path / "f.npy", tmp_path / "f.npy"], str(tmp_path / "f.npy"))
    refused(["diff", f"{tmp_path / 'f.npz'}:a", tmp_path / "f.npy"])


def test_reading_a_fifo_or_device_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "f.npy")
    for p in (tmp_path / "f.npy", "/dev/zero"):
        with pytest.raises(InputError, match="not a regular file"):
            fileio.load_npy(p)
        with pytest.raises(InputError, match="not a regular file"):
            fileio.load_npz(p)


@pytest.mark.parametrize("text,msg", [("[" * 100000 + "]" * 100000, "json_depth"), ("{" * 70 + "}" * 70, "not valid JSON"),
                                      ("[" * 65 + "]" * 65, "json_depth"), ("nope", "not valid JSON")])
def test_loads_json_is_bounded(text, msg):
    with pytest.raises(InputError, match=msg):
        fileio.loads_json(text, "x.json")
    assert fileio.loads_json("[" * 64 + "]" * 64, "x.json")
