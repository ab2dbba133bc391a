"""What people write, as the SASS it becomes: each CUDA / Triton spelling of
:mod:`.spellings` as a scalar function on float32 bit patterns (int in, int out), composed of the
instruction sequence the compiler emitted for the ``sfu_k`` kernel (CUDA 13.0 ``ptxas`` on the
recorded PTX for ``cuda:`` / ``cuda-fast:``, the recorded cubins for ``triton:``), around the
unit's datapaths of :mod:`.mufu`.  Every constant is the SASS immediate.

Conventions (those of :mod:`.bits`): a NaN result is ``0x7fffffff``; ``.FTZ`` reads subnormal
operands as signed zeros and flushes subnormal results.  Where a sequence calls a ptxas slow-path
subroutine whose job is an IEEE-correct result (``div.rn``, ``rcp.rn`` near the exponent limits) the
subroutine is modelled by that result (the correctly rounded quotient); ``FCHK`` (which picks the
slow path of ``div.rn``) is modelled conservatively: the fast path where no operand or the quotient
is near the exponent limits.  ``SPELLED`` at the end maps each spelling name to (function, arity).
"""

from __future__ import annotations

import numba
import numpy as np

from .bits import CNAN, _fma_f32, bits32, f32, fadd, ffma, ffma_ftz, fmul, fmul_ftz, ftz_in
from .mufu import mufu_ex2, mufu_lg2, mufu_rcp, mufu_rsq, mufu_sqrt, mufu_tanh
from .sequences import (cos_f32, div_approx_f32, div_approx_ftz_f32, div_full_f32, ex2_f32, lg2_f32, rsqrt_f32,
                        sin_f32)


def _b(v) -> int:
    """Bit pattern of the float32 nearest to v (SASS prints its immediates with 20 digits)."""
    return int(np.array(v, dtype=np.float32).view(np.uint32))


@numba.njit(cache=True)
def _fb(v):
    """_b inside compiled code (the same RN conversion)."""
    return bits32(np.float32(v))


SIGN = 0x80000000
INF = 0x7F800000
ZERO, ONE, HALF, QUARTER = 0, 0x3F800000, 0x3F000000, 0x3E800000
MONE = 0xBF800000
LOG2E = _b(1.4426950216293334961)          # 0x3fb8aa3b
NLOG2E = LOG2E | SIGN
LOG2_10 = _b(3.3219280242919921875)        # 0x40549a78
LN2 = _b(0.69314718246459960938)           # 0x3f317218
TWO23 = _b(8388608.0)
TWO24 = _b(16777216.0)
TWO64 = _b(1.84467440737095516160e+19)
TWO_M23 = _b(1.1920928955078125e-07)
TWO_M32 = _b(2.3283064365386962891e-10)
TWO126F = 8.50705917302346158658e+37
MIN_NORMAL = 1.175494350822287508e-38
M23 = _b(-23.0)


@numba.njit((numba.int64,), cache=True)
def neg(x):
    """The SASS ``-R`` operand modifier: flip the sign bit."""
    return x ^ SIGN


@numba.njit((numba.int64, numba.int64,), cache=True)
def fadd_ftz(a, b):
    """FADD.FTZ: operands and result flushed (an exact sum below 2**-126 is a subnormal, so no rounding)."""
    r = bits32(f32(ftz_in(a)) + f32(ftz_in(b)))
    return ftz_in(r)


@numba.njit(cache=True)
def _fma_err(a, b, c):
    """(s, t): float64 s = RN(a*b + c) and the sign of the exact remainder (a*b + c) - s."""
    p = np.float64(f32(a)) * np.float64(f32(b))          # exact
    cc = np.float64(f32(c))
    s = p + cc
    bb = s - p                                            # TwoSum: exact error of p + cc
    t = (p - (s - bb)) + (cc - bb)
    return s, t


@numba.njit(cache=True)
def ffma_rm(a, b, c):
    """FFMA.RM: a*b + c rounded toward -inf (finite operands, as in expf)."""
    s, t = _fma_err(a, b, c)
    if s != s:
        return CNAN
    q = np.float32(s)
    r = np.int64(bits32(q))
    if np.float64(q) > s or (np.float64(q) == s and t < 0.0):
        r = bits32(np.nextafter(q, np.float32(-np.inf)))
    return r


@numba.njit(cache=True)
def ffma_sat(a, b, c):
    """FFMA.SAT: RN(a*b + c) clamped to [0, 1]; NaN -> +0."""
    v = _fma_f32(f32(a), f32(b), f32(c))
    if not v > 0.0:
        return 0
    if v >= 1.0:
        return ONE
    return bits32(v)


@numba.njit(cache=True)
def f2i_ntz(x):
    """F2I.NTZ (s32): round to nearest even (the default F2I rounding; .TRUNC would truncate), saturate,
    NaN -> 0."""
    v = f32(x)
    if v != v:
        return 0
    if v >= 2147483648.0:
        return 2147483647
    if v <= -2147483648.0:
        return -2147483648
    return np.int64(np.rint(v))


@numba.njit((numba.int64,), cache=True)
def i2f(i):
    """I2FP.F32.S32: RN conversion of a signed 32-bit integer."""
    return bits32(np.float32(np.int64(i)))


@numba.njit((numba.int64,), cache=True)
def s32(v):
    """Two's-complement reading of a 32-bit word."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & SIGN else v


# ------------------------------------------------------------------------- fast-math / approx
@numba.njit(cache=True)
def fast_expf(x):
    return mufu_ex2(fmul_ftz(x, LOG2E))


@numba.njit(cache=True)
def fast_exp10f(x):
    return mufu_ex2(fmul_ftz(x, LOG2_10))


@numba.njit(cache=True)
def fast_logf(x):
    return fmul_ftz(mufu_lg2(x), LN2)


@numba.njit(cache=True)
def fast_sigmoid(x):
    """FMUL.FTZ x*-log2e; MUFU.EX2; FADD.FTZ +1; MUFU.RCP."""
    return mufu_rcp(fadd_ftz(mufu_ex2(fmul_ftz(x, NLOG2E)), ONE))


@numba.njit(cache=True)
def expf_approx(x):
    """__expf without ftz: FMUL x*log2e, then ex2.approx.f32's sequence."""
    return ex2_f32(fmul(x, LOG2E))


@numba.njit(cache=True)
def exp10f_approx(x):
    return ex2_f32(fmul(x, LOG2_10))


@numba.njit(cache=True)
def logf_approx(x):
    """__logf without ftz: lg2.approx.f32's sequence, FMUL * ln2."""
    return fmul(lg2_f32(x), LN2)


@numba.njit(cache=True)
def rcp_full(x):
    """div.full.f32 1.0, x (Triton ``1.0 / x``)."""
    return div_full_f32(ONE, x)


@numba.njit(cache=True)
def sigmoid_approx(x):
    """1/(1+__expf(-x)) without ftz: FMUL x*-log2e; ex2.approx.f32 seq; FADD +1; rcp.rn."""
    return rcp_rn(fadd(ex2_f32(fmul(x, NLOG2E)), ONE))


@numba.njit(cache=True)
def triton_sigmoid(x):
    """FADD 0 - x; FMUL *log2e; ex2.approx.f32 seq; FADD +1; d > 2^126 ? (d*0.25, s=0.25); s*MUFU.RCP(d)."""
    d = fadd(ex2_f32(fmul(fadd(ZERO, neg(x)), LOG2E)), ONE)
    s = ONE
    if f32(d) > TWO126F:
        s = QUARTER
        d = fmul(d, QUARTER)
    return fmul(mufu_rcp(d), s)


# ---------------------------------------------------------------------------- IEEE RN forms
@numba.njit(cache=True)
def _sqrt_rn_slow(x, ftz):
    """ptxas's sqrt slow path: zero, negative, NaN, Inf, and |x| outside [2^-101, 2^128)."""
    if ftz:
        if f32(x) == 0.0 or (x & 0x7F800000) == 0:       # FSETP.NEU.FTZ x, 0
            return fmul_ftz(x, ONE)
    elif (x & 0x7FFFFFFF) == 0:
        return x
    if not f32(ftz_in(x)) >= 0.0:                        # FSETP.GEU.FTZ (NaN passes)
        if f32(x) == f32(x):
            return CNAN
    if (x & 0x7FFFFFFF) > INF:
        return fadd_ftz(x, ONE)
    if (x & 0x7FFFFFFF) == INF:
        return x
    xs = fmul_ftz(x, TWO64) if ftz else ffma(x, TWO64, ZERO)
    r = mufu_rsq(xs)
    s = fmul_ftz(xs, r)
    h = fmul_ftz(r, HALF)
    e = ffma(s, fadd_ftz(neg(s), SIGN), xs)               # FADD.FTZ -s, -RZ ; FFMA s*(-s) + xs
    return fmul_ftz(ffma(e, h, s), TWO_M32)


@numba.njit(cache=True)
def sqrt_rn(x):
    """sqrt.rn.f32: (x - 0x0d000000) u> 0x727fffff ? slow path : s = x*RSQ (FTZ), h = RSQ*0.5 (FTZ),
    FFMA(FFMA(-s, s, x), h, s)."""
    r = mufu_rsq(x)
    if ((x - 0x0D000000) & 0xFFFFFFFF) > 0x727FFFFF:
        return _sqrt_rn_slow(x, False)
    s = fmul_ftz(x, r)
    h = fmul_ftz(r, HALF)
    return ffma(ffma(neg(s), s, x), h, s)


@numba.njit(cache=True)
def sqrt_rn_ftz(x):
    r = mufu_rsq(x)
    if ((x - 0x0D000000) & 0xFFFFFFFF) > 0x727FFFFF:
        return _sqrt_rn_slow(x, True)
    s = fmul_ftz(x, r)
    h = fmul_ftz(r, HALF)
    return ffma(ffma(neg(s), s, x), h, s)


@numba.njit(cache=True)
def _rcp_newton(x):
    """MUFU.RCP r; FFMA e = x*r - 1; FADD.FTZ -e; FFMA r*(-e) + r."""
    r = mufu_rcp(x)
    e = fadd_ftz(neg(ffma(x, r, MONE)), SIGN)
    return ffma(r, e, r)


@numba.njit(cache=True, error_model="numpy")
def rcp_rn(x):
    """rcp.rn.f32: exponent in {0, 253, 254, 255} -> slow path (subnormals scaled by 2^64; 253/254:
    the correctly rounded, possibly subnormal, reciprocal; Inf/NaN: MUFU.RCP); else one Newton step."""
    e = (x >> 23) & 0xFF
    if ((x + 0x1800000) & 0x7F800000) > 0x1FFFFFF:
        return _rcp_newton(x)
    if e == 0:
        if (x << 1) & 0xFFFFFFFF == 0:
            return mufu_rcp(x)
        return ffma(_rcp_newton(ffma(x, TWO64, ZERO)), TWO64, ZERO)
    if e == 255:
        return mufu_rcp(x)
    return bits32(np.float32(1.0 / np.float64(f32(x))))


@numba.njit(cache=True)
def rcp_rn_ftz(x):
    """rcp.rn.ftz.f32: as rcp_rn's fast path; exponent 0 or 255: MUFU.RCP; 253: 2^-126 for x = +-2^126
    else a signed zero; 254: a signed zero."""
    e = (x >> 23) & 0xFF
    if ((x + 0x1800000) & 0x7F800000) > 0x1FFFFFF:
        return _rcp_newton(x)
    if e == 0 or e == 255:
        return mufu_rcp(x)
    if e == 253 and (x & 0x7FFFFF) == 0:
        return (x & SIGN) | 0x800000
    return x & SIGN


@numba.njit(cache=True)
def _fchk_fast(a, b):
    """FCHK P0, a, b, modelled conservatively: the fast path when both operands lie in
    [2^-100, 2^101) in magnitude and their exponents differ by at most 100 (the real FCHK also takes
    it somewhat beyond; both paths round correctly there, so the choice does not change the result)."""
    ea, eb = (a >> 23) & 0xFF, (b >> 23) & 0xFF
    return 27 <= ea <= 227 and 27 <= eb <= 227 and -100 <= ea - eb <= 100


@numba.njit(cache=True)
def _div_fast(a, b):
    """MUFU.RCP r; FFMA t = -b*r + 1; FFMA r' = r*t + r; FFMA q = a*r' + 0; FFMA e = -b*q + a; FFMA r'*e + q."""
    r = mufu_rcp(b)
    t = ffma(neg(b), r, ONE)
    r = ffma(r, t, r)
    q = ffma(a, r, ZERO)
    e = ffma(neg(b), q, a)
    return ffma(r, e, q)


@numba.njit(cache=True, error_model="numpy")
def div_rn(a, b):
    """div.rn.f32 (x / y): FCHK; fast path; slow path (__internal fdiv): the IEEE quotient, NaN
    (NaN operand, 0/0, Inf/Inf) -> 0x7fffffff."""
    if _fchk_fast(a, b):
        return _div_fast(a, b)
    return bits32(np.float32(np.float64(f32(a)) / np.float64(f32(b))))


@numba.njit(cache=True, error_model="numpy")
def div_rn_ftz(a, b):
    """div.rn.ftz.f32: as div_rn; the slow path reads subnormal operands as zeros and gives a signed
    zero when the quotient rounded to 24 bits (unbounded exponent) is below 2^-126."""
    if _fchk_fast(a, b):
        return _div_fast(a, b)
    fa, fb = np.float64(f32(ftz_in(a))), np.float64(f32(ftz_in(b)))
    q = fa / fb
    if q != q:
        return CNAN
    s = SIGN if ((a ^ b) & SIGN) else 0
    if q == 0.0 or abs(q) == np.inf:
        return bits32(np.float32(q))
    if abs(q) < MIN_NORMAL:
        r = np.float64(np.float32(q * 1.8446744073709552e19)) * 5.421010862427522e-20   # RN at 24 bits
        return (s | 0x800000) if abs(r) >= MIN_NORMAL else s
    return bits32(np.float32(q))


# ------------------------------------------------------------------------- libm-style sequences
@numba.njit(cache=True)
def expf_full(x):
    """expf: FFMA.SAT t = x*0x3bbb989d + 0.5; FFMA.RM t = t*252 + 12582913; FADD j = t - 12583039;
    FFMA r = x*log2e - j; FFMA r = x*1.925963e-8 + r; MUFU.EX2 r; FMUL (t << 23) * ex2."""
    t = ffma_sat(x, 0x3BBB989D, HALF)
    t = ffma_rm(t, 0x437C0000, _fb(12582913.0))
    j = fadd(t, _fb(-12583039.0))
    r = ffma(x, LOG2E, neg(j))
    r = ffma(x, _fb(1.925963033500011079e-08), r)
    return fmul((t << 23) & 0xFFFFFFFF, mufu_ex2(r))


LOGF_C = np.array([_b(v) for v in (0.14084610342979431152, -0.12148627638816833496, 0.13980610668659210205,
                                   -0.16684235632419586182, 0.20012299716472625732, -0.24999669194221496582,
                                   0.33333182334899902344, -0.5)], dtype=np.int64)
LOG2F_C = np.array([_b(v) for v in (-0.16845393180847167969, 0.1716887056827545166, -0.17900948226451873779,
                                    0.20512372255325317383, -0.24046532809734344482, 0.28857114911079406738,
                                    -0.36067417263984680176, 0.48089820146560668945,
                                    -0.72134751081466674805)], dtype=np.int64)


@numba.njit((numba.int64, numba.int64, numba.int64, numba.boolean,), cache=True)
def _fma_mode(a, b, c, ftz):
    return ffma_ftz(a, b, c) if ftz else ffma(a, b, c)


@numba.njit(cache=True)
def _logf(x, ftz):
    """logf (libdevice): x < 2^-126 ? (x*2^23, e0 = -23) ; m = x - ((x - 0x3f2aaaab) & 0xff800000);
    f = m - 1; e = I2F(..)*2^-23 + e0; Horner on f (FFMA, 0x3e055027 first); FMUL f*p; FFMA f*p + f;
    FFMA e*ln2 + that; x u>= 0x7f800000 ? FFMA x*Inf + Inf ; x == 0 ? -Inf."""
    small = not f32(x) >= MIN_NORMAL                       # FSETP.GEU (NaN: not small)
    e0 = M23 if small else ZERO
    if small:
        x = fmul(x, TWO23)
    k = (x - 0x3F2AAAAB) & 0xFF800000
    f = fadd((x - k) & 0xFFFFFFFF, MONE)
    e = _fma_mode(i2f(s32(k)), TWO_M23, e0, ftz)
    p = _fma_mode(f, neg(0x3E055027), LOGF_C[0], ftz)
    for i in range(1, 8):
        p = _fma_mode(f, p, LOGF_C[i], ftz)
    p = fmul(f, p)
    p = _fma_mode(f, p, f, ftz)
    r = _fma_mode(e, LN2, p, ftz)
    if x >= 0x7F800000:
        r = _fma_mode(x, INF, INF, ftz)
    return r if f32(x) != 0.0 else 0xFF800000


@numba.njit(cache=True)
def _log2f(x, ftz):
    """log2f (libdevice): as logf with split 0x3f3504f3; Horner (0x3dc6b27f first); FMUL f*p twice;
    FFMA f*log2e + p; FADD e + that; special cases as logf."""
    small = not f32(x) >= MIN_NORMAL
    e0 = M23 if small else ZERO
    if small:
        x = fmul(x, TWO23)
    k = (x - 0x3F3504F3) & 0xFF800000
    f = fadd((x - k) & 0xFFFFFFFF, MONE)
    e = _fma_mode(i2f(s32(k)), TWO_M23, e0, ftz)
    p = _fma_mode(f, 0x3DC6B27F, LOG2F_C[0], ftz)
    for i in range(1, 9):
        p = _fma_mode(f, p, LOG2F_C[i], ftz)
    p = fmul(f, p)
    p = fmul(f, p)
    p = _fma_mode(f, LOG2E, p, ftz)
    r = fadd(e, p)
    if x >= 0x7F800000:
        r = _fma_mode(x, INF, INF, ftz)
    return r if f32(x) != 0.0 else 0xFF800000


@numba.njit(cache=True)
def logf_full(x):
    return _logf(x, False)


@numba.njit(cache=True)
def log2f_full(x):
    return _log2f(x, False)


@numba.njit(cache=True)
def triton_log(x):
    return _logf(x, True)


@numba.njit(cache=True)
def triton_log2(x):
    return _log2f(x, True)


@numba.njit(cache=True)
def tanhf_full(x):
    """tanhf: |x| >= 0.6: 1 - 2/(EX2(|x|*2.885390) + 1) (FMUL, MUFU.EX2, FADD, MUFU.RCP, FFMA),
    1 past |x| >= 9.010914, sign of x (LOP3); else FFMA x*p(x^2) + x, p odd polynomial (FFMA Horner
    from 0x3c80f082)."""
    a = x & 0x7FFFFFFF
    t = mufu_ex2(fmul(a, _fb(2.8853900432586669922)))
    x2 = fmul(x, x)
    p = ffma(x2, 0x3C80F082, _fb(-0.052303962409496307373))
    p = ffma(x2, p, _fb(0.1331529766321182251))
    p = ffma(x2, p, _fb(-0.33332768082618713379))
    p = ffma(x2, p, ZERO)
    if not f32(a) >= 0.60000002384185791016:
        return ffma(x, p, x)
    r = ffma(mufu_rcp(fadd(t, ONE)), _fb(-2.0), ONE)
    if f32(a) >= 9.010913848876953125:
        r = ONE
    return (r & 0x7FFFFFFF) | (x & SIGN)


I2OPI = np.array([0x3C439041, 0xDB629599, 0xF534DDC0, 0xFC2757D1, 0x4E441529, 0xA2F9836E], dtype=np.uint64)
PIO2_2M62 = float(np.array(0x3BF921FB54442D19, dtype=np.uint64).view(np.float64))   # DMUL operand: pi/2 * 2^-62
TWO_OVER_PI = _b(0.63661974668502807617)
PIO2_1, PIO2_2, PIO2_3 = (_b(-1.5707962512969970703), _b(-7.5497894158615963534e-08),
                          _fb(-5.3903029534742383927e-15))


@numba.njit(cache=True)
def _payne_hanek(x):
    """|x| >= 105615 (finite): 2/pi * x in 192-bit fixed point from the __cudart_i2opi_f table, the
    fraction's top 62 bits to float64 (I2F.F64.S64), DMUL pi/2*2^-62, F2F.F32.F64.  Returns (r, q)."""
    e = (x >> 23) & 0xFF
    ia = np.uint64(((x << 8) | SIGN) & 0xFFFFFFFF)
    idx = (e - 128) >> 5
    sh = (e - 128) & 31
    m32 = np.uint64(0xFFFFFFFF)
    carry = np.uint64(0)
    hi = mid = lo = np.uint64(0)
    for i in range(6):
        p = I2OPI[i] * ia + carry
        w = p & m32
        carry = p >> np.uint64(32)
        if i == 6 - idx:
            hi = w
        if i == 5 - idx:
            mid = w
        if i == 4 - idx:
            lo = w
    if idx == 0:
        hi = carry
    if sh:
        s, t = np.uint64(sh), np.uint64(32 - sh)
        hi = ((hi << s) + (mid >> t)) & m32
        mid = ((mid << s) + (lo >> t)) & m32
    v = ((hi << np.uint64(32)) | mid) << np.uint64(2)
    top = np.int64(v >> np.uint64(63))
    q = np.int64(hi >> np.uint64(30)) + top
    sgn = x & SIGN
    if top:
        v = ~v
        sgn ^= SIGN
    d = np.float64(np.int64(v)) * PIO2_2M62
    r = bits32(np.float32(d))
    if sgn:
        r = neg(r)
    if x & SIGN:
        q = -q
    return r, q


@numba.njit(cache=True)
def _sincosf(x, cos, ftz):
    """sinf / cosf (libdevice): j = F2I.NTZ(x*2/pi) (RN); r = x - j*pi/2 in three FFMAs; |x| >= 105615:
    Payne-Hanek; Inf: 0*x.  Then quadrant q (+1 for cos): odd -> cos polynomial, even -> sin; q & 2
    -> FFMA r*-1 + 0."""
    a = x & 0x7FFFFFFF
    if ftz:
        j = f2i_ntz(ftz_in(fmul(x, TWO_OVER_PI)))
    else:
        j = f2i_ntz(fmul(x, TWO_OVER_PI))
    jf = i2f(j)
    r = _fma_mode(jf, PIO2_1, x, ftz)
    r = _fma_mode(jf, PIO2_2, r, ftz)
    r = _fma_mode(jf, PIO2_3, r, ftz)
    q = j
    if f32(ftz_in(a) if ftz else a) >= 105615.0:
        if a == INF:
            r = fmul_ftz(ZERO, x) if ftz else fmul(ZERO, x)
            q = 0
        else:
            r, q = _payne_hanek(x)
    if cos:
        q += 1
    r2 = fmul_ftz(r, r) if ftz else fmul(r, r)
    if q & 1:
        c5, c7 = _fb(0.041666727513074874878), _fb(-0.4999999701976776123)
        p = _fma_mode(r2, 0x37CBAC00, _fb(-0.0013887860113754868507), ftz)
        y = ONE
    else:
        c5, c7 = 0x3C0885E4, 0xBE2AAAA8
        p = 0xB94D4153
        y = r
    p = _fma_mode(r2, p, c5, ftz)
    t = _fma_mode(y, r2, ZERO, ftz)
    p = _fma_mode(r2, p, c7, ftz)
    y = _fma_mode(p, t, y, ftz)
    if q & 2:
        y = _fma_mode(y, MONE, ZERO, ftz)
    return y


@numba.njit(cache=True)
def sinf_full(x):
    return _sincosf(x, False, False)


@numba.njit(cache=True)
def cosf_full(x):
    return _sincosf(x, True, False)


@numba.njit(cache=True)
def triton_sin(x):
    return _sincosf(x, False, True)


@numba.njit(cache=True)
def triton_cos(x):
    return _sincosf(x, True, True)


# ------------------------------------------------------------------------------------ the table
TANH_MISSING = "MUFU.TANH (no model yet)"

#: spelling name -> (function, arity); the SASS sequence in the comment.  Spellings built on MUFU.TANH
#: (cuda-fast:tanhf(x)) have no entry: the unit's TANH has no model yet.
SPELLED = {
    # ---- cuda (nvcc defaults: -ftz=false, IEEE div/sqrt)
    "cuda:__expf(x)": (expf_approx, 1),          # FMUL x*log2e; FSETP.GEU -126; @!P (FMUL *0.5); MUFU.EX2; @!P FMUL y*y
    "cuda:expf(x)": (expf_full, 1),              # FFMA.SAT; FFMA.RM; FADD; FFMA; FFMA; MUFU.EX2; FMUL (t<<23)*y
    "cuda:exp2f(x)": (ex2_f32, 1),               # FSETP.GEU -126; @!P FMUL *0.5; MUFU.EX2; @!P FMUL y*y
    "cuda:__exp10f(x)": (exp10f_approx, 1),      # FMUL x*log2(10); then as exp2f
    "cuda:__logf(x)": (logf_approx, 1),          # |x|<2^-126 ? x*2^24; MUFU.LG2; @!P FADD -24; FMUL *ln2
    "cuda:logf(x)": (logf_full, 1),              # libdevice logf: int split at 0x3f2aaaab; 8 FFMA Horner; FMUL; FFMA; FFMA *ln2
    "cuda:log2f(x)": (log2f_full, 1),            # libdevice log2f: int split at 0x3f3504f3; 9 FFMA Horner; FMUL x2; FFMA *log2e; FADD
    "cuda:__log2f(x)": (lg2_f32, 1),             # |x|<2^-126 ? x*2^24; MUFU.LG2; @!P FADD -24
    "cuda:rsqrtf(x)": (rsqrt_f32, 1),            # |x|<2^-126 ? x*2^24; MUFU.RSQ; @!P FMUL *4096
    "cuda:sqrtf(x)": (sqrt_rn, 1),               # MUFU.RSQ; FMUL.FTZ x*r; FMUL.FTZ r*0.5; FFMA; FFMA; slow path CALL
    "cuda:__fsqrt_rn(x)": (sqrt_rn, 1),          # same as sqrtf
    "cuda:1.0f / x": (rcp_rn, 1),                # MUFU.RCP; FFMA x*r-1; FADD.FTZ -e; FFMA r*e+r; slow path CALL (exp 0/253/254/255)
    "cuda:__frcp_rn(x)": (rcp_rn, 1),            # same as 1.0f / x
    "cuda:tanhf(x)": (tanhf_full, 1),            # FMUL |x|*2.885; MUFU.EX2; FADD +1; MUFU.RCP; FFMA r*-2+1; FSEL; LOP3 sign; small: FFMA Horner
    "cuda:sinf(x)": (sinf_full, 1),              # FMUL x*2/pi; F2I.NTZ; I2FP; 3 FFMA; Payne-Hanek (|x|>=105615); FFMA polys
    "cuda:__sinf(x)": (sin_f32, 1),               # FMUL.RZ x*1/(2pi); MUFU.SIN
    "cuda:cosf(x)": (cosf_full, 1),              # as sinf, quadrant + 1
    "cuda:__cosf(x)": (cos_f32, 1),               # FMUL.RZ x*1/(2pi); MUFU.COS
    "cuda:1.0f / (1.0f + __expf(-x))": (sigmoid_approx, 1),   # FMUL x*-log2e; ex2 seq; FADD +1; rcp.rn seq
    "cuda:x / y": (div_rn, 2),                   # MUFU.RCP; FCHK; FFMA x5; slow path CALL
    "cuda:__fdividef(x, y)": (div_approx_f32, 2),      # |y|<2^-126 ? (x,y)*2^24; MUFU.RCP y; FMUL
    "cuda:__fdiv_rn(x, y)": (div_rn, 2),         # same as x / y
    # ---- cuda-fast (--use_fast_math)
    "cuda-fast:__expf(x)": (fast_expf, 1),       # FMUL.FTZ x*log2e; MUFU.EX2
    "cuda-fast:expf(x)": (fast_expf, 1),         # FMUL.FTZ x*log2e; MUFU.EX2
    "cuda-fast:exp2f(x)": (mufu_ex2, 1),         # MUFU.EX2
    "cuda-fast:__exp10f(x)": (fast_exp10f, 1),   # FMUL.FTZ x*log2(10); MUFU.EX2
    "cuda-fast:__logf(x)": (fast_logf, 1),       # MUFU.LG2; FMUL.FTZ *ln2
    "cuda-fast:logf(x)": (fast_logf, 1),         # MUFU.LG2; FMUL.FTZ *ln2
    "cuda-fast:log2f(x)": (mufu_lg2, 1),         # MUFU.LG2
    "cuda-fast:__log2f(x)": (mufu_lg2, 1),       # MUFU.LG2
    "cuda-fast:rsqrtf(x)": (mufu_rsq, 1),        # MUFU.RSQ
    "cuda-fast:sqrtf(x)": (mufu_sqrt, 1),        # MUFU.SQRT
    "cuda-fast:__fsqrt_rn(x)": (sqrt_rn_ftz, 1),  # MUFU.RSQ; FMUL.FTZ; FMUL.FTZ; FFMA; FFMA; slow path (FTZ) CALL
    "cuda-fast:1.0f / x": (mufu_rcp, 1),         # MUFU.RCP
    "cuda-fast:__frcp_rn(x)": (rcp_rn_ftz, 1),   # MUFU.RCP; FFMA; FADD.FTZ; FFMA; slow path (FTZ) CALL
    "cuda-fast:sinf(x)": (sin_f32, 1),            # FMUL.RZ x*1/(2pi); MUFU.SIN
    "cuda-fast:__sinf(x)": (sin_f32, 1),          # FMUL.RZ x*1/(2pi); MUFU.SIN
    "cuda-fast:cosf(x)": (cos_f32, 1),            # FMUL.RZ x*1/(2pi); MUFU.COS
    "cuda-fast:__cosf(x)": (cos_f32, 1),          # FMUL.RZ x*1/(2pi); MUFU.COS
    "cuda-fast:tanhf(x)": (mufu_tanh, 1),        # MUFU.TANH
    "cuda-fast:1.0f / (1.0f + __expf(-x))": (fast_sigmoid, 1),  # FMUL.FTZ x*-log2e; MUFU.EX2; FADD.FTZ +1; MUFU.RCP
    "cuda-fast:x / y": (div_approx_ftz_f32, 2),        # MUFU.RCP y; FMUL.FTZ x*r
    "cuda-fast:__fdividef(x, y)": (div_approx_ftz_f32, 2),  # MUFU.RCP y; FMUL.FTZ x*r
    "cuda-fast:__fdiv_rn(x, y)": (div_rn_ftz, 2),     # MUFU.RCP; FCHK; FFMA x5; slow path (FTZ) CALL
    # ---- triton 3.6
    "triton:tl.exp(x)": (expf_approx, 1),        # FMUL x*log2e; FSETP.GEU -126; @!P FMUL *0.5; MUFU.EX2; @!P FMUL y*y
    "triton:tl.exp2(x)": (mufu_ex2, 1),          # MUFU.EX2
    "triton:tl.log(x)": (triton_log, 1),         # libdevice logf with FFMA.FTZ
    "triton:tl.log2(x)": (triton_log2, 1),       # libdevice log2f with FFMA.FTZ
    "triton:tl.math.rsqrt(x)": (mufu_rsq, 1),    # MUFU.RSQ
    "triton:tl.sqrt(x)": (mufu_sqrt, 1),         # MUFU.SQRT
    "triton:tl.sqrt_rn(x)": (sqrt_rn, 1),        # as cuda sqrtf
    "triton:tl.sigmoid(x)": (triton_sigmoid, 1),  # FADD 0-x; FMUL *log2e; ex2 seq; FADD +1; div.full 1/d seq
    "triton:tl.sin(x)": (triton_sin, 1),         # libdevice sinf, FTZ (F2I.FTZ.NTZ, FFMA.FTZ, FMUL.FTZ)
    "triton:tl.cos(x)": (triton_cos, 1),         # libdevice cosf, FTZ
    "triton:1.0 / x": (rcp_full, 1),             # div.full: s=|x|>2^126?0.25:1, |x|<2^-126? s,x*2^24; MUFU.RCP; FMUL *s
    "triton:x / y": (div_full_f32, 2),               # div.full.f32 sequence
    "triton:tl.math.div_rn(x, y)": (div_rn, 2),  # as cuda x / y
    "triton:tl.fdiv(x, y)": (div_full_f32, 2),       # div.full.f32 sequence
}


#: the instruction sequence (SASS) of each spelling, as the functions above follow it
SEQUENCE = {
    'cuda:__expf(x)': 'FMUL x*log2e; FSETP.GEU -126; @!P (FMUL *0.5); MUFU.EX2; @!P FMUL y*y',
    'cuda:expf(x)': 'FFMA.SAT; FFMA.RM; FADD; FFMA; FFMA; MUFU.EX2; FMUL (t<<23)*y',
    'cuda:exp2f(x)': 'FSETP.GEU -126; @!P FMUL *0.5; MUFU.EX2; @!P FMUL y*y',
    'cuda:__exp10f(x)': 'FMUL x*log2(10); then as exp2f',
    'cuda:__logf(x)': '|x|<2^-126 ? x*2^24; MUFU.LG2; @!P FADD -24; FMUL *ln2',
    'cuda:logf(x)': 'libdevice logf: int split at 0x3f2aaaab; 8 FFMA Horner; FMUL; FFMA; FFMA *ln2',
    'cuda:log2f(x)': 'libdevice log2f: int split at 0x3f3504f3; 9 FFMA Horner; FMUL x2; FFMA *log2e; FADD',
    'cuda:__log2f(x)': '|x|<2^-126 ? x*2^24; MUFU.LG2; @!P FADD -24',
    'cuda:rsqrtf(x)': '|x|<2^-126 ? x*2^24; MUFU.RSQ; @!P FMUL *4096',
    'cuda:sqrtf(x)': 'MUFU.RSQ; FMUL.FTZ x*r; FMUL.FTZ r*0.5; FFMA; FFMA; slow path CALL',
    'cuda:__fsqrt_rn(x)': 'same as sqrtf',
    'cuda:1.0f / x': 'MUFU.RCP; FFMA x*r-1; FADD.FTZ -e; FFMA r*e+r; slow path CALL (exp 0/253/254/255)',
    'cuda:__frcp_rn(x)': 'same as 1.0f / x',
    'cuda:tanhf(x)': 'FMUL |x|*2.885; MUFU.EX2; FADD +1; MUFU.RCP; FFMA r*-2+1; FSEL; LOP3 sign; small: FFMA Horner',
    'cuda:sinf(x)': 'FMUL x*2/pi; F2I.NTZ; I2FP; 3 FFMA; Payne-Hanek (|x|>=105615); FFMA polys',
    'cuda:__sinf(x)': 'FMUL.RZ x*1/(2pi); MUFU.SIN',
    'cuda:cosf(x)': 'as sinf, quadrant + 1',
    'cuda:__cosf(x)': 'FMUL.RZ x*1/(2pi); MUFU.COS',
    'cuda:1.0f / (1.0f + __expf(-x))': 'FMUL x*-log2e; ex2 seq; FADD +1; rcp.rn seq',
    'cuda:x / y': 'MUFU.RCP; FCHK; FFMA x5; slow path CALL',
    'cuda:__fdividef(x, y)': '|y|<2^-126 ? (x,y)*2^24; MUFU.RCP y; FMUL',
    'cuda:__fdiv_rn(x, y)': 'same as x / y',
    'cuda-fast:__expf(x)': 'FMUL.FTZ x*log2e; MUFU.EX2',
    'cuda-fast:expf(x)': 'FMUL.FTZ x*log2e; MUFU.EX2',
    'cuda-fast:exp2f(x)': 'MUFU.EX2',
    'cuda-fast:__exp10f(x)': 'FMUL.FTZ x*log2(10); MUFU.EX2',
    'cuda-fast:__logf(x)': 'MUFU.LG2; FMUL.FTZ *ln2',
    'cuda-fast:logf(x)': 'MUFU.LG2; FMUL.FTZ *ln2',
    'cuda-fast:log2f(x)': 'MUFU.LG2',
    'cuda-fast:__log2f(x)': 'MUFU.LG2',
    'cuda-fast:rsqrtf(x)': 'MUFU.RSQ',
    'cuda-fast:sqrtf(x)': 'MUFU.SQRT',
    'cuda-fast:__fsqrt_rn(x)': 'MUFU.RSQ; FMUL.FTZ; FMUL.FTZ; FFMA; FFMA; slow path (FTZ) CALL',
    'cuda-fast:1.0f / x': 'MUFU.RCP',
    'cuda-fast:__frcp_rn(x)': 'MUFU.RCP; FFMA; FADD.FTZ; FFMA; slow path (FTZ) CALL',
    'cuda-fast:sinf(x)': 'FMUL.RZ x*1/(2pi); MUFU.SIN',
    'cuda-fast:__sinf(x)': 'FMUL.RZ x*1/(2pi); MUFU.SIN',
    'cuda-fast:cosf(x)': 'FMUL.RZ x*1/(2pi); MUFU.COS',
    'cuda-fast:__cosf(x)': 'FMUL.RZ x*1/(2pi); MUFU.COS',
    'cuda-fast:tanhf(x)': 'MUFU.TANH',
    'cuda-fast:1.0f / (1.0f + __expf(-x))': 'FMUL.FTZ x*-log2e; MUFU.EX2; FADD.FTZ +1; MUFU.RCP',
    'cuda-fast:x / y': 'MUFU.RCP y; FMUL.FTZ x*r',
    'cuda-fast:__fdividef(x, y)': 'MUFU.RCP y; FMUL.FTZ x*r',
    'cuda-fast:__fdiv_rn(x, y)': 'MUFU.RCP; FCHK; FFMA x5; slow path (FTZ) CALL',
    'triton:tl.exp(x)': 'FMUL x*log2e; FSETP.GEU -126; @!P FMUL *0.5; MUFU.EX2; @!P FMUL y*y',
    'triton:tl.exp2(x)': 'MUFU.EX2',
    'triton:tl.log(x)': 'libdevice logf with FFMA.FTZ',
    'triton:tl.log2(x)': 'libdevice log2f with FFMA.FTZ',
    'triton:tl.math.rsqrt(x)': 'MUFU.RSQ',
    'triton:tl.sqrt(x)': 'MUFU.SQRT',
    'triton:tl.sqrt_rn(x)': 'as cuda sqrtf',
    'triton:tl.sigmoid(x)': 'FADD 0-x; FMUL *log2e; ex2 seq; FADD +1; div.full 1/d seq',
    'triton:tl.sin(x)': 'libdevice sinf, FTZ (F2I.FTZ.NTZ, FFMA.FTZ, FMUL.FTZ)',
    'triton:tl.cos(x)': 'libdevice cosf, FTZ',
    'triton:1.0 / x': 'div.full: s=|x|>2^126?0.25:1, |x|<2^-126? s,x*2^24; MUFU.RCP; FMUL *s',
    'triton:x / y': 'div.full.f32 sequence',
    'triton:tl.math.div_rn(x, y)': 'as cuda x / y',
    'triton:tl.fdiv(x, y)': 'div.full.f32 sequence',
}
