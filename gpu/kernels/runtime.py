"""Device discovery and NVRTC compilation for sm_90a (cupy imported lazily).

``compile_module(src)`` compiles CUDA C++ with inline PTX for ``sm_90a`` with NVRTC itself
(``cupy_backends.cuda.libs.nvrtc``) and loads the cubin with ``cupy.RawModule(path=...)``: cupy's own
compile path appends ``-ftz=true`` to every option list, which makes each float32 ``*``, ``+``,
``__fmaf_rn`` and double-to-float conversion of the C++ flush subnormal results to zero (the H200's SASS
showed ``FFMA.FTZ`` in the FP8 GEMM's promotion), while refmodel keeps subnormals; so wgref passes exactly
``NVRTC_OPTIONS`` (``-ftz=false`` stated).  Cubins are cached in memory and on disk
(``$WGREF_CACHE_DIR``, default ``~/.cache/wgref/cubin``, keyed by the source, the options and the NVRTC
version), so a source compiles once per machine.  Every failure to find a usable device is one
:class:`DeviceError` line saying what is missing.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from typing import Any

from refmodel.errors import DeviceError

NVRTC_OPTIONS = ("-arch=sm_90a", "-std=c++17", "-ftz=false")   # IEEE subnormals in float32 C++ arithmetic

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


_PROBE_LOCK = threading.Lock()


def _probe() -> tuple[bool, str]:
    # one probe per process, under a lock: threads that compile kernels at once (the campaigns'
    # precompile) each raced through CUDA's first initialisation, and one of them could see no device
    # (bench_fuzz --mixed-only on the H200, 2026-12-02)
    with _PROBE_LOCK:
        return _probe_once()


@functools.lru_cache(maxsize=1)
def _probe_once() -> tuple[bool, str]:
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


@functools.lru_cache(maxsize=1)
def _nvrtc_version() -> str:
    try:
        return ".".join(map(str, _import_cupy().cuda.nvrtc.getVersion()))
    except Exception:
        return "unknown"


def device_info() -> dict[str, Any]:
    """Provenance of the device for fixture manifests (name, driver, CUDA, NVRTC, cupy)."""
    cp = require_device()
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    drv = cp.cuda.runtime.driverGetVersion()
    rt = cp.cuda.runtime.runtimeGetVersion()
    info = {
        "device": name,
        "compute_capability": cp.cuda.Device(0).compute_capability,
        "cuda_driver_api": drv,
        "cuda_runtime": rt,
        "nvrtc": _nvrtc_version(),
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


def max_active_clusters(function, threads: int, smem_bytes: int, cluster: int) -> int | None:
    """How many clusters of ``cluster`` CTAs of ``function`` (a compiled cupy kernel whose cluster
    size is fixed by ``__cluster_dims__``; ``threads`` per CTA, ``smem_bytes`` of dynamic shared memory)
    the device can hold at once: the driver's ``cuOccupancyMaxActiveClusters``.  ``None`` when the
    driver cannot say."""
    import ctypes

    class _LaunchConfig(ctypes.Structure):
        _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("smem", ctypes.c_uint),
                    ("stream", ctypes.c_void_p), ("attrs", ctypes.c_void_p), ("num_attrs", ctypes.c_uint)]

    try:
        lib = ctypes.CDLL("libcuda.so.1")
        fn = lib.cuOccupancyMaxActiveClusters
        fn.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.POINTER(_LaunchConfig)]
        fn.restype = ctypes.c_int
        cfg = _LaunchConfig((ctypes.c_uint * 3)(cluster, 1, 1), (ctypes.c_uint * 3)(threads, 1, 1), smem_bytes,
                            None, None, 0)
        n = ctypes.c_int(0)
        rc = fn(ctypes.byref(n), ctypes.c_void_p(int(function.ptr)), ctypes.byref(cfg))
    except Exception:
        return None
    return int(n.value) if rc == 0 and n.value > 0 else None


_MODULES: dict[str, Any] = {}


class CompileError(DeviceError):
    """NVRTC refused a kernel source (the message carries NVRTC's log)."""


def cache_dir() -> "Path":
    """Where compiled cubins are kept: ``$WGREF_CACHE_DIR`` or ``~/.cache/wgref/cubin``."""
    import os
    from pathlib import Path

    return Path(os.environ.get("WGREF_CACHE_DIR") or Path.home() / ".cache" / "wgref" / "cubin")


def nvrtc_cubin(code: str, options: tuple[str, ...] = NVRTC_OPTIONS) -> bytes:
    """The sm_90a cubin NVRTC makes of ``code`` with exactly ``options`` (nothing appended)."""
    require_device()
    from cupy_backends.cuda.libs import nvrtc

    prog = nvrtc.createProgram(code, "wgref_kernel.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(prog, list(options))
        except Exception as e:
            try:
                log = nvrtc.getProgramLog(prog)
            except Exception:
                log = ""
            raise CompileError(f"NVRTC could not compile the kernel ({e}): {log.strip()[:4000]}") from None
        return bytes(nvrtc.getCUBIN(prog))
    finally:
        nvrtc.destroyProgram(prog)


def compile_module(src: str, *, options: tuple[str, ...] = NVRTC_OPTIONS, ffma_yield: int = 0):
    """Compile ``PRELUDE + src`` for sm_90a with exactly ``options``; cached in memory and on disk
    (:func:`cache_dir`).  ``ffma_yield`` > 0 applies :func:`gpu.kernels.sass.ffma_yield` to the cubin
    (scheduling bits only).  Returns a ``cupy.RawModule`` (``get_function``, ``get_global``)."""
    import os

    cp = require_device()
    code = PRELUDE + src
    tag = f"|ffma_yield={ffma_yield}" if ffma_yield else ""
    key = hashlib.sha256((code + repr(options) + _nvrtc_version() + tag).encode()).hexdigest()
    if key not in _MODULES:
        d = cache_dir()
        path = d / f"{key}.cubin"
        if not path.exists():
            cubin = nvrtc_cubin(code, options)
            if ffma_yield:
                from gpu.kernels.sass import ffma_yield as _rewrite

                cubin, _ = _rewrite(cubin, ffma_yield)
            d.mkdir(parents=True, exist_ok=True)
            tmp = d / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"   # one per process and thread
            tmp.write_bytes(cubin)
            os.replace(tmp, path)      # atomic: concurrent compilers of one source write the same bytes
        _MODULES[key] = cp.RawModule(path=str(path))
    return _MODULES[key]


def _compile_one(src: str) -> None:
    compile_module(src)


def compile_in_processes(sources: list[str], workers: int, *, chunksize: int = 4) -> float:
    """Compile many kernel sources with NVRTC in a pool of ``workers`` spawned processes (CUDA may be
    live in the caller: no fork), filling the on-disk cubin cache (:func:`cache_dir`) so that later
    launches only load them; returns the seconds it took."""
    import multiprocessing as mp
    import time
    from concurrent.futures import ProcessPoolExecutor

    t0 = time.time()
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
        list(ex.map(_compile_one, sources, chunksize=chunksize))
    return time.time() - t0
