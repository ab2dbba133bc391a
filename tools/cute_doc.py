"""Docs sections for the CuTe bridge and seed §14–15 (FP8 A in registers), generated from refmodel.

    glossary_md()         16-byte unit vs core matrix vs swizzle row vs CUTLASS swizzle atom
    cute_table_md()       every layout kind's CuTe shape:stride (T, m, k filled in) and CUTLASS name
    fp8_registers_md()    seed §14–15 checked against refmodel's tables and the PTX ISA
    fp8_a_registers_svg() the picture of §15.1 (refmodel.render.core Diagram -> SVG)
    write_fp8_svg(root)   writes it to FP8_SVG

Every number, layout and claim below is computed here from refmodel (layouts, forms, machine);
the PTX ISA is quoted where it is the authority.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from refmodel.layouts.cute import CUTLASS_TYPES, NO_CUTE_FORM, atom_layout, layout_for  # noqa: E402
from refmodel.layouts.descriptor import MatrixDescriptor  # noqa: E402
from refmodel.layouts.fragment import a_fragment_layout, pack_a_fragment  # noqa: E402
from refmodel.layouts.smem import SmemLayout, dense_strides, tile_image  # noqa: E402
from refmodel.layouts.stmatrix import MATRIX_FORMS, parse_matrix_instr  # noqa: E402
from refmodel.layouts.swizzle import ATOM_BYTES, MODES, swizzle_mode  # noqa: E402
from refmodel.errors import FormError, InputError  # noqa: E402
from refmodel.wgmma_forms import INPUT_BITS, WGMMA_FORMS  # noqa: E402

#: where the §15.1 picture goes (docs/img: docs/gallery is owned by tools/gen_gallery.py, whose
#: --check refuses files it did not generate)
FP8_SVG = "docs/img/fp8_a_registers.svg"

# the tile the §15 picture and checks use: a 64 x 128 e4m3 A tile, K-major, 128B swizzle (one
# swizzle row per row, DeepGEMM's BLOCK_K = 128), of which one wgmma reads a 32-byte K slice
_TILE_ROWS, _TILE_K, _MODE = 64, 128, "128B"


# ----------------------------------------------------------------------------- glossary

def glossary_md() -> str:
    """Markdown: the four units people mix up, with the names refmodel, the PTX ISA and CuTe use."""
    rows = []
    for m in MODES:
        rows.append(f"| {m.name} | {m.width} B | {m.period} B | `Swizzle<{m.bits},4,3>` | "
                    f"`GMMA::Layout_K_{('INTER', 'SW32', 'SW64', 'SW128')[m.bits]}_Atom<T>` = 8 rows x {m.width} B; "
                    f"`Layout_MN_{('INTER', 'SW32', 'SW64', 'SW128')[m.bits]}_Atom<T>` = {m.width} B x 8 K |")
    el = []
    for e, dt in ((1, "e4m3"), (2, "f16"), (4, "tf32")):
        lay = atom_layout("K", "128B", dt)
        sw = "Swizzle<{},{},{}>".format(*lay.element_form().swizzle)
        el.append(f"| {e} B ({dt}, `{CUTLASS_TYPES[dt]}`) | T = {ATOM_BYTES // e} | `{sw}` | `{lay}` |")
    return f"""### Glossary: 16-byte unit, core matrix, swizzle row, swizzle atom

| term | size | what it is | where the name comes from |
|---|---|---|---|
| **16-byte unit** | 16 B = T elements (T = 16 / element bytes) | the piece a swizzle moves (its bytes never move), one row of a core matrix, one ldmatrix/stmatrix row address | CuTe `uint128_t` (`make_gmma_desc` recasts to it), the `M = 4` of `Swizzle<B,4,3>`; refmodel's `ATOM_BYTES` and the seed's §7 "swizzle atom" |
| **core matrix** | 8 rows x 16 B = 128 contiguous bytes | the block the no-swizzle canonical layout places with LBO/SBO | PTX ISA "core matrices"; CuTe `Layout_K_INTER_Atom<T>` = (8,T):(T,1) |
| **swizzle row** | W = 16·2^B bytes (32, 64, 128) | the bytes of one row (K-major) or one K column (MN-major) inside which the 16-byte units are permuted | PTX ISA swizzling modes |
| **swizzle atom (CUTLASS)** | 8 swizzle rows = one pattern period | the smallest tile the swizzle pattern repeats on, what `tile_to_shape` tiles | CuTe `GMMA::Layout_{{K,MN}}_SW{{32,64,128}}_Atom<T>` (`cute/atom/mma_traits_sm90_gmma.hpp`) |

So "atom" means the 16-byte unit in the seed's §7 and in refmodel's swizzle module, but the 8-row
pattern tile in CUTLASS. Per mode (refmodel `MODES`):

| swizzle | row W | period | CuTe functor (byte addresses) | CUTLASS atoms |
|---|---:|---:|---|---|
{chr(10).join(rows)}

**Units.** CuTe defines the atoms in bits and `upcast`s them to the element type; the swizzle keeps
acting on byte addresses through the shared-memory pointer (`Swizzle<3,4,3> o smem_ptr[16b] o
layout`). wgref prints that form: `shape:stride` in elements, `Swizzle<B,4,3>` on bytes. The same
map in pure element units is `Swizzle<B, 4 − log2(e), 3>` (what a pointer-free `ComposedLayout`,
e.g. pycute's, evaluates). The 128B K-major atom per element size (`refmodel.layouts.cute.atom_layout`):

| element | T | element-unit swizzle | `GMMA::Layout_K_SW128_Atom<T>` (wgref print) |
|---|---|---|---|
{chr(10).join(el)}

**Thread-value (TV) layouts** map (thread, value) to the element's index in the tile. wgmma
fragments index the 64 x N (or 64 x K) tile column-major, `row + 64·col`, as CUTLASS's
`CLayout_64xN` / `ALayout_64x*`; ldmatrix/stmatrix index `num` 8x8 b16 matrices, each row-major,
one after another (`64·matrix + 8·row + col`), as CuTe's `SM75_*_LDSM_*` / `SM90_*_STSM_*` traits
(which count in bits: multiply by 16).
"""


# ----------------------------------------------------------------------------- the CuTe table

def _table_entries() -> list[tuple[str, dict]]:
    out: list[tuple[str, dict]] = []
    for major, dts in (("K", ("f16", "e4m3", "tf32")), ("MN", ("f16",))):
        for m in MODES:
            for dt in dts:
                out.append(("smem", {"major": major, "mode": m.name, "dtype": dt, "rows": 64}))
    for dt in ("f32", "f16"):
        for n in (8, 64, 256):
            out.append(("acc", {"n": n, "dtype": dt}))
    for dt in ("tf32", "f16", "e4m3"):
        out.append(("a-frag", {"dtype": dt}))
    for op in ("ldmatrix", "stmatrix"):
        for num in (1, 2, 4):
            for trans in (False, True):
                out.append((op, {"num": num, "trans": trans}))
    for m in MODES[1:]:
        out.append(("swizzle", {"mode": m.name, "dtype": "f16", "lines": 8}))
    out.append(("desc", {"value": MatrixDescriptor(0x400, 16, 1024, 0, 1).encode(), "dtype": "f16", "rows": 64,
                         "k": 16, "major": "K"}))
    out.append(("desc", {"value": MatrixDescriptor(0x480, 16, 1024, 1, 1).encode(), "dtype": "f16", "rows": 64,
                         "k": 16, "major": "K"}))
    out.append(("sparse-meta", {"dtype": "f16", "sel": 0}))
    return out


def _opts_txt(opts: dict) -> str:
    return ", ".join(f"{k}={v:#x}" if k == "value" else f"{k}={v}" for k, v in opts.items())


def cute_table_md() -> str:
    """Markdown table: each layout kind (the `wgref layout` kinds) with its CuTe form."""
    lines = ["| kind | options | CuTe layout (T, m, k filled in) | domain | CUTLASS |", "|---|---|---|---|---|"]
    for kind, opts in _table_entries():
        lay = layout_for(kind, **opts)
        if lay is None:
            lines.append(f"| {kind} | {_opts_txt(opts)} | — | {NO_CUTE_FORM[kind]} | — |")
            continue
        cut = lay.atom or ""
        if lay.template and kind in ("smem", "desc", "acc"):
            cut += f"; `{lay.template}`"
        lines.append(f"| {kind} | {_opts_txt(opts)} | `{lay}` | {lay.domain} | {cut} |")
    return f"""### Every layout in CuTe notation

Generated by `refmodel.layouts.cute` (`cute_layout(kind, **options)` takes the options of
`wgref layout KIND`). Each row is evaluated element by element against refmodel's layouts, and by
pycute (NVIDIA's Python CuTe, shipped in the `nvidia-cutlass` wheel) as a peer oracle, in
`tests/test_cute_bridge.py`; CUTLASS's own `CLayout_64xN`, `ALayout_64x*`, GMMA smem atoms and
ldmatrix/stmatrix copy traits are evaluated against refmodel there too. The CUTLASS column names the
type it mirrors and, for the canonical layouts, the form in `make_gmma_desc`'s comment.

{chr(10).join(lines)}
"""


# ----------------------------------------------------------------------------- §14–15: FP8 A in registers

def _fp8_tile(seed: int = 1415) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tile bytes (64, 128) uint8, the tile's shared-memory image, physical byte address (64, 128))."""
    rng = np.random.default_rng(seed)
    tile = rng.integers(0, 256, size=(_TILE_ROWS, _TILE_K), dtype=np.uint8)
    img = tile_image(tile, "K", _MODE)
    dl, ds = dense_strides("K", _MODE, _TILE_ROWS, _TILE_K)
    addr = np.asarray(swizzle_mode(_MODE).swizzle(SmemLayout("K", _MODE, 1, dl, ds).offsets(_TILE_ROWS, _TILE_K)))
    return tile, img, addr


def _register_words(ks: int = 0) -> dict:
    """For K slice ``ks`` (bytes 32ks..32ks+31): each (thread, register) of the e4m3 A fragment as
    (row, first k, byte address), and whether its 4 bytes are one aligned 32-bit word in shared memory."""
    rows, cols = a_fragment_layout("e4m3")
    _, _, addr = _fp8_tile()
    words, aligned = {}, True
    for t in range(128):
        for j in range(4):
            r = int(rows[t, j, 0])
            ks_cols = [32 * ks + int(c) for c in cols[t, j]]
            a = [int(addr[r, c]) for c in ks_cols]
            contiguous = ks_cols == list(range(ks_cols[0], ks_cols[0] + 4)) and len(set(rows[t, j])) == 1
            aligned &= contiguous and a == list(range(a[0], a[0] + 4)) and a[0] % 4 == 0
            words[(t, j)] = (r, ks_cols[0], a[0])
    return {"words": words, "aligned": aligned}


def _ld_shared_check(ks: int = 0) -> bool:
    """ld.shared.b32 of each register's word from the swizzled image == pack_a_fragment of the slice."""
    tile, img, _ = _fp8_tile()
    want = pack_a_fragment(tile[:, 32 * ks:32 * ks + 32].view(_e4m3()), "e4m3")
    got = np.zeros((128, 4), dtype=np.uint32)
    for (t, j), (_, _, a) in _register_words(ks)["words"].items():
        got[t, j] = int.from_bytes(bytes(img[a:a + 4]), "little")
    return bool(np.array_equal(got, want))


def _e4m3():
    import ml_dtypes

    return ml_dtypes.float8_e4m3fn


def _ldmatrix_check(ks: int = 0) -> bool:
    """ldmatrix.x4.b16 (no .trans), lane L giving row (L % 8) + 8 ((L // 8) & 1) and byte
    16 (L // 16) of its warp's 16 rows: the e4m3 A fragment, for every warp (refmodel.machine.ldmatrix)."""
    from refmodel.machine.stmatrix import ldmatrix

    tile, img, addr = _fp8_tile()
    want = pack_a_fragment(tile[:, 32 * ks:32 * ks + 32].view(_e4m3()), "e4m3")
    lane = np.arange(32)
    for w in range(4):
        rows = 16 * w + lane % 8 + 8 * ((lane // 8) & 1)
        cols = 32 * ks + 16 * (lane // 16)
        regs = ldmatrix("ldmatrix.sync.aligned.m8n8.x4.shared.b16", addr[rows, cols], img)
        if not np.array_equal(regs, want[32 * w:32 * w + 32]):
            return False
    return True


def _trans_blocks() -> tuple[int, int]:
    """(MN positions, K positions) one register of ``ldmatrix.trans.b16`` holds when the tile is
    MN-major 8-bit (each 16-byte row = 16 MN values of one K): .trans moves 16-bit elements, so
    byte pairs travel together.  The 8-bit A fragment needs (1, 4): one row, 4 consecutive K."""
    from refmodel.layouts.stmatrix import fragment_map

    _, row, col = fragment_map(1, True)
    mn = {(2 * int(col[0, 0, h]) + b) for h in range(2) for b in range(2)}   # lane 0, register 0
    kk = {int(row[0, 0, h]) for h in range(2)}
    return len(mn), len(kk)


def fp8_checks() -> dict[str, bool]:
    """The §15.1 claims the page states, each computed on the model (all True when the page says 'holds')."""
    return {"aligned words": _register_words()["aligned"], "ld.shared.b32": _ld_shared_check(),
            "ldmatrix.x4.b16": _ldmatrix_check(), "trans is 2x2": _trans_blocks() == (2, 2)}


def _refused(instr: str) -> str:
    try:
        parse_matrix_instr(instr)
    except FormError as e:
        return str(e)
    return "accepted"


def _recorded_forms() -> set[str]:
    """wgmma opcodes recorded on the H200 (fixtures/wgmma_forms/manifest.json)."""
    import json

    man = json.loads((ROOT / "fixtures" / "wgmma_forms" / "manifest.json").read_text())
    return {f for e in man["entries"] for f in e["meta"]["forms"]}


def fp8_registers_md() -> str:
    """Markdown: seed §14–15 (FP8 wgmma, A in registers, K-major rule), checked against refmodel."""
    fp8 = [f for f in WGMMA_FORMS if f.family == "fp8"]
    n_rec = len({f.instr for f in fp8} & _recorded_forms())
    from refmodel.numerics.accumulate import BINDING

    fp8_mbits = BINDING[("fp8", "f32")].round_mbits
    ns = sorted({f.n for f in fp8})
    mixes = sorted({(f.dtype_a, f.dtype_b) for f in fp8})
    trans = sorted({f.dtype_a for f in WGMMA_FORMS if f.has_transpose})
    no_trans = sorted({f.dtype_a for f in WGMMA_FORMS if not f.has_transpose}, key=list(INPUT_BITS).index)
    a_regs = sorted({(f.dtype_a, f.a_regs) for f in WGMMA_FORMS}, key=lambda x: list(INPUT_BITS).index(x[0]))
    k_of = {f.dtype_a: f.k for f in WGMMA_FORMS}
    words = _register_words()
    checks = fp8_checks()
    t0 = ", ".join(f"r{j} = A[{r}, {k}..{k + 3}] @ 0x{a:03x}" for j in range(4)
                   for (r, k, a) in [words["words"][(0, j)]])
    t37 = ", ".join(f"r{j} = A[{r}, {k}..{k + 3}]" for j in range(4) for (r, k, _) in [words["words"][(37, j)]])
    ld_ok, lm_ok, (tr_mn, tr_k) = checks["ld.shared.b32"], checks["ldmatrix.x4.b16"], _trans_blocks()
    b8 = _refused("ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8")
    forms_b16 = sorted({f.num for f in MATRIX_FORMS.values() if f.op == "ldmatrix"})
    try:
        SmemLayout("MN", "128B", 1, 16, 1024)
        mn_msg = "accepted"
    except InputError as e:
        mn_msg = str(e)
    ok = {True: "holds", False: "FAILS"}
    return f"""## FP8 A in registers and the K-major rule (seed §14–15)

*Generated by `tools/cute_doc.py` from refmodel's form table (`refmodel/wgmma_forms.py`), layouts
(`refmodel/layouts/fragment.py`, `smem.py`, `stmatrix.py`) and machine (`refmodel.machine.ldmatrix`,
H200-verified); the PTX ISA is quoted where it is the authority. Where the lecture notes and the
model differ, this section says so.*

### The FP8 wgmma (§14)

`wgmma.mma_async.sync.aligned.m64nNk32.{{f32,f16}}.{{e4m3,e5m2}}.{{e4m3,e5m2}}`: M = 64, **K = 32**
(every dense wgmma reads 32 bytes of K per row: tf32 K = {k_of['tf32']}, f16/bf16 K = {k_of['f16']},
8-bit K = {k_of['e4m3']}), N = {ns[0]}..{ns[-1]} step 8 ({len(ns)} values), accumulator f32 or f16,
and A and B may mix formats: {", ".join(f"{a}×{b}" for a, b in mixes)} — {len(fp8)} forms in all
(`refmodel/wgmma_forms.py`), {n_rec} of them recorded on the H200 (`fixtures/wgmma_forms`). The "FP22" remark of §14.1 is the
f32 accumulator's {fp8_mbits}-bit mantissa (refmodel's binding, from the H200 recordings): see [the accumulator page](accumulator.md).

### A from registers (§15.1)

In the RS form every A type takes the same register budget — {", ".join(f"{d} {r}" for d, r in a_regs)}
32-bit registers per thread (64 x 32 bytes / 128 threads) — and for 8-bit A, register j of
thread t (w = t/32, g = (t%32)/4, q = t%4) holds **4 K-consecutive bytes of one row**:
row 16w + g + 8(j & 1), k = 4q + 16(j >> 1) .. +3 (byte b = bits 8b..8b+7). Thread 0: {t0}
(64 x 128 e4m3 tile, K-major, 128B swizzle, at a 1024-byte aligned address; K slice 0).
Thread 37: {t37}.

![FP8 A in registers](img/fp8_a_registers.svg)

What the model says about loading it, checked here on a random e4m3 tile:

* **`ld.shared.b32` works.** Each register's 4 bytes are one 4-byte-aligned word of shared memory
  even under the 128B swizzle (the swizzle moves whole 16-byte units, a word never straddles one):
  {ok[checks["aligned words"]]} for all 128 x 4 registers; loading those words gives exactly
  `pack_a_fragment` ({ok[ld_ok]}). This is the path the notes describe.
* **No `.b8` ldmatrix on sm_90a.** The PTX ISA's ldmatrix syntax has `.type = {{.b16, .b8}}`, but
  `.b8` comes only with the `.m16n16` (always `.trans`) and `.m8n16` shapes, which the notes place
  on sm_100a and later; refmodel's table of sm_90a forms has
  `.m8n8 .x{{{",".join(map(str, forms_b16))}}} [.trans] .b16` only and refuses the rest: `parse_matrix_instr("ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8")` → *{b8}*
* **Where the notes overstate it.** §15.1 says ldmatrix cannot load FP8 on Hopper. The
  non-transposed `.b16` ldmatrix moves bytes unchanged: lane l receives bytes 4(l%4)..4(l%4)+3 of
  row l/4 of each 8 x 16-byte matrix, which is the 8-bit A fragment. With lane L giving row
  (L % 8) + 8((L/8) & 1), byte 16(L/16) of its warp's 16 rows, `ldmatrix.x4.b16` yields
  `pack_a_fragment` for every warp ({ok[lm_ok]}; refmodel's ldmatrix is verified on the H200). What
  is missing on sm_90a is a *byte* transpose: `.trans` moves 16-bit elements, so on an MN-major
  FP8 tile a register receives a {tr_mn} (MN) x {tr_k} (K) block of bytes instead of 1 x 4 — an
  MN-major FP8 tile cannot be turned into the fragment by ldmatrix; that needs byte permutes
  (`prmt`) or a re-packed (K-major) staging tile.

### The K-major rule (§15.2)

PTX ISA (wgmma.mma_async): "The transpose operation is only supported for the wgmma.mma_async
variants with .f16/.bf16 types on matrices accessed from shared memory using matrix descriptors."
refmodel's form table agrees: imm-trans-a/b exist for {", ".join(trans)} only; {", ".join(no_trans)}
operands are K-major, and refmodel's shared-memory model refuses an MN-major FP8 tile:
`SmemLayout("MN", "128B", 1, ...)` → *{mn_msg}* The transpose also never applies to A in
registers (RS), for any type. The notes' conclusion stands: stage FP8 tiles K-major (TMA a K-major
box, or pre-pack offline); an MN-major source (e.g. attention's V) must be transposed on the way.
"""


# ----------------------------------------------------------------------------- the picture

def fp8_a_registers_diagram():
    """Diagram: warp 0's 16 rows of the 8-bit A slice in shared memory (one cell = one 32-bit
    word = one register) and the registers of warp 0 with the address each is loaded from."""
    from refmodel.render.core import Diagram, Panel, thread_colour

    words = _register_words()["words"]
    n_rows = 32
    lab = [[""] * 8 for _ in range(n_rows)]
    fill = [[""] * 8 for _ in range(n_rows)]
    for (t, j), (r, k, _) in words.items():
        if r < n_rows:
            lab[r][k // 4] = f"T{t}:r{j}"
            fill[r][k // 4] = thread_colour(t)
    smem = Panel("1. A[0..31, 0..31] (e4m3): each 4-byte word is one register T<thread>:r<j>", lab, fill,
                 row_heads=[str(r) for r in range(n_rows)], col_heads=[f"k{4 * c}-{4 * c + 3}" for c in range(8)],
                 col_groups=4, row_groups=8)
    for w in range(2):
        for j in range(4):
            r0, c0 = 16 * w + 8 * (j & 1), 4 * (j >> 1)
            label = {0: "ldmatrix m0", 2: "ldmatrix m2", 1: "m1 (k0-15), m3 (k16-31)"}.get(j, "") if w == 0 else ""
            smem.boxes.append((r0, c0, r0 + 8, c0 + 4, label, "thick"))
    smem.boxes += [(0, c, 1, c + 1, "", "focus") for c in (0, 4)] + [(8, c, 9, c + 1, "", "focus") for c in (0, 4)]
    rl = [[""] * 4 for _ in range(32)]
    rf = [[""] * 4 for _ in range(32)]
    for t in range(32):
        for j in range(4):
            r, k, a = words[(t, j)]
            rl[t][j] = f"A[{r},{k}:{k + 4}] @{a:#05x}"
            rf[t][j] = thread_colour(t)
    regs = Panel("2. warp 0's registers: row, K bytes, shared address (128B swizzle)",
                 rl, rf, row_heads=[f"T{t}" for t in range(32)], col_heads=[f"r{j}" for j in range(4)],
                 col_groups=4, row_groups=4)
    regs.boxes.append((0, 0, 1, 4, "", "focus"))
    legend = [(thread_colour(t), f"thread {t}") for t in (0, 1, 4, 32)]
    legend += [("", "thick outline: the four 8 x 16-byte matrices an ldmatrix.x4.b16 would read for warp 0"),
               ("", "dashed: thread 0's four words"),
               ("", "A[r,k:k+4] @addr = bytes k..k+3 of row r, one ld.shared.b32 from addr")]
    caption = ["wgmma RS form, 8-bit A (e4m3/e5m2/s8/u8): register j of thread t holds A[16w + g + 8(j&1), "
               "4q + 16(j>>1) .. +3], byte b in bits 8b..8b+7 (refmodel a_fragment_layout; CUTLASS ALayout_64x32).",
               "The tile is 64 x 128 bytes, K-major, 128B swizzle, 1024-byte aligned; this is its first 32-byte K "
               "slice (one wgmma). The swizzle moves 16-byte units only, so every register is one aligned "
               "ld.shared.b32. sm_90a has no .b8 ldmatrix, but the .b16 ldmatrix.x4 (no .trans) delivers the same "
               "bytes; only a transposed (MN-major) FP8 tile cannot be loaded this way."]
    return Diagram("fp8-a-registers", "FP8 A in registers (seed §15.1): one 32-bit word per register",
                   "PTX ISA wgmma Register Fragments (matrix A, .m64nNk32 8-bit); CuTe ALayout_64x32; seed lecture §15",
                   [smem, regs], legend, caption,
                   verified="computed by refmodel (fragment, smem, swizzle; H200-verified layouts)")


def fp8_a_registers_svg() -> str:
    """The §15.1 picture as SVG text."""
    from refmodel.render.core import to_svg

    return to_svg(fp8_a_registers_diagram())


def write_fp8_svg(root: Path = ROOT) -> Path:
    """Write :data:`FP8_SVG` under ``root``; returns the path."""
    path = Path(root) / FP8_SVG
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(fp8_a_registers_svg(), encoding="utf-8")
    return path


if __name__ == "__main__":
    print(glossary_md())
    print(cute_table_md())
    print(fp8_registers_md())
