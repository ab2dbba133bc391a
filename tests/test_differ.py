"""The bit-level differ: counts, positions, ulps, fields, NaN payloads, output formats."""

import json
import xml.etree.ElementTree as ET

import ml_dtypes
import numpy as np
import pytest

from refmodel.verify.differ import diff
from refmodel.errors import DTypeError, InputError


def test_equal_arrays_report_ok():
    x = np.random.default_rng(0).standard_normal((2, 64, 8)).astype(np.float32)
    r = diff(x, x.copy())
    assert r.ok and r.mismatches == 0 and r.total == x.size and r.first is None


def test_position_ulps_and_fields():
    w = np.ones((3, 64, 16), np.float32)
    g = w.copy()
    g[2, 5, 7] = np.nextafter(np.float32(1), np.float32(2))      # 1 ulp, mantissa
    g[1, 0, 3] = np.float32(4.0)                                  # exponent
    g[0, 63, 15] = np.float32(-1.0)                               # sign
    r = diff(g, w)
    assert r.mismatches == 3 and r.rate == pytest.approx(3 / w.size)
    assert r.first.position == {"case": 0, "row": 63, "col": 15} and r.first.fields == ["sign"]
    assert r.worst.fields == ["sign"]  # crossing zero is the longest distance here
    by_pos = {tuple(m.index): m for m in r.samples}
    assert by_pos[(2, 5, 7)].ulps == 1 and by_pos[(2, 5, 7)].fields == ["mantissa"]
    assert by_pos[(1, 0, 3)].fields == ["exponent"] and by_pos[(1, 0, 3)].ulps == 2 << 23


def test_ulps_cross_zero_and_subnormals():
    g = np.uint32([0x00000001]).view(np.float32)
    w = np.uint32([0x80000001]).view(np.float32)
    assert diff(g, w).first.ulps == 2


def test_nan_payload_strict_by_default():
    g = np.uint32([0x7FFFFFFF]).view(np.float32)
    w = np.uint32([0x7FC00000]).view(np.float32)
    r = diff(g, w)
    assert r.mismatches == 1 and r.first.nan_payload and r.first.ulps is None
    assert diff(g, w, nan_equal=True).ok
    # NaN vs a number is always a mismatch, and the worst one
    g2 = np.float32([np.nan, 1.0])
    w2 = np.float32([2.0, np.nextafter(np.float32(1), np.float32(2))])
    r2 = diff(g2, w2, nan_equal=True)
    assert r2.mismatches == 2 and r2.worst.index == (0,)


@pytest.mark.parametrize("dt,nan_bits", [(ml_dtypes.float8_e4m3fn, [0x7F, 0xFF]),
                                         (ml_dtypes.float8_e5m2, [0x7D, 0x7E]),
                                         (np.float16, [0x7E00, 0x7FFF]),
                                         (ml_dtypes.bfloat16, [0x7FC0, 0xFFC1])])
def test_narrow_float_nans(dt, nan_bits):
    ut = np.uint8 if np.dtype(dt).itemsize == 1 else np.uint16
    g = np.array([nan_bits[0]], ut).view(dt)
    w = np.array([nan_bits[1]], ut).view(dt)
    assert diff(g, w).first.nan_payload and diff(g, w, nan_equal=True).ok


def test_integer_codes_with_fmt():
    r = diff(np.uint8([0x38]), np.uint8([0x39]), fmt="e4m3")
    assert r.first.want == "1.125" and r.first.ulps == 1


def test_integers():
    r = diff(np.int32([5, -7]), np.int32([5, 9]))
    assert r.mismatches == 1 and r.first.ulps == 16 and r.first.fields == ["value"]


def test_outputs_text_json_junit():
    r = diff(np.float32([1, 2]), np.float32([1, 3]), name="case7")
    assert "1 of 2 f32 values differ" in r.to_text() and "0x40400000" in r.to_text()
    d = json.loads(r.to_json())
    assert d["mismatches"] == 1 and d["ok"] is False and d["first"]["want_hex"] == "0x40400000"
    root = ET.fromstring(r.to_junit())
    assert root.get("failures") == "1" and root.find("testcase").get("name") == "case7"
    ok = ET.fromstring(diff(np.float32([1]), np.float32([1])).to_junit())
    assert ok.get("failures") == "0" and ok.find("testcase/failure") is None


def test_errors():
    with pytest.raises(InputError, match="shapes differ"):
        diff(np.zeros(2, np.float32), np.zeros(3, np.float32))
    with pytest.raises(DTypeError, match="dtypes differ"):
        diff(np.zeros(2, np.float32), np.zeros(2, np.float16))
    with pytest.raises(DTypeError, match="cannot diff"):
        diff(np.array(["a"]), np.array(["b"]))
