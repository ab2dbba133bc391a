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
from . import diagrams
from .core import index_colour, lane_colour, thread_colour
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


def explore_data() -> dict:
    """Every table the explorer page embeds (JSON-serialisable)."""
    return {
        "layouts": [{"id": i, "label": lab, "opts": list(o)} for i, lab, o in LAYOUTS],
        "dtypes": {"acc": list(ACC_DTYPES), "afrag": list(A_DTYPES), "swizzle": list(OPERAND_DTYPES),
                   "smem": list(OPERAND_DTYPES), "desc": list(OPERAND_DTYPES), "sparse": list(SPARSE_DTYPES),
                   "epilogue": ["bf16", "f16"]},
        "elem_bytes": {d: element_bytes(d) for d in OPERAND_DTYPES},
        "threads": THREADS, "rows": ROWS, "n_max": N_MAX, "swizzle_lines": SWIZZLE_LINES,
        "palette": {"thread": [thread_colour(t) for t in range(THREADS)], "lane": [lane_colour(i) for i in range(32)],
                    "index": [index_colour(i) for i in range(8)]},
        "sources": {"fragment": diagrams.SRC_FRAGMENT.format("CLayout_64xN / ALayout_64xK"),
                    "matrix": diagrams.SRC_MATRIX.format(op="ldmatrix/stmatrix", file="sm75/sm90"),
                    "swizzle": diagrams.SRC_SWIZZLE, "smem": diagrams.SRC_SMEM, "desc": diagrams.SRC_DESC,
                    "sparse": diagrams.SRC_SPARSE},
        "acc": _acc_tables(), "afrag": _afrag_tables(), "matrix": _matrix_tables(),
        "modes": _modes(), "smem": _smem_tables(),
        "desc": {"fields": _desc_fields(), "default": f"{0x4000004000010040:#018x}"},
        "sparse": _sparse_tables(), "epilogue": _epilogue_tables(),
    }


def _json_for_script(obj) -> str:
    """JSON safe inside <script> and still valid JSON: every '<' (which JSON has only inside strings) is
    written as the escape \\u003c, so no '</script>' or '<!--' can appear, and JSON.parse gives the data back."""
    return json.dumps(obj, separators=(",", ":")).replace("<", "\\u003c")


def explore_html() -> str:
    """The explorer page: one self-contained HTML file (inline data, script and style)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            "<title>wgref explore: Hopper wgmma layouts</title>\n"
            f"<style>{CSS}</style>\n</head><body>\n{BODY}\n"
            f"<script id=\"wgref-data\" type=\"application/json\">{_json_for_script(explore_data())}</script>\n"
            f"<script>{JS}</script>\n</body></html>\n")


__all__ = ["LAYOUTS", "explore_data", "explore_html"]
