"""DeepGEMM's FP8 GEMM (``deep_gemm.fp8_gemm_nt``) on the GPU: its build, toolchain, import and call.

DeepGEMM (deepseek-ai/DeepGEMM, not code of this repository) travels unchanged in the git-ignored
folder ``.carry/deepgemm/DeepGEMM`` (or ``$WGREF_DEEPGEMM_DIR``): ``git archive`` of
:data:`DG_COMMIT` with its submodules' headers at ``third-party/cutlass/include`` (NVIDIA/cutlass
:data:`CUTLASS_COMMIT`) and ``third-party/fmt/include`` (fmtlib/fmt :data:`FMT_COMMIT`).  :func:`build`
runs its ``setup.py build_ext --inplace`` (no wheel download, no git: ``DG_USE_LOCAL_VERSION=0``,
``DG_FORCE_BUILD=1``) after pointing the compiler at CUDA's headers and libraries wherever this
machine has them (:func:`toolchain`: the toolkit under ``$CUDA_HOME`` or PyPI's ``nvidia/*``
packages), and links ``deep_gemm/include/{cute,cutlass}`` to the CUTLASS headers (:func:`link_cutlass`,
what DeepGEMM's ``develop.sh`` does; the JIT compiles kernels with ``-I deep_gemm/include``).

The call (DeepGEMM 2.6.1, SM90 path, :class:`DeepGEMM`): ``deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), d,
disable_ue8m0_cast=True)`` (an alias of ``fp8_fp4_gemm_nt``; default recipe (1, 128, 128)) with

* ``a`` (M, K) float8_e4m3fn, K-major, ``sfa`` (M, K/128) float32: one scale per row and 128 of K
  (``deep_gemm.utils.per_token_cast_to_fp8(x, use_ue8m0=False)``);
* ``b`` (N, K) float8_e4m3fn, K-major, ``sfb`` (ceil(N/128), K/128) float32: one scale per 128x128
  block (``per_block_cast_to_fp8(x, use_ue8m0=False)``);
* ``d`` (M, N) bfloat16.  DeepGEMM itself turns ``sfa`` into its MN-major, TMA-aligned layout
  (``get_mn_major_tma_aligned_tensor``); the scales fed to it are the logical ones.

Importing ``deep_gemm._C`` needs CUDA's libraries loaded globally first (:func:`preload`); what its
C++ prints goes to fd 1 (:func:`capture_fd1`); its JIT compiles one kernel per configuration into
``$DG_JIT_CACHE_DIR`` (:func:`jit_env` asks it to keep the PTX, SASS and the compiler commands).
gpu.record.deepgemm records it.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
DG_DIR = Path(os.environ.get("WGREF_DEEPGEMM_DIR", REPO / ".carry" / "deepgemm" / "DeepGEMM"))
DG_REPO = "deepseek-ai/DeepGEMM"
DG_COMMIT = "54e22612409371d6364144b69086735beb54e98b"      # 2026-06-23, __version__ 2.6.1
CUTLASS_COMMIT = "f3fde58372d33e9a5650ba7b80fc48b3b49d40c8"  # DeepGEMM's third-party/cutlass
FMT_COMMIT = "553ec11ec06fbe0beebfbb45f9dc3c9eabd83d28"      # DeepGEMM's third-party/fmt
FUNCTION = "deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), d, c=None, disable_ue8m0_cast=True)"
CASTS = ("deep_gemm.utils.per_token_cast_to_fp8(a_bf16, use_ue8m0=False)",
         "deep_gemm.utils.per_block_cast_to_fp8(b_nk_bf16, use_ue8m0=False)")


# ----------------------------------------------------------------------------- toolchain


def _site_dirs() -> list[Path]:
    out = []
    for p in [*sys.path, sysconfig.get_paths().get("purelib", ""), sysconfig.get_paths().get("platlib", "")]:
        if p and Path(p).is_dir() and Path(p) not in out:
            out.append(Path(p))
    return out


def cuda_major() -> str:
    """CUDA major version of this torch (what its libraries and DeepGEMM's link must match)."""
    try:
        import torch

        return (torch.version.cuda or "13").split(".")[0]
    except Exception:
        return "13"


def _nvidia_dirs(kind: str) -> list[Path]:
    """``include`` or ``lib`` folders of PyPI's nvidia-* packages (nvidia/cu13/lib, nvidia/cublas/lib, ...),
    those of torch's CUDA major (``cu13``) first."""
    found = []
    for sp in _site_dirs():
        for pat in (f"nvidia/*/{kind}", f"nvidia/*/*/{kind}"):
            for d in sorted(glob.glob(str(sp / pat))):
                if Path(d) not in found:
                    found.append(Path(d))
    tag = f"cu{cuda_major()}"
    return sorted(found, key=lambda d: tag not in d.parts)


def cuda_home() -> str:
    """$CUDA_HOME, else the folder above the nvcc on PATH, else /usr/local/cuda (torch's order);
    a guess without include/cuda.h gives way to /usr/local/cuda."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if not home:
        nvcc = shutil.which("nvcc")
        home = str(Path(nvcc).resolve().parent.parent) if nvcc else "/usr/local/cuda"
        if not (Path(home) / "include" / "cuda.h").exists() and Path("/usr/local/cuda/include/cuda.h").exists():
            home = "/usr/local/cuda"
    return home


def _find_lib(home: str, name: str) -> list[Path]:
    """Files of lib``name``.so* in the toolkit first, then in PyPI's nvidia packages."""
    dirs = [Path(home) / "lib64", Path(home) / "lib", Path(home) / "targets" / "x86_64-linux" / "lib",
            *_nvidia_dirs("lib")]
    out = []
    for d in dirs:
        for f in sorted(glob.glob(str(d / f"lib{name}.so*"))):
            if ".alt." not in f and Path(f) not in out:
                out.append(Path(f))
    major = cuda_major()
    # unversioned or this CUDA major's first (a stable sort keeps the toolkit before PyPI's)
    return sorted(out, key=lambda f: not (f.name == f"lib{name}.so" or f.name.startswith(f"lib{name}.so.{major}")))


def toolchain(scratch: Path, log=print) -> tuple[dict, dict]:
    """Environment for building and running DeepGEMM on this machine: (env updates, what was found).

    DeepGEMM includes ``nvrtc.h`` and ``cublasLt.h`` and links ``-lcudart -lnvrtc`` from
    ``$CUDA_HOME``; a toolkit assembled from PyPI wheels keeps some of them under
    ``site-packages/nvidia/*`` and has no unversioned ``.so``: those folders go to CPATH, and
    links named lib*.so (in ``scratch``) go to LIBRARY_PATH.  The JIT runs ``$CUDA_HOME/bin/nvcc``
    and ``$CUDA_HOME/bin/cuobjdump``; a missing cuobjdump found on PATH gets a shadow CUDA_HOME."""
    home = cuda_home()
    env = {"CUDA_HOME": home}
    info = {"cuda_home": home, "nvcc": str(Path(home) / "bin" / "nvcc"),
            "nvcc_exists": (Path(home) / "bin" / "nvcc").exists()}
    cpath = []
    # DeepGEMM's own (nvrtc.h, cublasLt.h) and those of torch's ATen/cuda headers it includes
    for h in ("cuda.h", "cuda_runtime.h", "nvrtc.h", "cublasLt.h", "cublas_v2.h", "cusparse.h", "cusolverDn.h",
              "cusolver_common.h"):
        where = None
        for d in [Path(home) / "include", *_nvidia_dirs("include")]:
            if (d / h).exists():
                where = d
                break
        info[f"header {h}"] = str(where) if where else None
        if where and where != Path(home) / "include" and str(where) not in cpath:
            cpath.append(str(where))
    linkdir = scratch / "linklib"
    linkdir.mkdir(parents=True, exist_ok=True)
    ldpath = []
    for lib in ("cudart", "nvrtc", "cublasLt"):
        files = _find_lib(home, lib)
        info[f"lib {lib}"] = [str(f) for f in files[:4]]
        if files and not any(f.name == f"lib{lib}.so" for f in files):
            versioned = files[0]  # this CUDA major's, by _find_lib's order
            link = linkdir / f"lib{lib}.so"
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(versioned)
        for f in files:
            if str(f.parent) not in ldpath:
                ldpath.append(str(f.parent))
    def joined(first, var):
        return os.pathsep.join(first + [p for p in os.environ.get(var, "").split(os.pathsep) if p])

    if cpath:
        env["CPATH"] = joined(cpath, "CPATH")
    env["LIBRARY_PATH"] = joined([str(linkdir)] + ldpath, "LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = joined(ldpath, "LD_LIBRARY_PATH")
    cuobj = Path(home) / "bin" / "cuobjdump"
    info["cuobjdump"] = str(cuobj) if cuobj.exists() else shutil.which("cuobjdump")
    if not cuobj.exists() and info["cuobjdump"]:
        shadow = scratch / "cuda_home"
        (shadow / "bin").mkdir(parents=True, exist_ok=True)
        for nm, target in (("cuobjdump", info["cuobjdump"]), ("nvcc", str(Path(home) / "bin" / "nvcc"))):
            p = shadow / "bin" / nm
            if not p.exists():
                p.symlink_to(target)
        for sub in ("include", "lib64", "nvvm"):
            if (Path(home) / sub).exists() and not (shadow / sub).exists():
                (shadow / sub).symlink_to(Path(home) / sub)
        env["CUDA_HOME"] = str(shadow)
        env["DG_JIT_NVCC_COMPILER"] = str(Path(home) / "bin" / "nvcc")  # the real one, by its own path
        info["shadow_cuda_home"] = str(shadow)
    for k, v in info.items():
        log(f"  {k}: {v}")
    return env, info


def _cxx20_needed() -> bool:
    """Whether this torch's headers refuse C++17 (torch >= 2.14); DeepGEMM's setup.py pins -std=c++17."""
    try:
        from torch.utils.cpp_extension import include_paths

        for d in include_paths():
            for rel in ("ATen/ATen.h", "torch/csrc/api/include/torch/all.h"):
                p = Path(d) / rel
                if p.exists() and "C++20 or later" in p.read_text(errors="replace"):
                    return True
    except Exception:
        pass
    return False


def link_cutlass(dg: Path) -> None:
    """deep_gemm/include/{cute,cutlass} -> third-party/cutlass/include/... (DeepGEMM's develop.sh)."""
    for sub in ("cute", "cutlass"):
        dst = dg / "deep_gemm" / "include" / sub
        src = dg / "third-party" / "cutlass" / "include" / sub
        if not src.is_dir():
            raise FileNotFoundError(f"{src} is missing: export NVIDIA/cutlass@{CUTLASS_COMMIT} include/ there")
        if not dst.exists():
            if dst.is_symlink():
                dst.unlink()
            dst.symlink_to(src.resolve(), target_is_directory=True)


def build(dg: Path) -> int:
    """``setup.py build_ext --inplace`` in ``dg``: writes deep_gemm/_C*.so.  Prints everything."""
    t0 = time.time()
    print(f"DeepGEMM at {dg}", flush=True)
    import torch
    from torch.utils import cpp_extension

    print(f"python {sys.version.split()[0]} torch {torch.__version__} cuda {torch.version.cuda} "
          f"torch CUDA_HOME {cpp_extension.CUDA_HOME}", flush=True)
    scratch = Path(tempfile.gettempdir()) / "wgref_deepgemm"
    env_up, _ = toolchain(scratch)
    for tool in (str(Path(env_up.get("DG_JIT_NVCC_COMPILER", Path(env_up["CUDA_HOME"]) / "bin" / "nvcc"))), "g++"):
        try:
            out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=60).stdout
            lines = out.strip().splitlines() or ["?"]
            print(f"{tool}: {lines[0] if tool == 'g++' else lines[-1]}", flush=True)
        except Exception as e:
            print(f"{tool}: {e}", flush=True)
    link_cutlass(dg)
    setup = dg / "setup.py"
    text = setup.read_text()
    if _cxx20_needed() and "'-std=c++17'" in text:
        setup.write_text(text.replace("'-std=c++17'", "'-std=c++20'"))
        print("torch needs C++20: setup.py's -std=c++17 -> -std=c++20", flush=True)
    text = setup.read_text()
    wheel_import = "from wheel.bdist_wheel import bdist_wheel as _bdist_wheel"
    try:
        import importlib

        importlib.import_module("wheel.bdist_wheel")
    except Exception as e:  # a wheel without its old bdist_wheel module: setuptools (>= 70.1) has it
        if wheel_import in text:
            setup.write_text(text.replace(wheel_import, "try:\n    " + wheel_import + "\nexcept ImportError:\n"
                                          "    from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel"))
            print(f"wheel.bdist_wheel not importable ({e}): setup.py takes setuptools' bdist_wheel", flush=True)
    env = dict(os.environ, **env_up, DG_USE_LOCAL_VERSION="0", DG_FORCE_BUILD="1", DG_SKIP_CUDA_BUILD="0")
    env.setdefault("MAX_JOBS", str(os.cpu_count() or 4))
    cc = (sysconfig.get_config_var("CC") or "gcc").split()[0]
    # The compiler on PATH, always: on the H200 image Python's sysconfig names /opt/gcc/bin/gcc, and the
    # extension it built crashed on the first fp8_gemm_nt call inside std::regex (DeepGEMM's JIT include
    # parser): its locale facets did not match the libstdc++ the process loads (cuda-gdb backtrace in
    # docs/data/deepgemm_h200_attempt.txt).  The system g++ matches the system libstdc++.
    cxx = os.environ.get("WGREF_DG_CXX", "g++")
    env.update(CC=os.environ.get("WGREF_DG_CC", "gcc"), CXX=cxx, LDSHARED=f"{cxx} -shared")
    print(f"sysconfig CC {cc!r}; building with CC={env['CC']} CXX={cxx} ({shutil.which(cxx)})", flush=True)
    cmd = [sys.executable, "setup.py", "build_ext", "--inplace"]
    print("+ " + " ".join(cmd), flush=True)
    rc = subprocess.call(cmd, cwd=dg, env=env)
    sos = sorted(glob.glob(str(dg / "deep_gemm" / "_C*.so")))
    print(f"build rc={rc} in {time.time() - t0:.0f}s; extension: {sos or 'MISSING'}", flush=True)
    return 0 if rc == 0 and sos else (rc or 1)


# ----------------------------------------------------------------------------- running it


def preload(home: str, cuda_major: str, log=print) -> dict:
    """Load libcudart / libnvrtc / libcublasLt globally before importing deep_gemm._C (it needs
    ``libnvrtc.so.<major>`` and takes cuBLASLt's symbols from the process): by soname first
    (already loaded by torch, or on the loader's path), else by a path from :func:`_find_lib`."""
    got = {}
    for lib in ("cudart", "nvrtc", "cublasLt"):
        soname = f"lib{lib}.so.{cuda_major}"
        try:
            ctypes.CDLL(soname, mode=ctypes.RTLD_GLOBAL)
            got[lib] = soname
            continue
        except OSError:
            pass
        for f in _find_lib(home, lib):
            if f.name.startswith(soname) or f.name == f"lib{lib}.so":
                try:
                    ctypes.CDLL(str(f), mode=ctypes.RTLD_GLOBAL)
                    got[lib] = str(f)
                    break
                except OSError as e:
                    got[lib] = f"failed: {e}"
        got.setdefault(lib, None)
    log(f"preloaded: {got}")
    return got


@contextlib.contextmanager
def capture_fd1(sink: list, path: Path):
    """Capture what C/C++ prints to fd 1 (DeepGEMM's printf / std::cout) into ``sink`` (appended)
    and echo it.  It goes through the file ``path`` (appended to), so a crash inside still leaves it."""
    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    libc.fflush(None)
    with open(path, "ab") as f:
        start = f.tell()
        saved = os.dup(1)
        os.dup2(f.fileno(), 1)
        try:
            yield
        finally:
            sys.stdout.flush()
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
    with open(path, "rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    sink.append(text)
    sys.stdout.write(text if len(text) < 20000 else text[:10000] + "\n[...]\n" + text[-10000:])
    sys.stdout.flush()


def versions() -> dict:
    """Versions of python, numpy, torch and its CUDA, the GPU, the driver, ml_dtypes (those found)."""
    v = {"python": sys.version.split()[0], "numpy": np.__version__}
    try:
        import torch

        v.update(torch=torch.__version__, torch_cuda=torch.version.cuda)
        v["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
        v["driver"] = None
        try:
            r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=30)
            v["driver"] = r.stdout.strip() or None
        except Exception:
            pass
    except Exception:
        pass
    try:
        import ml_dtypes

        v["ml_dtypes"] = ml_dtypes.__version__
    except Exception:
        pass
    return v


def nvcc_version(home: str) -> str | None:
    try:
        out = subprocess.run([str(Path(home) / "bin" / "nvcc"), "--version"], capture_output=True, text=True,
                             timeout=60).stdout
        m = re.search(r"release [^\n]*", out)
        return m.group(0) if m else out.strip()[-200:]
    except Exception:
        return None


def jit_env(cache: Path) -> dict:
    """DeepGEMM's JIT settings for a recording: its cache in ``cache`` (one ``cache/kernel.*`` folder per
    kernel), debug output, printed configurations and compiler commands, SASS and PTX kept."""
    return dict(DG_JIT_CACHE_DIR=str(cache), DG_JIT_DEBUG="1", DG_PRINT_CONFIGS="1",
                DG_JIT_PRINT_COMPILER_COMMAND="1", DG_JIT_DUMP_SASS="1", DG_JIT_DUMP_PTX="1")


class DeepGEMM:
    """``deep_gemm`` imported from the source folder ``dg`` (built in place by :func:`build`; CUDA's
    libraries preloaded, :func:`preload`): its FP8 casts and its FP8 GEMM on CUDA torch tensors."""

    def __init__(self, dg: Path):
        if str(dg) not in sys.path:
            sys.path.insert(0, str(dg))
        import deep_gemm
        from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

        self.module = deep_gemm
        self._per_token, self._per_block = per_token_cast_to_fp8, per_block_cast_to_fp8

    def info(self) -> dict:
        """Its version, file, SM count, tensor-core utilisation and PDL settings."""
        dg = self.module
        info = {"version": getattr(dg, "__version__", None), "file": dg.__file__}
        for attr in ("get_num_sms", "get_tc_util", "get_pdl"):
            try:
                info[attr] = getattr(dg, attr)()
            except Exception as e:
                info[attr] = f"{type(e).__name__}: {e}"
        return info

    def cast(self, a: np.ndarray, b: np.ndarray):
        """a (M, K) and b (K, N) bf16 (ml_dtypes) to the GPU, b as b.T (N, K), through DeepGEMM's casts:
        ``(a8, sfa, b8, sfb)`` torch tensors (per token and per 128x128 block, no UE8M0)."""
        import torch

        dev = torch.device("cuda")
        a_t = torch.from_numpy(a.view(np.int16).copy()).to(dev).view(torch.bfloat16)
        bt_t = torch.from_numpy(np.ascontiguousarray(b.T).view(np.int16)).to(dev).view(torch.bfloat16)
        a8, sfa = self._per_token(a_t, use_ue8m0=False)
        b8, sfb = self._per_block(bt_t, use_ue8m0=False)
        return a8, sfa, b8, sfb

    @staticmethod
    def on_host(a8, sfa, b8, sfb) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """What :meth:`cast` made, on the host: FP8 codes (uint8) of a and b, float32 scales."""
        import torch

        return (a8.view(torch.uint8).cpu().numpy(), b8.view(torch.uint8).cpu().numpy(),
                sfa.float().contiguous().cpu().numpy(), sfb.float().contiguous().cpu().numpy())

    def fp8_gemm_nt(self, a8, sfa, b8, sfb) -> tuple[np.ndarray, float]:
        """``deep_gemm.fp8_gemm_nt((a8, sfa), (b8, sfb), d, c=None, disable_ue8m0_cast=True)`` into a new
        bf16 d (M, N) filled with 0xFFFF (a NaN) first: (d's bits as uint16, seconds of the call)."""
        import torch

        d = torch.empty((a8.shape[0], b8.shape[0]), dtype=torch.bfloat16, device=a8.device)
        d.view(torch.int16).fill_(-1)  # 0xFFFF sentinel (a NaN)
        t0 = time.time()
        self.module.fp8_gemm_nt((a8, sfa), (b8, sfb), d, c=None, disable_ue8m0_cast=True)
        torch.cuda.synchronize()
        secs = time.time() - t0
        return d.view(torch.int16).cpu().numpy().view(np.uint16).copy(), secs
