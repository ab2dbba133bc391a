"""Record DeepGEMM's FP8 GEMM (``deep_gemm.fp8_gemm_nt``) on the H200, for refmodel's DeepGEMM model.

    python -m gpu.record_deepgemm --build [--dg DIR]      # GPU machine: build DeepGEMM's extension in place
    python -m gpu.record_deepgemm --explore OUT [--dg DIR] # GPU: run every shape, save inputs/scales/outputs
    python -m gpu.record_deepgemm --compare OUT            # CPU: compare OUT with refmodel.numerics.gemm

DeepGEMM (deepseek-ai/DeepGEMM, not code of this repository) travels unchanged in the git-ignored
folder ``.carry/deepgemm/DeepGEMM`` (or ``$WGREF_DEEPGEMM_DIR``): ``git archive`` of
:data:`DG_COMMIT` with its submodules' headers at ``third-party/cutlass/include`` (NVIDIA/cutlass
:data:`CUTLASS_COMMIT`) and ``third-party/fmt/include`` (fmtlib/fmt :data:`FMT_COMMIT`).  ``--build``
runs its ``setup.py build_ext --inplace`` (no wheel download, no git: ``DG_USE_LOCAL_VERSION=0``,
``DG_FORCE_BUILD=1``) after pointing the compiler at CUDA's headers and libraries wherever this
machine has them (the toolkit under ``$CUDA_HOME`` or PyPI's ``nvidia/*`` packages), and links
``deep_gemm/include/{cute,cutlass}`` to the CUTLASS headers (what DeepGEMM's ``develop.sh`` does;
the JIT compiles kernels with ``-I deep_gemm/include``).

The call (DeepGEMM 2.6.1, SM90 path): ``deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), d,
disable_ue8m0_cast=True)`` (an alias of ``fp8_fp4_gemm_nt``; default recipe (1, 128, 128)) with

* ``a`` (M, K) float8_e4m3fn, K-major, ``sfa`` (M, K/128) float32: one scale per row and 128 of K
  (``deep_gemm.utils.per_token_cast_to_fp8(x, use_ue8m0=False)``);
* ``b`` (N, K) float8_e4m3fn, K-major, ``sfb`` (ceil(N/128), K/128) float32: one scale per 128x128
  block (``per_block_cast_to_fp8(x, use_ue8m0=False)``);
* ``d`` (M, N) bfloat16.  DeepGEMM itself turns ``sfa`` into its MN-major, TMA-aligned layout
  (``get_mn_major_tma_aligned_tensor``); the scales recorded here are the logical ones fed to it.

Its kernel (``sm90_fp8_gemm_1d2d_impl``): per 128 of K, ``BLOCK_K / 32 = 4`` SS wgmma
``m64nNk32.f32.e4m3.e4m3`` chained in the tensor core (the first with scale-d = 0); then
``final_accum += (scale_a * scale_b) * accum`` in float32 on the CUDA cores (FMUL, then FFMA with
nvcc's default -fmad=true); at the end ``__float22bfloat162_rn`` and a TMA store.  refmodel's
``refmodel.numerics.gemm.gemm(..., promote_every=4, promote_op="fma", out_dtype="bf16")`` is the
model; ``--compare`` checks it against what was recorded.

Inputs are bf16 matrices drawn on the host with numpy (``refmodel.verify.seeded.library_matrices``,
seed and exponent range per shape, sha256 kept); DeepGEMM's own cast helpers make the FP8 codes and
scales on the GPU, and both are recorded as fed (the CPU never redoes the cast).

Files written under OUT: ``deepgemm.npz`` (per shape ``NAME.a`` (M, K) and ``NAME.b`` (N, K) FP8
codes uint8, ``NAME.sfa`` (M, K/128) and ``NAME.sfb`` (ceil(N/128), K/128) float32, ``NAME.d`` (M, N)
bf16 bits uint16), ``deepgemm.json`` (shapes, seeds, sha256, versions, DeepGEMM's printed
configuration / JIT log, PTX / SASS instruction counts, quick numpy checks), ``deepgemm_jit.tar.gz``
(every JIT kernel's ``kernel.cu``, PTX, cubin and SASS), ``deepgemm_stdout.log`` (what DeepGEMM's C++
printed: configurations, nvcc commands, launches).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DG_DIR = Path(os.environ.get("WGREF_DEEPGEMM_DIR", REPO / ".carry" / "deepgemm" / "DeepGEMM"))
DG_REPO = "deepseek-ai/DeepGEMM"
DG_COMMIT = "54e22612409371d6364144b69086735beb54e98b"      # 2026-06-23, __version__ 2.6.1
CUTLASS_COMMIT = "f3fde58372d33e9a5650ba7b80fc48b3b49d40c8"  # DeepGEMM's third-party/cutlass
FMT_COMMIT = "553ec11ec06fbe0beebfbb45f9dc3c9eabd83d28"      # DeepGEMM's third-party/fmt
FUNCTION = "deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), d, c=None, disable_ue8m0_cast=True)"
CASTS = ("deep_gemm.utils.per_token_cast_to_fp8(a_bf16, use_ue8m0=False)",
         "deep_gemm.utils.per_block_cast_to_fp8(b_nk_bf16, use_ue8m0=False)")

# (name, M, N, K, seed, exp_range): a (M, K) and b (K, N) bf16 from
# library_matrices(seed, "bf16", M, N, K, exp_range=exp_range); DeepGEMM gets b.T (N, K).
# exp_range (0, 1): plain standard normals (DeepGEMM's own tests use torch.randn); (-3, 4): each
# element times 2**e, e in -3..3, so the per-row/per-block casts also make small and subnormal e4m3.
# Ordered by value: a device call that runs out of time keeps the earlier ones.
SHAPES = [
    ("dg_128x256x1024", 128, 256, 1024, 9100, (0, 1)),
    ("dg_256x512x2048_wide", 256, 512, 2048, 9101, (-3, 4)),
    ("dg_64x128x4096", 64, 128, 4096, 9102, (0, 1)),
    ("dg_128x576x7168", 128, 576, 7168, 9103, (0, 1)),        # DeepSeek's (576, 7168); N % 128 = 64
    ("dg_100x384x1536_wide", 100, 384, 1536, 9104, (-3, 4)),  # M not a multiple of 64
]


def inputs(seed: int, m: int, n: int, k: int, exp_range) -> tuple[np.ndarray, np.ndarray]:
    """a (M, K) and b (K, N) bf16 (ml_dtypes) of one shape."""
    from refmodel.verify.seeded import library_matrices

    return library_matrices(seed, "bf16", m, n, k, exp_range=tuple(exp_range))


def _sha(x: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()


# ----------------------------------------------------------------------------- toolchain


def _site_dirs() -> list[Path]:
    out = []
    for p in [*sys.path, sysconfig.get_paths().get("purelib", ""), sysconfig.get_paths().get("platlib", "")]:
        if p and Path(p).is_dir() and Path(p) not in out:
            out.append(Path(p))
    return out


def _cuda_major() -> str:
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
    tag = f"cu{_cuda_major()}"
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
    major = _cuda_major()
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
    if not shutil.which(cc):  # a Python built elsewhere (clang, a toolchain path): use this machine's gcc
        env.update(CC="gcc", CXX="g++", LDSHARED="gcc -shared")
        print(f"sysconfig CC {cc!r} not found: CC=gcc CXX=g++", flush=True)
    cmd = [sys.executable, "setup.py", "build_ext", "--inplace"]
    print("+ " + " ".join(cmd), flush=True)
    rc = subprocess.call(cmd, cwd=dg, env=env)
    sos = sorted(glob.glob(str(dg / "deep_gemm" / "_C*.so")))
    print(f"build rc={rc} in {time.time() - t0:.0f}s; extension: {sos or 'MISSING'}", flush=True)
    return 0 if rc == 0 and sos else (rc or 1)


# ----------------------------------------------------------------------------- explore


def _preload(home: str, cuda_major: str, log=print) -> dict:
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
def _capture_fd1(sink: list, path: Path):
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


def _versions() -> dict:
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


def _nvcc_version(home: str) -> str | None:
    try:
        out = subprocess.run([str(Path(home) / "bin" / "nvcc"), "--version"], capture_output=True, text=True,
                             timeout=60).stdout
        m = re.search(r"release [^\n]*", out)
        return m.group(0) if m else out.strip()[-200:]
    except Exception:
        return None


def quick_check(a: np.ndarray, sfa: np.ndarray, b: np.ndarray, sfb: np.ndarray, d_bits: np.ndarray) -> dict:
    """Cheap numpy stand-ins for the kernel and how many bf16 outputs each matches: a sanity check
    of layouts and scales, NOT refmodel.  The wgmma chain's own rounding (its FP8 accumulator
    keeps fewer bits than float32) is replaced by the exact 128-long dot product rounded once to
    float32, so a few percent of outputs differ by a bf16 ulp even when all is right:
    ``fma``: acc = f32(f32(sa*sb) * P + acc) (computed in float64: rare double roundings),
    ``mul_add``: acc = f32(acc + f32(f32(sa*sb) * P)), ``exact``: the exact scaled sum -> bf16."""
    import ml_dtypes

    f8 = ml_dtypes.float8_e4m3fn
    M, K = a.shape
    N = b.shape[0]
    A = a.view(f8).astype(np.float64)
    B = b.view(f8).astype(np.float64)
    sb_cols = np.repeat(sfb.astype(np.float32), 128, axis=0)[:N]  # (N, Kb)
    acc_fma = np.zeros((M, N), np.float32)
    acc_ma = np.zeros((M, N), np.float32)
    exact = np.zeros((M, N), np.float64)
    with np.errstate(all="ignore"):
        for kb in range(K // 128):
            sl = slice(kb * 128, (kb + 1) * 128)
            P = A[:, sl] @ B[:, sl].T                      # exact in float64
            p32 = P.astype(np.float32)
            s = sfa[:, kb].astype(np.float32)[:, None] * sb_cols[:, kb][None, :]  # float32 RN
            acc_fma = (s.astype(np.float64) * p32.astype(np.float64) + acc_fma.astype(np.float64)).astype(np.float32)
            acc_ma = (acc_ma + (s * p32)).astype(np.float32)
            exact += sfa[:, kb].astype(np.float64)[:, None] * sb_cols[:, kb].astype(np.float64)[None, :] * P
    out = {}
    hw = d_bits.astype(np.int64)
    for nm, x in (("fma", acc_fma), ("mul_add", acc_ma), ("exact", exact.astype(np.float32))):
        mb = x.astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.int64)
        diff = np.abs(np.where(hw >= 0x8000, 0x8000 - hw, hw) - np.where(mb >= 0x8000, 0x8000 - mb, mb))
        out[nm] = {"match": int((mb == hw).sum()), "of": int(hw.size), "max_ulp": int(diff.max()) if diff.size else 0,
                   "off_by_1ulp": int((diff == 1).sum())}
    return out


_SASS_OPS = ("HGMMA", "FFMA", "FMUL", "FADD", "F2FP", "FSEL", "STSM", "UTMASTG", "UTMALDG")


def _sass_summary(text: str) -> dict:
    ops: dict[str, int] = {}
    hgmma: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)", line)
        if not m:
            continue
        full = m.group(1)
        base = full.split(".")[0]
        if base in _SASS_OPS:
            ops[base] = ops.get(base, 0) + 1
        if base == "HGMMA":
            hgmma[full] = hgmma.get(full, 0) + 1
    return {"ops": ops, "hgmma": hgmma}


def _ptx_summary(text: str) -> dict:
    """wgmma forms and the float32 arithmetic of the promotion / epilogue, counted in the PTX."""
    out: dict[str, int] = {}
    for pat in (r"wgmma\.mma_async[.\w]*", r"\b(?:fma|mul|add|sub)(?:\.r[nzmp])?(?:\.ftz)?(?:\.sat)?\.f32\b",
                r"\bcvt\.[\w.]*bf16[\w.]*"):
        for f in re.findall(pat, text):
            out[f] = out.get(f, 0) + 1
    return out


def _jit_dirs(cache: Path) -> set:
    return {p.name for p in (cache / "cache").glob("kernel.*")} if (cache / "cache").is_dir() else set()


def _jit_record(cache: Path, names) -> dict:
    rec = {}
    for nm in sorted(names):
        d = cache / "cache" / nm
        r = {"files": {p.name: p.stat().st_size for p in sorted(d.iterdir())}}
        cu = d / "kernel.cu"
        if cu.exists():
            r["kernel_cu"] = cu.read_text(errors="replace")
        sass = d / "kernel.sass"
        if sass.exists():
            r["sass"] = _sass_summary(sass.read_text(errors="replace"))
        ptx = d / "kernel.ptx"
        if ptx.exists():
            r["ptx"] = _ptx_summary(ptx.read_text(errors="replace"))
        rec[nm] = r
    return rec


def _write_jit_tar(cache: Path, path: Path, limit: int = 15 << 20) -> dict:
    tmp = path.with_suffix(".tmp")
    for with_sass in (True, False):
        with tarfile.open(tmp, "w:gz") as tf:
            for p in sorted((cache / "cache").glob("kernel.*/*")) if (cache / "cache").is_dir() else []:
                if p.name.endswith(".sass") and not with_sass:
                    continue
                tf.add(p, arcname=f"{p.parent.name}/{p.name}")
        if tmp.stat().st_size <= limit:
            break
    tmp.replace(path)
    return {"bytes": path.stat().st_size, "with_sass": with_sass}


def _save(out: Path, meta: dict, arrays: dict) -> None:
    tmp = out / "deepgemm.tmp.npz"
    np.savez_compressed(tmp, **arrays)
    tmp.replace(out / "deepgemm.npz")
    (out / "deepgemm.json").write_text(json.dumps(meta, indent=1, default=str))


def explore(out: Path, dg: Path, only=None, budget_s: float | None = None) -> int:
    """Run every shape of :data:`SHAPES` through DeepGEMM; write deepgemm.{npz,json} and the JIT tar."""
    t0 = time.time()
    out.mkdir(parents=True, exist_ok=True)
    (out / "deepgemm_stdout.log").unlink(missing_ok=True)
    meta = {"recorder": "gpu.record_deepgemm", "complete": False, "deepgemm": {
        "repo": DG_REPO, "commit": DG_COMMIT, "cutlass_commit": CUTLASS_COMMIT, "fmt_commit": FMT_COMMIT,
        "dir": str(dg)}, "function": FUNCTION, "casts": list(CASTS),
        "inputs": "refmodel.verify.seeded.library_matrices(seed, 'bf16', M, N, K, exp_range=exp_range); "
                  "DeepGEMM gets a (M, K) and b.T (N, K)",
        "layouts": {"a": "(M, K) e4m3 codes uint8, K-major", "b": "(N, K) e4m3 codes uint8, K-major",
                    "sfa": "(M, K/128) float32: sfa[m, kb] scales a[m, 128kb:128kb+128]",
                    "sfb": "(ceil(N/128), K/128) float32: sfb[nb, kb] scales b[128nb:128nb+128, 128kb:128kb+128]",
                    "d": "(M, N) bf16 bits uint16, row-major"},
        "shapes": []}
    arrays: dict[str, np.ndarray] = {}
    scratch = Path(tempfile.mkdtemp(prefix="wgref_dg_"))
    jit_cache = scratch / "jit"
    try:
        env_up, tc_info = toolchain(scratch)
        os.environ.update(env_up)
        os.environ.update(DG_JIT_CACHE_DIR=str(jit_cache), DG_JIT_DEBUG="1", DG_PRINT_CONFIGS="1",
                          DG_JIT_PRINT_COMPILER_COMMAND="1", DG_JIT_DUMP_SASS="1", DG_JIT_DUMP_PTX="1")
        meta["toolchain"] = tc_info
        meta["env"] = {k: os.environ.get(k) for k in sorted(os.environ) if k.startswith(("DG_", "CUDA_HOME"))}
        import torch

        meta["versions"] = _versions()
        meta["versions"]["nvcc"] = _nvcc_version(os.environ["CUDA_HOME"]) or _nvcc_version(cuda_home())
        meta["preload"] = _preload(cuda_home(), (torch.version.cuda or "13").split(".")[0])
        if str(dg) not in sys.path:
            sys.path.insert(0, str(dg))
        sink: list[str] = []
        with _capture_fd1(sink, out / "deepgemm_stdout.log"):
            import deep_gemm
            from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8
        meta["import_log"] = sink[-1][-20000:]
        meta["deepgemm"].update(version=getattr(deep_gemm, "__version__", None), file=deep_gemm.__file__)
        for attr in ("get_num_sms", "get_tc_util", "get_pdl"):
            try:
                meta["deepgemm"][attr] = getattr(deep_gemm, attr)()
            except Exception as e:
                meta["deepgemm"][attr] = f"{type(e).__name__}: {e}"
    except Exception as e:
        meta["error"] = f"{type(e).__name__}: {str(e)[:3000]}"
        meta["traceback"] = traceback.format_exc()[-6000:]
        print(f"setup/import FAILED: {meta['error']}", flush=True)
        traceback.print_exc()
        _save(out, meta, arrays)
        return 1
    print(f"deep_gemm {meta['deepgemm'].get('version')} imported from {meta['deepgemm'].get('file')} "
          f"({time.time() - t0:.1f}s); num_sms={meta['deepgemm'].get('get_num_sms')}", flush=True)

    dev = torch.device("cuda")
    for name, m, n, k, seed, er in SHAPES:
        if only and name not in only:
            continue
        rec = {"name": name, "M": m, "N": n, "K": k, "seed": seed, "exp_range": list(er)}
        meta["shapes"].append(rec)
        if budget_s is not None and time.time() - t0 > budget_s:
            rec.update(ok=False, error="skipped: out of time")
            print(f"{name}: skipped (out of time)", flush=True)
            continue
        t1 = time.time()
        before = _jit_dirs(jit_cache)
        sink = []
        try:
            a_np, b_np = inputs(seed, m, n, k, er)
            rec["a_bf16_sha256"], rec["b_bf16_sha256"] = _sha(a_np), _sha(b_np)
            a_t = torch.from_numpy(a_np.view(np.int16).copy()).to(dev).view(torch.bfloat16)
            bt_t = torch.from_numpy(np.ascontiguousarray(b_np.T).view(np.int16)).to(dev).view(torch.bfloat16)
            a8, sfa = per_token_cast_to_fp8(a_t, use_ue8m0=False)
            b8, sfb = per_block_cast_to_fp8(bt_t, use_ue8m0=False)
            rec["fed"] = {nm: {"shape": list(x.shape), "stride": list(x.stride()), "dtype": str(x.dtype)}
                          for nm, x in (("a", a8), ("sfa", sfa), ("b", b8), ("sfb", sfb))}
            a_codes = a8.view(torch.uint8).cpu().numpy()
            b_codes = b8.view(torch.uint8).cpu().numpy()
            sfa_np = sfa.float().contiguous().cpu().numpy()
            sfb_np = sfb.float().contiguous().cpu().numpy()
            outs = []
            with _capture_fd1(sink, out / "deepgemm_stdout.log"):
                for rep in range(2):
                    d = torch.empty((m, n), dtype=torch.bfloat16, device=dev)
                    d.view(torch.int16).fill_(-1)  # 0xFFFF sentinel (a NaN)
                    t2 = time.time()
                    deep_gemm.fp8_gemm_nt((a8, sfa), (b8, sfb), d, c=None, disable_ue8m0_cast=True)
                    torch.cuda.synchronize()
                    rec[f"call{rep}_s"] = round(time.time() - t2, 3)
                    outs.append(d.view(torch.int16).cpu().numpy().view(np.uint16).copy())
            rec["log"] = sink[-1][-30000:]
            d_bits = outs[0]
            rec["deterministic_rerun"] = bool(np.array_equal(outs[0], outs[1]))
            rec["sentinel_left"] = int((d_bits == 0xFFFF).sum())
            rec["nan_or_inf"] = int(((d_bits & 0x7F80) == 0x7F80).sum())
            rec["sha256"] = {"a": _sha(a_codes), "b": _sha(b_codes), "sfa": _sha(sfa_np), "sfb": _sha(sfb_np),
                             "d": _sha(d_bits)}
            rec["scale_ranges"] = {"sfa": [float(sfa_np.min()), float(sfa_np.max())],
                                   "sfb": [float(sfb_np.min()), float(sfb_np.max())]}
            arrays.update({f"{name}.a": a_codes, f"{name}.b": b_codes, f"{name}.sfa": sfa_np,
                           f"{name}.sfb": sfb_np, f"{name}.d": d_bits})
            try:
                rec["quick_check"] = quick_check(a_codes, sfa_np, b_codes, sfb_np, d_bits)
            except Exception as e:
                rec["quick_check"] = f"{type(e).__name__}: {e}"
            rec["ok"] = True
            qc = rec["quick_check"]
            quick = {kk: (v["match"], v["max_ulp"]) for kk, v in qc.items()} if isinstance(qc, dict) else qc
            print(f"{name}: ok {time.time() - t1:.1f}s (calls {rec.get('call0_s')}s, {rec.get('call1_s')}s) "
                  f"rerun-identical={rec['deterministic_rerun']} sentinel_left={rec['sentinel_left']} "
                  f"quick (match, max ulp)={quick}", flush=True)
        except Exception as e:
            rec["ok"] = False
            rec["error"] = f"{type(e).__name__}: {str(e)[:3000]}"
            if sink:
                rec["log"] = sink[-1][-30000:]
            print(f"{name}: FAILED {rec['error'][:1500]}", flush=True)
            traceback.print_exc(limit=8)
            sys.stderr.flush()
        new = _jit_dirs(jit_cache) - before
        rec["jit_kernels"] = sorted(new)
        try:
            meta.setdefault("jit", {}).update(_jit_record(jit_cache, new))
            meta["jit_tar"] = _write_jit_tar(jit_cache, out / "deepgemm_jit.tar.gz")
        except Exception as e:
            meta["jit_error"] = f"{type(e).__name__}: {e}"
        rec["wall_s"] = round(time.time() - t1, 1)
        meta["wall_s"] = round(time.time() - t0, 1)
        _save(out, meta, arrays)
    meta["complete"] = True
    meta["wall_s"] = round(time.time() - t0, 1)
    _save(out, meta, arrays)
    shutil.rmtree(scratch, ignore_errors=True)
    n_ok = sum(r.get("ok", False) for r in meta["shapes"])
    print(f"{n_ok}/{len(meta['shapes'])} shapes ok; wrote {out} ({meta['wall_s']}s)", flush=True)
    return 0 if n_ok else 1


# ----------------------------------------------------------------------------- compare (CPU)


def compare(explored: Path, log=print) -> int:
    """Check refmodel's DeepGEMM model (wgmma k32 chain, promotion every 4 instructions, scales
    applied per promotion, bf16 RNE) against an --explore folder, for each promote_op."""
    import ml_dtypes

    from refmodel.numerics.gemm import gemm

    info = json.loads((explored / "deepgemm.json").read_text())
    z = np.load(explored / "deepgemm.npz")
    instr = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"
    worst = 0
    for rec in info.get("shapes", []):
        if not rec.get("ok"):
            log(f"{rec['name']}: not recorded ({rec.get('error', '?')[:200]})")
            continue
        nm, M, N, K = rec["name"], rec["M"], rec["N"], rec["K"]
        a, b = inputs(rec["seed"], M, N, K, rec["exp_range"])
        if (_sha(a), _sha(b)) != (rec["a_bf16_sha256"], rec["b_bf16_sha256"]):
            log(f"{nm}: note: the rebuilt bf16 inputs differ from the recorded sha256 (numpy changed?); "
                "the FP8 codes and scales fed are in the npz, so the check goes on")
        A, B, sfa, sfb, hw = (z[f"{nm}.{x}"] for x in ("a", "b", "sfa", "sfb", "d"))
        Mp = -(-M // 64) * 64                      # the model takes M % 64 == 0: zero rows are independent
        Ap = np.zeros((Mp, K), np.uint8)
        Ap[:M] = A
        sfap = np.ones((Mp, K // 128), np.float32)
        sfap[:M] = sfa
        sb = np.repeat(sfb, 128, axis=0)[:N].T.copy()   # (Kb, N): one scale per column
        bk = np.ascontiguousarray(B.T).view(ml_dtypes.float8_e4m3fn)
        ak = Ap.view(ml_dtypes.float8_e4m3fn)
        res = {}
        for op in ("fma", "mul_add", "fma_exact"):
            d = gemm(ak, bk, instr=instr, promote_every=4, scale_a=sfap, scale_b=sb, out_dtype="bf16",
                     promote_op=op)[:M]
            bits = d.view(np.uint16)
            res[op] = int(np.count_nonzero(bits != hw))
        log(f"{nm} ({M}x{N}x{K}): mismatches of {hw.size}: " + ", ".join(f"{k}={v}" for k, v in res.items()))
        worst = max(worst, res["fma"])
    return 1 if worst else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", action="store_true", help="(GPU machine) build DeepGEMM's extension in place")
    p.add_argument("--explore", help="(GPU) run every shape, save to this folder")
    p.add_argument("--compare", help="(CPU) compare an --explore folder with refmodel's model")
    p.add_argument("--dg", default=str(DG_DIR), help="the DeepGEMM source folder (default %(default)s)")
    p.add_argument("--only", default=None, help="comma-separated shape names (default: all)")
    p.add_argument("--budget-s", type=float, default=None, help="start no new shape after this many seconds")
    a = p.parse_args(argv)
    dg = Path(a.dg).resolve()
    if a.build:
        return build(dg)
    if a.explore:
        return explore(Path(a.explore), dg, set(a.only.split(",")) if a.only else None, a.budget_s)
    if a.compare:
        return compare(Path(a.compare))
    p.error("give --build, --explore DIR or --compare DIR")
    return 2


if __name__ == "__main__":
    sys.exit(main())
