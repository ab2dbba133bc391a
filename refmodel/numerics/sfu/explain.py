"""One SFU evaluation, step by step: what ``wgref sfu OP VALUE`` prints.

:func:`trace_mufu` recomputes a MUFU function in plain Python keeping every intermediate value
(the fixed-point operand, segment, coefficients, squarer, polynomial, shift, assembly); the test
suite holds its results equal to the compiled model (:mod:`.mufu`) on random inputs.
:func:`explain` wraps it with the form's SASS sequence and the error against the float64 reference.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import InputError
from . import mufu as M
from .fixed import square17_scalar
from .forms import parse_sfu
from .sequences import SASS
from .tables import EX2, LG2, RCP, RSQRT, SIN, SQRT

_POLY = {  # function -> (table, A shift, C factor, rounding constant, right shift)
    "RCP": (RCP, 13, 1, 0x47E7, 15), "RSQ": (RSQRT, 14, 4, 0x7FFF, 16), "SQRT": (SQRT, 15, 1, 0x7FFF, 17),
    "EX2": (EX2, 13, 1, 0x77E2, 15), "LG2": (LG2, 12, 2, 0x3345, 2), "SIN": (SIN, 11, 1, 0, 0),
}


def _f(bits: int) -> float:
    return float(np.uint32(bits & 0xFFFFFFFF).view(np.float32))


def trace_mufu(fn: str, x: int) -> dict:
    """Intermediate values of MUFU.``fn`` (RCP, RSQ, SQRT, EX2, LG2, SIN, COS, TANH) on float32 bits x."""
    x &= 0xFFFFFFFF
    out = {"function": fn, "x": x}
    s, e, f = x >> 31, (x >> 23) & 0xFF, x & 0x7FFFFF
    compiled = {"RCP": M.mufu_rcp, "RSQ": M.mufu_rsq, "SQRT": M.mufu_sqrt, "EX2": M.mufu_ex2, "LG2": M.mufu_lg2,
                "SIN": lambda v: M.mufu_sincos(v, False), "COS": lambda v: M.mufu_sincos(v, True),
                "TANH": M.mufu_tanh}[fn]
    special = None
    if fn in ("RCP", "RSQ", "SQRT", "LG2") and (e in (0, 255) or (s and fn != "RCP")):
        special = "special operand (zero, subnormal read as zero, Inf, NaN or negative)"
    elif fn == "TANH" and (e < 119 or e >= 130 or (e == 255 and f)):
        special = "|x| < 2^-8 passes through, |x| >= 8 gives +-1, NaN gives 0x7fffffff"
    elif fn in ("SIN", "COS") and e == 255:
        special = "Inf or NaN gives the canonical NaN"
    elif fn == "EX2" and (e == 255 or e - 127 >= 7):
        special = "|x| >= 128, Inf or NaN: +Inf, +0 or NaN"
    if special:
        out.update(special=special, result=int(compiled(x)))
        return out
    if fn in ("SIN", "COS"):
        fx = int(M.revolutions(x))
        q, fr = fx >> 23, fx & 0x7FFFFF
        out["operand"] = f"|r| * 2^25 truncated mod 2^25 = 0x{fx:07x}: quadrant {q}, fraction 0x{fr:06x}"
        if fn == "COS":
            q += 1
        if q & 1:
            fr = ~fr & 0x7FFFFF
            out["mirror"] = "odd quadrant: fraction complemented"
        i, xl = fr >> 17, fr & 0x1FFFF
    elif fn == "TANH":
        nb = int(M._TANH_NB[e - 119])
        row = int(M._TANH_FIRST[e - 119]) + (f >> (23 - nb))
        xl = (f >> (6 - nb)) & 0x1FFFF
        u, a, b, c = (int(v) for v in M._TANH_COEF[row])
        sq = square17_scalar(xl)
        r = (a << 15) + b * xl + c * sq
        out.update(operand=f"binade 2^{e - 127}: {nb} index bits, the next 17 bits x = 0x{xl:05x} "
                   f"(the last {6 - nb} fraction bits unused)", segment=row, coefficients=(a, b, c), sq=sq,
                   sum=f"(A << 15) + B*x + C*sq = {r}, in units of 2^-{u + 15}", result=int(compiled(x)))
        return out
    elif fn == "EX2":
        ue = e - 127
        m = (f | 0x800000) if e else 0
        fx = m << ue if ue >= 0 else (m >> -ue if ue > -32 else 0)
        ip, fr = fx >> 23, fx & 0x7FFFFF
        out["operand"] = f"fixed point 7.23 (truncated): integer {ip}, fraction 0x{fr:06x}, sign {'-' if s else '+'}"
        if s and fr:
            fr = ~fr & 0x7FFFFF
            out["mirror"] = f"negative: exponent {-ip - 1}, fraction complemented (one's complement) 0x{fr:06x}"
        i, xl = fr >> 17, fr & 0x1FFFF
    elif fn in ("RSQ", "SQRT"):
        fp = f | (((e - 127) & 1) << 23)
        out["operand"] = f"exponent parity {(e - 127) & 1}, fraction 0x{f:06x}"
        i, xl = fp >> 17, fp & 0x1FFFF
    elif fn == "RCP":
        fx = f | 0x800000
        i, xl = (fx >> 16) & 0x7F, fx & 0xFFFF
        out["operand"] = f"significand 0x{fx:06x}"
    else:  # LG2
        fx = f | 0x800000
        i, xl = (fx >> 17) & 0x3F, fx & 0x1FFFF
        out["operand"] = f"significand 0x{fx:06x}, exponent {e - 127}"
    table, ash, cmul, k, shift = _POLY["SIN" if fn == "COS" else fn]
    a, b, c = (int(v) for v in table[i])
    sq = square17_scalar(xl << 1 if fn == "RCP" else xl)
    total = (a << ash) + b * xl + cmul * c * sq + k
    out.update(segment=i, x_low=xl, coefficients=(a, b, c), sq=sq,
               sum=f"(A << {ash}) + B*x + {str(cmul) + '*' if cmul > 1 else ''}C*sq(x{'<<1' if fn == 'RCP' else ''})"
               f"{f' + 0x{k:x}' if k else ''} = {total}",
               shifted=(total >> shift) if shift else total, result=int(compiled(x)))
    return out


_REF = {"ex2": lambda x: 2.0 ** x, "lg2": math.log2, "rcp": lambda x: 1.0 / x, "rsqrt": lambda x: 1.0 / math.sqrt(x),
        "sqrt": math.sqrt, "sin": math.sin, "cos": math.cos, "tanh": math.tanh}
_FN = {"ex2": "EX2", "lg2": "LG2", "rcp": "RCP", "rsqrt": "RSQ", "sqrt": "SQRT", "sin": "SIN", "cos": "COS",
       "tanh": "TANH"}


def explain(op: str, x: float | int, y: float | int | None = None) -> dict:
    """The evaluation of one f32 SFU form on one value (``x`` a float, or an int taken as float32
    bits): its SASS sequence, the MUFU trace, the result and its error in ulps against the float64
    reference rounded to float32."""
    from .unit import sfu

    form = parse_sfu(op)
    if form.type != "f32":
        raise InputError(f"wgref sfu explains the f32 forms; {form.instr} works on {form.type}")
    xb = int(x) & 0xFFFFFFFF if isinstance(x, (int, np.integer)) else int(np.float32(x).view(np.uint32))
    res = {"form": form.instr, "sass": SASS[form.instr], "x": xb, "x_value": _f(xb), "bound": form.bound}
    if form.op == "div":
        if y is None:
            raise InputError(f"{form.instr} takes two operands: wgref sfu {form.instr} X Y")
        yb = int(y) & 0xFFFFFFFF if isinstance(y, (int, np.integer)) else int(np.float32(y).view(np.uint32))
        d = int(sfu(form.instr, np.uint32(xb), np.uint32(yb)))
        res.update(y=yb, y_value=_f(yb), trace=trace_mufu("RCP", _mufu_operand(form.instr, yb)), result=d,
                   reference=_ref32(lambda a, b: a / b, _f(xb), _f(yb)))
    else:
        if y is not None:
            raise InputError(f"{form.instr} takes one operand")
        d = int(sfu(form.instr, np.uint32(xb)))
        arg = _mufu_operand(form.instr, xb)
        if form.op in ("sin", "cos"):
            from .bits import fmul_rz
            arg = int(fmul_rz(xb, M.ONE_OVER_TAU))
            res["revolutions"] = _f(arg)
        res.update(trace=trace_mufu(_FN[form.op], arg), result=d, reference=_ref32(_REF[form.op], _f(xb)))
    res["result_value"] = _f(res["result"])
    ref = res["reference"]
    if ref is not None and math.isfinite(_f(ref)) and math.isfinite(res["result_value"]):
        res["error_ulps"] = _ordered(res["result"]) - _ordered(ref)
    return res


def _mufu_operand(instr: str, x: int) -> int:
    """The operand MUFU receives in the form's sequence (after ptxas's scaling of tiny / huge x)."""
    from . import sequences as S
    from .bits import fabs_gt, fabs_lt, fmul, f32

    if instr == "ex2.approx.f32" and f32(x) < -126.0:
        return int(fmul(x, S.HALF))
    if instr in ("lg2.approx.f32", "rsqrt.approx.f32", "sqrt.approx.f32", "div.approx.f32") and fabs_lt(x, S.MIN_NORMAL):
        return int(fmul(x, S.TWO24))
    if instr in ("rcp.approx.f32", "div.full.f32"):
        if fabs_gt(x, S.TWO126):
            return int(fmul(x, S.QUARTER))
        if fabs_lt(x, S.MIN_NORMAL):
            return int(fmul(x, S.TWO24))
    if instr == "div.full.ftz.f32" and fabs_gt(x, S.TWO126):
        return int(S.fmul_ftz(x, S.QUARTER))
    return x


def _ordered(bits: int) -> int:
    return -(bits & 0x7FFFFFFF) if bits >> 31 else bits


def _ref32(fn, *args) -> int | None:
    try:
        with np.errstate(all="ignore"):
            v = np.float32(fn(*args))
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return int(v.view(np.uint32))


def render(res: dict) -> str:
    """Text lines of :func:`explain`'s result."""
    lines = [f"{res['form']}(x = 0x{res['x']:08x} = {res['x_value']!r}"
             + (f", y = 0x{res['y']:08x} = {res['y_value']!r}" if "y" in res else "") + ")",
             f"  SASS: {res['sass']}"]
    if "revolutions" in res:
        lines.append(f"  FMUL.RZ x * 1/(2 pi) = {res['revolutions']!r} revolutions")
    t = res["trace"]
    lines.append(f"  MUFU.{t['function']} of 0x{t['x']:08x}" + (" (the divisor)" if "y" in res else ""))
    if "special" in t:
        lines.append(f"    {t['special']}")
    else:
        for k in ("operand", "mirror"):
            if k in t:
                lines.append(f"    {t[k]}")
        a, b, c = t["coefficients"]
        lines.append(f"    segment {t['segment']}: A = {a}, B = {b}, C = {c}; sq = {t['sq']}")
        lines.append(f"    {t['sum']}" + (f" -> {t['shifted']}" if "shifted" in t else ""))
        lines.append(f"    MUFU result 0x{t['result']:08x} = {_f(t['result'])!r}")
    lines.append(f"  result 0x{res['result']:08x} = {res['result_value']!r}")
    if res.get("reference") is not None:
        err = res.get("error_ulps")
        lines.append(f"  float64 reference rounded to float32: 0x{res['reference']:08x} = {_f(res['reference'])!r}"
                     + (f"; error {err:+d} ulp" if err is not None else ""))
    lines.append(f"  PTX ISA bound: {res['bound']}")
    return "\n".join(lines)
