"""Diagram model and its three renderers: ascii, svg (hand-written, no plotting library), html.

A :class:`Diagram` is a title, the source it mirrors, one or more :class:`Panel` grids of
labelled, coloured cells (with optional outlines and arrows), a legend and a caption.
Builders in :mod:`refmodel.render.diagrams` fill it from the layout functions; the
renderers here only draw.

SVG conventions (the tests rely on them): each panel is ``<g class="panel">`` with
``data-rows``, ``data-cols``, ``data-x0``, ``data-y0``, ``data-cw``, ``data-ch``; its cells are
the ``<rect>`` elements under ``<g class="cells">`` — one ``<g transform="translate(0,Y)">``
per grid row, one rect per horizontal run of cells of the same colour, so a rect's width is a
multiple of ``data-cw`` — and its labels the ``<text>`` elements under ``<g class="labels">``
(again one translated ``<g>`` per row; a label's x is the centre of its cell).
"""

from __future__ import annotations

import html as _html
from dataclasses import dataclass, field

VERIFIED = "verified on the H200: fixtures/layouts"


@dataclass
class Panel:
    """A grid of ``rows x cols`` cells.  ``labels[r][c]`` ('' = no label), ``fills[r][c]``
    (a CSS colour, '' = blank).  ``boxes``: (r0, c0, r1, c1, label, kind) outlines, end
    exclusive, kind 'thin' | 'thick' | 'focus'.  ``arrows``: (r0, c0, r1, c1, label) between
    cell centres.  ``col_groups``/``row_groups``: ascii separators every so many cells."""

    title: str
    labels: list[list[str]]
    fills: list[list[str]]
    row_heads: list[str] | None = None
    col_heads: list[str] | None = None
    boxes: list[tuple[int, int, int, int, str, str]] = field(default_factory=list)
    arrows: list[tuple[int, int, int, int, str]] = field(default_factory=list)
    col_groups: int = 0
    row_groups: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return len(self.labels)

    @property
    def cols(self) -> int:
        return len(self.labels[0]) if self.labels else 0


@dataclass
class Diagram:
    """One teaching picture: title, source, panels, legend (colour, text), caption lines."""

    kind: str
    title: str
    source: str
    panels: list[Panel]
    legend: list[tuple[str, str]] = field(default_factory=list)
    caption: list[str] = field(default_factory=list)
    verified: str = VERIFIED
    text_before: list[str] = field(default_factory=list)  # ascii/html only: extra report lines
    side_by_side: bool = True


# ----------------------------------------------------------------------------- colours

_WARP_HUES = (4, 122, 212, 286)


def thread_colour(t: int) -> str:
    """128 distinct colours grouped by warp: the warp picks the hue band (red, green, blue,
    purple), the quad lane q = l%4 shifts the hue, the group g = l//4 the lightness."""
    w, lane = divmod(int(t), 32)
    g, q = divmod(lane, 4)
    return f"hsl({_WARP_HUES[w] + 13 * q},72%,{50 + 5 * g}%)"


def lane_colour(lane: int) -> str:
    """32 distinct colours for the lanes of one warp (8 hues x 4 lightness levels)."""
    hi, lo = divmod(int(lane), 8)
    return f"hsl({lo * 45},70%,{52 + 10 * hi}%)"


def index_colour(i: int, n: int = 8) -> str:
    """``n`` evenly spaced hues (for atoms, core matrices)."""
    return f"hsl({(int(i) % n) * 360 // n + (int(i) // n % 3) * 13},68%,{62 + 8 * (int(i) // n % 2)}%)"


BLANK = "#f2f2f2"
IGNORED = "#d8d8d8"


# ----------------------------------------------------------------------------- ascii

def to_ascii(d: Diagram) -> str:
    """Plain-text rendering: header, each panel as an aligned table, legend, caption."""
    out = [d.title, "=" * min(len(d.title), 100), f"mirrors: {d.source}", d.verified, ""]
    out += d.text_before + ([""] if d.text_before else [])
    for p in d.panels:
        out += _ascii_panel(p) + [""]
    if d.legend:
        out.append("legend:")
        out += [f"  {txt}" for _, txt in d.legend]
    if d.caption:
        out.append("")
        out += d.caption
    return "\n".join(out).rstrip() + "\n"


def _ascii_panel(p: Panel) -> list[str]:
    w = max([len(s) for row in p.labels for s in row] + [len(h) for h in (p.col_heads or [])] + [1])
    rw = max([len(h) for h in (p.row_heads or [])] + [0])
    lines = [f"-- {p.title} --"]

    def join(cells: list[str]) -> str:
        parts = []
        for c, s in enumerate(cells):
            if p.col_groups and c and c % p.col_groups == 0:
                parts.append("|")
            parts.append(f"{s:>{w}}")
        return " ".join(parts)

    if p.col_heads:
        lines.append(" " * (rw + 2) + join(p.col_heads) if rw else join(p.col_heads))
    for r, row in enumerate(p.labels):
        if p.row_groups and r and r % p.row_groups == 0:
            body = join(["-" * w] * len(row)).replace(" | ", "-+-").replace(" ", "-")
            lines.append((" " * (rw + 2) if rw else "") + body)
        head = f"{p.row_heads[r]:>{rw}}: " if p.row_heads else ""
        lines.append(head + join([s if s else "." for s in row]))
    for r0, c0, r1, c1, label in p.arrows:
        lines.append(f"arrow ({r0},{c0}) -> ({r1},{c1}): {label}")
    lines += p.notes
    return lines


# ----------------------------------------------------------------------------- svg

FONT = 8.0          # cell label size (user units)
CHAR = 0.61         # monospace advance / font size
PAD = 16            # outer margin


def _esc(s: str) -> str:
    return _html.escape(str(s), quote=True)


def _fmt(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _cell_size(p: Panel) -> tuple[float, float]:
    n = max([len(s) for row in p.labels for s in row] + [2])
    w = int(max(14.0, n * FONT * CHAR + 5))
    return float(w + w % 2), 15.0


def _panel_geometry(p: Panel) -> tuple[float, float, float, float, float, float]:
    """(width, height, x0, y0, cw, ch) of a panel relative to its top-left corner."""
    cw, ch = _cell_size(p)
    rw = int(max([len(h) for h in (p.row_heads or [])] + [0]) * 7 * CHAR + (7 if p.row_heads else 0))
    x0, y0 = rw, 20 + (12 if p.col_heads else 0)
    width = int(max(x0 + p.cols * cw, len(p.title) * 11 * CHAR)) + 1
    height = y0 + p.rows * ch + (12 * len(p.notes) + 4 if p.notes else 0)
    return width, height, x0, y0, cw, ch


def _wrap(text: str, width_chars: int) -> list[str]:
    words, lines, cur = text.split(), [], ""
    for wd in words:
        if cur and len(cur) + 1 + len(wd) > width_chars:
            lines.append(cur)
            cur = wd
        else:
            cur = f"{cur} {wd}".strip()
    return lines + ([cur] if cur else [])


def to_svg(d: Diagram) -> str:
    """A standalone SVG document (viewBox set, so it scales and zooms)."""
    geos = [_panel_geometry(p) for p in d.panels]
    gap = 30
    side = d.side_by_side and sum(g[0] for g in geos) + gap * (len(geos) - 1) <= 2400
    content_w = (sum(g[0] for g in geos) + gap * (len(geos) - 1)) if side else max(g[0] for g in geos)
    width = max(content_w, 640.0) + 2 * PAD
    wrap_w = min(width, 1500.0) - 2 * PAD  # legend and caption stay readable in wide diagrams
    wrap_chars = int(wrap_w / (10 * CHAR))
    y = PAD
    head = [f'<text x="{PAD}" y="{_fmt(y + 16)}" class="title">{_esc(d.title)}</text>']
    y += 24
    for line in _wrap(f"mirrors: {d.source} — {d.verified}", wrap_chars):
        head.append(f'<text x="{PAD}" y="{_fmt(y + 11)}" class="src">{_esc(line)}</text>')
        y += 14
    y += 8
    colours: dict[str, str] = {}

    def cls(fill: str) -> str:
        if fill not in colours:
            colours[fill] = f"k{len(colours)}"
        return colours[fill]

    body = []
    x = PAD
    top = y
    for p, (pw, ph, x0, y0, cw, ch) in zip(d.panels, geos):
        px, py = (int(x), int(top)) if side else (PAD, int(y))
        body.append(_svg_panel(p, px, py, x0, y0, cw, ch, cls))
        if side:
            x += pw + gap
            y = max(y, top + ph)
        else:
            y += ph + gap
    y += 18
    # legend: swatch rows
    leg = []
    if d.legend:
        leg.append(f'<text x="{PAD}" y="{_fmt(y)}" class="h">legend</text>')
        y += 6
        lx = PAD
        for fill, txt in d.legend:
            tw = 16 + len(txt) * 10 * CHAR + 18
            if lx + tw > wrap_w + PAD and lx > PAD:
                lx, y = PAD, y + 16
            if fill:
                leg.append(f'<rect x="{_fmt(lx)}" y="{_fmt(y + 2)}" width="12" height="10" '
                           f'class="{cls(fill)} sw"/>')
            leg.append(f'<text x="{_fmt(lx + (16 if fill else 0))}" y="{_fmt(y + 11)}" class="lg">{_esc(txt)}</text>')
            lx += tw if fill else len(txt) * 10 * CHAR + 18
        y += 24
    cap = []
    for para in d.caption:
        for line in _wrap(para, wrap_chars):
            cap.append(f'<text x="{PAD}" y="{_fmt(y + 10)}" class="cap">{_esc(line)}</text>')
            y += 14
    height = y + PAD
    css = ("text{font-family:DejaVu Sans Mono,Menlo,Consolas,monospace;fill:#111}"
           f".labels text{{font-size:{_fmt(FONT)}px;text-anchor:middle}}"
           ".cells rect{stroke:#fff;stroke-width:.6}"
           ".title{font-size:16px;font-weight:bold}.src{font-size:10px;fill:#444}.h{font-size:11px;font-weight:bold}"
           ".pt{font-size:11px;font-weight:bold}.hd{font-size:7px;fill:#555}.lg{font-size:10px}.cap{font-size:10px}"
           ".note{font-size:9px;fill:#333}.sw{stroke:#666;stroke-width:.5}"
           ".box{fill:none;stroke:#333;stroke-width:.8}.thick{fill:none;stroke:#000;stroke-width:2}"
           ".focus{fill:none;stroke:#000;stroke-width:2.2;stroke-dasharray:4 2}"
           ".wm{font-weight:bold;text-anchor:middle;fill:#000;fill-opacity:.13;pointer-events:none}"
           ".ar{stroke:#000;stroke-width:1.6;fill:none;marker-end:url(#ah)}"
           ".al{font-size:10px;font-weight:bold;paint-order:stroke;stroke:#fff;stroke-width:3px}"
           + "".join(f".{k}{{fill:{f}}}" for f, k in colours.items()))
    defs = ('<defs><marker id="ah" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0 0L10 5L0 10z"/></marker></defs>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_fmt(width)} {_fmt(height)}" '
            f'width="{_fmt(width)}" height="{_fmt(height)}" data-kind="{_esc(d.kind)}">\n'
            f'<title>{_esc(d.title)}</title>\n<style>{css}</style>\n{defs}\n'
            f'<rect x="0" y="0" width="{_fmt(width)}" height="{_fmt(height)}" fill="#fff"/>\n'
            + "\n".join(head) + "\n" + "\n".join(body) + "\n" + "\n".join(leg) + "\n" + "\n".join(cap)
            + "\n</svg>\n")


def _svg_panel(p: Panel, px: float, py: float, x0: float, y0: float, cw: float, ch: float, cls) -> str:
    gx, gy = px + x0, py + y0
    out = [f'<g class="panel" data-title="{_esc(p.title)}" data-rows="{p.rows}" data-cols="{p.cols}" '
           f'data-x0="{_fmt(gx)}" data-y0="{_fmt(gy)}" data-cw="{_fmt(cw)}" data-ch="{_fmt(ch)}">',
           f'<text x="{_fmt(px)}" y="{_fmt(py + 12)}" class="pt">{_esc(p.title)}</text>']
    if p.col_heads:
        out.append('<g class="colheads">' + "".join(
            f'<text x="{_fmt(gx + (c + .5) * cw)}" y="{_fmt(gy - 3)}" class="hd" text-anchor="middle">{_esc(h)}</text>'
            for c, h in enumerate(p.col_heads) if h) + "</g>")
    if p.row_heads:
        out.append('<g class="rowheads">' + "".join(
            f'<text x="{_fmt(gx - 3)}" y="{_fmt(gy + (r + .5) * ch + 2.5)}" class="hd" text-anchor="end">{_esc(h)}</text>'
            for r, h in enumerate(p.row_heads) if h) + "</g>")
    h_ = _fmt(ch)
    cells, labels = ['<g class="cells">'], ['<g class="labels">']
    for r in range(p.rows):  # one <g> per row (its y in the transform), to keep big diagrams small
        cells.append(f'<g transform="translate(0,{_fmt(gy + r * ch)})">')
        labels.append(f'<g transform="translate(0,{_fmt(gy + (r + .5) * ch + FONT * .35)})">')
        c = 0
        while c < p.cols:  # one rect per run of equal fills
            fill = p.fills[r][c] or BLANK
            run = 1
            while c + run < p.cols and (p.fills[r][c + run] or BLANK) == fill:
                run += 1
            cells.append(f'<rect x="{_fmt(gx + c * cw)}" width="{_fmt(run * cw)}" height="{h_}" class="{cls(fill)}"/>')
            c += run
        labels += [f'<text x="{_fmt(gx + (c + .5) * cw)}">{_esc(lab)}</text>'
                   for c, lab in enumerate(p.labels[r]) if lab]
        cells.append("</g>")
        labels.append("</g>")
    out += ["\n".join(cells) + "</g>", "\n".join(labels) + "</g>"]
    for r0, c0, r1, c1, label, kind in p.boxes:
        k = {"thin": "box", "thick": "thick", "focus": "focus"}.get(kind, "box")
        out.append(f'<rect x="{_fmt(gx + c0 * cw)}" y="{_fmt(gy + r0 * ch)}" width="{_fmt((c1 - c0) * cw)}" '
                   f'height="{_fmt((r1 - r0) * ch)}" class="{k}"/>')
        if label:  # a faint watermark centred in the box: names it without hiding any cell label
            bw, bh = (c1 - c0) * cw, (r1 - r0) * ch
            size = max(9.0, min(bh * .45, bw / max(len(label), 1) * 1.5, 60.0))
            out.append(f'<text x="{_fmt(gx + c0 * cw + bw / 2)}" y="{_fmt(gy + r0 * ch + bh / 2 + size * .35)}" '
                       f'class="wm" style="font-size:{_fmt(size)}px">{_esc(label)}</text>')
    for r0, c0, r1, c1, label in p.arrows:
        xa, ya = gx + (c0 + .5) * cw, gy + (r0 + .5) * ch
        xb, yb = gx + (c1 + .5) * cw, gy + (r1 + .5) * ch
        out.append(f'<path d="M{_fmt(xa)} {_fmt(ya)}L{_fmt(xb)} {_fmt(yb)}" class="ar"/>'
                   f'<text x="{_fmt((xa + xb) / 2 + 4)}" y="{_fmt((ya + yb) / 2 - 4)}" class="al">{_esc(label)}</text>')
    ny = gy + p.rows * ch + 12
    for note in p.notes:
        out.append(f'<text x="{_fmt(px)}" y="{_fmt(ny)}" class="note">{_esc(note)}</text>')
        ny += 12
    out.append("</g>")
    return "\n".join(out)


# ----------------------------------------------------------------------------- html

def to_html(d: Diagram, svg: str | None = None) -> str:
    """An HTML page: title, source, the SVG (scrollable at natural size; 'fit' toggles
    fit-to-width), a legend with swatches, the caption and any report lines."""
    svg = to_svg(d) if svg is None else svg
    legend = "".join(f'<li><span class="sw" style="background:{_esc(f)}"></span>{_esc(t)}</li>' if f
                     else f"<li>{_esc(t)}</li>" for f, t in d.legend)
    report = (f"<pre class=report>{_esc(chr(10).join(d.text_before))}</pre>" if d.text_before else "")
    caption = "".join(f"<p>{_esc(c)}</p>" for c in d.caption)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{_esc(d.title)}</title>
<style>
body{{font-family:system-ui,sans-serif;margin:1.5em;color:#111}} .src{{color:#444}}
.fig{{overflow:auto;border:1px solid #ccc;max-height:85vh}} .fig.fit svg{{width:100%;height:auto}}
.sw{{display:inline-block;width:1em;height:1em;margin-right:.4em;vertical-align:middle;border:1px solid #666}}
ul.legend{{list-style:none;padding:0;columns:3}} pre.report{{background:#f6f6f6;padding:.6em}}
</style></head><body>
<h1>{_esc(d.title)}</h1>
<p class="src">Mirrors: {_esc(d.source)}. {_esc(d.verified[0].upper() + d.verified[1:])}.</p>
{report}
<p><button onclick="document.getElementById('fig').classList.toggle('fit')">fit / actual size</button>
(actual size is readable; scroll or zoom the SVG)</p>
<figure><div class="fig" id="fig">{svg}</div>
<figcaption>{caption}</figcaption></figure>
<h2>Legend</h2><ul class="legend">{legend}</ul>
</body></html>
"""
