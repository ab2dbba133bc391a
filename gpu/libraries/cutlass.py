"""CUTLASS's Python DSL (CuTe DSL) Hopper dense GEMM examples on the GPU: import, compile, run.

The kernels are NVIDIA's own examples, not code of this repository: ``dense_gemm.py`` and
``dense_gemm_fp8_2xacc.py`` from NVIDIA/cutlass ``examples/python/CuTeDSL/cute/hopper/kernel/
dense_gemm/`` (:data:`EXAMPLE_SOURCE`).  They travel unchanged in the git-ignored folder
``.carry/cutlass/`` (or the folder named by ``$WGREF_CUTLASS_EXAMPLES``) and are imported from there;
the package ``nvidia-cutlass-dsl`` (with its ``-libs-cu13`` flavour) must be importable.

``dense_gemm.py`` (class ``HopperWgmmaGemmKernel``) is a plain wgmma chain: A and B come from
shared memory (TMA loads, SS wgmma), the first wgmma of a tile has scale-d = 0, every later one
accumulates in the wgmma accumulator (f32 or f16) over the whole K; the epilogue converts the
accumulator to the output type (``acc.to(c_dtype)``) and stores it through shared memory + TMA.
``dense_gemm_fp8_2xacc.py`` (``HopperFP8WarpSpecialized2xAccGemmKernel``) is CUTLASS's FP8
"2xAcc": a wgmma chain of ``mma_promotion_interval`` instructions restarted with scale-d = 0,
each chain's result added into a float32 register accumulator (``acc = acc + temp``), then
``acc * (scale_a * scale_b)`` and the conversion.

:class:`Dsl` imports the DSL and the examples (compile-only on a machine without a GPU: sm_90a);
:class:`Gemm` is one configuration on host inputs: compile it, run it, read the output's bits.
gpu.record.cutlass records them.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = Path(os.environ.get("WGREF_CUTLASS_EXAMPLES", REPO / ".carry" / "cutlass"))
EXAMPLE_FILES = ("dense_gemm.py", "dense_gemm_fp8_2xacc.py")
# where the example files were taken from (NVIDIA/cutlass has no v4.8 tag; v4.7.0 + 6 commits)
EXAMPLE_SOURCE = ("NVIDIA/cutlass@7107b05535f8977f5ecb9d01ee203205b1fd9bc4:"
                  "examples/python/CuTeDSL/cute/hopper/kernel/dense_gemm/")
KERNELS = ("dense", "2xacc")   # dense_gemm.HopperWgmmaGemmKernel, dense_gemm_fp8_2xacc's 2xAcc kernel

BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def example_file(kernel: str) -> str:
    """The example file of ``kernel`` ("dense" or "2xacc")."""
    return EXAMPLE_FILES[kernel == "2xacc"]


def example_sha256() -> dict:
    """sha256 of every example file present in :data:`EXAMPLES_DIR`."""
    return {f: hashlib.sha256((EXAMPLES_DIR / f).read_bytes()).hexdigest()
            for f in EXAMPLE_FILES if (EXAMPLES_DIR / f).exists()}


def import_dsl():
    """Import cutlass (+ the examples).  A wheel unzipped into a PYTHONPATH folder has its
    ``nvidia_cutlass_dsl_packages.pth`` ignored, so its ``dsl_packages`` folder is added here."""
    for p in list(sys.path):
        d = Path(p or ".") / "nvidia_cutlass_dsl" / "dsl_packages"
        if d.is_dir() and str(d) not in sys.path:
            sys.path.append(str(d))
    if str(EXAMPLES_DIR) not in sys.path:
        sys.path.insert(0, str(EXAMPLES_DIR))
    import cutlass  # noqa: F401
    import cutlass.cute  # noqa: F401
    return cutlass


def versions(cutlass) -> dict:
    """Versions of python, the DSL and its packages, the DSL's CUDA, torch."""
    v = {"python": sys.version.split()[0], "nvidia-cutlass-dsl": getattr(cutlass, "__version__", None)}
    try:
        from importlib import metadata

        for dist in ("nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-cu13",
                     "cuda-bindings", "numpy", "ml_dtypes"):
            try:
                v[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                v.setdefault(dist, None)
    except Exception:  # pragma: no cover - metadata is best effort
        pass
    try:
        from cutlass.base_dsl.version_info import CUDA_VERSION

        v["dsl_cuda_version"] = str(CUDA_VERSION)
    except Exception:
        pass
    try:
        import torch

        v["torch"] = torch.__version__
        v["torch_cuda"] = torch.version.cuda
    except Exception:
        pass
    return v


def _cutlass_dtype(cutlass, name):
    return {"e4m3": cutlass.Float8E4M3FN, "e5m2": cutlass.Float8E5M2, "bf16": cutlass.BFloat16,
            "f16": cutlass.Float16, "f32": cutlass.Float32}[name]


def _np_store(name):
    """numpy dtype that carries the bits of ``name`` through DLPack (fp8 and bf16 have no code)."""
    return {"e4m3": np.uint8, "e5m2": np.uint8, "bf16": np.int16, "f16": np.float16,
            "f32": np.float32}[name]


def _cute_tensor(arr, elt):
    """(L=1, rows, cols) host/torch array, row-major -> cute tensor (rows, cols, L) with the
    cols mode contiguous (K-major A/B, N-major C), dynamic layout, as the examples make them."""
    from cutlass.cute.runtime import from_dlpack

    t = from_dlpack(arr.permute(1, 2, 0) if hasattr(arr, "permute") else arr.transpose(1, 2, 0),
                    assumed_align=16)
    t.element_type = elt
    return t.mark_layout_dynamic(leading_dim=1)


def _scalar_tensor(arr):
    from cutlass.cute.runtime import from_dlpack

    return from_dlpack(arr, assumed_align=16).mark_layout_dynamic(leading_dim=0)


def _load_examples():
    import importlib

    return {"dense": importlib.import_module("dense_gemm"),
            "2xacc": importlib.import_module("dense_gemm_fp8_2xacc")}


class Dsl:
    """The DSL and the examples, imported; with ``launch`` (after :meth:`open_device`) on the GPU,
    otherwise compile-only (``CUTE_DSL_ARCH=sm_90a`` when no GPU is there and none is set)."""

    def __init__(self, launch: bool):
        self.launch = launch
        if not launch and not os.environ.get("CUTE_DSL_ARCH"):
            try:
                import torch

                have_gpu = torch.cuda.is_available()
            except Exception:
                have_gpu = False
            if not have_gpu:
                os.environ["CUTE_DSL_ARCH"] = "sm_90a"  # compile for the H200 without a GPU
        self.cutlass = import_dsl()
        import cuda.bindings.driver as cuda
        import cutlass.cute as cute

        self.cute, self.cuda = cute, cuda
        self.examples = _load_examples()
        self.version = getattr(self.cutlass, "__version__", "?")
        self.where = Path(self.cutlass.__file__).parent
        self.gpu = None

    def open_device(self) -> None:
        """The stream to launch on and the cluster occupancy query (H200: 132 SMs when compile-only)."""
        if self.launch:
            import torch

            self.device = torch.device("cuda")
            self.stream = self.cuda.CUstream(torch.cuda.current_stream().cuda_stream)
            hw = self.cutlass.utils.HardwareInfo()
            self.max_active_clusters = hw.get_max_active_clusters
            self.gpu = torch.cuda.get_device_name()
        else:
            self.device = None
            self.stream = self.cuda.CUstream(0)
            self.max_active_clusters = lambda size: 132 // size

    def driver_cuda_version(self):
        """The CUDA driver's version (e.g. 13000), or None."""
        try:
            err, drv = self.cuda.cuDriverGetVersion()
            return int(drv)
        except Exception:
            return None


class Gemm:
    """One configuration of an example kernel on host inputs a (M, K) and b (K, N) (ml_dtypes):
    ``kernel`` "dense" (``acc`` the wgmma accumulator type, ``promotion`` None) or "2xacc"
    (``promotion`` = mma_promotion_interval, scales 1); A and B^T K-major, C (M, N) N-major, C filled
    with all-ones bits before the first run."""

    def __init__(self, dsl: Dsl, kernel: str, dtype: str, acc: str, out: str, tile, cluster, promotion, a, b):
        self.dsl, self.kernel = dsl, kernel
        cutlass = dsl.cutlass
        m, k = a.shape
        n = b.shape[1]
        self.m, self.n = m, n
        # host arrays, (L, rows, cols): A (1, M, K), B^T (1, N, K), C (1, M, N)
        a_h = a.view(_np_store(dtype)).reshape(1, m, k)
        bt_h = np.ascontiguousarray(b.T).view(_np_store(dtype)).reshape(1, n, k)
        c_bits = BITS[np.dtype(_np_store(out)).itemsize]
        c_h = np.full((1, m, n), np.iinfo(c_bits).max, c_bits).view(_np_store(out))  # all-ones sentinel
        if dsl.launch:
            import torch

            a_x, bt_x, c_x = (torch.from_numpy(np.ascontiguousarray(x)).to(dsl.device) for x in (a_h, bt_h, c_h))
        else:
            a_x, bt_x, c_x = a_h, bt_h, c_h
        self._c = c_x
        mA = _cute_tensor(a_x, _cutlass_dtype(cutlass, dtype))
        mB = _cute_tensor(bt_x, _cutlass_dtype(cutlass, dtype))
        mC = _cute_tensor(c_x, _cutlass_dtype(cutlass, out))
        self.max_active_clusters = None
        if kernel == "dense":
            self.g = dsl.examples["dense"].HopperWgmmaGemmKernel(_cutlass_dtype(cutlass, acc), tile, cluster)
            self._cargs = self._rargs = (mA, mB, mC, dsl.stream)
        else:
            self.g = dsl.examples["2xacc"].HopperFP8WarpSpecialized2xAccGemmKernel(tile, cluster, 1, True, promotion)
            self.max_active_clusters = dsl.max_active_clusters(cluster[0] * cluster[1])
            if dsl.launch:
                import torch

                s_a = torch.ones(1, dtype=torch.float32, device=dsl.device)
                s_b = torch.ones(1, dtype=torch.float32, device=dsl.device)
            else:
                s_a = np.ones(1, np.float32)
                s_b = np.ones(1, np.float32)
            mSa, mSb = _scalar_tensor(s_a), _scalar_tensor(s_b)
            self._cargs = (mA, mB, mC, mSa, mSb, self.max_active_clusters, dsl.stream)
            self._rargs = (mA, mB, mC, mSa, mSb, dsl.stream)
        self.compiled = None

    def compile(self, dump: Path) -> bool:
        """``cute.compile`` keeping PTX and cubin in ``dump``; whether the dumps were asked for (an
        older ``cute.compile`` has no ``options=``)."""
        dump.mkdir(parents=True, exist_ok=True)  # the DSL writes its dumps only into an existing folder
        try:
            self.compiled = self.dsl.cute.compile(self.g, *self._cargs,
                                                  options=f"--keep-ptx --keep-cubin --dump-dir {dump}")
            return True
        except TypeError:  # an older cute.compile without options=
            self.compiled = self.dsl.cute.compile(self.g, *self._cargs)
            return False

    def info(self) -> dict:
        """The kernel object's stage counts, tile shapes and thread counts (those it has)."""
        info = {}
        for attr in ("ab_stage", "epi_stage", "tile_shape_mnk", "atom_layout_mnk", "epi_tile", "mma_warp_groups",
                     "num_mma_warp_groups", "threads_per_cta"):
            v = getattr(self.g, attr, None)
            if v is not None:
                try:
                    info[attr] = json.loads(json.dumps(v, default=str))
                except Exception:
                    info[attr] = str(v)
        return info

    def run(self) -> np.ndarray:
        """Launch the compiled kernel, wait, and return C's bits (M, N) (uint8/uint16/uint32)."""
        import torch

        self.compiled(*self._rargs)
        torch.cuda.synchronize()
        d = self._c.cpu().numpy().copy()
        return d.reshape(self.m, self.n).view(BITS[d.dtype.itemsize])

    def reset_output(self) -> None:
        """Fill C with all-ones bits again (the sentinel a launch overwrites)."""
        import torch

        self._c.view(torch.uint8).fill_(0xFF)
