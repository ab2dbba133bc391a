"""Adversarial outputs and files: every output path kind, outputs equal to inputs, file modes,
format edge cases (the reading side, fixtures and npz/npy, is tests/test_adversarial_reads.py).

The properties: an output that is not a regular file or a new path (a directory, a FIFO, a
socket, a symlink, a character device such as /dev/null, a path whose folder is missing) or
that is one of the command's inputs is refused -- exit 2, exactly one stderr line, no
traceback -- and left exactly as it was; a written file has the mode of a normally written
file.

We run as root here, so /dev/null could really be replaced by a wrong writer: every test in
this module runs with ``os.replace`` / ``os.rename`` / ``tempfile.mkstemp`` wrapped so that
they raise instead of touching anything under /dev or replacing a non-regular file
(the ``no_clobber`` fixture), and /dev/null's type is checked after each case.

CI runs the deterministic ``ci`` Hypothesis profile (tests/conftest.py); every case tried
is counted in ``adversarial_counter``.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from refmodel import fileio
from refmodel.errors import InputError
from wgref.cli import main

from cli_harness import check_cli, n, refused

pytestmark = pytest.mark.usefixtures("no_clobber")

ROOT = Path(__file__).resolve().parent.parent
DESC = "0x0000001000080000"


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
        "explore -o": lambda out: ["explore", "-o", out],
        "explain-dot -o": lambda out: ["explain-dot", "--case", "doc", "--format", "svg", "-o", out],
        "layout --at -o": lambda out: ["layout", "acc", "--at", "3,4", "--json", "-o", out],
        "explain-attention -o": lambda out: ["explain-attention", "--case", "doc", "-o", out],
    }


WRITERS = ["quantize", "diff --junit", "layout -o", "desc -o", "pipeline gen -o", "pipeline draw -o", "explore -o",
           "explain-dot -o", "layout --at -o", "explain-attention -o"]
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
