"""The input generator of the GPU fuzz engine as CUDA C++: every element's bits from a counter-based
hash of ``(seed, batch, operand, tile, row, col)``, one input family per tile.  The same text compiles
for the GPU (NVRTC) and for the host (:func:`generate_host`, a C++ compiler), and
:mod:`refmodel.verify.seeded` is the same formulas in numpy; the tests check the three agree bit for bit."""

from __future__ import annotations

import ctypes
from typing import Optional

import numpy as np

from refmodel.verify.seeded import FAMILIES, FORMATS, key, tile_families
from refmodel.verify.seeded import typed as seeded_typed
from refmodel.wgmma_forms import WgmmaForm

# the families' codes, in the seeded engine's order from the catalogue (refmodel.verify.families)
_FAMILY_CODES = "".join(f"#define WG_FAM_{name.upper()} {i}\n" for i, name in enumerate(FAMILIES))
GEN_SOURCE = _FAMILY_CODES + r"""
#ifndef WGREF_HD
#ifdef __CUDACC_RTC__
#define WGREF_HD __host__ __device__
#else
#define WGREF_HD
#endif
#endif
typedef unsigned long long wg_u64;

WGREF_HD static inline wg_u64 wg_mix(wg_u64 z) {          /* splitmix64's finaliser */
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* One element's bits.  key: (seed, batch, operand); fam: the tile's family; (t, r, c): tile, row,
   column of the operand in math layout; kdim: 1 for A (columns are K), 0 for B (rows are K), -1
   for C.  In the cancel family A[r, k^1] = A[r, k] and B[k^1, j] = -B[k, j] (k odd), so the
   pairs of products cancel.  ebits/mbits/width/ik: the element format (ik: 0 float, 1 signed,
   2 unsigned integer). */
WGREF_HD static unsigned int wg_gen_one(wg_u64 key, int fam, long long t, int r, int c, int kdim,
                                        int ebits, int mbits, int width, int ik) {
    int hr = r, hc = c;
    if (fam == WG_FAM_CANCEL && kdim == 1) hc &= ~1;
    if (fam == WG_FAM_CANCEL && kdim == 0) hr &= ~1;
    int kk = kdim == 1 ? c : (kdim == 0 ? r : -1);
    wg_u64 h = wg_mix(key ^ wg_mix(((wg_u64)t << 24) ^ ((wg_u64)(hr & 0xFFF) << 12) ^ (wg_u64)(hc & 0xFFF)));
    wg_u64 h2 = wg_mix(h ^ 0xA5A5A5A5ull);
    unsigned int wmask = width >= 32 ? 0xFFFFFFFFu : ((1u << width) - 1);
    if (ik) {                                                   /* integers: random, extremes, zero */
        unsigned int x = (unsigned int)h & wmask;
        if (fam == WG_FAM_SPECIAL || fam == WG_FAM_WIDE) {
            unsigned int ext[4] = {0u, wmask, ik == 1 ? (1u << (width - 1)) : 0u,
                                   ik == 1 ? (wmask >> 1) : 1u};
            if ((h2 & 3) != 0) x = ext[(h2 >> 2) & 3];
        } else if (fam == WG_FAM_ZERO) x = (h2 & 31) ? 0u : x;
        else if (fam == WG_FAM_NARROW) x = (unsigned int)(h & 7) - 3u;     /* small values around 0 */
        return x & wmask;
    }
    unsigned int sbit = 1u << (ebits + mbits);
    unsigned int emax = (1u << ebits) - 1, mmask = (1u << mbits) - 1;
    int bias = (1 << (ebits - 1)) - 1;
    unsigned int sign = (unsigned int)(h >> 63) & 1u;
    unsigned int man = (unsigned int)(h >> 8) & mmask;
    unsigned int e;
    unsigned int x;
    switch (fam) {
    case WG_FAM_BITS: x = (unsigned int)(h >> 16) & wmask; return x;                      /* any bits */
    case WG_FAM_WIDE: e = 1 + (unsigned int)((h >> 40) % (emax - 1)); break;               /* all finite exponents */
    case WG_FAM_SUBNORMAL: e = (h2 & 1) ? 0u : (unsigned int)(bias - 2 + ((h >> 40) % 5)); break;
    default: e = (unsigned int)(bias - 2 + ((h >> 40) % 5)); break;             /* narrow: 2^-2 .. 2^2 */
    }
    x = (sign * sbit) | (e << mbits) | man;
    if (fam == WG_FAM_SPECIAL && (h2 & 7) == 0) {                            /* specials, one element in 8 */
        unsigned int pick = (unsigned int)(h2 >> 3) & 7;
        unsigned int s = sign * sbit;
        unsigned int sp[8] = {s, s | (emax << mbits), s | (emax << mbits) | mmask,         /* ±0, Inf-pattern, NaN-pattern */
                              s | (emax << mbits) | (man | 1u), s | ((emax - 1) << mbits) | mmask, /* NaN payload, max */
                              s | 1u, s | (man & mmask), s | (emax << mbits) | (mmask - 1u)};
        x = sp[pick];
    }
    if (fam == WG_FAM_ZERO) x = (h2 & 31) ? (sign * sbit) : x;           /* ±0, one element in 32 a value */
    if (fam == WG_FAM_CANCEL && kdim == 0 && (kk & 1)) {
        x ^= sbit;                                              /* b[k^1] = -b[k]: products cancel */
        if ((h2 & 15) == 0) x ^= 1u;                            /* ... but not always exactly */
    }
    return x & wmask;
}

/* T tiles of a (rows x cols) operand; kdim: 0 when rows index K (B), 1 when cols do (A), -1 for C. */
#define WGREF_GEN_BODY                                                                          \
    long long t = idx / ((long long)rows * cols);                                               \
    int r = (int)((idx / cols) % rows), c = (int)(idx % cols);                                  \
    int fam = fams[t];                                                                          \
    out[idx] = wg_gen_one(key, fam, t, r, c, kdim, ebits, mbits, width, ik);

#ifdef __CUDACC_RTC__
extern "C" __global__ void wgref_gen(unsigned int *out, const int *fams, long long T, int rows, int cols,
                                     unsigned long long key, int kdim, int ebits, int mbits, int width, int ik) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= T * rows * cols) return;
    WGREF_GEN_BODY
}
#else
extern "C" void wgref_gen_host(unsigned int *out, const int *fams, long long T, int rows, int cols,
                               unsigned long long key, int kdim, int ebits, int mbits, int width, int ik) {
    for (long long idx = 0; idx < T * rows * cols; ++idx) { WGREF_GEN_BODY }
}
#endif
"""


_HOST: Optional[ctypes.CDLL] = None


def _host_library() -> ctypes.CDLL:
    global _HOST
    if _HOST is None:
        from gpu.kernels.device_model import build_host_library

        _HOST = build_host_library(GEN_SOURCE, "wgref_gen", "the generator")
    return _HOST


MAX_GEN_K = 4096   # the hash keys rows and columns on 12 bits: K of a whole chain is at most 4096


def _shapes(form: WgmmaForm, chain: int = 1):
    k = form.k * chain
    if k > MAX_GEN_K:
        raise ValueError(f"a generated chain has at most {MAX_GEN_K} K elements, got {chain} x {form.k}")
    return (("a", form.dtype_a, 64, k, 1), ("b", form.dtype_b, k, form.n, 0),
            ("c", form.dtype_d, 64, form.n, -1))


def generate_host(form: WgmmaForm, seed: int, batch: int, tiles: int, chain: int = 1) -> dict[str, np.ndarray]:
    """The batch's A (T, 64, chain*K), B (T, chain*K, N), C (T, 64, N) element bits (uint32), built
    on the host from the very source the GPU runs (:data:`GEN_SOURCE`)."""
    lib = _host_library()
    fams = tile_families(seed, batch, tiles)
    out = {}
    for i, (name, dt, rows, cols, kdim) in enumerate(_shapes(form, chain)):
        e, m, w, ik = FORMATS[dt]
        x = np.empty((tiles, rows, cols), np.uint32)
        lib.wgref_gen_host(x.ctypes.data_as(ctypes.c_void_p), fams.ctypes.data_as(ctypes.c_void_p),
                           ctypes.c_longlong(tiles), rows, cols, ctypes.c_ulonglong(key(seed, batch, i)), kdim,
                           e, m, w, ik)
        out[name] = x
    return out


def typed(form: WgmmaForm, bits: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Element bits (uint32) -> the typed A, B, C arrays refmodel takes."""
    return seeded_typed((form.dtype_a, form.dtype_b, form.dtype_d), bits)
