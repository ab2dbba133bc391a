"""Teaching renderers (refmodel.render), `wgref layout` / `wgref desc`, and the gallery in a browser.

Cell contents are checked against values computed here from the PTX formulas (thread
t = 32w + 4g + q ...) or straight from refmodel.layouts, not from the renderer's own code.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from refmodel.errors import InputError
from refmodel.layouts.descriptor import MatrixDescriptor, operand_addresses
from refmodel.layouts.smem import SmemLayout, dense_strides
from refmodel.layouts.swizzle import atom_table, swizzle_mode
from refmodel.render import KINDS, diagram, render, to_ascii

ROOT = Path(__file__).resolve().parent.parent
NS = "{http://www.w3.org/2000/svg}"


# ----------------------------------------------------------------------------- SVG reading

def _translate_y(g: ET.Element) -> float:
    m = re.match(r"translate\(0,([-\d.]+)\)", g.get("transform", ""))
    assert m, g.attrib
    return float(m.group(1))


def svg_panels(svg: str) -> list[dict]:
    """Parse an SVG and return, per panel, its size and {(row, col): label} / covered cells."""
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg" and root.get("viewBox")
    out = []
    for p in root.iter(f"{NS}g"):
        if p.get("class") != "panel":
            continue
        rows, cols = int(p.get("data-rows")), int(p.get("data-cols"))
        x0, y0 = float(p.get("data-x0")), float(p.get("data-y0"))
        cw, ch = float(p.get("data-cw")), float(p.get("data-ch"))
        cells, labels = np.zeros((rows, cols), int), {}
        for g in p:
            if g.get("class") == "cells":
                for row_g in g:
                    r = round((_translate_y(row_g) - y0) / ch)
                    for rect in row_g:
                        c0 = round((float(rect.get("x")) - x0) / cw)
                        n = round(float(rect.get("width")) / cw)
                        cells[r, c0:c0 + n] += 1
            elif g.get("class") == "labels":
                for row_g in g:
                    r = round((_translate_y(row_g) - y0 - ch / 2) / ch)
                    for t in row_g:
                        c = int((float(t.get("x")) - x0) // cw)
                        assert (r, c) not in labels
                        labels[(r, c)] = t.text
        out.append({"title": p.get("data-title"), "rows": rows, "cols": cols, "cells": cells, "labels": labels,
                    "r0": int(p.get("data-r0", 0)), "c0": int(p.get("data-c0", 0))})
    return out


def merged(svg: str) -> list[dict]:
    """svg_panels with the column blocks of one wide matrix (titles "<t> — columns a-b") joined
    back into one panel whose labels use the matrix's own column numbers."""
    out: list[dict] = []
    for p in svg_panels(svg):
        base = p["title"].split(" — columns ")[0]
        if out and out[-1]["title"] == base and p["c0"] > 0:
            q = out[-1]
            q["labels"].update({(r, c + p["c0"]): s for (r, c), s in p["labels"].items()})
            q["cells"] = np.concatenate([q["cells"], p["cells"]], axis=1)
            q["cols"] += p["cols"]
        else:
            out.append({**p, "title": base, "labels": dict(p["labels"])})
    return out


def _expected_acc(t: int, i: int) -> tuple[int, int]:
    """PTX formula of the D fragment: element i of thread t."""
    w, lane = divmod(t, 32)
    g, q = divmod(lane, 4)
    return 16 * w + g + 8 * ((i >> 1) & 1), 2 * q + (i & 1) + 8 * (i >> 2)


# ----------------------------------------------------------------------------- every kind parses

SWEEP = [("acc", {"n": n, "dtype": dt}) for n in (8, 16, 64, 136, 256) for dt in ("f32", "f16", "s32")]
SWEEP += [("a-frag", {"dtype": dt}) for dt in ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8")]
SWEEP += [(op, {"num": n, "trans": t}) for op in ("stmatrix", "ldmatrix") for n in (1, 2, 4) for t in (False, True)]
SWEEP += [("swizzle", {"mode": m, "dtype": dt}) for m in ("none", "32B", "64B", "128B") for dt in ("f16", "e4m3", "tf32")]
SWEEP += [("smem", {"major": maj, "mode": m, "dtype": "f16", "rows": r}) for maj in ("K", "MN")
          for m in ("none", "32B", "64B", "128B") for r in (8, 64, 128)]
SWEEP += [("smem", {"major": "K", "mode": m, "dtype": dt}) for m in ("none", "128B") for dt in ("e4m3", "tf32")]
SWEEP += [("desc", {"value": MatrixDescriptor(0x400, 16, 1024, 0, 1).encode(), "rows": 64, "k": 16}),
          ("desc", {"value": MatrixDescriptor(0x480, 128, 256, 0, 0).encode(), "dtype": "e4m3", "rows": 64}),
          ("desc", {"value": MatrixDescriptor(0x400, 2048, 1024, 0, 1).encode(), "rows": 128, "k": 16, "major": "MN"}),
          ("desc", {"value": MatrixDescriptor(0x420, 16, 1024, 0, 1).encode(), "rows": 64, "k": 16}),
          ("desc", {"value": MatrixDescriptor(0x400, 128, 0, 0, 0).encode(), "rows": 64, "k": 16})]
SWEEP += [("sparse-meta", {"dtype": dt, "sel": s}) for dt in ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8")
          for s in ((0, 1) if dt in ("f16", "bf16", "tf32") else (0,))]


@pytest.mark.parametrize("kind,opts", SWEEP, ids=[f"{k}-{'-'.join(map(str, o.values()))}" for k, o in SWEEP])
def test_every_diagram_renders_in_all_formats(kind, opts):
    svg = render(kind, "svg", **opts)
    panels = svg_panels(svg)
    d = diagram(kind, **opts)
    assert len(panels) == len(d.panels) >= 1
    for p, dp in zip(panels, d.panels):
        assert (p["rows"], p["cols"]) == (dp.rows, dp.cols)
        assert (p["cells"] == 1).all(), "every cell drawn exactly once"
        want = {(r, c): s for r, row in enumerate(dp.labels) for c, s in enumerate(row) if s}
        assert p["labels"] == want
    root = ET.fromstring(svg)
    assert root.find(f"{NS}title").text == d.title
    texts = " ".join(t.text or "" for t in root.iter(f"{NS}text"))
    assert "legend" in texts and "mirrors:" in texts and "verified on the H200: fixtures/" in texts
    html = render(kind, "html", **opts)
    assert html.startswith("<!doctype html>") and "<svg" in html and "Legend" in html and d.title in html
    text = render(kind, "ascii", **opts)
    assert text.startswith(d.title) and "mirrors:" in text and "legend:" in text


def test_kinds_are_the_documented_ones():
    assert set(KINDS) >= {"acc", "a-frag", "stmatrix", "ldmatrix", "swizzle", "smem", "desc", "sparse-meta"}


# ----------------------------------------------------------------------------- contents

@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_acc_n64_every_cell_names_its_thread_and_register(dtype):
    p = merged(render("acc", "svg", n=64, dtype=dtype))[0]
    assert len(p["labels"]) == 64 * 64 and p["cells"].sum() == 64 * 64
    for t in range(128):
        for i in range(32):
            r, c = _expected_acc(t, i)
            want = f"T{t}:r{i}" if dtype == "f32" else f"T{t}:r{i // 2}.{i % 2}"
            assert p["labels"][(r, c)] == want


def test_acc_known_cells():
    p = merged(render("acc", "svg", n=256, dtype="f32"))[0]
    assert p["labels"][(0, 0)] == "T0:r0" and p["labels"][(0, 1)] == "T0:r1"
    assert p["labels"][(17, 2)] == "T37:r0"          # the docstring's worked example
    assert p["labels"][(63, 255)] == "T127:r127"
    assert p["labels"][(8, 8)] == "T0:r6"


def test_acc_ascii_small_case():
    text = render("acc", "ascii", n=8, dtype="f32")
    rows = [ln for ln in text.splitlines() if re.match(r"^\s*\d+: ", ln)]
    assert len(rows) == 64
    for r, line in enumerate(rows):
        cells = line.split(":", 1)[1].replace("|", " ").split()
        for c, s in enumerate(cells):
            t, i = (int(x) for x in re.match(r"T(\d+):r(\d+)", s).groups())
            assert _expected_acc(t, i) == (r, c)


def test_a_fragment_e4m3_and_tf32_labels():
    p = merged(render("a-frag", "svg", dtype="e4m3"))[0]
    assert (p["rows"], p["cols"]) == (64, 32)
    for t in (0, 5, 37, 127):
        w, lane = divmod(t, 32)
        g, q = divmod(lane, 4)
        for i in range(16):
            r, c = 16 * w + g + 8 * ((i >> 2) & 1), 4 * q + (i & 3) + 16 * (i >> 3)
            assert p["labels"][(r, c)] == f"T{t}:r{i >> 2}.b{i & 3}"
    p = merged(render("a-frag", "svg", dtype="tf32"))[0]
    assert (p["rows"], p["cols"]) == (64, 8)
    assert p["labels"][(8, 4)] == "T0:r3"  # row 8*(3&1), col 0 + 4*(3>>1)


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_panels(num, trans):
    addr, data = svg_panels(render("stmatrix", "svg", num=num, trans=trans))
    h, w = (16 if num > 1 else 8), (16 if num == 4 else 8)
    assert (addr["rows"], addr["cols"]) == (data["rows"], data["cols"]) == (h, w)
    assert len(data["labels"]) == 64 * num            # every element held by some lane/register/half
    origin = {0: (0, 0), 1: (8, 0), 2: (0, 8), 3: (8, 8)}
    for j in range(num):
        r0, c0 = origin[j]
        for r in range(8):
            assert addr["labels"][(r0 + r, c0)] == f"L{8 * j + r}>"   # lane 8j+r gives row r of matrix j
        # seed §5.3: thread 0 holds row 0, columns 0-1 of every matrix (trans: rows 0-1 of column 0)
        if trans:
            assert data["labels"][(r0, c0)] == f"T0:r{j}.0" and data["labels"][(r0 + 1, c0)] == f"T0:r{j}.1"
        else:
            assert data["labels"][(r0, c0)] == f"T0:r{j}.0" and data["labels"][(r0, c0 + 1)] == f"T0:r{j}.1"
    assert len(addr["labels"]) == 8 * num             # only lanes 0..8*num-1 give addresses
    text = render("stmatrix", "ascii", num=num, trans=trans)
    assert ("ignored" in text) == (num < 4)


def test_swizzle_permutation_on_the_tiles_own_rows():
    """A W-byte swizzle is drawn over rows of W bytes (W/16 units), 8 rows = one swizzle atom;
    expected: Swizzle<B,4,3> on row r at W*r: unit c -> c ^ ((W*r >> 7) & (2^B - 1))."""
    for mode, bits in (("32B", 1), ("64B", 2), ("128B", 3)):
        w = 16 << bits
        logical, stored = svg_panels(render("swizzle", "svg", mode=mode, dtype="f16", lines=16))
        assert (logical["rows"], logical["cols"]) == (16, w // 16)
        for r in range(16):
            for c in range(w // 16):
                want = c ^ ((w * r >> 7) & ((1 << bits) - 1))
                assert logical["labels"][(r, c)] == f"u{c}:{8 * c}-{8 * c + 7}"
                assert stored["labels"][(r, want)] == f"u{c}:{8 * c}-{8 * c + 7}"
    # independent spot checks: 128B row 5, unit 2 -> 2 ^ 5 = 7; 32B rows 0-3 stay, row 4 swaps the two units
    _, stored = svg_panels(render("swizzle", "svg", mode="128B", dtype="e4m3"))
    assert stored["labels"][(5, 7)] == "u2:32-47"     # 16 e4m3 elements per unit
    _, stored = svg_panels(render("swizzle", "svg", mode="32B", dtype="f16"))
    assert [stored["labels"][(r, 0)] for r in (0, 3, 4, 7)] == ["u0:0-7", "u0:0-7", "u1:8-15", "u1:8-15"]
    text = render("swizzle", "ascii", mode="64B")
    assert "swizzle atom" in text and "16-byte unit" in text and "atom c" not in text


def test_swizzle_colours_follow_the_original_unit():
    for mode in ("32B", "64B", "128B"):
        d = diagram("swizzle", mode=mode)
        logical, stored = d.panels
        w = swizzle_mode(mode).width
        tab = (atom_table(mode, 8) * 16 % w) // 16 if w == 128 else None
        for r in range(8):
            for c in range(w // 16):
                # 128B: the 128-byte-line table of refmodel.layouts; others: the XOR rule on W-byte rows
                p = int(tab[r, c]) if tab is not None else c ^ ((w * r >> 7) & (w // 16 - 1))
                assert stored.fills[r][p] == logical.fills[0][c]


@pytest.mark.parametrize("major,mode", [(m, s) for m in ("K", "MN") for s in ("none", "32B", "64B", "128B")])
def test_smem_offsets_and_strides(major, mode):
    rows, k = 64, (16 if major == "MN" else swizzle_mode(mode).width // 2 if mode != "none" else 16)
    tile, mem = merged(render("smem", "svg", major=major, mode=mode, dtype="f16", rows=rows, k=k))
    assert (tile["rows"], tile["cols"]) == (rows, k)
    lbo, sbo = dense_strides(major, mode, rows, 2 * k if major == "K" else None)
    offs = np.asarray(swizzle_mode(mode).swizzle(SmemLayout(major, mode, 2, lbo, sbo).offsets(rows, k)))
    for (r, c), s in tile["labels"].items():
        assert int(s) == offs[r, 2 * c]
    # the memory panel covers every byte exactly: one label per 16-byte unit
    assert len(mem["labels"]) == rows * k * 2 // 16
    d = diagram("smem", major=major, mode=mode, dtype="f16", rows=rows, k=k)
    arrows = {a[4].split()[0]: a for a in d.panels[0].arrows}
    pre = SmemLayout(major, mode, 2, lbo, sbo).offsets(rows, k)
    for name, val in (("+LBO", lbo), ("+SBO", sbo)):
        if name in arrows:     # the arrow joins two elements whose (pre-swizzle) offsets differ by the stride
            r0, c0, r1, c1, _ = arrows[name]
            assert pre[r1, 2 * c1] - pre[r0, 2 * c0] == val
    assert "+SBO" in arrows


def test_desc_addresses_come_from_operand_addresses():
    v = MatrixDescriptor(0x480, 16, 1024, 0, 1).encode()
    tile, mem = svg_panels(render("desc", "svg", value=v, dtype="f16", rows=64, k=16, major="K"))
    addr = operand_addresses(v, 64, 16, 2, major="K")
    for (r, c), s in tile["labels"].items():
        assert int(s.rstrip("!"), 16) == addr[r, 2 * c]
    assert tile["labels"][(0, 0)] == "490!"             # 128 B into the pattern, base offset 0
    text = render("desc", "ascii", value=v, dtype="f16", rows=64, k=16)
    assert "set base offset = 1" in text and "0x490" in text


def test_desc_reports():
    good = render("desc", "ascii", value=MatrixDescriptor(0x400, 16, 1024, 0, 1).encode(), rows=64, k=16)
    assert "ok: dense canonical strides" in good and "!" not in good.split("-- operand tile")[1].split("--")[0]
    # 128 x 16 MN-major 128B with LBO 2048 / SBO 1024: the tile of two 64-wide TMA boxes -- legal, not "swapped"
    swapped = render("desc", "ascii", value=MatrixDescriptor(0x400, 2048, 1024, 0, 1).encode(),
                     rows=128, k=16, major="MN")
    line = [ln for ln in swapped.splitlines() if "differ from the dense packing" in ln][0]
    assert "LBO = 1024, SBO = 2048" in line and "right if the tile was written as" in line
    assert "2 TMA boxes of 64 (MN) x 16 (K)" in line and "look swapped" not in swapped
    # those strides really are the two-box tile: element (r, k) of box b = r // 64 at b * 2048 + canonical
    box = np.asarray(swizzle_mode("128B").swizzle(SmemLayout("MN", "128B", 2, 1024, 1024).offsets(64, 16)))
    got = operand_addresses(MatrixDescriptor(0x400, 2048, 1024, 0, 1), 128, 16, 2, major="MN")
    assert np.array_equal(got[:64], 0x400 + box) and np.array_equal(got[64:], 0x400 + 2048 + box)
    dense = render("desc", "ascii", value=MatrixDescriptor(0x400, 1024, 2048, 0, 1).encode(), rows=128, k=16,
                   major="MN")
    assert "ok: dense canonical strides" in dense
    odd = render("desc", "ascii", value=MatrixDescriptor(0x400, 3072, 1024, 0, 1).encode(), rows=128, k=16,
                 major="MN")
    assert "fine if the tile was written with these strides" in odd
    overlap = render("desc", "ascii", value=MatrixDescriptor(0x400, 128, 0, 0, 0).encode(), rows=64, k=16)
    assert "SBO is 0" in overlap and "read by more than one element" in overlap
    kstep = render("desc", "ascii", value=MatrixDescriptor(0x420, 16, 1024, 0, 1).encode(), rows=64, k=16)
    assert "K step" in kstep


@pytest.mark.parametrize("kind,opts,msg", [
    ("acc", {"n": 7}, "multiple of 8"),
    ("acc", {"n": 64, "dtype": "bf16"}, "accumulator dtype"),
    ("a-frag", {"dtype": "f64"}, "A dtype"),
    ("stmatrix", {"num": 3}, "--num"),
    ("swizzle", {"mode": "96B"}, "swizzle mode"),
    ("smem", {"major": "MN", "dtype": "e4m3"}, "MN-major"),
    ("smem", {"major": "X"}, "major"),
    ("desc", {"value": 1 << 13 | 1 << 14}, "reserved bits"),
    ("desc", {"value": "0xnope"}, "cannot parse"),
    ("nope", {}, "kind"),
])
def test_bad_input_is_one_clear_error(kind, opts, msg):
    with pytest.raises(InputError, match=msg):
        render(kind, "svg", **opts)


def test_ascii_is_plain_text():
    for kind, opts in SWEEP[::7]:
        text = to_ascii(diagram(kind, **opts))
        assert "\x1b" not in text and "<svg" not in text and "<rect" not in text
        assert text.endswith("\n") and "legend:" in text


# ----------------------------------------------------------------------------- CLI

def wgref(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wgref.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_cli_layout_ascii_and_files(tmp_path):
    r = wgref("layout", "acc", "--n", "8", "--dtype", "f16")
    assert r.returncode == 0 and "T0:r0.0" in r.stdout and r.stderr == ""
    out = tmp_path / "st.svg"
    r = wgref("layout", "stmatrix", "--num", "4", "--trans", "--format", "svg", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert len(svg_panels(out.read_text())) == 2
    assert not list(tmp_path.glob(".wgref-*")), "the temp file is renamed into place"
    out = tmp_path / "sw.html"
    assert wgref("layout", "swizzle", "--swizzle", "64B", "--dtype", "e4m3", "--format", "html",
                 "-o", str(out)).returncode == 0
    assert "<svg" in out.read_text()
    r = wgref("layout", "smem", "--major", "MN", "--swizzle", "none", "--rows", "16", "--k", "16")
    assert r.returncode == 0 and "+LBO" in r.stdout


def test_cli_desc(tmp_path):
    r = wgref("desc", "0x4000004000010040", "--dtype", "f16", "--rows", "64", "--k", "16", "--major", "K")
    assert r.returncode == 0 and "start address" in r.stdout and "ok: dense canonical" in r.stdout
    out = tmp_path / "d.svg"
    r = wgref("desc", "0x4000004000010048", "--format", "svg", "-o", str(out))
    assert r.returncode == 0 and "wrote" in r.stdout
    assert svg_panels(out.read_text())[0]["labels"][(0, 0)] == "490!"
    # the SVG carries the decoded fields and the checks, not only the picture
    report = " ".join(t.text or "" for t in ET.fromstring(out.read_text()).iter(f"{NS}text")
                      if t.get("class") in ("rep", "warn")).replace("\u00a0", " ")
    assert "bits 29:16  LBO >> 4" in report
    report = " ".join(report.split())
    assert "checks:" in report and "align it to 1024 B" in report


@pytest.mark.parametrize("args,msg", [
    (["desc", "0x1234567890abcdef"], "reserved bits"),
    (["desc", "zz"], "cannot parse"),
    (["desc", str(1 << 64)], "64 unsigned bits"),
    (["desc", "0x4000004000010040", "--major", "MN", "--dtype", "e4m3"], "MN-major"),
    (["layout", "acc", "--n", "300"], "N must be"),
    (["layout", "a-frag", "--dtype", "f64"], "A dtype"),
    (["layout", "swizzle", "--swizzle", "16B"], "swizzle mode"),
    (["layout", "stmatrix", "--num", "8"], "--num"),
    (["layout", "acc", "-o", "/nonexistent-dir/x.svg"], "cannot write"),
])
def test_cli_bad_input_one_line_exit_2(args, msg):
    r = wgref(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wgref: error:") and msg in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_cli_unknown_kind_is_a_usage_error():
    r = wgref("layout", "bogus")
    assert r.returncode == 2 and "invalid choice" in r.stderr


# ----------------------------------------------------------------------------- browser

def _browser() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


def png_pixels(path: Path) -> np.ndarray:
    """(height, width, channels) uint8 pixels of an 8-bit RGB/RGBA PNG (zlib only: no Pillow needed)."""
    import struct
    import zlib

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, colour = ihdr[:4]
    assert depth == 8 and colour in (2, 6), f"unexpected PNG format depth={depth} colour={colour}"
    ch = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * ch)
    out = np.zeros((h, w * ch), np.int32)
    prev = np.zeros(w * ch, np.int32)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        cur = np.zeros(w * ch, np.int32)
        if f in (0, 2):
            cur = (line + (prev if f == 2 else 0)) & 255
        else:  # sub, average, paeth depend on the left neighbour: go pixel by pixel
            for x in range(w * ch):
                a = cur[x - ch] if x >= ch else 0
                b, c = prev[x], (prev[x - ch] if x >= ch else 0)
                if f == 1:
                    pred = a
                elif f == 3:
                    pred = (a + b) // 2
                else:
                    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (line[x] + pred) & 255
        out[y], prev = cur, cur
    return out.reshape(h, w, ch).astype(np.uint8)


BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.mark.skipif(_browser() is None, reason="no headless browser: apt-get install -y chromium")
def test_gallery_renders_in_a_browser(tmp_path):
    index = ROOT / "docs" / "gallery" / "index.html"
    assert index.exists()
    shot = tmp_path / "gallery.png"
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run([_browser(), *BROWSER_FLAGS, f"--user-data-dir={profile}", f"--screenshot={shot}",
                            "--window-size=1600,1200", index.as_uri()], capture_output=True, text=True, timeout=180)
    assert shot.exists() and shot.stat().st_size > 10_000, r.stderr[-2000:]
    px = png_pixels(shot)[..., :3]
    assert px.shape[:2] == (1200, 1600)
    colours = np.unique(px.reshape(-1, 3), axis=0)
    assert len(colours) > 50, f"screenshot is (nearly) a single colour: {len(colours)} colours"
    dark = (px.sum(axis=2) < 200).mean()
    assert 0.001 < dark < 0.5, f"{dark:.1%} dark pixels: no text, or a black page"
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run([_browser(), *BROWSER_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                              index.as_uri()], capture_output=True, text=True, timeout=180).stdout
    assert dom.count("<svg") >= 5 and 'class="panel"' in dom and "wgref layout gallery" in dom


# ----------------------------------------------------------------------------- sparse metadata

@pytest.mark.parametrize("dtype,sel", [("f16", 0), ("f16", 1), ("bf16", 1), ("tf32", 0), ("tf32", 1), ("e4m3", 0),
                                       ("u8", 0)])
def test_sparse_meta_cells_match_meta_holders(dtype, sel):
    """Panel 1 names lane:bit of every (row, chunk) of warp 0; panel 2 the (row, chunk) of every
    (lane, nibble) or '-' where the hardware ignores it -- both from refmodel.layouts.sparse_meta."""
    from refmodel.layouts.sparse_meta import meta_holders

    thread, pos = meta_holders(dtype, sel)
    cols = thread.shape[1]
    rows_p, regs_p = svg_panels(render("sparse-meta", "svg", dtype=dtype, sel=sel))
    assert (rows_p["rows"], rows_p["cols"]) == (16, cols) and (regs_p["rows"], regs_p["cols"]) == (32, 8)
    read = {}
    for m in range(64):
        for c in range(cols):
            t, p = int(thread[m, c]), int(pos[m, c])
            if m < 16:
                assert t < 32 and rows_p["labels"][(m, c)] == f"L{t}:b{4 * p}"
                read[(t, p)] = (m, c)
            else:   # the other warps repeat warp 0's pattern, 32 threads on
                assert (t - 32 * (m // 16), p) == (int(thread[m % 16, c]), int(pos[m % 16, c]))
    for lane in range(32):
        for p in range(8):
            want = f"r{read[(lane, p)][0]}c{read[(lane, p)][1]}" if (lane, p) in read else "-"
            assert regs_p["labels"][(lane, p)] == want
    ignored = sum(v == "-" for v in regs_p["labels"].values())
    assert ignored == (0 if dtype in ("e4m3", "u8") else 128)
    d = diagram("sparse-meta", dtype=dtype, sel=sel)
    grey = [(r, c) for r, row in enumerate(d.panels[1].fills) for c, f in enumerate(row) if f == "#d8d8d8"]
    assert len(grey) == ignored


def test_sparse_meta_quads_by_selector():
    """sp-sel 0 reads lanes 0, 1 of each quad, sp-sel 1 lanes 2, 3 (ascii, the lane column of panel 2)."""
    for sel in (0, 1):
        text = render("sparse-meta", "ascii", dtype="f16", sel=sel)
        lanes = re.findall(r"^\s*lane (\d+):\s+(\S+)", text, re.M)
        assert len(lanes) == 32
        for lane, first in lanes:
            assert (first != "-") == (int(lane) % 4 in (2 * sel, 2 * sel + 1))
    assert "row 9, chunk 5 -> lane 5, bits 20-23" in render("sparse-meta", "ascii", dtype="f16", sel=0)


def test_sparse_meta_rejects_bad_selector_and_type():
    with pytest.raises(InputError, match="sp_sel must be 0 for e4m3"):
        diagram("sparse-meta", dtype="e4m3", sel=1)
    with pytest.raises(InputError, match="sparse A dtype"):
        diagram("sparse-meta", dtype="f32")


def test_cli_layout_sparse_meta(tmp_path):
    out = tmp_path / "m.svg"
    r = subprocess.run([sys.executable, "-m", "wgref.cli", "layout", "sparse-meta", "--dtype", "tf32", "--sel", "1",
                        "--format", "svg", "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert svg_panels(out.read_text())[1]["labels"][(2, 0)] == "r0c0"
    r = subprocess.run([sys.executable, "-m", "wgref.cli", "layout", "sparse-meta", "--dtype", "s8", "--sel", "1"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "sp_sel must be 0" in r.stderr
