"""Hardware side of the cvt forms: inline-PTX kernels generated from refmodel.numerics.cvt.CVT_FORMS.

``run_cvt(instr, a, b=None)`` takes the same operands as :func:`refmodel.numerics.cvt.cvt`
and returns the H200's results in the same dtype and shape.
``sweep_f32(instr, base, n)`` runs an f32 -> f8x2 form on x = base .. base+n-1 with
both operands equal to x and returns (high bytes, number of results whose halves differ).
"""

from __future__ import annotations

import numpy as np

from refmodel.numerics.cvt import CVT_FORMS, CvtForm, parse_cvt

from gpu.kernels.runtime import compile_module, require_device

_CONSTRAINT = {"f32": "f", "b32": "r", "b16": "h"}
_CTYPE = {"f32": "float", "b32": "u32", "b16": "u16"}


def _asm(form: CvtForm, dst: str, srcs: list[str]) -> str:
    types = form.ptx_types
    ops = ", ".join(f"%{i}" for i in range(len(types)))
    ins = ", ".join(f'"{_CONSTRAINT[t]}"({s})' for t, s in zip(types[1:], srcs))
    return f'asm volatile("{form.instr} {ops};" : "={_CONSTRAINT[types[0]]}"({dst}) : {ins});'


def _load(t: str, expr: str) -> str:
    return f"__uint_as_float({expr})" if t == "f32" else f"({_CTYPE[t]})({expr})"


def kernel_source() -> str:
    """One elementwise kernel per form (cvt_k<i>) and one sweep kernel per f32->f8x2 form."""
    parts = []
    for i, f in enumerate(CVT_FORMS):
        types = f.ptx_types
        srcs = [_load(t, f"{name}[i]") for t, name in zip(types[1:], f.operands)]
        parts.append(f"""
extern "C" __global__ void cvt_k{i}(const u32* __restrict__ a, const u32* __restrict__ b,
                                   {_CTYPE[types[0]] if types[0] != 'f32' else 'u32'}* __restrict__ d, u64 n) {{
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    {_CTYPE[types[0]]} r;
    {_asm(f, "r", srcs)}
    d[i] = r;
}}""")
        if f.src == "f32" and f.dst in ("e4m3x2", "e5m2x2"):
            parts.append(f"""
extern "C" __global__ void sweep_k{i}(u8* __restrict__ out, u64 base, u64 n,
                                     unsigned long long* __restrict__ bad) {{
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = __uint_as_float((u32)(base + i));
    u16 r;
    {_asm(f, "r", ["x", "x"])}
    out[i] = (u8)(r >> 8);
    if ((r >> 8) != (r & 0xFF)) atomicAdd(bad, 1ULL);
}}""")
    return "\n".join(parts)


def _module():
    return compile_module(kernel_source())


def run_cvt(instr: str, a, b=None) -> np.ndarray:
    """Run one cvt form on the GPU, elementwise; operands as for refmodel.numerics.cvt.cvt."""
    cp = require_device()
    form = parse_cvt(instr)
    idx = CVT_FORMS.index(form)
    a_np = np.asarray(a)
    a_u = a_np.view(np.uint32) if a_np.dtype == np.float32 else a_np.astype(np.uint32)
    if b is not None:
        b_np = np.asarray(b)
        b_u = b_np.view(np.uint32) if b_np.dtype == np.float32 else b_np.astype(np.uint32)
        a_u, b_u = np.broadcast_arrays(a_u, b_u)
    else:
        b_u = np.zeros(1, np.uint32)
    shape = a_u.shape
    n = int(np.prod(shape))
    out_dtype = np.uint32 if form.ptx_types[0] == "b32" else np.uint16
    da = cp.asarray(np.ascontiguousarray(a_u).reshape(-1))
    db = cp.asarray(np.ascontiguousarray(b_u).reshape(-1))
    dd = cp.empty(n, dtype=out_dtype)
    if n:
        k = _module().get_function(f"cvt_k{idx}")
        k(((n + 255) // 256,), (256,), (da, db, dd, np.uint64(n)))
    cp.cuda.runtime.deviceSynchronize()
    return cp.asnumpy(dd).reshape(shape)


def sweep_f32(instr: str, base: int, n: int, out=None):
    """GPU bytes of an f32->f8x2 form for inputs base..base+n-1 (a = b = x), as a cupy
    array, and the count of results whose two halves differ."""
    cp = require_device()
    form = parse_cvt(instr)
    idx = CVT_FORMS.index(form)
    if out is None:
        out = cp.empty(n, dtype=cp.uint8)
    bad = cp.zeros(1, dtype=cp.uint64)
    k = _module().get_function(f"sweep_k{idx}")
    k(((n + 255) // 256,), (256,), (out, np.uint64(base), np.uint64(n), bad))
    return out, bad


NOSAT_SOURCE = r"""
#include <cuda_fp8.h>
extern "C" __global__ void nosat_sweep(u8* __restrict__ out, u64 base, u64 n, int e5m2) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = __uint_as_float((u32)(base + i));
    out[i] = (u8)__nv_cvt_float_to_fp8(x, __NV_NOSAT, e5m2 ? __NV_E5M2 : __NV_E4M3);
}
"""


def sweep_nosat(fmt: str, base: int, n: int, out=None):
    """cuda_fp8.h's software __nv_cvt_float_to_fp8(x, __NV_NOSAT, fmt) on the GPU, for
    x = base .. base+n-1 (the reference for refmodel's ``nosat`` policy)."""
    cp = require_device()
    if out is None:
        out = cp.empty(n, dtype=cp.uint8)
    k = compile_module(NOSAT_SOURCE).get_function("nosat_sweep")
    k(((n + 255) // 256,), (256,), (out, np.uint64(base), np.uint64(n), np.int32(fmt == "e5m2")))
    return out, cp.zeros(1, dtype=cp.uint64)
