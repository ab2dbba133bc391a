"""Generate the layout gallery and the "debug your descriptor" page from refmodel.render.

    python tools/gen_gallery.py          # writes docs/gallery/*.svg, docs/gallery/index.html,
                                         #        docs/debug-descriptor.md
    python tools/gen_gallery.py --check  # exit 1 if any of them is out of date (used by the tests)

Everything is computed by refmodel.render from refmodel.layouts; nothing here is drawn by hand.
"""

from __future__ import annotations

import argparse
import html
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from refmodel.layouts.descriptor import MatrixDescriptor  # noqa: E402
from refmodel.numerics.explain import doc_case, explain_dot  # noqa: E402
from refmodel.render import diagram, to_ascii, to_svg  # noqa: E402
from refmodel.render.explain_draw import render_explain  # noqa: E402

GALLERY = "docs/gallery"
DEBUG_PAGE = "docs/debug-descriptor.md"
INLINE_LIMIT = 40_000  # bytes: bigger SVGs are shown through <img> (the index stays small)

# (file stem, kind, options, one-line blurb)
ENTRIES: list[tuple[str, str, dict, str]] = [
    *[(f"acc_n{n}_{dt}", "acc", {"n": n, "dtype": dt},
       f"accumulator m64n{n} {dt}: thread and register of every D element")
      for n in (8, 64, 256) for dt in ("f32", "f16")],
    *[(f"a-frag_{dt}", "a-frag", {"dtype": dt}, f"RS-form A fragment, {dt}") for dt in ("f16", "tf32", "e4m3")],
    ("stmatrix_x4", "stmatrix", {"num": 4, "trans": False}, "stmatrix.x4: address givers vs data holders"),
    ("stmatrix_x4_trans", "stmatrix", {"num": 4, "trans": True}, "stmatrix.x4.trans"),
    ("ldmatrix_x1", "ldmatrix", {"num": 1, "trans": False}, "ldmatrix.x1: only lanes 0-7 give addresses"),
    *[(f"swizzle_{m}", "swizzle", {"mode": m, "dtype": "f16"}, f"{m} swizzle: 16-byte atom permutation")
      for m in ("32B", "64B", "128B")],
    *[(f"smem_{maj}_{m}_f16", "smem", {"major": maj, "mode": m, "dtype": "f16"},
       f"f16 operand, {maj}-major, swizzle {m}") for maj in ("K", "MN") for m in ("none", "128B")],
    ("smem_K_128B_e4m3", "smem", {"major": "K", "mode": "128B", "dtype": "e4m3", "rows": 32},
     "e4m3 operand (32 rows), K-major, 128B"),
    ("desc_example", "desc", {"value": MatrixDescriptor(0x400, 16, 1024, 0, 1).encode(), "dtype": "f16",
                              "rows": 64, "k": 16, "major": "K"},
     "wgref desc: a K-major 128B descriptor and the bytes it reads"),
    *[(f"sparse-meta_{dt}_sel{sel}", "sparse-meta", {"dtype": dt, "sel": sel},
       f"sparse wgmma sp-meta, {dt}, sp-sel {sel}: which lane and nibble hold each row's metadata")
      for dt, sel in (("f16", 0), ("f16", 1), ("tf32", 0), ("e4m3", 0))],
    *[(f"epilogue_n{n}_bf16_128B", "epilogue", {"n": n, "dtype": "bf16", "swizzle": "128B"},
       f"epilogue m64n{n}: cvt to bf16x2, then one stmatrix.x4 per 16-column slice into a 128B-swizzled tile")
      for n in (64, 256)],
    *[(f"sparse-compress_{dt}_sel{sel}", "sparse-compress", {"dtype": dt, "sel": sel},
       f"sparse compression, {dt}, sp-sel {sel}: quartet -> kept pair -> nibble -> lane and bit")
      for dt, sel in (("f16", 0), ("f16", 1), ("e4m3", 0))],
]

# (file stem, explain_dot keyword arguments or "doc", command-line arguments, one-line blurb)
EXPLAIN: list[tuple[str, object, str, str]] = [
    ("explain-dot_doc", "doc", "--case doc",
     "explain-dot, the doc's case: C = 1 + 2^-20, A = 0 gives 1.0 (C is aligned and truncated like any term)"),
]


def gallery_files() -> dict[str, str]:
    """{relative path: text} of every gallery file."""
    out: dict[str, str] = {}
    cards = []
    for stem, kind, opts, blurb in ENTRIES:
        d = diagram(kind, **opts)
        svg = to_svg(d)
        name = f"{stem}.svg"
        out[f"{GALLERY}/{name}"] = svg
        if len(svg.encode()) <= INLINE_LIMIT:
            fig = svg
        else:
            fig = (f'<img src="{name}" alt="{html.escape(d.title)}" loading="lazy" style="max-width:100%">'
                   f'<p class="big">large diagram ({len(svg.encode()) // 1000} kB): '
                   f'<a href="{name}">open it at full size</a> to read every label (zoom in: it is an SVG)</p>')
        legend = "".join(f"<li>{html.escape(t)}</li>" for f, t in d.legend if not f)
        cards.append(f'<section id="{stem}"><h2><a href="{name}">{html.escape(d.title)}</a></h2>'
                     f'<p class="blurb">{html.escape(blurb)} &mdash; <code>{_command(kind, opts)}</code></p>'
                     f'<div class="fig">{fig}</div><ul class="notes">{legend}</ul>'
                     + "".join(f"<p>{html.escape(c)}</p>" for c in d.caption) + "</section>")
    for stem, case, argv, blurb in EXPLAIN:
        ex = doc_case() if case == "doc" else explain_dot(**case)
        svg = render_explain(ex, "svg")
        name = f"{stem}.svg"
        out[f"{GALLERY}/{name}"] = svg
        cards.append(f'<section id="{stem}"><h2><a href="{name}">{html.escape(blurb)}</a></h2>'
                     f'<p class="blurb"><code>wgref explain-dot {html.escape(argv)} --format svg</code></p>'
                     f'<div class="fig">{svg}</div></section>')
    toc = "".join(f'<li><a href="#{s}">{html.escape(b)}</a></li>' for s, _, _, b in ENTRIES)
    toc += "".join(f'<li><a href="#{s}">{html.escape(b)}</a></li>' for s, _, _, b in EXPLAIN)
    out[f"{GALLERY}/index.html"] = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>wgref layout gallery</title>
<style>
body{{font-family:system-ui,sans-serif;margin:1.5em;max-width:1500px;color:#111}}
section{{border-top:1px solid #bbb;margin-top:1.5em}} .fig{{overflow:auto;max-height:80vh}}
.fig svg{{max-width:100%;height:auto}} .blurb{{color:#333}} .notes{{color:#444;font-size:.9em}}
</style></head><body>
<h1>wgref layout gallery</h1>
<p>Generated by <code>tools/gen_gallery.py</code> from <code>refmodel.render</code>, which draws
<code>refmodel.layouts</code>: the layouts the H200 fixtures check (<code>fixtures/layouts</code>,
<code>fixtures/wgmma</code>). Each diagram names the PTX ISA section / CuTe file it mirrors.
Make your own with <code>wgref layout KIND --format svg|html -o FILE</code> and
<code>wgref desc 0x... --dtype f16 --rows 64 --k 16 --major K</code>
(see <a href="../debug-descriptor.md">debug your descriptor</a>).</p>
<p><b><a href="explore.html">The explorer</a></b> (<code>wgref explore -o explore.html</code>): every layout
of this page in one offline file — hover a cell for its thread, register and address, click a thread to
light its elements, paste a descriptor; the link keeps the selection. The keyboard does what the mouse does
(Tab into the grid, arrows / Home / End / Page Up / Page Down move, Enter or Space selects), each view has a
legend of its colours, labels keep a contrast of 4.5:1, zoom &rarr; overview draws m64n256 one cell per 8
columns (it fits 1600 px), and the FP8 dot-product view explains worked examples bit by bit as
<code>wgref explain-dot</code> does. Lookups without a browser:
<code>wgref layout acc --n 256 --at 37,200 --json</code>, <code>--thread T</code>,
<code>wgref desc HEX ... --at ROW,K</code>.</p>
<ol>{toc}</ol>
{chr(10).join(cards)}
</body></html>
"""
    out[DEBUG_PAGE] = debug_page()
    from refmodel.render.explore import explore_html

    out[f"{GALLERY}/explore.html"] = explore_html()
    return out


def _command(kind: str, opts: dict) -> str:
    if kind == "desc":
        return (f"wgref desc {opts['value']:#018x} --dtype {opts['dtype']} --rows {opts['rows']} "
                f"--k {opts['k']} --major {opts['major']}")
    flags = {"n": "--n", "dtype": "--dtype", "num": "--num", "mode": "--swizzle", "major": "--major", "rows": "--rows",
             "sel": "--sel", "swizzle": "--swizzle"}
    parts = [f"wgref layout {kind}"]
    for key, val in opts.items():
        if key == "trans":
            parts += ["--trans"] if val else []
        else:
            parts.append(f"{flags[key]} {val}")
    return " ".join(parts) + " --format svg"


def _desc_block(value: int, dtype: str, rows: int, k: int, major: str, panel_rows: int = 16) -> str:
    """The command and its real ascii output (tile panel cut to ``panel_rows`` rows)."""
    text = to_ascii(diagram("desc", value=value, dtype=dtype, rows=rows, k=k, major=major))
    lines, out, in_panel, kept = text.splitlines(), [], False, 0
    for line in lines:
        if line.startswith("-- "):
            in_panel, kept = True, 0
            out.append(line)
            continue
        if in_panel and line and not line.startswith(("arrow", "LBO", "SBO", "!", "(", "memory")):
            kept += 1
            if kept == panel_rows + 2:
                out.append("   ...")
            if kept > panel_rows + 1:
                continue
        if not line:
            in_panel = False
        out.append(line)
    cmd = f"wgref desc {value:#018x} --dtype {dtype} --rows {rows} --k {k} --major {major}"
    return f"```text\n$ {cmd}\n" + "\n".join(out) + "\n```\n"


def debug_page() -> str:
    """docs/debug-descriptor.md: a correct descriptor, LBO/SBO swapped (MN-major), a 128B start off its pattern."""
    good = MatrixDescriptor(0x400, 16, 1024, 0, 1).encode()
    mn_good = MatrixDescriptor(0x400, 1024, 2048, 0, 1).encode()
    mn_bad = MatrixDescriptor(0x400, 2048, 1024, 0, 1).encode()
    off = MatrixDescriptor(0x480, 16, 1024, 0, 1).encode()
    off_fixed = MatrixDescriptor(0x480, 16, 1024, 1, 1).encode()
    return f"""# Debug your descriptor

*Generated by `tools/gen_gallery.py` from `refmodel.render` (a test keeps it current). Every
output below is the real output of the command shown.*

A wgmma reads its shared-memory operands through a 64-bit *matrix descriptor*: start address,
leading- and stride-dimension byte offsets (LBO, SBO), a base offset and the swizzle mode
(PTX ISA "Matrix Descriptor Format"; CuTe `GmmaDescriptor`). A wrong field does not fault: the
MMA silently reads other bytes. `wgref desc` shows which bytes it reads, with the rule the H200
fixtures confirmed (`fixtures/layouts`: the start plus the canonical layout's offsets, then the
swizzle of the *absolute* address with the base offset subtracted from the 128-byte line index).

Paste the descriptor and the tile's shape (`--rows`: 64 for A, N for B; `--k`: the K the wgmma
reads; `--major K|MN`; `--dtype`). The report decodes each field, says what LBO and SBO mean
*in this mode*, checks it against the dense canonical packing of that tile, and draws the tile:
each cell is the hex address of the element's first byte; `!` marks elements read from another
byte than a dense canonical tile at the same start would hold them. `--format svg|html -o FILE`
draws it (core matrices coloured, swizzle atoms outlined, LBO/SBO as arrows, and the shared
memory lines showing which element each 16-byte atom holds).

## A correct descriptor

f16 A tile, 64 x 16, K-major, 128B swizzle, at 0x400 (on the 1024-byte pattern):

{_desc_block(good, "f16", 64, 16, "K")}
## Classic mistake 1: LBO and SBO exchanged for an MN-major operand (unless the tile is two TMA boxes)

For a swizzled MN-major operand (a transposed f16 B, N = 128) **LBO steps along MN** (between
{1024}-byte blocks of 64 MN elements) and **SBO along K** (between groups of 8 K columns) — the
opposite of the no-swizzle MN-major layout and of what the names suggest. The dense canonical
descriptor is `{mn_good:#018x}` (LBO 1024, SBO 2048). With the two values exchanged the descriptor
is wrong for a densely packed tile — and right for a tile written as two 64-wide TMA boxes, each
64-element MN block stored whole. `wgref desc` cannot know which the kernel wrote, so it says which
packing its check assumes and what each value would be right for:

{_desc_block(mn_bad, "f16", 128, 16, "MN")}
For a densely packed tile, columns 8-15 (the second group of 8 K columns) are then read from the
second 64-row MN block's bytes, and rows 64-127 from the next K group's (the `!` cells).

## Classic mistake 2: a 128B tile not on the 1024-byte pattern, base offset 0

The swizzle acts on the absolute shared address. A 128B tile placed at 0x480 (128-byte aligned,
but 128 bytes into a 1024-byte pattern) with base offset 0:

{_desc_block(off, "f16", 64, 16, "K")}
Row 0 is read from 0x490.., not 0x480..: every element is off. Either align the tile to 1024
bytes, or tell the hardware where the pattern starts with the base offset, `(start >> 7) & 7`
(`{off_fixed:#018x}`):

{_desc_block(off_fixed, "f16", 64, 16, "K", panel_rows=8)}
A start that is not on a 128-byte line (e.g. +32 B) is normal: it is how a kernel steps K inside
the swizzled rows of a tile written at an aligned address, and the report says so instead of
marking it.
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".gen-", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; generated docs are for everyone to read
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a generated file is out of date")
    args = ap.parse_args(argv)
    files = gallery_files()
    stale = []
    for rel, text in files.items():
        path = ROOT / rel
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(rel)
        else:
            _write(path, text)
    gal = ROOT / GALLERY
    extra = sorted(p.name for p in gal.glob("*") if f"{GALLERY}/{p.name}" not in files) if gal.is_dir() else []
    if extra:
        if args.check:
            stale += [f"{GALLERY}/{n} (not generated: remove it)" for n in extra]
        else:
            for n in extra:
                (gal / n).unlink()
    if stale:
        print("out of date: " + ", ".join(stale) + " (run python tools/gen_gallery.py)")
        return 1
    if not args.check:
        total = sum(len(t.encode()) for r, t in files.items() if r.startswith(GALLERY))
        print(f"wrote {len(files)} files; gallery {total / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
