"""wgref in your own test suite: bit-exact assertions against the golden models.

    from wgref.testing import assert_bits_equal, assert_matches_golden

    assert_matches_golden(y, library="scaled-mm", a=a8, b_nk=w8, scale_a=sa, scale_b=sb,
                          bias=bias, out_dtype="bf16", use_fast_accum=True)

Both raise :class:`BitsMismatch` (an ``AssertionError``) with the differ's report — how many values
differ, the first and the worst mismatch with its position, distance in ulps and the fields that
differ — so a failing test says where and by how much.  ``got`` may be a numpy array (ml_dtypes for
bf16 / FP8), raw bits, or a torch tensor (any device).  A pytest plugin (registered by the ``wgref``
distribution) adds the ``wgref_golden`` fixture: ``wgref_golden.assert_matches_golden(...)``.
See docs/testing.md for a complete example of an FP8 layer's test.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

__all__ = ["BitsMismatch", "assert_bits_equal", "assert_matches_golden", "golden", "to_numpy", "wgref_golden"]

_TORCH_TYPES = {"torch.bfloat16": ("bf16", "int16"), "torch.float16": ("f16", "int16"),
                "torch.float32": ("f32", "int32"), "torch.float8_e4m3fn": ("e4m3", "uint8"),
                "torch.float8_e5m2": ("e5m2", "uint8")}


class BitsMismatch(AssertionError):
    """Two arrays differ in some bits; ``report`` is the :class:`refmodel.verify.differ.DiffReport`."""

    def __init__(self, report):
        super().__init__(report.to_text())
        self.report = report


def to_numpy(x: Any) -> np.ndarray:
    """A numpy array of the same bits: numpy / ml_dtypes arrays as they are, torch tensors (CPU or GPU,
    bf16 / f16 / f32 / FP8) through their raw bits."""
    if hasattr(x, "detach") and hasattr(x, "dtype") and str(x.dtype) in _TORCH_TYPES:
        import torch

        name, view = _TORCH_TYPES[str(x.dtype)]
        bits = x.detach().contiguous().view(getattr(torch, view)).cpu().numpy()
        from refmodel.dtypes import bits_of, from_bits

        return from_bits(bits_of(bits), name)
    if hasattr(x, "detach"):
        raise TypeError(f"a torch tensor of dtype {x.dtype} has no wgref format (bf16, f16, f32, e4m3, e5m2)")
    return np.asarray(x)


def assert_bits_equal(got, want, *, fmt: Optional[str] = None, name: str = "output", nan_equal: bool = False) -> None:
    """Fail (:class:`BitsMismatch`) unless ``got`` and ``want`` hold the same bits, NaN payloads included
    (``nan_equal=True``: any NaN equals any NaN).  ``fmt``: read integer arrays as codes of a format."""
    from refmodel.verify.differ import diff

    g, w = to_numpy(got), to_numpy(want)
    if fmt is None and g.dtype != w.dtype and g.dtype.itemsize == w.dtype.itemsize:
        if g.dtype.kind in "ui" and w.dtype.kind not in "ui":        # raw bits against a typed array
            g = g.view(w.dtype)
        elif w.dtype.kind in "ui" and g.dtype.kind not in "ui":
            w = w.view(g.dtype)
    if g.shape != w.shape and g.size == w.size:
        raise AssertionError(f"{name}: shapes differ: got {g.shape}, want {w.shape}")
    report = diff(g, w, fmt=fmt, nan_equal=nan_equal, name=name)
    if not report.ok:
        raise BitsMismatch(report)


def golden(library: str, **call):
    """The golden model's output of one call: ``library`` is a name of
    :data:`refmodel.golden.registry.GOLDEN_MODELS` (``scaled-mm``, ``cublas``, ``triton``, ``torchao``,
    ``torchao-inference``, ``cutlass``, ``cusparselt``, ...), ``call`` its keyword arguments."""
    from refmodel.golden.registry import golden_model

    return golden_model(library).resolve()(**call)


def assert_matches_golden(got, *, library: str, names: Optional[Sequence[str]] = None, nan_equal: bool = False,
                          **call) -> None:
    """Fail (:class:`BitsMismatch`) unless ``got`` is bit for bit what the golden model of ``library``
    gives for ``call`` (its keyword arguments).  A model with several outputs (torchao's forward and
    backward: y, grad_x, grad_w) takes a tuple ``got`` of the same length; ``names`` labels them."""
    want = golden(library, **call)
    if isinstance(want, tuple):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            raise AssertionError(f"{library} gives {len(want)} outputs; got must be a tuple of as many, got "
                                 f"{type(got).__name__}")
        names = list(names or (f"{library} output {i}" for i in range(len(want))))
        for g, w, n in zip(got, want, names):
            assert_bits_equal(g, w, name=n, nan_equal=nan_equal)
        return
    assert_bits_equal(got, want, name=(names[0] if names else f"{library} output"), nan_equal=nan_equal)


class _Golden:
    """What the ``wgref_golden`` fixture gives a test."""

    assert_bits_equal = staticmethod(assert_bits_equal)
    assert_matches_golden = staticmethod(assert_matches_golden)
    golden = staticmethod(golden)
    to_numpy = staticmethod(to_numpy)


try:                                    # the pytest plugin (entry point pytest11: wgref = wgref.testing)
    import pytest

    @pytest.fixture
    def wgref_golden():
        """wgref's bit-exact assertions: ``wgref_golden.assert_matches_golden(got, library=..., **call)``."""
        return _Golden()

    @pytest.fixture
    def wgref_triton():
        """Triton's interpreter with the H200's numerics for the test (:func:`wgref.triton.interpret`);
        TRITON_INTERPRET=1 must be set before Triton is first imported (e.g. in conftest.py)."""
        from wgref.triton import interpret

        with interpret():
            yield
except ImportError:                     # pytest is optional: the functions work without it
    def wgref_golden():                 # type: ignore[no-redef]
        """Only a pytest fixture when pytest is installed."""
        return _Golden()
