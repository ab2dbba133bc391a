"""gpu.kernels.runtime: kernels compile with exactly wgref's NVRTC options, so float32 C++ arithmetic
keeps subnormals (cupy's own compile path appends -ftz=true, which flushed the FP8 GEMM's promotion
products to zero), NVRTC errors are one DeviceError line, and cubins land in the disk cache."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from gpu.kernels import runtime

F32_SUB = np.float32(2.0 ** -140)   # a float32 subnormal


def test_options_state_ieee_subnormals_and_cupys_compile_path_is_not_used():
    assert "-ftz=false" in runtime.NVRTC_OPTIONS
    assert not any("ftz=true" in o or "fast_math" in o for o in runtime.NVRTC_OPTIONS)
    src = inspect.getsource(runtime.compile_module)
    assert "RawModule(path=" in src and "RawModule(code=" not in src   # cupy's code= path appends -ftz=true




@pytest.mark.gpu
def test_float32_arithmetic_keeps_subnormals_on_the_device():
    import cupy as cp

    rng = np.random.default_rng(7)
    n = 4096
    # products, sums and double -> float conversions whose results are float32 subnormals (or
    # near them), and subnormal operands
    x = (rng.uniform(1, 2, n) * 2.0 ** rng.integers(-80, -60, n)).astype(np.float32)
    y = (rng.uniform(1, 2, n) * 2.0 ** rng.integers(-80, -60, n)).astype(np.float32)
    z = (rng.uniform(-1, 1, n) * 2.0 ** -128).astype(np.float32)
    x[:64] = F32_SUB * np.arange(1, 65, dtype=np.float32)
    w = rng.uniform(1, 2, n) * 2.0 ** rng.integers(-152, -120, n)
    k = runtime.compile_module(runtime.FLOAT_PROBE_SOURCE).get_function("wgref_float_ops")
    out = cp.zeros(5 * n, cp.float32)
    k(((n + 127) // 128,), (128,), (cp.asarray(x), cp.asarray(y), cp.asarray(z), cp.asarray(w), out, np.int32(n)))
    got = cp.asnumpy(out).reshape(n, 5).view(np.uint32)
    import refmodel

    fma = np.array([refmodel.fma_f32(a, b, c) for a, b, c in zip(x, y, z)], np.float32)   # one rounding
    want = np.stack([fma,
                     x * y, x * y, z + np.float32(-0.75) * z, w.astype(np.float32)], 1).view(np.uint32)
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
