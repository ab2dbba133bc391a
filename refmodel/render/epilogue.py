"""The wgmma epilogue (seed §5.4) drawn: cvt packing, then one stmatrix.x4 per 16-column slice.

Panels, all computed from the model (:mod:`refmodel.machine.epilogue`, itself built on
:mod:`refmodel.layouts.fragment`, :mod:`~refmodel.layouts.stmatrix`, :mod:`~refmodel.layouts.smem`
and :mod:`~refmodel.layouts.swizzle`):

1. **cvt**: thread 0's packed registers — ``cvt.rn.{bf16x2,f16x2}.f32 p[j], d[2j+1], d[2j]``
   puts accumulator register ``d[2j+1]`` in the high half, ``d[2j]`` in the low half; slice s
   stores ``p[4s .. 4s+3]``;
2. **one panel per slice**: the 64 x 16 columns of slice s as 64 rows x two 16-byte row
   segments; each cell is the shared-memory byte offset (hex, after the swizzle) that the
   lane giving that row's address passes to ``stmatrix.x4`` (the lanes are the same in every
   slice: the row heads of the first slice name them);
3. **the stored tile**: the first 128-byte lines of shared memory, each 16-byte atom labelled
   with the slice and thread whose row landed there — the swizzle's zig-zag.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..layouts.fragment import accumulator_layout
from ..layouts.stmatrix import address_givers
from ..layouts.swizzle import swizzle_mode
from ..machine.epilogue import STMATRIX_X4, epilogue_addresses
from ..validate import excerpt
from .core import Diagram, Panel

SRC = ('seed lecture §5.4 (the epilogue loop: cvt -> stmatrix.x4 slice by slice); PTX ISA "cvt" '
       '(.f16x2/.bf16x2 packing) and "stmatrix"; CuTe cute/atom/copy_traits_sm90.hpp (SM90_U32x4_STSM_N)')
VERIFIED = "verified on the H200: fixtures/layouts (stmatrix, swizzles) and fixtures/wgmma (accumulator)"
OUT_TYPES = ("bf16", "f16")
MATRIX_COLOURS = ("hsl(210,70%,84%)", "hsl(35,85%,80%)", "hsl(130,50%,80%)", "hsl(290,45%,85%)")
PHYS_BYTES = 8192            # stored-tile panel: at most 64 lines of 128 bytes


def _grid(rows: int, cols: int) -> list[list[str]]:
    return [[""] * cols for _ in range(rows)]


def lane_of(row: int, half: int) -> int:
    """The lane (of warp row // 16) that gives the address of ``row``'s 16-byte segment
    ``half`` in a slice: the inverse of :func:`refmodel.layouts.stmatrix.address_givers` with the
    epilogue's placement of the four matrices (0 top-left, 1 bottom-left, 2 top-right, 3 bottom-right)."""
    matrix, r = divmod(row % 16, 8)
    j = matrix + 2 * half
    giver_m, giver_r = address_givers(4)
    lanes = np.flatnonzero((giver_m == j) & (giver_r == r))
    return int(lanes[0])


def epilogue(n: int = 64, dtype: str = "bf16", swizzle: str = "128B") -> Diagram:
    """The epilogue of an m64nN f32 accumulator stored as ``dtype`` (bf16 or f16) into a
    row-major shared tile with ``swizzle``: cvt packing, one panel per stmatrix.x4 slice, the stored tile."""
    if not isinstance(dtype, str) or dtype not in OUT_TYPES:
        raise InputError(f"the epilogue stores 16-bit elements: dtype must be bf16 or f16, got {excerpt(dtype)}")
    m = swizzle_mode(swizzle)
    addrs = epilogue_addresses(n, m)              # (N/16, 128): validates N and the tile
    n = int(n)
    slices = n // 16
    rows, cols = accumulator_layout(n, "f32")     # (128, N/2, 1)
    cvt = f"cvt.rn.{dtype}x2.f32"

    # 1. thread 0's packed registers
    lab, fill = _grid(slices, 8), _grid(slices, 8)
    for s in range(slices):
        for j in range(4):
            p = 4 * s + j
            for h, d in ((0, 2 * p + 1), (1, 2 * p)):   # high half first, as the cvt writes it
                lab[s][2 * j + h] = f"d{d}=D[{int(rows[0, d, 0])},{int(cols[0, d, 0])}]"
                fill[s][2 * j + h] = MATRIX_COLOURS[j]
    heads = [f"p[4s+{j}] {hl}" for j in range(4) for hl in ("hi", "lo")]
    pcvt = Panel(f"1. {cvt}: thread 0's p[4s+j] (hi = bits 31:16)", lab, fill,
                 row_heads=[f"s{s}: p{4 * s}-p{4 * s + 3}" for s in range(slices)], col_heads=heads, col_groups=2)
    pcvt.notes.append(f"{cvt} p[j], d[2j+1], d[2j]: the first source goes to the high half")

    # 2. one panel per slice: 64 rows x two 16-byte segments, the swizzled address each lane gives
    panels = [pcvt]
    lanes = [[lane_of(r, h) for h in range(2)] for r in range(16)]
    for s in range(slices):
        lab, fill = _grid(64, 2), _grid(64, 2)
        for r in range(64):
            w = r // 16
            for h in range(2):
                t = 32 * w + lanes[r % 16][h]
                lab[r][h] = f"{int(addrs[s, t]):04x}"
                fill[r][h] = MATRIX_COLOURS[(r % 16) // 8 + 2 * h]
        heads_r = [f"r{r}: T{32 * (r // 16) + lanes[r % 16][0]}|T{32 * (r // 16) + lanes[r % 16][1]}"
                   for r in range(64)] if s == 0 else None
        p = Panel(f"{'2. ' if s == 0 else ''}slice {s}", lab, fill, row_heads=heads_r,
                  col_heads=[f"c{16 * s}+", f"c{16 * s + 8}+"], row_groups=8)
        p.boxes += [(16 * w, 0, 16 * w + 16, 2, "", "thick") for w in range(4)]
        p.boxes += [(16 * w + 8 * i, h, 16 * w + 8 * i + 8, h + 1, "", "thin")
                    for w in range(4) for i in range(2) for h in range(2)]
        p.boxes.append((0, 0, 1, 1, "", "focus"))
        if s == 0:
            p.notes.append("cell: hex byte offset")
        panels.append(p)

    # 3. the stored tile: who wrote each 16-byte atom of the first lines
    total = 64 * 2 * n
    shown = min(total, PHYS_BYTES)
    lines = shown // 128
    owner = {}
    for s in range(slices):
        for t in range(128):
            owner[int(addrs[s, t])] = (s, t)
    lab, fill = _grid(lines, 8), _grid(lines, 8)
    focus = []
    for i in range(lines):
        for a in range(8):
            o = owner.get(128 * i + 16 * a)
            if o is None:
                continue
            s, t = o
            lane = t % 32
            lab[i][a] = f"s{s} T{t}"
            fill[i][a] = MATRIX_COLOURS[lane // 8]
            if t == 0:
                focus.append((i, a, i + 1, a + 1, "", "focus"))
    phys = Panel(f"3. stored tile, bytes 0-{shown - 1}", lab, fill,
                 row_heads=[f"+{128 * i:#06x}" for i in range(lines)], col_heads=[f"+{16 * a}" for a in range(8)],
                 row_groups=8)
    if m.bits:
        per = m.period // 128
        phys.boxes += [(i, 0, min(lines, i + per), 8, "", "thick") for i in range(0, lines, per)]
    phys.boxes += focus
    if shown < total:
        phys.notes.append(f"the other {total - shown} bytes repeat the pattern")
    panels.append(phys)

    w_bytes = m.width if m.bits else 2 * n
    legend = [(MATRIX_COLOURS[j], f"matrix {j} of the x4 ({['top-left', 'bottom-left', 'top-right', 'bottom-right'][j]}"
                                  f" 8x8 of a warp's 16x16): register p[4s+{j}], addresses from lanes {8 * j}-{8 * j + 7}")
              for j in range(4)]
    legend += [("", "slice cells: the byte offset (hex, after the swizzle) the lane gives; the row heads "
                    "r<row>: T<a>|T<b> name the threads giving its two segments, the same in every slice"),
               ("", "stored tile cells: s<slice> T<thread> whose 16-byte row landed in that atom"),
               ("@thick", "one warp's 16 rows (slices) / one swizzle period (stored tile)"),
               ("@thin", "one 8x8 matrix of the x4"),
               ("@focus", "thread 0")]
    caption = [
        f"The f32 accumulator has no stmatrix form (seed §6): each thread first packs its register pairs with "
        f"{cvt} p[j], d[2j+1], d[2j] (d[2j+1] in bits 31:16), which gives exactly the register layout of a 16-bit "
        f"accumulator. Then, for each of the {slices} slices of 16 columns, every warp stores its 16 x 16 block with "
        f"one {STMATRIX_X4}: registers p[4s..4s+3] are the four 8x8 matrices.",
        "Lane L gives the address of row 16w + L%8 + 8((L/8)%2), columns 16s + 8(L/16): a 16-byte row segment of "
        f"the destination tile. The tile is row-major in column blocks of {w_bytes} bytes "
        f"({'the ' + m.name + ' swizzle width' if m.bits else 'whole rows'}, 64 rows each), "
        + (f"and the {m.name} swizzle XORs the 16-byte atom index with the 128-byte line index (mod {1 << m.bits}): "
           f"offset = logical ^ (((logical >> 7) & {(1 << m.bits) - 1}) << 4)." if m.bits else "no swizzle."),
        "Thread 0 (dashed) gives row 0, columns 16s..16s+7 of every slice: offsets "
        + ", ".join(f"{int(addrs[s, 0]):#x}" for s in range(min(slices, 6))) + (", ..." if slices > 6 else "")
        + ". The tile a TMA store of the same swizzle reads back is the clean row-major 64 x N matrix "
          "(refmodel.machine.epilogue.tile_from_image).",
    ]
    return Diagram("epilogue", f"epilogue m64n{n}: f32 -> {dtype} (cvt), stmatrix.x4 x {slices} slices into a "
                               f"{m.name}-swizzled tile", SRC, panels, legend, caption, verified=VERIFIED)


__all__ = ["epilogue", "lane_of", "OUT_TYPES"]
