"""Hostile inputs fixed by class (issue 34): one rule per class, each tested on the cases the hostile pass
found and on their neighbours."""

import numpy as np
import pytest

from refmodel.errors import InputError, WgrefError
from refmodel.layouts.swizzle import Swizzle, addresses, swizzle_address


@pytest.mark.parametrize("bad", [-16, np.array([-16, 32]), 2 ** 62, np.array([2 ** 62], np.uint64), True])
def test_swizzle_addresses_are_non_negative_byte_addresses(bad):
    with pytest.raises(WgrefError, match="address"):
        swizzle_address(bad, "128B")


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int64])
def test_narrow_integer_addresses_are_widened_not_wrapped(dtype):
    a = np.array([0, 16, 100, 127], dtype)
    want = [Swizzle(3)(int(v)) for v in a]
    got = swizzle_address(a, "128B")
    assert got.dtype == np.int64 and got.tolist() == want
    assert addresses(np.uint8(200)) == 200 and swizzle_address(np.uint8(200), "none") == 200


def test_tma_load_of_an_empty_tensor_is_refused():
    import refmodel

    for shape in ((0, 64), (64, 0)):
        with pytest.raises(InputError, match="at least one row and one column"):
            refmodel.tma_load(np.zeros(shape, np.uint16), box=(8, 64), coords=(0, 0), mode="128B")


@pytest.mark.parametrize("rep", [None, "abc", 3, {"hazards": []}])
def test_pipeline_drawings_take_a_report_only(rep):
    from refmodel.machine.pipeline_draw import draw_ascii, draw_svg

    for draw in (draw_ascii, draw_svg):
        with pytest.raises(InputError, match="PipelineReport"):
            draw(rep)


@pytest.mark.parametrize("text", ["1_0", "0x1_0", "1_000.5", "-1_0"])
def test_numbers_on_the_command_line_take_no_digit_separators(text, capsys):
    from wgref.cli import main

    assert main(["cvt", text, "--to", "e4m3"]) == 2
    assert "'_' is not part of a number here" in capsys.readouterr().err
    assert main(["cvt", text.replace("_", ""), "--to", "e4m3"]) == 0


def test_the_command_line_draws_only_existing_forms(capsys):
    from wgref.cli import main

    assert main(["layout", "acc", "--n", "40", "--dtype", "s32"]) == 2
    assert "no m64n40 wgmma form has a s32 accumulator" in capsys.readouterr().err
    assert main(["layout", "acc", "--n", "48", "--dtype", "s32"]) == 0
    assert main(["layout", "acc", "--n", "40", "--dtype", "f32"]) == 0


# ----------------------------------------------------------------------------- block sizes
# Rule (refmodel.limits.check_block): a block along a tensor's axis -- a quantization tile's rows or
# columns, a schedule's scale block, a promotion group's K -- is at most the tensor's extent along that
# axis, or at most the limit 'block' (4096: a recipe's standard block overhanging a smaller tensor is one
# ragged block); with no tensor at hand only the limit applies.  Checked before anything is allocated.

def _small_peak(fn):
    """fn() under tracemalloc: the exception it raises and the peak of traced allocations."""
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(InputError) as e:
            fn()
        return e.value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


X64 = np.linspace(-3, 3, 64 * 256, dtype=np.float32).reshape(64, 256)


@pytest.mark.parametrize("tile,axis,extent", [((10**9, 2), 0, 64), ((2, 10**9), 1, 256),
                                              ("1000000000x128", 0, 64), ((4097, 1), 0, 64),
                                              ((1, 10**6), 1, 256)])
@pytest.mark.parametrize("entry", ["quantize", "dequantize", "amax", "scale_shape"])
def test_a_tile_is_at_most_the_tensor_or_a_standard_block(entry, tile, axis, extent):
    from refmodel.limits import LimitError
    from refmodel.numerics import scaling

    calls = {"quantize": lambda: scaling.quantize(X64, "e4m3", tile),
             "dequantize": lambda: scaling.dequantize(np.zeros((64, 256), np.uint8), np.ones((1, 1), np.float32),
                                                      "e4m3", tile),
             "amax": lambda: scaling.amax(X64, tile),
             "scale_shape": lambda: scaling.scale_shape((64, 256), tile)}
    e, peak = _small_peak(calls[entry])
    assert isinstance(e, LimitError) and "\n" not in str(e)
    assert f"the tensor's extent ({extent}) along axis {axis} or at most 4096 (limit 'block'" in str(e)
    assert peak < 16 << 20


def test_a_standard_tile_overhanging_a_smaller_tensor_is_one_ragged_block():
    from refmodel.numerics import scaling

    q1, s1 = scaling.quantize(X64, "e4m3", "128x128")        # 64 rows: one ragged block of rows
    q2, s2 = scaling.quantize(X64, "e4m3", "64x128")
    assert np.array_equal(q1, q2) and np.array_equal(s1, s2) and s1.shape == (1, 2)
    assert scaling.scale_shape((3, 64, 256), (4096, 4096)) == (3, 1, 1)
    # a tile the size of the tensor is a block of it, however large
    assert scaling.scale_shape((8192, 2), (8192, 2)) == (1, 1)
    with pytest.raises(InputError, match=r"extent \(64\) along axis 1 or at most 4096"):
        scaling.scale_shape((3, 64, 256), (8192, 1))        # batch dims count: rows are axis 1


def test_a_recipe_without_a_tensor_takes_standard_blocks_only():
    from refmodel.numerics import scaling

    assert "4096x1 tile" in scaling.describe_recipe("e4m3", "4096x1")
    with pytest.raises(InputError, match=r"rows of tile '8192x1' must be at most 4096 \(limit 'block'"):
        scaling.describe_recipe("e4m3", "8192x1")


def test_the_command_line_quantize_refuses_a_huge_tile(tmp_path, capsys):
    from wgref.cli import main

    x = tmp_path / "x.npy"
    np.save(x, X64)
    for tile in ("1000000000x128", "1x1000000000"):
        assert main(["quantize", str(x), "--fmt", "e4m3", "--granularity", tile, "-o", str(tmp_path / "q.npz")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("wgref: error: ") and err.count("\n") == 1 and "limit 'block'" in err
    assert not (tmp_path / "q.npz").exists()
    assert main(["quantize", str(x), "--fmt", "e4m3", "--granularity", "128x128", "-o", str(tmp_path / "q.npz")]) == 0


F8 = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"


def test_a_schedule_blocks_follow_the_same_rule():
    """A stored schedule's promote_every was padded into K before any check (10**9 asked for 1.9 TiB)."""
    import ml_dtypes

    from refmodel.golden import Schedule, load_schedule

    a = np.zeros((64, 64), ml_dtypes.float8_e4m3fn)
    b = np.zeros((64, 8), ml_dtypes.float8_e4m3fn)
    e, peak = _small_peak(lambda: Schedule(F8, promote_every=10**9).run(a, b))
    assert "promotion group's K" in str(e) and "extent (64) along K or at most 4096 (limit 'block'" in str(e)
    assert peak < 16 << 20
    e, _ = _small_peak(lambda: load_schedule('{"instr": "%s", "promote_every": 1000000000}' % F8).run(a, b))
    assert "limit 'block'" in str(e)
    with pytest.raises(InputError, match=r"scale_block must be at most 4096 \(limit 'block'"):
        Schedule(F8, promote_every=4, block_scales=True, scale_block=10**9)
    # neighbours that are real kernels: 4 instructions (128 of K) on a 64-K chain, one ragged group
    assert Schedule(F8, promote_every=4).run(a, b).shape == (64, 8)
    assert Schedule(F8, promote_every=4, block_scales=True, scale_block=128).scale_block == 128


def test_a_stored_schedule_on_the_command_line_is_one_error(tmp_path, capsys):
    from wgref.cli import main

    np.save(tmp_path / "a.npy", np.zeros((64, 64), np.uint8))
    np.save(tmp_path / "b.npy", np.zeros((64, 8), np.uint8))
    (tmp_path / "s.json").write_text('{"instr": "%s", "promote_every": 1000000000}' % F8)
    rc = main(["golden", "cutlass", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--dtype", "e4m3",
               "-o", str(tmp_path / "d.npy"), "--schedule", str(tmp_path / "s.json")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("wgref: error: ") and "limit 'block'" in err and "internal" not in err


# ----------------------------------------------------------------------------- user text
# Rule (refmodel.validate.check_text / check_json_text): text a user gives -- a trace's role, tag, id and
# barrier names, every string of a JSON document wgref reads (replay configurations, journals, manifests,
# schedules) -- is Unicode scalar text.  A lone surrogate is refused where it comes in, in one sentence
# naming the field; and as a net, the CLI's streams escape whatever they cannot encode.

LONE = ["\\ud800", "\\udc00", "a\\udfffb", "\\ud83d"]   # JSON escapes; "\\ud83d\\ude00" is a valid pair


@pytest.mark.parametrize("esc", LONE)
@pytest.mark.parametrize("field,line", [("t", '{"op": "wgmma.fence", "t": "%s"}'),
                                        ("line", '{"op": "commit_group", "line": "%s"}'),
                                        ("id", '{"op": "commit_group", "id": "%s"}'),
                                        ("bar", '{"op": "mbarrier.init", "bar": "%s", "count": 1}')])
def test_trace_text_fields_are_unicode_text(field, line, esc):
    from refmodel.machine import pipeline as pl
    from refmodel.machine.trace import TraceError, event_from_dict

    text = '{"op": "wgmma.fence"}\n' + line % esc + "\n"
    with pytest.raises(TraceError, match=rf"^trace line 2: field '{field}' must be Unicode text, but character "
                                         r"\d+ is a lone surrogate U\+D[89A-F][0-9A-F]{2}"):
        pl.parse_trace(text)
    import json

    with pytest.raises(TraceError, match="lone surrogate"):       # the Python API: the same rule
        event_from_dict(json.loads(line % esc), 0)


def test_trace_text_may_be_any_unicode(capsys, tmp_path):
    from refmodel.machine import pipeline as pl
    from wgref.cli import main

    ev = pl.parse_trace('{"op": "wgmma.fence", "t": "\\ud83d\\ude00", "line": "gemm.cu:88 \\u00fc"}\n')
    assert ev[0].role == "\U0001F600" and ev[0].tag == "gemm.cu:88 \u00fc"
    p = tmp_path / "t.jsonl"
    p.write_text('{"op": "commit_group", "t": "\\ud83d\\ude00", "line": "k\\u00fc"}\n', encoding="utf-8")
    assert main(["pipeline", "check", str(p)]) == 1               # a hazard, reported, no internal error
    out, err = capsys.readouterr()
    assert "\U0001F600" in out and err == ""


@pytest.mark.parametrize("action", [["check"], ["check", "--json"], ["draw"], ["draw", "--format", "svg"]])
def test_the_command_line_refuses_a_lone_surrogate_in_a_trace(action, tmp_path, capsys):
    from wgref.cli import main

    p = tmp_path / "t.jsonl"
    p.write_text('{"op": "wgmma.fence"}\n{"op": "commit_group", "line": "x\\udc00y"}\n', encoding="utf-8")
    assert main(["pipeline", action[0], str(p), *action[1:]]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "internal error" not in err
    assert err.startswith("wgref: error: trace line 2: field 'line' must be Unicode text") and "U+DC00" in err


def test_json_documents_refuse_lone_surrogates(tmp_path):
    from refmodel.fileio import loads_json, read_json
    from refmodel.golden import load_schedule
    from refmodel.validate import loads_json as loads_user_json
    from refmodel.verify.case import parse_json
    from refmodel.verify.journal import read_journal

    doc = '{"notes": {"who": ["ok", "x\\ud800"]}}'
    for parse in (lambda t: parse_json(t, "the configuration"), lambda t: loads_json(t, "manifest.json"),
                  lambda t: loads_user_json(t, "the config")):
        with pytest.raises(InputError, match=r"field 'notes'\['who'\]\[1\] must be Unicode text.*U\+D800"):
            parse(doc)
        assert parse('{"notes": {"who": ["ok", "x\\ud83d\\ude00"]}}')["notes"]["who"][1] == "x\U0001F600"
    with pytest.raises(InputError, match="a key must be Unicode text"):
        parse_json('{"\\udfff": 1}', "the configuration")
    (tmp_path / "m.json").write_text(doc)
    with pytest.raises(InputError, match="lone surrogate"):
        read_json(tmp_path / "m.json")
    with pytest.raises(InputError, match=r"the schedule: field 'source'\['kernel'\] must be Unicode text"):
        load_schedule('{"instr": "%s", "source": {"kernel": "\\ud800"}}' % F8)
    j = tmp_path / "journal.jsonl"
    j.write_text('{"header": {"target": "t", "seed": 0, "batch_tiles": 64}}\n'
                 '{"batch": 0, "job": "\\ud800", "tiles": 1, "outputs": 1, "mismatches": 0, "seconds": 0.1}\n')
    with pytest.raises(InputError, match="field 'job' must be Unicode text"):
        read_journal(j)


def test_the_command_line_streams_escape_what_they_cannot_encode(monkeypatch):
    """The net under the rule: a stream in surrogateescape mode (the C locale) gave back the bytes of
    a file name (U+DC80..U+DCFF) but raised on any other surrogate, which the guard reported as an
    internal error."""
    import io
    import sys

    from wgref.cli import _tolerant_streams

    buf = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(buf, encoding="utf-8", errors="surrogateescape"))
    restore = _tolerant_streams()
    try:
        sys.stdout.write("x\ud800y \udcff\n")
        sys.stdout.flush()
    finally:
        restore()
    assert buf.getvalue() == b"x\\ud800y \xff\n" and sys.stdout.errors == "surrogateescape"


# ----------------------------------------------------------------------------- progress lines
# Rule (wgref.cli._end_progress_lines): on every error path the guard ends a progress line still on
# screen before it writes the error, so the error is a line of its own and no bar redraws after it.

def _error_line_alone(err: str, start: str) -> None:
    lines = err.split("\n")
    hits = [ln for ln in lines if start in ln]
    assert len(hits) == 1, err[-500:]
    assert hits[0].startswith(start) and "\r" not in hits[0], repr(hits[0][:200])
    assert err.endswith(hits[0] + "\n"), repr(err[-300:])            # nothing drawn after the error


def test_a_journal_write_fault_ends_the_progress_line_first(tmp_path, monkeypatch, capsys):
    import builtins
    import errno
    import os

    import refmodel.verify.journal as journal
    from wgref.cli import main

    appends = []

    def full_disk(path, mode="r", *a, **kw):
        if "a" in mode:
            appends.append(path)
            if len(appends) >= 2:            # the first batch is journaled, the second finds the disk full
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return builtins.open(path, mode, *a, **kw)

    monkeypatch.setattr(journal, "open", full_disk, raising=False)
    rc = main(["fuzz", "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", "--dry-run", "--cases", "256",
               "--batch-tiles", "64", "--out", str(tmp_path / "fz")])
    err = capsys.readouterr().err
    assert rc == 2 and "tile" in err.split("wgref: error:")[0]           # a bar was on screen
    _error_line_alone(err, "wgref: error: cannot append to ")
    assert "No space left on device" in err


@pytest.mark.parametrize("exc,start,rc", [(InputError("bad input"), "wgref: error: bad input", 2),
                                          (RuntimeError("boom"), "wgref formats: internal error: RuntimeError", 2),
                                          (KeyboardInterrupt(), None, 130)])
def test_every_error_path_ends_the_progress_line(exc, start, rc, monkeypatch, capsys):
    import sys

    from tqdm import tqdm

    from wgref.commands.common import COMMANDS
    from wgref.cli import main

    def command(args):
        bar = tqdm(total=10, file=sys.stderr)
        bar.update(3)
        bar.refresh()
        raise exc

    monkeypatch.setitem(COMMANDS, "formats", command)
    assert main(["formats", "e4m3"]) == rc
    err = capsys.readouterr().err
    assert "3/10" in err
    if start is None:
        assert err.endswith("\n")
    else:
        _error_line_alone(err, start)


def test_progress_lines_are_tqdm_bars_only():
    """The guard ends tqdm bars; no code of wgref draws a carriage-return line of its own (a "\\r" in
    a string is only read: trace lines, or escaped: the guard's messages)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    found = set()
    for pkg in ("refmodel", "gpu", "wgref"):
        for p in (root / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\r" in node.value:
                    found.add(p.relative_to(root).as_posix())
    assert found <= {"refmodel/machine/trace.py", "wgref/cli.py"}, found
