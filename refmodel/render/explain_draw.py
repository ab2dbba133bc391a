"""Draw a wgmma output element explained (explain-dot): one row of bit boxes per term.

The bits of every term of a :class:`~refmodel.numerics.explain.DotExplanation` sit on a common
scale of bit weights — the window each term keeps (F fraction bits below ``2**e_max``) and the
bits cut below it — then the exact sum of the kept integers and the final rounding.

    from refmodel.numerics.explain import doc_case
    from refmodel.render.explain_draw import render_explain
    render_explain(doc_case(), "svg")

SVG conventions (tests/test_pictures_new.py reads them): the root has ``data-kind="explain-dot"``
and ``data-result`` (the result bits, hex); each term row is ``<g class="term">`` with
``data-name``, ``data-kept`` (signed, units ``2**(e_max - F)``) and ``data-cut-bits``; each bit
box is a ``<rect class="bit win|cut|carry" data-w="WEIGHT" data-b="0|1">``.  The special path
(NaN/Inf) draws no bit boxes: ``<text class="special">`` says why.  Text is 10 px or larger and
every fill is light enough for black text (contrast >= 4.5).
"""

from __future__ import annotations

import html as _html
from fractions import Fraction

from ..errors import InputError
from ..numerics.explain import DotExplanation, Term
from ..validate import excerpt
from .core import Diagram, to_html

SOURCE = ("refmodel.numerics.accumulate (BINDING: the fused, truncated dot product of one wgmma; "
          "MMA-Sim t_fdpa and Khattak & Mikaitis as leads); docs/accumulator.md")
VERIFIED = "verified on the H200: fixtures/wgmma and fixtures/examples"
CUT_MAX = 16          # cut columns drawn at most (the rest is counted in words)

WIN, WIN1 = "#e4eefb", "#a9c9f2"        # window: empty bit / one bit
CUT, CUT1 = "#fbe6e6", "#f0b0b0"        # cut region
CARRY, CARRY1 = "#eeeeee", "#c9c9c9"    # above the window: only the sum reaches there
SUM, SUM1 = "#e2f4e2", "#a6dca6"        # the sum / the kept result bits
DROP, DROP1 = "#fdf0d8", "#f2cf8a"      # bits the final rounding drops
FORMATS = ("ascii", "svg", "html")


def _num(x: float | Fraction) -> str:
    if isinstance(x, Fraction):
        if x.denominator == 1 or abs(x) >= 1e-4:
            return repr(float(x)) if float(x) == x else f"{float(x):.17g} (exactly {_exact(x)})"
        return f"{float(x):.6g}"
    return repr(float(x))


def _exact(x: Fraction) -> str:
    """Exact decimal of a dyadic fraction (finite: the denominator is a power of two)."""
    if x == 0:
        return "0"
    n, d = abs(x.numerator), x.denominator
    k = d.bit_length() - 1
    digits = str(n * 5 ** k)
    if k:
        digits = digits.rjust(k + 1, "0")
        digits = digits[:-k] + "." + digits[-k:]
        digits = digits.rstrip("0").rstrip(".")
    return ("-" if x < 0 else "") + digits


def _pow(w: int) -> str:
    return f"2^{w}"


def _params_text(ex: DotExplanation) -> str:
    fam = {"e4m3": "fp8", "e5m2": "fp8"}.get(ex.dtype_a, ex.dtype_a)
    return (f"BINDING[({fam!r}, {ex.dtype_d!r})]: F = {ex.F}, e_zero = {ex.e_zero}, "
            f"{ex.rounding.upper()} to {ex.round_mbits} mantissa bits"
            + (" (\"e8m13\", stored in an f32)" if ex.dtype_d == "f32" and ex.round_mbits < 23 else ""))


def _operand_text(o) -> str:
    return o.cls.upper() if o.cls in ("nan", "+inf", "-inf") else repr(o.value)


def _inputs(ex: DotExplanation) -> list[str]:
    n = ex.given
    a = ", ".join(_operand_text(o) for o in ex.a[:n])
    b = ", ".join(_operand_text(o) for o in ex.b[:n])
    pad = f"; the other {ex.k - n} products are 0·0" if n < ex.k else ""
    return [f"{ex.dtype_a} x {ex.dtype_b} -> {ex.dtype_d}, K = {ex.k} ({n} product{'s' if n > 1 else ''} given{pad})",
            f"a = [{a}]", f"b = [{b}]",
            f"c = {_operand_text(ex.c)} (bits 0x{ex.c.bits:0{8 if ex.dtype_d == 'f32' else 4}X})"]


def _columns(ex: DotExplanation) -> tuple[int, int, int]:
    """(hi, floor, lo): highest weight drawn, the window's last weight, lowest weight drawn."""
    floor = ex.e_max - ex.F
    hi = ex.e_max + 1
    if ex.total:
        hi = max(hi, floor + abs(ex.total).bit_length() - 1, ex.round.top)
    lows = [t.lsb for t in ex.terms if t.cut]
    lo = max(min(lows), floor - CUT_MAX) if lows else floor
    return hi, floor, lo


def legend(ex: DotExplanation) -> list[tuple[str, str]]:
    """(fill, text) items; the SVG, the html page and the ascii report all show every one."""
    if ex.special:
        return [("", "special path: NaN / Inf decide the result before any alignment"),
                ("", "canonical NaN = 0x7FFFFFFF (f32) / 0x7FFF (f16)")]
    hi, floor, lo = _columns(ex)
    out = [(WIN1, f"window: the bits a term keeps, {_pow(ex.e_max + 1)} .. {_pow(floor)} "
                  f"(F = {ex.F} fraction bits below 2^e_max)")]
    if lo < floor:
        out.append((CUT1, f"cut: bits below {_pow(floor)}, truncated toward zero (each term's magnitude)"))
    if hi > ex.e_max + 1:
        out.append((CARRY1, "carry: above the window, only the exact sum reaches here"))
    out += [(SUM1, "sum of the kept integers, exact; then the bits the final rounding keeps"),
            (DROP1, f"dropped by the final rounding ({ex.rounding.upper()} to {ex.round_mbits} mantissa bits)"),
            ("", "a darker box is a one bit; bits are magnitudes, the sign is applied after truncation"),
            ("", f"zero term: takes part with exponent e_zero = {ex.e_zero}")]
    return out


def _term_row_text(t: Term) -> tuple[str, str, str, str]:
    if t.zero:
        return t.name, "0", f"{t.exp}", f"{t.shift}"
    return t.name, repr(t.value), f"{t.exp}", f"{t.shift}"


def _cut_words(t: Term, lo: int) -> str:
    if not t.cut:
        return ""
    hidden = max(0, lo - t.lsb) if t.mag & ((1 << max(0, lo - t.lsb)) - 1) else 0
    if t.cut & (t.cut - 1) == 0:            # a single bit: name its weight
        return f"cut 2^{t.lsb + t.cut.bit_length() - 1}" + (f" (+{hidden} bits not drawn)" if hidden else "")
    return f"cut {t.cut_value:.6g}" + (f" (+{hidden} bits not drawn)" if hidden else "")


def _rounding_lines(ex: DotExplanation) -> list[str]:
    floor = ex.e_max - ex.F
    if ex.total == 0:
        return [f"sum of the kept terms = 0 -> +0 (0x{0:0{8 if ex.dtype_d == 'f32' else 4}X}): "
                f"an exact zero result is +0"]
    r = ex.round
    lines = [f"sum of the kept terms = {ex.total} x 2^{floor} = {_num(ex.truncated)}",
             f"exact sum of the terms = {_num(ex.exact)}; the cuts lost {_num(ex.exact - ex.truncated)}"]
    top0 = r.top - int(r.carried)
    how = (f"normalise: leading bit 2^{r.lead}, result exponent {top0}"
           + (" (the accumulator's minimum: subnormal)" if r.subnormal else "")
           + f"; keep {r.mbits} mantissa bits (down to 2^{top0 - r.mbits})")
    if r.dropped:
        how += f", drop {r.dropped} bit{'s' if r.dropped > 1 else ''} ({r.mode.upper()}"
        how += (", rounded up" + (f": the carry makes it 2^{r.top}" if r.carried else "") + ")" if r.rounded_up
                else (", rounded down)" if r.mode == "rne" else ": truncated)"))
    lines.append(how)
    if r.mant == 0:
        lines.append("nothing is left above the accumulator's smallest subnormal: the result is +0")
    if r.overflow:
        lines.append("past the largest finite value: " + ("Inf" if ex.overflow_mode == "inf" else
                                                            "the largest finite value (satfinite)"))
    return lines


def _result_line(ex: DotExplanation) -> str:
    return f"D = {ex.result_hex} = {ex.result!r}"


# ----------------------------------------------------------------------------- ascii

def _bits_text(t: Term | None, hi: int, floor: int, lo: int, mag: int = 0, lsb: int = 0) -> str:
    out = []
    for w in range(hi, lo - 1, -1):
        if t is not None:
            inside = not t.zero and t.lsb <= w <= t.top
            b = t.bit(w) if inside else None
        else:
            inside = lsb <= w <= lsb + mag.bit_length() - 1
            b = (mag >> (w - lsb)) & 1 if inside else None
        out.append("." if b is None else str(b))
        if w == floor and w > lo:
            out.append("|")
    return "".join(out)


def to_ascii_lines(ex: DotExplanation) -> list[str]:
    """The plain-text explanation (also the html page's report)."""
    out = [_title(ex), "=" * min(len(_title(ex)), 100), f"mirrors: {SOURCE}", VERIFIED,
           f"numerics: {_params_text(ex)}", ""]
    out += ["inputs: " + _inputs(ex)[0]] + [f"  {s}" for s in _inputs(ex)[1:]]
    out += [f"  note: {n}" for n in ex.notes]
    if ex.special:
        out += ["", f"special path: {ex.special}. No alignment is done: the accumulator's NaN/Inf rule "
                    "decides the result.", _result_line(ex)]
        return out + ["", "legend:"] + [f"  {t}" for _, t in legend(ex)]
    hi, floor, lo = _columns(ex)
    out += ["", f"e_max = {ex.e_max} (largest term exponent); window {_pow(ex.e_max + 1)} .. {_pow(floor)}, "
                f"'|' = the window's end, bits right of it are cut; '.' = no bit of that term"]
    rows = [("term", "value", "exp", "shift", f"bits {_pow(hi)} .. {_pow(lo)}", "kept (x 2^%d)" % floor, "")]
    for t in _shown_terms(ex):
        if t is None:
            pad = ex.k - ex.given
            rows.append((f"{pad} x 0·0", "0", str(ex.e_zero), str(ex.e_max - ex.e_zero),
                         "(padding: zero terms)", "0", ""))
            continue
        name, value, e, s = _term_row_text(t)
        bits = "(zero term)" if t.zero else _bits_text(t, hi, floor, lo)
        rows.append((("-" if t.sign and not t.zero else " ") + name, value, e, s, bits, str(t.kept),
                     _cut_words(t, lo)))
    rows.append(("sum", "", "", "", _bits_text(None, hi, floor, lo, abs(ex.total), floor) if ex.total else "0",
                 str(ex.total), ""))
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    for r in rows:
        out.append("  " + "  ".join(f"{r[i]:<{widths[i]}}" if i in (0, 1, 4) else f"{r[i]:>{widths[i]}}"
                                    for i in range(6)) + (f"  {r[6]}" if r[6] else ""))
    out += [""] + _rounding_lines(ex) + [_result_line(ex), "", "legend:"] + [f"  {t}" for _, t in legend(ex)]
    return out


def _shown_terms(ex: DotExplanation) -> list[Term | None]:
    """The terms drawn: every term the caller gave and C; the 0·0 padding as one row (None)."""
    shown = [t for t in ex.terms if not t.padding]
    if ex.given < ex.k:
        shown.insert(len(shown) - 1, None)
    return shown


def _title(ex: DotExplanation) -> str:
    return f"explain-dot: one output element of {ex.instr}"


def to_ascii(ex: DotExplanation) -> str:
    return "\n".join(to_ascii_lines(ex)).rstrip() + "\n"


# ----------------------------------------------------------------------------- svg

CW, CH = 20, 18        # bit box
FS = 11                # text size (px at 100 %)
CHARW = 0.62 * FS      # monospace advance


def _e(s) -> str:
    return _html.escape(str(s), quote=True)


def to_svg(ex: DotExplanation) -> str:
    """A standalone SVG of the explanation."""
    pad, y = 16, 16
    body: list[str] = []

    def text(x, yy, s, cls="t", extra=""):
        body.append(f'<text x="{x:.1f}" y="{yy:.1f}" class="{cls}"{extra}>{_e(s)}</text>')

    text(pad, y + 16, _title(ex), "title")
    y += 30
    for line in (f"mirrors: {SOURCE}", VERIFIED):
        text(pad, y + 10, line, "src")
        y += 14
    text(pad, y + 10, f"numerics: {_params_text(ex)}", "src")
    y += 24
    for i, s in enumerate(_inputs(ex)):
        text(pad, y + 11, ("inputs: " if i == 0 else "  ") + s)
        y += 16
    for n in ex.notes:
        text(pad, y + 11, f"  note: {n}")
        y += 16
    y += 10
    grid_w = 0
    if ex.special:
        text(pad, y + 14, f"special path: {ex.special}", "special")
        y += 22
        text(pad, y + 11, "No alignment is done: the accumulator's NaN/Inf rule decides the result "
                          "(a NaN input, Inf·0, or +Inf with -Inf give the canonical NaN; otherwise the signed Inf).")
        y += 18
        text(pad, y + 13, _result_line(ex), "res")
        y += 26
    else:
        hi, floor, lo = _columns(ex)
        ncol = hi - lo + 1
        label_cols = [("term", 0), ("value", 9), ("exp", 0), ("shift", 0)]
        shown = _shown_terms(ex)
        cells = []
        for t in shown:
            if t is None:
                cells.append((f"{ex.k - ex.given} x 0·0", "0 (padding)", str(ex.e_zero), str(ex.e_max - ex.e_zero)))
            else:
                n, v, e, s = _term_row_text(t)
                cells.append((("−" if t.sign and not t.zero else "") + n, v, e, s))
        colw = [max(len(h), *(len(c[i]) for c in cells)) * CHARW + 12 for i, (h, _) in enumerate(label_cols)]
        gx = pad + sum(colw)
        right_x = gx + ncol * CW + 16
        # header: bands and weights
        band_y = y
        bands = [(ex.e_max + 1, floor, "window (kept)", WIN1)]
        if lo < floor:
            bands.append((floor - 1, lo, "cut", CUT1))
        if hi > ex.e_max + 1:
            bands.append((hi, ex.e_max + 2, "carry", CARRY1))
        for b_hi, b_lo, name, fill in bands:
            x0 = gx + (hi - b_hi) * CW
            w = (b_hi - b_lo + 1) * CW
            body.append(f'<rect x="{x0:.1f}" y="{band_y:.1f}" width="{w:.1f}" height="16" fill="{fill}" class="band"/>')
            text(x0 + w / 2, band_y + 12, name, "bandt")
        y += 20
        for wgt in range(hi, lo - 1, -1):
            cx = gx + (hi - wgt + .5) * CW + 3.5
            body.append(f'<text x="{cx:.1f}" y="{y + 2:.1f}" class="wt" text-anchor="end" '
                        f'transform="rotate(-90 {cx:.1f} {y + 2:.1f})">{wgt}</text>')
        text(gx - 6, y + 14, "bit weight 2^k, k =", "hd", ' text-anchor="end"')
        y += 30
        x = pad
        for (h, _), w in zip(label_cols, colw):
            text(x, y + 12, h, "hd")
            x += w
        text(right_x, y + 12, f"kept (x 2^{floor})   cut", "hd")
        y += 18
        for t, cell in zip(shown, cells):
            name = "padding" if t is None else t.name
            kept = 0 if t is None else t.kept
            cutb = 0 if t is None else t.cut_bits
            body.append(f'<g class="term" data-name="{_e(name)}" data-kept="{kept}" data-cut-bits="{cutb}">')
            x = pad
            for s, w in zip(cell, colw):
                text(x, y + 13, s, "zt" if (t is None or t.zero) else "t")
                x += w
            if t is None or t.zero:
                text(gx + 4, y + 13, f"zero term: exponent e_zero = {ex.e_zero}, no bits", "zt")
            else:
                for wgt in range(hi, lo - 1, -1):
                    if not t.lsb <= wgt <= t.top:
                        continue
                    region = "win" if floor <= wgt <= ex.e_max + 1 else ("cut" if wgt < floor else "carry")
                    b = t.bit(wgt)
                    fill = {"win": (WIN, WIN1), "cut": (CUT, CUT1), "carry": (CARRY, CARRY1)}[region][b]
                    bx = gx + (hi - wgt) * CW
                    body.append(f'<rect x="{bx:.1f}" y="{y + 1:.1f}" width="{CW}" height="{CH - 2}" fill="{fill}" '
                                f'class="bit {region}" data-w="{wgt}" data-b="{b}"/>')
                    body.append(f'<text x="{bx + CW / 2:.1f}" y="{y + 13:.1f}" class="bt">{b}</text>')
                if t.lsb < lo and t.mag & ((1 << (lo - t.lsb)) - 1):   # one bits beyond the drawn ones
                    text(gx + ncol * CW + 1, y + 13, "…", "t")
            text(right_x, y + 13, f"{kept:+d}" if kept else "0", "t")
            if t is not None:
                text(right_x + 11 * CHARW, y + 13, _cut_words(t, lo), "t")
            body.append("</g>")
            y += CH
        # the window's end: a vertical rule
        fx = gx + (hi - floor + 1) * CW
        body.append(f'<path d="M{fx:.1f} {band_y:.1f}V{y + 2 * CH + 6:.1f}" class="rule"/>')
        body.append(f'<path d="M{pad:.1f} {y + 3:.1f}H{right_x + 30 * CHARW:.1f}" class="sep"/>')
        y += 6
        if ex.total:
            mag = abs(ex.total)
            r = ex.round
            keep_lo = r.top - r.mbits - int(r.carried)    # the last kept bit before any carry
            for row, label in ((0, "sum" + (" (negative)" if ex.total < 0 else "")), (1, "rounded")):
                body.append(f'<g class="{"sum" if row == 0 else "rounded"}">')
                text(pad, y + 13, label, "t")
                top = floor + mag.bit_length() - 1 if row == 0 else max(r.top, floor + mag.bit_length() - 1)
                for wgt in range(top, min(floor, keep_lo) - 1, -1):
                    if wgt < lo or wgt > hi:
                        continue
                    if row == 0 or wgt < keep_lo:      # the sum's bits; in the rounded row, the dropped ones
                        if wgt < floor:
                            continue
                        b = (mag >> (wgt - floor)) & 1
                        kind, fill = ("sbit", (SUM, SUM1)[b]) if row == 0 else ("dbit", (DROP, DROP1)[b])
                    else:                               # the result's significand after the rounding
                        if wgt > r.top:
                            continue
                        b = (r.mant >> (wgt - r.top + r.mbits)) & 1 if wgt >= r.top - r.mbits else 0
                        kind, fill = "rbit", (SUM, SUM1)[b]
                    bx = gx + (hi - wgt) * CW
                    body.append(f'<rect x="{bx:.1f}" y="{y + 1:.1f}" width="{CW}" height="{CH - 2}" fill="{fill}" '
                                f'class="{kind}" data-w="{wgt}" data-b="{b}"/>')
                    body.append(f'<text x="{bx + CW / 2:.1f}" y="{y + 13:.1f}" class="bt">{b}</text>')
                text(right_x, y + 13, f"{ex.total:+d}" if row == 0 else _result_line(ex), "t" if row == 0 else "res")
                body.append("</g>")
                y += CH
        else:
            text(pad, y + 13, "sum", "t")
            text(gx + 4, y + 13, "0: every kept term cancels (or is zero) -> +0", "t")
            y += CH
        y += 10
        for s in _rounding_lines(ex):
            text(pad, y + 12, s)
            y += 16
        text(pad, y + 14, _result_line(ex), "res")
        y += 26
        words = max([len(_cut_words(t, lo)) for t in shown if t is not None] + [len(_result_line(ex)) - 11])
        grid_w = right_x + (11 + words) * CHARW + 8
    # legend
    text(pad, y + 12, "legend", "h")
    y += 18
    for fill, s in legend(ex):
        if fill:
            body.append(f'<rect x="{pad}" y="{y + 2}" width="14" height="12" fill="{fill}" class="sw"/>')
        text(pad + (20 if fill else 0), y + 12, s, "lg")
        y += 16
    y += pad
    longest = max([len(_title(ex)) * 16 * .62, len(f"mirrors: {SOURCE}") * 10 * .62,
                   640.0] + [len(s) * CHARW for s in to_ascii_lines(ex) if not s.startswith("  ")])
    width = int(max(grid_w, longest) + 2 * pad)
    css = ("text{font-family:DejaVu Sans Mono,Menlo,Consolas,monospace;fill:#111;font-size:11px}"
           ".title{font-size:16px;font-weight:bold}.src{font-size:10px;fill:#333}.h{font-size:12px;font-weight:bold}"
           ".hd{font-size:10px;fill:#333;font-weight:bold}.wt{font-size:10px;fill:#333}"
           ".bandt{font-size:10px;text-anchor:middle;font-weight:bold}.bt{text-anchor:middle}"
           ".zt{fill:#444}.lg{font-size:11px}.res{font-weight:bold;font-size:12px}"
           ".special{font-size:13px;font-weight:bold;fill:#8a1010}"
           ".bit,.sbit,.rbit,.dbit{stroke:#fff;stroke-width:1}.sw{stroke:#666;stroke-width:.5}"
           ".rule{stroke:#b00;stroke-width:1.5;stroke-dasharray:4 2}.sep{stroke:#888;stroke-width:1}")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {int(y)}" width="{width}" '
            f'height="{int(y)}" data-kind="explain-dot" data-result="{ex.result_hex}">\n'
            f"<title>{_e(_title(ex))}</title>\n<style>{css}</style>\n"
            f'<rect x="0" y="0" width="{width}" height="{int(y)}" fill="#fff"/>\n' + "\n".join(body) + "\n</svg>\n")


# ----------------------------------------------------------------------------- html / dispatch

def to_diagram(ex: DotExplanation) -> Diagram:
    """The page frame (title, source, legend, caption, the ascii report) for core.to_html."""
    caption = ["One wgmma computes each output element as one fused, truncated dot product: the exact products "
               "and C are aligned to the largest exponent, each keeps its bits down to 2^(e_max - F), the kept "
               "integers are summed exactly, and the sum is rounded once."]
    return Diagram("explain-dot", _title(ex), SOURCE, [], legend(ex), caption, verified=VERIFIED,
                   text_before=to_ascii_lines(ex)[5:])


def render_explain(ex: DotExplanation, fmt: str = "ascii") -> str:
    """The explanation as ascii, svg or html text."""
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise InputError(f"format must be one of {', '.join(FORMATS)}, got {excerpt(fmt)}")
    if fmt == "ascii":
        return to_ascii(ex)
    svg = to_svg(ex)
    return svg if fmt == "svg" else to_html(to_diagram(ex), svg)


__all__ = ["render_explain", "to_ascii", "to_svg", "to_diagram", "legend", "SOURCE"]
