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

WGREF_HD static inline int wc_bitlen64(unsigned long long x) {
#ifdef __CUDA_ARCH__
    return 64 - __clzll((long long)x);
#else
    return x ? 64 - __builtin_clzll(x) : 0;
#endif
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

/* S * 2**(emax - F) rounded once to the accumulator (wgref_fdpa_one and the chain kernels) */
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

/* One output of one wgmma: a row of A (K decoded operands, stride 1), a column of B (stride sb),
   C's bits.  sa/ea/ca: significand, exponent, class of each operand (refmodel's decode tables). */
WGREF_HD static unsigned int wgref_fdpa_one(const short *sa, const short *ea, const signed char *ca,
                                            const short *sbv, const short *eb, const signed char *cb,
                                            int sb, int K, unsigned int c_bits, const WgParams &p) {
    const int bias = (1 << (p.acc_e - 1)) - 1;
    const wg_i64 emask = (1 << p.acc_e) - 1;
    const wg_i64 mmask = ((wg_i64)1 << p.acc_m) - 1;
    const wg_i64 hidden = (wg_i64)1 << p.acc_m;
    const int signpos = p.acc_e + p.acc_m;
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
    unsigned int result = wc_round(S, emax, p);
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

from gpu.kernels.device_model_chain_source import (
    CHAIN_SOURCE,  # the text follows SOURCE's helpers
)

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


def _float_tables(form, p) -> dict:
    """The float kernels' binding row (``params``) and A's then B's decode tables (``tables``) of a form."""
    sa_, sb_ = operand_spec(form.dtype_a, p), operand_spec(form.dtype_b, p)
    return {"params": kernel_params(p, sa_.mbits, sb_.mbits),
            "tables": [np.ascontiguousarray(x) for x in (*decode_table(sa_), *decode_table(sb_))]}


def _kernel_inputs(form, p, a, b, c, imm_scale_a: int, imm_scale_b: int, T: int, R: int, K: int,
                   N: int) -> dict:
    """The kernels' inputs as contiguous numpy arrays, A (T, R, K), B (T, K, N), C (T, R, N): int32
    values for integer forms; otherwise operand codes, C's bits, the two decode tables and the
    binding row."""
    if form.family == "int8":
        return {"int": True, "clamp": p.clamps(form.satfinite),
                "arrays": [np.ascontiguousarray(np.asarray(x).reshape(shape), np.int32)
                           for x, shape in ((a, (T, R, K)), (b, (T, K, N)), (c, (T, R, N)))]}
    return {"int": False, **_float_tables(form, p),
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
                "clamp": p.clamps(form.satfinite)}
    ca = [operand_codes(x, form.dtype_a, p, imm_scale_a == -1).reshape(T, 64, -1) for x in steps_a]
    cb = [operand_codes(x, form.dtype_b, p, imm_scale_b == -1).reshape(T, -1, N) for x in steps_b]
    return {"int": False, **_float_tables(form, p), "L": L,
            "arrays": [np.ascontiguousarray(np.stack(ca, 1), np.uint32), np.ascontiguousarray(np.stack(cb, 1), np.uint32),
                       np.ascontiguousarray(bits_of(c).reshape(T, 64, N), np.uint32)]}


def _chain_steps(instr: str, a, b, c, L: int, K: int, scale_d: bool, imm_scale_a: int, imm_scale_b: int):
    """(form, params, A steps, B steps, C, batch shape) of a chain of ``L`` wgmmas along K
    (:func:`refmodel.numerics.wgmma.prepare` per step: K columns of ``a`` / rows of ``b`` each, C and
    ``scale_d`` on the first step only)."""
    steps_a, steps_b, c0 = [], [], None
    for l in range(L):
        form, p, al, bl, cl, batch = prepare(instr, a[..., l * K:(l + 1) * K], b[..., l * K:(l + 1) * K, :],
                                             c if l == 0 else None, scale_d if l == 0 else True,
                                             imm_scale_a, imm_scale_b, None)
        steps_a.append(al)
        steps_b.append(bl)
        if l == 0:
            c0 = cl
    return form, p, steps_a, steps_b, c0, batch


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
    form, p, steps_a, steps_b, c0, batch = _chain_steps(instr, a, b, c, L, K, scale_d, imm_scale_a, imm_scale_b)
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
            entry = (mod, None, None, None, p.clamps(form.satfinite))
        else:
            ft = _float_tables(form, p)
            prm = ft["params"]
            entry = (mod, [cp.asarray(x) for x in ft["tables"]],
                     cp.asarray(np.array([getattr(prm, f) for f, _ in WgParams._fields_], np.int32)), prm.F, None)
        _DEVICE_FORMS[form.instr] = entry
    return _DEVICE_FORMS[form.instr]


def _chain_shape(acodes, bcodes) -> tuple[int, int, int, int, int, int]:
    """(T, L, R, Kc, Kb, N) of the chain kernels' operand codes, A (T, L, R, Kc) and B (T, L, Kb, N)."""
    if acodes.ndim != 4 or bcodes.ndim != 4:
        raise InputError(f"acodes must be (T, L, 64, Kc) and bcodes (T, L, Kb, N), got {acodes.shape} and {bcodes.shape}")
    T, L, R, Kc = (int(v) for v in acodes.shape)
    return T, L, R, Kc, int(bcodes.shape[2]), int(bcodes.shape[3])


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
    T, L, R, Kc, Kb, N = _chain_shape(acodes, bcodes)
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


def model_chain_host(form, acodes, bcodes, cbits, pos=None) -> np.ndarray:
    """:func:`model_chain_device` on the host build of the same kernels, numpy in and out (the same
    operand codes, C bits and positions; (T, 64, N) uint32, int32 for integer forms)."""
    from refmodel.wgmma_forms import WgmmaForm, parse_wgmma

    if not isinstance(form, WgmmaForm):
        form = parse_wgmma(form)
    acodes, bcodes = np.asarray(acodes), np.asarray(bcodes)
    T, L, R, Kc, Kb, N = _chain_shape(acodes, bcodes)
    _check_dims(R, Kc, Kb, N, pos is not None)
    p = params_for(form)
    if pos is not None:
        pos = np.ascontiguousarray(pos, np.int16)
    if form.family == "int8":
        x = {"int": True, "clamp": p.clamps(form.satfinite),
             "arrays": [np.ascontiguousarray(v, np.int32) for v in (acodes, bcodes, np.asarray(cbits).view(np.int32))]}
    else:
        x = {"int": False, **_float_tables(form, p),
             "arrays": [np.ascontiguousarray(v, np.uint32) for v in (acodes, bcodes, cbits)]}
    return _chain_host_run(x, pos, T, L, Kc, Kb, N)


def wgmma_chain_device(instr: str, a, b, c=None, *, chain: int, scale_d: bool = True, imm_scale_a: int = 1,
                       imm_scale_b: int = 1):
    """:func:`wgmma_chain_host` on the GPU (numpy inputs, cupy bits out, (T, 64, N) uint32 / int32)."""
    from gpu.kernels.runtime import require_device
    from refmodel.wgmma_forms import parse_wgmma

    cp = require_device()
    L = _check_chain(chain)
    form = parse_wgmma(instr)
    K, N = form.k, form.n
    form, p, steps_a, steps_b, c0, batch = _chain_steps(instr, np.asarray(a), np.asarray(b), c, L, K, scale_d,
                                                        imm_scale_a, imm_scale_b)
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
