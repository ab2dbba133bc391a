"""GEMM calls of the libraries (and of this repo's own FP8 kernel) as black boxes ``run(a, b) -> d``:
numpy inputs (``a`` (M, K), ``b`` (K, N), typed), the output on the host as numpy, and the names of
the kernels the last call ran (torch's profiler).  Schedule inference (refmodel.verify.infer) asks
these how they sum; ``TARGETS`` lists them.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from refmodel.dtypes import from_bits
from refmodel.errors import InputError

from refmodel.golden.registry import infer_targets

TARGETS = infer_targets()   # one entry each in refmodel.golden.registry


class Target:
    """``run(a, b)`` for one library call; ``kernels`` the kernel names of the last call, ``info`` what
    the call is (library, version, options) for a stored schedule's provenance."""

    def __init__(self, fn: Callable, info: dict, sparse: bool = False):
        self._fn, self.info, self.sparse = fn, info, sparse
        self.kernels: list[str] = []

    def __call__(self, a, b):
        d, kernels = self._fn(a, b)
        self.kernels = [k for k in (kernels or []) if not k.startswith(("Memset", "Memcpy"))] or self.kernels
        return d


def _torch_call(call, out: str):
    from gpu.libraries.torch_cublas import profiled, to_host

    d, kernels = profiled(call)
    return to_host(d, out), kernels


def make_target(name: str, *, dtype: str, out_dtype: str, fast_accum: bool = False, block_k: int = 64,
                imp=None, split_k: int | None = None) -> Target:
    """The target ``name`` (one of :data:`TARGETS`) for inputs of ``dtype`` and an ``out_dtype`` output."""
    from gpu.libraries.torch_cublas import _torch, to_gpu, to_host, versions

    if name not in TARGETS:
        raise InputError(f"infer target must be one of {', '.join(TARGETS)}, got {name!r:.60}")
    if name == "gemm-fp8":
        return _gemm_fp8(dtype, out_dtype)
    if name == "xla":
        return _xla(dtype, out_dtype)
    if name == "deepgemm":
        return _deepgemm(dtype, out_dtype)
    torch = _torch()
    info = {**versions(), "target": name, "dtype": dtype, "out": out_dtype}
    if name == "cublas":
        if out_dtype != dtype or dtype not in ("bf16", "f16"):
            raise InputError("cublas (torch.matmul) takes bf16 or f16 in and out: --dtype and --out-dtype the same")
        return Target(lambda a, b: _torch_call(lambda: torch.matmul(to_gpu(a, dtype), to_gpu(b, dtype)), out_dtype),
                      {**info, "library": f"cuBLAS (torch {torch.__version__})"})
    if name == "scaled-mm":
        from gpu.libraries.torch_cublas import scaled_mm

        if dtype != "e4m3" or out_dtype not in ("bf16", "f32"):
            raise InputError("scaled-mm takes e4m3 inputs and a bf16 or f32 output")
        one = torch.tensor(1.0, device="cuda")

        def run(a, b):
            A, B = to_gpu(a, "e4m3"), to_gpu(np.ascontiguousarray(b.T), "e4m3")
            return _torch_call(lambda: scaled_mm(A, B, one, one, out_dtype, use_fast_accum=fast_accum), out_dtype)
        return Target(run, {**info, "library": f"cuBLASLt torch._scaled_mm (torch {torch.__version__})",
                            "use_fast_accum": bool(fast_accum), "scales": "1, 1"})
    if name == "cusparselt":
        from gpu.libraries.cusparselt import cslt_sparse_mm, semi_structured_mm, version

        def run(a, b):
            A = to_gpu(a, dtype)
            if split_k is not None:                                       # the split-K kernels, asked for
                B = to_gpu(np.ascontiguousarray(b.T), dtype).t() if dtype == "e4m3" else to_gpu(b, dtype)
                d, k = cslt_sparse_mm(A, B, out_dtype=({"bf16": torch.bfloat16, "f32": torch.float32}[out_dtype]
                                                      if dtype == "e4m3" else None), split_k=split_k)
            elif dtype == "e4m3":
                B = to_gpu(np.ascontiguousarray(b.T), dtype).t()        # FP8 wants a column-major B
                d, k = cslt_sparse_mm(A, B, out_dtype={"bf16": torch.bfloat16, "f32": torch.float32,
                                                      "f16": torch.float16}[out_dtype])
            else:
                d, k = semi_structured_mm(A, to_gpu(b, dtype))
            return to_host(d, out_dtype), k
        return Target(run, {**info, "library": f"cuSPARSELt {version()} (torch {torch.__version__})",
                            **({"split_k": int(split_k)} if split_k is not None else {})}, sparse=True)
    # triton
    from gpu.libraries.triton import tiled_matmul, version

    def run(a, b):
        c, _ = tiled_matmul(to_gpu(a, dtype), to_gpu(b, dtype), out=out_dtype, block_m=64, block_n=64, block_k=block_k,
                            prec="none", imp=-1 if imp is None else int(imp), num_warps=4)
        torch.cuda.synchronize()
        return to_host(c, out_dtype), ["triton tiled_matmul"]
    return Target(run, {**info, "library": f"Triton {version()}", "block_k": block_k, "imp": imp})


def _gemm_fp8(dtype: str, out_dtype: str) -> Target:
    """This repo's FP8 GEMM kernel (gpu.kernels.gemm_fp8) with unit block scales."""
    import cupy as cp

    from gpu.kernels.gemm_fp8 import GemmConfig, gemm_fp8

    if dtype != "e4m3" or out_dtype not in ("bf16", "f32"):
        raise InputError("gemm-fp8 takes e4m3 inputs and a bf16 or f32 output")
    cfg = GemmConfig(promote=True, out=out_dtype)

    def run(a, b):
        M, K = a.shape
        N = b.shape[1]
        sa = np.ones((M, K // 128), np.float32)
        sb = np.ones((K // 128, -(-N // 128)), np.float32)
        d, _ = gemm_fp8(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b.T).view(np.uint8), sa, sb,
                        cfg=cfg)
        return from_bits(cp.asnumpy(d).view({"bf16": np.uint16, "f32": np.uint32}[out_dtype]), out_dtype), \
            ["gpu.kernels.gemm_fp8"]
    return Target(run, {"target": "gemm-fp8", "library": "wgref gpu.kernels.gemm_fp8", "dtype": dtype,
                        "out": out_dtype, "scales": "unit block scales"})


def _xla(dtype: str, out_dtype: str) -> Target:
    """``jax.jit(jnp.dot)`` on the GPU; the optimized HLO of the last compile is kept in ``info['hlo']``."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        raise InputError(f"the xla target needs jax ({e})") from None
    if out_dtype != dtype or dtype not in ("bf16", "f16"):
        raise InputError("xla (jnp.dot) takes bf16 or f16 in and out here")
    jdt = {"bf16": jnp.bfloat16, "f16": jnp.float16}[dtype]
    f = jax.jit(lambda x, y: jnp.dot(x, y))
    info = {"target": "xla", "library": f"JAX {jax.__version__} / XLA", "dtype": dtype, "out": out_dtype}
    target = None

    def run(a, b):
        x = jnp.asarray(np.asarray(a, np.float32)).astype(jdt)
        y = jnp.asarray(np.asarray(b, np.float32)).astype(jdt)
        if "hlo" not in info:
            info["hlo"] = f.lower(x, y).compile().as_text()
        d = np.asarray(f(x, y).astype(jnp.float32)).astype(np.float32)
        return d.astype({"bf16": __import__("ml_dtypes").bfloat16, "f16": np.float16}[dtype]), ["xla jnp.dot"]
    target = Target(run, info)
    return target


def _deepgemm(dtype: str, out_dtype: str) -> Target:
    """DeepGEMM's ``fp8_gemm_nt`` (built from the carried source, gpu.libraries.deepgemm) fed the e4m3
    codes directly with unit 1 x 128 / 128 x 128 scales, bf16 out."""
    import torch

    import os
    import tempfile
    from pathlib import Path

    from gpu.libraries.deepgemm import DG_DIR, DeepGEMM, cuda_home, cuda_major, preload, toolchain

    if dtype != "e4m3" or out_dtype != "bf16":
        raise InputError("deepgemm (fp8_gemm_nt) takes e4m3 inputs and a bf16 output")
    scratch = Path(tempfile.mkdtemp(prefix="wgref_dg_"))
    env_up, _ = toolchain(scratch, log=lambda *a: None)
    os.environ.update(env_up)
    os.environ.setdefault("DG_JIT_CACHE_DIR", str(scratch / "jit"))
    preload(cuda_home(), cuda_major(), log=lambda *a: None)
    dg = DeepGEMM(DG_DIR)

    def run(a, b):
        M, K = a.shape
        N = b.shape[1]
        dev = torch.device("cuda")
        a8 = torch.from_numpy(np.ascontiguousarray(a).view(np.uint8)).to(dev).view(torch.float8_e4m3fn)
        b8 = torch.from_numpy(np.ascontiguousarray(b.T).view(np.uint8)).to(dev).view(torch.float8_e4m3fn)
        sfa = torch.ones((M, K // 128), dtype=torch.float32, device=dev)
        sfb = torch.ones((-(-N // 128), K // 128), dtype=torch.float32, device=dev)
        bits, _ = dg.fp8_gemm_nt(a8, sfa, b8, sfb)
        return from_bits(bits, "bf16"), ["deep_gemm sm90_fp8_gemm_1d2d"]
    info = dg.info()
    return Target(run, {"target": "deepgemm", "library": f"DeepGEMM {info.get('version')}", "dtype": dtype,
                        "out": out_dtype, "scales": "unit 1x128 / 128x128 scales"})
