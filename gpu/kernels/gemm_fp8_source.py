"""CUDA source of the persistent FP8 GEMM kernel (``GemmConfig(schedule="persistent")``, the default).

* grid = min(#SMs, tiles); CTA ``b`` computes tiles ``b, b + grid, ...`` in grouped raster order
  (GROUP_M row blocks share a column block while it is in L2);
* 384 threads: warpgroup 0 is the producer (``setmaxnreg.dec`` to 24; one thread TMA-loads A 128x128
  and B ``bn``x128 e4m3 tiles with the 128B swizzle into a ring of ``stages`` slots, full/empty
  mbarriers, continuing into the next tile while the consumers run their epilogue), warpgroups 1, 2
  are consumers (``setmaxnreg.inc`` to 240; 128 x 24 + 256 x 240 = 384 x 168, the launch budget)
  owning rows 64c .. 64c+63 of the 128 x ``bn`` tile;
* per K block 4 x ``wgmma.mma_async.m64n{bn}k32.f32.e4m3.e4m3`` at +32-byte K steps;
* promote (``bn`` = 128): the partial of each K block (scale-d = 0 at its first wgmma) goes into one of
  two register sets d0/d1 alternately; block kb+1 is issued before block kb is promoted
  (``wait_group 1``), so the tensor core works on kb+1 while the CUDA cores compute
  ``acc = fma(RN(sa[row, kb] * sb[kb, nb]), partial_kb, acc)`` (same order, same roundings as
  before).  Scales (``scales_smem``; the default is global loads): the launcher transposes scale_a on the device to
  sa_t (K/128, M padded to 256, zero rows) and pads sb to 16 bytes per (kb, nb); the producer
  bulk-copies (``cp.async.bulk`` 1-D, counted in the stage's expect_tx) the tile's 128 floats of
  sa_t[kb] and sb[kb, nb] into the stage's 528-byte scale area, and each consumer reads its two rows'
  scales and sb with ``ld.shared`` right after issuing the block's wgmmas (no global loads in the
  consumer loop).  Otherwise the scales of kb+1 are loaded (``ld.global.nc``) before kb+1 is issued.
  With ``xtile`` the k-blocks form one stream across the CTA's tiles: the next tile's first block
  is issued before the current tile's last promotion and its epilogue;
* promote with one partial set (``partials=1``, the only choice for ``bn`` = 192: an m64n192 partial and
  its sums are 192 registers): each k-block is issued into d0, waited for (``wait_group 0``) and promoted
  while the other consumer warpgroup's wgmmas run (as DeepGEMM does); a 192-column tile spans two
  128-column B-scale blocks (boundary at tile column 128 for even tile columns pn, 64 for odd ones; the
  producer's 16-byte scale copy carries sb[kb, nb] and sb[kb, nb + 1], the global path loads both).  With
  ``xtile`` the next tile's block 0 is issued before the previous tile's epilogue, inside the tile loop so
  that no wgmma is in flight across its back edge (ptxas would otherwise inject a wait);
* promote with per-tensor scales (``scales_tensor``): torch._scaled_mm's recipe with use_fast_accum=False
  (docs/torch-scaled-mm.md): each K block's partial is added, ``acc += partial_kb``, and the epilogue
  computes ``RN(RN(sa * sb) * acc)``; no scale loads in the K loop, no scale area in shared memory;
* no promote: one accumulator chain over all of K, ``wait_group 1`` after each K block's commit
  releases the previous block's slot (the tensor core never drains inside a tile);
* epilogue per consumer warpgroup, independently: bf16 ``cvt.rn.bf16x2.f32`` + ``stmatrix.x4``, 64
  columns at a time, into one of its two 64 x 64 staging buffers (128B-swizzled) alternately (by a
  running chunk count: ``bn`` / 64 is odd for 192),
  ``fence.proxy.async``, named barrier, TMA store of the 64x64 box; a buffer is rewritten once the
  store issued from it two chunks earlier has read it (``cp.async.bulk.wait_group.read 1``), so
  stores overlap the next chunk and the next tile's mainloop.  f32: direct global stores;
* ``cluster=2`` (experimental): ``__cluster_dims__(2, 1, 1)``, the two CTAs of a cluster take row
  blocks 2p and 2p+1 of one column block; each producer loads its own A and one half of B, multicast
  into both CTAs' slot (``.multicast::cluster``, both full barriers expect the whole slot); each
  consumer releases a slot on the empty barriers of both CTAs (count 4), and a producer waits for
  the last releases before it exits (the peer still arrives on its barriers).
"""

from __future__ import annotations

from string import Template

from gpu.kernels.layouts import _SBASE

CONSUMER_REGS = 240
PRODUCER_REGS = 24
STAGE_OUT = 2 * 64 * 128 * 2          # bf16 staging: 2 consumer warpgroups x 64 rows x 128 columns


def instr_for(bn: int) -> str:
    return f"wgmma.mma_async.sync.aligned.m64n{bn}k32.f32.e4m3.e4m3"


def _wgmma(arr: str, n: int, instr: str) -> str:
    regs = ", ".join(f"%{i}" for i in range(n))
    outs = ", ".join(f'"+f"({arr}[{i}])' for i in range(n))
    return (f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{n + 2}, 0;\\n{instr} {{{regs}}}, %{n}, %{n + 1}, '
            f'p, 1, 1;\\n}}\\n" : {outs} : "l"(da), "l"(db), "r"(sd));')


_BODY = Template(r"""
struct __align__(64) TmapT { u64 v[16]; };
#define STAGES $stages
#define BN $bn
#define NACC $nacc
#define PROMOTE $promote
#define OUT_BF16 $out_bf16
#define SLOT_A 16384
#define SLOT_BYTES $slot_bytes
#define GROUP_M 8
#define XTILE $xtile            // promote: pipeline k-blocks across tile boundaries
#define CLUSTER $cluster          // 2: CTA pairs (tiles 2p, 2p+1 of one column block) share B by TMA multicast
#define SCALES_SMEM $scales_smem      // promote: the producer bulk-copies each stage's scales into shared memory
#define PARTIALS $partials         // promote: 2 = two partial sets (kb+1 runs while kb is promoted), 1 = one (wait_group 0)
#define NBLK_HI $nblk_hi          // BN = 192: a tile spans two 128-column B-scale blocks
#define SCALES_TENSOR $scales_tensor    // promote: per-tensor scales (acc += partial; D = RN(RN(sa * sb) * acc) in the epilogue)
#define SC_BYTES 528              // per stage: 128 A-row scales (sa_t[kb, m0:m0+128]) + 16 B: sb[kb, nb], sb[kb, nb + 1], 0, 0

__device__ __forceinline__ void mbar_wait(u32 bar, u32 phase) {
  asm volatile("{\n.reg .pred P;\nW:\nmbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\n@!P bra W;\n}\n"
               :: "r"(bar), "r"(phase) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
__device__ __forceinline__ u64 desc(u32 addr) {   // K-major, 128B swizzle, SBO = 1024
  return (u64)((addr >> 4) & 0x3FFF) | ((u64)1 << 16) | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
}
__device__ __forceinline__ void mbar_wait_cluster(u32 bar, u32 phase) {
  asm volatile("{\n.reg .pred P;\nW:\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P, [%0], %1;\n@!P bra W;\n}\n"
               :: "r"(bar), "r"(phase) : "memory");
}
// arrive on CTA `rank`'s barrier at this offset, with the default .release.cta semantics (as CUTLASS's
// ClusterBarrier::arrive): `.release.cluster` compiled to MEMBAR.ALL.CTA + MEMBAR.ALL.GPU before every
// remote arrive, twice per K block per consumer; the wgmmas that read the slot have completed (wait_group)
// before the arrive either way
__device__ __forceinline__ void mbar_arrive_cta(u32 bar, u32 rank) {
  asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\nmbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n"
               :: "r"(bar), "r"(rank) : "memory");
}
// grouped raster: GROUP row units share each column block while it is in L2
__device__ __forceinline__ void tile_of(int tile, int num_m, int num_n, int group_m, int& pm, int& pn) {
  const int group = group_m * num_n, first_m = (tile / group) * group_m;
  const int gsz = min(num_m - first_m, group_m), r = tile % group;
  pm = first_m + r % gsz;
  pn = r / gsz;
}
__device__ __forceinline__ float ldg_f(const float* p) {
  float v; asm volatile("ld.global.nc.f32 %0, [%1];\n" : "=f"(v) : "l"(p)); return v;
}
__device__ __forceinline__ float lds_f(u32 a) {
  float v; asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(a) : "memory"); return v;
}

#define REGFENCE(D) _Pragma("unroll") for (int i_ = 0; i_ < NACC; ++i_) asm volatile("" : "+f"(D[i_]) :: "memory");

// wait for the slot of the next k-block, issue its 4 wgmmas into D, commit; advance the ring
#define ISSUE(D, KBX, ACCUM) do {                                                             \
    mbar_wait(bars + 8 * s, ph);                                                             \
    const u64 da_ = DA0 + (u64)(s * (SLOT_BYTES >> 4)), db_ = DB0 + (u64)(s * (SLOT_BYTES >> 4)); \
    REGFENCE(D)                                                                              \
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");                                \
    _Pragma("unroll") for (int kk = 0; kk < 4; ++kk) {                                       \
      const u64 da = da_ + 2 * kk, db = db_ + 2 * kk;   /* +32 bytes of K: start field + 2 */ \
      const int sd = (kk > 0) || (ACCUM);                                                    \
      WGMMA_##D                                                                              \
    }                                                                                        \
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");                         \
    if (++s == STAGES) { s = 0; ph ^= 1u; }                                                  \
  } while (0)

#if CLUSTER == 2
#define RELEASE() do { if (lt == 0) { mbar_arrive_cta(bars + 8 * (STAGES + rs), 0); mbar_arrive_cta(bars + 8 * (STAGES + rs), 1); } \
                       if (++rs == STAGES) rs = 0; } while (0)
#else
#define RELEASE() do { if (lt == 0) mbar_arrive(bars + 8 * (STAGES + rs)); if (++rs == STAGES) rs = 0; } while (0)
#endif

#define WGMMA_d0 $wg_d0
#define WGMMA_d1 $wg_d1

#if PROMOTE
// promote the partial DC of the current k-block: acc = fma(RN(sa * sb), DC, acc); DC is retired already
#if SCALES_TENSOR
// per-tensor scales (torch._scaled_mm's recipe with use_fast_accum=False): acc += DC, scaled once in the epilogue
#define PROMOTE_BLK(DC) do {                                                                  \
    REGFENCE(DC)                                                                             \
    RELEASE();                                                                               \
    _Pragma("unroll") for (int i = 0; i < NACC; ++i) acc[i] = __fadd_rn(acc[i], DC[i]);      \
  } while (0)
#elif NBLK_HI
// BN = 192: the tile's columns [0, HI) are in B-scale block nb0 and [HI, 192) in nb0 + 1 (HI = 128
// for even tile columns pn, 64 for odd ones); the 8-column group i >> 2 lies in one block
#define PROMOTE_FMAS(DC, HI) _Pragma("unroll") for (int i = 0; i < NACC; ++i)                 \
      acc[i] = __fmaf_rn(((i >> 1) & 1) ? (8 * (i >> 2) >= (HI) ? s11 : s10) : (8 * (i >> 2) >= (HI) ? s01 : s00), DC[i], acc[i]);
#define PROMOTE_BLK(DC) do {                                                                  \
    REGFENCE(DC)                                                                             \
    RELEASE();                                                                               \
    const float s00 = __fmul_rn(ca0, cb), s10 = __fmul_rn(ca1, cb);                          \
    const float s01 = __fmul_rn(ca0, cb1), s11 = __fmul_rn(ca1, cb1);                        \
    if (pn & 1) { PROMOTE_FMAS(DC, 64) } else { PROMOTE_FMAS(DC, 128) }                      \
  } while (0)
#else
#define PROMOTE_BLK(DC) do {                                                                  \
    REGFENCE(DC)                                                                             \
    RELEASE();                                                                               \
    const float s0 = __fmul_rn(ca0, cb), s1 = __fmul_rn(ca1, cb);                            \
    _Pragma("unroll") for (int i = 0; i < NACC; ++i)                                         \
      acc[i] = __fmaf_rn(((i >> 1) & 1) ? s1 : s0, DC[i], acc[i]);                           \
  } while (0)
#endif
// DC holds k-block kb in flight: if there is a next block, load its scales, issue it into DN,
// wait for DC only (wait_group 1), promote DC, ++kb; otherwise drain (wait_group 0), promote DC, leave.
// Both arms end with the same set of groups in flight on every path (ptxas then keeps the wgmmas async).
// XTILE: the scale rows of this thread in the tile at unit U (row offsets into sa, rows past M:
// any finite scale, their outputs are clipped) and its B scale column (BN = 128 with promotion)
// nb1: the scale of the tile's second B-scale block (BN = 192; otherwise nb again)
#if NBLK_HI
#define LD_NB1_G(EB) , nb1 = ldg_f((EB) + nb1o)
#define LD_NB1_S , nb1 = lds_f(nsc_ + 516)
#else
#define LD_NB1_G(EB)
#define LD_NB1_S
#endif
#if SCALES_TENSOR
// per-tensor scales: nothing per k-block
#define TILE_SCALES(U, RO0, RO1, PN) do { } while (0)
#define NEXT_PRE(EA0, EA1, EB) const float na0 = 1.f, na1 = 1.f, nb = 1.f, nb1 = 1.f; (void)nb1;
#define NEXT_POST(EA0, EA1, EB)
#elif SCALES_SMEM
// the scales of the k-block about to be issued into slot s are read from the slot's scale area after
// ISSUE's full-barrier wait (NEXT_PRE notes the slot, NEXT_POST reads them); nothing per tile
#define TILE_SCALES(U, RO0, RO1, PN) do { } while (0)
#define NEXT_PRE(EA0, EA1, EB) const u32 nsc_ = scs + s * SC_BYTES;
#define NEXT_POST(EA0, EA1, EB) const float na0 = lds_f(nsc_ + so0), na1 = lds_f(nsc_ + so0 + 32), nb = lds_f(nsc_ + 512) LD_NB1_S;
#else
#define TILE_SCALES(U, RO0, RO1, PN) do {                                                     \
    int pm_;                                                                                 \
    tile_of(U, num_mu, num_n, group_m, pm_, PN);                                             \
    const int r_ = (pm_ * CLUSTER + (int)rank) * 128 + 64 * c + 16 * w + g;                  \
    RO0 = min(r_, M - 1) * KB; RO1 = min(r_ + 8, M - 1) * KB;                                \
  } while (0)
// global scales: loaded (ld.global.nc) before the next k-block is issued
#define NEXT_PRE(EA0, EA1, EB) const float na0 = ldg_f(EA0), na1 = ldg_f(EA1), nb = ldg_f(EB) LD_NB1_G(EB);
#define NEXT_POST(EA0, EA1, EB)
#endif
// the scale pointers of this thread in tile (PM, PN): rows r, r + 8 of sa (rows past M: any finite
// scale, their outputs are clipped), the B-scale block of the tile's first column and (BN = 192) the
// offset to the next block (columns past N: any scale)
#if SCALES_SMEM || SCALES_TENSOR
#define TILE_PTRS(PM, PN)
#else
#define TILE_PTRS(PM, PN)                                                                     \
    const int r0_ = ((PM) * CLUSTER + (int)rank) * 128 + 64 * c + 16 * w + g;                \
    const float* pa0 = sa + (long)min(r0_, M - 1) * KB;                                      \
    const float* pa1 = sa + (long)min(r0_ + 8, M - 1) * KB;                                  \
    const int nb0 = ((PN) * BN) / 128;                                                       \
    const float* psb = sb + nb0;                                                             \
    const int nb1o = min(nb0 + 1, NB - 1) - nb0;                                             \
    (void)pa0; (void)pa1; (void)psb; (void)nb1o;
#endif
#if NBLK_HI
#define SET_CB1 cb1 = nb1;
#else
#define SET_CB1
#endif
// PARTIALS == 1: issue k-block KBI of the tile whose pointers are in scope into d0 and keep its scales.
// Global scales are prefetched one block ahead (PREFETCH(KN) right after the issue of block KBI loads
// those of block KN into q*, and the next ISSUE_BLK takes them): a load issued just before its block's
// wgmmas stalled the issue on its latency (ptxas moves the uniform B scale into a uniform register
// ahead of the wgmmas; ncu on the H200 put 18 % of the bn = 192 kernel's stall samples there)
#if SCALES_SMEM || SCALES_TENSOR
#define PREFETCH(KN) do { } while (0)
#define ISSUE_BLK(KBI, KN) do {                                                               \
    NEXT_PRE(pa0 + (KBI), pa1 + (KBI), psb + (long)(KBI) * NB)                               \
    ISSUE(d0, KBI, 0);                                                                       \
    NEXT_POST(pa0 + (KBI), pa1 + (KBI), psb + (long)(KBI) * NB)                              \
    ca0 = na0; ca1 = na1; cb = nb; SET_CB1                                                   \
  } while (0)
#else
#if NBLK_HI
#define PREFETCH_NB1(KN) qb1 = ldg_f(psb + (long)(KN) * NB + nb1o);
#define TAKE_NB1 cb1 = qb1;
#else
#define PREFETCH_NB1(KN)
#define TAKE_NB1
#endif
#define PREFETCH(KN) do {                                                                     \
    qa0 = ldg_f(pa0 + (KN)); qa1 = ldg_f(pa1 + (KN)); qb = ldg_f(psb + (long)(KN) * NB);     \
    PREFETCH_NB1(KN)                                                                         \
  } while (0)
#define ISSUE_BLK(KBI, KN) do {                                                               \
    ISSUE(d0, KBI, 0);                                                                       \
    ca0 = qa0; ca1 = qa1; cb = qb; TAKE_NB1                                                  \
    PREFETCH(KN);                                                                            \
  } while (0)
#endif
#define TILE_STORE(U) do {                                                                    \
    int pm_, pn_;                                                                            \
    tile_of(U, num_mu, num_n, group_m, pm_, pn_);                                            \
    epilogue(acc, (pm_ * CLUSTER + (int)rank) * 128, pn_ * BN, M, N, c, lt, out_tile, (u64)&tma_d, dout, ec, st); \
  } while (0)
// XTILE: DC holds k-block kb of tile u in flight; the next block is kb+1 of u or block 0 of the
// next tile.  If there is one: load its scales, issue it into DN, wait for DC only, promote DC,
// and at a tile's end store the tile (the next block runs meanwhile) and move on; otherwise
// drain, promote, store, leave.
#define XSTEP(DC, DN) {                                                                       \
    const bool last_ = (kb + 1 == KB);                                                       \
    const int nu_ = last_ ? u + ustep : u;                                                   \
    if (nu_ < units) {                                                                       \
      int nro0_ = ro0, nro1_ = ro1, npn_ = pn;                                               \
      if (last_) TILE_SCALES(nu_, nro0_, nro1_, npn_);                                       \
      const int nkb_ = last_ ? 0 : kb + 1;                                                   \
      NEXT_PRE(sa + nro0_ + nkb_, sa + nro1_ + nkb_, sb + npn_ + nkb_ * NB)                  \
      ISSUE(DN, 0, 0);                                                                       \
      NEXT_POST(sa + nro0_ + nkb_, sa + nro1_ + nkb_, sb + npn_ + nkb_ * NB)                 \
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");                       \
      PROMOTE_BLK(DC);                                                                       \
      if (last_) {                                                                           \
        TILE_STORE(u);                                                                       \
        _Pragma("unroll") for (int i = 0; i < NACC; ++i) acc[i] = 0.f;                       \
        u = nu_; ro0 = nro0_; ro1 = nro1_; pn = npn_;                                        \
      }                                                                                      \
      kb = nkb_; ca0 = na0; ca1 = na1; cb = nb;                                              \
    } else {                                                                                 \
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");                       \
      PROMOTE_BLK(DC);                                                                       \
      TILE_STORE(u);                                                                         \
      break;                                                                                 \
    }                                                                                        \
  }
#define STEP(DC, DN) \
    if (kb + 1 < KB) {                                                                       \
      NEXT_PRE(pa0 + kb + 1, pa1 + kb + 1, psb + (long)(kb + 1) * NB)                        \
      ISSUE(DN, kb + 1, 0);                                                                  \
      NEXT_POST(pa0 + kb + 1, pa1 + kb + 1, psb + (long)(kb + 1) * NB)                       \
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");                       \
      PROMOTE_BLK(DC);                                                                       \
      ca0 = na0; ca1 = na1; cb = nb; ++kb;                                                   \
    } else {                                                                                 \
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");                       \
      PROMOTE_BLK(DC);                                                                       \
      break;                                                                                 \
    }
#endif

// per consumer warpgroup c: its 64 x BN block of the tile at (m0, n0) from the f32 values `acc`
// (SCALES_TENSOR: each value is RN(st * acc) first, st = RN(sa * sb))
#if SCALES_TENSOR
#define SC(X) __fmul_rn(st, (X))
#else
#define SC(X) (X)
#endif
__device__ __forceinline__ void epilogue(const float (&acc)[NACC], int m0, int n0, int M, int N, int c, int lt,
                                         u32 out_tile, u64 tma_d, float* __restrict__ dout, u32& ec, float st) {
  const int w = lt / 32, l = lt % 32, g = l / 4;
  (void)st;
#if OUT_BF16
  // 64-column chunks through two 64 x 64 bf16 staging buffers (8 KiB, 128B swizzle) of this
  // warpgroup, alternately: a buffer is rewritten once the store issued from it two chunks ago has
  // read it (wait_group.read 1 keeps the latest store running); the buffers alternate by the running
  // chunk count ec of this warpgroup (BN / 64 is odd for BN = 192)
  const u32 stage = out_tile + c * 16384;
#pragma unroll
  for (int ch = 0; ch < BN / 64; ++ch) {
    const u32 buf = stage + ((((BN / 64) & 1) ? ec + ch : (u32)ch) & 1) * 8192;   // (even BN / 64: ec stays even)
    if (lt == 0) asm volatile("cp.async.bulk.wait_group.read 1;\n" ::: "memory");
    asm volatile("bar.sync %0, 128;\n" :: "r"(2 + c) : "memory");
    u32 p[16];
#pragma unroll
    for (int j = 0; j < 16; ++j)
      asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(p[j]) : "f"(SC(acc[32 * ch + 2 * j + 1])), "f"(SC(acc[32 * ch + 2 * j])));
#pragma unroll
    for (int sl8 = 0; sl8 < 4; ++sl8) {
      const int mm = l / 8;
      const int row = 16 * w + (l % 8) + 8 * (mm % 2);
      const int col = 16 * sl8 + 8 * (mm / 2);
      u32 a = buf + row * 128 + col * 2;
      a ^= ((a >> 7) & 7u) << 4;
      asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
                   :: "r"(a), "r"(p[4 * sl8]), "r"(p[4 * sl8 + 1]), "r"(p[4 * sl8 + 2]), "r"(p[4 * sl8 + 3]) : "memory");
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    asm volatile("bar.sync %0, 128;\n" :: "r"(2 + c) : "memory");
    if (lt == 0) {
      asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
                   :: "l"(tma_d), "r"(n0 + 64 * ch), "r"(m0 + 64 * c), "r"(buf) : "memory");
      asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    }
  }
  ec += BN / 64;
#if BN % 64
  // the last BN % 64 columns (BN = 144: 16) with direct stores of bf16 pairs, clipped at M and N
  {
    u16* __restrict__ d16 = reinterpret_cast<u16*>(dout);
    const int r0 = m0 + 64 * c + 16 * w + g, r1 = r0 + 8;
#pragma unroll
    for (int i = 4 * (BN / 64) * 8; i < NACC; i += 2) {
      const int row = ((i >> 1) & 1) ? r1 : r0;
      const int col = n0 + 2 * (l % 4) + 8 * (i >> 2);
      u32 p2;
      asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(p2) : "f"(SC(acc[i + 1])), "f"(SC(acc[i])));
      if (row < M && col < N) *reinterpret_cast<u32*>(d16 + (long)row * N + col) = p2;   // (N even: col + 1 < N)
    }
  }
#endif
#else
  const int r0 = m0 + 64 * c + 16 * w + g, r1 = r0 + 8;
#pragma unroll
  for (int i = 0; i < NACC; ++i) {
    const int row = ((i >> 1) & 1) ? r1 : r0;
    const int col = n0 + 2 * (l % 4) + (i & 1) + 8 * (i >> 2);
    if (row < M && col < N) dout[(long)row * N + col] = SC(acc[i]);
  }
#endif
  (void)M; (void)N; (void)dout; (void)out_tile; (void)tma_d; (void)g; (void)ec;
}

extern "C" __global__ void __launch_bounds__(384, 1) $cluster_attr
gemm_fp8(const __grid_constant__ TmapT tma_a, const __grid_constant__ TmapT tma_b, const __grid_constant__ TmapT tma_d,
         float* __restrict__ dout, const float* __restrict__ sa, const float* __restrict__ sb,
         int M, int N, int K)
{
  extern __shared__ __align__(1024) u8 smem_raw[];
  const u32 raw = smem_base_of(smem_raw);
  const u32 base = (raw + 1023) & ~1023u;             // 1024-aligned: the 128B swizzle pattern
  const u32 slots = base;                             // [stage][A 16K | B BN*128]
  const u32 out_tile = base + STAGES * SLOT_BYTES;    // [consumer][panel 0 | panel 1] 64 rows x 128 B each
  const u32 scs = out_tile + (OUT_BF16 ? $stage_out : 0);    // SCALES_SMEM: [stage][sa 512 B | sb 16 B]
  const u32 bars = scs + (SCALES_SMEM ? STAGES * SC_BYTES : 0);   // full[STAGES], empty[STAGES]
  const int t = threadIdx.x, wgi = t / 128, lt = t % 128;
  const int num_m = (M + 127) / 128, num_n = (N + BN - 1) / BN;
  const int KB = K / 128;
#if SCALES_SMEM
  // sa is sa_t (KB, MP) k-block-major, rows >= M zero; sb is (KB, NB, 4), sb[kb, nb] at [kb, nb, 0]
  const long MP = (long)((M + 255) / 256) * 256;
  const int NBS = (N + 127) / 128;
  (void)scs;
#endif
#if CLUSTER == 2
  u32 rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  const int unit0 = blockIdx.x >> 1, ustep = gridDim.x >> 1, num_mu = (num_m + 1) / 2, group_m = GROUP_M / 2;
#else
  const u32 rank = 0;
  const int unit0 = blockIdx.x, ustep = gridDim.x, num_mu = num_m, group_m = GROUP_M;
#endif
  const int units = num_mu * num_n;
  if (t == 0) {
    for (int s = 0; s < STAGES; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(bars + 8 * s));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bars + 8 * (STAGES + s)), "r"(2 * CLUSTER));
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
#if CLUSTER == 2
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
  __syncthreads();
#endif
  if (wgi == 0) {                                     // producer warpgroup
    asm volatile("setmaxnreg.dec.sync.aligned.u32 $producer_regs;\n" ::: "memory");
    if (t == 0) {
      int s = 0; u32 ph = 0;
      for (int u = unit0; u < units; u += ustep) {
        int pm, pn;
        tile_of(u, num_mu, num_n, group_m, pm, pn);
        const int m0 = (pm * CLUSTER + (int)rank) * 128, n0 = pn * BN;
        for (int kb = 0; kb < KB; ++kb) {
          const u32 full = bars + 8 * s, sl = slots + s * SLOT_BYTES;
#if CLUSTER == 2
          // both CTAs' consumers must have released slot s: this producer writes B into both
          mbar_wait_cluster(bars + 8 * (STAGES + s), ph ^ 1u);   // the first round passes at once
          asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(full), "r"(SLOT_BYTES + (SCALES_SMEM ? SC_BYTES : 0)) : "memory");
          asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                       :: "r"(sl), "l"((u64)&tma_a), "r"(kb * 128), "r"(m0), "r"(full) : "memory");
          // this CTA's half of B (BN/2 rows) into the same offset of both CTAs' slot, completing on both full[s]
          asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n"
                       :: "r"(sl + SLOT_A + rank * (BN / 2) * 128), "l"((u64)&tma_b), "r"(kb * 128), "r"(n0 + (int)rank * (BN / 2)),
                          "r"(full), "h"((unsigned short)3) : "memory");
#else
          mbar_wait(bars + 8 * (STAGES + s), ph ^ 1u);   // the first round passes at once
          asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(full), "r"(SLOT_BYTES + (SCALES_SMEM ? SC_BYTES : 0)) : "memory");
          asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                       :: "r"(sl), "l"((u64)&tma_a), "r"(kb * 128), "r"(m0), "r"(full) : "memory");
          asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                       :: "r"(sl + SLOT_A), "l"((u64)&tma_b), "r"(kb * 128), "r"(n0), "r"(full) : "memory");
#endif
#if SCALES_SMEM
          {   // this CTA's own scales (not multicast): 128 A-row scales of k-block kb, then sb[kb, nb]
            const u32 sc = scs + s * SC_BYTES;
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 512, [%2];\n"
                         :: "r"(sc), "l"(sa + (long)kb * MP + m0), "r"(full) : "memory");
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 16, [%2];\n"
                         :: "r"(sc + 512), "l"(sb + ((long)kb * NBS + (pn * BN) / 128) * 4), "r"(full) : "memory");
          }
#endif
          if (++s == STAGES) { s = 0; ph ^= 1u; }
        }
      }
#if CLUSTER == 2
      // do not exit while the peer's consumers may still arrive on this CTA's empty barriers
      for (int i = 0; i < STAGES; ++i) {
        mbar_wait_cluster(bars + 8 * (STAGES + s), ph ^ 1u);
        if (++s == STAGES) { s = 0; ph ^= 1u; }
      }
#endif
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 $consumer_regs;\n" ::: "memory");
  const int c = wgi - 1, w = lt / 32, l = lt % 32, g = l / 4;
  (void)w; (void)g;
#if SCALES_TENSOR
  const float st = __fmul_rn(ldg_f(sa), ldg_f(sb));   // sa, sb: one float each
#else
  const float st = 1.f;
#endif
  (void)st;
#if SCALES_SMEM
  const u32 so0 = 4 * (64 * c + 16 * w + g);          // this thread's rows r0, r0 + 8 in a stage's scale area
#endif
  int s = 0, rs = 0; u32 ph = 0, ec = 0;
  const u64 DA0 = desc(slots + c * 8192), DB0 = desc(slots + SLOT_A);
  float d0[NACC];
#pragma unroll
  for (int i = 0; i < NACC; ++i) d0[i] = 0.f;
#if PROMOTE
#if PARTIALS == 2
  float d1[NACC];
#pragma unroll
  for (int i = 0; i < NACC; ++i) d1[i] = 0.f;
#endif
  float acc[NACC];
  const int NB = (N + 127) / 128;
  (void)NB;
#else
#define acc d0
#endif
#if PROMOTE && XTILE && PARTIALS == 2
  // one stream of k-blocks across this CTA's tiles: the next tile's first k-block is issued before
  // the last one of the current tile is promoted, so the tensor core runs through the epilogue
  int u = unit0, ro0 = 0, ro1 = 0, pn = 0;
  if (u < units) {
    TILE_SCALES(u, ro0, ro1, pn);
#pragma unroll
    for (int i = 0; i < NACC; ++i) acc[i] = 0.f;
    NEXT_PRE(sa + ro0, sa + ro1, sb + pn)
    ISSUE(d0, 0, 0);
    NEXT_POST(sa + ro0, sa + ro1, sb + pn)
    float ca0 = na0, ca1 = na1, cb = nb;
    for (int kb = 0; ; ) {
      XSTEP(d0, d1)
      XSTEP(d1, d0)
    }
  }
#else
#if PROMOTE && PARTIALS == 1
  float ca0 = 0.f, ca1 = 0.f, cb = 0.f;    // the scales of the k-block in flight in d0
  float qa0 = 0.f, qa1 = 0.f, qb = 0.f;    // global scales: those of the next k-block (prefetched)
  (void)qa0; (void)qa1; (void)qb;
#if NBLK_HI
  float cb1 = 0.f, qb1 = 0.f;
  (void)qb1;
#endif
#if XTILE
  int em0 = 0, en0 = 0;     // the tile whose epilogue is pending (stored after the next tile's block 0 is issued)
#endif
#endif
  for (int u = unit0; u < units; u += ustep) {
    int pm, pn;
    tile_of(u, num_mu, num_n, group_m, pm, pn);
    const int m0 = (pm * CLUSTER + (int)rank) * 128, n0 = pn * BN;
#if PROMOTE
    TILE_PTRS(pm, pn)
#if PARTIALS == 1
    // one partial set: issue the k-block, wait for it (wait_group 0), promote it; the other consumer
    // warpgroup's wgmmas keep the tensor core busy meanwhile.  XTILE: the previous tile's epilogue runs
    // after this tile's block 0 is issued (and no wgmma is in flight across the loop's back edge)
    PREFETCH(0);
    ISSUE_BLK(0, KB > 1 ? 1 : 0);
#if XTILE
    if (u != unit0) epilogue(acc, em0, en0, M, N, c, lt, out_tile, (u64)&tma_d, dout, ec, st);
    em0 = m0; en0 = n0;
#endif
#pragma unroll
    for (int i = 0; i < NACC; ++i) acc[i] = 0.f;
    for (int kb = 0; ; ) {
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
      PROMOTE_BLK(d0);
      if (++kb == KB) break;
      ISSUE_BLK(kb, kb + 1 < KB ? kb + 1 : kb);
    }
#else
#pragma unroll
    for (int i = 0; i < NACC; ++i) acc[i] = 0.f;
    NEXT_PRE(pa0, pa1, psb)
    ISSUE(d0, 0, 0);
    NEXT_POST(pa0, pa1, psb)
    float ca0 = na0, ca1 = na1, cb = nb;
    for (int kb = 0; ; ) {
      STEP(d0, d1)
      STEP(d1, d0)
    }
#endif
#else
    for (int kb = 0; kb < KB; ++kb) {
      ISSUE(d0, kb, kb > 0);
      if (kb > 0) {
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        RELEASE();
      }
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    REGFENCE(d0)
    RELEASE();
#endif
#if !(PROMOTE && PARTIALS == 1 && XTILE)
    epilogue(acc, m0, n0, M, N, c, lt, out_tile, (u64)&tma_d, dout, ec, st);
#endif
  }
#if PROMOTE && PARTIALS == 1 && XTILE
  if (unit0 < units) epilogue(acc, em0, en0, M, N, c, lt, out_tile, (u64)&tma_d, dout, ec, st);
#endif
#endif
#if OUT_BF16
  if (lt == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
#endif
}
""")


def persistent_source(stages: int, bn: int, promote: bool, out_bf16: bool, cluster: int = 1, xtile: bool = False,
                      scales_smem: bool = False, partials: int = 2, scales_tensor: bool = False) -> str:
    nacc = bn // 2
    instr = instr_for(bn)
    return _SBASE + _BODY.substitute(
        stages=stages, bn=bn, nacc=nacc, promote=int(promote), out_bf16=int(out_bf16), cluster=cluster, xtile=int(xtile),
        scales_smem=int(bool(scales_smem and promote)), partials=partials if promote else 2,
        scales_tensor=int(bool(scales_tensor and promote)),
        nblk_hi=int(bn == 192 and promote),
        cluster_attr="__cluster_dims__(2, 1, 1)" if cluster == 2 else "",
        slot_bytes=16384 + bn * 128, stage_out=STAGE_OUT, producer_regs=PRODUCER_REGS,
        consumer_regs=CONSUMER_REGS,
        wg_d0=_wgmma("d0", nacc, instr), wg_d1=_wgmma("d1", nacc, instr) if promote and partials == 2 else "")


SC_BYTES = 528                        # per stage with scales in shared memory: 128 f32 A-row scales + 16 B of sb4[kb, nb] (sb[kb, nb], sb[kb, nb + 1])


def smem_bytes(stages: int, bn: int, out_bf16: bool, scales_smem: bool = False) -> int:
    """Dynamic shared memory: 1024 alignment slack + ring + bf16 staging + (scales) + mbarriers."""
    return (1024 + stages * (16384 + bn * 128) + (STAGE_OUT if out_bf16 else 0)
            + (stages * SC_BYTES if scales_smem else 0) + 1024)
