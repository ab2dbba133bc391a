"""Diagram model and its three renderers: ascii, svg (hand-written, no plotting library), html.

A :class:`Diagram` is a title, the source it mirrors, one or more :class:`Panel` grids of
labelled, coloured cells (with optional outlines and arrows), a legend and a caption.
Builders in :mod:`refmodel.render.diagrams` fill it from the layout functions; the
renderers here only draw.

SVG conventions (the tests rely on them): each panel is ``<g class="panel">`` with
``data-rows``, ``data-cols``, ``data-x0``, ``data-y0``, ``data-cw``, ``data-ch`` and ``data-r0``,
``data-c0`` (where its cells sit in the whole matrix when a wide matrix is cut into column
blocks); its cells are the ``<rect>`` elements under ``<g class="cells">`` — one
``<g transform="translate(0,Y)">`` per grid row, one rect per horizontal run of cells of the
same colour, so a rect's width is a multiple of ``data-cw`` — and its labels the ``<text>``
elements under ``<g class="labels">`` (again one translated ``<g>`` per row; a label's x is the
centre of its cell; class ``w`` = white text).  Nothing but a cell's own label is drawn over a
cell: outline names and stride arrows' labels sit in the margins.  Every text is at least
:data:`MIN_FONT` px, and every label's colour is picked for a WCAG contrast of at least 4.5
against its cell (:func:`ink`).

Legend entries are ``(key, text)``: ``key`` a CSS colour (a swatch of a fill the panels use),
one of the outline markers :data:`MARKS` (``"@focus"`` dashed, ``"@thick"``, ``"@thin"``,
``"@arrow"``), ``"@svg"`` (text printed with the pictures only), ``"@ascii"`` (text printed in
the ascii output only) or ``""`` (text for every format).
"""

from __future__ import annotations

import html as _html
import math
import re
from dataclasses import dataclass, field

VERIFIED = "verified on the H200: fixtures/layouts"

MARKS = ("@focus", "@thick", "@thin", "@arrow")
TEXT_SVG, TEXT_ASCII = "@svg", "@ascii"


@dataclass
class Panel:
    """A grid of ``rows x cols`` cells.  ``labels[r][c]`` ('' = no label), ``fills[r][c]``
    (a CSS colour, '' = blank).  ``boxes``: (r0, c0, r1, c1, label, kind) outlines, end
    exclusive, kind 'thin' | 'thick' | 'focus'; a label is written beside the box, never over
    it.  ``arrows``: (r0, c0, r1, c1, label) steps between cells, drawn in the margin.
    ``col_groups``/``row_groups``: ascii separators every so many cells.  ``r0``/``c0``: where
    the panel's first cell sits in the whole matrix (a wide matrix is cut into column blocks)."""

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
    r0: int = 0
    c0: int = 0

    @property
    def rows(self) -> int:
        return len(self.labels)

    @property
    def cols(self) -> int:
        return len(self.labels[0]) if self.labels else 0


@dataclass
class Diagram:
    """One teaching picture: title, source, panels, legend (key, text), caption lines."""

    kind: str
    title: str
    source: str
    panels: list[Panel]
    legend: list[tuple[str, str]] = field(default_factory=list)
    caption: list[str] = field(default_factory=list)
    verified: str = VERIFIED
    text_before: list[str] = field(default_factory=list)  # report lines (ascii, html, and atop the svg)
    side_by_side: bool = True


def split_columns(p: Panel, block: int) -> list[Panel]:
    """``p`` cut into panels of at most ``block`` columns (boxes clipped, arrows kept in the
    block that holds both ends, notes on the last block); ``p`` itself when it is narrow."""
    if p.cols <= block:
        return [p]
    out = []
    for c0 in range(0, p.cols, block):
        c1 = min(p.cols, c0 + block)
        q = Panel(f"{p.title} — columns {p.c0 + c0}-{p.c0 + c1 - 1}", [row[c0:c1] for row in p.labels],
                  [row[c0:c1] for row in p.fills], p.row_heads,
                  p.col_heads[c0:c1] if p.col_heads else None, col_groups=p.col_groups, row_groups=p.row_groups,
                  r0=p.r0, c0=p.c0 + c0)
        for r0, b0, r1, b1, lab, kind in p.boxes:
            lo, hi = max(b0, c0), min(b1, c1)
            if lo < hi:
                q.boxes.append((r0, lo - c0, r1, hi - c0, lab if lo == b0 else "", kind))
        q.arrows = [(a, b - c0, c, d - c0, lab) for a, b, c, d, lab in p.arrows
                    if c0 <= b < c1 and c0 <= d < c1]
        out.append(q)
    out[-1].notes = list(p.notes)
    return out


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
    """``n`` evenly spaced hues (for 16-byte units, core matrices)."""
    return f"hsl({(int(i) % n) * 360 // n + (int(i) // n % 3) * 13},68%,{62 + 8 * (int(i) // n % 2)}%)"


BLANK = "#f2f2f2"
IGNORED = "#d8d8d8"
DARK, LIGHT = "#000", "#fff"      # the two label inks
TEXT = "#111"                     # text on the white page
NBSP = "\u00a0"
WARN = "#a40000"                  # warning lines and hazard marks (contrast 8.2 on white)


def rgb(colour: str) -> tuple[float, float, float]:
    """(r, g, b) in 0..1 of a CSS colour: ``#rgb``, ``#rrggbb`` or ``hsl(h,s%,l%)``."""
    c = colour.strip().lower()
    if c.startswith("#") and len(c) in (4, 7):
        h = "".join(ch * 2 for ch in c[1:]) if len(c) == 4 else c[1:]
        return tuple(int(h[i:i + 2], 16) / 255 for i in (0, 2, 4))
    m = re.fullmatch(r"hsl\(\s*([-\d.]+)\s*,\s*([\d.]+)%\s*,\s*([\d.]+)%\s*\)", c)
    if not m:
        raise ValueError(f"unsupported colour {colour!r}")
    h, s, l = float(m.group(1)) % 360 / 360, float(m.group(2)) / 100, float(m.group(3)) / 100
    q = l * (1 + s) if l < .5 else l + s - l * s
    p = 2 * l - q

    def hue(t: float) -> float:
        t %= 1
        if t < 1 / 6:
            return p + (q - p) * 6 * t
        if t < 1 / 2:
            return q
        if t < 2 / 3:
            return p + (q - p) * (2 / 3 - t) * 6
        return p

    return hue(h + 1 / 3), hue(h), hue(h - 1 / 3)


def luminance(colour: str) -> float:
    """WCAG 2 relative luminance of a CSS colour."""
    lin = [v / 12.92 if v <= .04045 else ((v + .055) / 1.055) ** 2.4 for v in rgb(colour)]
    return .2126 * lin[0] + .7152 * lin[1] + .0722 * lin[2]


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two CSS colours (1 .. 21)."""
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + .05) / (lb + .05)


def ink(fill: str) -> str:
    """The label colour (black or white) with the higher contrast on ``fill`` (always >= 4.58)."""
    return DARK if contrast(DARK, fill) >= contrast(LIGHT, fill) else LIGHT


# ----------------------------------------------------------------------------- ascii

def to_ascii(d: Diagram) -> str:
    """Plain-text rendering: header, report, each panel as an aligned table, the legend
    entries ascii shows (notation, not colours or outlines), caption."""
    out = [d.title, "=" * min(len(d.title), 100), f"mirrors: {d.source}", d.verified, ""]
    out += d.text_before + ([""] if d.text_before else [])
    for p in d.panels:
        out += _ascii_panel(p) + [""]
    items = [txt for key, txt in d.legend if key in ("", TEXT_ASCII)]
    if items:
        out.append("legend:")
        out += [f"  {txt}" for txt in items]
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


# ----------------------------------------------------------------------------- svg geometry

FONT = 10.0         # cell label size (px); MIN_FONT is the floor of every text
MIN_FONT = 10.0
HEAD = 10.0         # row / column heads
BOXF = 11.0         # outline names in the margins
CHAR = 0.61         # monospace advance / font size (DejaVu Sans Mono: 0.602)
PAD = 16            # outer margin
MAX_W = 1400        # content width: panels flow into rows of at most this width
CELL_H = 16.0


def _esc(s: str) -> str:
    return _html.escape(str(s), quote=True)


def _fmt(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def text_width(s: str, size: float) -> float:
    """Advance width of ``s`` in the monospace font at ``size`` px."""
    return len(s) * size * CHAR


def _cell_size(p: Panel) -> tuple[float, float]:
    n = max([len(s) for row in p.labels for s in row] + [2])
    h = max([len(s) for s in (p.col_heads or [])] + [0])
    w = int(math.ceil(max(16.0, n * FONT * CHAR + 6, h * HEAD * CHAR + 10)))
    return float(w + w % 2), CELL_H


def _box_side(p: Panel, b: tuple) -> str:
    r0, c0, r1, c1 = b[:4]
    if c0 == 0 and c1 == p.cols:
        return "right"
    if r0 == 0:
        return "top"
    if r1 == p.rows:
        return "bottom"
    return "right"


@dataclass
class _Geo:
    width: float
    height: float
    x0: float      # grid origin, relative to the panel's corner
    y0: float
    cw: float
    ch: float
    left: float    # arrow gutter width
    top_band: float
    arrow_band: float
    note_lines: list[str]


def _panel_geometry(p: Panel) -> _Geo:
    cw, ch = _cell_size(p)
    labelled = [b for b in p.boxes if b[4]]
    vert = [a for a in p.arrows if a[1] == a[3] or a[0] != a[2]]
    horiz = [a for a in p.arrows if a not in vert]
    left = max([text_width(a[4], FONT) + 14 + 8 * i for i, a in enumerate(vert)] + [0])
    rw = max([text_width(h, HEAD) for h in (p.row_heads or [])] + [0]) + (6 if p.row_heads else 0)
    right = max([text_width(b[4], BOXF) + 14 for b in labelled if _box_side(p, b) == "right"] + [0])
    top_band = 16 if any(_box_side(p, b) == "top" for b in labelled) else 0
    bottom = 16 if any(_box_side(p, b) == "bottom" for b in labelled) else 0
    arrow_band = 16 if horiz else 0
    x0 = left + rw
    y0 = 18 + top_band + arrow_band + (14 if p.col_heads else 0)
    grid_w = p.cols * cw
    harrow_w = max([x0 + (a[3] + .5) * cw + 6 + text_width(a[4], FONT) for a in horiz] + [0])
    wrap = int(max(grid_w + right, 420) / (10 * CHAR))
    note_lines = [ln for n in p.notes for ln in _wrap(n, wrap)]
    width = math.ceil(max(x0 + grid_w + right, text_width(p.title, 11), harrow_w,
                          max([text_width(n, 10) for n in note_lines] + [0]))) + 1
    height = y0 + p.rows * ch + bottom + (13 * len(note_lines) + 4 if note_lines else 0)
    return _Geo(width, height, x0, y0, cw, ch, left, top_band, arrow_band, note_lines)


def _wrap(text: str, width_chars: int, indent: str = "") -> list[str]:
    """Word-wrap ``text`` (never inside a word); continuation lines start with ``indent``."""
    words, lines, cur = text.split(), [], ""
    for wd in words:
        if cur and len(cur) + 1 + len(wd) > width_chars:
            lines.append(cur)
            cur = indent + wd
        else:
            cur = f"{cur} {wd}" if cur else wd
    return lines + ([cur] if cur else [])


# ----------------------------------------------------------------------------- svg

CSS = ("text{font-family:DejaVu Sans Mono,Menlo,Consolas,monospace;fill:#111;font-size:10px}"
       f".labels text{{font-size:{_fmt(FONT)}px;text-anchor:middle;fill:{DARK}}}.labels text.w{{fill:{LIGHT}}}"
       ".cells rect{stroke:#fff;stroke-width:.6}"
       ".title{font-size:16px;font-weight:bold}.src{font-size:10px;fill:#444}.h{font-size:11px;font-weight:bold}"
       f".pt{{font-size:11px;font-weight:bold}}.hd{{font-size:{_fmt(HEAD)}px;fill:#444}}.lg{{font-size:10px}}"
       f".cap{{font-size:10px}}.note{{font-size:10px;fill:#333}}.rep{{font-size:10px}}"
       f".warn{{font-size:10px;fill:{WARN};font-weight:bold}}.sw{{stroke:#666;stroke-width:.5}}"
       ".box{fill:none;stroke:#333;stroke-width:.8}.thick{fill:none;stroke:#000;stroke-width:2}"
       ".focus{fill:none;stroke:#000;stroke-width:2.2;stroke-dasharray:4 2}"
       f".bl{{font-size:{_fmt(BOXF)}px;font-weight:bold}}.br{{fill:none;stroke:#000;stroke-width:1.2}}"
       ".ar{stroke:#000;stroke-width:1.6;fill:none;marker-end:url(#ah)}"
       ".al{font-size:10px;font-weight:bold}")


def to_svg(d: Diagram, report: bool = True) -> str:
    """A standalone SVG document (viewBox set, so it scales and zooms).  ``report``: draw the
    report lines (``text_before``) under the header (the HTML page shows them as text)."""
    geos = [_panel_geometry(p) for p in d.panels]
    gap = 30
    # flow layout: panels left to right, a new row when the next would pass MAX_W
    places, rows, x, y_row, row_h = [], [], 0.0, 0.0, 0.0
    for i, g in enumerate(geos):
        if i and (not d.side_by_side or x + g.width > MAX_W):
            y_row += row_h + gap
            x, row_h = 0.0, 0.0
        places.append((x, y_row))
        x += g.width + gap
        row_h = max(row_h, g.height)
        rows.append(x - gap)
    content_w = max(rows + [0])
    width = max(content_w, 640.0) + 2 * PAD
    wrap_w = min(width, MAX_W + 2 * PAD) - 2 * PAD   # legend and caption stay readable in wide diagrams
    wrap_chars = int(wrap_w / (10 * CHAR))
    y = PAD
    head = [f'<text x="{PAD}" y="{_fmt(y + 16)}" class="title">{_esc(d.title)}</text>']
    y += 24
    for line in _wrap(f"mirrors: {d.source} — {d.verified}", wrap_chars):
        head.append(f'<text x="{PAD}" y="{_fmt(y + 11)}" class="src">{_esc(line)}</text>')
        y += 14
    y += 8
    if report and d.text_before:
        head.append('<g class="report">')
        for line in d.text_before:
            lead = line[:len(line) - len(line.lstrip())]
            cls_ = "warn" if line.lstrip().startswith("!") else "rep"
            parts = [line] if len(line) <= wrap_chars else _wrap(line, wrap_chars - len(lead), indent=lead + "    ")
            parts[:1] = [lead + p for p in parts[:1]] if len(line) > wrap_chars else parts[:1]
            for part in parts or [""]:
                head.append(f'<text x="{PAD}" y="{_fmt(y + 11)}" class="{cls_}">'
                            f'{_esc(part).replace(" ", NBSP)}</text>')   # keep the columns aligned
                y += 13
        head.append("</g>")
        y += 10
    colours: dict[str, str] = {}

    def cls(fill: str) -> str:
        if fill not in colours:
            colours[fill] = f"k{len(colours)}"
        return colours[fill]

    body = []
    top = y
    for p, g, (px, py) in zip(d.panels, geos, places):
        body.append(_svg_panel(p, PAD + px, top + py, g, cls))
        y = max(y, top + py + g.height)
    y += 18
    leg = []
    if any(k != TEXT_ASCII for k, _ in d.legend):
        leg.append(f'<g class="legend"><text x="{PAD}" y="{_fmt(y)}" class="h">legend</text>')
        y += 6
        lx = PAD
        for key, txt in d.legend:
            if key == TEXT_ASCII:
                continue
            swatch = key not in ("", TEXT_SVG)
            tw = (16 if swatch else 0) + text_width(txt, 10) + 18
            if lx + tw > wrap_w + PAD and lx > PAD:
                lx, y = PAD, y + 16
            attr = (f'data-mark="{key[1:]}"' if key in MARKS else f'data-fill="{_esc(key)}"' if swatch
                    else 'data-text="1"')
            leg.append(f'<g class="item" {attr}>')
            if key in MARKS:
                leg.append(_marker(key, lx, y + 2))
            elif swatch:
                leg.append(f'<rect x="{_fmt(lx)}" y="{_fmt(y + 2)}" width="12" height="10" class="{cls(key)} sw"/>')
            leg.append(f'<text x="{_fmt(lx + (16 if swatch else 0))}" y="{_fmt(y + 11)}" class="lg">'
                       f'{_esc(txt)}</text></g>')
            lx += tw
        leg.append("</g>")
        y += 24
    cap = []
    for para in d.caption:
        for line in _wrap(para, wrap_chars):
            cap.append(f'<text x="{PAD}" y="{_fmt(y + 10)}" class="cap">{_esc(line)}</text>')
            y += 14
    height = y + PAD
    css = CSS + "".join(f".{k}{{fill:{f}}}" for f, k in colours.items())
    defs = ('<defs><marker id="ah" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0 0L10 5L0 10z"/></marker></defs>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_fmt(width)} {_fmt(height)}" '
            f'width="{_fmt(width)}" height="{_fmt(height)}" data-kind="{_esc(d.kind)}">\n'
            f'<title>{_esc(d.title)}</title>\n<style>{css}</style>\n{defs}\n'
            f'<rect x="0" y="0" width="{_fmt(width)}" height="{_fmt(height)}" fill="#fff"/>\n'
            + "\n".join(head) + "\n" + "\n".join(body) + "\n" + "\n".join(leg) + "\n" + "\n".join(cap)
            + "\n</svg>\n")


def _marker(key: str, x: float, y: float) -> str:
    if key == "@arrow":
        return f'<path d="M{_fmt(x)} {_fmt(y + 5)}h12" class="ar"/>'
    k = {"@focus": "focus", "@thick": "thick", "@thin": "box"}[key]
    return f'<rect x="{_fmt(x + 1)}" y="{_fmt(y)}" width="10" height="10" class="{k}"/>'


def _svg_panel(p: Panel, px: float, py: float, g: _Geo, cls) -> str:
    cw, ch = g.cw, g.ch
    gx, gy = px + g.x0, py + g.y0
    grid_r, grid_b = gx + p.cols * cw, gy + p.rows * ch
    out = [f'<g class="panel" data-title="{_esc(p.title)}" data-rows="{p.rows}" data-cols="{p.cols}" '
           f'data-x0="{_fmt(gx)}" data-y0="{_fmt(gy)}" data-cw="{_fmt(cw)}" data-ch="{_fmt(ch)}" '
           f'data-r0="{p.r0}" data-c0="{p.c0}">',
           f'<text x="{_fmt(px)}" y="{_fmt(py + 12)}" class="pt">{_esc(p.title)}</text>']
    if p.col_heads:
        out.append('<g class="colheads">' + "".join(
            f'<text x="{_fmt(gx + (c + .5) * cw)}" y="{_fmt(gy - 4)}" class="hd" text-anchor="middle">{_esc(h)}</text>'
            for c, h in enumerate(p.col_heads) if h) + "</g>")
    if p.row_heads:
        out.append('<g class="rowheads">' + "".join(
            f'<text x="{_fmt(gx - 4)}" y="{_fmt(gy + (r + .5) * ch + HEAD * .35)}" class="hd" text-anchor="end">'
            f'{_esc(h)}</text>' for r, h in enumerate(p.row_heads) if h) + "</g>")
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
        for c, lab in enumerate(p.labels[r]):
            if lab:
                w = ' class="w"' if ink(p.fills[r][c] or BLANK) == LIGHT else ""
                labels.append(f'<text x="{_fmt(gx + (c + .5) * cw)}"{w}>{_esc(lab)}</text>')
        cells.append("</g>")
        labels.append("</g>")
    out += ["\n".join(cells) + "</g>", "\n".join(labels) + "</g>"]
    for r0, c0, r1, c1, label, kind in p.boxes:
        k = {"thin": "box", "thick": "thick", "focus": "focus"}.get(kind, "box")
        out.append(f'<rect x="{_fmt(gx + c0 * cw)}" y="{_fmt(gy + r0 * ch)}" width="{_fmt((c1 - c0) * cw)}" '
                   f'height="{_fmt((r1 - r0) * ch)}" class="{k}"/>')
    for b in p.boxes:   # outline names in the margins, with a bracket showing the extent
        r0, c0, r1, c1, label, _ = b
        if not label:
            continue
        side = _box_side(p, b)
        ya, yb, xa, xb = gy + r0 * ch, gy + r1 * ch, gx + c0 * cw, gx + c1 * cw
        if side == "right":
            bx = grid_r + 4
            out.append(f'<path d="M{_fmt(bx)} {_fmt(ya + 1)}h3V{_fmt(yb - 1)}h-3" class="br"/>'
                       f'<text x="{_fmt(bx + 6)}" y="{_fmt((ya + yb) / 2 + BOXF * .35)}" class="bl">{_esc(label)}</text>')
        elif side == "top":
            by = py + 18 + g.top_band - 3
            out.append(f'<path d="M{_fmt(xa + 1)} {_fmt(by + 1)}v-3H{_fmt(xb - 1)}v3" class="br"/>'
                       f'<text x="{_fmt((xa + xb) / 2)}" y="{_fmt(by - 5)}" class="bl" text-anchor="middle">'
                       f'{_esc(label)}</text>')
        else:
            by = grid_b + 3
            out.append(f'<path d="M{_fmt(xa + 1)} {_fmt(by)}v3H{_fmt(xb - 1)}v-3" class="br"/>'
                       f'<text x="{_fmt((xa + xb) / 2)}" y="{_fmt(by + 4 + BOXF)}" class="bl" text-anchor="middle">'
                       f'{_esc(label)}</text>')
    nv = 0
    for r0, c0, r1, c1, label in p.arrows:   # in the margins: row steps on the left, column steps on top
        if r0 != r1 or c0 == c1:
            ax = px + g.left - 6 - 8 * nv
            ya, yb = gy + (r0 + .5) * ch, gy + (r1 + .5) * ch
            out.append(f'<path d="M{_fmt(ax)} {_fmt(ya)}L{_fmt(ax)} {_fmt(yb)}" class="ar"/>'
                       f'<path d="M{_fmt(ax - 3)} {_fmt(ya)}h6" class="br"/>'
                       f'<text x="{_fmt(ax - 4)}" y="{_fmt((ya + yb) / 2 + 3.5)}" class="al" text-anchor="end">'
                       f'{_esc(label)}</text>')
            nv += 1
        else:
            ay = py + 18 + g.top_band + g.arrow_band / 2 + 1
            xa, xb = gx + (c0 + .5) * cw, gx + (c1 + .5) * cw
            out.append(f'<path d="M{_fmt(xa)} {_fmt(ay)}L{_fmt(xb)} {_fmt(ay)}" class="ar"/>'
                       f'<text x="{_fmt(xb + 6)}" y="{_fmt(ay + 3.5)}" class="al">{_esc(label)}</text>')
    ny = grid_b + (16 if any(_box_side(p, b) == "bottom" for b in p.boxes if b[4]) else 0) + 13
    for note in g.note_lines:
        out.append(f'<text x="{_fmt(px)}" y="{_fmt(ny)}" class="note">{_esc(note)}</text>')
        ny += 13
    out.append("</g>")
    return "\n".join(out)


# ----------------------------------------------------------------------------- html

_MARK_CSS = {"@focus": "border:2px dashed #000;background:none", "@thick": "border:2px solid #000;background:none",
             "@thin": "border:1px solid #333;background:none", "@arrow": "border:none;background:none"}


def to_html(d: Diagram, svg: str | None = None) -> str:
    """An HTML page: title, source, the report (wrapping), the SVG (scrollable at natural
    size; 'fit' toggles fit-to-width), a legend with swatches, the caption."""
    svg = to_svg(d, report=False) if svg is None else svg
    items = []
    for key, t in d.legend:
        if key == TEXT_ASCII:
            continue
        if key in MARKS:
            sym = "&rarr;" if key == "@arrow" else ""
            items.append(f'<li><span class="sw" style="{_MARK_CSS[key]}">{sym}</span>{_esc(t)}</li>')
        elif key in ("", TEXT_SVG):
            items.append(f"<li>{_esc(t)}</li>")
        else:
            items.append(f'<li><span class="sw" style="background:{_esc(key)}"></span>{_esc(t)}</li>')
    report = ""
    if d.text_before:
        report = "<pre class=report>" + "\n".join(
            f'<span class="warn">{_esc(ln)}</span>' if ln.lstrip().startswith("!") else _esc(ln)
            for ln in d.text_before) + "</pre>"
    caption = "".join(f"<p>{_esc(c)}</p>" for c in d.caption)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{_esc(d.title)}</title>
<style>
body{{font-family:system-ui,sans-serif;margin:1.5em;color:#111}} .src{{color:#444}}
.fig{{overflow:auto;border:1px solid #ccc;max-height:85vh}} .fig.fit svg{{width:100%;height:auto}}
.sw{{display:inline-block;width:1em;height:1em;margin-right:.4em;vertical-align:middle;border:1px solid #666;
text-align:center;line-height:1em}}
ul.legend{{list-style:none;padding:0;columns:3}}
pre.report{{background:#f6f6f6;padding:.6em;white-space:pre-wrap;overflow-wrap:anywhere}}
.warn{{color:{WARN};font-weight:bold}}
</style></head><body>
<h1>{_esc(d.title)}</h1>
<p class="src">Mirrors: {_esc(d.source)}. {_esc(d.verified[0].upper() + d.verified[1:])}.</p>
{report}
<p><button onclick="document.getElementById('fig').classList.toggle('fit')">fit / actual size</button>
(actual size is readable; scroll or zoom the SVG)</p>
<figure><div class="fig" id="fig">{svg}</div>
<figcaption>{caption}</figcaption></figure>
<h2>Legend</h2><ul class="legend">{"".join(items)}</ul>
</body></html>
"""
