"""PyTorch / cupy inputs: converted without importing the framework unless given one."""

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import refmodel
from refmodel.interop import as_numpy, to_framework


def test_numpy_passes_through_untouched():
    x = np.float32([1, 2])
    assert as_numpy(x) is x and to_framework(x, x) is x


def test_no_framework_imported_for_numpy_inputs():
    code = ("import sys, numpy as np, refmodel\n"
            "refmodel.encode(np.float32([1.0]), 'e4m3'); refmodel.diff(np.float32([1]), np.float32([1]))\n"
            "assert 'torch' not in sys.modules and 'cupy' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_torch_fp8_and_bf16_zero_copy():
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.0, -2.0, 448.0]).to(torch.float8_e4m3fn)
    a = as_numpy(t)
    assert a.dtype == ml_dtypes.float8_e4m3fn and list(a.view(np.uint8)) == [0x38, 0xC0, 0x7E]
    assert np.shares_memory(a.view(np.uint8), t.view(torch.uint8).numpy())
    b = torch.tensor([1.5, -3.0], dtype=torch.bfloat16)
    assert as_numpy(b).dtype == ml_dtypes.bfloat16 and list(as_numpy(b).astype(np.float32)) == [1.5, -3.0]


def test_entry_points_take_torch_and_return_torch_on_request():
    torch = pytest.importorskip("torch")
    x = torch.tensor([1.0, 450.0, -1e9])
    codes = refmodel.encode(x, "e4m3")
    assert isinstance(codes, np.ndarray) and list(codes) == [0x38, 0x7E, 0xFE]
    back = refmodel.decode(torch.from_numpy(codes), "e4m3", as_framework=True)
    assert isinstance(back, torch.Tensor) and back.tolist() == [1.0, 448.0, -448.0]
    d = refmodel.cvt("cvt.rn.satfinite.e4m3x2.f32", torch.tensor([1.0]), torch.tensor([-2.0]))
    assert int(d[0]) == 0x38C0
    q, s = refmodel.quantize(torch.randn(4, 256), "e4m3", "1x128", as_framework=True)
    assert isinstance(q, torch.Tensor) and tuple(s.shape) == (4, 2)


def test_torch_fp8_cast_agrees_with_refmodel_satfinite():
    """PyTorch's float32 -> float8_e4m3fn cast (the CPU kernel) saturates finite overflow
    like Hopper's satfinite: refmodel must agree on every finite input (outside oracle)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x = rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = x[np.isfinite(x)]
    ours = refmodel.encode(x, "e4m3", "satfinite")
    theirs = torch.from_numpy(x).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    assert np.array_equal(ours, theirs)
