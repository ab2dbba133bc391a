"""The layout fuzzer's case generator and operand addressing as one CUDA C++ text (:data:`DG_SOURCE`),
compiled for the GPU by NVRTC and, unchanged, for the host by the system C++ compiler
(:func:`host_library`), so a batch can be rebuilt and checked on any CPU.

**The drawing** (a new seeded drawing, not the bits of :func:`refmodel.verify.layout_cases.wgmma_cases`;
the same *distribution of kinds* as its ``_draw_desc``).  Every random number is
``wl_rand(key, case, stream, i)``: splitmix64's finaliser over ``key = wl_key(seed, batch)`` and
the case, a stream number and a counter; integers below ``n`` are ``((h >> 32) * n) >> 32`` and
probabilities are thousandths (``wl_below(h, 1000) < p``), so the host and the GPU agree bit for bit.
Per case (streams in brackets):

* family [1]: ints (750/1000) or floats; scale-d [2]: 1 (800/1000) or 0;
* each descriptor (A: stream 16+, B: stream 32+; attempt ``a``, fields ``16 a + j``): swizzle mode
  uniform of none/32B/64B/128B; dense canonical strides (600/1000) or random LBO, SBO in
  ``16 * [0, 160)``; start flush with the image end (50), on the pattern (350), at a 32-byte K
  step into a swizzled K-major row (300, else "any"), or anywhere 16-byte aligned; base offset
  1..7 (300/1000, swizzled modes only) else 0; redrawn (64 attempts, then dense none at 0) until
  its 128-byte lines lie in the image, except that 20/1000 operands keep their first draw
  unchecked (``unchecked``: these may read outside the image — refmodel refuses them, the port
  flags them undefined);
* the image [3]: elements of A's type (B's type in the upper half for mixed FP8), ints -8..8
  (ints family; raw bytes for s8/u8) or floats (sign, exponent -8..7, random significand;
  random FP8 bytes without NaN/Inf codes, as ``_fill_image``);
* C registers [4]: each slot -4..4 in the accumulator type (s32: -1000..999); A registers [5]
  (RS forms): each slot an element as the image's.

**The addressing** is :func:`refmodel.layouts.descriptor.operand_addresses` (start + the canonical
offsets of :class:`refmodel.layouts.smem.SmemLayout`, then the swizzle on the absolute address with
``BASE_OFFSET_RULE`` "subtract") and :func:`refmodel.machine.wgmma.read_operand`'s refusals:
reserved descriptor bits set, or a byte read outside the image.  ``wl_check`` flags those
(bit 0: A, bit 1: B); ``wl_gather`` writes A (C, 64, K) and B (C, K, N) element bits (0 where
undefined).
"""

from __future__ import annotations

import ctypes

DG_SOURCE = r"""
#ifndef WGREF_HD
#ifdef __CUDACC_RTC__
#define WGREF_HD __host__ __device__
#else
#define WGREF_HD
#endif
#endif
typedef unsigned long long wl_u64;
typedef long long wl_i64;
typedef unsigned int wl_u32;

#define WL_FIELD_MASK (0x3FFFull | (0x3FFFull << 16) | (0x3FFFull << 32) | (0x7ull << 49) | (0x3ull << 62))
/* element types: 0 f16, 1 bf16, 2 tf32 (f32 container), 3 e4m3, 4 e5m2, 5 s8, 6 u8; accumulators: 0 f32, 1 f16, 2 s32 */

WGREF_HD static inline wl_u64 wl_mix(wl_u64 z) {          /* splitmix64's finaliser */
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
WGREF_HD static inline wl_u64 wl_rand(wl_u64 key, wl_i64 c, int stream, wl_i64 i) {
    return wl_mix(wl_mix(key ^ wl_mix((wl_u64)c * 0x2545F4914F6CDD1Dull + (wl_u64)stream)) ^ (wl_u64)i);
}
WGREF_HD static inline wl_u32 wl_below(wl_u64 h, wl_u32 n) { return (wl_u32)(((h >> 32) * (wl_u64)n) >> 32); }

/* pre-swizzle byte offset of element (r, k) of an R x K operand (byte 0 of the element) */
WGREF_HD static inline wl_i64 wl_offset(int major, int sw_bits, int e, wl_i64 lbo, wl_i64 sbo, int r, int k) {
    int w = 16 << sw_bits;
    if (major == 0) {
        wl_i64 kb = (wl_i64)k * e;
        if (sw_bits == 0) return (r / 8) * sbo + (r % 8) * 16 + (kb / 16) * lbo + kb % 16;
        return (r / 8) * sbo + (wl_i64)(r % 8) * w + kb;
    }
    if (sw_bits == 0) { int t = 16 / e; return (r / t) * sbo + (k % 8) * 16 + (k / 8) * lbo + (r % t) * e; }
    int tw = w / e;
    return (r / tw) * lbo + (wl_i64)(k % 8) * w + (k / 8) * sbo + (wl_i64)(r % tw) * e;
}
WGREF_HD static inline int wl_bits_of_code(int code) { return code == 0 ? 0 : (code == 1 ? 3 : (code == 2 ? 2 : 1)); }
WGREF_HD static inline wl_i64 wl_swizzle(wl_i64 a, int bits, int bo, int rule_subtract) {
    if (bits == 0) return a;
    wl_i64 phase = (a >> 7) - (rule_subtract ? bo : 0);
    return a ^ ((phase & ((1 << bits) - 1)) << 4);
}
/* min / max physical atom address (16-byte atoms) an operand reads; returns 0 when reserved bits are set */
WGREF_HD static int wl_range(wl_u64 d, int R, int K, int e, int major, int rule_subtract, wl_i64 *lo, wl_i64 *hi) {
    if (d & ~WL_FIELD_MASK) return 0;
    wl_i64 start = (wl_i64)(d & 0x3FFF) << 4, lbo = (wl_i64)((d >> 16) & 0x3FFF) << 4;
    wl_i64 sbo = (wl_i64)((d >> 32) & 0x3FFF) << 4;
    int bo = (int)((d >> 49) & 7), bits = wl_bits_of_code((int)((d >> 62) & 3));
    wl_i64 mn = (wl_i64)1 << 60, mx = -((wl_i64)1 << 60);
    if (major == 0) {
        int step = 16 / e;
        for (int r = 0; r < R; ++r)
            for (int k = 0; k < K; k += step) {
                wl_i64 a = wl_swizzle(start + wl_offset(0, bits, e, lbo, sbo, r, k), bits, bo, rule_subtract);
                mn = a < mn ? a : mn; mx = a > mx ? a : mx;
            }
    } else {
        int t = 16 / e;
        for (int k = 0; k < K; ++k)
            for (int r = 0; r < R; r += t) {
                wl_i64 a = wl_swizzle(start + wl_offset(1, bits, e, lbo, sbo, r, k), bits, bo, rule_subtract);
                mn = a < mn ? a : mn; mx = a > mx ? a : mx;
            }
    }
    *lo = mn; *hi = mx + 15;
    return 1;
}
/* 1 when refmodel refuses the operand: reserved bits, or a byte outside [base, base + size) */
WGREF_HD static int wl_undefined(wl_u64 d, wl_u32 base, int R, int K, int e, int major, int size) {
    wl_i64 lo, hi;
    if (!wl_range(d, R, K, e, major, 1, &lo, &hi)) return 1;
    return (lo - (wl_i64)base < 0 || hi - (wl_i64)base >= size) ? 1 : 0;
}

/* one descriptor (start relative to the image); kind: mode index | major << 2 | dense << 3 |
   start kind << 4 (0 flush, 1 aligned, 2 kstep, 3 any) | bo << 6 | unchecked << 9 | fallback << 10 */
WGREF_HD static wl_u64 wl_draw_desc(wl_u64 key, wl_i64 c, int stream, int R, int K, int e, int major, int size,
                                    wl_u32 *kind) {
    for (int at = 0; at < 64; ++at) {
        wl_u64 h[10];
        for (int j = 0; j < 10; ++j) h[j] = wl_rand(key, c, stream, 16 * at + j);
        int mi = (int)wl_below(h[0], 4);                  /* MODES order: none, 32B, 64B, 128B */
        int bits = mi, code = mi == 0 ? 0 : (mi == 1 ? 3 : (mi == 2 ? 2 : 1));
        int w = 16 << bits;
        wl_i64 lbo, sbo;
        int dense = wl_below(h[1], 1000) < 600;
        if (dense) {
            if (major == 0) { lbo = bits ? 16 : 128; sbo = bits ? 8 * w : 256; }
            else if (bits == 0) { lbo = 128 * (R / 8); sbo = 128; }
            else { int blocks = (R * 2 + w - 1) / w; lbo = 8 * w; sbo = (wl_i64)8 * w * blocks; }
        } else {
            lbo = (wl_i64)wl_below(h[2], 160) * 16;
            sbo = (wl_i64)wl_below(h[3], 160) * 16;
        }
        int period = bits ? (128 << bits) : 16;
        wl_u32 u = wl_below(h[4], 1000);
        wl_i64 start; int sk;
        if (u < 50) { start = 0; sk = 0; }
        else if (u < 400) { start = (wl_i64)wl_below(h[5], size / period) * period; sk = 1; }
        else if (u < 700 && bits && major == 0) {
            start = (wl_i64)wl_below(h[5], size / period) * period + 32 * (wl_i64)wl_below(h[6], w / 32); sk = 2;
        } else { start = (wl_i64)wl_below(h[5], size / 16) * 16; sk = 3; }
        int bo = (bits && wl_below(h[7], 1000) < 300) ? 1 + (int)wl_below(h[8], 7) : 0;
        int unchecked = at == 0 && wl_below(h[9], 1000) < 20;
        wl_u64 d = (wl_u64)(start >> 4) | ((wl_u64)(lbo >> 4) << 16) | ((wl_u64)(sbo >> 4) << 32)
                 | ((wl_u64)bo << 49) | ((wl_u64)code << 62);
        wl_i64 lo, hi;
        wl_range(d, R, K, e, major, 0, &lo, &hi);          /* rule 'ignore', image-relative (as _draw_desc) */
        if (sk == 0) {
            wl_i64 shift = ((wl_i64)(size / 128) - 1 - hi / 128) * 128;
            if (shift < 0 || start + shift >= ((wl_i64)1 << 18)) { if (!unchecked) continue; shift = 0; }
            start += shift; lo += shift; hi += shift;
            d = (d & ~0x3FFFull) | (wl_u64)(start >> 4);
        }
        wl_u32 kd = (wl_u32)mi | ((wl_u32)major << 2) | ((wl_u32)dense << 3) | ((wl_u32)sk << 4) | ((wl_u32)bo << 6);
        if (unchecked) { *kind = kd | (1u << 9); return d; }
        if (lo >= 0 && (hi / 128) * 128 + 127 < size) { *kind = kd; return d; }
    }
    *kind = (wl_u32)major << 2 | (1u << 3) | (1u << 4) | (1u << 10);
    return major == 0 ? ((wl_u64)(128 >> 4) << 16) | ((wl_u64)(256 >> 4) << 32)
                      : ((wl_u64)((128 * (R / 8)) >> 4) << 16) | ((wl_u64)(128 >> 4) << 32);
}

WGREF_HD static inline wl_u32 wl_int_to_fp(int v, int ebits, int mbits) {
    if (v == 0) return 0u;
    wl_u32 s = v < 0 ? 1u : 0u; int m = v < 0 ? -v : v;
    int e = 0; while ((m >> (e + 1)) != 0) ++e;
    int bias = (1 << (ebits - 1)) - 1;
    wl_u32 frac = (wl_u32)(m - (1 << e));
    frac = mbits >= e ? frac << (mbits - e) : frac >> (e - mbits);
    return (s << (ebits + mbits)) | ((wl_u32)(e + bias) << mbits) | frac;
}
/* one element's bits of type dt (family 0 ints, 1 floats) */
WGREF_HD static wl_u32 wl_elem(wl_u64 h, int fam, int dt) {
    if (dt >= 5) return (wl_u32)(h & 0xFF);
    const int eb = dt == 0 || dt == 4 ? 5 : (dt == 3 ? 4 : 8);
    const int mb = dt == 0 ? 10 : (dt == 1 ? 7 : (dt == 2 ? 23 : (dt == 3 ? 3 : 2)));
    int iv = (int)wl_below(h, 17) - 8;
    if (fam == 0) return wl_int_to_fp(iv, eb, mb);
    if (dt == 3) { wl_u32 v = (wl_u32)(h & 0xFF); if ((v & 0x7F) == 0x7F) v ^= 1u; return v; }
    if (dt == 4) { wl_u32 v = (wl_u32)(h & 0xFF); if ((v & 0x7C) == 0x7C) v &= 0xBBu; return v; }
    int bias = (1 << (eb - 1)) - 1;
    wl_u32 sign = (wl_u32)(h >> 63) & 1u;
    wl_u32 ex = (wl_u32)(bias - 8 + (int)((h >> 24) & 15));
    wl_u32 man = (wl_u32)(h >> 28) & ((1u << mb) - 1);
    return (sign << (eb + mb)) | (ex << mb) | man;
}
WGREF_HD static inline wl_u32 wl_acc_elem(wl_u64 h, int acc) {
    if (acc == 2) return (wl_u32)((int)wl_below(h, 2000) - 1000);
    int v = (int)wl_below(h, 9) - 4;
    return acc == 0 ? wl_int_to_fp(v, 8, 23) : wl_int_to_fp(v, 5, 10);
}

/* per case: desc A/B (relative), kinds, family, scale-d */
#define WL_CASE_BODY                                                                              \
    wl_u64 key = wl_mix(seed ^ wl_mix(batch + 0x51ED270B27A1ull));                                \
    fam[c] = wl_below(wl_rand(key, c, 1, 0), 1000) < 750 ? 0 : 1;                                  \
    scale_d[c] = wl_below(wl_rand(key, c, 2, 0), 1000) < 800 ? 1 : 0;                              \
    wl_u32 ka = 0xFFFFu, kb = 0;                                                                  \
    desc_a[c] = rs ? 0ull : wl_draw_desc(key, c, 16, 64, K, ea, major_a, size, &ka);             \
    desc_b[c] = wl_draw_desc(key, c, 32, N, K, eb, major_b, size, &kb);                           \
    kinds[c] = ka | (kb << 16);

/* one 32-bit word of the image: elements of 4 / e bytes */
#define WL_IMAGE_BODY                                                                             \
    wl_i64 c = w / (size / 4); int off = (int)(w % (size / 4)) * 4;                                \
    wl_u64 key = wl_mix(seed ^ wl_mix(batch + 0x51ED270B27A1ull));                                \
    int dt = off >= size / 2 ? dt_b : dt_a;                                                       \
    int e = dt == 2 ? 4 : (dt <= 1 ? 2 : 1);                                                      \
    int f = fam[c];                                                                               \
    wl_u32 word = 0;                                                                              \
    for (int j = 0; j < 4 / e; ++j) {                                                             \
        wl_u32 x = wl_elem(wl_rand(key, c, 3, off / e + j), f, dt);                                \
        word |= e == 4 ? x : (x & ((1u << (8 * e)) - 1)) << (8 * e * j);                           \
    }                                                                                             \
    img[w] = word;

/* one register: C (regs per thread nc) then, for RS, A (4 per thread) */
#define WL_REGS_BODY                                                                              \
    wl_u64 key = wl_mix(seed ^ wl_mix(batch + 0x51ED270B27A1ull));                                \
    wl_i64 per = 128LL * nc;                                                                      \
    if (i < C * per) {                                                                            \
        wl_i64 c = i / per; int q = (int)(i % per);                                               \
        if (acc == 1) creg[i] = (wl_acc_elem(wl_rand(key, c, 4, 2 * q), 1) & 0xFFFFu)             \
                               | (wl_acc_elem(wl_rand(key, c, 4, 2 * q + 1), 1) << 16);            \
        else creg[i] = wl_acc_elem(wl_rand(key, c, 4, q), acc);                                   \
    } else {                                                                                      \
        wl_i64 j = i - C * per; wl_i64 c = j / 512; int q = (int)(j % 512);                       \
        int e = dt_a == 2 ? 4 : (dt_a <= 1 ? 2 : 1);                                              \
        int f = fam[c]; wl_u32 word = 0;                                                          \
        for (int s = 0; s < 4 / e; ++s) {                                                         \
            wl_u32 x = wl_elem(wl_rand(key, c, 5, q * (4 / e) + s), f, dt_a);                       \
            word |= e == 4 ? x : (x & ((1u << (8 * e)) - 1)) << (8 * e * s);                       \
        }                                                                                         \
        areg[j] = word;                                                                           \
    }

#define WL_CHECK_BODY                                                                             \
    int u = 0;                                                                                    \
    if (!rs) u |= wl_undefined(desc_a[c] + (wl_u64)(bases[c] >> 4), bases[c], 64, K, ea, major_a, size); \
    u |= wl_undefined(desc_b[c] + (wl_u64)(bases[c] >> 4), bases[c], N, K, eb, major_b, size) << 1;       \
    if ((bases[c] & 15) || bases[c] > (1u << 18)) u |= 3;                                                                    \
    flags[c] = u;

/* one element of A (64 x K) or B (K x N, math layout) of case c */
#define WL_GATHER_BODY                                                                            \
    wl_i64 per = (rs ? 0 : 64LL * K) + (wl_i64)K * N;                                              \
    wl_i64 c = i / per; int q = (int)(i % per);                                                   \
    int isb = rs || q >= 64 * K; if (!rs && isb) q -= 64 * K;                                      \
    int r, k, e, major; wl_u64 d;                                                                 \
    if (!isb) { r = q / K; k = q % K; e = ea; major = major_a; d = desc_a[c]; }                   \
    else { k = q / N; r = q % N; e = eb; major = major_b; d = desc_b[c]; }                        \
    wl_u32 base = bases[c];                                                                       \
    d += (wl_u64)(base >> 4);                                                                     \
    wl_u32 x = 0;                                                                                 \
    if (!(flags[c] & (isb ? 2 : 1))) {                                                            \
        wl_i64 start = (wl_i64)(d & 0x3FFF) << 4, lbo = (wl_i64)((d >> 16) & 0x3FFF) << 4;         \
        wl_i64 sbo = (wl_i64)((d >> 32) & 0x3FFF) << 4;                                           \
        int bo = (int)((d >> 49) & 7), bits = wl_bits_of_code((int)((d >> 62) & 3));               \
        wl_i64 a = wl_swizzle(start + wl_offset(major, bits, e, lbo, sbo, r, k), bits, bo, 1) - base; \
        const unsigned char *p = img + c * (wl_i64)size + a;                                       \
        for (int j = 0; j < e; ++j) x |= (wl_u32)p[j] << (8 * j);                                  \
    }                                                                                             \
    if (!isb) aout[c * 64LL * K + q] = x; else bout[c * (wl_i64)K * N + q] = x;

#ifdef __CUDACC_RTC__
extern "C" __global__ void wl_gen_cases(wl_u64 seed, wl_u64 batch, wl_i64 C, int K, int N, int ea, int eb,
        int major_a, int major_b, int rs, int size, wl_u64 *desc_a, wl_u64 *desc_b, wl_u32 *kinds, int *fam,
        int *scale_d) {
    wl_i64 c = (wl_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    WL_CASE_BODY
}
extern "C" __global__ void wl_gen_image(wl_u64 seed, wl_u64 batch, wl_i64 C, int size, int dt_a, int dt_b,
        const int *fam, wl_u32 *img) {
    wl_i64 w = (wl_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= C * (size / 4)) return;
    WL_IMAGE_BODY
}
extern "C" __global__ void wl_gen_regs(wl_u64 seed, wl_u64 batch, wl_i64 C, int nc, int acc, int rs, int dt_a,
        const int *fam, wl_u32 *creg, wl_u32 *areg) {
    wl_i64 i = (wl_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= C * (128LL * nc + (rs ? 512 : 0))) return;
    WL_REGS_BODY
}
extern "C" __global__ void wl_check(const wl_u64 *desc_a, const wl_u64 *desc_b, const wl_u32 *bases, wl_i64 C,
        int K, int N, int ea, int eb, int major_a, int major_b, int rs, int size, int *flags) {
    wl_i64 c = (wl_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    WL_CHECK_BODY
}
extern "C" __global__ void wl_gather(const unsigned char *img, const wl_u64 *desc_a, const wl_u64 *desc_b,
        const wl_u32 *bases, const int *flags, wl_i64 C, int K, int N, int ea, int eb, int major_a, int major_b,
        int rs, int size, wl_u32 *aout, wl_u32 *bout) {
    wl_i64 i = (wl_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= C * ((rs ? 0 : 64LL * K) + (wl_i64)K * N)) return;
    WL_GATHER_BODY
}
#else
extern "C" void wl_gen_cases_host(wl_u64 seed, wl_u64 batch, wl_i64 C, int K, int N, int ea, int eb,
        int major_a, int major_b, int rs, int size, wl_u64 *desc_a, wl_u64 *desc_b, wl_u32 *kinds, int *fam,
        int *scale_d) {
    for (wl_i64 c = 0; c < C; ++c) { WL_CASE_BODY }
}
extern "C" void wl_gen_image_host(wl_u64 seed, wl_u64 batch, wl_i64 C, int size, int dt_a, int dt_b,
        const int *fam, wl_u32 *img) {
    for (wl_i64 w = 0; w < C * (size / 4); ++w) { WL_IMAGE_BODY }
}
extern "C" void wl_gen_regs_host(wl_u64 seed, wl_u64 batch, wl_i64 C, int nc, int acc, int rs, int dt_a,
        const int *fam, wl_u32 *creg, wl_u32 *areg) {
    for (wl_i64 i = 0; i < C * (128LL * nc + (rs ? 512 : 0)); ++i) { WL_REGS_BODY }
}
extern "C" void wl_check_host(const wl_u64 *desc_a, const wl_u64 *desc_b, const wl_u32 *bases, wl_i64 C,
        int K, int N, int ea, int eb, int major_a, int major_b, int rs, int size, int *flags) {
    for (wl_i64 c = 0; c < C; ++c) { WL_CHECK_BODY }
}
extern "C" void wl_gather_host(const unsigned char *img, const wl_u64 *desc_a, const wl_u64 *desc_b,
        const wl_u32 *bases, const int *flags, wl_i64 C, int K, int N, int ea, int eb, int major_a, int major_b,
        int rs, int size, wl_u32 *aout, wl_u32 *bout) {
    for (wl_i64 i = 0; i < C * ((rs ? 0 : 64LL * K) + (wl_i64)K * N); ++i) { WL_GATHER_BODY }
}
#endif
"""

#: element type codes of DG_SOURCE
ELEM_CODES = {"f16": 0, "bf16": 1, "tf32": 2, "e4m3": 3, "e5m2": 4, "s8": 5, "u8": 6}
ACC_CODES = {"f32": 0, "f16": 1, "s32": 2}
MODE_NAMES = ("none", "32B", "64B", "128B")
START_KINDS = ("flush", "aligned", "kstep", "any")

_HOST: ctypes.CDLL | None = None


def host_library() -> ctypes.CDLL:
    """:data:`DG_SOURCE` built for the host (cached by source hash)."""
    global _HOST
    if _HOST is None:
        from gpu.kernels.device_model import build_host_library

        lib = build_host_library(DG_SOURCE, "wgref_desc_gather", "the layout generator")
        i64, u64, i32, vp = ctypes.c_longlong, ctypes.c_ulonglong, ctypes.c_int, ctypes.c_void_p
        lib.wl_gen_cases_host.argtypes = [u64, u64, i64] + [i32] * 8 + [vp] * 5
        lib.wl_gen_image_host.argtypes = [u64, u64, i64, i32, i32, i32, vp, vp]
        lib.wl_gen_regs_host.argtypes = [u64, u64, i64, i32, i32, i32, i32, vp, vp, vp]
        lib.wl_check_host.argtypes = [vp, vp, vp, i64] + [i32] * 8 + [vp]
        lib.wl_gather_host.argtypes = [vp] * 5 + [i64] + [i32] * 8 + [vp, vp]
        for f in ("wl_gen_cases_host", "wl_gen_image_host", "wl_gen_regs_host", "wl_check_host", "wl_gather_host"):
            getattr(lib, f).restype = None
        _HOST = lib
    return _HOST


def kind_note(code: int) -> str:
    """A descriptor's kind code (as ``wl_draw_desc`` writes it) in ``_draw_desc``'s note style."""
    code = int(code)
    if code == 0xFFFF:
        return "regs"
    mode = MODE_NAMES[code & 3]
    major = "MN" if code >> 2 & 1 else "K"
    parts = [mode, major, "dense" if code >> 3 & 1 else "random-strides", START_KINDS[code >> 4 & 3],
             f"bo{code >> 6 & 7}"]
    if code >> 9 & 1:
        parts.append("unchecked")
    if code >> 10 & 1:
        parts.append("fallback")
    return ",".join(parts)


__all__ = ["ACC_CODES", "DG_SOURCE", "ELEM_CODES", "host_library", "kind_note"]
