"""Builders: each returns a :class:`~refmodel.render.core.Diagram` computed from the layouts layer.

Nothing here restates a layout: every cell comes from :mod:`refmodel.layouts` (fragment,
stmatrix, swizzle, smem, descriptor), so a picture is as right as the model the H200
fixtures check.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import element_bytes
from ..errors import InputError
from ..layouts.descriptor import MatrixDescriptor, describe, operand_addresses
from ..layouts.fragment import THREADS, a_fragment_layout, accumulator_layout, check_acc_form
from ..layouts.smem import SmemLayout, _major, dense_strides
from ..layouts.sparse_meta import meta_holders
from ..layouts.stmatrix import address_givers, fragment_map
from ..layouts.swizzle import ATOM_BYTES, mode_from_desc_code, swizzle_mode
from ..validate import check_flag, check_int, excerpt
from .core import BLANK, IGNORED, TEXT_ASCII, TEXT_SVG, Diagram, Panel, index_colour, lane_colour, split_columns, \
    thread_colour

SRC_FRAGMENT = ('PTX ISA, wgmma "Register Fragments" (matrix D / matrix A of .m64nNk*); '
                "CuTe cute/atom/mma_traits_sm90_gmma.hpp ({})")
SRC_MATRIX = ('PTX ISA "{op}" (Data Movement: .m8n8 .x1/.x2/.x4 .trans .b16); CuTe '
              "cute/atom/copy_traits_{file}.hpp; seed lecture §5.2-5.3")
SRC_SWIZZLE = ('PTX ISA, wgmma "Shared Memory Matrix Layout" (swizzling modes); CuTe cute/swizzle.hpp '
               "Swizzle<B,4,3>; seed lecture §7")
SRC_SMEM = ('PTX ISA, wgmma "Shared Memory Matrix Layout" (canonical K-/MN-major layouts, LBO/SBO); '
            "CuTe cute/atom/mma_traits_sm90_gmma.hpp (make_gmma_desc, Layout_*_SW*_Atom)")
SRC_SPARSE = ('PTX ISA, wgmma.mma_async.sp "Sparse Matrix Storage" / "Metadata" (sp-meta, sparsity selector); '
              "CuTe cute/arch/mma_sm90_gmma_sparse.hpp; seed lecture §16-17; layout found on the H200 with tagged "
              "probes (fixtures/sparse)")
SPARSE_DTYPES = ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8")
SRC_DESC = ('PTX ISA, wgmma "Matrix Descriptor Format"; CuTe cute/arch/mma_sm90_desc.hpp (GmmaDescriptor) '
            "and make_gmma_desc; base-offset rule measured on the H200")

ACC_DTYPES = ("f32", "s32", "f16")
A_DTYPES = ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8")
OPERAND_DTYPES = ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8")


def _grid(rows: int, cols: int, value: str = "") -> list[list[str]]:
    return [[value] * cols for _ in range(rows)]


def _check_dtype(dtype: str, allowed: tuple[str, ...], what: str) -> str:
    if not isinstance(dtype, str) or dtype not in allowed:
        raise InputError(f"{what} dtype must be one of {', '.join(allowed)}, got {excerpt(dtype)}")
    return dtype


def _extent(name: str, v, lim: str, multiple: int | None = None):
    """A size of a drawn tile: an integer of at most the diagram limit ``lim`` (None passes)."""
    if v is None:
        return None
    return check_int(name, v, 1, limit=lim, multiple=multiple)


FRAG_BLOCK = 16   # columns per drawn block of a fragment: a readable width at 100 % zoom


def _group_key(panels: list[Panel]) -> list[tuple[str, str]]:
    """The ascii legend entry for the block separators that the ascii tables really print."""
    keys = []
    if any(p.col_groups and p.cols > p.col_groups for p in panels):
        keys.append("| = column-block boundary")
    rows = [p for p in panels if p.row_groups and p.rows > p.row_groups]
    if rows:   # the ascii row separator is dashes, crossed by + where a column separator meets it
        crossed = any(p.col_groups and p.cols > p.col_groups for p in rows)
        keys.append(f"{'-+-' if crossed else '---'} = row-block boundary")
    return [(TEXT_ASCII, "; ".join(keys))] if keys else []


def _thread_legend() -> list[tuple[str, str]]:
    return [(thread_colour(32 * w), f"warp {w}: threads {32 * w}-{32 * w + 31} (lane%4 shifts the "
                                    f"hue, lane/4 the lightness)") for w in range(4)]


# ----------------------------------------------------------------------------- register fragments

def _slot_suffix(per: int, e: int) -> str:
    if per == 1:
        return ""
    return f".b{e}" if per == 4 else f".{e}"


def _fragment_panels(title: str, rows: np.ndarray, cols: np.ndarray, n_cols: int) -> list[Panel]:
    """64 x n_cols grid, cut into blocks of FRAG_BLOCK columns: label T<t>:r<j>[.<slot>] and
    thread colour of each element."""
    labels, fills = _grid(64, n_cols), _grid(64, n_cols)
    per = rows.shape[-1]
    for t in range(THREADS):
        for j in range(rows.shape[1]):
            for e in range(per):
                r, c = int(rows[t, j, e]), int(cols[t, j, e])
                labels[r][c] = f"T{t}:r{j}{_slot_suffix(per, e)}"
                fills[r][c] = thread_colour(t)
    p = Panel(title, labels, fills, row_heads=[str(r) for r in range(64)],
              col_heads=[str(c) for c in range(n_cols)], col_groups=8, row_groups=8)
    p.boxes += [(16 * w, 0, 16 * w + 16, n_cols, f"warp {w}", "thick") for w in range(4)]
    # thread 0's cells, outlined: the pattern every thread repeats
    for j in range(rows.shape[1]):
        for e in range(per):
            r, c = int(rows[0, j, e]), int(cols[0, j, e])
            p.boxes.append((r, c, r + 1, c + 1, "", "focus"))
    return split_columns(p, FRAG_BLOCK)


def acc(n: int = 64, dtype: str = "f32") -> Diagram:
    """The wgmma accumulator (C/D) fragment of m64nN: which thread/register holds D[row, col]."""
    _check_dtype(dtype, ACC_DTYPES, "accumulator")
    rows, cols = accumulator_layout(n, dtype)
    n = int(n)
    try:
        check_acc_form(n, dtype)
        no_form = None
    except InputError as e:   # drawn (the map is defined), but never silently: the picture says so
        no_form = f"NOTE: {e}; this draws the m64n{n} map of the other accumulator types, which no {dtype} " \
                  f"wgmma uses."
    per = rows.shape[-1]
    panels = _fragment_panels(f"D (64 x {n}, {dtype})", rows, cols, n)
    t0 = ", ".join(f"r{j}{_slot_suffix(per, e)}=D[{int(rows[0, j, e])},{int(cols[0, j, e])}]"
                   for j in range(min(4, rows.shape[1])) for e in range(per))
    legend = _thread_legend() + [("", ("T<t>:r<j>.<h> = thread t, register j, half h (.0 = bits 15:0, .1 = bits "
                                       "31:16 of the f16x2 register)") if per > 1 else
                                  "T<t>:r<j> = thread t, register j"),
                                 ("@focus", "thread 0's elements"), ("@thick", "one warp's 16 rows")]
    legend += _group_key(panels)
    caption = [
        "Element i of thread t (w = t/32, g = (t%32)/4, q = t%4): row = 16w + g + 8*((i>>1)&1), "
        "col = 2q + (i&1) + 8*(i>>2). "
        + ("Each f32/s32 register holds one element." if per == 1 else
           "f16 packs two elements per register: register j holds elements 2j (bits 15:0) and 2j+1 (bits 31:16)."),
        f"Thread 0: {t0}, ... Warp w owns rows 16w..16w+15; each quad of threads covers one row of an 8-column block, "
        f"and the block repeats every 8 columns ({n // 8} blocks, {rows.shape[1]} registers per thread).",
    ]
    if no_form:
        caption.insert(0, no_form)
    return Diagram("acc", f"wgmma accumulator fragment m64n{n} {dtype}" + (" (no such wgmma form)" if no_form else ""),
                   SRC_FRAGMENT.format("CLayout_64xN"),
                   panels, legend, caption,
                   verified="verified on the H200: fixtures/layouts (wgmma through descriptors) and fixtures/wgmma")


def a_frag(dtype: str = "f16") -> Diagram:
    """The RS-form A fragment (A from registers, 64 x K) for one A type."""
    _check_dtype(dtype, A_DTYPES, "A")
    rows, cols = a_fragment_layout(dtype)
    per = rows.shape[-1]
    k = int(cols.max()) + 1
    slot = {1: "", 2: ".<half>", 4: ".b<byte>"}[per]
    panels = _fragment_panels(f"A (64 x {k}, {dtype}): cell = T<thread>:r<register>{slot}", rows, cols, k)
    cute = {1: "ALayout_64x8", 2: "ALayout_64x16", 4: "ALayout_64x32"}[per]
    formula = {
        1: "tf32: element i = register i: row = 16w + g + 8*(i&1), col = q + 4*(i>>1).",
        2: "16-bit: the accumulator map with N = 16, two elements per register (element 2j in bits 15:0).",
        4: "8-bit: element i is byte i&3 of register i>>2: row = 16w + g + 8*((i>>2)&1), col = 4q + (i&3) + 16*(i>>3).",
    }[per]
    t0 = ", ".join(f"r{j}{_slot_suffix(per, e)}=A[{int(rows[0, j, e])},{int(cols[0, j, e])}]"
                   for j in range(4) for e in range(per))
    legend = _thread_legend() + [("", {1: "T<t>:r<j> = thread t, register j",
                                       2: "T<t>:r<j>.<h> = thread t, register j, half h (0: bits 15:0, 1: bits 31:16)",
                                       4: "T<t>:r<j>.b<n> = thread t, register j, byte n (byte 0 = bits 7:0)"}[per]),
                                 ("@focus", "thread 0's elements"), ("@thick", "one warp's 16 rows")]
    legend += _group_key(panels)
    caption = [f"Every A type takes 4 registers per thread and 32 bytes of K per row (K = {k} for {dtype}). {formula}",
               f"Thread 0 holds {t0}."]
    return Diagram("a-frag", f"wgmma A fragment (RS form, A from registers) {dtype}", SRC_FRAGMENT.format(cute),
                   panels, legend, caption,
                   verified="verified on the H200: fixtures/layouts and fixtures/wgmma (RS forms)")


# ----------------------------------------------------------------------------- ldmatrix / stmatrix

def _matrix_origin(num: int, j: int) -> tuple[int, int]:
    """Where matrix j sits in the drawn tile: x4 as the epilogue's 16x16 (seed §5.3:
    0 top-left, 1 bottom-left, 2 top-right, 3 bottom-right); x2 stacked; x1 alone."""
    return 8 * (j % 2), 8 * (j // 2)


def matrix(op: str = "stmatrix", num: int = 4, trans: bool = False) -> Diagram:
    """Two panels of an ldmatrix/stmatrix .m8n8.x{num}[.trans].b16: who gives each row's
    address, and who holds each element (lane, register, half)."""
    if not isinstance(op, str) or op not in ("ldmatrix", "stmatrix"):
        raise InputError(f"op must be ldmatrix or stmatrix, got {excerpt(op)}")
    if isinstance(num, (bool, np.bool_)) or not isinstance(num, (int, np.integer)) or int(num) not in (1, 2, 4):
        raise InputError(f"--num must be 1, 2 or 4 (.x1/.x2/.x4), got {excerpt(num)}")
    num = int(num)
    trans = check_flag("trans", trans)
    H, W = (16 if num > 1 else 8), (16 if num == 4 else 8)
    instr = f"{op}.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16"
    giver_m, giver_r = address_givers(num)
    mat, row, col = fragment_map(num, trans)

    a_lab, a_fill = _grid(H, W), _grid(H, W)
    for lane in range(32):
        j, r = int(giver_m[lane]), int(giver_r[lane])
        if j < 0:
            continue
        R0, C0 = _matrix_origin(num, j)
        for c in range(8):
            a_fill[R0 + r][C0 + c] = lane_colour(lane)
        a_lab[R0 + r][C0] = f"L{lane}>"
    addr = Panel("1. who gives the address: lane L points at one 16-byte row", a_lab, a_fill,
                 row_heads=[f"row {r % 8}" for r in range(H)], col_heads=[str(c % 8) for c in range(W)],
                 col_groups=8, row_groups=8)
    d_lab, d_fill = _grid(H, W), _grid(H, W)
    for lane in range(32):
        for j in range(num):
            for h in range(2):
                R0, C0 = _matrix_origin(num, j)
                r, c = R0 + int(row[lane, j, h]), C0 + int(col[lane, j, h])
                d_lab[r][c] = f"T{lane}:r{j}.{h}"
                d_fill[r][c] = lane_colour(lane)
    data = Panel("2. who holds the data: lane T, register r, half (.0 = bits 15:0)", d_lab, d_fill,
                 row_heads=[f"row {r % 8}" for r in range(H)], col_heads=[str(c % 8) for c in range(W)],
                 col_groups=8, row_groups=8)
    for p in (addr, data):
        for j in range(num):
            R0, C0 = _matrix_origin(num, j)
            p.boxes.append((R0, C0, R0 + 8, C0 + 8, f"matrix {j}", "thick"))
    addr.boxes.append((0, 0, 1, 8, "", "focus"))
    for j in range(num):
        for h in range(2):
            R0, C0 = _matrix_origin(num, j)
            r, c = R0 + int(row[0, j, h]), C0 + int(col[0, j, h])
            data.boxes.append((r, c, r + 1, c + 1, "", "focus"))
    if num < 4:
        addr.notes.append(f"lanes {8 * num}-31: address ignored (only lanes 0-{8 * num - 1} give rows)")
    held = "; ".join(f"r{j} = matrix {j} " + (f"row {int(row[0, j, 0])}, columns {int(col[0, j, 0])}-{int(col[0, j, 1])}"
                                              if not trans else
                                              f"rows {int(row[0, j, 0])}-{int(row[0, j, 1])}, column {int(col[0, j, 0])}")
                     for j in range(num))
    direction = ("memory -> registers: each addressed 16-byte row is loaded and scattered over the warp"
                 if op == "ldmatrix" else
                 "registers -> memory: the warp's registers are gathered and each 16-byte row written at its lane's address")
    givers = {1: "lanes 0-7 give the rows of matrix 0 (the only one)",
              2: "lanes 0-7 give the rows of matrix 0, lanes 8-15 those of matrix 1",
              4: "lanes 0-7 give the rows of matrix 0, lanes 8-15 of matrix 1, 16-23 of matrix 2, 24-31 of matrix 3"}
    caption = [
        f"{instr}: {direction}. The address and the data are decoupled (seed §4-5): lane L in 0..{8 * num - 1} gives "
        + ("the address of row L of the matrix: " if num == 1 else "the address of row L%8 of matrix L/8: ")
        + givers[num] + ".",
        f"Meanwhile every lane holds {'one register' if num == 1 else 'one register per matrix'} with two 16-bit "
        f"halves. Thread 0 holds {held}"
        + (f": the striped layout, thread 0 owns columns 0-1 of {'the' if num == 1 else 'every'} 8x8 matrix "
           "(seed §5.3)." if not trans else
           ": with .trans each thread's pair runs down a column instead of along a row."),
        ("The four matrices are drawn as the epilogue's 16x16 tile (0 top-left, 1 bottom-left, 2 top-right, "
         "3 bottom-right); in general each row goes wherever its lane's address points." if num == 4 else
         "In general each row goes wherever its lane's address points."),
    ]
    legend = [(lane_colour(lane), f"lane {lane}") for lane in range(32)]
    legend += [("", "L<n>> = lane n gives this row's address; T<n>:r<j>.<h> = lane n, register j, half h"),
               ("@focus", "lane 0's address row (panel 1) and lane 0's data (panel 2)"),
               ("@thick", "one 8x8 matrix (16-byte rows)")] + _group_key([addr, data])
    legend.append((TEXT_ASCII, ". = the rest of the 16-byte row a lane points at (panel 1)"))
    return Diagram(op, f"{op} .m8n8.x{num}{' .trans' if trans else ''} .b16: address givers and data holders",
                   SRC_MATRIX.format(op=op, file="sm75" if op == "ldmatrix" else "sm90"), [addr, data], legend, caption)


# ----------------------------------------------------------------------------- swizzle

def swizzle(mode: str = "128B", dtype: str = "f16", lines: int = 8) -> Diagram:
    """The 16-byte-unit permutation of a swizzle mode over the tile's own rows (W bytes each for
    a W-byte swizzle, 128 for none), units coloured by their ORIGINAL position in the row."""
    m = swizzle_mode(mode)
    _check_dtype(dtype, OPERAND_DTYPES, "element")
    lines = check_int("lines", lines, 1, limit="diagram_lines")
    e = element_bytes(dtype)
    per = ATOM_BYTES // e
    row_b = m.width if m.bits else 128
    n_units = row_b // ATOM_BYTES
    r = np.arange(lines)[:, None]
    c = np.arange(n_units)[None, :]
    stored = np.asarray(m.swizzle(r * row_b + c * ATOM_BYTES))
    assert ((stored // row_b) == r).all()          # a swizzle never moves a unit out of its row
    pos = (stored % row_b) // ATOM_BYTES

    def lab(c: int) -> str:
        return f"u{c}:{c * per}-{c * per + per - 1}"

    lg, lf = _grid(lines, n_units), _grid(lines, n_units)
    pg, pf = _grid(lines, n_units), _grid(lines, n_units)
    for i in range(lines):
        for j in range(n_units):
            lg[i][j], lf[i][j] = lab(j), index_colour(j)
            p = int(pos[i, j])
            pg[i][p], pf[i][p] = lab(j), index_colour(j)
    heads = [f"+{16 * j}" for j in range(n_units)]
    rh = [f"row {i} @{row_b * i}" for i in range(lines)]
    what = f"{row_b}-byte row" if m.bits else "128-byte line"
    logical = Panel(f"logical: 16-byte unit u of each {what} (before the swizzle)", lg, lf, rh, heads)
    physical = Panel(f"stored: where each unit lands ({m.name})", pg, pf, rh, heads)
    if m.bits:
        for p in (logical, physical):
            for r0 in range(0, lines, 8):
                p.boxes.append((r0, 0, min(lines, r0 + 8), n_units,
                                f"swizzle atom: 8 x {row_b} B = {m.period} B" if r0 == 0 else "", "thick"))
    mask = (1 << m.bits) - 1
    legend = [(index_colour(j), f"unit {j}: bytes {16 * j}-{16 * j + 15} of the row = {dtype} elements "
                                f"{j * per}-{j * per + per - 1}") for j in range(n_units)]
    legend += [("", f"u<c>:<i>-<j> = 16-byte unit c of the row (before the swizzle), holding elements i..j "
                    f"({per} x {dtype} = 16 bytes)")]
    if m.bits:
        legend.append(("@thick", f"one swizzle atom: 8 rows x {row_b} B, the {m.period}-byte period of the pattern"))
    ubits = (row_b // ATOM_BYTES).bit_length() - 1
    legend.append(("", f"byte address bits: [3:0] byte inside the 16-byte unit (never moves), "
                       f"{'[4]' if ubits == 1 else f'[{3 + ubits}:4]'} unit inside the row, [{m.period.bit_length() - 2}:{4 + ubits}] row "
                       "of the swizzle atom" if m.bits else
                       "byte address bits: [3:0] byte inside the 16-byte unit, [6:4] unit, [9:7] 128-byte line"))
    if not m.bits:
        rule = "none: nothing moves (the identity)."
    else:
        rows_per_line = 128 // row_b
        line = "row" if rows_per_line == 1 else f"row // {rows_per_line}"
        rule = (f"{m.name} = Swizzle<{m.bits},4,3>: address bits [{3 + m.bits}:4] ^= bits [{6 + m.bits}:7]. "
                f"In a {row_b}-byte-row tile, row r starts at {row_b}r, so bits [{6 + m.bits}:7] are "
                f"({line}) & {mask}: stored unit = unit XOR (({line}) & {mask}); "
                f"the pattern repeats every 8 rows = {m.period} bytes (one swizzle atom)."
                + (f" Rows 0-{rows_per_line - 1} of each swizzle atom stay in place." if rows_per_line > 1 else ""))
    caption = [rule,
               "The unit that moves is the 16-byte unit: one 8x8 b16 row, 8 f16 / 16 e4m3 / 4 tf32 elements (seed §7). "
               "Bytes inside a unit stay in order, which is why a TMA load/store can unswizzle to a clean row-major "
               "tile; the swizzle atom is the 8-row pattern the units are permuted in.",
               "The swizzle acts on the absolute shared address, so a tile should start on the pattern's period "
               f"({m.period} bytes) unless the descriptor's base offset says otherwise."]
    if m.bits:
        i = min(5, lines - 1)
        j = min(2, n_units - 1) if n_units > 1 else 0
        caption.append(f"Example: row {i}, unit {j} -> unit {int(pos[i, j])} (address "
                       f"{row_b * i + 16 * j:#x} is stored at {int(stored[i, j]):#x}).")
    return Diagram("swizzle", f"{m.name} swizzle: 16-byte unit permutation ({dtype}: {per} elements per unit)",
                   SRC_SWIZZLE, [logical, physical], legend, caption)


# ----------------------------------------------------------------------------- operand tiles

def _core_id(r: int, k: int, e: int, major: str) -> tuple[int, int]:
    """Core matrix (g, j) of element (r, k): g its 8-row (K-major) or 16-byte MN (MN-major)
    group, j its 16-byte K chunk (K-major) or group of 8 K columns (MN-major)."""
    if major == "K":
        return r // 8, (k * e) // 16
    return r // (16 // e), k // 8


def _core_colour(cid: tuple[int, int]) -> str:
    """A checkerboard of 8 colours: core matrices next to each other (along either axis) differ."""
    return index_colour((cid[0] % 2) * 4 + cid[1] % 4, 8)


def _stride_meaning(major: str, m, e: int) -> tuple[str, str, tuple[int, int] | None, tuple[int, int] | None]:
    """(LBO meaning, SBO meaning, LBO step (dr, dk), SBO step) of a canonical layout."""
    t = 16 // e
    if major == "K" and not m.bits:
        return ("LBO = bytes between core matrices adjacent along K",
                "SBO = bytes between 8-row groups", (0, 16 // e), (8, 0))
    if major == "K":
        return (f"LBO unused (K-major {m.name}: a row's K bytes are contiguous up to {m.width} B)",
                f"SBO = bytes between 8-row groups (8 rows x {m.width} B = {8 * m.width} when dense)", None, (8, 0))
    if not m.bits:
        return ("LBO = bytes between core matrices adjacent along K (8 K-columns)",
                f"SBO = bytes between core matrices adjacent along MN ({t} elements)", (0, 8), (t, 0))
    s = m.width // 16
    return (f"LBO = bytes between {m.width}-byte MN blocks ({t * s} elements of MN)",
            "SBO = bytes between groups of 8 K-columns", (t * s, 0), (0, 8))


def _operand_panels(addr: np.ndarray, rows: int, k: int, e: int, major: str, m, lbo: int, sbo: int,
                    *, hexa: bool, marks: np.ndarray | None = None) -> tuple[Panel, Panel, list[str]]:
    """Tile panel (row x k: address of each element's first byte) and memory panel
    (128-byte lines x 16-byte units: which elements sit there), plus notes."""
    first = addr[:, ::e]
    ids = {}
    t_lab, t_fill = _grid(rows, k), _grid(rows, k)
    for r in range(rows):
        for c in range(k):
            cid = _core_id(r, c, e, major)
            ids.setdefault(cid, len(ids))
            a = int(first[r, c])
            t_lab[r][c] = (f"{a:x}" if hexa else str(a)) + ("!" if marks is not None and marks[r, c] else "")
            t_fill[r][c] = _core_colour(cid)
    tile = Panel(f"operand tile, {rows} x {k} ({'MN' if major == 'MN' else 'K'}-major): "
                 f"{'hex address' if hexa else 'byte offset'} of each element", t_lab, t_fill,
                 [str(r) for r in range(rows)], [str(c) for c in range(k)])
    # core matrices and swizzle atoms
    cr, ck = (8, 16 // e) if major == "K" else (16 // e, 8)
    tile.col_groups, tile.row_groups = ck, cr
    for r0 in range(0, rows, cr):
        for c0 in range(0, k, ck):
            tile.boxes.append((r0, c0, min(rows, r0 + cr), min(k, c0 + ck), "", "thin"))
    if m.bits:
        ar, ac = (8, m.width // e) if major == "K" else (m.width // e, 8)
        for r0 in range(0, rows, ar):
            for c0 in range(0, k, ac):
                tile.boxes.append((r0, c0, min(rows, r0 + ar), min(k, c0 + ac),
                                   "swizzle atom" if r0 == c0 == 0 else "", "thick"))
    lbo_txt, sbo_txt, lstep, sstep = _stride_meaning(major, m, e)
    for step, name, val in ((lstep, "LBO", lbo), (sstep, "SBO", sbo)):
        if step and step[0] < rows and step[1] < k:
            tile.arrows.append((0, 0, step[0], step[1], f"+{name} = {val} B"))
    # memory view
    lo = int(addr.min()) // 128 * 128
    hi = -(-(int(addr.max()) + 1) // 128) * 128
    owners: dict[int, list[tuple[int, int]]] = {}
    for r in range(rows):
        for c in range(k):
            for a in {int(x) // 16 for x in addr[r, c * e:(c + 1) * e]}:
                owners.setdefault(a, []).append((r, c))
    used_lines = sorted({a * 16 // 128 * 128 for a in owners})
    notes = []
    if (hi - lo) // 128 > 2 * len(used_lines) + 4:
        lines = used_lines
        notes.append(f"memory panel: only the {len(lines)} 128-byte lines the tile touches are drawn "
                     f"(span {lo:#x}..{hi:#x})")
    else:
        lines = list(range(lo, hi, 128))
    m_lab, m_fill = _grid(len(lines), 8), _grid(len(lines), 8)
    doubles = 0
    for i, line in enumerate(lines):
        for a in range(8):
            own = owners.get(line // 16 + a)
            if not own:
                continue
            r0 = min(o[0] for o in own)
            r1 = max(o[0] for o in own)
            k0 = min(o[1] for o in own)
            k1 = max(o[1] for o in own)
            if major == "K" or r0 == r1:
                s = f"r{r0} k{k0}" + (f"-{k1}" if k1 > k0 else "") if r0 == r1 else f"r{r0}-{r1} k{k0}-{k1}"
            else:
                s = f"k{k0} r{r0}-{r1}" if k0 == k1 else f"k{k0}-{k1} r{r0}-{r1}"
            if len(own) > 16 // e:
                s += "*"
                doubles += 1
            m_lab[i][a] = s
            cid = _core_id(own[0][0], own[0][1], e, major)
            m_fill[i][a] = _core_colour(cid)
    mem = Panel("shared memory: 128-byte lines x 16-byte units (what each unit holds)", m_lab, m_fill,
                [f"{x:#x}" if hexa else f"+{x}" for x in lines], [f"+{16 * a}" for a in range(8)])
    if doubles:
        notes.append(f"{doubles} unit(s) marked * are read for more than one element (overlapping strides)")
    return tile, mem, [lbo_txt, sbo_txt] + notes


TILE_BLOCK = 32   # columns per drawn block of an operand tile


def _operand_legend(e: int, dtype: str, major: str, m, panels: list[Panel]) -> list[tuple[str, str]]:
    """Every core-matrix colour the panels use (with the core matrices it marks), the notation,
    the outlines and arrows that are drawn."""
    tile = [p for p in panels if p.title.startswith("operand tile")]
    where: dict[str, list[tuple[int, int]]] = {}
    cr, ck = (8, 16 // e) if major == "K" else (16 // e, 8)
    for p in tile:
        for r in range(0, p.rows, cr):
            for c in range(0, p.cols, ck):
                cid = _core_id(r, p.c0 + c, e, major)
                lst = where.setdefault(p.fills[r][c], [])
                if cid not in lst:
                    lst.append(cid)
    legend = [(f, "core matrix " + ", ".join(f"({g},{j})" for g, j in ids[:3]) + (", ..." if len(ids) > 3 else ""))
              for f, ids in where.items()]
    shape = ("8 rows x 16 bytes of K (row group g, K chunk j)" if major == "K" else
             f"{16 // e} MN elements (16 bytes) x 8 K columns (MN group g, K group j)")
    store = ("stored as 128 contiguous bytes" if not m.bits else
             f"its 8 rows are 16-byte units {m.width} B apart, each moved inside its {m.width}-byte row by the "
             f"{m.name} swizzle")
    legend.append(("", f"core matrix (g,j) = {shape}; {store}"))
    legend.append(("", ("r<row> k<a>-<b>" if major == "K" else "k<k> r<a>-<b>")
                       + " = memory cell: the elements that 16-byte unit holds"))
    legend.append(("@thin", "one core matrix"))
    if m.bits:
        legend.append(("@thick", f"one {m.name} swizzle atom: 8 rows x {m.width} B" if major == "K" else
                                 f"one {m.name} swizzle atom: 8 K columns x {m.width} B of MN"))
    if any(p.arrows for p in tile):
        legend.append(("@arrow", "+LBO / +SBO: the stride between the two elements the arrow joins"))
    if any("*" in s for p in panels for row in p.labels for s in row):
        legend.append(("", "* = a unit read for more than one element"))
    return legend + _group_key(panels)


def smem(major: str = "K", mode: str = "128B", dtype: str = "f16", rows: int = 64, k: int | None = None,
         lbo: int | None = None, sbo: int | None = None) -> Diagram:
    """An operand tile in shared memory: where each (row, k) element lands, core matrices and
    swizzle atoms outlined, LBO/SBO drawn as arrows (dense canonical strides by default)."""
    major = _major(major)
    m = swizzle_mode(mode)
    _check_dtype(dtype, OPERAND_DTYPES, "operand")
    e = element_bytes(dtype)
    if major == "MN" and e != 2:
        raise InputError(f"an MN-major (transposed) operand must be f16/bf16; {dtype} must be K-major")
    rows = _extent("rows", rows, "diagram_rows")
    k = _extent("k", k, "diagram_cols")
    if k is None:
        k = (m.width // e if m.bits else 32 // e) if major == "K" else 16
    dl, ds = dense_strides(major, m, rows, k * e if major == "K" else None)
    lbo = dl if lbo is None else lbo
    sbo = ds if sbo is None else sbo
    lay = SmemLayout(major, m, e, lbo, sbo)
    phys = np.asarray(m.swizzle(lay.offsets(rows, k)))
    tile, mem, notes = _operand_panels(phys, rows, k, e, major, m, lbo, sbo, hexa=False)
    tile.notes += notes[:2]
    mem.notes += notes[2:]
    panels = split_columns(tile, TILE_BLOCK) + [mem]
    caption = [f"A {rows} x {k} {dtype} operand (A: rows = M; B viewed as N x K), {major}-major, swizzle {m.name}, "
               f"LBO = {lbo} B, SBO = {sbo} B (the dense canonical packing is LBO = {dl}, SBO = {ds}).",
               notes[0] + "; " + notes[1] + ".",
               "Offsets are relative to a start address on the swizzle period; the hardware swizzles the absolute "
               "address (see the desc diagram). Try `wgref desc` to see what a given descriptor makes the H200 read."]
    return Diagram("smem", f"shared-memory operand: {major}-major, {m.name} swizzle, {dtype}, {rows} x {k}",
                   SRC_SMEM, panels, _operand_legend(e, dtype, major, m, panels), caption)


def _packing(major: str, m, e: int, rows: int, k: int, lbo: int, sbo: int) -> str | None:
    """In words, the way of writing a ``rows x k`` tile that gives these LBO/SBO (the blocks
    each stride steps over stored back to back in one order or the other), None if neither."""
    t = 16 // e
    if major == "K" and m.bits:
        return (f"8-row groups of {8 * m.width} B back to back" if sbo == 8 * m.width else None)
    if major == "K":
        unit, (l_dir, n_l), (s_dir, n_s) = "core matrices (128 B)", ("K", -(-k * e // 16)), ("M/N", -(-rows // 8))
    elif not m.bits:
        unit, (l_dir, n_l), (s_dir, n_s) = "core matrices (128 B)", ("K", -(-k // 8)), ("M/N", -(-rows // t))
    else:
        unit, (l_dir, n_l), (s_dir, n_s) = (f"swizzle atoms ({8 * m.width} B)", ("M/N", -(-rows * e // m.width)),
                                            ("K", -(-k // 8)))
    size = 8 * m.width if (m.bits and major == "MN") else 128
    if lbo == size and sbo == size * n_l:
        txt = f"{unit} adjacent along {l_dir} ({n_l} x {size} B = SBO)"
    elif sbo == size and lbo == size * n_s:
        txt = f"{unit} adjacent along {s_dir} ({n_s} x {size} B = LBO)"
        if m.bits and major == "MN":
            txt += (f": each block of {m.width // e} MN elements stored whole, as {n_l} TMA boxes of "
                    f"{m.width // e} (MN) x {k} (K) write it")
    else:
        return None
    return txt


def parse_descriptor(text: str) -> int:
    """A descriptor from hex (0x...) or decimal text; one-line error otherwise."""
    try:
        t = str(text).strip().replace("_", "")
        if len(t) > 24:   # 0x + 16 hex digits, or 20 decimal digits
            raise ValueError
        v = int(t, 0)
    except ValueError:
        raise InputError(f"cannot parse {excerpt(text)} as a 64-bit descriptor (give hex like 0x4000004000010040)") from None
    MatrixDescriptor.decode(v)  # reserved bits, range
    return v


def desc(value: int | str, dtype: str = "f16", rows: int = 64, k: int | None = None, major: str = "K") -> Diagram:
    """Decode, validate and draw a wgmma matrix descriptor: which shared-memory bytes the
    hardware reads for each (row, k) element of a ``rows x k`` operand."""
    v = parse_descriptor(value) if isinstance(value, str) else check_int("value", value, 0, (1 << 64) - 1,
                                                                           rule="a 64-bit descriptor")
    d = MatrixDescriptor.decode(v)
    major = _major(major)
    rows = _extent("rows", rows, "diagram_rows")
    k = _extent("k", k, "diagram_cols")
    _check_dtype(dtype, OPERAND_DTYPES, "operand")
    e = element_bytes(dtype)
    if major == "MN" and e != 2:
        raise InputError(f"an MN-major (transposed) operand must be f16/bf16; {dtype} must be K-major")
    k = 32 // e if k is None else k
    m = mode_from_desc_code(d.swizzle)
    addr = operand_addresses(d, rows, k, e, major=major)
    first = addr[:, ::e]
    # the tile a user most likely wrote: dense canonical strides, pattern anchored at the start
    dl, ds = dense_strides(major, m, rows, k * e if major == "K" else None)
    canon = d.start_address + np.asarray(m.swizzle(SmemLayout(major, m, e, dl, ds).offsets(rows, k)))
    mark = d.start_address % 128 == 0
    marks = (canon[:, ::e] != first) if mark else None
    lbo_txt, sbo_txt, _, _ = _stride_meaning(major, m, e)
    report = [f"descriptor {v:#018x}  ({rows} x {k} {dtype}, {major}-major)",
              f"  bits 13:0   start address >> 4 = {d.start_address >> 4:#x}  -> {d.start_address:#x} ({d.start_address} B)",
              f"  bits 29:16  LBO >> 4           = {d.lbo >> 4:#x}  -> {d.lbo} B: {lbo_txt}",
              f"  bits 45:32  SBO >> 4           = {d.sbo >> 4:#x}  -> {d.sbo} B: {sbo_txt}",
              f"  bits 51:49  base offset        = {d.base_offset}",
              f"  bits 63:62  swizzle            = {d.swizzle}  -> {m.name}",
              "notes:"] + [f"  {n}" for n in describe(d)]
    issues = []
    lbo_used = not (major == "K" and m.bits)
    if (d.lbo != dl and lbo_used) or d.sbo != ds:
        dense_txt = _packing(major, m, e, rows, k, dl, ds)
        given_txt = _packing(major, m, e, rows, k, d.lbo, d.sbo)
        head = (f"LBO = {d.lbo} B, SBO = {d.sbo} B differ" if lbo_used else f"SBO = {d.sbo} B differs")
        head += (f" from the dense packing this check assumes (LBO = {dl}{'' if lbo_used else ' (unused)'}, "
                 f"SBO = {ds}: {dense_txt})")
        if given_txt:
            issues.append(f"{head}; right if the tile was written as {given_txt}"
                          + ("; if it was written densely, LBO and SBO are swapped"
                             if lbo_used and d.lbo == ds and d.sbo == dl else ""))
        else:
            issues.append(f"{head}: fine if the tile was written with these strides")
    flat = addr.ravel()
    dup = flat.size - np.unique(flat).size
    if dup:
        issues.append(f"{dup} of {flat.size} bytes are read by more than one element: the strides make "
                      f"core matrices overlap")
    if m.bits and d.start_address % m.period:
        base_fix = (d.start_address >> 7) & ((1 << m.bits) - 1)
        fixed = operand_addresses(d.__class__(d.start_address, d.lbo, d.sbo, base_fix, d.swizzle), rows, k, e,
                                  major=major)
        ok_fix = bool(np.array_equal(fixed[:, ::e], d.start_address + np.asarray(
            m.swizzle(SmemLayout(major, m, e, d.lbo, d.sbo).offsets(rows, k)))[:, ::e]))
        rel = d.start_address + np.asarray(m.swizzle(SmemLayout(major, m, e, d.lbo, d.sbo).offsets(rows, k)))[:, ::e]
        diff = np.argwhere(rel != first)
        if diff.size:
            r, c = (int(x) for x in diff[0])
            fix = (f" or set base offset = {base_fix}" if ok_fix and base_fix != d.base_offset else "")
            issues.append(
                f"the {m.name} swizzle acts on the absolute address (phase = (address >> 7) - base offset): "
                f"the start is {d.start_address % m.period} B into its {m.period}-byte pattern, so {len(diff)} of "
                f"{first.size} elements are read from other bytes than a tile laid out from the start would hold, "
                f"e.g. (row {r}, k {c}) from {int(first[r, c]):#x}, not {int(rel[r, c]):#x}. "
                + (f"If the tile was placed at the start, align it to {m.period} B{fix}."
                   if d.start_address % 128 == 0 else
                   f"Right if this is a K step inside the swizzled rows of a tile written at an aligned address "
                   f"(start % 128 = {d.start_address % 128}); if the tile itself starts here, align it to "
                   f"{m.period} B{fix}."))
    report += ["checks:"] + ([f"  ! {i}" for i in issues] if issues else
                             ["  ok: dense canonical strides, no overlap, start on the swizzle pattern"])
    tile, mem, notes = _operand_panels(addr, rows, k, e, major, m, d.lbo, d.sbo, hexa=True, marks=marks)
    mem.notes += notes[2:]
    n_bad = int(marks.sum()) if mark else 0
    if mark:
        tile.notes.append(f"{n_bad} of {marks.size} elements marked !: read from another byte than a dense "
                          f"canonical tile at this start would hold")
    else:
        tile.notes.append("no element is marked: a start inside a 128-byte line is a K step into a bigger tile")
    panels = split_columns(tile, TILE_BLOCK) + [mem]
    caption = [f"What the H200 reads for each (row, k) element of a {rows} x {k} {dtype} {major}-major operand "
               f"described by {v:#018x}: the start address plus the canonical {m.name} layout's offsets "
               "(LBO/SBO), then the swizzle of the absolute address with the base offset subtracted from the "
               "128-byte line index (the rule the H200 fixtures confirmed).",
               lbo_txt + "; " + sbo_txt + "."]
    legend = _operand_legend(e, dtype, major, m, panels) + [("", "tile cells: hex address of the element's first byte")]
    if n_bad:
        legend.append(("", "! = read from another byte than a dense canonical tile at this start would hold"))
    return Diagram("desc", f"descriptor {v:#018x}: what the hardware reads ({rows} x {k} {dtype}, {major}-major, "
                           f"{m.name})", SRC_DESC, panels, legend, caption, text_before=report)


# ----------------------------------------------------------------------------- sparse metadata

def sparse_meta(dtype: str = "f16", sel: int = 0) -> Diagram:
    """Sparse wgmma metadata: which lane and nibble of the sp-meta register hold the nibble of
    each row and chunk of warp 0's 16 rows, and which (lane, nibble) the hardware ignores."""
    _check_dtype(dtype, SPARSE_DTYPES, "sparse A")
    thread, pos = meta_holders(dtype, sel)          # validates sel for the type
    cols = thread.shape[1]
    eight = dtype in ("e4m3", "e5m2", "s8", "u8")
    chunk = "pair" if dtype == "tf32" else "chunk"
    width = 2 if dtype == "tf32" else 4
    lab, fill = _grid(16, cols), _grid(16, cols)
    held: dict[tuple[int, int], tuple[int, int]] = {}
    for m in range(16):
        for c in range(cols):
            lane, p = int(thread[m, c]), int(pos[m, c])
            lab[m][c], fill[m][c] = f"L{lane}:b{4 * p}", lane_colour(lane)
            held[(lane, p)] = (m, c)
    rows = Panel(f"1. row x {chunk}: L<lane>:b<bit> = the nibble sits in bits b..b+3 of lane's sp-meta",
                 lab, fill, row_heads=[f"row {m}" for m in range(16)],
                 col_heads=[f"{c}: k{width * c}-{width * c + width - 1}" for c in range(cols)],
                 col_groups=4 if not eight else 8, row_groups=8)
    rows.boxes += [(0, 0, 8, cols, "h = 0: rows 0-7", "thick"), (8, 0, 16, cols, "h = 1: rows 8-15", "thick")]
    rows.boxes.append((0, 0, 1, cols, "", "focus"))
    rl, rf = _grid(32, 8), _grid(32, 8)
    for lane in range(32):
        for p in range(8):
            if (lane, p) in held:
                m, c = held[(lane, p)]
                rl[lane][p], rf[lane][p] = f"r{m}c{c}", lane_colour(lane)
            else:
                rl[lane][p], rf[lane][p] = "-", IGNORED
    regs = Panel("2. lane x nibble of the sp-meta register: r<row>c<chunk> it carries; '-' = ignored",
                 rl, rf, row_heads=[f"lane {lane}" for lane in range(32)],
                 col_heads=[f"b{4 * p}-{4 * p + 3}" for p in range(8)], col_groups=4, row_groups=4)
    used_lanes = sorted({ln for ln, _ in held})
    if eight:
        formula = ("8-bit (K = 64, 16 chunks of 4 per row): lane = 4g + h + 2*(c >> 3), nibble = c & 7; "
                   "every lane of every quad is read, so sp-sel must be 0 (ptxas refuses 1).")
    else:
        formula = (f"{'tf32 (K = 16, 8 pairs per row)' if dtype == 'tf32' else '16-bit (K = 32, 8 chunks of 4 per row)'}"
                   f": lane = 4g + (c >> 2) + 2*sp_sel, nibble = 4h + (c & 3); sp-sel {sel} reads lanes "
                   f"{2 * sel} and {2 * sel + 1} of each quad and ignores the other two (sp-sel {1 - sel} would read "
                   "them: one register can carry the metadata of two instructions).")
    nib = ("nibble = idx0 | idx1 << 2: positions 0..3 of the chunk's two kept elements (compressed columns 2c, 2c+1)"
           if dtype != "tf32" else "nibble 0b0100 keeps element 0 of the pair, 0b1110 element 1 (other values refused)")
    caption = [f"Row m = 16w + 8h + g (g = m % 8, h = (m % 16) // 8), {chunk} c. {formula}",
               f"Drawn: warp 0 (rows 0-15, threads 0-31). Warp w supplies rows 16w..16w+15 from threads 32w + lane "
               f"with the same pattern. {len(held)} of the 256 nibbles of a warp's registers are read "
               f"(lanes {', '.join(map(str, used_lanes[:8]))}{', ...' if len(used_lanes) > 8 else ''}); the rest are "
               "ignored: the H200 recorder filled them with random garbage and the results did not change.",
               f"{nib}. Example: row 9, {chunk} {min(5, cols - 1)} -> lane {int(thread[9, min(5, cols - 1)])}, "
               f"bits {4 * int(pos[9, min(5, cols - 1)])}-{4 * int(pos[9, min(5, cols - 1)]) + 3}."]
    legend = [(lane_colour(lane), f"lane {lane}") for lane in used_lanes]
    if len(held) < 256:
        legend.append((IGNORED, "ignored (lane, nibble)"))
        legend.append(("", "- = a (lane, nibble) the hardware ignores"))
    legend += [("", f"L<n>:b<k> = lane n, bits k..k+3; r<m>c<c> = row m, {chunk} c"),
               ("@thick", "the 8 rows of one h"), ("@focus", "row 0")] + _group_key([rows, regs])
    return Diagram("sparse-meta", f"sparse wgmma sp-meta: {dtype}, sp-sel {sel} (rows 0-15, warp 0)", SRC_SPARSE,
                   [rows, regs], legend, caption, verified="verified on the H200: fixtures/sparse (tagged probes)")


__all__ = ["acc", "a_frag", "matrix", "swizzle", "smem", "desc", "parse_descriptor", "sparse_meta",
           "ACC_DTYPES", "A_DTYPES", "OPERAND_DTYPES", "SPARSE_DTYPES"]
