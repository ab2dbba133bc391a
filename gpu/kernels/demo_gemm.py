"""A small DeepGEMM-style FP8 GEMM kernel with switchable bugs (a planted wrong promotion interval, a
dropped K block, ...), the demo target of the user-kernel fuzzer in docs/verifier.md."""

from __future__ import annotations

from typing import Optional
import ml_dtypes
import numpy as np
from refmodel.errors import InputError
from refmodel.golden.fp8_schedule import fp8_kernel_schedule


DEMO_SOURCE = r"""
// DeepGEMM-style FP8 GEMM: one warpgroup per 64 x BN tile, wgmma m64nBNk32 (SS),
// the first wgmma of each stage with scale-d = 0, promotion into float32 every PROMOTE
// instructions: acc = fmaf(sa[row, kb] * sb[kb, col / 128], partial, acc).
// A: M x K e4m3 codes (K-major), B: N x K (K-major), D: M x N (f32 or bf16), row-major.
#define BN {bn}
#define NREGS {nregs}
#define PROMOTE {promote}
#define STAGE_EVERY {stage_every}
#define SKIP_LAST {skip_last}
#define OUT_BF16 {out_bf16}
extern "C" __global__ void __launch_bounds__(128, 1)
demo_fp8_gemm(const u8* __restrict__ A, const u8* __restrict__ B, const float* __restrict__ SA,
              const float* __restrict__ SB, void* __restrict__ D, int M, int N, int K, u64 desc_tmpl)
{{
  __shared__ __align__(128) u8 sA[64 * 32];
  __shared__ __align__(128) u8 sB[BN * 32];
  const int t = threadIdx.x, w = t / 32, l = t % 32, g = l / 4, q = l % 4;
  const int m0 = blockIdx.y * 64, n0 = blockIdx.x * BN;
  const int KB = K / 128, NB = (N + 127) / 128;
  u32 aaddr, baddr;
  asm volatile("{{ .reg .u64 x; cvta.to.shared.u64 x, %1; cvt.u32.u64 %0, x; }}" : "=r"(aaddr) : "l"((u64)sA));
  asm volatile("{{ .reg .u64 x; cvta.to.shared.u64 x, %1; cvt.u32.u64 %0, x; }}" : "=r"(baddr) : "l"((u64)sB));
  const u64 da = desc_tmpl | (u64)((aaddr >> 4) & 0x3FFF);
  const u64 db = desc_tmpl | (u64)((baddr >> 4) & 0x3FFF);
  float acc[NREGS], d[NREGS];
#pragma unroll
  for (int i = 0; i < NREGS; ++i) {{ acc[i] = 0.f; d[i] = 0.f; }}
  const int steps = K / 32 - SKIP_LAST;
  for (int s = 0; s < steps; ++s) {{
    const int k0 = s * 32;
    for (int x = t; x < 64 * 2; x += 128) {{      // 16-byte chunks of the A tile
      const int r = x / 2, kc = x % 2;
      *(uint4*)(sA + (r / 8) * 256 + kc * 128 + (r % 8) * 16) = *(const uint4*)(A + (u64)(m0 + r) * K + k0 + kc * 16);
    }}
    for (int x = t; x < BN * 2; x += 128) {{
      const int r = x / 2, kc = x % 2;
      *(uint4*)(sB + (r / 8) * 256 + kc * 128 + (r % 8) * 16) = *(const uint4*)(B + (u64)(n0 + r) * K + k0 + kc * 16);
    }}
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const int sd = (s % STAGE_EVERY) != 0;
#pragma unroll
    for (int i = 0; i < NREGS; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    {wgmma_asm}
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
    for (int i = 0; i < NREGS; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
    __syncthreads();
    if ((s + 1) % STAGE_EVERY == 0 || s + 1 == steps) {{
      const int kb = ((s / STAGE_EVERY) * STAGE_EVERY * 32) / 128;   // scale block of the stage's start
#pragma unroll
      for (int i = 0; i < NREGS; ++i) {{
        const int row = m0 + 16 * w + g + 8 * ((i >> 1) & 1);
        const int col = n0 + 2 * q + (i & 1) + 8 * (i >> 2);
        const float sc = SA[(u64)row * KB + kb] * SB[(u64)kb * NB + col / 128];
        acc[i] = fmaf(sc, d[i], acc[i]);
      }}
    }}
  }}
#pragma unroll
  for (int i = 0; i < NREGS; ++i) {{
    const int row = m0 + 16 * w + g + 8 * ((i >> 1) & 1);
    const int col = n0 + 2 * q + (i & 1) + 8 * (i >> 2);
#if OUT_BF16
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(acc[i]));
    ((unsigned short*)D)[(u64)row * N + col] = h;
#else
    ((float*)D)[(u64)row * N + col] = acc[i];
#endif
  }}
}}
"""


class DemoFP8Gemm:
    """A small DeepGEMM-style e4m3 GEMM kernel on the GPU, with optional planted bugs:

    ``bug="drop_last_k"``: the K loop stops one instruction early (an off-by-one bound).
    ``bug="promote_interval"``: promotes every 2*promote instructions (and applies the scale
    of the stage's first block to both), while the schedule says every ``promote``.
    """

    def __init__(self, bn: int = 128, promote: int = 4, out: str = "f32", bug: Optional[str] = None):
        if bug not in (None, "drop_last_k", "promote_interval"):
            raise InputError(f"bug must be None, 'drop_last_k' or 'promote_interval', got {bug!r}")
        self.bn, self.promote, self.out, self.bug = bn, promote, out, bug
        self.instr = f"wgmma.mma_async.sync.aligned.m64n{bn}k32.f32.e4m3.e4m3"
        self.schedule = fp8_kernel_schedule(self.instr, promote_every=promote, out_dtype=out)

    def source(self) -> str:
        nregs = self.bn // 2
        dl = ", ".join(f"%{i}" for i in range(nregs))
        outs = ", ".join(f'"+f"(d[{i}])' for i in range(nregs))
        wg = (f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{nregs + 2}, 0;\\n'
              f'{self.instr} {{{dl}}}, %{nregs}, %{nregs + 1}, p, 1, 1;\\n}}\\n"\n'
              f'      : {outs}\n      : "l"(da), "l"(db), "r"(sd));')
        every = self.promote * (2 if self.bug == "promote_interval" else 1)
        return DEMO_SOURCE.format(bn=self.bn, nregs=nregs, promote=self.promote, stage_every=every,
                                  skip_last=int(self.bug == "drop_last_k"), out_bf16=int(self.out == "bf16"),
                                  wgmma_asm=wg)

    def __call__(self, a, b_nk, scale_a, scale_b) -> np.ndarray:
        from refmodel.layouts.descriptor import MatrixDescriptor

        from gpu.kernels.runtime import compile_module, require_device

        cp = require_device()
        m, k = a.shape
        n = b_nk.shape[0]
        kern = compile_module(self.source()).get_function("demo_fp8_gemm")
        out_dt = np.uint16 if self.out == "bf16" else np.float32
        dA, dB = cp.asarray(np.ascontiguousarray(a, np.uint8)), cp.asarray(np.ascontiguousarray(b_nk, np.uint8))
        dSA = cp.asarray(np.ascontiguousarray(scale_a, np.float32))
        dSB = cp.asarray(np.ascontiguousarray(scale_b, np.float32))
        dD = cp.zeros((m, n), dtype=out_dt)
        tmpl = MatrixDescriptor(0, 128, 256).encode()
        kern((n // self.bn, m // 64), (128,), (dA, dB, dSA, dSB, dD, np.int32(m), np.int32(n), np.int32(k),
                                               np.uint64(tmpl)))
        cp.cuda.runtime.deviceSynchronize()
        d = cp.asnumpy(dD)
        return d.view(ml_dtypes.bfloat16) if self.out == "bf16" else d
