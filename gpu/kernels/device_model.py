"""refmodel's wgmma accumulator as C++ that runs on the GPU's CUDA cores and, unchanged, on the host.

One function, :data:`SOURCE`'s ``wgref_fdpa_one``, computes one output element of one dense
wgmma (D = A·B + C, truncated aligned sum, one rounding, NaN/Inf rules) with integer arithmetic
written from :func:`refmodel.numerics.accumulate.fdpa_chain`'s formulas; ``wgref_int_one`` the
integer forms.  The same text is compiled

* for the GPU by NVRTC (``__host__ __device__``; kernel ``wgref_wgmma_model``), to check the
  hardware on the device without copying anything back (the GPU fuzz engine), and
* for the host by the system C++ compiler (``host_library``), which is how CI checks it against
  the CPU refmodel on every form and input family (``tests/test_device_model.py``).

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
from typing import Optional

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


class WgParams(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int) for n in ("F", "e_zero", "acc_e", "acc_m", "rnd_m", "rz", "sat",
                                            "nan_bits", "Lp", "Ln")]


def kernel_params(p: AccumParams, mbits_a: int, mbits_b: int) -> WgParams:
    """The C struct of one binding row (shifts as in fdpa_chain: Lp/Ln turn products into F bits)."""
    L = p.F - mbits_a - mbits_b
    spec = p.acc_spec
    return WgParams(p.F, p.e_zero, spec.ebits, spec.mbits, p.round_mbits, int(p.rounding == "rz"),
                    int(p.overflow == "satfinite"), p.nan_bits, max(L, 0), max(-L, 0))


_HOST: Optional[ctypes.CDLL] = None


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


def wgmma_sp_host(instr: str, a_compressed, meta, b, c=None, *, sp_sel: int = 0, scale_d: bool = True,
                  imm_scale_a: int = 1, imm_scale_b: int = 1) -> np.ndarray:
    """D of one sparse wgmma by the host build of the GPU port: the same fused sum over the K/2 kept
    products (B's rows gathered per row of A by the metadata), with rows-per-tile R = 1.  Arguments
    as :func:`refmodel.numerics.sparse.wgmma_sp`, which is called first to validate them."""
    from refmodel.numerics.sparse import kept_positions, wgmma_sp
    from refmodel.wgmma_sp_forms import parse_wgmma_sp

    wgmma_sp(instr, a_compressed, meta, b, c, sp_sel=sp_sel, scale_d=scale_d, imm_scale_a=imm_scale_a,
             imm_scale_b=imm_scale_b)  # validates every argument (and is the reference the tests compare with)
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
