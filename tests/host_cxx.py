"""The host C++ compiler of the host-build tests, their skip marker, and a syntax check of device source
(the ``__CUDACC_RTC__`` branch, CUDA's keywords and thread indices stubbed) with that compiler."""

from __future__ import annotations

import shutil
import subprocess
import tempfile

import pytest

CXX = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler")

_DEVICE_STUB = ("#define __CUDACC_RTC__ 1\n#define __global__\n#define __host__\n#define __device__\n"
                "struct wg_dim3 { int x; }; static wg_dim3 blockIdx, blockDim, threadIdx;\n")


def device_source_syntax(source: str) -> subprocess.CompletedProcess:
    """``CXX -fsyntax-only`` on ``source`` as NVRTC compiles it (skips the test without a compiler)."""
    if CXX is None:
        pytest.skip("no C++ compiler")
    with tempfile.TemporaryDirectory() as d:
        p = f"{d}/device.cpp"
        with open(p, "w") as fh:
            fh.write(_DEVICE_STUB + source)
        return subprocess.run([CXX, "-fsyntax-only", p], capture_output=True, text=True, check=False)
