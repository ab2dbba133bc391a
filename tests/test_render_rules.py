"""Rules every teaching picture keeps, for every diagram kind x format (and the pipeline timeline).

* SVG: every text is at least 10 px; no text lies on a data cell unless it is that cell's own
  label (and a label fits inside its cell); every text has a WCAG contrast of at least 4.5
  against what it is drawn on (its cell's fill, or the white page); each legend entry's colour or
  outline marker occurs in the panels, and each notation key it defines ("T<t>:r<j> = ...")
  occurs among the cell labels.
* ascii: the legend lists only what ascii shows: no colour or outline words, no internal names,
  and every notation key it defines occurs in the text above it.
* html: the report wraps, and the legend holds the picture's entries only.

The SVG is read with xml.etree and its own <style>; sizes and colours are resolved the way a
browser does for these simple selectors (``.class``, ``.parent text``, ``.parent text.class``).
Contrast follows WCAG 2 (relative luminance from sRGB), computed here independently of
refmodel.render.core (a second implementation: hsl -> rgb by the CSS Color 3 formula).
"""

from __future__ import annotations

import colorsys
import re
import xml.etree.ElementTree as ET

import pytest

from refmodel.layouts.descriptor import MatrixDescriptor
from refmodel.render import KINDS, diagram, render

NS = "{http://www.w3.org/2000/svg}"
ADVANCE = 0.61          # monospace advance / font size (DejaVu Sans Mono 0.602, rounded up)
MIN_FONT = 10.0
MIN_CONTRAST = 4.5

# option sets per kind (kinds other helpers add are drawn with their defaults)
SAMPLES: dict[str, list[dict]] = {
    "acc": [{"n": 8, "dtype": "f32"}, {"n": 256, "dtype": "f32"}, {"n": 64, "dtype": "f16"}, {"n": 40, "dtype": "s32"}],
    "a-frag": [{"dtype": "f16"}, {"dtype": "tf32"}, {"dtype": "e4m3"}],
    "stmatrix": [{"num": 4, "trans": False}, {"num": 2, "trans": True}, {"num": 1, "trans": False}],
    "ldmatrix": [{"num": 1, "trans": False}, {"num": 4, "trans": True}],
    "swizzle": [{"mode": m, "dtype": "f16"} for m in ("none", "32B", "64B", "128B")] + [{"mode": "128B", "dtype": "e4m3"}],
    "smem": [{"major": "K", "mode": "128B", "dtype": "f16"}, {"major": "MN", "mode": "128B", "dtype": "f16"},
             {"major": "K", "mode": "none", "dtype": "f16"}, {"major": "MN", "mode": "none", "dtype": "f16", "rows": 16},
             {"major": "K", "mode": "32B", "dtype": "e4m3", "rows": 32}, {"major": "MN", "mode": "64B", "rows": 128}],
    "desc": [{"value": MatrixDescriptor(0x400, 16, 1024, 0, 1).encode(), "rows": 64, "k": 16},
             {"value": MatrixDescriptor(0x480, 16, 1024, 0, 1).encode(), "rows": 64, "k": 16},
             {"value": MatrixDescriptor(0x400, 2048, 1024, 0, 1).encode(), "rows": 128, "k": 16, "major": "MN"},
             {"value": MatrixDescriptor(0x400, 128, 0, 0, 0).encode(), "rows": 64, "k": 16},
             {"value": MatrixDescriptor(0x420, 16, 1024, 0, 1).encode(), "rows": 64, "k": 64}],
    "sparse-meta": [{"dtype": "f16", "sel": 0}, {"dtype": "tf32", "sel": 1}, {"dtype": "e4m3", "sel": 0}],
}
CASES = [(k, o) for k in KINDS for o in SAMPLES.get(k, [{}])]
IDS = [f"{k}-{'-'.join(str(v) for v in o.values()) or 'default'}" for k, o in CASES]


# ----------------------------------------------------------------------------- colour (independent of core)

def css_rgb(c: str) -> tuple[float, float, float]:
    c = c.strip().lower()
    if c.startswith("#"):
        h = c[1:]
        h = "".join(ch * 2 for ch in h) if len(h) == 3 else h
        return tuple(int(h[i:i + 2], 16) / 255 for i in (0, 2, 4))
    m = re.fullmatch(r"hsl\(([-\d.]+),([\d.]+)%,([\d.]+)%\)", c.replace(" ", ""))
    assert m, f"colour the test cannot read: {c}"
    h, s, l = float(m.group(1)) % 360 / 360, float(m.group(2)) / 100, float(m.group(3)) / 100
    return colorsys.hls_to_rgb(h, l, s)


NAMED = {"white": "#fff", "black": "#000"}


def wcag(a: str, b: str) -> float:
    def lum(c):
        r, g, bl = (v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
                    for v in css_rgb(NAMED.get(c, c)))
        return 0.2126 * r + 0.7152 * g + 0.0722 * bl
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_contrast_formula_known_values():
    assert wcag("#000", "#fff") == pytest.approx(21.0)
    assert wcag("#777", "#fff") == pytest.approx(4.48, abs=0.01)      # the classic "just fails" grey
    assert wcag("hsl(0,100%,50%)", "#fff") == pytest.approx(4.0, abs=0.01)   # pure red on white


# ----------------------------------------------------------------------------- SVG reading

class Svg:
    """An SVG with its style rules and a parent map, able to resolve a text's size, colour and box."""

    def __init__(self, text: str):
        self.root = ET.fromstring(text.split("?>", 1)[-1] if text.startswith("<?xml") else text)
        self.parent = {c: p for p in self.root.iter() for c in p}
        style = "".join(s.text or "" for s in self.root.iter(f"{NS}style"))
        self.rules: list[tuple[str, dict]] = []
        for sel, body in re.findall(r"([^{}]+)\{([^{}]*)\}", style):
            decl = dict(tuple(x.strip() for x in d.split(":", 1)) for d in body.split(";") if ":" in d)
            for one in sel.split(","):
                self.rules.append((one.strip(), decl))

    def ancestors(self, el):
        while el in self.parent:
            el = self.parent[el]
            yield el

    def _classes(self, el) -> set[str]:
        return set((el.get("class") or "").split())

    def _matches(self, sel: str, el) -> bool:
        parts = sel.split()
        last = parts[-1]
        m = re.fullmatch(r"(text|rect)?((?:\.[\w-]+)*)", last)
        if not m:
            return False
        if m.group(1) and el.tag != f"{NS}{m.group(1)}":
            return False
        if not set(c for c in m.group(2).split(".") if c) <= self._classes(el):
            return False
        if len(parts) == 2:
            want = parts[0].lstrip(".")
            return any(want in self._classes(a) for a in self.ancestors(el))
        return len(parts) == 1

    def prop(self, el, name: str, default: str | None = None) -> str | None:
        """style attribute > presentation attribute > matching rule (later wins, more specific
        first: any rule with a class beats 'text') > inherited from an ancestor."""
        for node in [el, *self.ancestors(el)]:
            st = dict(tuple(x.strip() for x in d.split(":", 1)) for d in (node.get("style") or "").split(";")
                      if ":" in d)
            if name in st:
                return st[name]
            best, best_spec = None, -1
            for sel, decl in self.rules:
                if name in decl and self._matches(sel, node):
                    spec = sel.count(".") * 10 + len(sel.split())
                    if spec >= best_spec:
                        best, best_spec = decl[name], spec
            if node.get(name) is not None and best_spec < 10:
                return node.get(name)
            if best is not None:
                return best
            if node.get(name) is not None:
                return node.get(name)
        return default

    def size(self, el) -> float:
        return float(str(self.prop(el, "font-size", "16")).replace("px", ""))

    def box(self, el) -> tuple[float, float, float, float]:
        """(x0, y0, x1, y1) of a text element (monospace advance estimate, ascent .8, descent .25)."""
        size = self.size(el)
        x, y = float(el.get("x", 0)), float(el.get("y", 0))
        for a in self.ancestors(el):
            m = re.match(r"translate\(([-\d.]+),([-\d.]+)\)", a.get("transform", ""))
            if m:
                x, y = x + float(m.group(1)), y + float(m.group(2))
        w = len("".join(el.itertext()) if el.find(f"{NS}title") is None else (el.text or "")) * size * ADVANCE
        anchor = self.prop(el, "text-anchor", "start")
        x0 = x - w / 2 if anchor == "middle" else x - w if anchor == "end" else x
        return x0, y - 0.8 * size, x0 + w, y + 0.25 * size

    def texts(self):
        for t in self.root.iter(f"{NS}text"):
            if (t.text or "").strip() or len(t):
                yield t


def panels(svg: Svg) -> list[dict]:
    out = []
    for p in svg.root.iter(f"{NS}g"):
        if p.get("class") != "panel":
            continue
        x0, y0, cw, ch = (float(p.get(k)) for k in ("data-x0", "data-y0", "data-cw", "data-ch"))
        rows, cols = int(p.get("data-rows")), int(p.get("data-cols"))
        fills, labels = {}, []
        for g in p:
            if g.get("class") == "cells":
                for row in g:
                    r = round((float(re.search(r",([-\d.]+)\)", row.get("transform")).group(1)) - y0) / ch)
                    for rect in row:
                        fill = svg.prop(rect, "fill")
                        c0 = round((float(rect.get("x")) - x0) / cw)
                        for c in range(c0, c0 + round(float(rect.get("width")) / cw)):
                            fills[(r, c)] = fill
            elif g.get("class") == "labels":
                labels += [t for row in g for t in row]
        out.append({"el": p, "x0": x0, "y0": y0, "cw": cw, "ch": ch, "rows": rows, "cols": cols,
                    "fills": fills, "labels": labels,
                    "area": (x0, y0, x0 + cols * cw, y0 + rows * ch)})
    return out


def _overlap(a, b, eps=0.5) -> bool:
    return a[0] < b[2] - eps and b[0] < a[2] - eps and a[1] < b[3] - eps and b[1] < a[3] - eps


# ----------------------------------------------------------------------------- legend keys

def legend_keys(text: str) -> list[str]:
    """Notation keys a legend text defines: 'KEY = meaning' clauses whose KEY is notation
    (has <placeholders> or is punctuation only, e.g. '!', '*', '-+-')."""
    keys = []
    for clause in text.split("; "):
        if " = " not in clause:
            continue
        key = clause.split(" = ", 1)[0].strip().split(": ")[-1]     # "tile cells: X<n>" -> "X<n>"
        if "<" in key or re.fullmatch(r"[^\w\s]+", key):
            keys.append(key)
    return keys


def key_regex(key: str) -> re.Pattern:
    parts = re.split(r"<[^<>]+>|\.\.\.", key)      # <placeholder> or "..." (any digits)
    return re.compile(r"[\w-]*".join(re.escape(p) for p in parts))


SVG_ONLY_WORDS = re.compile(r"\b(colou?rs?|shades?|hues?|lighter|darker|outlines?|dashed|thick|thin|swatch|gr[ae]y|"
                            r"bold|arrows?)\b", re.I)
INTERNAL_NAME = re.compile(r"\b[a-z]+_[a-z_]+\b")


# ----------------------------------------------------------------------------- the rules

@pytest.fixture(scope="module")
def drawn():
    cache = {}

    def get(kind, opts, fmt):
        key = (kind, repr(sorted(opts.items())), fmt)
        if key not in cache:
            cache[key] = render(kind, fmt, **opts)
        return cache[key]
    return get


@pytest.mark.parametrize("kind,opts", CASES, ids=IDS)
def test_svg_text_size_placement_and_contrast(kind, opts, drawn):
    svg = Svg(drawn(kind, opts, "svg"))
    ps = panels(svg)
    assert ps, "a diagram has at least one panel"
    own = set()
    for p in ps:
        for t in p["labels"]:
            own.add(t)
            x0, y0, x1, y1 = svg.box(t)
            cx = (x0 + x1) / 2 - p["x0"]
            cy = (y0 + y1) / 2 - p["y0"]
            r, c = int(cy // p["ch"]), int(cx // p["cw"])
            cell = (p["x0"] + c * p["cw"], p["y0"] + r * p["ch"], p["x0"] + (c + 1) * p["cw"],
                    p["y0"] + (r + 1) * p["ch"])
            assert (cell[0] - .5 <= x0 and x1 <= cell[2] + .5 and cell[1] - .5 <= y0 and y1 <= cell[3] + .5), \
                f"label {t.text!r} spills out of its cell ({r}, {c})"
            fg, bg = svg.prop(t, "fill", "#000"), p["fills"][(r, c)]
            assert wcag(fg, bg) >= MIN_CONTRAST, f"label {t.text!r}: {fg} on {bg} = {wcag(fg, bg):.2f}"
    areas = [p["area"] for p in ps]
    others = []
    for t in svg.texts():
        assert svg.size(t) >= MIN_FONT, f"{''.join(t.itertext())!r} is {svg.size(t)} px"
        if t in own:
            continue
        b = svg.box(t)
        others.append((b, "".join(t.itertext())))
        for a in areas:
            assert not _overlap(b, a), f"text {''.join(t.itertext())!r} lies on the cells of a panel"
        fg = svg.prop(t, "fill", "#000")
        assert wcag(fg, "#fff") >= MIN_CONTRAST, f"{''.join(t.itertext())!r}: {fg} on white"
    others.sort()
    for i, (b, s) in enumerate(others):   # margin texts do not collide either
        for b2, s2 in others[i + 1:]:
            if b2[0] >= b[2]:
                break
            assert not _overlap(b, b2, eps=1.0), f"{s!r} overlaps {s2!r}"


@pytest.mark.parametrize("kind,opts", CASES, ids=IDS)
def test_every_fill_has_a_readable_ink(kind, opts):
    """Every fill any panel uses has black or white text at WCAG >= 4.5 (the renderer picks it)."""
    d = diagram(kind, **opts)
    fills = {f for p in d.panels for row in p.fills for f in row if f}
    for f in fills:
        assert max(wcag("#000", f), wcag("#fff", f)) >= MIN_CONTRAST, f


@pytest.mark.parametrize("kind,opts", CASES, ids=IDS)
def test_svg_legend_entries_exist_in_the_picture(kind, opts, drawn):
    svg = Svg(drawn(kind, opts, "svg"))
    ps = panels(svg)
    used_fills = {f for p in ps for f in p["fills"].values()}
    classes = {c for p in ps for el in p["el"].iter() for c in (el.get("class") or "").split()}
    labels = ["".join(t.itertext()) for p in ps for t in p["el"].iter(f"{NS}text")]   # cells, heads, notes
    items = [g for g in svg.root.iter(f"{NS}g") if g.get("class") == "item"]
    d = diagram(kind, **opts)
    assert len(items) == sum(k != "@ascii" for k, _ in d.legend)
    for it in items:
        txt = "".join(t.text or "" for t in it.iter(f"{NS}text"))
        if it.get("data-fill"):
            assert it.get("data-fill") in used_fills, f"legend colour of {txt!r} is not in the picture"
        if it.get("data-mark"):
            want = {"focus": "focus", "thick": "thick", "thin": "box", "arrow": "ar"}[it.get("data-mark")]
            assert want in classes, f"legend marker of {txt!r} ({want}) is not in the picture"
        for key in legend_keys(txt):
            assert any(key_regex(key).search(s) for s in labels), f"legend key {key!r} is not in the panels"


@pytest.mark.parametrize("kind,opts", CASES, ids=IDS)
def test_ascii_legend_lists_only_what_ascii_shows(kind, opts, drawn):
    text = drawn(kind, opts, "ascii")
    body, _, rest = text.partition("\nlegend:\n")
    legend = [ln.strip() for ln in rest.split("\n\n")[0].splitlines() if ln.startswith("  ")]
    assert legend, "an ascii diagram prints a legend"
    for ln in legend:
        bad = SVG_ONLY_WORDS.search(ln) or INTERNAL_NAME.search(ln)
        assert not bad, f"ascii legend line {ln!r} names {bad.group(0)!r}, which ascii does not show"
        for key in legend_keys(ln):
            assert key_regex(key).search(body), f"ascii legend key {key!r} does not occur in the ascii picture"


@pytest.mark.parametrize("kind,opts", [c for c in CASES if c[0] == "desc"], ids=[i for c, i in zip(CASES, IDS)
                                                                                 if c[0] == "desc"])
def test_desc_svg_and_html_carry_the_report(kind, opts, drawn):
    d = diagram(kind, **opts)
    svg = Svg(drawn(kind, opts, "svg"))
    rep = [g for g in svg.root.iter(f"{NS}g") if g.get("class") == "report"]
    assert len(rep) == 1
    words = " ".join("".join(t.itertext()).replace("\u00a0", " ") for t in rep[0].iter(f"{NS}text")).split()
    assert words == " ".join(d.text_before).split(), "every decoded field and check, every word, in order"
    warn = [t for t in rep[0].iter(f"{NS}text") if "warn" in (t.get("class") or "")]
    assert bool(warn) == any(ln.lstrip().startswith("!") for ln in d.text_before)
    html = drawn(kind, opts, "html")
    assert "white-space:pre-wrap" in html.replace(" ", "") and "<pre class=report>" in html
    for ln in d.text_before:
        if ln.lstrip().startswith("!"):
            assert ln.strip()[2:40].replace("&", "&amp;").replace("<", "&lt;") in html


@pytest.mark.parametrize("kind,opts", CASES[::3], ids=IDS[::3])
def test_html_legend_is_the_pictures(kind, opts, drawn):
    d = diagram(kind, **opts)
    html = drawn(kind, opts, "html")
    ul = html.split('<ul class="legend">', 1)[1].split("</ul>", 1)[0]
    assert ul.count("<li>") == sum(k != "@ascii" for k, _ in d.legend)


def test_wide_accumulator_is_cut_into_readable_blocks(drawn):
    """N = 256 is drawn as column blocks each with its own axes, no wider than a screen."""
    svg = Svg(drawn("acc", {"n": 256, "dtype": "f32"}, "svg"))
    ps = panels(svg)
    assert len(ps) >= 8 and sum(p["cols"] for p in ps) == 256
    assert float(svg.root.get("width")) <= 1500
    for p in ps:
        heads = [t.text for g in p["el"] if g.get("class") == "colheads" for t in g]
        c0 = int(p["el"].get("data-c0"))
        assert heads == [str(c0 + c) for c in range(p["cols"])], "each block repeats its column axis"
        rows = [t.text for g in p["el"] if g.get("class") == "rowheads" for t in g]
        assert rows == [str(r) for r in range(64)], "and its row axis"


# ----------------------------------------------------------------------------- the pipeline timeline

def _pipeline_reports():
    from refmodel.machine import pipeline as pl
    return [pl.check(pl.gemm_mainloop_trace(stages=4, k_iters=8, wait_depth=1, consumers=1)),
            pl.check(pl.gemm_mainloop_trace(broken="early_reuse")),
            pl.check(pl.gemm_mainloop_trace(stages=3, k_iters=5, consumers=1, broken="lax_wait"))]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_pipeline_svg_rules(which):
    from refmodel.machine.hazards import format_hazard
    from refmodel.machine.pipeline_draw import draw_ascii, draw_svg, legend_for

    rep = _pipeline_reports()[which]
    text = draw_svg(rep)
    svg = Svg(text)
    for t in svg.texts():
        assert svg.size(t) >= MIN_FONT
        assert wcag(svg.prop(t, "fill", "#000"), "#fff") >= MIN_CONTRAST
    # the producer's TMA lane
    labels = [t.text for t in svg.texts()]
    assert any(s and s.endswith("(TMA)") for s in labels) and any(s and s.startswith("slot full") for s in labels)
    assert "(TMA)" in draw_ascii(rep) and "slot full0" in draw_ascii(rep)
    # every hazard explained in a tooltip of a hazard mark
    tips = [t.text or "" for g in svg.root.iter(f"{NS}g") if g.get("class") == "hazard"
            for t in g.iter(f"{NS}title")]
    for h in rep.hazards:
        assert any(format_hazard(h, rep.events) in tip for tip in tips), h.kind
    # the colour legend: every swatch colour is used by a shape outside the legend
    legend = [g for g in svg.root.iter(f"{NS}g") if g.get("class") == "legend"][0]
    inside = set(legend.iter())
    outside = {(el.get("fill"), el.get("stroke")) for el in svg.root.iter() if el not in inside}
    colours = {c for pair in outside for c in pair if c}
    items = [g for g in legend if g.get("class") == "item"]
    assert len(items) >= 4
    for it in items:
        assert it.get("data-colour") in colours, it.get("data-key")
    # the footer: the op key word-wrapped, never cut inside a word
    key = legend_for(rep)
    foot = [t.text for t in svg.texts() if t.text and t.text.split()[0] in key.split()]
    words = " ".join(foot).split()
    assert " ".join(words[-len(key.split()):]) == " ".join(key.split())
    assert ("hazard" in key) == bool(rep.hazards) and key in draw_ascii(rep)
