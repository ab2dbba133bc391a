"""Sparse wgmma compression drawn end to end: quartet -> kept pair -> nibble -> lane and bit.

A 2:4-sparse A (1:2 for tf32) of one ``wgmma.mma_async.sp`` is built from a fixed seed, then
everything drawn comes from the model: :func:`refmodel.numerics.sparse.compress` (the kept
elements and their nibbles), :func:`refmodel.layouts.sparse_meta.meta_holders` and
:func:`~refmodel.layouts.sparse_meta.pack_meta` (which lane and bits of the ``sp-meta``
register carry each nibble).  Panels (warp 0: rows 0-15):

1. the dense rows, chunks of 4 (pairs for tf32) outlined, the kept elements coloured;
2. the compressed A (K/2 columns): compressed columns 2c, 2c+1 are chunk c's kept pair;
3. the nibble of each row and chunk, ``idx0 | idx1 << 2``, coloured by the lane holding it;
4. the sp-meta registers of lanes 0-31 (hex) and what each nibble carries, '-' = ignored;
5. (16-bit and tf32) one register serving two instructions: sp-sel 0 reads lanes 0-1 of each
   quad, sp-sel 1 lanes 2-3.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import element_dtype
from ..errors import InputError
from ..layouts.sparse_meta import check_sp_sel, meta_holders, pack_meta
from ..numerics.sparse import compress, parse_wgmma_sp
from ..validate import excerpt
from .core import IGNORED, Diagram, Panel

SRC = ('PTX ISA, wgmma.mma_async.sp "Sparse Matrix Storage" / "Metadata" (sp-meta, sparsity selector); '
       "CuTe cute/arch/mma_sm90_gmma_sparse.hpp; seed lecture §16-17")
VERIFIED = "verified on the H200: fixtures/sparse (tagged probes, compressed products)"
SPARSE_TYPES = ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8")
KEPT = ("hsl(205,75%,84%)", "hsl(35,90%,80%)")        # kept elements of even / odd chunks
FILLER = "hsl(0,0%,88%)"                               # a zero compress keeps to fill a pair
SEL = ("hsl(160,55%,80%)", "hsl(275,55%,86%)")         # sp-sel 0 / 1
SEED = 18
ROWS = 16


def _lane_fill(lane: int) -> str:
    hi, lo = divmod(int(lane), 8)
    return f"hsl({lo * 45},65%,{80 + 3 * hi}%)"


def _grid(rows: int, cols: int, v: str = "") -> list[list[str]]:
    return [[v] * cols for _ in range(rows)]


def instr_for(dtype: str) -> str:
    """The m64n8 sparse wgmma of an A type (f32 accumulator; s32 for s8/u8)."""
    if not isinstance(dtype, str) or dtype not in SPARSE_TYPES:
        raise InputError(f"sparse A type must be one of {', '.join(SPARSE_TYPES)}, got {excerpt(dtype)}")
    k = {"tf32": 16, "f16": 32, "bf16": 32}.get(dtype, 64)
    acc = "s32" if dtype in ("s8", "u8") else "f32"
    return f"wgmma.mma_async.sp.sync.aligned.m64n8k{k}.{acc}.{dtype}.{dtype}"


def example_a(dtype: str) -> np.ndarray:
    """A fixed 64 x K structured-sparse A of small integers: in each chunk the kept count of
    nonzeros at random places, except for one chunk with a single nonzero and one all zero
    per row group (to show the fill rule of :func:`~refmodel.numerics.sparse.compress`)."""
    f = parse_wgmma_sp(instr_for(dtype))
    rng = np.random.default_rng(SEED)
    keep = 2 if f.chunk == 4 else 1
    vals = np.zeros((64, f.k), np.float64)
    for m in range(64):
        for c in range(f.meta_cols):
            n = keep
            if (m + c) % 11 == 3:
                n = keep - 1            # fewer nonzeros than the chunk keeps
            pos = rng.choice(f.chunk, size=n, replace=False)
            for p in pos:
                v = int(rng.integers(1, 8))
                vals[m, f.chunk * c + p] = -v if dtype not in ("u8",) and rng.random() < .25 else v
    return vals.astype(element_dtype(dtype))


def _num(x) -> str:
    v = float(x)
    return str(int(v)) if v == int(v) else f"{v:g}"


def sparse_compress(dtype: str = "f16", sel: int = 0) -> Diagram:
    """Compression of a sparse wgmma's A (warp 0's 16 rows): dense chunk -> kept elements ->
    metadata nibble -> the lane and bits of the sp-meta register, for sp-sel ``sel``."""
    instr = instr_for(dtype)
    sel = check_sp_sel(dtype, sel)
    f = parse_wgmma_sp(instr)
    a = example_a(dtype)
    ac, meta = compress(a, f)
    thread, pos = meta_holders(dtype, sel)
    regs = pack_meta(meta, dtype, sel, fill=0)
    tf32 = f.chunk == 2
    chunk = "pair" if tf32 else "quartet"
    dense_v = a.astype(np.float64)
    comp_v = ac.astype(np.float64)
    kept_k = np.zeros((64, f.k_compressed), np.int64)   # the dense column each compressed element came from
    for c in range(f.meta_cols):
        nib = meta[:, c].astype(np.int64)
        if tf32:
            kept_k[:, c] = 2 * c + (nib == 0b1110)
        else:
            kept_k[:, 2 * c] = 4 * c + (nib & 3)
            kept_k[:, 2 * c + 1] = 4 * c + (nib >> 2)

    # 1. dense rows
    lab, fill = _grid(ROWS, f.k), _grid(ROWS, f.k)
    for m in range(ROWS):
        for k in range(f.k):
            lab[m][k] = _num(dense_v[m, k]) if dense_v[m, k] else ""
        for j in range(f.k_compressed):
            k = int(kept_k[m, j])
            c = k // f.chunk
            fill[m][k] = KEPT[c % 2] if dense_v[m, k] else FILLER
            if not dense_v[m, k]:
                lab[m][k] = "0"
    dense = Panel(f"1. dense A (64 x {f.k} {dtype}, rows 0-15): {chunk}s, kept elements coloured", lab, fill,
                  row_heads=[f"row {m}" for m in range(ROWS)], col_heads=[str(k) for k in range(f.k)],
                  col_groups=f.chunk, row_groups=8)
    dense.boxes += [(0, f.chunk * c, ROWS, f.chunk * c + f.chunk, "", "thin") for c in range(f.meta_cols)]
    dense.boxes.append((0, 0, 1, f.chunk, "", "focus"))

    # 2. compressed
    lab, fill = _grid(ROWS, f.k_compressed), _grid(ROWS, f.k_compressed)
    for m in range(ROWS):
        for j in range(f.k_compressed):
            k = int(kept_k[m, j])
            lab[m][j] = _num(comp_v[m, j])
            fill[m][j] = KEPT[(k // f.chunk) % 2] if comp_v[m, j] else FILLER
    comp = Panel(f"2. compressed A (64 x {f.k_compressed}): column {'c = pair c' if tf32 else '2c, 2c+1 = quartet c'}",
                 lab, fill, row_heads=[f"row {m}" for m in range(ROWS)],
                 col_heads=[str(j) for j in range(f.k_compressed)], col_groups=1 if tf32 else 2, row_groups=8)
    comp.boxes.append((0, 0, 1, 1 if tf32 else 2, "", "focus"))

    # 3. nibbles
    lab, fill = _grid(ROWS, f.meta_cols), _grid(ROWS, f.meta_cols)
    for m in range(ROWS):
        for c in range(f.meta_cols):
            nib = int(meta[m, c])
            lab[m][c] = (f"e{int(nib == 0b1110)}:{nib:x}" if tf32 else f"{nib & 3},{nib >> 2}:{nib:x}")
            fill[m][c] = _lane_fill(int(thread[m, c]) % 32)
    nibp = Panel("3. nibble " + ("(0x4 keeps element 0, 0xe element 1)" if tf32 else "idx0,idx1:hex = idx0 | idx1<<2"),
                 lab, fill, row_heads=[f"row {m}" for m in range(ROWS)],
                 col_heads=[f"{chunk[0]}{c}" for c in range(f.meta_cols)], col_groups=4, row_groups=8)
    nibp.boxes.append((0, 0, 1, 1, "", "focus"))

    # 4. registers
    held = {}
    for m in range(ROWS):
        for c in range(f.meta_cols):
            held[(int(thread[m, c]), int(pos[m, c]))] = (m, c)
    lab, fill = _grid(32, 8), _grid(32, 8)
    for lane in range(32):
        for p in range(8):
            if (lane, p) in held:
                m, c = held[(lane, p)]
                lab[lane][p], fill[lane][p] = f"r{m}{chunk[0]}{c}", _lane_fill(lane)
            else:
                lab[lane][p], fill[lane][p] = "-", IGNORED
    regp = Panel(f"4. sp-meta, sp-sel {sel}: lane x nibble (bits 4p+3..4p)", lab, fill,
                 row_heads=[f"L{lane} {int(regs[lane]):#010x}" for lane in range(32)],
                 col_heads=[f"b{4 * p}" for p in range(8)], col_groups=4, row_groups=4)
    r0, c0 = int(thread[0, 0]), int(pos[0, 0])
    regp.boxes.append((r0, c0, r0 + 1, c0 + 1, "", "focus"))
    panels = [dense, comp, nibp, regp]

    # 5. two instructions, one register
    if f.dtype_a not in ("e4m3", "e5m2", "s8", "u8"):
        lab, fill = _grid(32, 8), _grid(32, 8)
        for s in (0, 1):
            th, ps = meta_holders(dtype, s)
            for m in range(ROWS):
                for c in range(f.meta_cols):
                    lane, p = int(th[m, c]), int(ps[m, c])
                    lab[lane][p], fill[lane][p] = f"s{s}:r{m}{chunk[0]}{c}", SEL[s]
        both = Panel("5. one register, two wgmma.sp: sp-sel 0 and sp-sel 1", lab, fill,
                     row_heads=[f"lane {lane}" for lane in range(32)], col_heads=[f"b{4 * p}" for p in range(8)],
                     col_groups=4, row_groups=4)
        panels.append(both)
    eight = dtype in ("e4m3", "e5m2", "s8", "u8")
    legend = [(KEPT[0], f"kept element, even {chunk}"), (KEPT[1], f"kept element, odd {chunk}"),
              (FILLER, f"a zero kept to fill the pair (a {chunk} with fewer nonzeros than it keeps)")]
    legend += [(_lane_fill(lane), f"lane {lane}") for lane in sorted({int(t) for t in thread[:ROWS].ravel()})[:4]]
    legend += [(IGNORED, "nibble the hardware ignores (sp-sel " + str(sel) + ")")]
    if not eight:
        legend += [(SEL[0], "read by sp-sel 0 (lanes 0-1 of each quad)"),
                   (SEL[1], "read by sp-sel 1 (lanes 2-3 of each quad)")]
    legend += [("@thin", f"one {chunk} of the dense A"),
               ("@focus", f"row 0's first {chunk}: its kept elements, its nibble, where the nibble lives"),
               ("", "r<m>" + chunk[0] + "<c> = row m, " + chunk + " c; the row heads L<n> 0x... give lane n's "
                    "sp-meta register" + ("" if eight else "; s<sel>:r<m>" + chunk[0] + "<c> = read by sp-sel sel"))]
    used = {f for p in panels for row in p.fills for f in row}
    legend = [(k, t) for k, t in legend if not k or k.startswith("@") or k in used]   # swatches drawn only
    ex_c = 0
    nib0 = int(meta[0, ex_c])
    k0, k1 = int(kept_k[0, 0]), int(kept_k[0, 0 if tf32 else 1])
    caption = [
        f"{instr}: A is stored compressed, K/2 = {f.k_compressed} columns, with one 4-bit nibble per row and {chunk}. "
        + ("tf32 is 1:2: each pair keeps one element; nibble 0b0100 keeps element 0, 0b1110 element 1 "
           "(a tf32 element is two 16-bit halves of the 2:4 hardware)." if tf32 else
           "2:4: each quartet keeps two elements, in increasing order, as compressed columns 2c and 2c+1; the nibble "
           "is idx0 | idx1 << 2 (their positions 0..3 in the quartet)."),
        f"Row 0, {chunk} 0: " + (f"keeps element {k0}" if tf32 else f"keeps elements {k0} and {k1}")
        + f" -> nibble {nib0:#06b} = {nib0:#x}, held by lane {int(thread[0, 0])}, bits {4 * int(pos[0, 0])}-"
          f"{4 * int(pos[0, 0]) + 3} of its sp-meta register.",
        ("8-bit types (K = 64, 16 quartets a row): lane = 4g + h + 2(c >> 3), nibble = c & 7; every lane of every "
         "quad is read, so sp-sel must be 0." if eight else
         f"Row m = 8h + g (warp 0), {chunk} c: lane = 4g + (c >> 2) + 2 sp_sel, nibble = 4h + (c & 3): sp-sel {sel} "
         f"reads lanes {2 * sel} and {2 * sel + 1} of each quad, so one register can carry the metadata of two "
         "instructions (panel 5); the H200 ignores the other lanes (fixtures/sparse)."),
        "The example A is drawn from a fixed seed; refmodel.numerics.sparse.compress keeps the nonzeros and, where a "
        f"{chunk} has fewer, zeros at the lowest free positions (an all-zero quartet gets 0b0100).",
    ]
    return Diagram("sparse-compress", f"sparse wgmma compression: {dtype}, sp-sel {sel} (rows 0-15, warp 0)", SRC,
                   panels, legend, caption, verified=VERIFIED)


__all__ = ["sparse_compress", "example_a", "instr_for", "SPARSE_TYPES"]
