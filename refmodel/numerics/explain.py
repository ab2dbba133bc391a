"""One output element of one floating-point wgmma, explained step by step.

``explain_dot(a, b, c, dtype_ab="e4m3", dtype_d="f32")`` computes ``d = sum_k a_k b_k + c``
the way the accumulator of :mod:`refmodel.numerics.accumulate` does — but with formulas of
its own, on Python integers, keeping every intermediate a teacher wants to show:

1. each input is decoded from its bits: ``x = (-1)**s * sig * 2**(e - mbits)`` with the
   implicit bit for normals, and ``e = emin``, no implicit bit, for subnormals;
2. each product is exact: ``sig_a * sig_b`` with ``mbits_a + mbits_b`` fraction bits and
   exponent ``e_a + e_b`` (not renormalised); C is one more term; a zero term takes the
   exponent ``e_zero`` of the binding row;
3. ``e_max`` = the largest term exponent; every term keeps its bits of weight
   ``2**(e_max - F)`` and above (the *window*: F fraction bits below ``2**e_max``, plus the two
   integer bits a product in [0, 4) can have) — the bits below are **cut** (truncation toward
   zero of the magnitude, the sign applied after);
4. the kept integers are summed exactly (units ``2**(e_max - F)``); the sum is normalised once
   and rounded once (RZ or RNE to ``round_mbits`` mantissa bits, subnormals at the
   accumulator's emin, overflow to Inf or the largest finite value), written in the
   accumulator's bits; an exact zero is +0.

Special values take another path, and the explanation says so instead of aligning: a NaN
input, Inf * 0, or +Inf and -Inf among the terms give the canonical NaN; otherwise an Inf
term gives that signed Inf.

Worked example (the doc's case, e4m3 inputs, f32 accumulator, F = 13): C = 1 + 2**-20,
A = 0.  The products are zero (exponent e_zero = -133), so e_max = 0 (C's); C's 24-bit
significand keeps its bits down to 2**-13 and loses the 2**-20 bit: the sum is
8192 * 2**-13 = 1.0, and D = 1.0 (0x3F800000), not C.

Nothing here calls the accumulator; tests/test_pictures_new.py holds the result bits equal
to :func:`refmodel.numerics.accumulate.fdpa` and to the numba kernel behind
:func:`refmodel.numerics.wgmma.wgmma` on thousands of random and adversarial rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Optional, Sequence

import numpy as np

from ..dtypes import bits_of, element_dtype
from ..errors import InputError
from ..validate import excerpt
from .accumulate import BINDING, AccumParams, tf32_spec
from .formats import BF16, E4M3, E5M2, F16, F32, FormatSpec

AB_TYPES = ("e4m3", "e5m2", "f16", "bf16", "tf32")
D_TYPES = ("f32", "f16")
K_OF = {"e4m3": 32, "e5m2": 32, "f16": 16, "bf16": 16, "tf32": 8}
FAMILY = {"e4m3": "fp8", "e5m2": "fp8", "f16": "f16", "bf16": "bf16", "tf32": "tf32"}
_SPEC = {"e4m3": E4M3, "e5m2": E5M2, "f16": F16, "bf16": BF16, "f32": F32}

#: the doc's case (docs/accumulator.md, "C loses its low bits even when A·B = 0")
DOC_CASE = {"a": (0.0,), "b": (1.0,), "c": 1.0 + 2.0 ** -20, "dtype_ab": "e4m3", "dtype_d": "f32"}


@dataclass(frozen=True)
class Operand:
    """One decoded input: its bits (tf32: the 19-bit code the tensor core reads), class
    ('finite', 'zero', '+inf', '-inf', 'nan'), sign, integer significand ``sig`` and exponent
    ``exp`` with value = (-1)**sign * sig * 2**(exp - mbits)."""

    bits: int
    cls: str
    sign: int
    sig: int
    exp: int
    mbits: int
    value: float
    given: float        # the value the caller passed (before any rounding to the format)


@dataclass(frozen=True)
class Term:
    """One term of the fused sum.  The magnitude is ``mag * 2**lsb`` (``mag`` an integer);
    ``exp`` is the exponent it aligns with (the product's e_a + e_b, C's exponent, or e_zero
    for a zero term); ``shift = e_max - exp``.  ``kept`` (signed) is the truncated term in units
    of ``2**(e_max - F)``; ``cut`` the magnitude of the bits below the window in units of
    ``2**lsb`` (``cut_bits`` positions of them)."""

    name: str
    value: float
    sign: int
    mag: int
    lsb: int
    exp: int
    zero: bool
    padding: bool
    shift: int
    kept: int
    cut: int
    cut_bits: int

    def bit(self, weight: int) -> int:
        """Bit of the magnitude with value 2**weight (0 outside the significand)."""
        i = weight - self.lsb
        return (self.mag >> i) & 1 if i >= 0 else 0

    @property
    def top(self) -> int:
        """Weight of the leading one bit (lsb - 1 for a zero term)."""
        return self.lsb + self.mag.bit_length() - 1

    @property
    def cut_value(self) -> float:
        return float(Fraction(self.cut) * Fraction(2) ** self.lsb) if self.cut else 0.0


@dataclass(frozen=True)
class Rounding:
    """The final normalisation and rounding of the sum: ``lead`` = weight of the sum's
    leading bit, ``top`` = exponent of the result (at least the accumulator's emin),
    ``mant`` the kept significand (``mbits`` fraction bits, ``mbits + 1`` with the implicit
    bit), ``dropped`` how many low bits of the sum fall below it, ``rounded_up`` (RNE),
    ``subnormal``, ``overflow``, ``carried`` (the rounding carried into the next exponent)."""

    mode: str
    mbits: int
    lead: int
    top: int
    mant: int
    dropped: int
    dropped_value: int
    rounded_up: bool
    subnormal: bool
    overflow: bool
    carried: bool = False      # rounding up carried into the next power of two (top grew by one)


@dataclass
class DotExplanation:
    """Every step of one output element ``d = sum_k a_k b_k + c`` of one wgmma."""

    dtype_a: str
    dtype_b: str
    dtype_d: str
    k: int
    given: int                       # how many products the caller gave (the rest: 0 * 0)
    F: int                           # fraction bits of the window below 2**e_max
    e_zero: int
    round_mbits: int
    rounding: str
    overflow_mode: str
    a: list[Operand]
    b: list[Operand]
    c: Operand
    special: Optional[str]           # None, or why the special path decides
    terms: list[Term] = field(default_factory=list)
    e_max: Optional[int] = None
    total: Optional[int] = None      # sum of the kept terms, units 2**(e_max - F)
    exact: Optional[Fraction] = None  # the exact sum of the terms
    round: Optional[Rounding] = None
    result_bits: int = 0
    result: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def window(self) -> tuple[int, int]:
        """(highest, lowest) bit weight a term keeps: 2**(e_max + 1) .. 2**(e_max - F)."""
        return self.e_max + 1, self.e_max - self.F

    @property
    def window_width(self) -> int:
        """Bit positions a term keeps: the two integer bits of a product in [0, 4) and F fraction bits."""
        return self.F + 2

    @property
    def instr(self) -> str:
        return f"wgmma.mma_async.sync.aligned.m64n8k{self.k}.{self.dtype_d}.{self.dtype_a}.{self.dtype_b}"

    @property
    def truncated(self) -> Fraction:
        """The exact value of the kept sum (before the final rounding)."""
        return Fraction(self.total) * Fraction(2) ** (self.e_max - self.F)

    @property
    def result_hex(self) -> str:
        return f"0x{self.result_bits:0{8 if self.dtype_d == 'f32' else 4}X}"


# ----------------------------------------------------------------------------- decoding

def _operand_spec(dtype: str, p: AccumParams) -> FormatSpec:
    return tf32_spec(p.tf32_ignored_bits) if dtype == "tf32" else _SPEC[dtype]


def _decode(code: int, spec: FormatSpec, given: float) -> Operand:
    """Decode one code of ``spec`` (written out here, independently of the kernels' tables)."""
    sign = (code >> (spec.ebits + spec.mbits)) & 1
    e_field = (code >> spec.mbits) & ((1 << spec.ebits) - 1)
    m_field = code & ((1 << spec.mbits) - 1)
    all_ones = e_field == (1 << spec.ebits) - 1
    if spec.ieee_specials and all_ones:
        cls = "nan" if m_field else ("-inf" if sign else "+inf")
    elif not spec.ieee_specials and all_ones and m_field == (1 << spec.mbits) - 1:
        cls = "nan"
    else:
        cls = "finite"
    if cls != "finite":
        value = math.nan if cls == "nan" else (-math.inf if sign else math.inf)
        return Operand(code, cls, sign, 0, 0, spec.mbits, value, given)
    if e_field:
        sig, exp = m_field | (1 << spec.mbits), e_field - spec.bias
    else:
        sig, exp = m_field, 1 - spec.bias          # subnormal: the minimum exponent, no implicit bit
    value = (-1.0) ** sign * math.ldexp(sig, exp - spec.mbits)
    return Operand(code, "zero" if sig == 0 else "finite", sign, sig, exp, spec.mbits, value, given)


def _typed(values, dtype: str, what: str) -> np.ndarray:
    """Values as a typed array of ``dtype``: a numpy array of the element dtype is taken as
    is; numbers are rounded to the format (RNE) and refused when out of its range."""
    dt = element_dtype(dtype)
    if isinstance(values, np.ndarray) and values.dtype == dt:
        return values.reshape(-1)
    try:
        x = np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be numbers, got {excerpt(values)}") from None
    spec = F32 if dtype == "tf32" else _SPEC[dtype]
    with np.errstate(all="ignore"):
        y = x.astype(dt)
    for i, (v, w) in enumerate(zip(x, y.astype(np.float64))):
        if np.isinf(v) and not spec.ieee_specials:
            raise InputError(f"{what}[{i}] = {float(v)}: {dtype} has no infinity (its only special value is NaN)")
        if np.isfinite(v) and not np.isfinite(w):
            raise InputError(f"{what}[{i}] = {float(v)!r} is outside the {dtype} range "
                             f"(largest finite value {spec.max:g})")
    return y


def _given(values, typed: np.ndarray, dtype: str) -> list[float]:
    """The values as the caller wrote them (a typed array: its own values)."""
    if isinstance(values, np.ndarray) and values.dtype == element_dtype(dtype):
        with np.errstate(invalid="ignore"):
            return [float(v) for v in typed.astype(np.float64)]
    return [float(v) for v in np.asarray(values, dtype=np.float64).reshape(-1)]


def _codes(x: np.ndarray, dtype: str, p: AccumParams) -> list[int]:
    """Integer codes as the tensor core reads them (tf32: the f32 container's top 19 bits)."""
    b = bits_of(x).astype(np.int64)
    if dtype == "tf32":
        b = b >> p.tf32_ignored_bits
    return [int(v) for v in b]


# ----------------------------------------------------------------------------- the steps

def _special(ex: DotExplanation) -> Optional[tuple[str, str]]:
    """(kind, reason) of the special path, kind 'nan' / '+inf' / '-inf'; None if all finite."""
    nan, pinf, ninf = [], [], []
    for k, (x, y) in enumerate(zip(ex.a, ex.b)):
        if "nan" in (x.cls, y.cls):
            nan.append(f"a{k} or b{k} is NaN")
        elif x.cls in ("+inf", "-inf") or y.cls in ("+inf", "-inf"):
            if "zero" in (x.cls, y.cls):
                nan.append(f"a{k}·b{k} is Inf·0")
            else:
                (ninf if x.sign ^ y.sign else pinf).append(f"a{k}·b{k}")
    if ex.c.cls == "nan":
        nan.append("c is NaN")
    elif ex.c.cls in ("+inf", "-inf"):
        (ninf if ex.c.sign else pinf).append("c")
    if nan:
        return "nan", "; ".join(nan[:3]) + (" ..." if len(nan) > 3 else "")
    if pinf and ninf:
        return "nan", f"+Inf ({pinf[0]}) and -Inf ({ninf[0]}) among the terms"
    if pinf or ninf:
        return ("+inf" if pinf else "-inf"), f"{(pinf or ninf)[0]} is {'+' if pinf else '-'}Inf"
    return None


def _round(total: int, e0: int, acc: FormatSpec, p: AccumParams) -> tuple[int, Rounding]:
    """Bits of ``total * 2**e0`` rounded once to the accumulator (see the module doc, step 4)."""
    m = p.round_mbits
    sign, mag = int(total < 0), abs(total)
    lead = e0 + mag.bit_length() - 1
    top = max(lead, acc.emin)              # subnormal results keep the minimum exponent
    ulp = top - m                          # weight of the last kept mantissa bit
    dropped = max(0, ulp - e0)
    mant = mag >> dropped if dropped else mag << (e0 - ulp)
    rem = mag & ((1 << dropped) - 1)
    up = False
    if p.rounding == "rne" and dropped:
        half = 1 << (dropped - 1)
        up = rem > half or (rem == half and mant & 1 == 1)
        mant += up
    carried = bool(mant >> (m + 1))
    if carried:                            # 1.11..1 rounded up to 10.00..0
        mant >>= 1
        top += 1
    subnormal = mant < (1 << m)
    overflow = top > acc.emax
    if overflow:
        if p.overflow == "satfinite":
            e_field, m_field = acc.emax + acc.bias, (1 << m) - 1
        else:
            e_field, m_field = (1 << acc.ebits) - 1, 0
    elif subnormal:
        e_field, m_field = 0, mant
    else:
        e_field, m_field = top + acc.bias, mant - (1 << m)
    bits = (sign << (acc.ebits + acc.mbits)) | (e_field << acc.mbits) | (m_field << (acc.mbits - m))
    if mant == 0:                          # below the smallest subnormal: the result is +0
        bits = 0
    return bits, Rounding(p.rounding, m, lead, top, mant, dropped, rem, up, subnormal, overflow, carried)


def _params(dtype_a: str, dtype_b: str, dtype_d: str, params: Optional[AccumParams]) -> AccumParams:
    for name, v, allowed in (("dtype_ab", dtype_a, AB_TYPES), ("dtype_b", dtype_b, AB_TYPES),
                             ("dtype_d", dtype_d, D_TYPES)):
        if not isinstance(v, str) or v not in allowed:
            raise InputError(f"{name} must be one of {', '.join(allowed)}, got {excerpt(v)}")
    if FAMILY[dtype_a] != FAMILY[dtype_b]:
        raise InputError(f"A and B types must be of one family (mixing is only e4m3 with e5m2), "
                         f"got {dtype_a} and {dtype_b}")
    key = (FAMILY[dtype_a], dtype_d)
    if key not in BINDING:
        raise InputError(f"no wgmma takes {dtype_a} inputs with an {dtype_d} accumulator "
                         f"(bf16 and tf32 accumulate in f32)")
    p = BINDING[key] if params is None else params
    if not isinstance(p, AccumParams) or p.acc != dtype_d:
        raise InputError(f"params must be the AccumParams of a {dtype_d} accumulator, got {excerpt(p)}")
    if p.k_group is not None:
        raise InputError(f"explain_dot explains one fused sum: params.k_group must be None, got {p.k_group}")
    return p


def explain_dot(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, c: float | None = None, *,
                dtype_ab: str = "e4m3", dtype_d: str = "f32", dtype_b: Optional[str] = None,
                params: Optional[AccumParams] = None) -> DotExplanation:
    """Explain ``d = sum_k a_k b_k + c`` of one wgmma with ``dtype_ab`` inputs (B: ``dtype_b``,
    default the same) and a ``dtype_d`` accumulator.

    ``a``, ``b``: at most K values each (K = 8 tf32, 16 f16/bf16, 32 e4m3/e5m2), numbers (rounded
    to the format, RNE; tf32: to its f32 container) or typed arrays; missing products are 0·0,
    as in a wgmma whose other K columns hold zeros.  ``c``: the accumulator value (None: +0).
    ``params``: another binding row to try (default :data:`~.accumulate.BINDING`).
    """
    dtype_b = dtype_ab if dtype_b is None else dtype_b
    p = _params(dtype_ab, dtype_b, dtype_d, params)
    K = K_OF[dtype_ab]
    xa, xb = _typed(a, dtype_ab, "a"), _typed(b, dtype_b, "b")
    if xa.size != xb.size:
        raise InputError(f"a and b must have the same length, got {xa.size} and {xb.size}")
    if not 1 <= xa.size <= K:
        raise InputError(f"a wgmma with {dtype_ab} inputs sums K = {K} products: give 1 to {K} values, "
                         f"got {xa.size}")
    given = xa.size
    ga, gb = _given(a, xa, dtype_ab), _given(b, xb, dtype_b)
    xa = np.concatenate([xa, np.zeros(K - given, xa.dtype)])
    xb = np.concatenate([xb, np.zeros(K - given, xb.dtype)])
    ga += [0.0] * (K - given)
    gb += [0.0] * (K - given)
    c_given = 0.0 if c is None else c
    xc = _typed(c_given, dtype_d, "c")
    if xc.size != 1:
        raise InputError(f"c must be one value, got {xc.size}")
    sa, sb, sc = _operand_spec(dtype_ab, p), _operand_spec(dtype_b, p), _SPEC[dtype_d]
    A = [_decode(code, sa, g) for code, g in zip(_codes(xa, dtype_ab, p), ga)]
    B = [_decode(code, sb, g) for code, g in zip(_codes(xb, dtype_b, p), gb)]
    with np.errstate(invalid="ignore"):
        c_value = float(np.asarray(c_given, dtype=np.float64).reshape(-1)[0])
    C = _decode(_codes(xc, dtype_d, p)[0], sc, c_value)
    ex = DotExplanation(dtype_ab, dtype_b, dtype_d, K, given, p.F, p.e_zero, p.round_mbits, p.rounding,
                        p.overflow, A, B, C, None)
    for name, ops in (("a", A[:given]), ("b", B[:given]), ("c", [C])):
        for i, o in enumerate(ops):
            if o.cls in ("finite", "zero") and o.value != o.given and not math.isnan(o.given):
                where = name if name == "c" else f"{name}{i}"
                fmt = "tf32 (the tensor core drops the f32 container's low bits)" if \
                    (name == "a" and dtype_ab == "tf32") or (name == "b" and dtype_b == "tf32") else \
                    (dtype_d if name == "c" else (dtype_ab if name == "a" else dtype_b))
                ex.notes.append(f"{where} = {o.given!r} is read as {o.value!r} in {fmt}")
    sp = _special(ex)
    if sp is not None:
        kind, why = sp
        ex.special = f"{'canonical NaN' if kind == 'nan' else kind[0] + 'Inf'}: {why}"
        if kind == "nan":
            ex.result_bits = p.nan_bits
        else:
            ex.result_bits = (((1 << sc.ebits) - 1) << sc.mbits) | ((kind == "-inf") << (sc.ebits + sc.mbits))
        ex.result = _value(ex.result_bits, dtype_d)
        return ex
    # step 2: the terms, exact
    raw = []
    for k, (x, y) in enumerate(zip(A, B)):
        mag, frac = x.sig * y.sig, x.mbits + y.mbits
        exp = x.exp + y.exp if mag else p.e_zero
        raw.append((f"a{k}·b{k}", x.sign ^ y.sign, mag, exp, exp - frac, k >= given))
    raw.append(("c", C.sign, C.sig, C.exp if C.sig else p.e_zero, (C.exp if C.sig else p.e_zero) - sc.mbits, False))
    # step 3: align to e_max, keep the window, cut the rest
    e_max = max(r[3] for r in raw)
    floor = e_max - p.F                     # weight of the window's last bit
    terms, exact = [], Fraction(0)
    for name, sign, mag, exp, lsb, pad in raw:
        d = floor - lsb
        kept_mag = mag >> d if d > 0 else mag << -d
        cut = mag & ((1 << d) - 1) if d > 0 else 0
        value = float((-1) ** sign * Fraction(mag) * Fraction(2) ** lsb)
        exact += (-1) ** sign * Fraction(mag) * Fraction(2) ** lsb
        terms.append(Term(name, value, sign, mag, lsb, exp, mag == 0, pad, e_max - exp,
                          -kept_mag if sign else kept_mag, cut, max(0, d) if mag else 0))
    ex.terms, ex.e_max, ex.exact = terms, e_max, exact
    # step 4: the exact sum, one rounding
    ex.total = sum(t.kept for t in terms)
    if ex.total == 0:
        ex.result_bits = 0
        ex.round = None
    else:
        ex.result_bits, ex.round = _round(ex.total, floor, sc, p)
    ex.result = _value(ex.result_bits, dtype_d)
    return ex


def _value(bits: int, dtype_d: str) -> float:
    if dtype_d == "f32":
        return float(np.array([bits], np.uint32).view(np.float32)[0])
    return float(np.array([bits], np.uint16).view(np.float16)[0])


def doc_case() -> DotExplanation:
    """The explanation of docs/accumulator.md's "C = 1 + 2**-20, A = 0 -> 1.0" row."""
    kw = dict(DOC_CASE)
    return explain_dot(kw.pop("a"), kw.pop("b"), kw.pop("c"), **kw)


__all__ = ["explain_dot", "doc_case", "DotExplanation", "Term", "Operand", "Rounding", "AB_TYPES", "D_TYPES",
           "K_OF", "DOC_CASE"]
