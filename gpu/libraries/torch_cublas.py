"""cuBLAS through torch on the GPU, and the library fuzzer's runner of every target.

The calls: ``torch.matmul`` (bf16/f16: cuBLAS) and ``torch._scaled_mm`` (e4m3: cuBLASLt), the CUDA
kernels torch's profiler saw run (:func:`profiled`: the name tells the schedule cuBLAS picked), and
numpy arrays to and from torch tensors as raw bits (:func:`to_gpu`, :func:`to_host`,
:func:`bits_view`; torch has no uint16/uint32, so bits travel as int16/int32).  gpu.record.cublas and
gpu.record.torch record these calls; :class:`TorchRunner` runs the fuzzer's targets (cuBLAS,
``_scaled_mm`` and gpu.libraries.triton's matmul) on drawn configurations
(refmodel.verify.library_calls).  torch is imported when first used.
"""

from __future__ import annotations

import numpy as np

from refmodel.dtypes import bits_of, from_bits
from refmodel.errors import DeviceError
from refmodel.verify.library_calls import FP8, TRITON_BM, TRITON_BN

_SIGNED = {1: np.uint8, 2: np.int16, 4: np.int32}   # the numpy views torch.from_numpy takes, by size


def _torch():
    import torch

    return torch


def torch_dtype(name: str):
    """The torch dtype of an element type name ("e4m3", "e5m2", "f16", "bf16", "f32")."""
    torch = _torch()
    return {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "f16": torch.float16,
            "bf16": torch.bfloat16, "f32": torch.float32}[name]


def to_gpu(x: np.ndarray, dtype: str):
    """A numpy array (ml_dtypes or bits) as a CUDA tensor of ``dtype``, bit for bit."""
    torch = _torch()
    t = torch.from_numpy(np.ascontiguousarray(bits_of(x)).view(_SIGNED[x.dtype.itemsize]))
    return t.view(torch_dtype(dtype)).cuda()


def bits_view(t) -> np.ndarray:
    """The bits of a tensor on the host: uint8, int16 or int32 by element size."""
    torch = _torch()
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32}
    return t.contiguous().view(view[t.element_size()]).cpu().numpy()


def to_host(t, dtype: str) -> np.ndarray:
    """A tensor as a numpy array of ``dtype`` (ml_dtypes), bit for bit."""
    return from_bits(bits_of(bits_view(t)), dtype)


def scales_to_gpu(s):
    """A float32 scale (0-d, per tensor) or scale array ((M, 1) / (1, N), per row) as a CUDA tensor."""
    return _torch().from_numpy(np.array(s, np.float32)).cuda()


def profiled(call):
    """Run ``call`` once to warm up, then once under the profiler: (output, CUDA kernel names)."""
    torch = _torch()
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        d = call()
        torch.cuda.synchronize()
    return d, sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})


def set_reduced_precision_reduction(dtype: str, allow: bool) -> None:
    """torch's ``allow_bf16_reduced_precision_reduction`` (``dtype`` "bf16") or
    ``allow_fp16_reduced_precision_reduction`` (otherwise) for the cuBLAS calls that follow."""
    attr = "allow_bf16_reduced_precision_reduction" if dtype == "bf16" else "allow_fp16_reduced_precision_reduction"
    setattr(_torch().backends.cuda.matmul, attr, allow)


def matmul(a, b):
    """``torch.matmul(a, b)``: cuBLAS on bf16/f16 CUDA tensors, output of their type."""
    return _torch().matmul(a, b)


def scaled_mm(a, b_nk, scale_a, scale_b, out: str, use_fast_accum: bool = False):
    """``torch._scaled_mm(a, b_nk.t(), scale_a, scale_b, out_dtype=out, use_fast_accum=...)``: cuBLASLt's
    FP8 GEMM of e4m3 tensors a (M, K) and b_nk (N, K) (both K-major), ``out`` "f32" or "bf16"."""
    torch = _torch()
    out_dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[out]
    return torch._scaled_mm(a, b_nk.t(), scale_a, scale_b, out_dtype=out_dtype, use_fast_accum=use_fast_accum)


def scaled_mm_unit_scales(a, b):
    """``torch._scaled_mm`` of e4m3 a (M, K) and b (K, N) with scales 1, f32 out, as fixtures/cublas
    recorded it: the unit scales' upload and the copy of b to K-major run inside the call (their
    kernels are among the profiled names)."""
    one = _torch().tensor(1.0, device="cuda")
    return scaled_mm(a, b.t().contiguous(), one, one, "f32")


def versions() -> dict:
    """torch's version, its CUDA and the BLAS library torch prefers."""
    torch = _torch()
    return {"torch": torch.__version__, "cuda": torch.version.cuda,
            "cublas": torch.backends.cuda.preferred_blas_library().name}


class CallRefused(Exception):
    """The library refused to build or run a drawn configuration (e.g. a Triton compile error)."""


class TorchRunner:
    """The real libraries on the GPU through torch (cuBLAS, ``_scaled_mm``) and Triton; kernel
    names from torch's profiler, as gpu.record.cublas reads them.  One method per fuzz target:
    ``(x, cfg) -> (output, kernel names or None)``; :class:`CallRefused` for a configuration the
    library will not build."""

    def __init__(self):
        try:
            import torch
        except ImportError as e:
            raise DeviceError(f"torch is needed to fuzz library calls: pip install torch ({e})") from None
        if not torch.cuda.is_available():
            raise DeviceError("torch sees no CUDA device: run on a machine with an H100/H200 GPU")
        cc = torch.cuda.get_device_capability(0)
        if cc != (9, 0):
            raise DeviceError(f"device 0 has compute capability {cc[0]}.{cc[1]}, the golden models are Hopper's (9.0)")
        self.torch = torch

    def triton(self, x: dict, cfg: dict):
        try:
            import triton.language  # noqa: F401
        except ImportError as e:
            raise DeviceError(f"triton is needed to fuzz lib:triton: pip install triton ({e})") from None
        from gpu.libraries.triton import tiled_matmul, tiled_matmul_kernel, triton_refusals

        tiled_matmul_kernel()
        a, b = to_gpu(x["a"], cfg["dtype"]), to_gpu(x["b"], cfg["dtype"])
        imp = -1 if (cfg["dtype"] in FP8 and cfg["imp"] is None) else (cfg["imp"] or 0)
        try:
            c, _ = tiled_matmul(a, b, out=cfg["out"], block_m=TRITON_BM, block_n=TRITON_BN, block_k=cfg["block_k"],
                                prec=cfg["input_precision"] or "none", imp=imp, num_warps=cfg["num_warps"])
        except triton_refusals() as e:
            raise CallRefused(f"Triton refused it: {type(e).__name__}: {str(e).splitlines()[0][:200]}") from None
        self.torch.cuda.synchronize()
        return to_host(c, cfg["out"]), None

    def cublas(self, x: dict, cfg: dict):
        a, b = to_gpu(x["a"], cfg["dtype"]), to_gpu(x["b"], cfg["dtype"])
        d, kernels = profiled(lambda: matmul(a, b))
        return to_host(d, cfg["dtype"]), kernels

    def scaled_mm(self, x: dict, cfg: dict):
        a, b_nk = to_gpu(x["a"], "e4m3"), to_gpu(x["b_nk"], "e4m3")
        sa = scales_to_gpu(x["scale_a"])    # 0-d (per tensor) or (M, 1)
        sb = scales_to_gpu(x["scale_b"])    # 0-d or (1, N)
        d, kernels = profiled(lambda: scaled_mm(a, b_nk, sa, sb, cfg["out"], use_fast_accum=cfg["use_fast_accum"]))
        return to_host(d, cfg["out"]), kernels
