"""Accumulator numerics of dense wgmma: one fused, truncated dot product per instruction.

The model (a lead from public work: MMA-Sim's ``t_fdpa`` and Khattak & Mikaitis,
"Accurate models of NVIDIA tensor cores"; the H200 decides).  For one output
element ``d = sum_k a_k * b_k + c`` of one instruction:

1. every product is exact and *not renormalised*: significands ``s`` in [1, 2)
   (a subnormal keeps its format's minimum exponent and ``s < 1``) are multiplied,
   ``s_p = s_a * s_b`` in [0, 4), with exponent ``e_p = e_a + e_b``;
2. ``c`` is one more term of the same sum (``s_c`` in [1, 2), its own exponent);
   a zero term (zero product or zero ``c``) gets the fixed exponent ``e_zero``;
3. every term is aligned to ``e_max`` = the largest term exponent and truncated
   toward zero to ``F`` fraction bits: ``t = trunc(s * 2**(e - e_max + F))``, an integer;
4. the integers are summed exactly, and ``sum * 2**(e_max - F)`` is normalised and
   rounded once to the accumulator format (RZ to f32, RZ to 13 mantissa bits
   "e8m13" for FP8 inputs, RNE to f16).  A zero result is +0.

Special values: a NaN input, Inf*0, or +Inf and -Inf among the terms give the
canonical NaN (0x7FFFFFFF / 0x7FFF); otherwise an Inf term gives that signed Inf.

Worked example (e4m3 inputs, f32 accumulator, F = 13): ``a = (1.0, 2**-14)``,
``b = (1.0, 1.0)``, ``c = 0``.  Terms: 1.0 (e=0), 2**-14 (e=-14), and c with
e_zero = -133.  e_max = 0; the small product becomes trunc(2**-14 * 2**13) = 0, so
d = 1.0 exactly although 1 + 2**-14 is representable in f32.

Every tunable number lives in :data:`BINDING` (one row per family and accumulator):
a hardware finding is a one-line change there.  :func:`fdpa` is the readable float64
formula; :func:`fdpa_chain` runs the numba kernels the public API uses (the fast one of
:mod:`refmodel.numerics.fdpa_fast`, or the integer one here); the tests hold all of
them bit-identical.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional, Union

import numba
import numpy as np

from .._parallel import parallel_ranges
from ..errors import InputError
from ..validate import _describe, check_instr
from .formats import TF32, FormatSpec, format_spec
from ..wgmma_forms import WgmmaForm

# ----------------------------------------------------------------------------- binding


@dataclass(frozen=True)
class AccumParams:
    """Numerics of one (input family, accumulator) pair of floating-point wgmma.

    ``F``: fraction bits every aligned term keeps (truncated toward zero).
    ``e_zero``: exponent a zero term takes part in ``e_max`` with.
    ``acc``: accumulator format of C and D, ``"f32"`` or ``"f16"``.
    ``round_mbits``: mantissa bits of the final rounding (23 = f32, 13 = "e8m13",
    10 = f16); the result is stored in ``acc`` with the low bits zero.
    ``rounding``: ``"rz"`` (truncate) or ``"rne"`` (nearest, ties to even).
    ``overflow``: result past the largest finite value: ``"inf"`` or ``"satfinite"``
    (the largest finite value of the rounding format, with the sign).
    ``k_group``: terms fused per rounding; None = the instruction's whole K.
    ``tf32_ignored_bits``: low bits of a tf32 operand's f32 container the tensor core
    ignores (13 leaves the 19-bit tf32 value).
    """

    F: int
    e_zero: int
    acc: str
    round_mbits: int
    rounding: str
    overflow: str = "inf"
    k_group: Optional[int] = None
    tf32_ignored_bits: int = 13

    def __post_init__(self):
        if self.acc not in ("f32", "f16"):
            raise InputError(f"acc must be 'f32' or 'f16', got {_describe(self.acc)}")
        if self.rounding not in ("rz", "rne"):
            raise InputError(f"rounding must be 'rz' or 'rne', got {_describe(self.rounding)}")
        if self.overflow not in ("inf", "satfinite"):
            raise InputError(f"overflow must be 'inf' or 'satfinite', got {_describe(self.overflow)}")
        if not 0 < self.round_mbits <= self.acc_spec.mbits:
            raise InputError(f"round_mbits must be in 1..{self.acc_spec.mbits} for {self.acc}, "
                             f"got {self.round_mbits}")
        if not 1 <= self.F <= 29:
            raise InputError(f"F must be in 1..29 (terms are 32-bit integers), got {self.F}")
        if not 10 <= self.tf32_ignored_bits <= 16:  # the kernels hold significands in 32 bits
            raise InputError(f"tf32_ignored_bits must be in 10..16, got {self.tf32_ignored_bits}")

    @property
    def acc_spec(self) -> FormatSpec:
        return format_spec(self.acc)

    @property
    def nan_bits(self) -> int:
        return self.acc_spec.nan_code


@dataclass(frozen=True)
class IntAccumParams:
    """Numerics of integer wgmma (s8/u8 inputs, s32 accumulator): the exact dot product
    plus C, then ``wrap`` (two's complement, mod 2**32) or ``clamp`` (to int32)."""

    overflow_plain: str = "wrap"       # no .satfinite
    overflow_satfinite: str = "clamp"  # .satfinite
    k_group: Optional[int] = None

    def __post_init__(self):
        for name in ("overflow_plain", "overflow_satfinite"):
            v = getattr(self, name)
            if v not in ("wrap", "clamp"):
                raise InputError(f"{name} must be 'wrap' or 'clamp', got {_describe(v)}")

    def clamps(self, satfinite: bool) -> bool:
        """Whether an int32 result past the range clamps (else wraps), with or without ``.satfinite``."""
        return (self.overflow_satfinite if satfinite else self.overflow_plain) == "clamp"


#: (family, accumulator) -> numerics.  Leads: MMA-Sim (Hopper wgmma), Khattak & Mikaitis.
BINDING: dict[tuple[str, str], Union[AccumParams, IntAccumParams]] = {
    ("tf32", "f32"): AccumParams(F=25, e_zero=-133, acc="f32", round_mbits=23, rounding="rz"),
    ("f16", "f32"): AccumParams(F=25, e_zero=-133, acc="f32", round_mbits=23, rounding="rz"),
    ("f16", "f16"): AccumParams(F=25, e_zero=-21, acc="f16", round_mbits=10, rounding="rne"),
    ("bf16", "f32"): AccumParams(F=25, e_zero=-133, acc="f32", round_mbits=23, rounding="rz"),
    ("fp8", "f32"): AccumParams(F=13, e_zero=-133, acc="f32", round_mbits=13, rounding="rz"),
    ("fp8", "f16"): AccumParams(F=13, e_zero=-21, acc="f16", round_mbits=10, rounding="rne"),
    ("int8", "s32"): IntAccumParams(),
}


def params_for(form: WgmmaForm) -> Union[AccumParams, IntAccumParams]:
    """The :data:`BINDING` row of a wgmma form or instruction string (change it with
    ``dataclasses.replace``)."""
    from ..wgmma_forms import WgmmaForm, parse_wgmma

    if not isinstance(form, WgmmaForm):
        form = parse_wgmma(check_instr("instr", form, "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"))
    return BINDING[(form.family, form.dtype_d)]


def with_params(p: AccumParams, **changes) -> AccumParams:
    """A copy of ``p`` with some fields changed (validated), e.g. ``with_params(p, F=14)``."""
    import dataclasses

    if not isinstance(p, (AccumParams, IntAccumParams)):
        raise InputError(f"with_params takes AccumParams or IntAccumParams, got {_describe(p)}")
    names = [f.name for f in dataclasses.fields(p)]
    unknown = [k for k in changes if k not in names]
    if unknown:
        raise InputError(f"{type(p).__name__} has no field {_describe(unknown[0])}; its fields are {', '.join(names)}")
    return replace(p, **changes)


def tf32_spec(ignored_bits: int = 13) -> FormatSpec:
    """Format of a tf32 operand once ``ignored_bits`` low bits of its f32 container are
    dropped: 8 exponent bits and ``23 - ignored_bits`` mantissa bits."""
    if ignored_bits == 13:
        return TF32
    m = 23 - ignored_bits
    return FormatSpec(f"tf32m{m}", 8, m, True, (1 << (8 + m)) - 1)


# ----------------------------------------------------------------------------- readable formula


def significand_exponent(x: np.ndarray, emin: int) -> tuple[np.ndarray, np.ndarray]:
    """(s, e) with x = s * 2**e, 1 <= |s| < 2 for normal x, and e = emin, |s| < 1 for
    values below 2**emin (subnormals of a format whose smallest normal exponent is emin).
    Zero gives (0, emin); only finite x are meaningful."""
    x = np.asarray(x, dtype=np.float64)
    m, e = np.frexp(x)  # x = m * 2**e, 0.5 <= |m| < 1
    e = e.astype(np.int64) - 1
    s = 2.0 * m
    low = e < emin
    s = np.where(low, np.ldexp(s, np.where(low, e - emin, 0)), s)
    e = np.where(low, emin, e)
    return s, e


def round_result(v: np.ndarray, p: AccumParams) -> np.ndarray:
    """Round exact float64 values once to the accumulator (float32 or float16 array):
    ``round_mbits`` mantissa bits, RZ or RNE, subnormals kept, overflow per ``p.overflow``,
    zero results +0.  NaN inputs give the canonical NaN."""
    spec = p.acc_spec
    m = p.round_mbits
    v = np.asarray(v, dtype=np.float64)
    mag = np.abs(v)
    finite = np.isfinite(v)
    safe = np.where(finite & (mag > 0), mag, 1.0)
    _, ex = np.frexp(safe)
    top = np.maximum(ex.astype(np.int64) - 1, spec.emin)  # exponent of the result's unit bit
    q = np.ldexp(safe, m - top)  # exact: a power-of-two scaling
    r = np.trunc(q) if p.rounding == "rz" else np.rint(q)  # np.rint: ties to even
    res = np.ldexp(r, top - m)
    largest = (2.0 - 2.0 ** -m) * 2.0 ** spec.emax
    over = res > largest
    res = np.where(over, largest if p.overflow == "satfinite" else np.inf, res)
    res = np.where(mag > 0, res, 0.0)
    res = np.where(np.isinf(v), np.inf, res)
    res = np.where((v < 0) & (res > 0), -res, res)  # copy the sign; zero stays +0
    out = res.astype(np.float32 if p.acc == "f32" else np.float16)
    ubits = out.view(np.uint32 if p.acc == "f32" else np.uint16)
    ubits[np.isnan(v)] = p.nan_bits
    return out


def fdpa(a, b, c, p: AccumParams, fmt_a: Union[str, FormatSpec],
         fmt_b: Union[str, FormatSpec]) -> np.ndarray:
    """Fused dot product with truncated alignment: ``d = sum_k a_k b_k + c`` of one
    wgmma, readable float64 formula (slow reference of :func:`fdpa_chain`).

    ``a``, ``b``: exact values (any float dtype) of shape (..., K) in formats ``fmt_a``,
    ``fmt_b`` (their smallest normal exponents place the subnormals); ``c``: values of
    shape (...) in the accumulator format.  Returns a float32/float16 array (...).
    Every step is exact in float64: significands have at most 24 bits, scalings are
    by powers of two within float64 range, and the integer terms sum below 2**53.
    """
    fa, fb, fc = format_spec(fmt_a), format_spec(fmt_b), p.acc_spec
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        # special values: float64 IEEE arithmetic of the exact terms has the rule built in
        # (NaN from NaN, Inf*0, Inf-Inf; otherwise the signed Inf).  No finite overflow:
        # every finite term is below 2**260.
        special = np.sum(a * b, axis=-1) + c
    bad = ~np.isfinite(special)
    fin = lambda x: np.where(np.isfinite(x), x, 0.0)  # noqa: E731
    sa, ea = significand_exponent(fin(a), fa.emin)
    sb, eb = significand_exponent(fin(b), fb.emin)
    sc, ec = significand_exponent(fin(c), fc.emin)
    s = np.concatenate([sa * sb, sc[..., None]], axis=-1)  # exact products, not renormalised
    e = np.concatenate([ea + eb, ec[..., None]], axis=-1)
    e = np.where(s == 0, p.e_zero, e)
    e_max = e.max(axis=-1, keepdims=True)
    terms = np.trunc(np.ldexp(s, e - e_max + p.F))  # integers, |t| < 2**(F+2)
    total = terms.sum(axis=-1)
    out = round_result(np.ldexp(total, e_max[..., 0] - p.F), p)
    out[bad] = special[bad]
    u = out.view(np.uint32 if p.acc == "f32" else np.uint16)
    u[np.isnan(special)] = p.nan_bits
    return out


# ----------------------------------------------------------------------------- operand decoding

CLS_FINITE, CLS_ZERO, CLS_PINF, CLS_NINF, CLS_NAN = 0, 1, 2, 3, 4
from .fdpa_special import BIG, _acc_value, _special_bits  # noqa: E402,F401 (BIG: the exponent placeholder)

#: the float kernel (refmodel.numerics.fdpa_fast registers its run_chain here when it is imported, which
#: refmodel.numerics does: the fast kernel sits above this module, never imported by it)
_FAST_KERNEL: dict = {}


@dataclass
class Decoded:
    """An operand as the kernels read it, shape (P, K, Q) (A: (R, K, 1), B: (NB, K, N)):
    signed integer significand ``sig`` (value = sig * 2**(exp - mbits)), ``exp`` (-BIG
    for zero and special values), ``cls`` (CLS_*), and per block of ``kblk`` along K
    (shape (P, K/kblk, Q)) whether any element is zero (``any_zero``) or NaN/Inf
    (``any_special``).  ``spec``: the operand's format, when known (lets the fast kernel
    hold values in float32)."""

    sig: np.ndarray
    exp: np.ndarray
    cls: np.ndarray
    mbits: int
    any_zero: np.ndarray
    any_special: np.ndarray
    spec: Optional[FormatSpec] = None


def decode_table(spec: FormatSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sig int16, exp int16, cls int8) of every code of ``spec`` (at most 19 bits): the
    readable per-code decoding the kernels look up."""
    key = (spec.ebits, spec.mbits, spec.ieee_specials)
    if key in _TABLES:
        return _TABLES[key]
    c = np.arange(1 << spec.bits, dtype=np.int64)
    sign = (c >> (spec.ebits + spec.mbits)) & 1
    E = (c >> spec.mbits) & ((1 << spec.ebits) - 1)
    M = c & ((1 << spec.mbits) - 1)
    allones = E == (1 << spec.ebits) - 1
    if spec.ieee_specials:
        nan, inf = allones & (M != 0), allones & (M == 0)
    else:  # e4m3: only S.1111.111 is NaN, no Inf
        nan, inf = allones & (M == (1 << spec.mbits) - 1), np.zeros(c.shape, bool)
    sig = np.where(E > 0, M | (1 << spec.mbits), M)  # implicit bit for normals
    exp = np.where(E > 0, E - spec.bias, spec.emin)  # subnormals keep emin, sig < 2**mbits
    zero = (sig == 0) & ~nan & ~inf
    cls = np.full(c.shape, CLS_FINITE, dtype=np.int8)
    cls[zero] = CLS_ZERO
    cls[inf & (sign == 0)] = CLS_PINF
    cls[inf & (sign == 1)] = CLS_NINF
    cls[nan] = CLS_NAN
    dead = zero | nan | inf
    sig = np.where(dead, 0, np.where(sign == 1, -sig, sig)).astype(np.int16)
    exp = np.where(dead, -BIG, exp).astype(np.int16)
    _TABLES[key] = (sig, exp, cls)
    return _TABLES[key]


_TABLES: dict = {}


@numba.njit(cache=True, nogil=True)
def _decode_kernel(lo_pb, hi_pb, codes, tsig, texp, tcls, kblk, sig, exp, cls, anyz, anys):
    P, K, Q = codes.shape
    nblk = K // kblk
    c2 = codes.reshape(P, K * Q)  # a block of one row of P is contiguous: kblk * Q elements
    s2 = sig.reshape(P, K * Q)
    e2 = exp.reshape(P, K * Q)
    k2 = cls.reshape(P, K * Q)
    n = kblk * Q
    for pb in range(lo_pb, hi_pb):
        pi = pb // nblk
        blk = pb % nblk
        lo = blk * n
        cs = c2[pi, lo:lo + n]  # slices: loops from 0 carry no negative-index checks
        ss = s2[pi, lo:lo + n]
        es = e2[pi, lo:lo + n]
        ks = k2[pi, lo:lo + n]
        for i in range(n):
            cd = cs[i]
            ss[i] = tsig[cd]
            es[i] = texp[cd]
            ks[i] = tcls[cd]
        az = anyz[pi, blk]
        asp = anys[pi, blk]
        if Q == 1:
            z = False
            sp = False
            for i in range(n):
                z |= ks[i] == 1
                sp |= ks[i] >= 2
            az[0] = z
            asp[0] = sp
        else:
            for q in range(Q):
                az[q] = False
                asp[q] = False
            for k in range(kblk):
                row = ks[k * Q:(k + 1) * Q]
                for q in range(Q):
                    az[q] |= row[q] == 1
                    asp[q] |= row[q] >= 2


def _decoded_buffers(P: int, K: int, Q: int, kblk: int) -> tuple[np.ndarray, ...]:
    """Empty (sig, exp, cls, any_zero, any_special) of a (P, K, Q) :class:`Decoded`."""
    return (np.empty((P, K, Q), np.int16), np.empty((P, K, Q), np.int16), np.empty((P, K, Q), np.int8),
            np.empty((P, K // kblk, Q), np.bool_), np.empty((P, K // kblk, Q), np.bool_))


def decode_operand(codes: np.ndarray, spec: FormatSpec, *, kblk: int) -> Decoded:
    """Decode integer codes of ``spec`` (e4m3, e5m2, f16, bf16, tf32), shape (P, K, Q),
    for the kernels via :func:`decode_table`; block flags over ``kblk`` along K."""
    codes = np.ascontiguousarray(codes)
    if codes.ndim != 3:
        raise InputError(f"codes must have shape (P, K, Q), got {codes.shape}")
    if codes.dtype.kind != "u":
        codes = codes.astype(np.uint32)
    if not codes.flags.writeable:      # a read-only array is another type to numba: one more compile
        codes = codes.copy()
    P, K, Q = codes.shape
    tsig, texp, tcls = decode_table(spec)
    sig, exp, cls, anyz, anys = _decoded_buffers(P, K, Q, kblk)
    parallel_ranges(_decode_kernel, P * (K // kblk), codes, tsig, texp, tcls, kblk, sig, exp, cls, anyz, anys,
                    work=codes.size)
    return Decoded(sig, exp, cls, spec.mbits, anyz, anys, spec)


@dataclass
class RowGathered:
    """A B operand whose rows differ from one row of A to the next, held without copying them:
    term k of A's row r multiplies B's row ``rows[r, k]`` of ``base`` (decoded, shape (1, rows, N)).
    ``any_zero`` / ``any_special`` (R, K/kblk, N) are each row's block flags over its own terms.
    :func:`fdpa_chain`'s fast kernel reads B's rows through ``rows``; :meth:`materialise` builds the
    (R, K, N) operand the other kernels take.  Built by :func:`gather_rows`."""

    base: Decoded
    rows: np.ndarray
    any_zero: np.ndarray
    any_special: np.ndarray
    kblk: int

    @property
    def mbits(self) -> int:
        return self.base.mbits

    @property
    def spec(self) -> Optional[FormatSpec]:
        return self.base.spec

    def materialise(self) -> Decoded:
        """The (R, K, N) Decoded operand: row r's term k is B's row ``rows[r, k]``."""
        b = self.base
        return Decoded(b.sig[0][self.rows], b.exp[0][self.rows], b.cls[0][self.rows], b.mbits,
                       self.any_zero, self.any_special, b.spec)


@numba.njit(cache=True, nogil=True)
def _row_flags_kernel(lo_pb, hi_pb, bcls, rows, kblk, anyz, anys):
    """Blocks ``lo_pb .. hi_pb`` of a row-gathered operand's flags: whether any of row p's terms
    in the block meets a zero (class 1) or NaN / Inf (class >= 2) of B's row ``rows[p, k]``."""
    P, K = rows.shape
    N = bcls.shape[1]
    nblk = K // kblk
    for pb in range(lo_pb, hi_pb):
        pi = pb // nblk
        blk = pb % nblk
        az = anyz[pi, blk]
        asp = anys[pi, blk]
        for q in range(N):
            az[q] = False
            asp[q] = False
        for k in range(blk * kblk, (blk + 1) * kblk):
            rc = bcls[rows[pi, k]]
            for q in range(N):
                az[q] |= rc[q] == 1
                asp[q] |= rc[q] >= 2


def gather_rows(codes: np.ndarray, pos: np.ndarray, zero_code: int, spec: FormatSpec, *,
                kblk: int) -> RowGathered:
    """The operand ``g`` (P, Kc, Q) with ``g[p, k] = codes[pos[p, k]]`` (a row of ``codes``, shape
    (K, Q)) and ``zero_code`` where ``pos[p, k] < 0`` — a sparse operand's rows of B picked by each
    row's kept positions — as a :class:`RowGathered`: ``codes`` decoded once (with a row of
    ``zero_code`` after its last), the gathered rows never copied."""
    codes = np.ascontiguousarray(codes)
    if codes.ndim != 2:
        raise InputError(f"codes must have shape (K, Q), got {codes.shape}")
    if codes.dtype.kind != "u":
        codes = codes.astype(np.uint32)
    pos = np.asarray(pos)
    if pos.ndim != 2:
        raise InputError(f"pos must have shape (P, Kc), got {pos.shape}")
    P, Kc = pos.shape
    K, Q = codes.shape
    if Kc % kblk:
        raise InputError(f"the gathered K ({Kc}) must be a multiple of kblk ({kblk})")
    if pos.size and pos.max(initial=-1) >= K:
        raise InputError(f"pos must index the {K} rows of codes, got {int(pos.max())}")
    ext = np.empty((K + 1, Q), codes.dtype)
    ext[:K] = codes
    ext[K] = zero_code
    base = decode_operand(ext[None], spec, kblk=K + 1)
    rows = np.where(pos < 0, K, pos).astype(np.int32)
    anyz = np.empty((P, Kc // kblk, Q), np.bool_)
    anys = np.empty((P, Kc // kblk, Q), np.bool_)
    parallel_ranges(_row_flags_kernel, P * (Kc // kblk), base.cls[0], rows, kblk, anyz, anys, work=P * Kc * Q)
    return RowGathered(base, rows, anyz, anys, kblk)


# ----------------------------------------------------------------------------- float32 promotion (promotion.py)

from .promotion import (PROMOTE_OPS, _add_round_odd, _split, _two_prod, _two_sum, add_f32,  # noqa: E402,F401
                        canonical_nan_f32, fma_f32, promote, promote_one)


# ----------------------------------------------------------------------------- numba kernel


@numba.njit(cache=True, nogil=True)
def _chain_kernel(r_lo, r_hi, SA, EA, CA, AZ, AS, SB, EB, CB, BZ, BS, BSany, rows_per_b, kblk, blk0, nblk,
                  cbits, out, scratch, F, Lp, Ln, e_zero, acc_e, acc_m, rnd_m, rz, sat,
                  nan_bits, stage_nblk, scale_rows, scale_cols, op, accf):
    """``nblk`` chained fused dot products of ``kblk`` terms, blocks blk0.. of K.

    SA/EA/CA (R, K, 1): A significands, exponents, classes; AZ/AS (R, K/kblk, 1) block
    flags; SB/EB/CB (NB, K, N), BZ/BS (NB, K/kblk, N) likewise for B, BSany (NB, K/kblk)
    whether a block of B holds any special value; row r uses B[r // rows_per_b].
    cbits (R, N): C as accumulator bits; out (R, N) receives D's bits.
    scratch (R, N): int32 or int64 sum buffers (int32 when the sum provably fits).
    Lp / Ln: left / right shift that turns a product significand into F fraction bits.

    Promotion (``stage_nblk`` > 0): every ``stage_nblk`` blocks form a stage started with
    C = +0; at its end D is added into the float32 accumulator ``accf`` (R, N) with
    scale_rows[stage, r] * scale_cols[stage, j] under promote op ``op`` (see
    :func:`promote_one`).  Rows ``r_lo .. r_hi``: :func:`refmodel._parallel.parallel_ranges` runs
    ranges of rows on several threads.

    The loops over N are branch-free so that LLVM vectorises them; NaN/Inf blocks are
    redone by a scalar fix-up.
    """
    R = SA.shape[0]
    N = SB.shape[2]
    bias = (1 << (acc_e - 1)) - 1
    emask = (1 << acc_e) - 1
    mmask = (np.int64(1) << acc_m) - 1
    hidden = np.int64(1) << acc_m
    pad = acc_m - rnd_m
    signpos = acc_e + acc_m
    demin = 2 - (1 << (acc_e - 1))
    maxc = (np.int64((1 << acc_e) - 2) << rnd_m) | ((np.int64(1) << rnd_m) - 1)
    ovf = maxc if sat else np.int64(emask) << rnd_m
    sh_c = F - acc_m
    Lp32 = np.int32(Lp)
    Ln32 = np.int32(Ln)
    ez32 = np.int32(e_zero)
    for r in range(r_lo, r_hi):
        nb = r // rows_per_b
        acc = scratch[r]
        cur = out[r]
        emax = np.empty(N, np.int32)
        sc = np.empty(N, np.int64)
        ec = np.empty(N, np.int32)
        sbuf = np.empty(N, np.int64)
        fbuf = np.empty(N, np.float64)
        cprev = np.empty(N, np.int64)
        ibuf = fbuf.view(np.int64)
        for j in range(N):
            cur[j] = cbits[r, j]
        for bi in range(nblk):
            if stage_nblk > 0 and bi % stage_nblk == 0:
                for j in range(N):
                    cur[j] = 0  # each stage starts with scale-d = 0
            blk = blk0 + bi
            k0 = blk * kblk
            k1 = k0 + kblk
            az = AZ[r, blk, 0]
            # decode C (the previous D); e_max starts at its exponent, or e_zero for zero terms
            nspec = 0
            bz = BZ[nb, blk]
            for j in range(N):
                bits = np.int64(cur[j])
                cprev[j] = bits
                E = (bits >> acc_m) & emask
                Mv = bits & mmask
                spec = E == emask
                nspec += spec
                sig = (Mv | hidden) if E > 0 else Mv
                sig = 0 if spec else sig
                sc[j] = -sig if (bits >> signpos) & 1 else sig
                e = np.int32(E - bias) if E > 0 else np.int32(1 - bias)
                ec[j] = e
                e0 = ez32 if sig == 0 else e
                e0 = max(e0, ez32) if (az or bz[j]) else e0
                emax[j] = e0
            # pass 1: largest product exponent per column
            for k in range(k0, k1):
                ea = np.int32(EA[r, k, 0])
                ebk = EB[nb, k]
                for j in range(N):
                    emax[j] = max(emax[j], np.int32(ea + ebk[j]))
            # pass 2: aligned, truncated products summed exactly
            for j in range(N):
                acc[j] = 0
            for k in range(k0, k1):
                sa = np.int32(SA[r, k, 0])
                ea = np.int32(EA[r, k, 0])
                sbk = SB[nb, k]
                ebk = EB[nb, k]
                for j in range(N):
                    p = np.int32(sa * sbk[j])
                    s = np.int32(p >> 31)
                    m = np.int32((p ^ s) - s)
                    d = np.int32(emax[j] - ea - ebk[j] + Ln32)
                    d = np.int32(min(d, np.int32(31)))
                    t = np.int32(np.int32(m << Lp32) >> d)
                    acc[j] += np.int32((t ^ s) - s)
            # C term joins the exact sum
            for j in range(N):
                cs = sc[j]
                cm = -cs if cs < 0 else cs
                sh = np.int64(ec[j] - emax[j] + sh_c)
                t64 = (cm << max(sh, 0)) >> min(max(-sh, 0), 63)
                S = np.int64(acc[j]) + (-t64 if cs < 0 else t64)
                sbuf[j] = S
                fbuf[j] = np.float64(-S if S < 0 else S)  # exact: |S| < 2**40
            # one normalisation and rounding to rnd_m mantissa bits (RZ or RNE), +0 for zero
            for j in range(N):
                S = sbuf[j]
                mag = -S if S < 0 else S
                bl = ((ibuf[j] >> 52) & 0x7FF) - 1022  # bit length of mag (> 0)
                e0 = np.int64(emax[j]) - F
                lg = e0 + bl - 1
                top = max(lg, demin)
                shift = top - rnd_m - e0
                ls = min(max(-shift, 0), 62)
                rs = min(max(shift, 0), 62)
                rr = (mag << ls) >> rs
                if not rz:
                    rem = mag & ((np.int64(1) << rs) - 1)
                    half = (np.int64(1) << rs) >> 1
                    up = (rs > 0) & ((rem > half) | ((rem == half) & ((rr & 1) == 1)))
                    rr += np.int64(up)
                code = ((top - demin) << rnd_m) + rr
                code = ovf if code > maxc else code
                bits = (code << pad) | (np.int64(S < 0) << signpos)
                cur[j] = 0 if rr == 0 else bits
            # NaN / Inf: redo the affected elements
            if AS[r, blk, 0] or BSany[nb, blk] or nspec > 0:
                asp = AS[r, blk, 0]
                bs = BS[nb, blk]
                for j in range(N):
                    cspec = ((cprev[j] >> acc_m) & emask) == emask
                    if asp or bs[j] or cspec:
                        cur[j] = _special_bits(r, nb, k0, k1, j, SA, CA, SB, CB, cprev[j],
                                               acc_e, acc_m, nan_bits)
            if stage_nblk > 0 and (bi + 1) % stage_nblk == 0:
                st = bi // stage_nblk
                sa_r = scale_rows[st, r]
                for j in range(N):
                    part = _acc_value(np.int64(cur[j]), acc_e, acc_m)
                    accf[r, j] = promote_one(accf[r, j], part, sa_r, scale_cols[st, j], op)


#: the kernels :func:`fdpa_chain` can run (bit-identical; "int" is the previous one)
CHAIN_KERNELS = ("fast", "int")


def fdpa_chain(A: Decoded, B: Decoded, c_bits: np.ndarray, p: AccumParams, *, kblk: int,
               rows_per_b: int, blk0: int = 0, nblk: Optional[int] = None,
               promote_nblk: int = 0, scale_rows: Optional[np.ndarray] = None,
               scale_cols: Optional[np.ndarray] = None, promote_op: str = "fma",
               acc_f32: Optional[np.ndarray] = None, kernel: str = "fast") -> np.ndarray:
    """Run ``nblk`` chained fused dot products (blocks of ``kblk`` along K from block
    ``blk0``): D = fdpa(A_blk, B_blk, C) with each D the next C.

    ``A``: decoded (R, K, 1); ``B``: decoded (NB, K, N); ``c_bits`` (R, N): C as unsigned
    accumulator bits.  Returns D's bits (R, N) as uint32.

    With ``promote_nblk`` > 0, every ``promote_nblk`` blocks form a stage that starts
    from C = +0 and ends with ``acc_f32 += scale_rows[stage, :, None] *
    scale_cols[stage, None, :] * D`` (in place, rounding per ``promote_op`` — fma, mul_add,
    fma_exact or fma_row_first, see :func:`promote_one`); ``nblk`` must then be a multiple of ``promote_nblk``.

    ``kernel``: ``"fast"`` (exact float arithmetic that vectorises, see
    :mod:`refmodel.numerics.fdpa_fast`) or ``"int"`` (the integer kernel); bit-identical.
    """
    if kernel not in CHAIN_KERNELS:
        raise InputError(f"kernel must be one of {', '.join(CHAIN_KERNELS)}, got {_describe(kernel)}")
    R, K, _ = A.sig.shape
    if isinstance(B, RowGathered):      # every row its own B: rows_per_b is 1
        if B.rows.shape != (R, K) or B.kblk != kblk or rows_per_b != 1:
            raise InputError(f"a row-gathered B needs rows of shape ({R}, {K}), kblk = {B.kblk} and "
                             f"rows_per_b = 1, got {B.rows.shape}, {kblk} and {rows_per_b}")
        if kernel != "fast":        # only the fast kernel reads rows through the gather
            B = B.materialise()
    N = (B.base if isinstance(B, RowGathered) else B).sig.shape[2]
    if nblk is None:
        nblk = K // kblk - blk0
    L = p.F - A.mbits - B.mbits
    if A.mbits + B.mbits + 2 + max(L, 0) > 31:  # |term| < 2**(mp + 2 + L) must fit int32
        raise InputError(f"F = {p.F} with {A.mbits}+{B.mbits} mantissa bits does not fit "
                         f"the 32-bit term kernel")
    out = np.empty((R, N), dtype=np.uint32)
    cb = np.ascontiguousarray(c_bits, dtype=np.uint32)
    spec = p.acc_spec
    stage_nblk = int(promote_nblk)
    if stage_nblk > 0:
        if nblk % stage_nblk:
            raise InputError(f"nblk = {nblk} must be a multiple of promote_nblk = {stage_nblk}")
        if acc_f32 is None or acc_f32.dtype != np.float32 or acc_f32.shape != (R, N) \
                or not acc_f32.flags.c_contiguous:
            raise InputError(f"acc_f32 must be a C-contiguous float32 array of shape ({R}, {N})")
        nst = nblk // stage_nblk
        # copies, writeable: a read-only broadcast view is another numba type (a second compile)
        scale_rows = np.array(np.broadcast_to(
            np.ones((nst, R), np.float32) if scale_rows is None else scale_rows, (nst, R)), np.float32)
        scale_cols = np.array(np.broadcast_to(
            np.ones((nst, N), np.float32) if scale_cols is None else scale_cols, (nst, N)), np.float32)
        accf = acc_f32
    else:
        scale_rows = scale_cols = np.ones((1, 1), np.float32)
        accf = np.zeros((1, 1), np.float32)
    op = PROMOTE_OPS.index(promote_op) if promote_op in PROMOTE_OPS else -1
    if op < 0:
        raise InputError(f"promote_op must be one of {', '.join(PROMOTE_OPS)}, got {_describe(promote_op)}")
    if kernel == "fast":
        run_chain = _FAST_KERNEL["run_chain"]   # registered by refmodel.numerics.fdpa_fast at import
        run_chain(A, B, rows_per_b, kblk, blk0, nblk, cb, out, p, stage_nblk, scale_rows,
                  scale_cols, op, accf)
        return out
    wide = p.F + 2 + int(np.ceil(np.log2(kblk + 1))) > 30
    scratch = np.empty((R, N), dtype=np.int64 if wide else np.int32)
    parallel_ranges(_chain_kernel, R, A.sig, A.exp, A.cls, A.any_zero, A.any_special,
                    B.sig, B.exp, B.cls, B.any_zero, B.any_special,
                    np.ascontiguousarray(B.any_special.any(axis=2)),
                    rows_per_b, kblk, blk0, nblk, cb, out, scratch,
                    p.F, max(L, 0), max(-L, 0), p.e_zero, spec.ebits, spec.mbits,
                    p.round_mbits, p.rounding == "rz", p.overflow == "satfinite", p.nan_bits,
                    stage_nblk, scale_rows, scale_cols, op, accf, work=R * N * nblk * kblk)
    return out


# ----------------------------------------------------------------------------- integer


@numba.njit(cache=True, nogil=True)
def _int_chain_kernel(r_lo, r_hi, A, B, rows_per_b, kblk, nblk, c, clamp, out):
    R, K = A.shape
    N = B.shape[2]
    for r in range(r_lo, r_hi):
        nb = r // rows_per_b
        acc = np.empty(N, np.int64)
        for j in range(N):
            acc[j] = c[r, j]
        for bi in range(nblk):
            for k in range(bi * kblk, (bi + 1) * kblk):
                a = np.int64(A[r, k])
                bk = B[nb, k]
                for j in range(N):
                    acc[j] += a * bk[j]
            for j in range(N):
                v = acc[j]
                if clamp:
                    v = min(max(v, -2147483648), 2147483647)
                else:
                    v = ((v + 2147483648) & 0xFFFFFFFF) - 2147483648
                acc[j] = v
        for j in range(N):
            out[r, j] = acc[j]


def int_dot_chain(a: np.ndarray, b: np.ndarray, c: np.ndarray, clamp: bool, *, kblk: int,
                  rows_per_b: int) -> np.ndarray:
    """Chained exact integer dot products: a (R, K), b (NB, K, N), c (R, N) int32; each
    block of ``kblk`` along K adds into the previous result, then wraps to 32 bits or
    clamps to int32.  Returns int32 (R, N)."""
    R, K = a.shape
    out = np.empty((R, b.shape[2]), dtype=np.int32)
    parallel_ranges(_int_chain_kernel, R, np.ascontiguousarray(a, dtype=np.int32),
                    np.ascontiguousarray(b, dtype=np.int32), rows_per_b, kblk,
                    K // kblk, np.ascontiguousarray(c, dtype=np.int64), bool(clamp), out, work=R * K * b.shape[2])
    return out


def int_dot(a, b, c, clamp: bool) -> np.ndarray:
    """Readable formula of one integer wgmma: exact int64 dot product (..., K) plus c,
    then wrap mod 2**32 or clamp to int32."""
    v = np.sum(np.asarray(a, np.int64) * np.asarray(b, np.int64), axis=-1) + np.asarray(c, np.int64)
    if clamp:
        return np.clip(v, -2 ** 31, 2 ** 31 - 1).astype(np.int32)
    return v.astype(np.uint64).astype(np.uint32).view(np.int32)  # two's complement wrap
