"""Sparse wgmma (``wgmma.mma_async.sp``) on the GPU, from what a kernel holds: a shared-memory
image, descriptors (start relative to the image), the per-thread sp-meta register, the
accumulator (and for RS the A) registers.  One block of 128 threads per case; returns the
D registers and the shared base address, exactly what ``refmodel.machine`` consumes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refmodel.errors import InputError
from refmodel.wgmma_sp_forms import WgmmaSpForm, parse_wgmma_sp

from gpu.kernels.layouts import _SBASE, _set_smem
from gpu.kernels.runtime import compile_module, require_device
from gpu.kernels.wgmma_asm import accumulator_io, imm_tail, wgmma_asm


@dataclass(frozen=True)
class SpVariant:
    """The compiled-in part of a sparse wgmma launch (immediates)."""

    instr: str
    rs: bool = False
    sp_sel: int = 0
    trans_a: int = 0
    trans_b: int = 0
    imm_scale_a: int = 1
    imm_scale_b: int = 1
    chain: int = 1          # wgmmas accumulating along K in one commit group

    @property
    def form(self) -> WgmmaSpForm:
        return parse_wgmma_sp(self.instr)


def sp_kernel_source(v: SpVariant) -> str:
    """Kernel ``wgmma_sp_kernel(img, size, desc_a, desc_b, afrag, meta, cin, dout, scale_d, bases)``."""
    f = v.form
    if v.sp_sel not in f.sp_sels:
        raise InputError(f"{f.instr}: sp-sel must be one of {f.sp_sels}, got {v.sp_sel}")
    if (v.trans_a or v.trans_b) and not f.has_transpose:
        raise InputError(f"{f.instr}: imm-trans only for f16/bf16")
    nregs = f.d_regs
    acc_t, con, load, store = accumulator_io(f.dtype_d, "cb")
    asm = wgmma_asm(f.instr, nregs, f.dtype_d, rs=v.rs, sp_sel=v.sp_sel,
                    tail=imm_tail(f, v.rs, v.imm_scale_a, v.imm_scale_b, v.trans_a, v.trans_b))
    return _SBASE + f"""
#define NREGS {nregs}
extern "C" __global__ void __launch_bounds__(128, 1)
wgmma_sp_kernel(const u8* __restrict__ img, int size, const u64* __restrict__ desc_a,
                const u64* __restrict__ desc_b, const u32* __restrict__ afrag, const u32* __restrict__ meta,
                const u32* __restrict__ cin, u32* __restrict__ dout, const int* __restrict__ scale_d,
                u32* __restrict__ bases, int a_step, int b_step)
{{
  extern __shared__ __align__(1024) u8 sm[];
  const int t = threadIdx.x; const long c = blockIdx.x;
  const uint4* src = (const uint4*)(img + c * size);
  for (int i = t; i < size / 16; i += 128) ((uint4*)sm)[i] = src[i];
  asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");
  __syncthreads();
  const u32 sb = smem_base_of(sm);
  if (t == 0) bases[c] = sb;
  const u64 da0 = desc_a[c] + (u64)(sb >> 4);
  const u64 db0 = desc_b[c] + (u64)(sb >> 4);
  {acc_t} d[NREGS];
  const long cb = (c * 128 + t) * NREGS;
#pragma unroll
  for (int i = 0; i < NREGS; ++i) d[i] = {load};
  int sd = scale_d[c];
#pragma unroll
  for (int i = 0; i < NREGS; ++i) asm volatile("" : "{con}"(d[i]) :: "memory");
  asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");
#pragma unroll
  for (int s = 0; s < {v.chain}; ++s) {{
    const u64 da = da0 + (u64)((s * a_step) >> 4), db = db0 + (u64)((s * b_step) >> 4);
    const u32* ap = afrag + ((c * {v.chain} + s) * 128 + t) * 4;
    u32 a0 = ap[0], a1 = ap[1], a2 = ap[2], a3 = ap[3];
    u32 mt = meta[(c * {v.chain} + s) * 128 + t];
    {asm}
    sd = 1;
  }}
  asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\\n" ::: "memory");
#pragma unroll
  for (int i = 0; i < NREGS; ++i) asm volatile("" : "{con}"(d[i]) :: "memory");
#pragma unroll
  for (int i = 0; i < NREGS; ++i) dout[cb + i] = {store};
}}
"""


def run_wgmma_sp(v: SpVariant, images: np.ndarray, desc_a: np.ndarray, desc_b: np.ndarray, meta: np.ndarray,
                 c_regs: np.ndarray, scale_d: np.ndarray, a_regs: np.ndarray | None = None, *,
                 a_step: int = 0, b_step: int = 0):
    """C cases of one variant: images uint8 (C, size), desc_a/desc_b uint64 (C,) (starts relative
    to the image), meta uint32 (C, 128) sp-meta registers, c_regs uint32 (C, 128, regs), scale_d
    (C,), a_regs uint32 (C, 128, 4) for RS.  Returns (d_regs (C, 128, regs), bases (C,))."""
    cp = require_device()
    images = np.ascontiguousarray(images, dtype=np.uint8)
    c, size = images.shape
    if size % 16:
        raise InputError(f"image size must be a multiple of 16, got {size}")
    k = compile_module(sp_kernel_source(v)).get_function("wgmma_sp_kernel")
    _set_smem(k, size)
    af = (np.zeros((c * v.chain, 128, 4), np.uint32) if a_regs is None
          else np.ascontiguousarray(a_regs, dtype=np.uint32))   # (C[, chain], 128, 4)
    d_c = cp.asarray(np.ascontiguousarray(c_regs, dtype=np.uint32))
    d_out = cp.zeros_like(d_c)
    d_base = cp.zeros(c, dtype=cp.uint32)
    k((c,), (128,), (cp.asarray(images), np.int32(size), cp.asarray(np.ascontiguousarray(desc_a, np.uint64)),
                     cp.asarray(np.ascontiguousarray(desc_b, np.uint64)), cp.asarray(af),
                     cp.asarray(np.ascontiguousarray(meta, np.uint32)), d_c, d_out,
                     cp.asarray(np.ascontiguousarray(scale_d, np.int32)), d_base, np.int32(a_step),
                     np.int32(b_step)), shared_mem=size)
    cp.cuda.runtime.deviceSynchronize()
    return cp.asnumpy(d_out), cp.asnumpy(d_base)


__all__ = ["SpVariant", "sp_kernel_source", "run_wgmma_sp"]
