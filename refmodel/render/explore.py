"""``wgref explore``: one self-contained HTML page to explore every layout interactively.

:func:`explore_data` precomputes, from :mod:`refmodel.layouts` and :mod:`refmodel.machine`,
compact tables for every selectable layout; :func:`explore_html` embeds them (JSON in a
``<script type="application/json">``) with the page's inline script and style
(:mod:`refmodel.render.explore_assets`).  Nothing is fetched: the page works from ``file://``.

Where a table would be repeated for every option, a *generator table* is shipped instead and
the test checks it against refmodel for every option:

* accumulator: the m64n256 map; m64nN is its first N columns (element i < N/2 lands in a
  column < N);
* shared-memory tiles: offset(r, kb) = a*SBO + b*LBO + c, the coefficients of the first ``P``
  rows and the step every ``P`` rows (the layouts are affine in LBO/SBO and periodic in rows);
* epilogue: the pre-swizzle byte offset of D[r, c] is ``p + q*N`` (fitted on N = 256 and 320);
* swizzle: refmodel's atom table (physical atom of logical atom c on line r of a period).

The dot view ships worked FP8 examples (:data:`DOT_EXAMPLES`), each explained by
:func:`refmodel.numerics.explain.explain_dot` here: its terms, the bit of every term at every weight, the
sum, the rounding and the output, with the sentences of ``wgref explain-dot``; the page computes no numerics.

Colours: one CSS class a colour (:func:`palette_css`), the label ink black or white by WCAG contrast
(:func:`~refmodel.render.core.ink`), a faded fill for unselected cells.  The page's keyboard, legend,
contrast, N = 256 overview and dot view are measured in the browser by tests/test_explore.py.

Sources: the builders' own (PTX ISA wgmma "Register Fragments", "Matrix Descriptor Format",
"Shared Memory Matrix Layout"; CuTe mma_traits_sm90_gmma.hpp), the same as the diagrams.
"""

from __future__ import annotations

import json

import numpy as np

from ..dtypes import element_bytes
from ..errors import InputError
from ..layouts.descriptor import MatrixDescriptor
from ..layouts.fragment import ACC_NS, THREADS, a_fragment_layout, accumulator_layout
from ..layouts.smem import SmemLayout, dense_strides, rowmajor_offsets
from ..layouts.sparse_meta import check_sp_sel, meta_cols, meta_holders
from ..layouts.stmatrix import address_givers
from ..layouts.swizzle import MODES, atom_table
from ..machine.epilogue import STMATRIX_X4, epilogue_addresses
from ..machine.stmatrix import stmatrix
from ..numerics.explain import DOC_CASE, DotExplanation, explain_dot
from . import diagrams, explain_draw
from .core import contrast, index_colour, ink, lane_colour, rgb, thread_colour
from .explore_assets import BODY, CSS, JS

ROWS = 64
N_MAX = 256
ACC_DTYPES = diagrams.ACC_DTYPES
A_DTYPES = diagrams.A_DTYPES
OPERAND_DTYPES = diagrams.OPERAND_DTYPES
SPARSE_DTYPES = diagrams.SPARSE_DTYPES
SWIZZLE_LINES = 16          # lines drawn in the swizzle view: two periods of 128B
ROW_PERIODS = (8, 16, 32, 64, 128, 256)
_N_FIT = 320              # a second N (rows of 640 bytes: whole swizzle rows) to fit the epilogue's p + q N

#: (id, label, options) of every layout the page offers, in the order of its selector
LAYOUTS = (
    ("acc", "accumulator C/D (registers)", ("dtype", "n")),
    ("afrag", "A fragment (RS form, registers)", ("dtype",)),
    ("ldmatrix", "ldmatrix .m8n8 .b16", ("num", "trans")),
    ("stmatrix", "stmatrix .m8n8 .b16", ("num", "trans")),
    ("swizzle", "swizzle (16-byte atoms)", ("swizzle", "dtype")),
    ("smem", "shared-memory operand tile", ("major", "swizzle", "dtype", "n")),
    ("desc", "matrix descriptor", ("major", "dtype", "n")),
    ("sparse", "sparse metadata (sp-meta)", ("dtype", "sel")),
    ("epilogue", "epilogue: cvt + stmatrix.x4", ("swizzle", "dtype", "n")),
    ("dot", "FP8 dot product, explained (explain-dot)", ("example",)),
    ("mmasync", "mma.sync fragments (one warp)", ("form", "operand")),
)

#: the mma.sync forms the explorer draws: one of each register layout (family, shape, accumulator width)
MMA_SYNC_VIEW = (
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
    "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
    "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
    "mma.sync.aligned.m16n8k16.row.col.f32.e4m3.e5m2.f32", "mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32",
    "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32", "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32",
    "mma.sync.aligned.m8n8k32.row.col.s32.u4.u4.s32", "mma.sync.aligned.m16n8k128.row.col.s32.b1.b1.s32.xor.popc",
    "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64",
    "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32", "mma.sync.aligned.m8n8k4.col.row.f16.f16.f16.f16",
)

#: (id, what it shows, explain_dot keyword arguments) of the worked FP8 examples the dot view offers
DOT_EXAMPLES = (
    ("doc", "C = 1 + 2^-20 and A·B = 0 give 1.0: C is cut like any term (docs/accumulator.md)", dict(DOC_CASE)),
    ("four", "four products and C = 0.7: a small product and C's low bits are cut",
     dict(a=[1.5, -0.3125, 2 ** -8, 96], b=[3, 1.25, 0.1015625, 2], c=0.7)),
    ("cancel", "256 - 256 + 2^-6 = 0: the small product is cut before the big ones cancel",
     dict(a=[256, -256, 2 ** -6], b=[1, 1, 1])),
    ("small", "16 + 31 products of 7 x 2^-12: every small one is cut (0.053 lost)",
     dict(a=[16] + [2 ** -9] * 31, b=[1] + [0.875] * 31)),
    ("mixed", "e4m3 x e5m2 (the one mixed FP8 pair): 1792 - 7.5 + 0.0029",
     dict(a=[1.75, -2.5, 0.375], b=[1024, 3, 0.0078125], dtype_b="e5m2")),
    ("tie", "f16 accumulator: 1 + 2^-11 is a tie, RNE keeps the even 1.0",
     dict(a=[1, 2 ** -9], b=[1, 0.25], dtype_d="f16")),
    ("up", "f16 accumulator: 1 + 2^-10 + 2^-11 rounds up (RNE) to 1 + 2^-9",
     dict(a=[1, 2 ** -9, 2 ** -9], b=[1, 0.5, 0.25], dtype_d="f16")),
    ("overflow", "f16 accumulator: 448·448 + 448·448 = 401408 overflows to +Inf",
     dict(a=[448, 448], b=[448, 448], dtype_d="f16")),
    ("subnormal", "f16 accumulator: 2^-9 · 2^-9 = 2^-18, a subnormal result",
     dict(a=[2 ** -9], b=[2 ** -9], dtype_d="f16")),
    ("random", "32 random e4m3 products and C = 0.3: the sum carries above the window",
     dict(a=[-0.0390625, -1.25, 2.5, 0.46875, 0.625, -0.203125, 0.05859375, 0.34375, 0.1875, -0.625, 0.625, 0.5,
             -0.1171875, -0.75, -0.875, -1.0, 0.28125, -0.34375, 0.875, -0.875, 0.75, 0.02734375, -0.5625, 1.0,
             0.15625, 0.8125, 1.125, 0.5, -0.5, 0.1875, 1.0, -0.625],
          b=[2.25, -0.8125, -1.875, -2.25, -4.5, -1.0, 1.5, -8.0, -1.625, 0.8125, -1.625, 3.0, -3.25, 2.75, 3.25,
             1.5, -3.0, 7.0, -1.0, 2.0, -4.0, -3.0, 1.5, -5.5, 1.625, 7.0, -5.5, -1.25, 3.25, -1.5, 3.25, 0.5625],
          c=0.3)),
    ("nan", "e5m2: Inf · 0 gives the canonical NaN (the special path: no alignment)",
     dict(a=[float("inf"), 1], b=[0, 1], dtype_ab="e5m2")),
)


def _ints(a) -> list[int]:
    return [int(x) for x in np.asarray(a).ravel()]


def _grid_of(rows: np.ndarray, cols: np.ndarray, n_cols: int, n_rows: int = ROWS) -> dict[str, list[int]]:
    """Invert a (thread, register, slot) -> (row, col) map: thread/register/slot of each cell."""
    thread = np.full((n_rows, n_cols), -1, np.int64)
    reg = np.full((n_rows, n_cols), -1, np.int64)
    slot = np.full((n_rows, n_cols), -1, np.int64)
    t, j, e = np.meshgrid(np.arange(rows.shape[0]), np.arange(rows.shape[1]), np.arange(rows.shape[2]),
                          indexing="ij")
    thread[rows, cols], reg[rows, cols], slot[rows, cols] = t, j, e
    if (thread < 0).any():
        raise AssertionError("a fragment map leaves a cell without a holder")
    return {"thread": _ints(thread), "reg": _ints(reg), "slot": _ints(slot)}


def _acc_tables() -> dict:
    out = {}
    for d in ACC_DTYPES:
        rows, cols = accumulator_layout(N_MAX, d)
        g = _grid_of(rows, cols, N_MAX)
        out[d] = {"per": int(rows.shape[-1]), "forms": list(ACC_NS[d]), **g}
    return out


def _afrag_tables() -> dict:
    out = {}
    for d in A_DTYPES:
        rows, cols = a_fragment_layout(d)
        k = int(cols.max()) + 1
        out[d] = {"k": k, "per": int(rows.shape[-1]), "bits": 8 * element_bytes(d), **_grid_of(rows, cols, k)}
    return out


def _mma_sync_tables() -> dict:
    """For each form of :data:`MMA_SYNC_VIEW` and operand: the lane, register and slot of every element (the
    quad-pair form: quad pair 0, i.e. lanes 0..3 and 16..19)."""
    from ..layouts.mma_fragment import fragment_layout, matrix_shape
    from ..mma_sync_forms import TYPE_BITS, operand_types, parse_mma_sync

    out = {}
    for instr in MMA_SYNC_VIEW:
        f = parse_mma_sync(instr)
        ops = {}
        for op in "abcd":
            p, r, c = fragment_layout(f, op)
            rows, cols = matrix_shape(f, op)[-2:]
            bits = TYPE_BITS[operand_types(f)[op]]
            per = 1 if bits >= 32 else 32 // bits
            lane = np.full((rows, cols), -1, np.int64)
            reg, slot = lane.copy(), lane.copy()
            L, V = np.meshgrid(np.arange(32), np.arange(p.shape[1]), indexing="ij")
            sel = p == 0
            lane[r[sel], c[sel]], reg[r[sel], c[sel]], slot[r[sel], c[sel]] = L[sel], V[sel] // per, V[sel] % per
            if (lane < 0).any():
                raise AssertionError(f"{instr} {op}: a cell without a holder")
            ops[op] = {"rows": rows, "cols": cols, "per": per, "bits": bits, "type": operand_types(f)[op],
                       "lane": _ints(lane), "reg": _ints(reg), "slot": _ints(slot)}
        out[instr] = {"name": f.name, "quad_pair": f.quad_pair, **ops}
    return out


def _matrix_tables() -> dict:
    """ldmatrix/stmatrix: which lane/register/half holds each element, found by running the
    machine model's stmatrix on tagged registers (row address of lane L = 16 L)."""
    out = {}
    for num in (1, 2, 4):
        for trans in (False, True):
            instr = f"stmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16"
            lane, j = np.meshgrid(np.arange(32), np.arange(num), indexing="ij")
            tag = (lane * 8 + j * 2).astype(np.uint32)
            regs = tag | ((tag + 1) << 16)                    # half h carries tag + h
            img = stmatrix(instr, regs, 16 * np.arange(32), np.zeros(16 * 32, np.uint8))
            halves = img.view(np.uint16).astype(np.int64)     # element at byte 2i of the image
            h_rows, w_cols = (16 if num > 1 else 8), (16 if num == 4 else 8)
            cells = {k: np.full((h_rows, w_cols), -1, np.int64) for k in ("lane", "reg", "half", "giver", "byte")}
            gm, gr = address_givers(num)
            for i in range(8 * num):                           # the rows lanes 0 .. 8num-1 point at
                giver = int(np.flatnonzero((gm == i // 8) & (gr == i % 8))[0])
                for b in range(8):
                    v = int(halves[8 * i + b])
                    mat, rr, cc = i // 8, i % 8, b
                    r0, c0 = diagrams._matrix_origin(num, mat)
                    R, C = r0 + rr, c0 + cc
                    cells["lane"][R, C], cells["reg"][R, C], cells["half"][R, C] = v // 8, (v % 8) // 2, v % 2
                    cells["giver"][R, C], cells["byte"][R, C] = giver, 2 * b
            out[f"x{num}{'t' if trans else ''}"] = {"rows": h_rows, "cols": w_cols,
                                                    **{k: _ints(v) for k, v in cells.items()}}
    return out


def _modes() -> list[dict]:
    out = []
    for m in MODES:
        lines = 1 << m.bits
        out.append({"name": m.name, "bits": m.bits, "desc_code": m.desc_code, "period": m.period,
                    "width": m.width, "atoms": np.asarray(atom_table(m, lines)).tolist()})
    return out


def _kmax(major: str, mode, e: int) -> int:
    """K drawn for a shared-memory tile: one swizzle row (K-major) / two K groups (MN), at
    least one wgmma's 32 bytes (the descriptor view reads that prefix)."""
    if major == "K":
        return mode.width // e if mode.bits else 32 // e
    return 16


def _row_period(coef: np.ndarray) -> int:
    """Smallest P with coef[r + P] = coef[r] + (coef[P] - coef[0]) for every row r."""
    for p in ROW_PERIODS:
        step = coef[p:] - coef[:-p] if p < coef.shape[0] else None
        if step is None or (step == (coef[p] - coef[0])).all():
            return p
    raise AssertionError("no row period")


def _smem_tables() -> dict:
    """offset(r, kb) = a SBO + b LBO + c: the coefficients, rows 0..P-1, and the step per P rows."""
    out = {}
    for major in ("K", "MN"):
        for m in MODES:
            for e in ((1, 2, 4) if major == "K" else (2,)):
                k = _kmax(major, m, e)
                off = {s: SmemLayout(major, m, e, *s).offsets(N_MAX, k) for s in ((0, 0), (16, 0), (0, 16), (48, 80))}
                c = off[0, 0]
                b = (off[16, 0] - c) // 16
                a = (off[0, 16] - c) // 16
                if not (off[48, 80] == c + 48 * b + 80 * a).all():
                    raise AssertionError("the shared-memory layout is not affine in LBO/SBO")
                coef = np.stack([a, b, c], axis=-1)            # (rows, kbytes, 3)
                p = _row_period(coef)
                step = coef[p] - coef[0] if p < N_MAX else np.zeros_like(coef[0])
                if not (step == step[0]).all():
                    raise AssertionError("the step per row period depends on the byte")
                out[f"{major}/{m.name}/{e}"] = {
                    "k": k, "kbytes": k * e, "period": p, "step": _ints(step[0]),
                    "a": _ints(a[:p]), "b": _ints(b[:p]), "c": _ints(c[:p]),
                    "dense": [list(dense_strides(major, m, r, 32 if major == "K" else None))
                              for r in range(8, N_MAX + 1, 8)],
                    "text": list(diagrams._stride_meaning(major, m, e)[:2])}
    return out


def _desc_fields() -> list[dict]:
    """The descriptor's fields as bit ranges and units, found by encoding each field's extremes."""
    names = (("start_address", "start address", 0x3FFF << 4), ("lbo", "LBO", 0x3FFF << 4),
             ("sbo", "SBO", 0x3FFF << 4), ("base_offset", "base offset", 7), ("swizzle", "swizzle", 3))
    out = []
    for key, label, top in names:
        hi_bits = MatrixDescriptor(**{key: top}).encode()
        lo, hi = (hi_bits & -hi_bits).bit_length() - 1, hi_bits.bit_length() - 1
        one = MatrixDescriptor(**{key: top & -top}).encode()
        unit = (top & -top) // (one >> lo)
        out.append({"key": key, "label": label, "lo": lo, "hi": hi, "unit": int(unit)})
    return out


def _sparse_tables() -> dict:
    out = {}
    for d in SPARSE_DTYPES:
        sels = [s for s in (0, 1) if _sel_ok(d, s)]
        out[d] = {"cols": meta_cols(d), "sels": sels,
                  "width": 2 if d == "tf32" else 4,
                  **{str(s): dict(zip(("thread", "pos"), map(_ints, meta_holders(d, s)))) for s in sels}}
    return out


def _sel_ok(dtype: str, sel: int) -> bool:
    try:
        check_sp_sel(dtype, sel)
        return True
    except InputError:
        return False


def _epilogue_tables() -> dict:
    """Pre-swizzle offset p + q N of D[r, c] per mode; the stmatrix slice and address-giving
    thread of each 16-byte row segment (matched against epilogue_addresses)."""
    out = {"instr": STMATRIX_X4, "ns": list(range(16, N_MAX + 1, 16))}
    giver0 = None
    for m in MODES:
        pre = {n: np.asarray(m.swizzle(rowmajor_offsets(ROWS, n, 2, m))) for n in (N_MAX, _N_FIT)}
        dq = pre[_N_FIT][:, :N_MAX] - pre[N_MAX]
        if (dq % (_N_FIT - N_MAX)).any():
            raise AssertionError("the epilogue offsets are not affine in N")
        q = dq // (_N_FIT - N_MAX)
        p = pre[N_MAX] - q * N_MAX
        post = rowmajor_offsets(ROWS, N_MAX, 2, m)
        addrs = epilogue_addresses(N_MAX, m)               # (N/16, 128)
        where = {int(a): (s, t) for s in range(addrs.shape[0]) for t, a in enumerate(addrs[s])}
        seg = post[:, (np.arange(N_MAX) // 8) * 8]         # address of each element's 16-byte row segment
        held = np.array([where[int(a)] for a in seg.ravel()]).reshape(seg.shape + (2,))
        slc, giver = held[..., 0], held[..., 1]
        if giver0 is None:
            giver0, slc0 = giver, slc
        elif not ((giver == giver0).all() and (slc == slc0).all()):
            raise AssertionError("the epilogue's address givers depend on the swizzle")
        out[m.name] = {"p": _ints(p), "q": _ints(q), "ns": [n for n in out["ns"] if _epilogue_ok(n, m)]}
    out["giver"], out["slice"] = _ints(giver0), _ints(slc0)
    return out


def _epilogue_ok(n: int, mode) -> bool:
    """Whether refmodel's epilogue is defined for m64nN under ``mode`` (rows of whole swizzle rows)."""
    try:
        epilogue_addresses(n, mode)
        return True
    except InputError:
        return False


# ----------------------------------------------------------------------------- colours

FADE = 0.75            # unselected cells while a thread is picked: the colour mixed with 75 % white
FADED_INK = "#444"     # their label (contrast >= 4.5 on every faded fill: checked in _palette)
#: explain-dot's fills (bit boxes: empty / one bit), keyed as the dot view's cells name them
DOT_FILLS = {"w": (explain_draw.WIN, explain_draw.WIN1), "x": (explain_draw.CUT, explain_draw.CUT1),
             "y": (explain_draw.CARRY, explain_draw.CARRY1), "s": (explain_draw.SUM, explain_draw.SUM1),
             "d": (explain_draw.DROP, explain_draw.DROP1)}
NO_BIT = "#ffffff"     # a dot-view cell where the term has no bit


def _hex(c: tuple[float, float, float]) -> str:
    return "#" + "".join(f"{round(255 * v):02x}" for v in c)


def _fade(colour: str) -> str:
    return _hex(tuple(v + (1 - v) * FADE for v in rgb(colour)))


def _palette() -> dict[str, list[str]]:
    """Every cell colour of the page, by class key: [fill, label ink, faded fill, faded ink].

    t0..t127: threads (:func:`~.core.thread_colour`), l0..l31: lanes, i0..i7: 16-byte atoms, w/x/y/s/d + 0/1:
    explain-dot's window / cut / carry / sum / dropped bit boxes, e: no bit.  The ink is black or white,
    whichever contrasts more (>= 4.58 on every fill, :func:`~.core.ink`)."""
    fills = {**{f"t{t}": thread_colour(t) for t in range(THREADS)}, **{f"l{i}": lane_colour(i) for i in range(32)},
             **{f"i{i}": index_colour(i) for i in range(8)},
             **{f"{k}{b}": v[b] for k, v in DOT_FILLS.items() for b in (0, 1)}, "e": NO_BIT}
    out = {}
    for key, fill in fills.items():
        faded = _fade(fill)
        if contrast(FADED_INK, faded) < 4.5:
            raise AssertionError(f"faded label ink {FADED_INK} on {faded} ({key}) is below 4.5")
        out[key] = [fill, ink(fill), faded, FADED_INK]
    return out


def palette_css(palette: dict[str, list[str]]) -> str:
    """One class a palette key (.k-t37), and its faded form in the grid while a thread is picked."""
    return "".join(f".k-{k}{{background-color:{f};color:{i}}}"
                   f"#grid.picking td.k-{k}:not(.lit){{background-color:{ff};color:{fi}}}"
                   for k, (f, i, ff, fi) in palette.items())


# ----------------------------------------------------------------------------- the dot view

def _dot_command(kw: dict) -> str:
    """The ``wgref explain-dot`` arguments that explain the same element."""
    if kw == DOC_CASE:
        return "--case doc"

    def vals(xs):
        return ",".join("inf" if x == float("inf") else "-inf" if x == -float("inf") else repr(float(x)) for x in xs)

    parts = [f"--dtype {kw.get('dtype_ab', 'e4m3')}"]
    if kw.get("dtype_b"):
        parts.append(f"--dtype-b {kw['dtype_b']}")
    if kw.get("dtype_d", "f32") != "f32":
        parts.append(f"--acc {kw['dtype_d']}")
    parts += [f"--a {vals(kw['a'])}", f"--b {vals(kw['b'])}"]
    if kw.get("c") is not None:
        parts.append(f"--c {float(kw['c'])!r}")
    return " ".join(parts)


def _region(ex: DotExplanation, w: int) -> str:
    """Where bit weight ``w`` lies: the window (kept), below it (cut) or above it (carry)."""
    floor = ex.e_max - ex.F
    return "w" if floor <= w <= ex.e_max + 1 else ("x" if w < floor else "y")


def _dot_rows(ex: DotExplanation) -> list[dict]:
    """The bit grid of :func:`~.explain_draw.to_svg` as rows of characters over the weights hi..lo:
    ``bits`` ('0', '1', '.' = no bit) and ``reg`` (the fill key's letter per column)."""
    hi, floor, lo = explain_draw._columns(ex)
    ws = range(hi, lo - 1, -1)
    rows = []
    for t in explain_draw._shown_terms(ex):
        if t is None:
            pad = ex.k - ex.given
            rows.append({"kind": "pad", "name": f"{pad} x 0·0", "value": "0", "exp": ex.e_zero,
                         "shift": ex.e_max - ex.e_zero, "kept": 0, "cut": "", "count": pad,
                         "bits": "." * len(ws), "reg": "." * len(ws)})
            continue
        inside = [not t.zero and t.lsb <= w <= t.top for w in ws]
        rows.append({"kind": "zero" if t.zero else "term", "name": ("−" if t.sign and not t.zero else "") + t.name,
                     "value": "0" if t.zero else repr(t.value), "exp": t.exp, "shift": t.shift, "kept": t.kept,
                     "cut": explain_draw._cut_words(t, lo),
                     "bits": "".join(str(t.bit(w)) if i else "." for w, i in zip(ws, inside)),
                     "reg": "".join(_region(ex, w) if i else "." for w, i in zip(ws, inside))})
    mag = abs(ex.total)
    if mag:
        r = ex.round
        keep_lo = r.top - r.mbits - int(r.carried)     # the last kept bit before any carry (as to_svg draws it)
        s_bits, r_bits, r_reg = [], [], []
        for w in ws:
            s_bits.append(str((mag >> (w - floor)) & 1) if floor <= w <= floor + mag.bit_length() - 1 else ".")
            if w < keep_lo:                             # dropped by the final rounding: the sum's bits
                b = str((mag >> (w - floor)) & 1) if floor <= w <= floor + mag.bit_length() - 1 else "."
                r_bits.append(b), r_reg.append("d" if b != "." else ".")
            elif w <= r.top:                            # the result's significand after the rounding
                r_bits.append(str((r.mant >> (w - r.top + r.mbits)) & 1) if w >= r.top - r.mbits else "0")
                r_reg.append("s")
            else:
                r_bits.append("."), r_reg.append(".")
        rows.append({"kind": "sum", "name": "sum" + (" (negative)" if ex.total < 0 else ""), "kept": ex.total,
                     "bits": "".join(s_bits), "reg": "".join("s" if b != "." else "." for b in s_bits)})
        rows.append({"kind": "rounded", "name": "rounded", "bits": "".join(r_bits), "reg": "".join(r_reg)})
    return rows


def dot_explanation(kw: dict) -> DotExplanation:
    """:func:`~refmodel.numerics.explain.explain_dot` of one of :data:`DOT_EXAMPLES`' keyword sets."""
    kw = dict(kw)
    return explain_dot(kw.pop("a"), kw.pop("b"), kw.pop("c", None), **kw)


def _dot_example(key: str, label: str, kw: dict) -> dict:
    ex = dot_explanation(kw)
    keys = {fill: f"{k}1" for k, (_, fill) in DOT_FILLS.items()}
    out = {"id": key, "label": label, "command": "wgref explain-dot " + _dot_command(kw),
           "instr": ex.instr, "params": explain_draw._params_text(ex), "inputs": explain_draw._inputs(ex),
           "notes": list(ex.notes), "special": ex.special, "result_hex": ex.result_hex,
           "result_line": explain_draw._result_line(ex),
           "legend": [[keys.get(f, ""), t] for f, t in explain_draw.legend(ex)]}
    if ex.special is None:
        hi, floor, lo = explain_draw._columns(ex)
        out.update({"e_max": ex.e_max, "F": ex.F, "floor": floor, "hi": hi, "lo": lo, "e_zero": ex.e_zero,
                    "rounding": ex.rounding.upper(), "mbits": ex.round_mbits, "total": ex.total,
                    "window_line": (f"e_max = {ex.e_max} (the largest term exponent): every term keeps its bits "
                                    f"2^{ex.e_max + 1} .. 2^{floor} (F = {ex.F} fraction bits below 2^e_max); the "
                                    f"bits below 2^{floor} are cut (truncated toward zero, the sign applied after)"),
                    "rows": _dot_rows(ex), "lines": explain_draw._rounding_lines(ex)})
    return out


def _dot_tables() -> dict:
    return {"examples": [_dot_example(k, lab, kw) for k, lab, kw in DOT_EXAMPLES],
            "source": explain_draw.SOURCE}


def explore_data() -> dict:
    """Every table the explorer page embeds (JSON-serialisable)."""
    return {
        "layouts": [{"id": i, "label": lab, "opts": list(o)} for i, lab, o in LAYOUTS],
        "dtypes": {"acc": list(ACC_DTYPES), "afrag": list(A_DTYPES), "swizzle": list(OPERAND_DTYPES),
                   "smem": list(OPERAND_DTYPES), "desc": list(OPERAND_DTYPES), "sparse": list(SPARSE_DTYPES),
                   "epilogue": ["bf16", "f16"]},
        "elem_bytes": {d: element_bytes(d) for d in OPERAND_DTYPES},
        "threads": THREADS, "rows": ROWS, "n_max": N_MAX, "swizzle_lines": SWIZZLE_LINES,
        "palette": _palette(),
        "sources": {"fragment": diagrams.SRC_FRAGMENT.format("CLayout_64xN / ALayout_64xK"),
                    "matrix": diagrams.SRC_MATRIX.format(op="ldmatrix/stmatrix", file="sm75/sm90"),
                    "swizzle": diagrams.SRC_SWIZZLE, "smem": diagrams.SRC_SMEM, "desc": diagrams.SRC_DESC,
                    "sparse": diagrams.SRC_SPARSE},
        "acc": _acc_tables(), "afrag": _afrag_tables(), "matrix": _matrix_tables(),
        "modes": _modes(), "smem": _smem_tables(),
        "desc": {"fields": _desc_fields(), "default": f"{0x4000004000010040:#018x}"},
        "sparse": _sparse_tables(), "epilogue": _epilogue_tables(), "dot": _dot_tables(),
        "mmasync": {"forms": list(MMA_SYNC_VIEW), "tables": _mma_sync_tables()},
    }


def _json_for_script(obj) -> str:
    """JSON safe inside <script> and still valid JSON: every '<' (which JSON has only inside strings) is
    written as the escape \\u003c, so no '</script>' or '<!--' can appear, and JSON.parse gives the data back."""
    return json.dumps(obj, separators=(",", ":")).replace("<", "\\u003c")


def explore_html() -> str:
    """The explorer page: one self-contained HTML file (inline data, script and style)."""
    data = explore_data()
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            "<title>wgref explore: Hopper wgmma layouts</title>\n"
            f"<style>{CSS}{palette_css(data['palette'])}</style>\n</head><body>\n{BODY}\n"
            f"<script id=\"wgref-data\" type=\"application/json\">{_json_for_script(data)}</script>\n"
            f"<script>{JS}</script>\n</body></html>\n")


__all__ = ["LAYOUTS", "DOT_EXAMPLES", "dot_explanation", "explore_data", "explore_html", "palette_css"]
