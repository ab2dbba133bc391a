"""The new teaching pictures: the epilogue (cvt + stmatrix.x4 slices into a swizzled tile), the
sparse compression chain, and explain-dot (one wgmma output element, bit by bit).

Evidence is independent of the builders: epilogue addresses from the PTX lane formula and the
swizzle written out here (and the stored image of refmodel.machine.epilogue), sparse cells from
refmodel.numerics.sparse / refmodel.layouts.sparse_meta, explain-dot result bits from the
accumulator itself (the readable fdpa formula and the numba kernel behind wgmma) on thousands
of random and adversarial rows.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from cli_harness import run_cli
from refmodel.dtypes import bits_of, element_dtype
from refmodel.errors import InputError
from refmodel.layouts.sparse_meta import meta_holders, pack_meta
from refmodel.layouts.swizzle import swizzle_address, swizzle_mode
from refmodel.numerics.explain import DOC_CASE, K_OF, doc_case, explain_dot
from refmodel.numerics.sparse import compress, decompress, kept_positions
from refmodel.numerics.wgmma import wgmma, wgmma_reference
from refmodel.render import KINDS, diagram, render
from refmodel.render.core import contrast, ink, to_ascii, to_svg
from refmodel.render.explain_draw import legend as explain_legend
from refmodel.render.explain_draw import render_explain
from refmodel.render.sparse_draw import example_a, instr_for
from test_render import svg_panels

NS = "{http://www.w3.org/2000/svg}"


def _texts(svg: str) -> str:
    return " ".join("".join(t.itertext()) for t in ET.fromstring(svg).iter(f"{NS}text"))


# ============================================================================ epilogue

EPI = [(64, "bf16", "128B"), (256, "bf16", "128B"), (32, "f16", "64B"), (16, "f16", "none"), (128, "f16", "32B"),
       (256, "f16", "none")]


def _expected_address(t: int, s: int, n: int, swz: str) -> tuple[int, int, int]:
    """(row, col, byte offset) of the 16-byte row segment thread t gives in slice s: the PTX
    stmatrix lane rule (lane L: row L%8 of matrix L//8), the epilogue's matrix placement (0 TL,
    1 BL, 2 TR, 3 BR), the row-major tile cut in column blocks of the swizzle width, the swizzle."""
    w, lane = divmod(t, 32)
    j, r = divmod(lane, 8)
    row, col = 16 * w + 8 * (j % 2) + r, 16 * s + 8 * (j // 2)
    m = swizzle_mode(swz)
    width = 16 << m.bits if m.bits else 2 * n
    cb = 2 * col
    logical = (cb // width) * 64 * width + row * width + cb % width
    return row, col, int(swizzle_address(logical, swz))


@pytest.mark.parametrize("n,dtype,swz", EPI)
def test_epilogue_slice_addresses_every_lane(n, dtype, swz):
    d = diagram("epilogue", n=n, dtype=dtype, swizzle=swz)
    svg = render("epilogue", "svg", n=n, dtype=dtype, swizzle=swz)
    panels = svg_panels(svg)
    slices = n // 16
    assert len(d.panels) == len(panels) == slices + 2
    heads = d.panels[1].row_heads
    seen = 0
    for s in range(slices):
        p, sp = d.panels[1 + s], panels[1 + s]
        for t in range(128):
            row, col, off = _expected_address(t, s, n, swz)
            h = (col % 16) // 8
            assert p.labels[row][h] == f"{off:04x}" == sp["labels"][(row, h)]
            givers = re.fullmatch(rf"r{row}: T(\d+)\|T(\d+)", heads[row]).groups()
            assert int(givers[h]) == t
            seen += 1
    assert seen == 128 * slices


@pytest.mark.parametrize("n,dtype,swz", EPI[:3])
def test_epilogue_stored_tile_and_cvt_match_the_machine(n, dtype, swz):
    """Panel 3: the atom at each offset holds the row segment of the slice/thread it names (checked
    on the image refmodel.machine.epilogue writes); panel 1: p[j]'s halves hold the D elements
    named (checked with pack_f16x2 on distinct values)."""
    from refmodel.layouts.fragment import pack_accumulator
    from refmodel.machine.epilogue import epilogue_stmatrix, pack_f16x2

    d = diagram("epilogue", n=n, dtype=dtype, swizzle=swz)
    acc = (np.arange(64 * n, dtype=np.float32).reshape(64, n) % 2000 + 1).astype(np.float32)
    img, _ = epilogue_stmatrix(acc, dtype, swz)
    out = element_dtype(dtype)
    phys = d.panels[-1]
    for i, row_labels in enumerate(phys.labels):
        for a, lab in enumerate(row_labels):
            if not lab:
                continue
            s, t = (int(x) for x in re.fullmatch(r"s(\d+) T(\d+)", lab).groups())
            row, col, off = _expected_address(t, s, n, swz)
            assert off == 128 * i + 16 * a
            got = img[off:off + 16].view(np.uint16)
            want = bits_of(acc[row, col:col + 8].astype(out))
            assert np.array_equal(got, want)
    regs = pack_accumulator(acc, "f32").view(np.float32)
    packed = pack_f16x2(regs, dtype)
    cvt = d.panels[0]
    for s, labs in enumerate(cvt.labels):
        for c, lab in enumerate(labs):
            dreg, r, col = (int(x) for x in re.fullmatch(r"d(\d+)=D\[(\d+),(\d+)\]", lab).groups())
            j, hl = divmod(c, 2)
            half = (int(packed[0, 4 * s + j]) >> (16 if hl == 0 else 0)) & 0xFFFF
            assert half == int(bits_of(acc[r:r + 1, col].astype(out))[0])
            assert dreg == 2 * (4 * s + j) + (1 if hl == 0 else 0)


@pytest.mark.parametrize("opts,msg", [({"n": 24}, "multiple of 16"), ({"dtype": "f32"}, "bf16 or f16"),
                                      ({"n": 16, "swizzle": "128B"}, "multiple of 128"),
                                      ({"swizzle": "16B"}, "swizzle mode")])
def test_epilogue_bad_input(opts, msg):
    with pytest.raises(InputError, match=msg):
        diagram("epilogue", **opts)


# ============================================================================ sparse compression

SPARSE = [("f16", 0), ("f16", 1), ("bf16", 1), ("tf32", 0), ("tf32", 1), ("e4m3", 0), ("u8", 0)]


@pytest.mark.parametrize("dtype,sel", SPARSE)
def test_sparse_compress_cells_agree_with_the_model(dtype, sel):
    d = diagram("sparse-compress", dtype=dtype, sel=sel)
    panels = svg_panels(render("sparse-compress", "svg", dtype=dtype, sel=sel))
    instr = instr_for(dtype)
    a = example_a(dtype)
    ac, meta = compress(a, instr)
    assert np.array_equal(bits_of(decompress(ac, meta, instr)), bits_of(a))   # the example is really sparse
    kept = kept_positions(meta, instr)
    dense, comp, nib, regs = d.panels[:4]
    thread, pos = meta_holders(dtype, sel)
    words = pack_meta(meta, dtype, sel, fill=0)
    chunk = 2 if dtype == "tf32" else 4
    for m in range(16):
        coloured = {k for k in range(a.shape[1]) if dense.fills[m][k]}
        assert coloured == {int(k) for k in kept[m]}
        for j in range(ac.shape[1]):
            assert float(comp.labels[m][j]) == float(ac[m, j].astype(np.float64))
            assert float(dense.labels[m][int(kept[m, j])]) == float(ac[m, j].astype(np.float64))
        for c in range(meta.shape[1]):
            assert nib.labels[m][c].endswith(f":{int(meta[m, c]):x}")
            lane, p = int(thread[m, c]), int(pos[m, c])
            assert regs.labels[lane][p] == f"r{m}{'p' if chunk == 2 else 'q'}{c}"
            assert (int(words[lane]) >> (4 * p)) & 0xF == int(meta[m, c])
    for lane in range(32):
        assert regs.row_heads[lane] == f"L{lane} {int(words[lane]):#010x}"
        read = {int(p) for t, p in zip(thread[:16].ravel(), pos[:16].ravel()) if t == lane}
        for p in range(8):
            assert (regs.labels[lane][p] == "-") == (p not in read)
    if dtype in ("f16", "bf16", "tf32"):
        both = d.panels[4]
        for s in (0, 1):
            th, ps = meta_holders(dtype, s)
            for m in range(16):
                for c in range(meta.shape[1]):
                    assert both.labels[int(th[m, c])][int(ps[m, c])].startswith(f"s{s}:r{m}")
        assert all(lab for row in both.labels for lab in row), "sp-sel 0 and 1 together use every nibble"
    else:
        assert len(d.panels) == 4
    for p, sp in zip(d.panels, panels):
        assert {k: v for k, v in sp["labels"].items()} == \
               {(r, c): s for r, row in enumerate(p.labels) for c, s in enumerate(row) if s}


def test_sparse_compress_bad_input():
    with pytest.raises(InputError, match="sp_sel must be 0"):
        diagram("sparse-compress", dtype="e4m3", sel=1)
    with pytest.raises(InputError, match="sparse A type"):
        diagram("sparse-compress", dtype="f32")


# ============================================================================ pictures in general

PICTURES = [("epilogue", {"n": 64, "dtype": "bf16", "swizzle": "128B"}),
            ("epilogue", {"n": 256, "dtype": "bf16", "swizzle": "128B"}),
            ("sparse-compress", {"dtype": "f16", "sel": 0}), ("sparse-compress", {"dtype": "e4m3", "sel": 0})]


def test_new_kinds_are_registered():
    assert {"epilogue", "sparse-compress"} <= set(KINDS)


@pytest.mark.parametrize("kind,opts", PICTURES)
def test_every_legend_item_appears_and_text_is_readable(kind, opts):
    d = diagram(kind, **opts)
    svg, text = to_svg(d), to_ascii(d)
    texts = _texts(svg)
    for key, item in d.legend:
        if key != "@ascii":
            assert item in texts, item
        if key in ("", "@ascii"):
            assert item in text, item
    for key, _ in d.legend:
        if key and not key.startswith("@"):
            assert any(key in row for p in d.panels for row in p.fills), f"legend swatch {key} is used"
    fills = {f for p in d.panels for row in p.fills for f in row if f}
    assert all(contrast(ink(f), f) >= 4.5 for f in fills)
    sizes = [float(x) for x in re.findall(r"font-size:([\d.]+)px", svg)]
    assert sizes and min(sizes) >= 10


# ============================================================================ explain-dot: bits

COMBOS = [("e4m3", "e4m3", "f32"), ("e4m3", "e5m2", "f16"), ("e5m2", "e5m2", "f32"), ("e5m2", "e4m3", "f16"),
          ("f16", "f16", "f32"), ("f16", "f16", "f16"), ("bf16", "bf16", "f32"), ("tf32", "tf32", "f32")]
FAMILIES = ("random_bits", "finite", "subnormal", "extremes", "cancel", "spread", "zero", "special")


def _spec_of(dt):
    from refmodel.numerics.accumulate import tf32_spec
    from refmodel.numerics.formats import format_spec
    return tf32_spec() if dt == "tf32" else format_spec(dt)


def _codes(rng, dt, shape, family):
    """Unsigned codes of ``dt`` (tf32: the f32 container) for one adversarial family."""
    s = _spec_of("f32" if dt == "tf32" else dt)
    nb = s.bits
    u = rng.integers(0, 1 << nb, size=shape, dtype=np.uint64)
    sign = u & s.sign_mask
    expo = (u >> s.mbits) & ((1 << s.ebits) - 1)
    mant = u & ((1 << s.mbits) - 1)
    emax_field = (1 << s.ebits) - 2 if s.ieee_specials else (1 << s.ebits) - 1
    if family != "random_bits":
        expo = np.minimum(expo, emax_field)
        if not s.ieee_specials:  # e4m3: S.1111.111 is the NaN
            mant = np.where(expo == emax_field, np.minimum(mant, (1 << s.mbits) - 2), mant)
    if family == "subnormal":
        expo = np.where(rng.random(shape) < .8, 0, expo % 3)
    elif family == "extremes":
        pick = rng.random(shape)
        expo = np.where(pick < .5, emax_field, np.where(pick < .7, 0, expo))
        mant = np.where(pick < .3, (1 << s.mbits) - (1 if s.ieee_specials else 2), mant)
    elif family == "cancel":
        bias = (1 << (s.ebits - 1)) - 1
        expo = bias + rng.integers(-2, 3, size=shape).astype(np.uint64)
    elif family == "spread":
        expo = rng.integers(1, emax_field + 1, size=shape).astype(np.uint64)
    elif family == "zero":
        expo = np.where(rng.random(shape) < .9, 0, expo)
        mant = np.where(expo == 0, 0, mant)
    elif family == "special":
        hit = rng.random(shape) < .04
        special = (s.mag_mask if not s.ieee_specials else
                   np.where(rng.random(shape) < .5, s.inf_code, s.inf_code + 1).astype(np.uint64))
        expo = np.where(hit, special >> s.mbits, expo)
        mant = np.where(hit, special & ((1 << s.mbits) - 1), mant)
    out = sign | (expo << np.uint64(s.mbits)) | mant
    return out.astype({8: np.uint8, 16: np.uint16, 32: np.uint32}[nb])


def _operands(rng, ta, tb, td, family, batch=1):
    K = K_OF[ta]
    a = _codes(rng, ta, (batch, 64, K), family).view(element_dtype(ta))
    b = _codes(rng, tb, (batch, K, 8), family).view(element_dtype(tb))
    c = _codes(rng, td, (batch, 64, 8), family).view(element_dtype(td))
    if family == "cancel":       # b[k] of column j = 1 for k < 2: a0 - a0-like pairs cancel
        a = a.copy()
        a[..., 1] = (-a[..., 0].astype(np.float64)).astype(a.dtype)
        b = b.copy()
        b[:, 0:2, :] = np.ones((), b.dtype)
    if family == "zero":
        c = c.copy()
        c[..., ::3] = np.zeros((), c.dtype)
        c[..., 1::3] = (-np.zeros((), np.float64)).astype(c.dtype)
    return a, b, c


@pytest.mark.parametrize("ta,tb,td", COMBOS, ids=["-".join(c) for c in COMBOS])
def test_explain_dot_bits_equal_the_accumulator(ta, tb, td):
    """Every family x 256 dot products (32 rows x 8 columns) per type combination: explain_dot's
    result bits equal the numba kernel (wgmma) and the readable formula (wgmma_reference)."""
    rng = np.random.default_rng(hash((ta, tb, td)) & 0xFFFF)
    instr = f"wgmma.mma_async.sync.aligned.m64n8k{K_OF[ta]}.{td}.{ta}.{tb}"
    checked = special = 0
    for family in FAMILIES:
        a, b, c = _operands(rng, ta, tb, td, family)
        with np.errstate(all="ignore"):
            d_kernel = bits_of(wgmma(instr, a, b, c))[0]
            d_ref = bits_of(wgmma_reference(instr, a, b, c))[0]
        for r in range(32):
            for j in range(8):
                ex = explain_dot(a[0, r], b[0, :, j], c[0, r, j:j + 1], dtype_ab=ta, dtype_b=tb, dtype_d=td)
                assert ex.result_bits == int(d_ref[r, j]), \
                    f"explain_dot vs fdpa: {family} row {r} col {j}: {ex.result_hex} != {int(d_ref[r, j]):#x}"
                assert ex.result_bits == int(d_kernel[r, j]), \
                    (f"the numba kernel (wgmma) differs from fdpa and explain_dot: {family} row {r} col {j}: "
                     f"{int(d_kernel[r, j]):#x} != {ex.result_hex}")
                checked += 1
                special += ex.special is not None
    assert checked == 256 * len(FAMILIES)
    assert 0 < special < checked, "both the special path and the alignment are exercised"


def test_explain_dot_steps_are_consistent():
    """The steps' own identities: e_max is the largest exponent; each kept integer is the term's
    magnitude truncated at 2**(e_max - F) and the cut is the rest; the kept sum is the total."""
    rng = np.random.default_rng(7)
    for ta, tb, td in COMBOS:
        a, b, c = _operands(rng, ta, tb, td, "finite")
        for r in range(0, 64, 4):
            ex = explain_dot(a[0, r], b[0, :, 0], c[0, r, 0:1], dtype_ab=ta, dtype_b=tb, dtype_d=td)
            assert ex.special is None
            assert ex.e_max == max(t.exp for t in ex.terms)
            unit = Fraction(2) ** (ex.e_max - ex.F)
            for t in ex.terms:
                mag = abs(Fraction(t.value))
                assert abs(t.kept) == int(mag / unit)
                assert Fraction(t.cut) * Fraction(2) ** t.lsb == mag - abs(t.kept) * unit
                assert (t.kept < 0) == (t.sign == 1 and t.kept != 0)
            assert ex.total == sum(t.kept for t in ex.terms)
            assert ex.exact == sum(Fraction(t.value) for t in ex.terms)


def test_explain_dot_doc_case():
    """docs/accumulator.md: C = 1 + 2**-20, A = 0 -> 1.0 (e4m3, f32): C keeps 13 fraction bits."""
    ex = doc_case()
    assert ex.result_bits == 0x3F800000 and ex.result == 1.0 and ex.special is None
    c = ex.terms[-1]
    assert ex.e_max == 0 and c.name == "c" and c.kept == 1 << 13 and c.cut_value == 2.0 ** -20
    assert all(t.zero and t.exp == -133 for t in ex.terms[:-1])
    a = np.zeros((64, 32), ml_dtypes.float8_e4m3fn)
    cc = np.full((64, 8), DOC_CASE["c"], np.float32)
    d = wgmma("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", a, np.ones((32, 8), a.dtype), cc)
    assert int(bits_of(d)[0, 0]) == ex.result_bits
    assert "| C loses its low bits even when A·B = 0 | C = 1 + 2⁻²⁰, A = 0 | 1.0 |" in \
        open("docs/accumulator.md", encoding="utf-8").read()


def test_explain_dot_bad_input():
    for kw, msg in [(dict(a=[1] * 17, b=[1] * 17, dtype_ab="f16"), "1 to 16 values"),
                    (dict(a=[1, 2], b=[1]), "same length"),
                    (dict(a=[1000], b=[1]), "outside the e4m3 range"),
                    (dict(a=[float("inf")], b=[1]), "no infinity"),
                    (dict(a=[1], b=[1], dtype_ab="bf16", dtype_d="f16"), "accumulate in f32"),
                    (dict(a=[1], b=[1], dtype_ab="f16", dtype_b="e4m3"), "one family"),
                    (dict(a=[1], b=[1], dtype_ab="s8"), "dtype_ab must be")]:
        with pytest.raises(InputError, match=msg):
            explain_dot(**kw)


# ============================================================================ explain-dot: pictures

def _explanations():
    yield doc_case()
    yield explain_dot([1.5, -0.3125, 2 ** -8, 96], [3, 1.25, 0.1015625, 2], 0.7)
    yield explain_dot([2 ** 30, -2 ** 30, 1, 3.3], [1, 1, 1, 1.7], dtype_ab="bf16")      # cancels to 0
    yield explain_dot([60000, 60000], [2, 2], dtype_ab="f16", dtype_d="f16")             # overflow
    yield explain_dot([2 ** -14, 2 ** -24], [2 ** -10, 1], dtype_ab="f16", dtype_d="f16")  # subnormal result
    yield explain_dot([1, 2 ** -11, 2 ** -22], [1, 1, 1], dtype_ab="f16", dtype_d="f16")   # RNE tie, sticky
    yield explain_dot([2047 / 1024, 2 ** -11], [1, 1], dtype_ab="f16", dtype_d="f16")      # rounds up, carries
    yield explain_dot([float("inf"), 0], [0, 1], dtype_ab="e5m2")                          # Inf * 0
    yield explain_dot([float("inf")], [-1], 1.0, dtype_ab="f16")                           # -Inf


@pytest.mark.parametrize("ex", list(_explanations()), ids=lambda e: f"{e.dtype_a}-{e.result_hex}")
def test_explain_svg_bits_and_legend(ex):
    svg = render_explain(ex, "svg")
    root = ET.fromstring(svg)
    assert root.get("data-kind") == "explain-dot" and root.get("data-result") == ex.result_hex
    texts = _texts(svg)
    for _, item in explain_legend(ex):
        assert item in texts and item in render_explain(ex, "ascii")
    bits = [r for r in root.iter(f"{NS}rect") if "bit" in (r.get("class") or "").split()]
    if ex.special:
        assert not bits and any(t.get("class") == "special" for t in root.iter(f"{NS}text"))
        assert "special path" in render_explain(ex, "ascii")
        return
    floor = ex.e_max - ex.F
    rows = [g for g in root.iter(f"{NS}g") if g.get("class") == "term"]
    by_name = {t.name: t for t in ex.terms}
    for g in rows:
        if g.get("data-name") == "padding":
            continue
        t = by_name[g.get("data-name")]
        assert int(g.get("data-kept")) == t.kept
        kept = sum(int(r.get("data-b")) << (int(r.get("data-w")) - floor) for r in g.iter(f"{NS}rect")
                   if set((r.get("class") or "").split()) & {"win", "carry"})
        assert kept == abs(t.kept)
        for r in g.iter(f"{NS}rect"):
            w = int(r.get("data-w"))
            assert ("cut" in r.get("class")) == (w < floor)
            assert int(r.get("data-b")) == t.bit(w)
    rounded = [r for r in root.iter(f"{NS}rect") if r.get("class") == "rbit"]
    if ex.total and not ex.round.overflow:   # the rounded row's kept bits are the result's magnitude
        assert sum(Fraction(int(r.get("data-b"))) * Fraction(2) ** int(r.get("data-w")) for r in rounded) == \
            abs(Fraction(ex.result))
    fills = set(re.findall(r'fill="(#[0-9a-f]{6})"', svg)) - {"#fff"}
    assert fills and all(contrast("#111", f) >= 4.5 for f in fills)
    sizes = [float(x) for x in re.findall(r"font-size:([\d.]+)px", svg)]
    assert min(sizes) >= 10
    html = render_explain(ex, "html")
    assert html.startswith("<!doctype html>") and "<svg" in html and ex.result_hex in html


# ============================================================================ CLI

def test_cli_explain_dot(tmp_path):
    rc, out, err = run_cli(["explain-dot", "--case", "doc"])
    assert rc == 0 and "D = 0x3F800000 = 1.0" in out and err == ""
    f = tmp_path / "x.svg"
    rc, out, err = run_cli(["explain-dot", "--dtype", "bf16", "--a", "0x1p30,-1073741824,1", "--b", "1,1,1",
                            "--format", "svg", "-o", f])
    assert rc == 0 and "wrote" in out and ET.fromstring(f.read_text()).get("data-result") == "0x00000000"
    rc, out, _ = run_cli(["explain-dot", "--dtype", "e4m3", "--a", "1,2", "--b", "3,-4", "--c", "1.0000009537",
                          "--format", "html"])
    assert rc == 0 and out.startswith("<!doctype html>")


@pytest.mark.parametrize("args,msg", [
    (["--a", "1,x", "--b", "1,1"], "cannot read 'x'"),
    (["--a", "1000", "--b", "1"], "outside the e4m3 range"),
    (["--a", "1", "--b", "1,2"], "same length"),
    (["--dtype", "f8", "--a", "1", "--b", "1"], "dtype_ab must be"),
    (["--case", "doc", "--a", "1"], "leave out"),
    (["--a", "1e400", "--b", "1", "--dtype", "f16"], "beyond"),
    (["--b", "1"], "give --a and --b"),
    (["--case", "other"], "invalid choice"),
    (["--case", "doc", "-o", "/nonexistent-dir/x.svg"], "cannot write"),
])
def test_cli_explain_dot_bad_input_one_line_exit_2(args, msg):
    rc, out, err = run_cli(["explain-dot", *args])
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and msg in lines[0] and "Traceback" not in err, err


def test_cli_layout_new_kinds(tmp_path):
    """``wgref layout epilogue|sparse-compress`` draws the new kinds."""
    rc, out, err = run_cli(["layout", "epilogue", "--n", "64", "--dtype", "bf16", "--swizzle", "128B"])
    assert rc == 0 and "stmatrix.x4" in out
    rc, out, err = run_cli(["layout", "sparse-compress", "--dtype", "f16", "--sel", "1"])
    assert rc == 0 and "sp-sel 1" in out
