"""A real tiled FP8 GEMM kernel for the H200 (seed §1–7 in one kernel), bit-identical to
:func:`refmodel.gemm` with the same schedule.

* CTA tile 128 x 128, K blocks of 128 (one 128-byte swizzle row of e4m3);
* one producer warpgroup (one thread issues TMA loads with the 128B swizzle into a ring of
  ``stages`` shared-memory slots, ``full``/``empty`` mbarriers), two consumer warpgroups
  (64 rows each);
* per K block 4 x ``wgmma.mma_async.m64n128k32.f32.e4m3.e4m3`` at +32-byte K steps inside
  the swizzle row, ``commit_group`` / ``wait_group 0``, then the slot is released;
* optional DeepGEMM-style promotion: each K block starts a fresh partial sum (scale-d = 0),
  which is added into float32 CUDA-core accumulators with per-block scales
  ``acc = fma(RN(sa[row, kb] * sb[kb, nb]), partial, acc)`` (1x128 A scales, 128x128 B scales);
* epilogue: bf16 (``cvt.rn.bf16x2.f32`` + ``stmatrix.x4`` slice loop into a 128B-swizzled
  shared tile, ``fence.proxy.async``, TMA store) or f32 (direct stores).

M and N may have tails (TMA zero-fills the loads and clips the store); K must be a multiple of 128.
``trace()`` emits the kernel's own event trace for :mod:`refmodel.machine.pipeline`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refmodel.errors import InputError

from gpu.kernels.layouts import TMAP_DTYPE, _SBASE, _set_smem, encode_tensor_map
from gpu.kernels.runtime import compile_module, require_device

BM, BN, BK = 128, 128, 128
GROUP_M = 8                 # row blocks per rasterisation group (L2 reuse of B)
INSTR = "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"
THREADS = 384
SLOT_A = BM * BK            # 16 KiB
SLOT_B = BN * BK            # 16 KiB
OUT_TILE = BM * BN * 2      # bf16 output tile


@dataclass(frozen=True)
class GemmConfig:
    stages: int = 5
    promote: bool = True
    out: str = "bf16"       # "bf16" or "f32"
    broken: str | None = None   # a deliberately broken variant: lax_wait, no_proxy_fence, early_reuse

    def __post_init__(self):
        if self.out not in ("bf16", "f32"):
            raise InputError(f"out must be 'bf16' or 'f32', got {self.out!r}")
        if not 2 <= self.stages <= 6:
            raise InputError(f"stages must be in 2..6, got {self.stages}")
        if self.broken not in (None, "lax_wait", "no_proxy_fence", "early_reuse"):
            raise InputError(f"broken must be None, lax_wait, no_proxy_fence or early_reuse, got {self.broken!r}")

    @property
    def smem_bytes(self) -> int:
        return 1024 + self.stages * (SLOT_A + SLOT_B) + (OUT_TILE if self.out == "bf16" else 0) + 1024


def kernel_source(cfg: GemmConfig) -> str:
    d = ", ".join(f"%{i}" for i in range(64))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(64))
    wg = (f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %66, 0;\\n'
          f'{INSTR} {{{d}}}, %64, %65, p, 1, 1;\\n}}\\n" : {outs} : "l"(da), "l"(db), "r"(sd));')
    return _SBASE + f"""
struct __align__(64) TmapT {{ u64 v[16]; }};
#define STAGES {cfg.stages}
#define PROMOTE {int(cfg.promote)}
#define OUT_BF16 {int(cfg.out == "bf16")}
#define LAX_WAIT {int(cfg.broken == "lax_wait")}          // broken: wait_group 1 where 0 is needed
#define NO_PROXY_FENCE {int(cfg.broken == "no_proxy_fence")}  // broken: stmatrix -> TMA store unfenced
#define EARLY_REUSE {int(cfg.broken == "early_reuse")}    // broken: refill a slot without waiting on empty

__device__ __forceinline__ void mbar_wait(u32 bar, u32 phase) {{
  asm volatile("{{\\n.reg .pred P;\\nW:\\nmbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\\n@!P bra W;\\n}}\\n"
               :: "r"(bar), "r"(phase) : "memory");
}}
__device__ __forceinline__ u64 desc(u32 addr) {{   // K-major, 128B swizzle, SBO = 1024
  return (u64)((addr >> 4) & 0x3FFF) | ((u64)1 << 16) | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
}}

extern "C" __global__ void __launch_bounds__({THREADS}, 1)
gemm_fp8(const __grid_constant__ TmapT tma_a, const __grid_constant__ TmapT tma_b, const __grid_constant__ TmapT tma_d,
         float* __restrict__ dout, const float* __restrict__ sa, const float* __restrict__ sb,
         int M, int N, int K)
{{
  extern __shared__ __align__(1024) u8 smem_raw[];
  const u32 raw = smem_base_of(smem_raw);
  const u32 base = (raw + 1023) & ~1023u;             // 1024-aligned: the 128B swizzle pattern
  const u32 slots = base;                             // [stage][A 16K | B 16K]
  const u32 out_tile = base + STAGES * {SLOT_A + SLOT_B};
  const u32 bars = out_tile + (OUT_BF16 ? {OUT_TILE} : 0);   // full[STAGES], empty[STAGES]
  const int t = threadIdx.x, wgi = t / 128, lt = t % 128;
  // grouped rasterisation: GROUP_M row blocks share each column block while it is in L2
  const int num_m = (M + {BM} - 1) / {BM}, num_n = (N + {BN} - 1) / {BN};
  const int pid = blockIdx.x, group = {GROUP_M} * num_n, first_m = (pid / group) * {GROUP_M};
  const int gsz = min(num_m - first_m, {GROUP_M});
  const int pid_m = first_m + (pid % group) % gsz, pid_n = (pid % group) / gsz;
  const int m0 = pid_m * {BM}, n0 = pid_n * {BN};
  const int KB = K / {BK};
  if (t == 0) {{
    for (int s = 0; s < STAGES; ++s) {{
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\\n" :: "r"(bars + 8 * s));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 2;\\n" :: "r"(bars + 8 * (STAGES + s)));
    }}
    asm volatile("fence.mbarrier_init.release.cluster;\\n" ::: "memory");
  }}
  __syncthreads();
  if (wgi == 0) {{                                    // producer
    if (t == 0) {{
      for (int kb = 0; kb < KB; ++kb) {{
        const int s = kb % STAGES;
        if (kb >= STAGES && !EARLY_REUSE) mbar_wait(bars + 8 * (STAGES + s), ((kb / STAGES) - 1) & 1);
        const u32 full = bars + 8 * s, sl = slots + s * {SLOT_A + SLOT_B};
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\\n" :: "r"(full), "r"({SLOT_A + SLOT_B}) : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {{%2, %3}}], [%4];\\n"
                     :: "r"(sl), "l"((u64)&tma_a), "r"(kb * {BK}), "r"(m0), "r"(full) : "memory");
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {{%2, %3}}], [%4];\\n"
                     :: "r"(sl + {SLOT_A}), "l"((u64)&tma_b), "r"(kb * {BK}), "r"(n0), "r"(full) : "memory");
      }}
    }}
    return;
  }}
  // consumers: warpgroup c = wgi - 1 owns rows 64c .. 64c+63 of the tile
  const int c = wgi - 1, w = lt / 32, l = lt % 32, g = l / 4, q = l % 4;
  float d[64];
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) {{ d[i] = 0.f; acc[i] = 0.f; }}
  const int r0 = m0 + 64 * c + 16 * w + g, r1 = r0 + 8;
  for (int kb = 0; kb < KB; ++kb) {{
    const int s = kb % STAGES;
    mbar_wait(bars + 8 * s, (kb / STAGES) & 1);
    const u32 sl = slots + s * {SLOT_A + SLOT_B};
#pragma unroll
    for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
    asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {{
      const u64 da = desc(sl + c * 8192 + 32 * kk), db = desc(sl + {SLOT_A} + 32 * kk);
      const int sd = (kk > 0) || (!PROMOTE && kb > 0);
      {wg}
    }}
    asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");
#if LAX_WAIT
    asm volatile("wgmma.wait_group.sync.aligned 1;\\n" ::: "memory");
#else
    asm volatile("wgmma.wait_group.sync.aligned 0;\\n" ::: "memory");
#endif
#pragma unroll
    for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
    if (lt == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\\n" :: "r"(bars + 8 * (STAGES + s)) : "memory");
#if PROMOTE
    {{
      const float sbv = sb[kb * num_n + pid_n];
      const float s0 = __fmul_rn(r0 < M ? sa[(long)r0 * KB + kb] : 0.f, sbv);
      const float s1 = __fmul_rn(r1 < M ? sa[(long)r1 * KB + kb] : 0.f, sbv);
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] = __fmaf_rn(((i >> 1) & 1) ? s1 : s0, d[i], acc[i]);
    }}
#endif
  }}
#if !PROMOTE
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = d[i];
#endif
#if OUT_BF16
  u32 p[32];
#pragma unroll
  for (int j = 0; j < 32; ++j) asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;\\n" : "=r"(p[j]) : "f"(acc[2 * j + 1]), "f"(acc[2 * j]));
#pragma unroll
  for (int sl8 = 0; sl8 < 8; ++sl8) {{
    const int mm = l / 8;
    const int row = 64 * c + 16 * w + (l % 8) + 8 * (mm % 2);
    const int col = 16 * sl8 + 8 * (mm / 2);
    u32 a = out_tile + (col / 64) * ({BM} * 128) + row * 128 + (col % 64) * 2;
    a ^= ((a >> 7) & 7u) << 4;
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {{%1, %2, %3, %4}};\\n"
                 :: "r"(a), "r"(p[4 * sl8]), "r"(p[4 * sl8 + 1]), "r"(p[4 * sl8 + 2]), "r"(p[4 * sl8 + 3]) : "memory");
  }}
#if !NO_PROXY_FENCE
  asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");
#endif
  asm volatile("bar.sync 1, 256;\\n" ::: "memory");
  if (t == 128) {{
    for (int j = 0; j < 2; ++j)
      asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {{%1, %2}}], [%3];\\n"
                   :: "l"((u64)&tma_d), "r"(n0 + 64 * j), "r"(m0), "r"(out_tile + j * {BM} * 128) : "memory");
    asm volatile("cp.async.bulk.commit_group;\\n" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;\\n" ::: "memory");
  }}
#else
#pragma unroll
  for (int i = 0; i < 64; ++i) {{
    const int row = ((i >> 1) & 1) ? r1 : r0;
    const int col = n0 + 2 * q + (i & 1) + 8 * (i >> 2);
    if (row < M && col < N) dout[(long)row * N + col] = acc[i];
  }}
#endif
}}
"""


def _tmap(ptr: int, rows: int, cols: int, eb: int, box_rows: int, box_cols: int) -> np.void:
    raw = encode_tensor_map(ptr, (rows, cols), eb, (box_rows, box_cols), 3)
    tm = np.zeros((), TMAP_DTYPE)
    tm["v"] = np.frombuffer(raw, dtype=np.uint64)
    return tm[()]


def gemm_fp8(a, b_nk, scale_a=None, scale_b=None, *, cfg: GemmConfig = GemmConfig(), timing: int = 0):
    """D (M, N) of the kernel on the GPU.  ``a`` (M, K) and ``b_nk`` (N, K) e4m3 codes (uint8 or
    ml_dtypes arrays, numpy or cupy); scales f32 (M, K/128) and (K/128, ceil(N/128)) when
    ``cfg.promote``.  Returns (D on the device as a cupy array, seconds per run if ``timing``)."""
    cp = require_device()
    A = cp.asarray(a).view(cp.uint8) if not hasattr(a, "view") or a.dtype.itemsize == 1 else None
    if A is None:
        raise InputError("a must hold 1-byte e4m3 codes")
    B = cp.asarray(b_nk).view(cp.uint8)
    M, K = A.shape
    N = B.shape[0]
    if K % BK or B.shape[1] != K:
        raise InputError(f"K must be a multiple of {BK} and b_nk (N, K) must match a (M, K); got a {A.shape}, b {B.shape}")
    if M % 16 or N % 16:
        raise InputError("M and N must be multiples of 16 (TMA row strides are 16-byte aligned for the bf16 output)")
    KB, NB = K // BK, -(-N // BN)
    sa = cp.asarray(np.ones((M, KB), np.float32) if scale_a is None else scale_a, dtype=cp.float32)
    sb = cp.asarray(np.ones((KB, NB), np.float32) if scale_b is None else scale_b, dtype=cp.float32)
    if sa.shape != (M, KB) or sb.shape != (KB, NB):
        raise InputError(f"scale_a must be (M, K/128) = {(M, KB)} and scale_b (K/128, ceil(N/128)) = {(KB, NB)}")
    if cfg.out == "bf16":
        D = cp.zeros((M, N), dtype=cp.uint16)
    else:
        D = cp.zeros((M, N), dtype=cp.float32)
    ta = _tmap(int(A.data.ptr), M, K, 1, BM, BK)
    tb = _tmap(int(B.data.ptr), N, K, 1, BN, BK)
    td = _tmap(int(D.data.ptr), M, N, 2, BM, 64) if cfg.out == "bf16" else ta
    k = compile_module(kernel_source(cfg)).get_function("gemm_fp8")
    _set_smem(k, cfg.smem_bytes)
    grid = (NB * -(-M // BM),)
    args = (ta, tb, td, D if cfg.out == "f32" else cp.zeros(1, cp.float32), sa, sb, np.int32(M), np.int32(N), np.int32(K))
    k(grid, (THREADS,), args, shared_mem=cfg.smem_bytes)
    cp.cuda.runtime.deviceSynchronize()
    secs = None
    if timing:
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(timing):
            k(grid, (THREADS,), args, shared_mem=cfg.smem_bytes)
        stop.record()
        stop.synchronize()
        secs = cp.cuda.get_elapsed_time(start, stop) / 1e3 / timing
    return D, secs


def reference(a, b_nk, scale_a=None, scale_b=None, *, cfg: GemmConfig = GemmConfig()) -> np.ndarray:
    """The kernel's output as refmodel computes it (:func:`refmodel.verify.replay_gemm.kernel_reference`)."""
    from refmodel.verify.replay_gemm import kernel_reference

    return kernel_reference(a, b_nk, scale_a, scale_b, promote=cfg.promote, out=cfg.out)


def trace(cfg: GemmConfig = GemmConfig(), K: int = 1024, broken: str | None = None):
    """The event trace this kernel performs for one CTA tile (refmodel.machine.pipeline format):
    ``cfg.stages`` ring slots of A 128x128 + B 128x128 e4m3 with the 128B swizzle, full/empty
    mbarriers, two consumer warpgroups issuing one k-block of wgmmas per slot then
    ``wait_group 0`` and releasing the slot, promotion after every k-block (``cfg.promote``), the
    stmatrix + fence.proxy.async + TMA-store epilogue.  ``broken`` picks a deliberately broken
    variant (see refmodel.machine.pipeline.BROKEN) for the checker to flag."""
    from refmodel.machine.pipeline import gemm_mainloop_trace

    if K % BK:
        raise InputError(f"K must be a multiple of {BK}, got {K}")
    return gemm_mainloop_trace(cfg.stages, K // BK, 0 if broken != "lax_wait" else 1, 2,
                               1 if cfg.promote else None, instr=INSTR, out_bytes=2, broken=broken)


__all__ = ["GemmConfig", "kernel_source", "gemm_fp8", "reference", "trace", "INSTR"]
