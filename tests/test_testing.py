"""wgref.testing: the assertions fail with the differ's report, pass on equal bits, take torch-free
numpy / raw bits, and docs/testing.md's example runs as written."""

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from wgref.testing import BitsMismatch, assert_bits_equal, assert_matches_golden, golden, to_numpy

BF = ml_dtypes.bfloat16
DOC = Path(__file__).resolve().parent.parent / "docs" / "testing.md"


def test_equal_bits_pass_and_nan_payloads_count():
    a = np.array([1.0, -0.0, np.nan], np.float32)
    assert_bits_equal(a, a.copy())
    b = a.copy()
    b.view(np.uint32)[2] = 0x7FFFFFFF
    with pytest.raises(BitsMismatch, match="NaN payload"):
        assert_bits_equal(b, a)
    assert_bits_equal(b, a, nan_equal=True)
    with pytest.raises(BitsMismatch):
        assert_bits_equal(np.array([0.0], np.float32), np.array([-0.0], np.float32))   # the sign of zero counts


def test_report_names_first_and_worst_with_position_ulps_and_fields():
    want = np.arange(1, 65, dtype=np.float32).reshape(8, 8).astype(BF)
    got = want.copy()
    got.view(np.uint16)[1, 2] += 1
    got.view(np.uint16)[5, 6] += 3
    with pytest.raises(BitsMismatch) as e:
        assert_bits_equal(got, want, name="y")
    text = str(e.value)
    assert text.startswith("y: 2 of 64 bf16 values differ")
    assert re.search(r"first .*row 1, col 2.*1 ulp.*mantissa", text)
    assert re.search(r"worst .*row 5, col 6.*3 ulp", text)
    assert e.value.report.mismatches == 2


def test_raw_bits_compare_with_typed_arrays():
    want = np.array([1.5, 2.0], np.float32).astype(BF)
    assert_bits_equal(want.view(np.uint16), want)


def test_assert_matches_golden_single_and_tuple_outputs():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 128)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((32, 128)).astype(ml_dtypes.float8_e4m3fn)
    call = dict(a=a, b_nk=b, scale_a=np.float32(0.5), scale_b=np.float32(2.0), out_dtype="bf16")
    d = golden("scaled-mm", **call)
    assert_matches_golden(d, library="scaled-mm", **call)
    bad = d.copy()
    bad.view(np.uint16)[0, 0] ^= 1
    with pytest.raises(BitsMismatch, match="1 of 2048"):
        assert_matches_golden(bad, library="scaled-mm", **call)
    x = rng.standard_normal((64, 64)).astype(BF)
    w = rng.standard_normal((64, 64)).astype(BF)
    g = rng.standard_normal((64, 64)).astype(BF)
    outs = golden("torchao", x=x, w=w, grad_y=g, recipe="tensorwise")
    assert_matches_golden(outs, library="torchao", names=("y", "grad_x", "grad_w"), x=x, w=w, grad_y=g,
                          recipe="tensorwise")
    with pytest.raises(AssertionError, match="3 outputs"):
        assert_matches_golden(outs[0], library="torchao", x=x, w=w, grad_y=g, recipe="tensorwise")
    with pytest.raises(ValueError, match="no golden model named"):
        golden("cudnn", a=a)


def test_to_numpy_keeps_numpy_and_refuses_unknown():
    x = np.ones(3, BF)
    assert to_numpy(x) is x or np.array_equal(to_numpy(x).view(np.uint16), x.view(np.uint16))


def test_fixture_is_registered(wgref_golden):
    wgref_golden.assert_bits_equal(np.zeros(2, np.float32), np.zeros(2, np.float32))


def test_the_docs_example_runs(wgref_golden):
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    ns: dict = {}
    exec(compile(code, str(DOC), "exec"), ns)
    ns["test_fp8_linear_is_bit_exact"](wgref_golden)
