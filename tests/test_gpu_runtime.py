"""gpu.kernels.runtime: kernels compile with exactly wgref's NVRTC options, so float32 C++ arithmetic
keeps subnormals (cupy's own compile path appends -ftz=true, which flushed the FP8 GEMM's promotion
products to zero), NVRTC errors are one DeviceError line, and cubins land in the disk cache."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from gpu.kernels import float_probe, runtime


def test_options_state_ieee_subnormals_and_cupys_compile_path_is_not_used():
    assert "-ftz=false" in runtime.NVRTC_OPTIONS
    assert not any("ftz=true" in o or "fast_math" in o for o in runtime.NVRTC_OPTIONS)
    src = inspect.getsource(runtime.compile_module)
    assert "RawModule(path=" in src and "RawModule(code=" not in src   # cupy's code= path appends -ftz=true


@pytest.mark.gpu
def test_float32_arithmetic_keeps_subnormals_on_the_device():
    # products, sums and double -> float conversions whose results are float32 subnormals (or
    # near them), and subnormal operands
    x, y, z, w = float_probe.inputs(subnormal_operands=64)
    got = float_probe.run(runtime.compile_module(float_probe.SOURCE), x, y, z, w)
    want = float_probe.ieee(x, y, z, w)
    sub = (np.abs(want.view(np.float32)) < 2.0 ** -126) & (want.view(np.float32) != 0)
    assert sub.sum() > 1000          # the test exercises subnormal results
    assert np.array_equal(got, want), f"{int(np.count_nonzero(got != want))} of {want.size} results differ"


@pytest.mark.gpu
def test_nvrtc_errors_are_one_device_error_and_cubins_are_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("WGREF_CACHE_DIR", str(tmp_path))
    with pytest.raises(runtime.CompileError, match="NVRTC could not compile"):
        runtime.compile_module('extern "C" __global__ void k() { undeclared_name = 1; }')
    src = 'extern "C" __global__ void wgref_cache_probe(int* p) { p[0] = 41 + 1; }'
    runtime.compile_module(src)
    assert len(list(tmp_path.glob("*.cubin"))) == 1
