"""The C++ text of the GPU port's tiled chain kernels (``wgref_model_chain[_sparse][_wide]``,
``wgref_int_model_chain`` and their ``_host`` loops), appended to :data:`gpu.kernels.device_model.SOURCE`
(whose helpers — decode, wc_round, wg_special, wgref_fdpa_one — it uses); the launchers and wrappers
are in :mod:`gpu.kernels.device_model`."""

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
