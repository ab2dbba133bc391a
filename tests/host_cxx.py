"""The host C++ compiler of the host-build tests, their skip marker, and a syntax check of device source
(the ``__CUDACC_RTC__`` branch, CUDA's keywords and thread indices stubbed) with that compiler; nvcc, its
skip marker, and an sm_90a assembly of a kernel source (ptxas's report in stderr)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile

import pytest

CXX = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler")
NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not installed (CUDA toolkit)")

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


def assemble_sm90a(source: str, tmp_path) -> subprocess.CompletedProcess:
    """``nvcc -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v`` on ``runtime.PRELUDE + source`` in
    ``tmp_path`` (returncode, and ptxas's registers / spills / warnings in stderr)."""
    from gpu.kernels.runtime import PRELUDE

    src = tmp_path / "k.cu"
    src.write_text(PRELUDE + source)
    return subprocess.run([NVCC or "nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-Xptxas", "-v",
                           "-o", str(tmp_path / "k.cubin"), str(src)], capture_output=True, text=True, check=False)
