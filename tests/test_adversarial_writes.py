"""Adversarial outputs and files: every output path kind, outputs equal to inputs, file modes,
atomic INDEX.json, bounded npz/npy reading, symlinked fixtures, malformed INDEX/manifest
structures, format edge cases (issue 16).

The properties: an output that is not a regular file or a new path (a directory, a FIFO, a
socket, a symlink, a character device such as /dev/null, a path whose folder is missing) or
that is one of the command's inputs is refused -- exit 2, exactly one stderr line, no
traceback -- and left exactly as it was; a written file has the mode of a normally written
file; a file whose header claims a huge array is refused before anything is allocated; a
member a command does not need is never read.

We run as root here, so /dev/null could really be replaced by a wrong writer: every test in
this module runs with ``os.replace`` / ``os.rename`` / ``tempfile.mkstemp`` wrapped so that
they raise instead of touching anything under /dev or replacing a non-regular file
(the ``no_clobber`` fixture), and /dev/null's type is checked after each case.

CI runs the deterministic ``ci`` Hypothesis profile (tests/conftest.py); every case tried
is counted in ``adversarial_counter``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from refmodel import fileio
from refmodel.errors import InputError
from refmodel.verify import fixtures as fx
from wgref.cli import main

ROOT = Path(__file__).resolve().parent.parent
SCALE = 20 if os.environ.get("HYPOTHESIS_PROFILE") == "thorough" else 1
DESC = "0x0000001000080000"


def n(k: int) -> int:
    return k * SCALE


# ----------------------------------------------------------------------------- the guard

def _dangerous(dst) -> str | None:
    p = os.path.abspath(os.fsdecode(dst))
    if p == "/dev" or p.startswith("/dev/") or os.path.realpath(p).startswith("/dev/"):
        return f"{p} is under /dev"
    try:
        st_ = os.lstat(p)
    except OSError:
        return None
    if not stat.S_ISREG(st_.st_mode):
        return f"{p} exists and is not a regular file"
    return None


@pytest.fixture(autouse=True)
def no_clobber(monkeypatch):
    """Make a wrong writer fail loudly instead of replacing /dev/null or a FIFO (we are root)."""
    real_replace, real_rename, real_mkstemp = os.replace, os.rename, tempfile.mkstemp

    def replace(src, dst, *a, **kw):
        why = _dangerous(dst)
        if why:
            raise AssertionError(f"a writer tried to replace {why}")
        return real_replace(src, dst, *a, **kw)

    def rename(src, dst, *a, **kw):
        why = _dangerous(dst)
        if why:
            raise AssertionError(f"a writer tried to rename onto {why}")
        return real_rename(src, dst, *a, **kw)

    def mkstemp(*a, **kw):
        d = kw.get("dir") or (a[2] if len(a) > 2 else None)
        if d is not None and os.path.abspath(os.fsdecode(d)).startswith("/dev"):
            raise AssertionError(f"a writer tried to create a temporary file in {d}")
        return real_mkstemp(*a, **kw)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    null_before = os.stat("/dev/null")
    yield
    null_after = os.stat("/dev/null")
    assert stat.S_ISCHR(null_after.st_mode) and null_after.st_rdev == null_before.st_rdev, \
        "/dev/null is no longer the null character device"


# ----------------------------------------------------------------------------- CLI helpers

def run_cli(argv, *, strict_stdout: bool = False):
    """(rc, stdout, stderr) of the CLI in-process.  ``strict_stdout``: stdout and stderr are
    strict UTF-8 streams, as a terminal's are (a surrogate printed raw raises there)."""
    if strict_stdout:
        ob, eb = io.BytesIO(), io.BytesIO()
        out = io.TextIOWrapper(ob, encoding="utf-8", errors="strict", write_through=True)
        err = io.TextIOWrapper(eb, encoding="utf-8", errors="strict", write_through=True)
    else:
        out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
    if strict_stdout:
        out.flush(), err.flush()
        return rc, ob.getvalue().decode(), eb.getvalue().decode()
    return rc, out.getvalue(), err.getvalue()


def check_cli(argv, **kw):
    rc, out, err = run_cli(argv, **kw)
    assert rc in (0, 1, 2), (argv, rc, err)
    assert "Traceback" not in err and "Traceback" not in out, (argv, err)
    if rc == 2:
        assert err.count("\n") == 1 and err.strip(), f"{argv}: stderr must be one line, got {err!r}"
    return rc, out, err


def refused(argv, *words, **kw):
    rc, out, err = check_cli(argv, **kw)
    assert rc == 2, (argv, rc, out, err)
    for w in words:
        assert w in err, (argv, err)
    return err


# ----------------------------------------------------------------------------- inputs

@pytest.fixture(scope="module")
def inp(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    np.save(d / "x.npy", np.linspace(-500, 500, 512, dtype=np.float32).reshape(4, 128))
    np.save(d / "y.npy", np.linspace(-500, 500, 512, dtype=np.float32).reshape(4, 128))
    np.savez(d / "arch.npz", codes=np.arange(512, dtype=np.float32).reshape(4, 128))
    assert main(["pipeline", "gen", "--k-iters", "2", "-o", str(d / "t.jsonl")]) == 0
    return d


def _writers(i: Path):
    """Every output of the commands whose modules this test covers: OUT -> argv."""
    return {
        "quantize": lambda out: ["quantize", i / "x.npy", "--fmt", "e4m3", "-o", out],
        "diff --junit": lambda out: ["diff", i / "x.npy", i / "y.npy", "--junit", out],
        "layout -o": lambda out: ["layout", "swizzle", "--format", "svg", "-o", out],
        "desc -o": lambda out: ["desc", DESC, "-o", out],
        "pipeline gen -o": lambda out: ["pipeline", "gen", "--k-iters", "2", "-o", out],
        "pipeline draw -o": lambda out: ["pipeline", "draw", i / "t.jsonl", "-o", out],
    }


WRITERS = ["quantize", "diff --junit", "layout -o", "desc -o", "pipeline gen -o", "pipeline draw -o"]
# `error --plot` is refused before its computation; with no matplotlib it cannot write at all
REFUSERS = WRITERS + ["error --plot"]


def _refuser(i: Path, name: str):
    if name == "error --plot":
        return lambda out: ["error", "--k", "512", "--promote", "none", "--plot", out]
    return _writers(i)[name]


# ----------------------------------------------------------------------------- output path kinds

KINDS = ["new", "existing", "directory", "fifo", "socket", "symlink-inside", "symlink-outside",
         "dangling-symlink", "missing-folder", "folder-is-a-file", "dev-null", "empty", "nul-byte",
         "too-long"]


def _snapshot(p: str):
    """What is at ``p`` now: the kind, a symlink's target, a regular file's bytes."""
    try:
        s = os.lstat(p)
    except (OSError, ValueError):
        return ("absent",)
    if stat.S_ISLNK(s.st_mode):
        return ("link", os.readlink(p), s.st_ino)
    if stat.S_ISREG(s.st_mode):
        return ("file", Path(p).read_bytes(), s.st_ino)
    return (stat.S_IFMT(s.st_mode), s.st_ino, getattr(s, "st_rdev", 0))


def _make(kind: str, d: Path, outside: Path):
    """A path of ``kind`` in ``d``; returns (path, keeper) where keeper is what must survive."""
    if kind == "new":
        return str(d / "out.file"), None
    if kind == "existing":
        (d / "out.file").write_bytes(b"previous")
        return str(d / "out.file"), None
    if kind == "directory":
        (d / "out.dir").mkdir()
        return str(d / "out.dir"), None
    if kind == "fifo":
        os.mkfifo(d / "out.fifo")
        return str(d / "out.fifo"), None
    if kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        path = d / "s"
        s.bind(str(path))
        return str(path), s
    if kind == "symlink-inside":
        (d / "target.file").write_bytes(b"target")
        os.symlink("target.file", d / "out.link")
        return str(d / "out.link"), None
    if kind == "symlink-outside":
        os.symlink(outside, d / "out.link")
        return str(d / "out.link"), None
    if kind == "dangling-symlink":
        os.symlink(d / "nowhere" / "x", d / "out.link")
        return str(d / "out.link"), None
    if kind == "missing-folder":
        return str(d / "no-such-folder" / "out.file"), None
    if kind == "folder-is-a-file":
        (d / "afile").write_bytes(b"x")
        return str(d / "afile" / "out.file"), None
    if kind == "dev-null":
        return "/dev/null", None
    if kind == "empty":
        return "", None
    if kind == "nul-byte":
        return str(d / "a\0b"), None
    if kind == "too-long":
        return str(d / ("x" * 300)), None
    raise AssertionError(kind)


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    p = tmp_path_factory.mktemp("outside") / "precious.txt"
    p.write_bytes(b"precious")
    return p


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("scratch")


@settings(max_examples=n(90))
@given(kind=st.sampled_from(KINDS), cmd=st.sampled_from(REFUSERS))
def test_any_output_path_kind(inp, outside, scratch, kind, cmd, adversarial_counter):
    """A regular new or existing file is written (complete, the temp file gone); anything else
    is refused with one line and left exactly as it was -- /dev/null stays a character device."""
    adversarial_counter["cases"] += 1
    if cmd == "error --plot" and kind in ("new", "existing"):
        kind = "fifo"  # error --plot cannot write here (no matplotlib): only its refusals
    d = Path(tempfile.mkdtemp(dir=scratch))
    path, keep = _make(kind, d, outside)
    before = {p: _snapshot(p) for p in [path, str(outside), "/dev/null"] + [str(q) for q in d.iterdir()]}
    try:
        rc, out, err = check_cli(_refuser(inp, cmd)(path))
    finally:
        if keep is not None:
            keep.close()
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert _snapshot(str(outside)) == before[str(outside)], "a file outside was modified"
    if kind in ("new", "existing"):
        assert rc in (0, 1), (cmd, err)  # diff of two different arrays exits 1
        assert stat.S_ISREG(os.lstat(path).st_mode) and Path(path).read_bytes() not in (b"", b"previous")
    else:
        assert rc == 2, (cmd, kind, rc, out, err)
        assert "cannot write" in err or "outputs" in err, err
        for p, snap in before.items():
            assert _snapshot(p) == snap, f"{cmd}: {kind} output {p} was changed"
    leftovers = [q.name for q in d.rglob("*") if q.name.endswith(".tmp")]
    assert not leftovers, leftovers


@settings(max_examples=n(60))
@given(kind=st.sampled_from(KINDS), inputs=st.lists(st.sampled_from(["x", "other", "missing", "none"]),
                                                      max_size=3),
       api=st.sampled_from(["atomic_write", "atomic_write_text", "save_npz"]))
def test_library_writers_refuse_the_same_paths(inp, outside, scratch, kind, inputs, api, adversarial_counter):
    """The library writers (every output of wgref goes through them) obey the same rules."""
    adversarial_counter["cases"] += 1
    d = Path(tempfile.mkdtemp(dir=scratch))
    path, keep = _make(kind, d, outside)
    before = _snapshot(path)
    names = {"x": path, "other": str(inp / "x.npy"), "missing": str(d / "nope"), "none": None}
    ins = [names[k] for k in inputs]
    try:
        try:
            if api == "atomic_write":
                fileio.atomic_write(path, lambda f: f.write(b"new"), inputs=ins)
            elif api == "atomic_write_text":
                fileio.atomic_write_text(path, "new", inputs=ins)
            else:
                fileio.check_output(path, ins)
                fileio.save_npz(path, a=np.arange(3))
            ok = True
        except InputError as e:
            msg = str(e)
            assert msg and "\n" not in msg and "cannot write" in msg, msg
            ok = False
    finally:
        if keep is not None:
            keep.close()
    same_as_input = "x" in inputs and kind == "existing"
    assert ok == (kind in ("new", "existing") and not same_as_input), (kind, inputs, api)
    if not ok:
        assert _snapshot(path) == before
    else:
        assert stat.S_ISREG(os.lstat(path).st_mode)


def test_dev_null_is_refused_by_every_writer(inp):
    """After the properties above proved refusal through a FIFO: /dev/null itself, every command."""
    for name in REFUSERS:
        refused(_refuser(inp, name)("/dev/null"), "/dev/null", "character device")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


# ----------------------------------------------------------------------------- output == input

def _aliases(p: Path, d: Path):
    """Other names of the same file: the path itself, a relative spelling, a hard link."""
    hard = d / f"hard-{p.name}"
    if not hard.exists():
        os.link(p, hard)
    rel = os.path.relpath(p)
    return {"same": str(p), "relative": rel, "dotted": str(p.parent / "." / p.name), "hardlink": str(hard)}


@settings(max_examples=n(40))
@given(case=st.sampled_from(["quantize", "diff-got", "diff-want", "diff-npz", "draw"]),
       alias=st.sampled_from(["same", "relative", "dotted", "hardlink"]))
def test_output_equal_to_an_input_is_refused(tmp_path_factory, case, alias, adversarial_counter):
    adversarial_counter["cases"] += 1
    d = tmp_path_factory.mktemp("same")
    np.save(d / "got.npy", np.arange(8, dtype=np.float32))
    np.save(d / "want.npy", np.arange(8, dtype=np.float32))
    np.savez(d / "a.npz", k=np.arange(8, dtype=np.float32))
    assert main(["pipeline", "gen", "--k-iters", "2", "-o", str(d / "t.jsonl")]) == 0
    target = {"quantize": "got.npy", "diff-got": "got.npy", "diff-want": "want.npy", "diff-npz": "a.npz",
              "draw": "t.jsonl"}[case]
    out = _aliases(d / target, d)[alias]
    argv = {"quantize": ["quantize", d / "got.npy", "--fmt", "e4m3", "-o", out],
            "diff-got": ["diff", d / "got.npy", d / "want.npy", "--junit", out],
            "diff-want": ["diff", d / "got.npy", d / "want.npy", "--junit", out],
            "diff-npz": ["diff", f"{d / 'a.npz'}:k", d / "want.npy", "--junit", out],
            "draw": ["pipeline", "draw", d / "t.jsonl", "-o", out]}[case]
    before = (d / target).read_bytes()
    refused(argv, "same file as the input")
    assert (d / target).read_bytes() == before


# ----------------------------------------------------------------------------- modes

_MODE_SCRIPT = r"""
import json, os, sys, numpy as np
os.umask(int(sys.argv[1], 8))
d = sys.argv[2]
from wgref.cli import main
from refmodel import fileio
from refmodel.verify.fixtures import write_fixture
np.save(os.path.join(d, "x.npy"), np.linspace(-3, 3, 16, dtype=np.float32).reshape(4, 4))
runs = {
  "q.npz": ["quantize", os.path.join(d, "x.npy"), "--fmt", "e4m3", "-o"],
  "j.xml": ["diff", os.path.join(d, "x.npy"), os.path.join(d, "x.npy"), "--junit"],
  "l.svg": ["layout", "acc", "--format", "svg", "-o"],
  "desc.txt": ["desc", "%s", "-o"],
  "t.jsonl": ["pipeline", "gen", "--k-iters", "2", "-o"],
  "draw.txt": ["pipeline", "draw", os.path.join(d, "t.jsonl"), "-o"],
}
for name, argv in runs.items():
    assert main(argv + [os.path.join(d, name)]) == 0, name
fileio.atomic_write_text(os.path.join(d, "api.txt"), "x")
fileio.save_npz(os.path.join(d, "api.npz"), a=np.arange(2))
write_fixture("demo", "f", {"a": np.arange(3)}, kind="cvt", cases=3, meta={}, provenance={},
              root=os.path.join(d, "fx"))
""" % DESC


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002, 0o027])
def test_written_files_get_the_mode_of_a_normal_file(tmp_path, umask, adversarial_counter):
    """Every file written (command outputs, fixtures, manifests, INDEX.json) is 0o666 & ~umask,
    not mkstemp's 0600; an existing file keeps its own permission bits."""
    r = subprocess.run([sys.executable, "-c", _MODE_SCRIPT, oct(umask), str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    want = 0o666 & ~umask
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "x.npy"]
    assert len(written) >= 10
    for p in written:
        adversarial_counter["cases"] += 1
        assert stat.S_IMODE(p.stat().st_mode) == want, f"{p.name}: {oct(stat.S_IMODE(p.stat().st_mode))}"
    # an existing file keeps its mode (as open(path, "w") would)
    out = tmp_path / "keep.txt"
    out.write_text("old")
    os.chmod(out, 0o640)
    fileio.atomic_write_text(out, "new")
    assert out.read_text() == "new" and stat.S_IMODE(out.stat().st_mode) == 0o640


def test_umask_is_read_without_changing_it():
    old = os.umask(0o027)
    try:
        assert fileio.current_umask() == 0o027
        assert os.umask(0o027) == 0o027  # still what it was
    finally:
        os.umask(old)


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


# ----------------------------------------------------------------------------- format edge cases

BF16_BITS = st.lists(st.integers(0, 0xFFFF), min_size=1, max_size=16)


@settings(max_examples=n(40))
@given(a=BF16_BITS, flip=st.integers(0, 15), how=st.sampled_from(["bf16", "codes", "mixed"]))
def test_bfloat16_npy_saved_by_numpy_is_read_by_diff_as_golden_reads_it(tmp_path_factory, a, flip, how,
                                                                        adversarial_counter):
    """numpy saves ml_dtypes' bfloat16 as void ('|V2'); `diff --fmt bf16` reads it as codes,
    exactly as `golden` does (wgref.commands.golden._as_dtype), never refuses it."""
    adversarial_counter["cases"] += 1
    from wgref.commands.common import load_array
    from wgref.commands.golden import _as_dtype

    d = tmp_path_factory.mktemp("bf16")
    bits = np.array(a, dtype=np.uint16)
    other = bits.copy()
    if flip < len(other) and flip % 2:
        other[flip] ^= 1
    np.save(d / "a.npy", bits.view(ml_dtypes.bfloat16))
    np.save(d / "b.npy", other.view(ml_dtypes.bfloat16) if how == "bf16" else other if how == "codes"
            else other.view(ml_dtypes.bfloat16))
    assert np.load(d / "a.npy").dtype.kind == "V"
    got = load_array(str(d / "a.npy"), "bf16")
    golden = _as_dtype(np.load(d / "a.npy"), "a", "bf16")
    assert np.array_equal(got, golden.view(np.uint16))
    rc, out, err = check_cli(["diff", d / "a.npy", d / "b.npy", "--fmt", "bf16", "--json"])
    assert rc == (0 if np.array_equal(bits, other) else 1), err
    err = refused(["diff", d / "a.npy", d / "b.npy"], "--fmt")
    refused(["diff", d / "a.npy", d / "b.npy", "--fmt", "e4m3"], "16-bit")


@settings(max_examples=n(60))
@given(sign=st.sampled_from(["", "-"]), mant=st.sampled_from(["1", "1.8", "f.fffffffffffff8", "0.0000001", "0"]),
       exp=st.one_of(st.integers(-100000, 100000), st.sampled_from([1023, 1024, 1025, -1074, -1075, 10 ** 30])),
       src=st.sampled_from(["f32", "f16", "bf16", "f64"]), to=st.sampled_from(["e4m3", "e5m2"]),
       policy=st.sampled_from(["satfinite", "nosat", "relu"]))
def test_cvt_hex_floats_that_overflow(sign, mant, exp, src, to, policy, adversarial_counter):
    """A hex float beyond float64 gives the IEEE result (+-inf, like 1e400), never a traceback."""
    adversarial_counter["cases"] += 1
    text = f"{sign}0x{mant}p{exp}"
    rc, out, err = check_cli(["cvt", text, "--to", to, "--from", src, "--policy", policy, "--json"])
    assert rc == 0, err
    info = json.loads(out)
    try:
        want = float.fromhex(text)
    except OverflowError:
        want = float("-inf") if sign else float("inf")
    with np.errstate(over="ignore"):
        x = float(np.array(want).astype({"f32": np.float32, "f16": np.float16, "f64": np.float64,
                                         "bf16": ml_dtypes.bfloat16}[src]).astype(np.float64))
    assert info["input_value"] == repr(x)


SURROGATE = "caf\udcff-\udce9"


@pytest.mark.parametrize("what", ["quantize", "layout", "desc", "draw", "diff-name", "diff-missing",
                                  "verify-missing", "quantize-missing"])
def test_surrogates_in_names_are_printed_escaped(inp, tmp_path, what, adversarial_counter):
    """A file name that is not UTF-8 (argv decodes it with surrogates) printed to a strict
    UTF-8 terminal: escaped, never a UnicodeEncodeError."""
    adversarial_counter["cases"] += 1
    out = str(tmp_path / f"{SURROGATE}.out")
    argv = {"quantize": ["quantize", inp / "x.npy", "--fmt", "e4m3", "-o", out],
            "layout": ["layout", "acc", "-o", out],
            "desc": ["desc", DESC, "-o", out],
            "draw": ["pipeline", "draw", inp / "t.jsonl", "-o", out],
            "diff-name": ["diff", inp / "x.npy", inp / "y.npy", "--name", SURROGATE + "\x1b[2J\x07",
                          "--junit", str(tmp_path / "j.xml")],
            "diff-missing": ["diff", out, inp / "x.npy"],
            "verify-missing": ["verify", "--fixtures", out],
            "quantize-missing": ["quantize", out + ".npy", "--fmt", "e4m3", "-o", str(tmp_path / "q.npz")],
            }[what]
    rc, o, e = check_cli(argv, strict_stdout=True)
    assert "\\udcff" in o + e, (o, e)
    assert "\x1b" not in o + e
    if what == "diff-name":
        import xml.dom.minidom

        xml.dom.minidom.parse(str(tmp_path / "j.xml"))  # well-formed


# ----------------------------------------------------------------------------- quantize's report

@settings(max_examples=n(40))
@given(vals=st.lists(st.sampled_from([np.inf, -np.inf, np.nan, 1.0, -2.5, 0.0, 1e30, 3e38]), min_size=1,
                     max_size=12),
       scale_format=st.sampled_from(["f32", "e8m0"]), fmt=st.sampled_from(["e4m3", "e5m2"]))
def test_quantize_reports_saturation_truthfully(tmp_path_factory, vals, scale_format, fmt, adversarial_counter):
    """All-saturated inputs used to report 'relative error 0.0'."""
    adversarial_counter["cases"] += 1
    d = tmp_path_factory.mktemp("q")
    x = np.array(vals, dtype=np.float32)
    np.save(d / "x.npy", x)
    rc, out, err = check_cli(["quantize", d / "x.npy", "--fmt", fmt, "--scale-format", scale_format,
                              "-o", d / "q.npz", "--json"])
    assert rc == 0, err
    info = json.loads(out)
    finite = int(np.isfinite(x).sum())
    assert info["finite"] == finite and info["nan"] == int(np.isnan(x).sum())
    assert info["saturated"] >= int(np.isinf(x).sum())
    if finite == 0:
        assert info["relative_error"] is None
    else:
        assert isinstance(info["relative_error"], float)
    rc, text, _ = check_cli(["quantize", d / "x.npy", "--fmt", fmt, "--scale-format", scale_format,
                             "-o", d / "q.npz"])
    if finite == 0:
        assert "no finite inputs" in text and "relative error 0" not in text
    if info["saturated"]:
        assert "saturated" in text
