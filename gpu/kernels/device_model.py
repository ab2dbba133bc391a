"""refmodel's wgmma accumulator as C++ that runs on the GPU's CUDA cores and, unchanged, on the host.

One function, :data:`SOURCE`'s ``wgref_fdpa_one``, computes one output element of one dense
wgmma (D = A·B + C, truncated aligned sum, one rounding, NaN/Inf rules) with integer arithmetic
written from :func:`refmodel.numerics.accumulate.fdpa_chain`'s formulas; ``wgref_int_one`` the
integer forms.  The same text is compiled

* for the GPU by NVRTC (``__host__ __device__``; kernel ``wgref_wgmma_model``), to check the
  hardware on the device without copying anything back (the GPU fuzz engine), and
* for the host by the system C++ compiler (``host_library``), which is how CI checks it against
  the CPU refmodel on every form and input family (``tests/test_device_model.py``).

The tiled chain kernels of :data:`CHAIN_SOURCE` (``wgref_model_chain``, its ``_wide`` / ``_sparse`` /
``_sparse_wide`` instantiations, ``wgref_int_model_chain``; host loops ``*_host``) compute the same outputs
fast: a CTA per (tile, block of <= 64 columns), each chain step's A and B decoded once into shared memory,
4 x 8 outputs per thread, an e_max pass then a shift/add pass over k, D kept across the chain, NaN/Inf
outputs from per-row / per-column words.  Python: :func:`wgmma_chain_host`, :func:`wgmma_sp_host`,
:func:`launch_model_chain`, :func:`launch_int_model_chain`, :func:`model_chain_device`.

The CPU refmodel stays the arbiter: the GPU port only decides which tiles to copy back.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from refmodel.dtypes import bits_of, element_dtype, from_bits
from refmodel.errors import InputError
from refmodel.numerics.accumulate import AccumParams, decode_table, params_for
from refmodel.numerics.wgmma import operand_codes, operand_spec, prepare

SOURCE = r"""
#ifndef WGREF_HD
#ifdef __CUDACC_RTC__
#define WGREF_HD __host__ __device__
#else
#define WGREF_HD
#endif
#endif
typedef long long wg_i64;

struct WgParams {
    int F, e_zero, acc_e, acc_m, rnd_m, rz, sat, nan_bits, Lp, Ln;
};

WGREF_HD static inline int wg_bitlen(unsigned long long x) {
    int n = 0;
    while (x) { ++n; x >>= 1; }
    return n;
}

/* NaN / signed Inf of one output whose block holds a special operand or C (fdpa_chain's
   _special_bits). */
WGREF_HD static unsigned int wg_special(const signed char *ca, const signed char *cb, int sb, int K,
                                        const short *sa, const short *sbv, unsigned int c_bits,
                                        const WgParams &p) {
    bool nan = false, pinf = false, ninf = false;
    for (int k = 0; k < K; ++k) {
        int a = ca[k], b = cb[k * sb];
        if (a == 4 || b == 4) nan = true;
        else if (a >= 2 || b >= 2) {
            if (a == 1 || b == 1) nan = true;
            else {
                bool na = a == 3 || (a == 0 && sa[k] < 0);
                bool nb = b == 3 || (b == 0 && sbv[k * sb] < 0);
                if (na != nb) ninf = true; else pinf = true;
            }
        }
    }
    unsigned int emask = (1u << p.acc_e) - 1;
    if (((c_bits >> p.acc_m) & emask) == emask) {
        if (c_bits & ((1u << p.acc_m) - 1)) nan = true;
        else if ((c_bits >> (p.acc_e + p.acc_m)) & 1) ninf = true;
        else pinf = true;
    }
    if (nan || (pinf && ninf)) return (unsigned int)p.nan_bits;
    unsigned int inf_bits = emask << p.acc_m;
    return ninf ? (inf_bits | (1u << (p.acc_e + p.acc_m))) : inf_bits;
}

/* One output of one wgmma: a row of A (K decoded operands, stride 1), a column of B (stride sb),
   C's bits.  sa/ea/ca: significand, exponent, class of each operand (refmodel's decode tables). */
WGREF_HD static unsigned int wgref_fdpa_one(const short *sa, const short *ea, const signed char *ca,
                                            const short *sbv, const short *eb, const signed char *cb,
                                            int sb, int K, unsigned int c_bits, const WgParams &p) {
    const int bias = (1 << (p.acc_e - 1)) - 1;
    const wg_i64 emask = (1 << p.acc_e) - 1;
    const wg_i64 mmask = ((wg_i64)1 << p.acc_m) - 1;
    const wg_i64 hidden = (wg_i64)1 << p.acc_m;
    const int pad = p.acc_m - p.rnd_m;
    const int signpos = p.acc_e + p.acc_m;
    const wg_i64 demin = 2 - (1 << (p.acc_e - 1));
    const wg_i64 maxc = (((wg_i64)(1 << p.acc_e) - 2) << p.rnd_m) | (((wg_i64)1 << p.rnd_m) - 1);
    const wg_i64 ovf = p.sat ? maxc : (emask << p.rnd_m);
    const int sh_c = p.F - p.acc_m;
    bool anyz = false, anys = false;
    for (int k = 0; k < K; ++k) {
        int a = ca[k], b = cb[k * sb];
        anyz |= (a == 1) || (b == 1);
        anys |= (a >= 2) || (b >= 2);
    }
    wg_i64 bits = c_bits;
    wg_i64 E = (bits >> p.acc_m) & emask;
    wg_i64 Mv = bits & mmask;
    bool cspec = E == emask;
    wg_i64 sig = E > 0 ? (Mv | hidden) : Mv;
    if (cspec) sig = 0;
    wg_i64 sc = ((bits >> signpos) & 1) ? -sig : sig;
    int ec = E > 0 ? (int)(E - bias) : 1 - bias;
    int emax = sig == 0 ? p.e_zero : ec;
    if (anyz && emax < p.e_zero) emax = p.e_zero;
    for (int k = 0; k < K; ++k) {
        int e = (int)ea[k] + (int)eb[k * sb];
        if (e > emax) emax = e;
    }
    wg_i64 acc = 0;
    for (int k = 0; k < K; ++k) {
        int prod = (int)sa[k] * (int)sbv[k * sb];
        int m = prod < 0 ? -prod : prod;
        int d = emax - (int)ea[k] - (int)eb[k * sb] + p.Ln;
        if (d > 31) d = 31;
        int t = (int)((unsigned int)m << p.Lp) >> d;
        acc += prod < 0 ? -t : t;
    }
    wg_i64 cm = sc < 0 ? -sc : sc;
    wg_i64 sh = (wg_i64)ec - emax + sh_c;
    wg_i64 rsh = -sh > 0 ? -sh : 0;
    if (rsh > 63) rsh = 63;
    wg_i64 t64 = (cm << (sh > 0 ? sh : 0)) >> rsh;
    wg_i64 S = acc + (sc < 0 ? -t64 : t64);
    unsigned int result = 0;
    wg_i64 mag = S < 0 ? -S : S;
    if (mag != 0) {
        wg_i64 bl = wg_bitlen((unsigned long long)mag);
        wg_i64 e0 = (wg_i64)emax - p.F;
        wg_i64 lg = e0 + bl - 1;
        wg_i64 top = lg > demin ? lg : demin;
        wg_i64 shift = top - p.rnd_m - e0;
        wg_i64 ls = -shift > 0 ? -shift : 0; if (ls > 62) ls = 62;
        wg_i64 rs = shift > 0 ? shift : 0; if (rs > 62) rs = 62;
        wg_i64 rr = (mag << ls) >> rs;
        if (!p.rz) {
            wg_i64 rem = mag & (((wg_i64)1 << rs) - 1);
            wg_i64 half = ((wg_i64)1 << rs) >> 1;
            bool up = rs > 0 && (rem > half || (rem == half && (rr & 1) == 1));
            rr += up ? 1 : 0;
        }
        wg_i64 code = ((top - demin) << p.rnd_m) + rr;
        if (code > maxc) code = ovf;
        wg_i64 out = (code << pad) | ((wg_i64)(S < 0) << signpos);
        result = rr == 0 ? 0u : (unsigned int)out;
    }
    if (anys || cspec) result = wg_special(ca, cb, sb, K, sa, sbv, c_bits, p);
    return result;
}

/* Integer forms: the exact dot product plus C, wrapped (two's complement) or clamped to int32. */
WGREF_HD static int wgref_int_one(const int *a, const int *b, int sb, int K, int c, int clamp) {
    wg_i64 s = c;
    for (int k = 0; k < K; ++k) s += (wg_i64)a[k] * (wg_i64)b[k * sb];
    if (clamp) {
        if (s > 2147483647LL) s = 2147483647LL;
        if (s < -2147483648LL) s = -2147483648LL;
        return (int)s;
    }
    return (int)(unsigned int)(unsigned long long)s;
}

/* Whole tiles: T tiles of A (R x K codes), B (K x N codes), C (R x N bits) -> D bits; R = 64 for
   dense wgmma, R = 1 for sparse (each row of A has its own gathered B rows).  Codes are looked
   up in the decode tables here (tsig/texp/tcls per operand format). */
#define WGREF_TILE_BODY                                                                          \
    int t = idx / (R * N), r = (idx / N) % R, j = idx % N;                                      \
    const unsigned int *ac = acodes + ((unsigned long long)t * R + r) * K;                      \
    const unsigned int *bc = bcodes + (unsigned long long)t * K * N + j;                                    \
    short sa[64], ea[64], sbv[64], eb[64]; signed char ca[64], cb[64];                          \
    for (int k = 0; k < K; ++k) {                                                               \
        unsigned int x = ac[k], y = bc[(unsigned long long)k * N];                                           \
        sa[k] = tsa[x]; ea[k] = tea[x]; ca[k] = tca[x];                                          \
        sbv[k] = tsb[y]; eb[k] = teb[y]; cb[k] = tcb[y];                                         \
    }                                                                                            \
    out[idx] = wgref_fdpa_one(sa, ea, ca, sbv, eb, cb, 1, K, cbits[idx], p);

#ifdef __CUDACC_RTC__
extern "C" __global__ void wgref_wgmma_model(const unsigned int *acodes, const unsigned int *bcodes,
        const unsigned int *cbits, unsigned int *out, int T, int R, int K, int N,
        const short *tsa, const short *tea, const signed char *tca,
        const short *tsb, const short *teb, const signed char *tcb, const int *pv) {
    const WgParams p = {pv[0], pv[1], pv[2], pv[3], pv[4], pv[5], pv[6], pv[7], pv[8], pv[9]};
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= T * R * N) return;
    WGREF_TILE_BODY
}
extern "C" __global__ void wgref_int_model(const int *a, const int *b, const int *c, int *out, int T, int R,
                                           int K, int N, int clamp) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= T * R * N) return;
    int t = idx / (R * N), r = (idx / N) % R, j = idx % N;
    out[idx] = wgref_int_one(a + ((unsigned long long)t * R + r) * K, b + (unsigned long long)t * K * N + j, N, K,
                             c[idx], clamp);
}
#else
extern "C" void wgref_wgmma_model_host(const unsigned int *acodes, const unsigned int *bcodes,
        const unsigned int *cbits, unsigned int *out, int T, int R, int K, int N,
        const short *tsa, const short *tea, const signed char *tca,
        const short *tsb, const short *teb, const signed char *tcb, const WgParams *pp) {
    const WgParams p = *pp;
    for (int idx = 0; idx < T * R * N; ++idx) { WGREF_TILE_BODY }
}
extern "C" void wgref_int_model_host(const int *a, const int *b, const int *c, int *out, int T, int R, int K,
                                     int N, int clamp) {
    for (int idx = 0; idx < T * R * N; ++idx) {
        int t = idx / (R * N), r = (idx / N) % R, j = idx % N;
        out[idx] = wgref_int_one(a + ((unsigned long long)t * R + r) * K, b + (unsigned long long)t * K * N + j, N, K, c[idx], clamp);
    }
}
#endif
"""

#: The tiled chain kernels (``wgref_model_chain``, ``wgref_int_model_chain`` and their ``_host`` loops):
#: one CTA per (tile, block of <= 64 columns), operands decoded once per step into shared memory, 4 x 8
#: outputs per thread, D in registers across a chain of wgmmas; NaN/Inf outputs by wgref_fdpa_one.
CHAIN_SOURCE = r"""
/* ------------------------------------------------------------------ tiled chain kernel */
/* One CTA: one tile t, a block of up to WC_BN columns; WC_TM x WC_TN outputs per thread (rows
   r0.., columns c0..); every chain step's A (64 x Kc) and B (Kb x BN) decoded once into shared
   memory; D stays in registers across the chain. */
#define WC_R 64
#define WC_TM 4
#define WC_TN 8
#define WC_RG (WC_R / WC_TM)
#define WC_BN 64
#define WC_NT (WC_RG * (WC_BN / WC_TN))
#define WC_DEAD (-8192)
#ifndef WC_SB
#define WC_SB 8          /* operand elements staged per thread and round */
#endif
#ifndef WC_PACKED
#define WC_PACKED 0      /* 1: dense e_max pass on 16-bit halves (__viaddmax_s16x2), two columns per instruction */
#endif
#ifndef WC_HOIST
#define WC_HOIST 0       /* 1: per-row / per-column flags and sign words read once into registers */
#endif
#ifdef __CUDA_ARCH__
#define WC_UNROLL _Pragma("unroll")
#define WC_KLOOP _Pragma("unroll 1")
#define WC_NOINLINE __noinline__
#else
#define WC_UNROLL
#define WC_KLOOP
#define WC_NOINLINE
#endif

struct alignas(16) WcI4 { int v[4]; };

WGREF_HD static inline unsigned int wc_shr(unsigned int x, unsigned int d) {
#ifdef __CUDA_ARCH__
    unsigned int r;
    asm("shr.b32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(d));
    return r;
#else
    return d >= 32u ? 0u : x >> d;
#endif
}
WGREF_HD static inline int wc_addmax(int a, int b, int c) {
#ifdef __CUDA_ARCH__
    return __viaddmax_s32(a, b, c);
#else
    int s = a + b;
    return s > c ? s : c;
#endif
}
/* x, made to depend on y (no code): orders the epilogue's outputs so that their temporaries do not pile up */
WGREF_HD static inline void wc_after(unsigned int &x, unsigned int y) {
#ifdef __CUDA_ARCH__
    asm volatile("" : "+r"(x) : "r"(y));
#else
    (void)x; (void)y;
#endif
}
WGREF_HD static inline void wc_after(int &x, unsigned int y) {
#ifdef __CUDA_ARCH__
    asm volatile("" : "+r"(x) : "r"(y));
#else
    (void)x; (void)y;
#endif
}
WGREF_HD static inline void wc_after(wg_i64 &x, unsigned int y) {
#ifdef __CUDA_ARCH__
    asm volatile("" : "+l"(x) : "r"(y));
#else
    (void)x; (void)y;
#endif
}
/* per 16-bit half: max(a + b, c) (exponents and their sums stay within int16) */
WGREF_HD static inline unsigned int wc_addmax2(unsigned int a, unsigned int b, unsigned int c) {
#ifdef __CUDA_ARCH__
    return __viaddmax_s16x2(a, b, c);
#else
    int lo = (short)(unsigned short)a + (short)(unsigned short)b, hi = (short)(a >> 16) + (short)(b >> 16);
    int clo = (short)(unsigned short)c, chi = (short)(c >> 16);
    lo = lo > clo ? lo : clo; hi = hi > chi ? hi : chi;
    return ((unsigned int)lo & 0xFFFFu) | ((unsigned int)hi << 16);
#endif
}
WGREF_HD static inline int wc_popc(unsigned int x) {
#ifdef __CUDA_ARCH__
    return __popc(x);
#else
    return __builtin_popcount(x);
#endif
}
WGREF_HD static inline int wc_bitlen64(unsigned long long x) {
#ifdef __CUDA_ARCH__
    return 64 - __clzll((long long)x);
#else
    return x ? 64 - __builtin_clzll(x) : 0;
#endif
}

/* shared-memory image of one chain step (pointers into one buffer, see wc_layout) */
struct WcSmem {
    int *va, *ea;            /* A: (Kc, 64) signed significand << Lp, exponent (WC_DEAD - class if not finite) */
    int *vb, *eb;            /* B: (Kb + 1, BN) signed significand, exponent; row Kb: +0 (dropped elements) */
    unsigned int *fa, *fb;   /* per row / column: bit 0 a zero operand, bit 1 a NaN/Inf operand */
    unsigned int *sa, *sb;   /* per row / column sign words over k (dense) */
    int *prow;               /* sparse: (64, Kc) B row of each product, Kb for a dropped element */
    unsigned int *cur;       /* the chain's D (next C) of every thread: slot (i * WC_TN + j) * nt + tid */
    unsigned int *wa, *wb;   /* dense, per row / column: words over k of zero, Inf, negative (-Inf too) operands */
    unsigned int *ea2;       /* A's exponents twice (two 16-bit halves), (Kc, 64) */
    short *eb16;             /* B's exponents as 16 bits, (Kb + 1, BN): a 32-bit word holds two columns */
};
WGREF_HD static inline unsigned long long wc_smem_bytes(int Kc, int Kb, int BN, int sparse) {
    return 4ull * (2ull * Kc * WC_R + 2ull * (Kb + 1) * BN + 2ull * WC_R + 2ull * BN + (sparse ? (unsigned long long)WC_R * Kc : 0ull)
                   + (unsigned long long)WC_R * BN + 3ull * (WC_R + BN) + (unsigned long long)Kc * WC_R
                   + (unsigned long long)(Kb + 1) * BN / 2);
}
WGREF_HD static inline WcSmem wc_layout(int *buf, int Kc, int Kb, int BN, int sparse) {
    WcSmem s;
    s.va = buf; s.ea = s.va + Kc * WC_R; s.ea2 = (unsigned int *)(s.ea + Kc * WC_R);
    s.vb = (int *)(s.ea2 + Kc * WC_R); s.eb = s.vb + (Kb + 1) * BN; s.eb16 = (short *)(s.eb + (Kb + 1) * BN);
    s.fa = (unsigned int *)(s.eb + (Kb + 1) * BN + (Kb + 1) * BN / 2); s.fb = s.fa + WC_R;
    s.sa = s.fb + BN; s.sb = s.sa + WC_R;
    s.prow = sparse ? (int *)(s.sb + BN) : (int *)0;
    s.cur = s.sb + BN + (sparse ? WC_R * Kc : 0);
    s.wa = s.cur + WC_R * BN; s.wb = s.wa + 3 * WC_R;
    return s;
}

struct WcArgs {
    int T, L, R, Kc, Kb, N, BN, ncg, nblk, sparse;
};

/* all threads (tid of nt): step l of tile t, columns bn0.. into shared memory */
WGREF_HD static void wc_stage(const WcSmem &s, const WcArgs &g, const WgParams &p, int t, int l, int bn0, int tid, int nt,
                              const unsigned int *acodes, const unsigned int *bcodes, const short *pos,
                              const short *tsa, const short *tea, const signed char *tca,
                              const short *tsb, const short *teb, const signed char *tcb) {
    /* WC_SB elements per thread and round: every global load (codes, then tables) issued before the
       shared-memory stores, so that their latencies overlap */
    const int Kc = g.Kc, Kb = g.Kb, BN = g.BN;
    const unsigned long long abase = ((unsigned long long)t * g.L + l) * WC_R * Kc;
    for (int i0 = tid; i0 < WC_R * Kc; i0 += WC_SB * nt) {
        unsigned int x[WC_SB];
        int sg[WC_SB], ex[WC_SB], cl[WC_SB], q[WC_SB];
        WC_UNROLL for (int u = 0; u < WC_SB; ++u) {
            const int idx = i0 + u * nt;
            x[u] = idx < WC_R * Kc ? acodes[abase + idx] : 0u;
            q[u] = (g.sparse && idx < WC_R * Kc) ? pos[abase + idx] : 0;
        }
        WC_UNROLL for (int u = 0; u < WC_SB; ++u) { sg[u] = tsa[x[u]]; ex[u] = tea[x[u]]; cl[u] = tca[x[u]]; }
        WC_UNROLL for (int u = 0; u < WC_SB; ++u) {
            const int idx = i0 + u * nt;
            if (idx >= WC_R * Kc) break;
            const int r = idx / Kc, k = idx % Kc;
            const int e = cl[u] ? WC_DEAD - cl[u] : ex[u];
            s.va[k * WC_R + r] = (int)((unsigned int)sg[u] << p.Lp);
            s.ea[k * WC_R + r] = e;
            if (WC_PACKED) s.ea2[k * WC_R + r] = ((unsigned int)e & 0xFFFFu) | ((unsigned int)e << 16);
            if (g.sparse) s.prow[idx] = (q[u] < 0 ? Kb : q[u]) * BN;
        }
    }
    const unsigned long long bbase = ((unsigned long long)t * g.L + l) * Kb * g.N + bn0;
    for (int i0 = tid; i0 < (Kb + 1) * BN; i0 += WC_SB * nt) {
        unsigned int y[WC_SB];
        bool in[WC_SB];
        int sg[WC_SB], ex[WC_SB], cl[WC_SB];
        WC_UNROLL for (int u = 0; u < WC_SB; ++u) {
            const int idx = i0 + u * nt, k = idx / BN, c = idx % BN;
            in[u] = idx < (Kb + 1) * BN && k < Kb && bn0 + c < g.N;
            y[u] = in[u] ? bcodes[bbase + (unsigned long long)k * g.N + c] : 0u;
        }
        WC_UNROLL for (int u = 0; u < WC_SB; ++u) { sg[u] = tsb[y[u]]; ex[u] = teb[y[u]]; cl[u] = tcb[y[u]]; }
        WC_UNROLL for (int u = 0; u < WC_SB; ++u) {
            const int idx = i0 + u * nt;
            if (idx >= (Kb + 1) * BN) break;
            const int v = in[u] ? sg[u] : 0;
            const int e = !in[u] ? WC_DEAD - 1 : (cl[u] ? WC_DEAD - cl[u] : ex[u]);
            s.vb[idx] = v;
            s.eb[idx] = e;
            if (WC_PACKED) s.eb16[idx] = (short)e;
        }
    }
}
/* after wc_stage (a barrier between): the per-row / per-column flags and sign words */
WGREF_HD static void wc_stage_flags(const WcSmem &s, const WcArgs &g, int tid, int nt) {
    const int Kc = g.Kc, BN = g.BN;
    for (int r = tid; r < WC_R; r += nt) {
        unsigned int fl = 0, sw = 0, wz = 0, wi = 0, wn = 0;
        for (int k = 0; k < Kc; ++k) {
            int e = s.ea[k * WC_R + r];
            bool neg = s.va[k * WC_R + r] < 0;
            if (e == WC_DEAD - 1) { fl |= 1u; wz |= 1u << k; }
            else if (e < WC_DEAD - 1) fl |= 2u;
            if (e == WC_DEAD - 2 || e == WC_DEAD - 3) wi |= 1u << k;
            if (e == WC_DEAD - 4) fl |= 4u;
            if (neg) sw |= 1u << k;
            if (neg || e == WC_DEAD - 3) wn |= 1u << k;
        }
        s.fa[r] = fl; s.sa[r] = sw;
        s.wa[3 * r] = wz; s.wa[3 * r + 1] = wi; s.wa[3 * r + 2] = wn;
    }
    if (!g.sparse)
        for (int c = (tid + WC_R) % nt; c < BN; c += nt) {     /* the rows' threads + 64 take the columns */
            unsigned int fl = 0, sw = 0, wz = 0, wi = 0, wn = 0;
            for (int k = 0; k < g.Kb; ++k) {
                int e = s.eb[k * BN + c];
                bool neg = s.vb[k * BN + c] < 0;
                if (e == WC_DEAD - 1) { fl |= 1u; wz |= 1u << k; }
                else if (e < WC_DEAD - 1) fl |= 2u;
                if (e == WC_DEAD - 2 || e == WC_DEAD - 3) wi |= 1u << k;
                if (e == WC_DEAD - 4) fl |= 4u;
                if (neg) sw |= 1u << k;
                if (neg || e == WC_DEAD - 3) wn |= 1u << k;
            }
            s.fb[c] = fl; s.sb[c] = sw;
            s.wb[3 * c] = wz; s.wb[3 * c + 1] = wi; s.wb[3 * c + 2] = wn;
        }
}

/* the exact per-output path (NaN / Inf operands or C): wgref_fdpa_one on the staged operands */
WGREF_HD static WC_NOINLINE unsigned int wc_exact(const WcSmem &s, const WcArgs &g, const WgParams &p, int r, int c,
                                                  unsigned int c_bits) {
    short sa[64], ea[64], sbv[64], eb[64];
    signed char ca[64], cb[64];
    for (int k = 0; k < g.Kc; ++k) {
        int xa = s.ea[k * WC_R + r], va = s.va[k * WC_R + r];
        int row = g.sparse ? s.prow[r * g.Kc + k] : k * g.BN;
        int xb = s.eb[row + c], vb = s.vb[row + c];
        ca[k] = (signed char)(xa <= WC_DEAD - 1 ? WC_DEAD - xa : 0);
        cb[k] = (signed char)(xb <= WC_DEAD - 1 ? WC_DEAD - xb : 0);
        ea[k] = (short)(ca[k] ? -16384 : xa);
        eb[k] = (short)(cb[k] ? -16384 : xb);
        sa[k] = (short)(va >> p.Lp);
        sbv[k] = (short)vb;
    }
    return wgref_fdpa_one(sa, ea, ca, sbv, eb, cb, 1, g.Kc, c_bits, p);
}

/* NaN / signed Inf of a dense output whose row or column holds a NaN/Inf operand, or whose C is NaN/Inf
   (wg_special from the per-row and per-column words: zero z, Inf i, negative n; any NaN in fl bit 2) */
WGREF_HD static inline unsigned int wc_special(const WcSmem &s, int r, int c, unsigned int c_bits, const WgParams &p) {
    const unsigned int *a = s.wa + 3 * r, *b = s.wb + 3 * c;
    const unsigned int I = a[1] | b[1], x = a[2] ^ b[2];
    bool nan = ((s.fa[r] | s.fb[c]) & 4u) || (a[1] & b[0]) || (a[0] & b[1]);
    bool ninf = (I & x) != 0, pinf = (I & ~x) != 0;
    unsigned int emask = (1u << p.acc_e) - 1;
    if (((c_bits >> p.acc_m) & emask) == emask) {
        if (c_bits & ((1u << p.acc_m) - 1)) nan = true;
        else if ((c_bits >> (p.acc_e + p.acc_m)) & 1) ninf = true;
        else pinf = true;
    }
    if (nan || (pinf && ninf)) return (unsigned int)p.nan_bits;
    unsigned int inf_bits = emask << p.acc_m;
    return ninf ? (inf_bits | (1u << (p.acc_e + p.acc_m))) : inf_bits;
}

/* S * 2**(emax - F) rounded once to the accumulator (wgref_fdpa_one's normalisation) */
WGREF_HD static inline unsigned int wc_round(wg_i64 S, int emax, const WgParams &p) {
    if (S == 0) return 0u;
    const wg_i64 demin = 2 - (1 << (p.acc_e - 1));
    const wg_i64 emask = (1 << p.acc_e) - 1;
    const wg_i64 maxc = (((wg_i64)(1 << p.acc_e) - 2) << p.rnd_m) | (((wg_i64)1 << p.rnd_m) - 1);
    const wg_i64 ovf = p.sat ? maxc : (emask << p.rnd_m);
    wg_i64 mag = S < 0 ? -S : S;
    wg_i64 bl = wc_bitlen64((unsigned long long)mag);
    wg_i64 e0 = (wg_i64)emax - p.F;
    wg_i64 lg = e0 + bl - 1;
    wg_i64 top = lg > demin ? lg : demin;
    wg_i64 shift = top - p.rnd_m - e0;
    wg_i64 ls = -shift > 0 ? -shift : 0; if (ls > 62) ls = 62;
    wg_i64 rs = shift > 0 ? shift : 0; if (rs > 62) rs = 62;
    wg_i64 rr = (mag << ls) >> rs;
    if (!p.rz) {
        wg_i64 rem = mag & (((wg_i64)1 << rs) - 1);
        wg_i64 half = ((wg_i64)1 << rs) >> 1;
        bool up = rs > 0 && (rem > half || (rem == half && (rr & 1) == 1));
        rr += up ? 1 : 0;
    }
    wg_i64 code = ((top - demin) << p.rnd_m) + rr;
    if (code > maxc) code = ovf;
    wg_i64 out = (code << (p.acc_m - p.rnd_m)) | ((wg_i64)(S < 0) << (p.acc_e + p.acc_m));
    return rr == 0 ? 0u : (unsigned int)out;
}

/* wc_round for |S| < 2**32 in 32-bit arithmetic (the 32-bit-sum kernels) */
WGREF_HD static inline unsigned int wc_round32(wg_i64 S, int emax, const WgParams &p) {
    if (S == 0) return 0u;
    const int demin = 2 - (1 << (p.acc_e - 1));
    const wg_i64 emask = (1 << p.acc_e) - 1;
    const wg_i64 maxc = (((wg_i64)(1 << p.acc_e) - 2) << p.rnd_m) | (((wg_i64)1 << p.rnd_m) - 1);
    const wg_i64 ovf = p.sat ? maxc : (emask << p.rnd_m);
    const unsigned int mag = (unsigned int)(S < 0 ? -S : S);
    const int bl = wc_bitlen64(mag);
    const int e0 = emax - p.F;
    const int lg = e0 + bl - 1;
    const int top = lg > demin ? lg : demin;
    const int shift = top - p.rnd_m - e0;
    unsigned int rr;
    bool up = false;
    if (shift <= 0) rr = mag << (-shift);                 /* -shift <= rnd_m: rr keeps rnd_m + 1 bits */
    else if (shift >= 32) { rr = 0; up = !p.rz && shift == 32 && mag > 0x80000000u; }
    else {
        rr = mag >> shift;
        if (!p.rz) {
            unsigned int rem = mag & ((1u << shift) - 1), half = 1u << (shift - 1);
            up = rem > half || (rem == half && (rr & 1u));
        }
    }
    rr += up ? 1u : 0u;
    wg_i64 code = ((wg_i64)(top - demin) << p.rnd_m) + rr;
    if (code > maxc) code = ovf;
    unsigned int out = ((unsigned int)code << (p.acc_m - p.rnd_m)) | ((unsigned int)(S < 0) << (p.acc_e + p.acc_m));
    return rr == 0 ? 0u : out;
}

/* one thread, one chain step: cur (the previous D, this step's C) -> this step's D */
template <bool SPARSE, typename IT>
WGREF_HD static void wc_step(const WcSmem &s, const WcArgs &g, const WgParams &p, int r0, int c0, int tid, int nt) {
    unsigned int *cs = s.cur + tid;
    const int Kc = g.Kc, BN = g.BN;
    const unsigned int emask = (1u << p.acc_e) - 1;
    const unsigned int mmask = (1u << p.acc_m) - 1;
    const unsigned int hidden = 1u << p.acc_m;
    const int bias = (1 << (p.acc_e - 1)) - 1;
    const int sh_c = p.F - p.acc_m;
    int em[WC_TM][WC_TN];
    int bmin[WC_TM][WC_TN];
    unsigned int fA[WC_TM], fB[WC_TN];
    WC_UNROLL for (int i = 0; i < WC_TM; ++i) fA[i] = WC_HOIST ? s.fa[r0 + i] : 0u;
    WC_UNROLL for (int j = 0; j < WC_TN; ++j) fB[j] = (SPARSE || !WC_HOIST) ? 0u : s.fb[c0 + j];
    /* pass 0: e_max starts at C's exponent, or e_zero for a zero C / any zero operand (dense) */
    WC_UNROLL for (int i = 0; i < WC_TM; ++i)
        WC_UNROLL for (int j = 0; j < WC_TN; ++j) {
            unsigned int bits = cs[(i * WC_TN + j) * nt];
            unsigned int E = (bits >> p.acc_m) & emask;
            unsigned int sig = E > 0 ? ((bits & mmask) | hidden) : (bits & mmask);
            if (E == emask) sig = 0;
            int ec = E > 0 ? (int)E - bias : 1 - bias;
            int e0 = sig == 0 ? p.e_zero : ec;
            unsigned int fl = WC_HOIST ? (fA[i] | fB[j]) : (SPARSE ? s.fa[r0 + i] : (s.fa[r0 + i] | s.fb[c0 + j]));
            if ((fl & 1u) && e0 < p.e_zero) e0 = p.e_zero;
            em[i][j] = e0;
            bmin[i][j] = 0;
        }
    /* pass 1: the largest product exponent (sparse: and the smallest B exponent, which tells
       whether a gathered B is zero / NaN / Inf) */
    if (!SPARSE && WC_PACKED) {      /* two columns per instruction: 16-bit halves */
        unsigned int em2[WC_TM][WC_TN / 2];
        WC_UNROLL for (int i = 0; i < WC_TM; ++i)
            WC_UNROLL for (int q = 0; q < WC_TN / 2; ++q)
                em2[i][q] = ((unsigned int)em[i][2 * q] & 0xFFFFu) | ((unsigned int)em[i][2 * q + 1] << 16);
        WC_KLOOP for (int k = 0; k < Kc; ++k) {
            WcI4 xa = *(const WcI4 *)&s.ea2[k * WC_R + r0];
            WcI4 xb = *(const WcI4 *)&s.eb16[k * BN + c0];
            WC_UNROLL for (int i = 0; i < WC_TM; ++i)
                WC_UNROLL for (int q = 0; q < WC_TN / 2; ++q)
                    em2[i][q] = wc_addmax2((unsigned int)xa.v[i], (unsigned int)xb.v[q], em2[i][q]);
        }
        WC_UNROLL for (int i = 0; i < WC_TM; ++i)
            WC_UNROLL for (int q = 0; q < WC_TN / 2; ++q) {
                em[i][2 * q] = (int)(short)(unsigned short)(em2[i][q] & 0xFFFFu);
                em[i][2 * q + 1] = (int)(short)(unsigned short)(em2[i][q] >> 16);
            }
    }
    if (SPARSE || !WC_PACKED) WC_KLOOP for (int k = 0; k < Kc; ++k) {
        WcI4 xa = *(const WcI4 *)&s.ea[k * WC_R + r0];
        if (!SPARSE) {
            WcI4 xb0 = *(const WcI4 *)&s.eb[k * BN + c0];
            WcI4 xb1 = *(const WcI4 *)&s.eb[k * BN + c0 + 4];
            int eb[WC_TN] = {xb0.v[0], xb0.v[1], xb0.v[2], xb0.v[3], xb1.v[0], xb1.v[1], xb1.v[2], xb1.v[3]};
            WC_UNROLL for (int i = 0; i < WC_TM; ++i)
                WC_UNROLL for (int j = 0; j < WC_TN; ++j) em[i][j] = wc_addmax(xa.v[i], eb[j], em[i][j]);
        } else {
            WC_UNROLL for (int i = 0; i < WC_TM; ++i) {
                const int row = s.prow[(r0 + i) * Kc + k];
                WcI4 xb0 = *(const WcI4 *)&s.eb[row + c0];
                WcI4 xb1 = *(const WcI4 *)&s.eb[row + c0 + 4];
                int eb[WC_TN] = {xb0.v[0], xb0.v[1], xb0.v[2], xb0.v[3], xb1.v[0], xb1.v[1], xb1.v[2], xb1.v[3]};
                WC_UNROLL for (int j = 0; j < WC_TN; ++j) {
                    em[i][j] = wc_addmax(xa.v[i], eb[j], em[i][j]);
                    bmin[i][j] = eb[j] < bmin[i][j] ? eb[j] : bmin[i][j];
                }
            }
        }
    }
    if (SPARSE) {
        WC_UNROLL for (int i = 0; i < WC_TM; ++i)
            WC_UNROLL for (int j = 0; j < WC_TN; ++j)
                if (bmin[i][j] <= WC_DEAD - 1 && em[i][j] < p.e_zero) em[i][j] = p.e_zero;  /* a gathered zero B */
    }
    /* pass 2: aligned products truncated toward zero, summed exactly; t ^ s, then -s (dense: by popcount) */
    IT acc[WC_TM][WC_TN];
    WC_UNROLL for (int i = 0; i < WC_TM; ++i)
        WC_UNROLL for (int j = 0; j < WC_TN; ++j) { acc[i][j] = 0; em[i][j] += p.Ln; }
    WC_KLOOP for (int k = 0; k < Kc; ++k) {
        WcI4 va = *(const WcI4 *)&s.va[k * WC_R + r0];
        WcI4 xa = *(const WcI4 *)&s.ea[k * WC_R + r0];
        unsigned int ma[WC_TM], sa[WC_TM];
        WC_UNROLL for (int i = 0; i < WC_TM; ++i) {
            int x = va.v[i];
            sa[i] = (unsigned int)(x >> 31);
            ma[i] = (unsigned int)(x < 0 ? -x : x);
        }
        if (SPARSE) {
            WC_UNROLL for (int i = 0; i < WC_TM; ++i) {
                const int row = s.prow[(r0 + i) * Kc + k];
                WcI4 vb0 = *(const WcI4 *)&s.vb[row + c0];
                WcI4 vb1 = *(const WcI4 *)&s.vb[row + c0 + 4];
                WcI4 xb0 = *(const WcI4 *)&s.eb[row + c0];
                WcI4 xb1 = *(const WcI4 *)&s.eb[row + c0 + 4];
                int vb[WC_TN] = {vb0.v[0], vb0.v[1], vb0.v[2], vb0.v[3], vb1.v[0], vb1.v[1], vb1.v[2], vb1.v[3]};
                int eb[WC_TN] = {xb0.v[0], xb0.v[1], xb0.v[2], xb0.v[3], xb1.v[0], xb1.v[1], xb1.v[2], xb1.v[3]};
                WC_UNROLL for (int j = 0; j < WC_TN; ++j) {
                    int x = vb[j];
                    unsigned int sb = (unsigned int)(x >> 31);
                    unsigned int mb = (unsigned int)(x < 0 ? -x : x);
                    unsigned int d = (unsigned int)(em[i][j] - xa.v[i] - eb[j]);
                    unsigned int sg = sa[i] ^ sb;
                    unsigned int tt = wc_shr(ma[i] * mb, d);
                    acc[i][j] += (IT)(int)(tt ^ sg) - (IT)(int)sg;
                }
            }
        } else {
            WcI4 vb0 = *(const WcI4 *)&s.vb[k * BN + c0];
            WcI4 vb1 = *(const WcI4 *)&s.vb[k * BN + c0 + 4];
            WcI4 xb0 = *(const WcI4 *)&s.eb[k * BN + c0];
            WcI4 xb1 = *(const WcI4 *)&s.eb[k * BN + c0 + 4];
            int vb[WC_TN] = {vb0.v[0], vb0.v[1], vb0.v[2], vb0.v[3], vb1.v[0], vb1.v[1], vb1.v[2], vb1.v[3]};
            int eb[WC_TN] = {xb0.v[0], xb0.v[1], xb0.v[2], xb0.v[3], xb1.v[0], xb1.v[1], xb1.v[2], xb1.v[3]};
            unsigned int mb[WC_TN], sb[WC_TN];
            WC_UNROLL for (int j = 0; j < WC_TN; ++j) {
                int x = vb[j];
                sb[j] = (unsigned int)(x >> 31);
                mb[j] = (unsigned int)(x < 0 ? -x : x);
            }
            WC_UNROLL for (int i = 0; i < WC_TM; ++i)
                WC_UNROLL for (int j = 0; j < WC_TN; ++j) {
                    unsigned int d = (unsigned int)(em[i][j] - xa.v[i] - eb[j]);
                    unsigned int tt = wc_shr(ma[i] * mb[j], d);
                    acc[i][j] += (IT)(int)(tt ^ sa[i] ^ sb[j]);
                }
        }
    }
    /* the C term, one rounding; NaN / Inf outputs (operand or C) afterwards, apart */
    unsigned int slow = 0, dep = 0;
    unsigned int sA[WC_TM], sB[WC_TN];
    if (WC_HOIST) {
        WC_UNROLL for (int i = 0; i < WC_TM; ++i) { fA[i] = s.fa[r0 + i]; sA[i] = s.sa[r0 + i]; }
        WC_UNROLL for (int j = 0; j < WC_TN; ++j) { fB[j] = SPARSE ? 0u : s.fb[c0 + j]; sB[j] = SPARSE ? 0u : s.sb[c0 + j]; }
    }
    WC_UNROLL for (int i = 0; i < WC_TM; ++i)
        WC_UNROLL for (int j = 0; j < WC_TN; ++j) {
            int emax = em[i][j] - p.Ln;
            wc_after(emax, dep);
            unsigned int bits = cs[(i * WC_TN + j) * nt];       /* a few outputs at a time: few registers live */
            IT a = acc[i][j];
            wc_after(bits, dep);
            wc_after(a, dep);
            unsigned int E = (bits >> p.acc_m) & emask;
            bool cspec = E == emask;
            int ec = E > 0 ? (int)E - bias : 1 - bias;
            bool cneg = (bits >> (p.acc_e + p.acc_m)) & 1;
            const unsigned int fa = WC_HOIST ? fA[i] : s.fa[r0 + i];
            const unsigned int fb = (WC_HOIST || SPARSE) ? fB[j] : s.fb[c0 + j];
            const unsigned int sw = SPARSE ? 0u : (WC_HOIST ? (sA[i] ^ sB[j]) : (s.sa[r0 + i] ^ s.sb[c0 + j]));
            bool spec = SPARSE ? ((fa & 2u) || bmin[i][j] < WC_DEAD - 1) : (((fa | fb) & 2u) != 0);
            unsigned int res;
            if (sizeof(IT) == 4) {
                /* |sum| < 2**31; C's exponent <= emax, so its aligned significand is below 2**30 and |S| < 2**32 */
                unsigned int cm = E > 0 ? ((bits & mmask) | hidden) : (bits & mmask);
                if (cspec) cm = 0;
                int sh = ec - emax + sh_c;
                unsigned int t = sh > 0 ? cm << sh : wc_shr(cm, (unsigned int)(-sh));
                int sum = SPARSE ? (int)(unsigned int)a : (int)((unsigned int)a + (unsigned int)wc_popc(sw));
                wg_i64 S = (wg_i64)sum + (cneg ? -(wg_i64)t : (wg_i64)t);
                res = wc_round32(S, emax, p);
            } else {
                wg_i64 cm = E > 0 ? ((bits & mmask) | hidden) : (bits & mmask);
                if (cspec) cm = 0;
                wg_i64 sh = (wg_i64)ec - emax + sh_c;
                wg_i64 rsh = -sh > 0 ? -sh : 0; if (rsh > 63) rsh = 63;
                wg_i64 t64 = (cm << (sh > 0 ? sh : 0)) >> rsh;
                wg_i64 S = SPARSE ? (wg_i64)a : (wg_i64)a + wc_popc(sw);
                S += (cneg && cm != 0) ? -t64 : t64;
                res = wc_round(S, emax, p);
            }
            if (spec || cspec) slow |= 1u << (i * WC_TN + j);
            else cs[(i * WC_TN + j) * nt] = res;      /* the slow ones keep C for what follows */
            if (j % 4 == 3) dep = res;
        }
    if (slow) {
        WC_UNROLL for (int i = 0; i < WC_TM; ++i)
            WC_UNROLL for (int j = 0; j < WC_TN; ++j)
                if ((slow >> (i * WC_TN + j)) & 1u) {
                    unsigned int *q = &cs[(i * WC_TN + j) * nt];
                    *q = SPARSE ? wc_exact(s, g, p, r0 + i, c0 + j, *q) : wc_special(s, r0 + i, c0 + j, *q, p);
                }
    }
}

/* integer forms, one step: exact sum plus C, wrapped or clamped to int32 */
template <bool SPARSE>
WGREF_HD static void wc_int_step(int (&cur)[WC_TM][WC_TN], const WcSmem &s, const WcArgs &g, int r0, int c0, int clamp) {
    const int Kc = g.Kc, BN = g.BN;
    int acc[WC_TM][WC_TN];
    WC_UNROLL for (int i = 0; i < WC_TM; ++i)
        WC_UNROLL for (int j = 0; j < WC_TN; ++j) acc[i][j] = 0;
    for (int k = 0; k < Kc; ++k) {
        WcI4 va = *(const WcI4 *)&s.va[k * WC_R + r0];
        WC_UNROLL for (int i = 0; i < WC_TM; ++i) {
            const int row = SPARSE ? s.prow[(r0 + i) * Kc + k] : k * BN;
            WcI4 vb0 = *(const WcI4 *)&s.vb[row + c0];
            WcI4 vb1 = *(const WcI4 *)&s.vb[row + c0 + 4];
            int vb[WC_TN] = {vb0.v[0], vb0.v[1], vb0.v[2], vb0.v[3], vb1.v[0], vb1.v[1], vb1.v[2], vb1.v[3]};
            WC_UNROLL for (int j = 0; j < WC_TN; ++j) acc[i][j] += va.v[i] * vb[j];
        }
    }
    WC_UNROLL for (int i = 0; i < WC_TM; ++i)
        WC_UNROLL for (int j = 0; j < WC_TN; ++j) {
            wg_i64 v = (wg_i64)cur[i][j] + acc[i][j];
            if (clamp) {
                if (v > 2147483647LL) v = 2147483647LL;
                if (v < -2147483648LL) v = -2147483648LL;
                cur[i][j] = (int)v;
            } else cur[i][j] = (int)(unsigned int)(unsigned long long)v;
        }
}
/* integer staging: values (not codes), the same layout; dropped elements 0 */
WGREF_HD static void wc_int_stage(const WcSmem &s, const WcArgs &g, int t, int l, int bn0, int tid, int nt,
                                  const int *a, const int *b, const short *pos) {
    const int Kc = g.Kc, Kb = g.Kb, BN = g.BN;
    const unsigned long long abase = ((unsigned long long)t * g.L + l) * WC_R * Kc;
    for (int idx = tid; idx < WC_R * Kc; idx += nt) {
        int r = idx / Kc, k = idx % Kc;
        s.va[k * WC_R + r] = a[abase + idx];
        if (g.sparse) {
            int q = pos[abase + idx];
            s.prow[idx] = (q < 0 ? Kb : q) * BN;
        }
    }
    const unsigned long long bbase = ((unsigned long long)t * g.L + l) * Kb * g.N + bn0;
    for (int idx = tid; idx < (Kb + 1) * BN; idx += nt) {
        int k = idx / BN, c = idx % BN;
        s.vb[idx] = (k < Kb && bn0 + c < g.N) ? b[bbase + (unsigned long long)k * g.N + c] : 0;
    }
}

WGREF_HD static inline WcArgs wc_args(int T, int L, int R, int Kc, int Kb, int N, int sparse) {
    WcArgs g;
    g.T = T; g.L = L; g.R = R; g.Kc = Kc; g.Kb = Kb; g.N = N; g.sparse = sparse;
    g.ncg = N / WC_TN < WC_BN / WC_TN ? N / WC_TN : WC_BN / WC_TN;
    g.BN = g.ncg * WC_TN;
    g.nblk = (N + g.BN - 1) / g.BN;
    return g;
}
/* the terms of a step fit int32 when Kc * 2**(F+2) <= 2**31 (every term is below 2**(F+2)) */
WGREF_HD static inline bool wc_wide(int Kc, const WgParams &p) {
    return ((wg_i64)Kc << (p.F + 2)) > ((wg_i64)1 << 31);
}
WGREF_HD static inline void wc_load_c(unsigned int (&cur)[WC_TM][WC_TN], const unsigned int *c, const WcArgs &g,
                                      int t, int r0, int col, bool on) {
    WC_UNROLL for (int i = 0; i < WC_TM; ++i)
        WC_UNROLL for (int j = 0; j < WC_TN; ++j)
            cur[i][j] = on ? c[((unsigned long long)t * WC_R + r0 + i) * g.N + col + j] : 0u;
}
WGREF_HD static inline void wc_load_cs(const WcSmem &s, const unsigned int *c, const WcArgs &g, int t, int r0,
                                       int col, bool on, int tid, int nt) {
    unsigned int v[WC_TM][WC_TN];          /* all loads first, then the shared-memory stores */
    WC_UNROLL for (int i = 0; i < WC_TM; ++i)
        WC_UNROLL for (int j = 0; j < WC_TN; ++j)
            v[i][j] = on ? c[((unsigned long long)t * WC_R + r0 + i) * g.N + col + j] : 0u;
    WC_UNROLL for (int i = 0; i < WC_TM; ++i)
        WC_UNROLL for (int j = 0; j < WC_TN; ++j) s.cur[(i * WC_TN + j) * nt + tid] = v[i][j];
}
WGREF_HD static inline void wc_store_cs(const WcSmem &s, unsigned int *out, const WcArgs &g, int t, int r0, int col,
                                        bool on, int tid, int nt) {
    if (!on) return;
    WC_UNROLL for (int i = 0; i < WC_TM; ++i)
        WC_UNROLL for (int j = 0; j < WC_TN; ++j)
            out[((unsigned long long)t * WC_R + r0 + i) * g.N + col + j] = s.cur[(i * WC_TN + j) * nt + tid];
}
WGREF_HD static inline void wc_store(const unsigned int (&cur)[WC_TM][WC_TN], unsigned int *out, const WcArgs &g,
                                     int t, int r0, int col, bool on) {
    if (!on) return;
    WC_UNROLL for (int i = 0; i < WC_TM; ++i)
        WC_UNROLL for (int j = 0; j < WC_TN; ++j)
            out[((unsigned long long)t * WC_R + r0 + i) * g.N + col + j] = cur[i][j];
}

#ifdef __CUDACC_RTC__
template <bool SPARSE, typename IT>
__device__ static void wc_body(const WcSmem &s, const WcArgs &g, const WgParams &p, int t, int bn0, int tid, int nt,
                               const unsigned int *acodes, const unsigned int *bcodes, const short *pos,
                               const unsigned int *cbits, unsigned int *out,
                               const short *tsa, const short *tea, const signed char *tca,
                               const short *tsb, const short *teb, const signed char *tcb) {
    const int r0 = (tid / g.ncg) * WC_TM, c0 = (tid % g.ncg) * WC_TN;
    const bool on = bn0 + c0 < g.N;
    wc_load_cs(s, cbits, g, t, r0, bn0 + c0, on, tid, nt);
    for (int l = 0; l < g.L; ++l) {
        if (l) __syncthreads();
        wc_stage(s, g, p, t, l, bn0, tid, nt, acodes, bcodes, pos, tsa, tea, tca, tsb, teb, tcb);
        __syncthreads();
        wc_stage_flags(s, g, tid, nt);
        __syncthreads();
        if (on) wc_step<SPARSE, IT>(s, g, p, r0, c0, tid, nt);
    }
    wc_store_cs(s, out, g, t, r0, bn0 + c0, on, tid, nt);
}
/* grid: T * nblk CTAs of 16 * ncg threads (ncg = min(N, 64) / 8); dynamic shared memory wc_smem_bytes.
   Four kernels: dense / sparse (pos != NULL) and 32-bit / 64-bit sums (wc_wide); launch_model_chain picks. */
#define WC_KERNEL(NAME, SPARSE, IT, MINB)                                                                    \
extern "C" __global__ void __launch_bounds__(WC_NT, MINB) NAME(                                                    \
        const unsigned int *acodes, const unsigned int *bcodes, const short *pos, const unsigned int *cbits,  \
        unsigned int *out, int T, int L, int R, int Kc, int Kb, int N,                                        \
        const short *tsa, const short *tea, const signed char *tca,                                           \
        const short *tsb, const short *teb, const signed char *tcb, const int *pv) {                          \
    extern __shared__ __align__(16) int wc_buf[];                                                             \
    const WgParams p = {pv[0], pv[1], pv[2], pv[3], pv[4], pv[5], pv[6], pv[7], pv[8], pv[9]};               \
    const WcArgs g = wc_args(T, L, R, Kc, Kb, N, SPARSE);                                                     \
    const WcSmem s = wc_layout(wc_buf, Kc, Kb, g.BN, g.sparse);                                               \
    const int t = blockIdx.x / g.nblk, bn0 = (blockIdx.x % g.nblk) * g.BN;                                   \
    wc_body<SPARSE, IT>(s, g, p, t, bn0, threadIdx.x, blockDim.x, acodes, bcodes, pos, cbits, out,            \
                        tsa, tea, tca, tsb, teb, tcb);                                                        \
}
WC_KERNEL(wgref_model_chain, false, unsigned int, 3)      /* <= 168 registers: 3 CTAs (12 warps) per SM */
WC_KERNEL(wgref_model_chain_wide, false, wg_i64, 2)
WC_KERNEL(wgref_model_chain_sparse, true, unsigned int, 2)
WC_KERNEL(wgref_model_chain_sparse_wide, true, wg_i64, 2)
extern "C" __global__ void __launch_bounds__(WC_NT) wgref_int_model_chain(
        const int *a, const int *b, const short *pos, const int *c, int *out, int T, int L, int R, int Kc, int Kb,
        int N, int clamp) {
    extern __shared__ __align__(16) int wc_buf[];
    const WcArgs g = wc_args(T, L, R, Kc, Kb, N, pos != 0);
    const WcSmem s = wc_layout(wc_buf, Kc, Kb, g.BN, g.sparse);
    const int t = blockIdx.x / g.nblk, bn0 = (blockIdx.x % g.nblk) * g.BN;
    const int tid = threadIdx.x, nt = blockDim.x;
    const int r0 = (tid / g.ncg) * WC_TM, c0 = (tid % g.ncg) * WC_TN;
    const bool on = bn0 + c0 < g.N;
    int cur[WC_TM][WC_TN];
    wc_load_c(*(unsigned int (*)[WC_TM][WC_TN])cur, (const unsigned int *)c, g, t, r0, bn0 + c0, on);
    for (int l = 0; l < g.L; ++l) {
        if (l) __syncthreads();
        wc_int_stage(s, g, t, l, bn0, tid, nt, a, b, pos);
        __syncthreads();
        if (on) {
            if (g.sparse) wc_int_step<true>(cur, s, g, r0, c0, clamp);
            else wc_int_step<false>(cur, s, g, r0, c0, clamp);
        }
    }
    wc_store(*(unsigned int (*)[WC_TM][WC_TN])cur, (unsigned int *)out, g, t, r0, bn0 + c0, on);
}
#else
/* the host loop: every CTA, its threads one after another between the barriers */
template <bool SPARSE, typename IT>
static void wc_host_t(const WcSmem &s, const WcArgs &g, const WgParams &p,
                      const unsigned int *acodes, const unsigned int *bcodes, const short *pos,
                      const unsigned int *cbits, unsigned int *out,
                      const short *tsa, const short *tea, const signed char *tca,
                      const short *tsb, const short *teb, const signed char *tcb) {
    const int nt = WC_RG * g.ncg;
    for (int blk = 0; blk < g.T * g.nblk; ++blk) {
        const int t = blk / g.nblk, bn0 = (blk % g.nblk) * g.BN;
        for (int tid = 0; tid < nt; ++tid) {
            const int r0 = (tid / g.ncg) * WC_TM, c0 = (tid % g.ncg) * WC_TN;
            wc_load_cs(s, cbits, g, t, r0, bn0 + c0, bn0 + c0 < g.N, tid, nt);
        }
        for (int l = 0; l < g.L; ++l) {
            for (int tid = 0; tid < nt; ++tid)
                wc_stage(s, g, p, t, l, bn0, tid, nt, acodes, bcodes, pos, tsa, tea, tca, tsb, teb, tcb);
            for (int tid = 0; tid < nt; ++tid) wc_stage_flags(s, g, tid, nt);
            for (int tid = 0; tid < nt; ++tid) {
                const int r0 = (tid / g.ncg) * WC_TM, c0 = (tid % g.ncg) * WC_TN;
                if (bn0 + c0 < g.N) wc_step<SPARSE, IT>(s, g, p, r0, c0, tid, nt);
            }
        }
        for (int tid = 0; tid < nt; ++tid) {
            const int r0 = (tid / g.ncg) * WC_TM, c0 = (tid % g.ncg) * WC_TN;
            wc_store_cs(s, out, g, t, r0, bn0 + c0, bn0 + c0 < g.N, tid, nt);
        }
    }
}
extern "C" void wgref_model_chain_host(const unsigned int *acodes, const unsigned int *bcodes, const short *pos,
                                       const unsigned int *cbits, unsigned int *out, int T, int L, int R, int Kc,
                                       int Kb, int N, const short *tsa, const short *tea, const signed char *tca,
                                       const short *tsb, const short *teb, const signed char *tcb,
                                       const WgParams *pp) {
    const WgParams p = *pp;
    const WcArgs g = wc_args(T, L, R, Kc, Kb, N, pos != 0);
    int *buf = new int[wc_smem_bytes(Kc, Kb, g.BN, g.sparse) / 4 + 4];
    const WcSmem s = wc_layout(buf, Kc, Kb, g.BN, g.sparse);
    const bool wide = wc_wide(Kc, p);
    if (g.sparse) {
        if (wide) wc_host_t<true, wg_i64>(s, g, p, acodes, bcodes, pos, cbits, out, tsa, tea, tca, tsb, teb, tcb);
        else wc_host_t<true, unsigned int>(s, g, p, acodes, bcodes, pos, cbits, out, tsa, tea, tca, tsb, teb, tcb);
    } else {
        if (wide) wc_host_t<false, wg_i64>(s, g, p, acodes, bcodes, pos, cbits, out, tsa, tea, tca, tsb, teb, tcb);
        else wc_host_t<false, unsigned int>(s, g, p, acodes, bcodes, pos, cbits, out, tsa, tea, tca, tsb, teb, tcb);
    }
    delete[] buf;
}
extern "C" void wgref_int_model_chain_host(const int *a, const int *b, const short *pos, const int *c, int *out,
                                           int T, int L, int R, int Kc, int Kb, int N, int clamp) {
    const WcArgs g = wc_args(T, L, R, Kc, Kb, N, pos != 0);
    int *buf = new int[wc_smem_bytes(Kc, Kb, g.BN, g.sparse) / 4 + 4];
    const WcSmem s = wc_layout(buf, Kc, Kb, g.BN, g.sparse);
    const int nt = WC_RG * g.ncg;
    int (*cur)[WC_TM][WC_TN] = new int[WC_NT][WC_TM][WC_TN];
    for (int blk = 0; blk < g.T * g.nblk; ++blk) {
        const int t = blk / g.nblk, bn0 = (blk % g.nblk) * g.BN;
        for (int tid = 0; tid < nt; ++tid) {
            const int r0 = (tid / g.ncg) * WC_TM, c0 = (tid % g.ncg) * WC_TN;
            wc_load_c(*(unsigned int (*)[WC_TM][WC_TN])cur[tid], (const unsigned int *)c, g, t, r0, bn0 + c0, bn0 + c0 < g.N);
        }
        for (int l = 0; l < g.L; ++l) {
            for (int tid = 0; tid < nt; ++tid) wc_int_stage(s, g, t, l, bn0, tid, nt, a, b, pos);
            for (int tid = 0; tid < nt; ++tid) {
                const int r0 = (tid / g.ncg) * WC_TM, c0 = (tid % g.ncg) * WC_TN;
                if (bn0 + c0 < g.N) {
                    if (g.sparse) wc_int_step<true>(cur[tid], s, g, r0, c0, clamp);
                    else wc_int_step<false>(cur[tid], s, g, r0, c0, clamp);
                }
            }
        }
        for (int tid = 0; tid < nt; ++tid) {
            const int r0 = (tid / g.ncg) * WC_TM, c0 = (tid % g.ncg) * WC_TN;
            wc_store(*(unsigned int (*)[WC_TM][WC_TN])cur[tid], (unsigned int *)out, g, t, r0, bn0 + c0, bn0 + c0 < g.N);
        }
    }
    delete[] cur;
    delete[] buf;
}
#endif
"""

SOURCE = SOURCE + CHAIN_SOURCE


class WgParams(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int) for n in ("F", "e_zero", "acc_e", "acc_m", "rnd_m", "rz", "sat",
                                            "nan_bits", "Lp", "Ln")]


def kernel_params(p: AccumParams, mbits_a: int, mbits_b: int) -> WgParams:
    """The C struct of one binding row (shifts as in fdpa_chain: Lp/Ln turn products into F bits)."""
    L = p.F - mbits_a - mbits_b
    spec = p.acc_spec
    return WgParams(p.F, p.e_zero, spec.ebits, spec.mbits, p.round_mbits, int(p.rounding == "rz"),
                    int(p.overflow == "satfinite"), p.nan_bits, max(L, 0), max(-L, 0))


_HOST: ctypes.CDLL | None = None


def build_host_library(source: str, stem: str, what: str) -> ctypes.CDLL:
    """``source`` compiled for the host with the system C++ compiler as a shared library, cached in
    the temp folder by source hash (``<stem>_<hash>.so``); ``what`` names it in the error."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not cxx:
        raise InputError(f"no C++ compiler found (set CXX or install g++) to build the host copy of {what}")
    h = hashlib.sha256(source.encode()).hexdigest()[:16]
    lib = Path(tempfile.gettempdir()) / f"{stem}_{h}.so"
    if not lib.exists():
        src = lib.with_suffix(".cpp")
        src.write_text(source)
        tmp = lib.with_suffix(f".{os.getpid()}.so")
        subprocess.run([cxx, "-O2", "-shared", "-fPIC", "-o", str(tmp), str(src)], check=True,
                       capture_output=True)
        os.replace(tmp, lib)
    return ctypes.CDLL(str(lib))


def host_library() -> ctypes.CDLL:
    """:data:`SOURCE` compiled for the host with the system C++ compiler (cached by source hash)."""
    global _HOST
    if _HOST is None:
        _HOST = build_host_library(SOURCE, "wgref_device_model", "the GPU model")
    return _HOST


def _ptr(x: np.ndarray):
    return x.ctypes.data_as(ctypes.c_void_p)


def _kernel_inputs(form, p, a, b, c, imm_scale_a: int, imm_scale_b: int, T: int, R: int, K: int,
                   N: int) -> dict:
    """The kernels' inputs as contiguous numpy arrays, A (T, R, K), B (T, K, N), C (T, R, N): int32
    values for integer forms; otherwise operand codes, C's bits, the two decode tables and the
    binding row."""
    if form.family == "int8":
        return {"int": True, "clamp": (p.overflow_satfinite if form.satfinite else p.overflow_plain) == "clamp",
                "arrays": [np.ascontiguousarray(np.asarray(x).reshape(shape), np.int32)
                           for x, shape in ((a, (T, R, K)), (b, (T, K, N)), (c, (T, R, N)))]}
    sa_, sb_ = operand_spec(form.dtype_a, p), operand_spec(form.dtype_b, p)
    return {"int": False, "params": kernel_params(p, sa_.mbits, sb_.mbits),
            "tables": [np.ascontiguousarray(x) for x in (*decode_table(sa_), *decode_table(sb_))],
            "arrays": [np.ascontiguousarray(operand_codes(a, form.dtype_a, p, imm_scale_a == -1).reshape(T, R, K), np.uint32),
                       np.ascontiguousarray(operand_codes(b, form.dtype_b, p, imm_scale_b == -1).reshape(T, K, N), np.uint32),
                       np.ascontiguousarray(bits_of(c).reshape(T, R, N), np.uint32)]}


def _run_host(x: dict, T: int, R: int, K: int, N: int) -> np.ndarray:
    """Raw outputs (T, R, N) of the host build: int32 values or uint32 accumulator bits."""
    lib = host_library()
    out = np.empty((T, R, N), np.int32 if x["int"] else np.uint32)
    if x["int"]:
        lib.wgref_int_model_host(*[_ptr(v) for v in x["arrays"]], _ptr(out), T, R, K, N, int(x["clamp"]))
    else:
        lib.wgref_wgmma_model_host(*[_ptr(v) for v in x["arrays"]], _ptr(out), T, R, K, N,
                                   *[_ptr(v) for v in x["tables"]], ctypes.byref(x["params"]))
    return out


def wgmma_host(instr: str, a, b, c=None, *, scale_d: bool = True, imm_scale_a: int = 1,
               imm_scale_b: int = 1) -> np.ndarray:
    """D of one wgmma computed by the host build of the GPU port (same arguments as
    :func:`refmodel.numerics.wgmma.wgmma`; tiles (T, 64, K), (T, K, N), (T, 64, N))."""
    form, p, a, b, c, batch = prepare(instr, a, b, c, scale_d, imm_scale_a, imm_scale_b, None)
    K, N = form.k, form.n
    T = int(np.prod(batch, dtype=np.int64))
    if form.family != "int8" and p.k_group not in (None, K):
        raise InputError("the GPU port models one fused sum per instruction (k_group = K)")
    raw = _run_host(_kernel_inputs(form, p, a, b, c, imm_scale_a, imm_scale_b, T, 64, K, N), T, 64, K, N)
    return (raw if form.family == "int8" else from_bits(raw, form.dtype_d)).reshape(batch + (64, N))


def wgmma_device(instr: str, a, b, c=None, *, scale_d: bool = True, imm_scale_a: int = 1,
                 imm_scale_b: int = 1):
    """D of one wgmma computed on the GPU's CUDA cores by the port (cupy arrays out; inputs as for
    :func:`wgmma_host`, numpy or cupy).  Checked against :func:`wgmma_host` by the gpu-marked test
    in tests/test_device_model.py."""
    from gpu.kernels.runtime import compile_module, require_device

    cp = require_device()
    host = [None if x is None else (cp.asnumpy(x) if hasattr(x, "device") else x) for x in (a, b, c)]
    form, p, a, b, c, batch = prepare(instr, *host, scale_d, imm_scale_a, imm_scale_b, None)
    K, N = form.k, form.n
    T = int(np.prod(batch, dtype=np.int64))
    x = _kernel_inputs(form, p, a, b, c, imm_scale_a, imm_scale_b, T, 64, K, N)
    arrays = [cp.asarray(v) for v in x["arrays"]]
    threads = 256
    grid = ((T * 64 * N + threads - 1) // threads,)
    dims = (np.int32(T), np.int32(64), np.int32(K), np.int32(N))
    mod = compile_module(SOURCE)
    if x["int"]:
        out = cp.empty((T, 64, N), cp.int32)
        mod.get_function("wgref_int_model")(grid, (threads,), (*arrays, out, *dims, np.int32(x["clamp"])))
    else:
        pv = cp.asarray(np.array([getattr(x["params"], f) for f, _ in WgParams._fields_], np.int32))
        out = cp.empty((T, 64, N), cp.uint32)
        mod.get_function("wgref_wgmma_model")(grid, (threads,), (*arrays, out, *dims,
                                                                 *[cp.asarray(v) for v in x["tables"]], pv))
    return out.reshape(batch + (64, N))


def _check_chain(chain) -> int:
    if isinstance(chain, (bool, np.bool_)) or not isinstance(chain, (int, np.integer)) or not 1 <= int(chain) <= 4096:
        raise InputError(f"chain must be an integer in 1..4096 (wgmmas per K chain), got {chain!r:.40}")
    return int(chain)


def chain_smem_bytes(Kc: int, Kb: int, N: int, sparse: bool) -> int:
    """Dynamic shared memory of one CTA of the chain kernels (wc_smem_bytes)."""
    BN = 8 * min(N // 8, 8)
    return 4 * (2 * Kc * 64 + 2 * (Kb + 1) * BN + 2 * 64 + 2 * BN + (64 * Kc if sparse else 0) + 64 * BN + 3 * (64 + BN)
                + Kc * 64 + (Kb + 1) * BN // 2)


def chain_launch_shape(T: int, N: int) -> tuple[int, int]:
    """(CTAs, threads per CTA) of the chain kernels: a CTA per tile and block of <= 64 columns, 4 x 8
    outputs per thread."""
    ncg = min(N // 8, 8)
    return T * ((N + 8 * ncg - 1) // (8 * ncg)), 16 * ncg


def _check_dims(R: int, Kc: int, Kb: int, N: int, sparse: bool) -> None:
    if R != 64:
        raise InputError(f"the chain kernels take 64 rows of A per tile, got R = {R}")
    if not 1 <= Kc <= 32 or N < 8 or N % 8:
        raise InputError(f"the chain kernels need 1 <= Kc <= 32 and N a multiple of 8, got Kc = {Kc}, N = {N}")
    if (Kb != 2 * Kc) if sparse else (Kb != Kc):
        raise InputError(f"B must have {'2 *' if sparse else ''} Kc rows per step ({'sparse' if sparse else 'dense'}), "
                         f"got Kb = {Kb} for Kc = {Kc}")


def chain_is_wide(Kc: int, F: int) -> bool:
    """Whether a step's terms need a 64-bit sum: Kc * 2**(F+2) > 2**31 (every term is below 2**(F+2))."""
    return (Kc << (F + 2)) > (1 << 31)


def _chain_host_run(x: dict, pos, T: int, L: int, Kc: int, Kb: int, N: int) -> np.ndarray:
    """Raw outputs (T, 64, N) of the host chain kernel on prepared arrays (see :func:`_chain_inputs`)."""
    lib = host_library()
    _check_dims(64, Kc, Kb, N, pos is not None)
    pp = None if pos is None else _ptr(pos)
    if x["int"]:
        out = np.empty((T, 64, N), np.int32)
        lib.wgref_int_model_chain_host(*[_ptr(v) for v in x["arrays"][:2]], pp, _ptr(x["arrays"][2]), _ptr(out),
                                       T, L, 64, Kc, Kb, N, int(x["clamp"]))
    else:
        out = np.empty((T, 64, N), np.uint32)
        lib.wgref_model_chain_host(*[_ptr(v) for v in x["arrays"][:2]], pp, _ptr(x["arrays"][2]), _ptr(out),
                                   T, L, 64, Kc, Kb, N, *[_ptr(v) for v in x["tables"]], ctypes.byref(x["params"]))
    return out


def _chain_inputs(form, p, steps_a, steps_b, c, imm_scale_a: int, imm_scale_b: int, T: int, N: int) -> dict:
    """The chain kernels' inputs: A (T, L, 64, Kc), B (T, L, Kb, N) codes (int32 values for integer
    forms), C (T, 64, N) bits; steps_a / steps_b: one (T, 64, Kc) / (T, Kb, N) array per step."""
    L = len(steps_a)
    if form.family == "int8":
        arr = [np.ascontiguousarray(np.stack([np.asarray(x).reshape(T, 64, -1) for x in steps_a], 1), np.int32),
               np.ascontiguousarray(np.stack([np.asarray(x).reshape(T, -1, N) for x in steps_b], 1), np.int32),
               np.ascontiguousarray(np.asarray(c).reshape(T, 64, N), np.int32)]
        return {"int": True, "arrays": arr,
                "clamp": (p.overflow_satfinite if form.satfinite else p.overflow_plain) == "clamp"}
    sa_, sb_ = operand_spec(form.dtype_a, p), operand_spec(form.dtype_b, p)
    ca = [operand_codes(x, form.dtype_a, p, imm_scale_a == -1).reshape(T, 64, -1) for x in steps_a]
    cb = [operand_codes(x, form.dtype_b, p, imm_scale_b == -1).reshape(T, -1, N) for x in steps_b]
    return {"int": False, "params": kernel_params(p, sa_.mbits, sb_.mbits), "L": L,
            "tables": [np.ascontiguousarray(x) for x in (*decode_table(sa_), *decode_table(sb_))],
            "arrays": [np.ascontiguousarray(np.stack(ca, 1), np.uint32), np.ascontiguousarray(np.stack(cb, 1), np.uint32),
                       np.ascontiguousarray(bits_of(c).reshape(T, 64, N), np.uint32)]}


def wgmma_chain_host(instr: str, a, b, c=None, *, chain: int, scale_d: bool = True, imm_scale_a: int = 1,
                     imm_scale_b: int = 1) -> np.ndarray:
    """D of a chain of ``chain`` wgmmas along K by the host build of the tiled chain kernel: ``a``
    (..., 64, chain*K), ``b`` (..., chain*K, N); step l uses K columns l*K..(l+1)*K, the first step
    scale-d = ``scale_d``, the others accumulate; imm-scales on every step
    (:func:`refmodel.verify.jobs.model_chain` of :func:`refmodel.numerics.wgmma.wgmma`, bit for bit)."""
    from refmodel.validate import check_instr
    from refmodel.wgmma_forms import parse_wgmma

    L = _check_chain(chain)
    form = parse_wgmma(check_instr("instr", instr, "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"))
    K, N = form.k, form.n
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim < 2 or a.shape[-1] != L * K or b.ndim < 2 or b.shape[-2] != L * K:
        raise InputError(f"a chain of {L} wgmmas takes a (..., 64, {L * K}) and b (..., {L * K}, {N}), "
                         f"got a {a.shape} and b {b.shape}")
    steps_a, steps_b, c0, batch, p = [], [], None, None, None
    for l in range(L):
        form, p, al, bl, cl, batch = prepare(instr, a[..., l * K:(l + 1) * K], b[..., l * K:(l + 1) * K, :],
                                             c if l == 0 else None, scale_d if l == 0 else True,
                                             imm_scale_a, imm_scale_b, None)
        steps_a.append(al)
        steps_b.append(bl)
        if l == 0:
            c0 = cl
    if form.family != "int8" and p.k_group not in (None, K):
        raise InputError("the GPU port models one fused sum per instruction (k_group = K)")
    T = int(np.prod(batch, dtype=np.int64))
    x = _chain_inputs(form, p, steps_a, steps_b, c0, imm_scale_a, imm_scale_b, T, N)
    raw = _chain_host_run(x, None, T, L, K, K, N)
    return (raw if form.family == "int8" else from_bits(raw, form.dtype_d)).reshape(batch + (64, N))


def wgmma_sp_host(instr: str, a_compressed, meta, b, c=None, *, sp_sel: int = 0, scale_d: bool = True,
                  imm_scale_a: int = 1, imm_scale_b: int = 1) -> np.ndarray:
    """D of one sparse wgmma by the host build of the tiled chain kernel: the same fused sum over the
    K/2 kept products, row r's k-th product using B row pos[r, k] of the metadata (+0 where the element
    is dropped).  Arguments as :func:`refmodel.numerics.sparse.wgmma_sp`, which is called first to
    validate them."""
    from refmodel.numerics.sparse import kept_positions, wgmma_sp
    from refmodel.wgmma_sp_forms import parse_wgmma_sp

    wgmma_sp(instr, a_compressed, meta, b, c, sp_sel=sp_sel, scale_d=scale_d, imm_scale_a=imm_scale_a,
             imm_scale_b=imm_scale_b)  # validates every argument (and is the reference the tests compare with)
    form = parse_wgmma_sp(instr)
    p = params_for(form.dense)
    kc, K, N = form.k_compressed, form.k, form.n
    a = np.asarray(a_compressed)
    T = int(np.prod(a.shape[:-2], dtype=np.int64))
    pos = np.ascontiguousarray(kept_positions(meta, form).reshape(T, 1, 64, kc), np.int16)
    bb = np.asarray(b).reshape(T, K, N)
    cc = (np.zeros((T, 64, N), element_dtype(form.dtype_d)) if c is None or not scale_d
          else np.asarray(c).reshape(T, 64, N))
    x = _chain_inputs(form, p, [a.reshape(T, 64, kc)], [bb], cc, imm_scale_a, imm_scale_b, T, N)
    raw = _chain_host_run(x, pos, T, 1, kc, K, N)
    return (raw if form.family == "int8" else from_bits(raw, form.dense.dtype_d)).reshape(a.shape[:-2] + (64, N))


def wgmma_sp_host_rows(instr: str, a_compressed, meta, b, c=None, *, sp_sel: int = 0, scale_d: bool = True,
                       imm_scale_a: int = 1, imm_scale_b: int = 1) -> np.ndarray:
    """The former :func:`wgmma_sp_host`: B's rows gathered per row of A on the host, then the per-output
    kernel with one row of A per tile (R = 1); kept as a second, independent path for the tests."""
    from refmodel.numerics.sparse import kept_positions, wgmma_sp
    from refmodel.wgmma_sp_forms import parse_wgmma_sp

    wgmma_sp(instr, a_compressed, meta, b, c, sp_sel=sp_sel, scale_d=scale_d, imm_scale_a=imm_scale_a,
             imm_scale_b=imm_scale_b)
    form = parse_wgmma_sp(instr)
    p = params_for(form.dense)
    kc, K, N = form.k_compressed, form.k, form.n
    a = np.asarray(a_compressed)
    T = int(np.prod(a.shape[:-2], dtype=np.int64))
    pos = kept_positions(meta, form).reshape(T, 64, kc)
    bb = np.asarray(b).reshape(T, K, N)
    g = bb[np.arange(T)[:, None, None], np.where(pos < 0, 0, pos)]          # (T, 64, kc, N)
    g = np.where((pos < 0)[..., None], np.zeros((), bb.dtype), g)            # a dropped element: +0
    cc = (np.zeros((T, 64, N), element_dtype(form.dtype_d)) if c is None or not scale_d
          else np.asarray(c).reshape(T, 64, N))
    raw = _run_host(_kernel_inputs(form, p, a, g, cc, imm_scale_a, imm_scale_b, T * 64, 1, kc, N), T * 64, 1, kc, N)
    return (raw if form.family == "int8" else from_bits(raw, form.dense.dtype_d)).reshape(a.shape[:-2] + (64, N))


# ----------------------------------------------------------------------------- device launchers

def launch_model_chain(mod, acodes, bcodes, pos, cbits, out, T: int, L: int, R: int, Kc: int, Kb: int, N: int,
                       tables, pv, *, F: int | None = None, stream=None) -> None:
    """Launch the tiled chain kernel of ``mod`` (a module compiled from :data:`SOURCE`) on cupy arrays:
    acodes uint32 (T, L, R, Kc), bcodes uint32 (T, L, Kb, N), pos int16 (T, L, R, Kc) or None (dense),
    cbits uint32 (T, R, N) (zeros for scale-d = 0), out uint32 (T, R, N); ``tables`` the six decode
    tables (sig, exp, cls of A then B) and ``pv`` the int32 WgParams vector, as FormRunner holds them.
    ``F`` (pv[0]) picks the 32- or 64-bit sum; read from pv when not given."""
    sparse = pos is not None
    _check_dims(R, Kc, Kb, N, sparse)
    if F is None:
        F = int(np.asarray(pv.get() if hasattr(pv, "get") else pv)[0])
    name = "wgref_model_chain" + ("_sparse" if sparse else "") + ("_wide" if chain_is_wide(Kc, F) else "")
    fn = mod.get_function(name)
    smem = chain_smem_bytes(Kc, Kb, N, sparse)
    if smem > 48 * 1024 and getattr(fn, "max_dynamic_shared_size_bytes", 0) < smem:
        fn.max_dynamic_shared_size_bytes = smem
    grid, threads = chain_launch_shape(T, N)
    null = 0 if pos is None else pos
    fn((grid,), (threads,), (acodes, bcodes, null, cbits, out, np.int32(T), np.int32(L), np.int32(R), np.int32(Kc),
                             np.int32(Kb), np.int32(N), *tables, pv), shared_mem=smem, stream=stream)


def launch_int_model_chain(mod, a, b, pos, c, out, T: int, L: int, R: int, Kc: int, Kb: int, N: int, clamp: bool,
                           *, stream=None) -> None:
    """The integer twin of :func:`launch_model_chain`: int32 values a (T, L, R, Kc), b (T, L, Kb, N), c and
    out int32 (T, R, N); dropped elements (pos < 0) are 0; ``clamp`` for .satfinite (else wrap)."""
    sparse = pos is not None
    _check_dims(R, Kc, Kb, N, sparse)
    fn = mod.get_function("wgref_int_model_chain")
    smem = chain_smem_bytes(Kc, Kb, N, sparse)
    if smem > 48 * 1024 and getattr(fn, "max_dynamic_shared_size_bytes", 0) < smem:
        fn.max_dynamic_shared_size_bytes = smem
    grid, threads = chain_launch_shape(T, N)
    fn((grid,), (threads,), (a, b, 0 if pos is None else pos, c, out, np.int32(T), np.int32(L), np.int32(R),
                             np.int32(Kc), np.int32(Kb), np.int32(N), np.int32(bool(clamp))),
       shared_mem=smem, stream=stream)


_DEVICE_FORMS: dict = {}


def _device_form(form):
    """(module, tables, pv, F, clamp) of a dense form on the device, built once."""
    from gpu.kernels.runtime import compile_module, require_device

    cp = require_device()
    if form.instr not in _DEVICE_FORMS:
        mod = compile_module(SOURCE)
        p = params_for(form)
        if form.family == "int8":
            entry = (mod, None, None, None, (p.overflow_satfinite if form.satfinite else p.overflow_plain) == "clamp")
        else:
            sa_, sb_ = operand_spec(form.dtype_a, p), operand_spec(form.dtype_b, p)
            prm = kernel_params(p, sa_.mbits, sb_.mbits)
            entry = (mod, [cp.asarray(np.ascontiguousarray(x)) for x in (*decode_table(sa_), *decode_table(sb_))],
                     cp.asarray(np.array([getattr(prm, f) for f, _ in WgParams._fields_], np.int32)), prm.F, None)
        _DEVICE_FORMS[form.instr] = entry
    return _DEVICE_FORMS[form.instr]


def model_chain_device(form, acodes, bcodes, cbits, pos=None, out=None):
    """D bits (T, 64, N) uint32 (int32 for integer forms) of a chain on the GPU's CUDA cores, cupy in and
    out: ``form`` a dense WgmmaForm (or its instruction; sparse: the sparse form's ``dense``), acodes
    (T, L, 64, Kc) and bcodes (T, L, Kb, N) operand codes as FormRunner.model prepares them (tf32
    shifted, imm-scale sign bits flipped; int32 values for integer forms), cbits (T, 64, N) C bits
    (zeros for scale-d = 0), pos int16 (T, L, 64, Kc) for sparse."""
    from gpu.kernels.runtime import require_device
    from refmodel.wgmma_forms import WgmmaForm, parse_wgmma

    cp = require_device()
    if not isinstance(form, WgmmaForm):
        form = parse_wgmma(form)
    if acodes.ndim != 4 or bcodes.ndim != 4:
        raise InputError(f"acodes must be (T, L, 64, Kc) and bcodes (T, L, Kb, N), got {acodes.shape} and {bcodes.shape}")
    T, L, R, Kc = (int(v) for v in acodes.shape)
    Kb, N = int(bcodes.shape[2]), int(bcodes.shape[3])
    mod, tables, pv, F, clamp = _device_form(form)
    if pos is not None:
        pos = cp.ascontiguousarray(pos, dtype=cp.int16)
    if form.family == "int8":
        out = cp.empty((T, R, N), cp.int32) if out is None else out
        launch_int_model_chain(mod, cp.ascontiguousarray(acodes, dtype=cp.int32),
                               cp.ascontiguousarray(bcodes, dtype=cp.int32), pos,
                               cp.ascontiguousarray(cbits).view(cp.int32), out, T, L, R, Kc, Kb, N, clamp)
        return out
    out = cp.empty((T, R, N), cp.uint32) if out is None else out
    launch_model_chain(mod, cp.ascontiguousarray(acodes, dtype=cp.uint32), cp.ascontiguousarray(bcodes, dtype=cp.uint32),
                       pos, cp.ascontiguousarray(cbits, dtype=cp.uint32), out, T, L, R, Kc, Kb, N, tables, pv, F=F)
    return out


def wgmma_chain_device(instr: str, a, b, c=None, *, chain: int, scale_d: bool = True, imm_scale_a: int = 1,
                       imm_scale_b: int = 1):
    """:func:`wgmma_chain_host` on the GPU (numpy inputs, cupy bits out, (T, 64, N) uint32 / int32)."""
    from gpu.kernels.runtime import require_device
    from refmodel.wgmma_forms import parse_wgmma

    cp = require_device()
    L = _check_chain(chain)
    form = parse_wgmma(instr)
    K, N = form.k, form.n
    steps_a, steps_b, c0, batch, p = [], [], None, None, None
    a, b = np.asarray(a), np.asarray(b)
    for l in range(L):
        form, p, al, bl, cl, batch = prepare(instr, a[..., l * K:(l + 1) * K], b[..., l * K:(l + 1) * K, :],
                                             c if l == 0 else None, scale_d if l == 0 else True,
                                             imm_scale_a, imm_scale_b, None)
        steps_a.append(al)
        steps_b.append(bl)
        c0 = cl if l == 0 else c0
    T = int(np.prod(batch, dtype=np.int64))
    x = _chain_inputs(form, p, steps_a, steps_b, c0, imm_scale_a, imm_scale_b, T, N)
    return model_chain_device(form, *[cp.asarray(v) for v in x["arrays"]])


def wgmma_sp_device(instr: str, a_compressed, meta, b, c=None, *, sp_sel: int = 0, scale_d: bool = True,
                    imm_scale_a: int = 1, imm_scale_b: int = 1):
    """:func:`wgmma_sp_host` on the GPU (numpy inputs, cupy bits out, (T, 64, N))."""
    from gpu.kernels.runtime import require_device
    from refmodel.numerics.sparse import kept_positions
    from refmodel.wgmma_sp_forms import parse_wgmma_sp

    cp = require_device()
    form = parse_wgmma_sp(instr)
    p = params_for(form.dense)
    kc, K, N = form.k_compressed, form.k, form.n
    a = np.asarray(a_compressed)
    T = int(np.prod(a.shape[:-2], dtype=np.int64))
    pos = np.ascontiguousarray(kept_positions(meta, form).reshape(T, 1, 64, kc), np.int16)
    cc = (np.zeros((T, 64, N), element_dtype(form.dtype_d)) if c is None or not scale_d
          else np.asarray(c).reshape(T, 64, N))
    x = _chain_inputs(form, p, [a.reshape(T, 64, kc)], [np.asarray(b).reshape(T, K, N)], cc, imm_scale_a,
                      imm_scale_b, T, N)
    arr = [cp.asarray(v) for v in x["arrays"]]
    return model_chain_device(form.dense, arr[0], arr[1], arr[2], pos=cp.asarray(pos))
