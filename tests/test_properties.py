"""Property-based checks (Hypothesis) of the FP8 kernels against the readable formulas."""

import numpy as np
from hypothesis import given, settings, strategies as st

from refmodel.numerics import fp8
from refmodel.numerics.cvt import cvt
from refmodel.verify.differ import diff

floats64 = st.floats(allow_nan=True, allow_infinity=True, width=64)
bits32 = st.integers(min_value=0, max_value=2**32 - 1)


@settings(max_examples=300, deadline=None)
@given(x=floats64, fmt=st.sampled_from(["e4m3", "e5m2"]), policy=st.sampled_from(fp8.POLICIES))
def test_encode_matches_formula_for_any_double(x, fmt, policy):
    a = np.array([x], np.float64)
    assert fp8.encode(a, fmt, policy)[0] == fp8.encode_reference(a, fmt, policy)[0]


@settings(max_examples=300, deadline=None)
@given(a=bits32, b=bits32, fmt=st.sampled_from(["e4m3", "e5m2"]), relu=st.booleans())
def test_packed_cvt_is_two_independent_conversions(a, b, fmt, relu):
    instr = f"cvt.rn.satfinite{'.relu' if relu else ''}.{fmt}x2.f32"
    d = int(cvt(instr, np.uint32(a), np.uint32(b)))
    pol = "relu" if relu else "satfinite"
    assert d >> 8 == fp8.encode(np.uint32(a).view(np.float32), fmt, pol)
    assert d & 0xFF == fp8.encode(np.uint32(b).view(np.float32), fmt, pol)


@settings(max_examples=200, deadline=None)
@given(x=st.lists(bits32, min_size=1, max_size=20), flip=st.integers(min_value=0, max_value=31))
def test_differ_counts_exactly_the_changed_elements(x, flip):
    g = np.array(x, np.uint32).view(np.float32)
    w = g.copy()
    w.view(np.uint32)[0] ^= np.uint32(1 << flip)
    r = diff(g, w)
    assert r.mismatches == 1 and r.first.index == (0,)
