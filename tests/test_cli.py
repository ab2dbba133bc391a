"""The wgref command line: outputs, exit codes, one-line errors."""

import json
import subprocess
import sys

import numpy as np
import pytest

from wgref.cli import main


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cvt_reports_code_rounding_and_saturation(capsys):
    rc, out, _ = run(capsys, "cvt", "450", "--to", "e4m3", "--json")
    info = json.loads(out)
    assert rc == 0 and info["code"] == "0x7E" and info["saturated"] and info["value"] == "448.0"
    rc, out, _ = run(capsys, "cvt", "0x3f900000", "--to", "e5m2", "--json")  # 1.125 -> tie -> 1.0
    info = json.loads(out)
    assert info["code"] == "0x3C" and info["rounding"].startswith("down")
    rc, out, _ = run(capsys, "cvt", "1e6", "--to", "e5m2", "--policy", "nosat")
    assert "0x7C" in out


def test_cvt_float64_source_single_rounding(capsys):
    rc, out, _ = run(capsys, "cvt", "0x1.1000000001p0", "--to", "e4m3", "--from", "f64", "--json")
    assert json.loads(out)["code"] == "0x39"


@pytest.mark.parametrize("argv,msg", [
    (["cvt", "abc", "--to", "e4m3"], "cannot parse"),
    (["cvt", "1", "--to", "e4m3", "--from", "f8"], "--from must be one of"),
    (["cvt", "0x1ffffffff", "--to", "e4m3"], "does not fit"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, msg):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and msg in err and err.count("\n") == 1 and "Traceback" not in err


def test_unknown_format_is_usage_error():
    r = subprocess.run([sys.executable, "-m", "wgref.cli", "cvt", "1", "--to", "e3m4"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_formats_table(capsys):
    rc, out, _ = run(capsys, "formats", "e4m3", "--json")
    rows = json.loads(out)
    assert len(rows) == 256 and rows[0x7E]["value"] == 448.0 and rows[0x7F]["class"] == "nan"
    rc, out, _ = run(capsys, "formats", "e5m2", "--json")
    rows = json.loads(out)
    assert rows[0x7C]["class"] == "inf" and rows[0x7B]["value"] == 57344.0


def test_verify_without_fixtures_is_usage_error(capsys, tmp_path):
    rc, out, err = run(capsys, "verify", "--fixtures", str(tmp_path))
    assert rc == 2 and "no fixtures" in err


def test_quantize_round_trip(capsys, tmp_path):
    x = np.random.default_rng(0).standard_normal((4, 256)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "q.npz"
    rc, text, _ = run(capsys, "quantize", str(tmp_path / "x.npy"), "--fmt", "e4m3",
                      "--granularity", "1x128", "-o", str(out), "--json")
    assert rc == 0
    z = np.load(out)
    assert z["codes"].shape == (4, 256) and z["scales"].shape == (4, 2)
    assert json.loads(text)["relative_error"] < 0.05  # e4m3 has 3 mantissa bits


def test_quantize_bad_granularity(capsys, tmp_path):
    np.save(tmp_path / "x.npy", np.ones((2, 2), np.float32))
    rc, _, err = run(capsys, "quantize", str(tmp_path / "x.npy"), "--fmt", "e4m3",
                     "--granularity", "3", "-o", str(tmp_path / "q.npz"))
    assert rc == 2 and "granularity must be" in err


def test_diff_command_exit_codes_and_junit(capsys, tmp_path):
    np.save(tmp_path / "g.npy", np.float32([1, 2, 3]))
    np.save(tmp_path / "w.npy", np.float32([1, 2, 4]))
    rc, out, _ = run(capsys, "diff", str(tmp_path / "g.npy"), str(tmp_path / "g.npy"))
    assert rc == 0
    rc, out, _ = run(capsys, "diff", str(tmp_path / "g.npy"), str(tmp_path / "w.npy"), "--json",
                     "--junit", str(tmp_path / "r.xml"))
    assert rc == 1 and json.loads(out)["mismatches"] == 1
    assert "<failure" in (tmp_path / "r.xml").read_text()
    rc, _, err = run(capsys, "diff", str(tmp_path / "nope.npy"), str(tmp_path / "g.npy"))
    assert rc == 2 and "cannot read" in err
