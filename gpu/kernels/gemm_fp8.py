"""A real tiled FP8 GEMM kernel for the H200 (seed §1–7 in one kernel), bit-identical to
:func:`refmodel.gemm` with the same schedule.

Two schedules (``GemmConfig.schedule``):

* ``"persistent"`` (the default; :mod:`gpu.kernels.gemm_fp8_source` documents it): one CTA per SM
  walking tiles in grouped raster order, producer/consumer register rebalancing (setmaxnreg), with
  promotion the next K block's wgmmas run (second accumulator set) while the previous block is
  promoted (or, ``partials=1``, one set waited for and promoted while the other consumer's wgmmas run),
  without promotion a ``wait_group 1`` chain; tiles 128 x ``bn`` (``bn`` 128 or 192 with promotion, 144 too with
  per-tensor scales, 128 or 256 without, the default there); per-warpgroup TMA-store epilogue overlapping the
  next tile.  Two promotion recipes: blockwise scales (the default, DeepSeek's: 1x128 A scales, 128x128 B
  scales at every promotion) and, with ``scales="tensor"``, torch._scaled_mm's per-tensor precise recipe
  (``acc += partial``, both scales once in the epilogue; :func:`tensor_config` picks the tile width).
* ``"simple"`` (the original kernel, and the one the ``broken`` variants modify), described below.

The numerics are the same in both (per output element: per K block 4 chained k32 wgmmas, a fresh
partial per block with promotion, one chain over K without; the wider m64n256 instruction computes
each column as m64n128 does), so :func:`reference` is one function for every config.

Simple schedule:

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

from gpu.kernels import gemm_fp8_source as _src
from gpu.kernels.layouts import _SBASE, TMAP_DTYPE, _set_smem, encode_tensor_map
from gpu.kernels.runtime import compile_module, max_active_clusters, require_device
from gpu.kernels.sass import check_sixteenths
from refmodel.errors import InputError

BM, BN, BK = 128, 128, 128
GROUP_M = 8                 # row blocks per rasterisation group (L2 reuse of B)
INSTR = "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"
THREADS = 384
SLOT_A = BM * BK            # 16 KiB
SLOT_B = BN * BK            # 16 KiB
OUT_TILE = BM * BN * 2      # bf16 output tile


SMEM_MAX = 232448           # dynamic shared memory a Hopper block may opt into (227 KiB)
SCHEDULES = ("persistent", "simple")
XTILE_DEFAULT = False       # the default of GemmConfig.xtile with promotion in the persistent schedule
SCALES_DEFAULT = "smem"     # the default of GemmConfig.scales with promotion in the persistent schedule (H200: bench/results/gemm_kernel_h200.json)


@dataclass(frozen=True)
class GemmConfig:
    """Kernel variant.  ``stages`` (ring slots; default: 5 for "simple", as many as fit for
    "persistent"), ``promote`` (per-K-block promotion with scales), ``out`` ("bf16" or "f32"),
    ``broken`` (a deliberately broken variant of the simple schedule: lax_wait, no_proxy_fence,
    early_reuse), ``schedule`` ("persistent" or "simple"; default "persistent", "simple" with
    ``broken``), ``bn`` (tile N of the persistent schedule: 128 or 192 with promotion (and 144 with per-tensor scales, whose tile
    count suits 8192-wide outputs: cuBLAS picks 144 there), 128 or 256 without;
    default 128 with promotion, 256 without), ``partials`` (persistent with promotion: 2, the default for
    bn=128: two partial register sets, block kb+1 runs while kb is promoted; 1, the only choice for bn=192: one
    set, each block waited for (``wait_group 0``) and promoted while the other consumer warpgroup's wgmmas run,
    as DeepGEMM does), ``cluster`` (persistent: 2 launches CTA pairs that share the B
    tile through TMA multicast; experimental), ``xtile`` (persistent with promotion: the next
    tile's first k-block is issued before the current tile's last promotion and epilogue), ``scales``
    (persistent with promotion: "smem", the default: the launcher transposes scale_a to a k-block-major
    (K/128, M padded) array on the device and the producer bulk-copies each stage's 128 A-row scales and
    its B scale into shared memory next to the A/B slot; "global": the consumers load them from global
    memory, one k-block ahead with one partial set; "tensor": per-tensor scales, torch._scaled_mm's own
    recipe with use_fast_accum=False, ``acc += partial`` per K block and ``D = RN(RN(sa * sb) * acc)``,
    scale_a and scale_b one float each).  All are bit-checked on the H200.  Unset fields are resolved in place."""

    stages: int | None = None
    promote: bool = True
    out: str = "bf16"       # "bf16" or "f32"
    broken: str | None = None   # a deliberately broken variant: lax_wait, no_proxy_fence, early_reuse
    schedule: str | None = None
    bn: int | None = None
    cluster: int = 1        # persistent: 2 = CTA pairs sharing the B tile by TMA multicast
    xtile: bool | None = None   # persistent + promote: pipeline k-blocks across tile boundaries
    scales: str | None = None   # persistent + promote: "smem" (staged by the producer) or "global"
    partials: int | None = None  # persistent + promote: 2 register sets (kb+1 runs while kb is promoted) or 1 (wait_group 0)
    ffma_yield: int = 0     # promote: sixteenths of each promotion FFMA run rewritten to yield (gpu.kernels.sass)

    def __post_init__(self):
        if self.out not in ("bf16", "f32"):
            raise InputError(f"out must be 'bf16' or 'f32', got {self.out!r}")
        if self.broken not in (None, "lax_wait", "no_proxy_fence", "early_reuse"):
            raise InputError(f"broken must be None, lax_wait, no_proxy_fence or early_reuse, got {self.broken!r}")
        sched = self.schedule if self.schedule is not None else ("simple" if self.broken else "persistent")
        if sched not in SCHEDULES:
            raise InputError(f"schedule must be 'persistent' or 'simple', got {self.schedule!r}")
        if self.broken and sched != "simple":
            raise InputError("broken variants exist only for schedule='simple'")
        set_ = lambda k, v: object.__setattr__(self, k, v)  # (frozen: resolve defaults once)
        set_("schedule", sched)
        check_sixteenths(self.ffma_yield)
        if self.ffma_yield and not self.promote:
            raise InputError("ffma_yield needs promote=True (without promotion the kernel has no FFMAs)")
        if self.cluster not in (1, 2) or isinstance(self.cluster, bool):
            raise InputError(f"cluster must be 1 or 2, got {self.cluster!r}")
        if self.cluster == 2 and sched != "persistent":
            raise InputError("cluster=2 needs schedule='persistent'")
        xtile = XTILE_DEFAULT and self.promote and sched == "persistent" if self.xtile is None else bool(self.xtile)
        if xtile and not (self.promote and sched == "persistent"):
            raise InputError("xtile=1 needs promote=True and schedule='persistent'")
        set_("xtile", xtile)
        pp = self.promote and sched == "persistent"
        scales = (SCALES_DEFAULT if pp else "global") if self.scales is None else self.scales
        if scales not in ("smem", "global", "tensor"):
            raise InputError(f"scales must be 'smem', 'global' or 'tensor', got {scales!r}")
        if scales in ("smem", "tensor") and not pp:
            raise InputError(f"scales={scales!r} needs promote=True and schedule='persistent'")
        set_("scales", scales)
        if self.partials is not None and not pp:
            raise InputError("partials needs promote=True and schedule='persistent'")
        if sched == "simple":
            if self.bn not in (None, BN):
                raise InputError(f"schedule='simple' has bn = {BN}, got {self.bn!r}")
            set_("bn", BN)
            stages = 5 if self.stages is None else self.stages
            if not isinstance(stages, int) or not 2 <= stages <= 6:
                raise InputError(f"stages must be in 2..6, got {stages!r}")
            set_("stages", stages)
            return
        bn = (128 if self.promote else 256) if self.bn is None else self.bn
        if bn not in (128, 144, 192, 256):
            raise InputError(f"bn must be 128, 144, 192 or 256, got {bn!r}")
        if bn == 144 and scales != "tensor":
            raise InputError("bn=144 needs scales='tensor' (a 144-column tile straddles 128-column B-scale blocks)")
        if bn == 144 and self.cluster == 2:
            raise InputError("cluster=2 supports bn 128 and 256, got bn=144")
        if bn == 144 and xtile:
            raise InputError("bn=144 does not take xtile=1 (its registers spill)")
        if bn == 256 and self.promote:
            raise InputError("bn=256 needs promote=False (an m64n256 partial plus the f32 sums exceed the registers)")
        if bn == 192 and not self.promote:
            raise InputError("bn=192 needs promote=True (without promotion bn=256 is the wide tile)")
        if bn == 192 and self.cluster == 2:
            raise InputError("cluster=2 supports bn 128 and 256, got bn=192")
        if self.promote:      # (no promotion: one accumulator chain, partials stays None)
            partials = (2 if bn in (128, 144) else 1) if self.partials is None else self.partials
            if partials not in (1, 2) or isinstance(partials, bool):
                raise InputError(f"partials must be 1 or 2, got {partials!r}")
            if partials == 2 and bn == 192:
                raise InputError("bn=192 needs partials=1 (two m64n192 partials plus the f32 sums exceed the registers)")
            if partials == 1 and self.cluster == 2:
                raise InputError("cluster=2 needs partials=2")
            set_("partials", partials)
        set_("bn", bn)
        fits = [n for n in range(2, 9) if _src.smem_bytes(n, bn, self.out == "bf16", scales == "smem") <= SMEM_MAX]
        stages = fits[-1] if self.stages is None else self.stages
        if not isinstance(stages, int) or stages not in fits:
            raise InputError(f"stages must be in 2..{fits[-1]} for bn={bn} out={self.out}, got {stages!r}")
        set_("stages", stages)

    @property
    def instr(self) -> str:
        return _src.instr_for(self.bn)

    @property
    def smem_bytes(self) -> int:
        if self.schedule == "persistent":
            return _src.smem_bytes(self.stages, self.bn, self.out == "bf16", self.scales == "smem")
        return 1024 + self.stages * (SLOT_A + SLOT_B) + (OUT_TILE if self.out == "bf16" else 0) + 1024

    @property
    def name(self) -> str:
        """A short label, e.g. ``persistent-p1-bn128-s6-bf16``."""
        b = f"-{self.broken}" if self.broken else ""
        cl = ("-c2" if self.cluster == 2 else "") + ("-x" if self.xtile else "") + ("-q1" if self.partials == 1 else "") + \
            ("-sg" if self.promote and self.schedule == "persistent" and self.scales == "global" else "") + \
            ("-st" if self.scales == "tensor" else "") + \
            (f"-y{self.ffma_yield}" if self.ffma_yield else "")
        return f"{self.schedule}-p{int(self.promote)}-bn{self.bn}-s{self.stages}{cl}-{self.out}{b}"


def parse_config(text: str) -> GemmConfig:
    """A GemmConfig from ``key=value`` pairs joined by commas, e.g. ``promote=0,bn=256,stages=4``
    (keys: stages, promote, out, broken, schedule, bn, cluster, xtile, scales, partials, ffma_yield); the empty string
    is the default config."""
    kw: dict = {}
    for part in filter(None, (x.strip() for x in text.split(","))):
        k, eq, v = part.partition("=")
        if not eq or k not in ("stages", "promote", "out", "broken", "schedule", "bn", "cluster", "xtile", "scales",
                               "partials", "ffma_yield"):
            raise InputError(f"config items are key=value with keys stages, promote, out, broken, schedule, bn, "
                             f"cluster, xtile, scales, partials, ffma_yield; got {part!r}")
        if k in ("stages", "bn", "cluster", "partials", "ffma_yield"):
            if not v.isdigit():
                raise InputError(f"{k} must be an integer, got {v!r}")
            kw[k] = int(v)
        elif k in ("promote", "xtile"):
            if v not in ("0", "1", "true", "false", "True", "False"):
                raise InputError(f"{k} must be 0 or 1, got {v!r}")
            kw[k] = v in ("1", "true", "True")
        else:
            kw[k] = v
    return GemmConfig(**kw)


def kernel_source(cfg: GemmConfig) -> str:
    """CUDA source (without runtime.PRELUDE) of the kernel ``gemm_fp8`` for ``cfg``."""
    if cfg.schedule == "persistent":
        return _src.persistent_source(cfg.stages, cfg.bn, cfg.promote, cfg.out == "bf16", cfg.cluster, cfg.xtile,
                                      cfg.scales == "smem", cfg.partials, cfg.scales == "tensor")
    return _simple_source(cfg)


def _simple_source(cfg: GemmConfig) -> str:
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


_PREP_SRC = r"""
extern "C" __global__ void gemm_fp8_scales(const float* __restrict__ sa, const float* __restrict__ sb,
                                           float* __restrict__ sa_t, float* __restrict__ sb4,
                                           int M, int KB, int NB, int MP) {
  // sa (M, KB) -> sa_t (KB, MP) (rows >= M: 0); sb (KB, NB) -> sb4[kb, nb, 0], and sb[kb, min(nb + 1, NB - 1)]
  // -> sb4[kb, nb, 1] (a 192-column tile starting in block nb reaches into nb + 1)
  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x, na = (long)KB * MP;
  if (i < na) {
    const int kb = (int)(i / MP), m = (int)(i % MP);
    sa_t[i] = m < M ? sa[(long)m * KB + kb] : 0.f;
  } else if (i < na + (long)KB * NB) {
    const long j = i - na;
    sb4[4 * j] = sb[j];
    sb4[4 * j + 1] = sb[j % NB == NB - 1 ? j : j + 1];
  }
}
"""


def _tmap(ptr: int, rows: int, cols: int, eb: int, box_rows: int, box_cols: int) -> np.void:
    raw = encode_tensor_map(ptr, (rows, cols), eb, (box_rows, box_cols), 3)
    tm = np.zeros((), TMAP_DTYPE)
    tm["v"] = np.frombuffer(raw, dtype=np.uint64)
    return tm[()]


def tile_count(M: int, N: int, bn: int) -> int:
    """How many 128 x ``bn`` tiles cover an M x N output."""
    return -(-M // BM) * -(-N // bn)


def tile_rounds(M: int, N: int, bn: int, sms: int = 132) -> int:
    """Rounds of tiles a persistent launch of ``sms`` CTAs runs on an M x N output with 128 x ``bn``
    tiles: the busiest CTA's tile count."""
    return -(-tile_count(M, N, bn) // sms)


def choose_bn(M: int, N: int, candidates: tuple[int, ...] = (128, 144), sms: int = 132) -> int:
    """The tile width of ``candidates`` whose busiest CTA has the least work, ``tile_rounds * bn`` (a tile's
    time grows with its width); ties go to the narrower tile.  For per-tensor scales on the H200's 132
    SMs this picks 128 at 4096^2 (8 rounds either way) and 144 at 8192^2 (28 rounds of 144 against 32 of
    128), the faster one at both in ``bench/results/gemm_kernel_h200.json``."""
    return min(sorted(candidates), key=lambda bn: tile_rounds(M, N, bn, sms) * bn)


def tensor_config(M: int, N: int, sms: int = 132, **kw) -> GemmConfig:
    """The per-tensor-scales config (torch._scaled_mm's precise recipe) for an M x N output: bn by
    :func:`choose_bn`; other GemmConfig fields from ``kw``."""
    return GemmConfig(scales="tensor", bn=choose_bn(M, N, sms=sms), **kw)


def _sm_count(cp) -> int:
    return int(cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["multiProcessorCount"])


def launcher(a, b_nk, scale_a=None, scale_b=None, *, cfg: GemmConfig = GemmConfig()):
    """Prepare one GEMM: returns ``(launch, D)``; ``launch()`` enqueues the kernel on the current
    stream (no synchronisation) writing D (M, N) (bf16 bits as uint16, or f32) on the device.
    Arguments as :func:`gemm_fp8`."""
    cp = require_device()
    A = cp.asarray(a).view(cp.uint8) if not hasattr(a, "view") or a.dtype.itemsize == 1 else None
    if A is None:
        raise InputError("a must hold 1-byte e4m3 codes")
    B = cp.asarray(b_nk).view(cp.uint8)
    if A.ndim != 2 or B.ndim != 2:
        raise InputError(f"a (M, K) and b_nk (N, K) must be 2-d, got {A.shape} and {B.shape}")
    M, K = A.shape
    N = B.shape[0]
    if K % BK or K == 0 or B.shape[1] != K:
        raise InputError(f"K must be a positive multiple of {BK} and b_nk (N, K) must match a (M, K); got a {A.shape}, b {B.shape}")
    if M % 16 or N % 16 or M == 0 or N == 0:
        raise InputError("M and N must be positive multiples of 16 (TMA row strides are 16-byte aligned for the bf16 output)")
    A, B = cp.ascontiguousarray(A), cp.ascontiguousarray(B)
    KB, NB = K // BK, -(-N // BN)
    if cfg.scales == "tensor":      # one float each, read by the kernel on the device (no host sync)
        one = np.ones((), np.float32)
        sa = cp.asarray(one if scale_a is None else scale_a, dtype=cp.float32).reshape(-1)
        sb = cp.asarray(one if scale_b is None else scale_b, dtype=cp.float32).reshape(-1)
        if sa.size != 1 or sb.size != 1:
            raise InputError(f"scales='tensor' takes one scale_a and one scale_b value, got {sa.size} and {sb.size}")
    else:
        sa = cp.ascontiguousarray(cp.asarray(np.ones((M, KB), np.float32) if scale_a is None else scale_a, dtype=cp.float32))
        sb = cp.ascontiguousarray(cp.asarray(np.ones((KB, NB), np.float32) if scale_b is None else scale_b, dtype=cp.float32))
        if sa.shape != (M, KB) or sb.shape != (KB, NB):
            raise InputError(f"scale_a must be (M, K/128) = {(M, KB)} and scale_b (K/128, ceil(N/128)) = {(KB, NB)}")
    if cfg.out == "bf16":
        D = cp.zeros((M, N), dtype=cp.uint16)
    else:
        D = cp.zeros((M, N), dtype=cp.float32)
    persistent = cfg.schedule == "persistent"
    ta = _tmap(int(A.data.ptr), M, K, 1, BM, BK)
    tb = _tmap(int(B.data.ptr), N, K, 1, cfg.bn // cfg.cluster, BK)
    td = _tmap(int(D.data.ptr), M, N, 2, 64 if persistent else BM, 64) if cfg.out == "bf16" else ta
    k = compile_module(kernel_source(cfg), ffma_yield=cfg.ffma_yield).get_function("gemm_fp8")
    _set_smem(k, cfg.smem_bytes)
    tiles = tile_count(M, N, cfg.bn)
    if cfg.cluster == 2:      # CTA pairs: rows 2p and 2p+1 of one column block
        # a persistent kernel must launch no more pairs than fit at once: a pair that waits for a free
        # one runs its whole share of tiles after the others (#SMs / 2 is not that number when GPCs
        # have odd SM counts); the driver's occupancy query says how many fit
        units = -(-N // cfg.bn) * -(-M // (2 * BM))
        fit = max_active_clusters(k, THREADS, cfg.smem_bytes, 2) or _sm_count(cp) // 2
        grid = (2 * min(units, fit),)
    else:
        grid = (min(tiles, _sm_count(cp)) if persistent else tiles,)
    dummy = cp.zeros(1, cp.float32)
    prep = None
    if cfg.scales == "smem":
        # the kernel reads sa_t (KB, MP): sa transposed k-block-major, rows M..MP-1 zero (MP a multiple of
        # 256: every tile's, and a cluster pair's, 128-float copy is in bounds and 16-byte aligned), and
        # sb4 (KB, NB, 4) with sb[kb, nb] at [kb, nb, 0]; both are rebuilt on the device by every launch
        MP = -(-M // 256) * 256
        sa_t = cp.zeros((KB, MP), cp.float32)
        sb4 = cp.zeros((KB, NB, 4), cp.float32)
        pk = compile_module(_PREP_SRC).get_function("gemm_fp8_scales")
        total = KB * MP + KB * NB
        pargs = (sa, sb, sa_t, sb4, np.int32(M), np.int32(KB), np.int32(NB), np.int32(MP))
        pgrid = (-(-total // 256),)

        def prep():
            pk(pgrid, (256,), pargs)
        args = (ta, tb, td, D if cfg.out == "f32" else dummy, sa_t, sb4, np.int32(M), np.int32(N), np.int32(K))
        keep = (A, B, sa, sb, sa_t, sb4, dummy)
    else:
        args = (ta, tb, td, D, sa, sb, np.int32(M), np.int32(N), np.int32(K))
        keep = (A, B, sa, sb, dummy)     # the launch closure keeps the device buffers alive

    def kernel_only():        # the GEMM kernel without the scale-layout kernel before it (the bench times both)
        k(grid, (THREADS,), args, shared_mem=cfg.smem_bytes)
        return keep

    def launch():
        if prep is not None:
            prep()
        return kernel_only()

    launch.grid = grid        # (CTAs launched: provenance for the bench)
    launch.kernel_only = kernel_only if prep is not None else None
    return launch, D


def gemm_fp8(a, b_nk, scale_a=None, scale_b=None, *, cfg: GemmConfig = GemmConfig(), timing: int = 0):
    """D (M, N) of the kernel on the GPU.  ``a`` (M, K) and ``b_nk`` (N, K) e4m3 codes (uint8 or
    ml_dtypes arrays, numpy or cupy); scales f32 (M, K/128) and (K/128, ceil(N/128)) when
    ``cfg.promote`` (one float each with ``cfg.scales == "tensor"``).  Returns (D on the device as a
    cupy array, seconds per run if ``timing``)."""
    cp = require_device()
    launch, D = launcher(a, b_nk, scale_a, scale_b, cfg=cfg)
    launch()
    cp.cuda.runtime.deviceSynchronize()
    secs = None
    if timing:
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(timing):
            launch()
        stop.record()
        stop.synchronize()
        secs = cp.cuda.get_elapsed_time(start, stop) / 1e3 / timing
    return D, secs


def reference(a, b_nk, scale_a=None, scale_b=None, *, cfg: GemmConfig = GemmConfig()) -> np.ndarray:
    """The kernel's output as refmodel computes it (:func:`refmodel.verify.replay_gemm.kernel_reference`),
    for every config: the schedule and tile width do not change any output's arithmetic (refmodel.gemm
    treats an m64n256 instruction as m64n128 repeated; padding columns are independent)."""
    from refmodel.verify.replay_gemm import kernel_reference

    return kernel_reference(a, b_nk, scale_a, scale_b, promote=cfg.promote, out=cfg.out,
                            tensor_scales=cfg.scales == "tensor")


def trace(cfg: GemmConfig = GemmConfig(), K: int = 1024, broken: str | None = None, tiles: int = 2):
    """The event trace this kernel performs in one CTA (refmodel.machine.pipeline format).

    ``cfg.schedule == "persistent"``: ``tiles`` consecutive tiles of one CTA (the ring runs on
    across tiles), see :func:`_persistent_trace`.  ``"simple"`` (or ``broken``, which describes
    ``GemmConfig(broken=...)``, a variant of the simple schedule): one CTA tile, ``cfg.stages`` ring
    slots of A 128x128 + B 128x128 e4m3 with the 128B swizzle, full/empty mbarriers, two consumer
    warpgroups issuing one k-block of wgmmas per slot then ``wait_group 0`` and releasing the slot,
    promotion after every k-block (``cfg.promote``), the stmatrix + fence.proxy.async + TMA-store
    epilogue.  ``broken`` picks a deliberately broken variant (see refmodel.machine.pipeline.BROKEN)
    for the checker to flag."""
    from refmodel.machine.pipeline import gemm_mainloop_trace

    if K % BK or K <= 0:
        raise InputError(f"K must be a positive multiple of {BK}, got {K}")
    broken = cfg.broken if broken is None else broken
    if broken is not None and cfg.schedule != "simple":
        cfg = GemmConfig(promote=cfg.promote, out=cfg.out, broken=broken)
    if cfg.schedule == "persistent":
        if cfg.cluster != 1:
            raise InputError("trace() models one CTA: cluster=2 (multicast into the peer CTA) has no trace")
        return _persistent_trace(cfg, K // BK, tiles)
    return gemm_mainloop_trace(cfg.stages, K // BK, 0 if broken != "lax_wait" else 1, 2,
                               1 if cfg.promote else None, instr=INSTR, out_bytes=2, broken=broken)


def _persistent_trace(cfg: GemmConfig, KB: int, tiles: int):
    """Events of the persistent kernel for ``tiles`` tiles of one CTA, ``KB`` k-blocks each: the
    producer's ring of ``cfg.stages`` slots (A 128 x 128 B, B ``bn`` x 128 B) continuing across
    tiles; per consumer warpgroup with promotion and one partial set (``cfg.partials == 1``): per k-block
    issue into d0, ``wait_group 0``, release, promote (with ``cfg.xtile`` the next tile's block 0 is
    issued before the tile's epilogue); with two sets: issue k-block 0 into d0, then per k-block kb
    issue kb+1 into the other set (d1/d0), ``wait_group 1``, release kb's slot, read kb's set and
    write the f32 sums ``f`` (the promotion FMA), the last k-block with ``wait_group 0`` (with
    ``cfg.xtile`` the next block may be the next tile's first, issued before the tile's last
    promotion and epilogue; only the CTA's last block drains); without
    promotion one chain into d with ``wait_group 1`` releasing the previous slot after each
    commit, ``wait_group 0`` at the end; epilogue per warpgroup and 64-column chunk: named
    barrier, stmatrix into one of its two 64 x 64 staging buffers (alternately by the warpgroup's running
    chunk count, after ``cp.async.bulk.wait_group.read 1``: ``bulk_wait_group``), fence.proxy.async, named
    barrier, TMA store of the buffer (bf16, and ``wait_group 0`` on the stores before exit; with f32 the
    accumulators are read and stored directly)."""
    from refmodel.layouts.descriptor import make_descriptor
    from refmodel.machine.pipeline import _schedule

    if not isinstance(tiles, int) or not 1 <= tiles <= 16:
        raise InputError(f"tiles must be an int in 1..16, got {tiles!r}")
    S, bn, nacc = cfg.stages, cfg.bn, cfg.bn // 2
    instr = cfg.instr
    slot_b = SLOT_A + bn * 128
    stage_out = S * slot_b
    smem_sc = cfg.scales == "smem"      # each stage's scales: a bulk copy into sc_base + s * SC_BYTES
    sc_base = stage_out + (_src.STAGE_OUT if cfg.out == "bf16" else 0)
    sc_b = _src.SC_BYTES
    prod = "producer"
    cons = ["consumer0", "consumer1"]
    prefix = []
    for s in range(S):
        prefix.append({"op": "mbarrier.init", "bar": f"full{s}", "count": 1, "t": prod, "line": "init"})
        prefix.append({"op": "mbarrier.init", "bar": f"empty{s}", "count": 2, "t": prod, "line": "init"})
    prefix.append({"op": "bar.sync", "t": "all", "line": "init: __syncthreads after mbarrier.init"})
    p: list[dict] = []
    for it in range(tiles * KB):
        s, r = it % S, it // S
        tag = f"producer tile={it // KB} k={it % KB} slot={s}"
        p += [{"op": "mbarrier.wait", "bar": f"empty{s}", "phase": (r & 1) ^ 1, "t": prod, "line": tag},
              {"op": "mbarrier.arrive_expect_tx", "bar": f"full{s}", "bytes": slot_b + (sc_b if smem_sc else 0),
               "t": prod, "line": tag},
              {"op": "tma_load", "bar": f"full{s}", "smem": [[s * slot_b, s * slot_b + SLOT_A]], "t": prod,
               "line": tag + " A"},
              {"op": "tma_load", "bar": f"full{s}", "smem": [[s * slot_b + SLOT_A, (s + 1) * slot_b]], "t": prod,
               "line": tag + " B"}]
        if smem_sc:
            p.append({"op": "tma_load", "bar": f"full{s}", "smem": [[sc_base + s * sc_b, sc_base + (s + 1) * sc_b]],
                      "t": prod, "line": tag + " scales (cp.async.bulk sa_t[kb, m0:m0+128], sb[kb, nb])"})
    programs = {prod: p}
    for c, role in enumerate(cons):
        q: list[dict] = []
        ctr = {"issue": 0, "release": 0, "chunk": 0}

        def issue(regs, tag, q=q, role=role, ctr=ctr, c=c):
            it = ctr["issue"]
            ctr["issue"] += 1
            s, r = it % S, it // S
            q.append({"op": "mbarrier.wait", "bar": f"full{s}", "phase": r & 1, "t": role, "line": tag})
            q.append({"op": "wgmma.fence", "t": role, "line": tag})
            for j in range(4):
                da = make_descriptor(s * slot_b + c * 8192, swizzle="128B", rows=64, k=32, elem_bytes=1, k_step=j)
                db = make_descriptor(s * slot_b + SLOT_A, swizzle="128B", rows=bn, k=32, elem_bytes=1, k_step=j)
                q.append({"op": "mma_async", "id": f"i{it}.{j}", "acc": f"{regs}[0:{nacc}]", "desc_a": hex(int(da)),
                          "desc_b": hex(int(db)), "instr": instr, "t": role, "line": tag})
            q.append({"op": "commit_group", "t": role, "line": tag})
            if smem_sc:     # this warpgroup's 64 row scales and the B scale of the slot
                sc = sc_base + s * sc_b
                q.append({"op": "ld_shared", "smem": [[sc + 256 * c, sc + 256 * c + 256], [sc + 512, sc + (520 if bn == 192 else 516)]],
                          "t": role, "line": tag + ": ld.shared the k-block's scales"})

        def release(tag, q=q, role=role, ctr=ctr):
            s = ctr["release"] % S
            ctr["release"] += 1
            q.append({"op": "mbarrier.arrive", "bar": f"empty{s}", "t": role, "line": f"{tag}: release slot {s}"})

        def wait(n, tag, q=q, role=role):
            q.append({"op": "wait_group", "n": n, "t": role, "line": tag})

        def epilogue(tile, final, q=q, role=role, c=c, ctr=ctr):
            tag = f"{role} tile={tile} epilogue"
            q.append({"op": "reg_read", "regs": final, "t": role, "line": tag + ": cvt / store the accumulators"})
            if cfg.out != "bf16":
                return
            st = stage_out + c * 16384
            for ch in range(bn // 64):     # the staging buffers alternate by the warpgroup's running chunk count
                sync, buf = f"epi{c}.{tile}.{ch}", st + (ctr["chunk"] % 2) * 8192
                ctr["chunk"] += 1
                # the store issued from this buffer two chunks ago must have read it: wait_group.read 1
                q.append({"op": "bulk_wait_group", "n": 1, "t": role,
                          "line": tag + ": cp.async.bulk.wait_group.read 1 (the latest store may still read)"})
                q.append({"op": "bar.sync", "t": role, "line": tag + ": named barrier (staging buffer free)",
                          "_sync": sync + "a", "_with": [role]})
                q.append({"op": "stmatrix", "smem": [[buf, buf + 8192]], "t": role, "line": tag + f" chunk {ch}"})
                q.append({"op": "fence.proxy.async", "t": role, "line": tag})
                q.append({"op": "bar.sync", "t": role, "line": tag + ": named barrier (staging buffer written)",
                          "_sync": sync + "b", "_with": [role]})
                q.append({"op": "tma_store", "smem": [[buf, buf + 8192]], "t": role,
                          "line": tag + f": TMA store of 64-column chunk {ch}"})

        def promote(regs, tag, q=q, role=role):
            q += [{"op": "reg_read", "regs": f"{regs}[0:{nacc}]", "t": role, "line": tag + " promote: read the partial"},
                  {"op": "reg_write", "regs": f"f[0:{nacc}]", "t": role, "line": tag + " promote: f = fma(s, d, f)"}]

        sets = ("d0", "d1")
        if cfg.promote and cfg.partials == 1:
            # xtile: block 0 of the next tile is issued before this tile's epilogue
            if cfg.xtile:
                issue("d0", f"{role} tile=0 k=0")
            for tile in range(tiles):
                for kb in range(KB):
                    tag = f"{role} tile={tile} k={kb}"
                    if kb > 0 or not cfg.xtile:
                        issue("d0", tag)
                    wait(0, tag)
                    release(tag)
                    promote("d0", tag)
                if cfg.xtile and tile + 1 < tiles:
                    issue("d0", f"{role} tile={tile + 1} k=0 (before tile {tile}'s epilogue)")
                epilogue(tile, f"f[0:{nacc}]")
                q.append({"op": "reg_write", "regs": f"f[0:{nacc}]", "t": role, "line": f"{role} tile={tile}: f = 0"})
        elif cfg.promote:
            # k-blocks (tile, kb) in issue order; without xtile the stream restarts at each tile
            streams = ([[(t_, kb) for t_ in range(tiles) for kb in range(KB)]] if cfg.xtile else
                       [[(t_, kb) for kb in range(KB)] for t_ in range(tiles)])
            for blocks in streams:
                issue("d0", f"{role} tile={blocks[0][0]} k=0")
                for n_, (tile, kb) in enumerate(blocks):
                    tag = f"{role} tile={tile} k={kb}"
                    if n_ + 1 < len(blocks):
                        issue(sets[(n_ + 1) % 2], f"{tag}: next k-block (tile={blocks[n_ + 1][0]} k={blocks[n_ + 1][1]})")
                        wait(1, tag)
                    else:
                        wait(0, tag + " drain")
                    release(tag)
                    promote(sets[n_ % 2], tag)
                    if kb == KB - 1:
                        epilogue(tile, f"f[0:{nacc}]")
                        q.append({"op": "reg_write", "regs": f"f[0:{nacc}]", "t": role, "line": tag + ": f = 0"})
        else:
            for tile in range(tiles):
                for kb in range(KB):
                    tag = f"{role} tile={tile} k={kb}"
                    issue("d", tag)
                    if kb > 0:
                        wait(1, tag)
                        release(tag)
                wait(0, f"{role} tile={tile} drain")
                release(f"{role} tile={tile} drain")
                epilogue(tile, f"d[0:{nacc}]")
        if cfg.out == "bf16":
            q.append({"op": "bulk_wait_group", "n": 0, "t": role, "line": f"{role}: cp.async.bulk.wait_group 0 before exit"})
        programs[role] = q
    return _schedule(prefix, programs)


__all__ = ["INSTR", "GemmConfig", "gemm_fp8", "kernel_source", "launcher", "parse_config", "reference", "trace"]
