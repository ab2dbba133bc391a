"""docs/layouts.md: the layouts chapter (seed §4-7, §15.2), generated from the code and the fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "layouts"


def _entries() -> list[dict]:
    return json.loads((FIX / "manifest.json").read_text())["entries"]


def _evidence_table() -> str:
    kinds = {"matrix": "ldmatrix / stmatrix x1/x2/x4 ±.trans (random distinct row addresses)",
             "wgmma_desc": "wgmma through raw descriptors (every swizzle, both majors, wrong LBO/SBO, base offsets)",
             "fragments": "register fragments through tagged identity matrices (D = tagged A)",
             "epilogue": "epilogue: cvt f32→f16x2/bf16x2 + stmatrix.x4 slice loop, every swizzle",
             "tma": "TMA 2-D tile loads, every swizzle, 1/2/4-byte elements, out-of-bounds fill",
             "tma_faults": "TMA loads probing the start-column rule (fault or not)"}
    rows = {}
    for e in _entries():
        r = rows.setdefault(e["kind"], [0, 0])
        r[0] += 1
        r[1] += int(e["cases"])
    lines = ["| what | fixtures | hardware outputs stored |", "|---|---:|---:|"]
    for k, label in kinds.items():
        if k in rows:
            lines.append(f"| {label} | {rows[k][0]} | {rows[k][1]:,} |")
    return "\n".join(lines)


def _base_offset_table() -> str:
    """Mispredicted cases per candidate rule, over the stored cases that use a base offset."""
    from refmodel.verify.fixtures import load_arrays
    from refmodel.verify.replay_layouts import wgmma_model

    counts = {r: 0 for r in ("ignore", "add", "xor", "subtract")}
    total = 0
    for e in _entries():
        if e["kind"] != "wgmma_desc":
            continue
        m = e["meta"]
        arr = load_arrays(FIX, e)
        bo_b = (arr["desc_b"] >> np.uint64(49)) & np.uint64(7)
        bo_a = np.zeros_like(bo_b) if m["rs"] else (arr["desc_a"] >> np.uint64(49)) & np.uint64(7)
        use = [i for i in range(len(bo_b)) if bo_a[i] or bo_b[i]]
        if not use:
            continue
        sub = {k: (v[use] if isinstance(v, np.ndarray) and v.ndim and v.shape[0] == len(bo_b) else v)
               for k, v in arr.items()}
        v = (m["instr"], m["rs"], m["trans_a"], m["trans_b"], m["imm_scale_a"], m["imm_scale_b"])
        total += len(use)
        for rule in counts:
            d = wgmma_model(v, sub, sub["bases"], rule=rule)
            counts[rule] += sum(not np.array_equal(d[i], sub["hw_d_regs"][i]) for i in range(len(use)))
    lines = ["| rule for the swizzle phase | cases the H200 contradicts |", "|---|---:|"]
    names = {"ignore": "`(addr >> 7)` (base offset ignored)", "add": "`(addr >> 7) + base_offset`",
             "xor": "`(addr >> 7) ^ base_offset`", "subtract": "**`(addr >> 7) − base_offset`**"}
    for r, c in counts.items():
        lines.append(f"| {names[r]} | {c} of {total} |")
    return "\n".join(lines)


def _faults_table() -> str:
    e = [x for x in _entries() if x["kind"] == "tma_faults"][0]
    lines = ["| element bytes | swizzle | box | first column | bytes into the row | H200 |", "|---:|---|---|---:|---:|---|"]
    for c in e["meta"]["cases"]:
        col = c["coords"][1]
        lines.append(f"| {c['elem_bytes']} | {c['mode']} | {c['box'][0]}×{c['box'][1]} | {col} | "
                     f"{col * c['elem_bytes']} | {c['outcome']} |")
    return "\n".join(lines)


def layouts_page() -> str:
    from cute_doc import cute_table_md, fp8_registers_md, glossary_md

    fp8_section = fp8_registers_md().split("\n", 1)[1].replace("\n### ", "\n#### ")
    from refmodel.layouts.descriptor import MatrixDescriptor, operand_addresses
    from refmodel.layouts.fragment import a_fragment_layout, render_accumulator_layout
    from refmodel.layouts.smem import SmemLayout, dense_strides
    from refmodel.layouts.stmatrix import address_givers, fragment_map, parse_matrix_instr
    from refmodel.layouts.swizzle import MODES, swizzle_address
    from refmodel.machine.epilogue import epilogue_addresses
    from refmodel.errors import FormError

    mat, row, col = fragment_map(4, False)
    t0 = ", ".join(f"r{j} → matrix {int(mat[0, j, 0])} row {int(row[0, j, 0])} cols "
                   f"{int(col[0, j, 0])},{int(col[0, j, 1])}" for j in range(4))
    tmat, trow, tcol = fragment_map(4, True)
    t0t = ", ".join(f"r{j}: matrix {int(tmat[0, j, 0])} ({int(trow[0, j, 0])},{int(tcol[0, j, 0])}) and "
                    f"({int(trow[0, j, 1])},{int(tcol[0, j, 1])})" for j in range(2))
    gm, gr = address_givers(4)
    try:
        parse_matrix_instr("stmatrix.sync.aligned.m8n8.x4.shared.f32")
        f32_msg = "(accepted?)"
    except FormError as e:
        f32_msg = str(e)
    ep = epilogue_addresses(64, "128B")
    ep_lines = "\n".join(f"lane {lane:2d}: slice 0 at {int(ep[0, lane]):5d}, slice 1 at {int(ep[1, lane]):5d}   "
                         f"(row {lane % 8 + 8 * ((lane // 8) % 2):2d}, columns {8 * (lane // 16):2d}..)"
                         for lane in (0, 1, 7, 8, 15, 16, 24, 31))
    unit_tabs = []
    for m in MODES:
        if not m.bits:
            continue
        w = m.width
        r_, c_ = np.arange(8)[:, None], np.arange(w // 16)[None, :]
        where = (np.asarray(m.swizzle(r_ * w + 16 * c_)) % w) // 16   # stored unit of unit c in row r
        unit_tabs.append(f"{m.name} (rows of {w} bytes; one swizzle atom = 8 rows = {8 * w} B; "
                         f"stored position of units 0..{w // 16 - 1}):\n" +
                         "\n".join(f"  row {r}: " + " ".join(str(int(x)) for x in where[r]) for r in range(8)))
    atom_txt = "\n\n".join(unit_tabs)
    canon = []
    for major in ("K", "MN"):
        for m in MODES:
            lbo, sbo = dense_strides(major, m, 64, 32 if major == "K" else None)
            if major == "K":
                meaning = ("LBO: step between the two 16-byte K chunks (core matrices) of a row group; SBO: step "
                           "between 8-row groups" if not m.bits else
                           f"rows of {m.width} B; LBO unused (ignored by the H200 — random values in the fixtures "
                           f"change nothing); SBO: step between 8-row groups")
            else:
                meaning = ("SBO: step between 8-element (16-byte) groups along M/N; LBO: step between 8-row groups "
                           "along K" if not m.bits else
                           f"swizzle atoms of 8 K-rows × {m.width} B; LBO: step between {m.width // 2}-element blocks along "
                           f"M/N; SBO: step between 8-row groups along K")
            canon.append(f"| {major} | {m.name} | {lbo} | {sbo} | {meaning} |")
    lay = SmemLayout("K", "128B", 2, 16, 1024)
    off = lay.offsets(16, 64)
    phys = np.asarray(MODES[3].swizzle(off))
    kstep = "\n".join(f"row {r:2d}: K 0..7 at {int(phys[r, 0]):4d}, K 8..15 at {int(phys[r, 16]):4d}, "
                      f"K 16..23 at {int(phys[r, 32]):4d} (after a +32-byte K step)" for r in (0, 1, 7, 8))
    d = MatrixDescriptor(0x1200, 16, 1024, 4, 1)
    addr = operand_addresses(d, 64, 16, 2)
    r, c = a_fragment_layout("e4m3")
    frag0 = ", ".join(f"r{i // 4}.b{i % 4}→({int(r[0, i // 4, i % 4])},{int(c[0, i // 4, i % 4])})" for i in range(8))
    return f"""# Layouts: where each element lives, and what the hardware reads

*Generated by `tools/gen_docs.py` (`tools/layouts_doc.py`) from `refmodel.layouts`, `refmodel.machine`
and the H200 recordings in `fixtures/layouts` — every table of hardware behaviour below is computed from
those fixtures, which CI replays (`wgref verify`). Pictures: `docs/gallery/` (`wgref layout ...`);
debugging a descriptor: `docs/debug-descriptor.md` (`wgref desc ...`).*

Notation: warpgroup thread t in 0..127, warp w = t/32, lane l = t%32, g = l/4, q = l%4.

## Evidence (H200, `python -m gpu.record.layouts --out fixtures`)

{_evidence_table()}

Every case is compared on the device before anything is stored (the recorder fails loudly on a
single mismatch); only a sample of each launch is kept as fixtures. The recorder prints how many
outputs it compared in all.

## 1. Writing results: stmatrix (seed §4–5)

After `wgmma.wait_group 0` the accumulator is scattered over 128 threads (the fragment below). A
plain `st.shared` needs each thread to compute addresses for its own scattered elements;
`stmatrix` separates *who gives the address* from *who holds the data*:

* **address givers**: for `.x4`, lane L gives the row address of row L%8 of matrix L/8
  (lanes 0–7 → matrix 0, …, 24–31 → matrix 3; each row is 16 contiguous bytes, 16-byte aligned).
  For `.x1` only lanes 0–7 count, for `.x2` lanes 0–15; the other lanes' addresses are ignored.
* **data holders** (the striped layout, seed §5.3): register j of lane l holds row l/4, columns
  2(l%4) and 2(l%4)+1 of matrix j (low half, high half). Thread 0: {t0}.
* **`.trans`** stores each thread's pair down a column: thread 0 {t0t} (row, col).

`ldmatrix` is the same map in the other direction. Both are verified on the H200 with random
distinct row addresses and random register contents (table above); the untouched bytes of the
image are compared too.

## 2. The epilogue loop (seed §5.4)

`stmatrix.x4` takes 4 registers per thread (a 16×16 block per warp), the accumulator has N/2
(f32) of them, so the epilogue loops over N/16 column slices. With an f32 accumulator each pair
is first converted: `cvt.rn.bf16x2.f32 p, d[2j+1], d[2j]` (the *first* source lands in the high
half), which yields exactly the packed f16-accumulator layout: registers p[4s..4s+3] of slice s
are the top-left, bottom-left, top-right and bottom-right 8×8 matrices of the warp's 16×16 block.
Lane L's address in slice s: row 16w + L%8 + 8·((L/8)%2), columns 16s + 8·(L/16) of a row-major
tile — here 64 × 64 bf16 with the 128B swizzle (`refmodel.machine.epilogue.epilogue_addresses`,
byte offsets of warp 0):

```text
{ep_lines}
```

`refmodel.epilogue_stmatrix(acc, "bf16", "128B")` returns the image and these addresses; the H200
wrote the same bytes for N = 16…256, f16 and bf16, every swizzle, and accumulators full of NaN,
±Inf, overflow and subnormals (the cvt rounds as `docs/fp8.md` says).

## 3. stmatrix has no f32 form (seed §6)

`refmodel.parse_matrix_instr("stmatrix.sync.aligned.m8n8.x4.shared.f32")` →
*{f32_msg}*
An f16 accumulator is already packed f16x2 and goes straight to stmatrix.

## 4. A swizzle moves 16-byte units (seed §7)

Two words, kept apart here and in every picture: the **16-byte unit** is what moves, the
**swizzle atom** is the pattern it moves in (8 rows × W bytes, W = 32, 64, 128: 256, 512 or 1024
bytes, the period). A swizzle permutes the 16-byte units inside each W-byte row of the tile, never
the bytes inside a unit: `swizzle(a) = a ^ (((a >> 7) & (2^B − 1)) << 4)` — CuTe `Swizzle<B,4,3>`,
B = 1, 2, 3 for 32B, 64B, 128B. Worked example (128B, 128-byte rows): 0x2A0 is row 5, unit 2;
2 ⊕ 5 = 7 → 0x{swizzle_address(0x2A0, "128B"):X}. In a 32B or 64B tile the rows are 32 or 64 bytes,
so the line bits (from bit 7) are the row index divided by 4 or 2: rows 0–3 (32B) or 0–1 (64B) of
each swizzle atom stay in place.
One row of an m8n8 bf16 tile is 16 bytes — one unit — which is why TMA can "unswizzle" a tile and
ldmatrix/stmatrix rows stay intact.

```text
{atom_txt}
```

The H200 applies the swizzle to the **absolute shared address**: descriptors whose start lies
anywhere in a pattern (not only on its 256/512/1024-byte boundary) read exactly what
`swizzle(start + offset)` predicts (wgmma fixtures, starts drawn "any").

## 5. Canonical shared-memory layouts and the descriptor (seed §15.2)

FP8, tf32 and int8 operands must be K-major; only f16/bf16 take imm-trans (MN-major). In bytes,
relative to the start address, before the swizzle (T = 16/element bytes, W = swizzle width,
S = W/16; PTX ISA "Canonical Layouts", verified on the H200, including the PTX worked examples):

```text
K-major,  none:     (r/8)·SBO + (r%8)·16 + (kb/16)·LBO + kb%16
K-major,  swizzled: (r/8)·SBO + (r%8)·W  + kb
MN-major, none:     (r/T)·SBO + (k%8)·16 + (k/8)·LBO + (r%T)·e
MN-major, swizzled: (r/(T·S))·LBO + (k%8)·W + (k/8)·SBO + (r%(T·S))·e
```

| major | swizzle | dense LBO (B) | dense SBO (B) for 64 rows | meaning |
|---|---|---:|---:|---|
{chr(10).join(canon)}

Note how LBO and SBO trade roles between the no-swizzle and the swizzled MN-major layouts —
the source of many CUTLASS issues (#1396, #1688). Deliberately wrong LBO/SBO values were part of
the recordings: the H200 then reads wrong bytes, and `refmodel.wgmma_smem` predicts the same
wrong answer.

**K steps inside a swizzle row.** CUTLASS and DeepGEMM advance the descriptor's start by 32 bytes
per K step of a 128B-swizzled K-major tile. Because the swizzle acts on absolute addresses the
next K slice comes out right (f16, 128-byte rows):

```text
{kstep}
```

**The base offset (bits 51:49).** PTX: for a pattern whose start is not on its 1024/512/256-byte
boundary, base offset = (pattern start >> 7) & 7. What the hardware does with it, found on the
H200 by recording random descriptors with base offsets 1..7 and testing four candidate rules
against the recordings (stored fixtures, recomputed here):

{_base_offset_table()}

So the swizzle phase is `((address >> 7) − base_offset)` masked to the mode's bits (1, 2, 3):
a tile swizzled *as if* it started on a pattern boundary P reads back correctly from P with
base offset (P >> 7) & 7 — exactly the PTX recipe. For 32B only bit 0 of the field matters, for
64B bits 0–1. Example: `MatrixDescriptor(start=0x1200, lbo=16, sbo=1024, base_offset=4, swizzle=1)`
makes A[0, 0..7] come from 0x{int(addr[0, 0]):X} and A[1, 0..7] from 0x{int(addr[1, 0]):X}.

## 6. Register fragments (wgmma A and D)

Accumulator element i (0..N/2−1) of thread t: row = 16w + g + 8·((i>>1)&1), col = 2q + (i&1) + 8·(i>>2);
f32/s32 one element per register, f16 two (element 2j in bits 15:0). Top-left corner
(`T<thread>:r<register>`, f32):

```text
{render_accumulator_layout(16)}
```

A from registers (RS): f16/bf16 k16 use the accumulator map with N = 16; tf32 k8:
row = 16w+g+8·(i&1), col = q+4·(i>>1); 8-bit k32: byte i&3 of register i/4 holds
row = 16w+g+8·((i>>2)&1), col = 4q+(i&3)+16·(i>>3) — thread 0: {frag0}, …

Verified on the H200 with *tagged identity* probes: A holds distinct tags, B = I and C = 0, so
D = A exactly and each accumulator register must hold the tag of the A element both maps put
there (f16 with f16 and f32 accumulators, bf16, tf32, e4m3 and s8 with row and column tags; SS
and RS).

## 7. TMA tile loads

`refmodel.tma_load(tensor, box, coords, mode, dst=...)`: the box is written row after row at
`dst`, out-of-bounds elements are zero. Two things the H200 showed that the leads did not say:

* **With a swizzle, every box row takes a full swizzle row.** A box row narrower than the swizzle
  width (e.g. 16 bytes under 128B) is not packed densely: rows sit W bytes apart and the rest of
  each swizzle row is left untouched; then the absolute-address swizzle applies (destinations at
  128-byte offsets inside a pattern included).
* **The box's first column must start on a 16-byte boundary of its row** (negative columns
  included). Otherwise the load faults with an illegal instruction and the CUDA context is lost;
  refmodel refuses such a load with that rule:

{_faults_table()}

## 8. FP8 A from registers, and the K-major rule (seed §14–15)

{fp8_section}

## 9. The CuTe bridge

{glossary_md()}

{cute_table_md()}

## Machine-level API

```python
import refmodel
img = refmodel.stmatrix("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16", regs, addrs, smem)  # regs uint32 (32, 4)
regs = refmodel.ldmatrix("ldmatrix.sync.aligned.m8n8.x4.shared.b16", addrs, smem)
d = refmodel.wgmma_smem("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", smem, a_desc, b_desc,
                        c, smem_base=0x400, imm_trans_b=1)            # reads through the descriptors
d_regs = refmodel.wgmma_registers(instr, smem, a_regs_or_desc, b_desc, c_regs)   # (128, regs) in and out
img, addrs = refmodel.epilogue_stmatrix(acc_f32, "bf16", "128B")
img = refmodel.tma_load(global_tensor, box=(64, 64), coords=(0, 128), mode="128B")
```
"""
