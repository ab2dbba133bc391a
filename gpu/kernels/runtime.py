"""Device discovery and NVRTC compilation for sm_90a (cupy imported lazily).

``compile_module(src)`` compiles CUDA C++ with inline PTX for ``sm_90a`` through
``cupy.RawModule``; cupy keeps an on-disk cache of compiled cubins
(``~/.cupy/kernel_cache`` or ``$CUPY_CACHE_DIR``), so a source compiles once per
machine.  Every failure to find a usable device is one :class:`DeviceError` line
saying what is missing.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

from refmodel.errors import DeviceError

NVRTC_OPTIONS = ("-arch=sm_90a", "-std=c++17")

# typedefs instead of <cstdint>: NVRTC ships no C++ standard headers
PRELUDE = r"""
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef int i32;
typedef long long i64;
"""


def _import_cupy():
    try:
        import cupy  # noqa: F401
    except Exception as e:  # ImportError, or a broken CUDA install
        raise DeviceError(
            "cupy is not installed: pip install 'wgref[gpu-cu13]' (CUDA 13) or "
            f"'wgref[gpu-cu12]' (CUDA 12), then run on a machine with a Hopper GPU ({e.__class__.__name__})"
        ) from None
    return cupy


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[bool, str]:
    try:
        cp = _import_cupy()
    except DeviceError as e:
        return False, str(e)
    try:
        if not cp.is_available():
            return False, "no CUDA device or driver is visible to cupy: run on a machine with an H100/H200 GPU"
        cc = cp.cuda.Device(0).compute_capability
    except Exception as e:
        return False, f"CUDA device unusable ({e.__class__.__name__}: {e}): run on a machine with an H100/H200 GPU"
    if cc != "90":
        return False, f"device 0 has compute capability {cc[0]}.{cc[1:]}, wgref needs 9.0 (H100/H200, sm_90a)"
    return True, "ok"


def gpu_available() -> bool:
    """True when cupy sees a compute-capability 9.0 device."""
    return _probe()[0]


def require_device():
    """Return the cupy module, or raise :class:`DeviceError` saying what is missing."""
    ok, why = _probe()
    if not ok:
        raise DeviceError(why)
    return _import_cupy()


def device_count() -> int:
    """How many CUDA devices this process sees (``CUDA_VISIBLE_DEVICES`` applied)."""
    cp = require_device()
    return int(cp.cuda.runtime.getDeviceCount())


def fault_illegal_address() -> None:
    """Launch a kernel that stores through a null pointer and synchronise: the context is lost
    (cudaErrorIllegalAddress) and this process can no longer use the GPU.  For testing that a
    campaign survives a faulting worker (``wgref fuzz --inject-fault``)."""
    cp = require_device()
    k = cp.RawKernel(r'extern "C" __global__ void wgref_fault(int *p) { p[threadIdx.x] = 1; }', "wgref_fault")
    k((1,), (32,), (cp.uint64(0),))
    cp.cuda.runtime.deviceSynchronize()
    raise DeviceError("the planted illegal-address launch did not fault")


def device_info() -> dict[str, Any]:
    """Provenance of the device for fixture manifests (name, driver, CUDA, NVRTC, cupy)."""
    cp = require_device()
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    drv = cp.cuda.runtime.driverGetVersion()
    rt = cp.cuda.runtime.runtimeGetVersion()
    try:
        nvrtc = ".".join(map(str, cp.cuda.nvrtc.getVersion()))
    except Exception:
        nvrtc = "unknown"
    info = {
        "device": name,
        "compute_capability": cp.cuda.Device(0).compute_capability,
        "cuda_driver_api": drv,
        "cuda_runtime": rt,
        "nvrtc": nvrtc,
        "cupy": cp.__version__,
    }
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        info["driver"] = out.stdout.strip().splitlines()[0]
    except Exception:
        info["driver"] = "unknown"
    return info


_MODULES: dict[str, Any] = {}


def compile_module(src: str, *, options: tuple[str, ...] = NVRTC_OPTIONS):
    """Compile ``PRELUDE + src`` for sm_90a; cached in memory and by cupy on disk."""
    cp = require_device()
    code = PRELUDE + src
    key = hashlib.sha256((code + repr(options)).encode()).hexdigest()
    if key not in _MODULES:
        mod = cp.RawModule(code=code, options=options)
        mod.compile()
        _MODULES[key] = mod
    return _MODULES[key]


def _compile_one(src: str) -> None:
    compile_module(src)


def compile_in_processes(sources: list[str], workers: int, *, chunksize: int = 4) -> float:
    """Compile many kernel sources with NVRTC in a pool of ``workers`` spawned processes (CUDA may be
    live in the caller: no fork), filling cupy's on-disk kernel cache so that later launches only load
    them; returns the seconds it took."""
    import multiprocessing as mp
    import time
    from concurrent.futures import ProcessPoolExecutor

    t0 = time.time()
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
        list(ex.map(_compile_one, sources, chunksize=chunksize))
    return time.time() - t0
