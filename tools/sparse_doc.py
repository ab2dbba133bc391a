"""docs/sparse.md: sparse wgmma (seed §16-17), generated from the code and fixtures/sparse."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures" / "sparse"


def _entries() -> list[dict]:
    return json.loads((FIX / "manifest.json").read_text())["entries"]


def _forms_table() -> str:
    """Hardware outputs compared on the device and stored, per family (kind sparse_forms)."""
    from refmodel.wgmma_sp_forms import parse_wgmma_sp

    lines = ["| family (A/B, D) | sparse forms | jobs (SS + RS) | outputs compared on the H200 | outputs stored |",
             "|---|---:|---:|---:|---:|"]
    tot = [0, 0, 0, 0]
    for e in sorted((x for x in _entries() if x["kind"] == "sparse_forms"), key=lambda x: x["file"]):
        jobs = e["meta"]["jobs"]
        forms = len({j["instr"] for j in jobs})
        f = parse_wgmma_sp(jobs[0]["instr"])
        row = [forms, len(jobs), int(e["meta"]["compared_on_device"]), int(e["cases"])]
        tot = [a + b for a, b in zip(tot, row)]
        lines.append(f"| {f.family}, {f.dtype_d} | {row[0]} | {row[1]} | {row[2]:,} | {row[3]:,} |")
    lines.append(f"| **all** | **{tot[0]}** | **{tot[1]}** | **{tot[2]:,}** | **{tot[3]:,}** |")
    return "\n".join(lines)


def _meta_table(dtype: str, sel: int) -> str:
    from refmodel.layouts.sparse_meta import meta_holders

    thread, pos = meta_holders(dtype, sel)
    cols = thread.shape[1]
    head = "| row | " + " | ".join(f"c{c}" for c in range(cols)) + " |"
    lines = [head, "|---:|" + "---|" * cols]
    for m in (0, 1, 7, 8, 9, 15, 16):
        lines.append(f"| {m} | " + " | ".join(f"T{int(thread[m, c])}:{4 * int(pos[m, c])}" for c in range(cols)) + " |")
    return "\n".join(lines)


def _probe(name: str):
    from refmodel.verify.fixtures import load_arrays

    e = [x for x in _entries() if x["file"] == name][0]
    return e["meta"], load_arrays(FIX, e)


def _any_nibble_table() -> str:
    """Per nibble: (row, chunk) slots seen in the 'any' probes and how many of them the H200's D
    matches the 'both products join' rule (B = identity: D columns 4c..4c+3 show the chunk)."""
    from refmodel.layouts.fragment import unpack_accumulator
    from refmodel.layouts.sparse_meta import unpack_meta
    from refmodel.verify.replay_sparse import probe_model
    from refmodel.wgmma_sp_forms import parse_wgmma_sp

    seen, agree = np.zeros(16, np.int64), np.zeros(16, np.int64)
    names = []
    for e in _entries():
        if e["kind"] != "sparse_probe" or not e["file"].endswith("_any.npz") or "tf32" in e["meta"]["instr"]:
            continue
        meta, arr = _probe(e["file"])
        f = parse_wgmma_sp(meta["instr"])
        names.append(e["file"])
        model = probe_model(meta, arr, arr["bases"])
        for i in range(arr["meta"].shape[0]):
            nib = unpack_meta(arr["meta"][i], f.dtype_a, meta["sp_sel"])
            hw = unpack_accumulator(arr["hw"][i], f.n, f.dtype_d).view(np.uint32)
            md = unpack_accumulator(model[i], f.n, f.dtype_d).view(np.uint32)
            same = (hw == md).reshape(64, f.meta_cols, 4).all(-1)
            np.add.at(seen, nib.ravel(), 1)
            np.add.at(agree, nib.ravel(), same.ravel())
    lines = ["| nibble | idx0, idx1 | PTX | slots in the probes | H200 D = refmodel (both products join) |",
             "|---|---|---|---:|---:|"]
    for v in range(16):
        i0, i1 = v & 3, v >> 2
        kind = "legal" if i0 < i1 else ("**equal indices**" if i0 == i1 else "idx0 > idx1")
        lines.append(f"| `{v:04b}` | {i0}, {i1} | {kind} | {seen[v]:,} | {agree[v]:,} |")
    return "\n".join(lines) + f"\n\n(from {', '.join(sorted(names))})"


def _tf32_table() -> str:
    """tf32 nibbles other than 0b0100/0b1110: what the H200 put in the pair's two D columns."""
    from refmodel.layouts.fragment import unpack_a_fragment, unpack_accumulator
    from refmodel.layouts.sparse_meta import unpack_meta

    rows = {}
    for name in ("probe_05_any.npz", "probe_06_any.npz", "probe_07_any.npz", "probe_tf32_random_any.npz"):
        meta, arr = _probe(name)
        for i in range(arr["meta"].shape[0]):
            nib = unpack_meta(arr["meta"][i], "tf32", meta["sp_sel"])
            a = unpack_a_fragment(arr["a_regs"][i], "tf32")              # the tags (compressed A)
            d = unpack_accumulator(arr["hw"][i], 16, "f32")
            for m in range(64):
                for c in range(8):
                    v = int(nib[m, c])
                    r = rows.setdefault(v, [0, 0, 0, None])
                    r[0] += 1
                    tag = np.float32(a[m, c]).view(np.uint32) & np.uint32(0xFFFFE000)
                    pair = d[m, 2 * c:2 * c + 2]
                    legal_like = (pair[0] == tag.view(np.float32) and pair[1] == 0) or \
                                 (pair[1] == tag.view(np.float32) and pair[0] == 0)
                    r[1] += int(legal_like)
                    r[2] += int(pair[0] == 0 and pair[1] == 0)
                    if r[3] is None and "random" in name:
                        r[3] = (float(tag.view(np.float32)), float(pair[0]), float(pair[1]))
    lines = ["| nibble | pairs | D = the tag in one column (a legal pick) | D = 0, 0 | example (random tags): tag → D[2c], D[2c+1] |",
             "|---|---:|---:|---:|---|"]
    for v in sorted(rows):
        n, legal, zero, ex = rows[v]
        exs = "" if ex is None else f"{ex[0]:.9g} → {ex[1]:.9g}, {ex[2]:.9g}"
        lines.append(f"| `{v:04b}`{' (legal)' if v in (0b0100, 0b1110) else ''} | {n} | {legal} | {zero} | {exs} |")
    return "\n".join(lines)


def _example() -> str:
    import ml_dtypes  # noqa: F401

    import refmodel

    instr = "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16"
    a = np.zeros((64, 32), np.float16)
    a[0, :8] = [0, 1.5, 0, -2, 3, 0, 0, 0.25]
    ac, meta = refmodel.compress(a, instr)
    b = np.arange(32 * 8, dtype=np.float32).reshape(32, 8).astype(np.float16) / 8
    d = refmodel.wgmma_sp(instr, ac, meta, b)
    regs = refmodel.pack_meta(meta, "f16", 0)
    return (f"```python\nimport numpy as np, refmodel\ninstr = \"{instr}\"\n"
            "a = np.zeros((64, 32), np.float16)\na[0, :8] = [0, 1.5, 0, -2, 3, 0, 0, 0.25]   # 2:4 in each quartet\n"
            "ac, meta = refmodel.compress(a, instr)      # (64, 16) f16, (64, 8) uint8\n"
            f"ac[0, :4]   -> {ac[0, :4].astype(np.float32).tolist()}\n"
            f"meta[0, :2] -> {[f'0b{int(x):04b}' for x in meta[0, :2]]}   # idx0 | idx1 << 2: (1, 3) and (0, 3)\n"
            "b = (np.arange(32 * 8, dtype=np.float32).reshape(32, 8) / 8).astype(np.float16)\n"
            "d = refmodel.wgmma_sp(instr, ac, meta, b)    # one fused dot product of the 16 kept products\n"
            f"d[0, :4]    -> {d[0, :4].tolist()}\n"
            f"(a.astype(np.float64) @ b.astype(np.float64))[0, :4] -> "
            f"{(a.astype(np.float64) @ b.astype(np.float64))[0, :4].tolist()}\n"
            "regs = refmodel.pack_meta(meta, \"f16\", sp_sel=0)   # (128,) uint32 sp-meta registers\n"
            f"hex(regs[0]), hex(regs[1]) -> {hex(int(regs[0]))}, {hex(int(regs[1]))}   # row 0: lanes 0 (c0-3), 1 (c4-7)\n```")


def sparse_page() -> str:
    return f"""# Sparse wgmma (`wgmma.mma_async.sp`)

*Generated by `tools/sparse_doc.py` from `refmodel` and `fixtures/sparse`; do not edit by hand.*
Seed lecture §16–17, checked on the H200.

## The idea: 2:4 and 1:2 structured sparsity

A sparse wgmma multiplies a structured-sparse A (64 × K) by a dense B (K × N). Of every four
consecutive elements of a row of A (a *quartet*, or chunk) at most two are nonzero (**2:4**, for
f16, bf16, e4m3, e5m2, s8, u8); for tf32 at most one of every pair (**1:2**). Only the survivors are
stored: the compressed A is 64 × K/2 and is laid out, in shared memory or in registers, exactly
like a dense operand of K/2 columns. The hardware treats B as dense even when it has zeros
(seed §16.1). Every sparse form pairs with the dense form of half its K (same types, N set):
K = 16 (tf32), 32 (f16, bf16), 64 (8-bit) — {len(__import__('refmodel').WGMMA_SP_FORMS)} forms.

Since the survivors no longer say where they came from (`[8.5, 3.2]` — index 0, 1, 2 or 3?), each
row and chunk gets a **metadata nibble**: `idx0 | idx1 << 2`, the positions (0..3) of the two kept
elements, stored as compressed columns 2c and 2c+1. For tf32 the nibble of a pair is `0b0100`
(keep element 0) or `0b1110` (keep element 1): a tf32 element is two 16-bit halves to the 2:4
hardware, so "element 1" is halves 2 and 3.

`refmodel.compress` turns a dense A with that structure into (compressed A, nibbles); a chunk
with fewer nonzeros than it keeps stores zeros at the lowest free positions (an all-zero chunk
gets `0b0100`); a chunk with too many nonzeros is an error naming its row and chunk.
`refmodel.prune_2_4` makes any A 2:4 by keeping the two largest magnitudes (ties: the lower
index; NaN counts as the largest).

## The metadata registers: sp-meta and sp-sel

Each thread passes one 32-bit `sp-meta` register (eight nibbles) and the instruction an
immediate sparsity selector `sp-sel`. For row m = 16w + 8h + g (warp w supplies rows
16w..16w+15; g = m % 8, h = (m % 16) // 8) and chunk c the nibble sits in thread 32w + lane at
bits 4p..4p+3:

| A type | sp-sel | lane | nibble p | lanes read per quad |
|---|---|---|---|---|
| f16, bf16 (K = 32), tf32 (K = 16) | 0 or 1 | 4g + (c >> 2) + 2·sp-sel | 4h + (c & 3) | 2 (sp-sel 0: lanes 0, 1; sp-sel 1: lanes 2, 3) |
| e4m3, e5m2, s8, u8 (K = 64) | 0 only | 4g + h + 2(c >> 3) | c & 7 | all 4 |

Lanes and nibbles not named are ignored: the recorder filled them with random garbage in every
job and nothing changed. Computed by `refmodel.layouts.sparse_meta.meta_holders` (T<thread>:<first bit>):

f16 / bf16 / tf32, sp-sel 0 (sp-sel 1: lanes + 2):

{_meta_table("f16", 0)}

e4m3 / e5m2 / s8 / u8:

{_meta_table("e4m3", 0)}

Draw them: `wgref layout sparse-meta --dtype f16 --sel 1 --format svg -o meta.svg` (see the
[gallery](gallery/index.html#sparse-meta_f16_sel0)).

## What the H200 computes

Recorded by `python -m gpu.record.sparse` on every sparse form, SS and RS, with random operand
families (all bit patterns incl. NaN/Inf/subnormals, integers, wide and narrow spreads),
random legal (and in some tiles any) nibbles, garbage in the unread metadata lanes, both
sp-sel values, imm-scale and scale-d; every output compared with `refmodel.wgmma_sp` on the
device, 0 mismatches; a compact sample is stored and replayed by the tests:

{_forms_table()}

1. **Kept products, one fused block.** Compressed element j of row m multiplies B's row
   `pos(m, j)`, the K index its nibble names; the K/2 kept products and C form *one* fused,
   truncated dot product — exactly the dense form of half the K with B's rows gathered per row
   of A (the dense binding of `docs/accumulator.md` carries over). The alternative of two dense
   blocks of K/4 each (`params=with_params(p, k_group=K/4)`) mispredicts: in the recorder's
   exploration 30 of 32 tiles differed.
2. **Same as dense on the decompressed A.** For legal metadata `wgmma_sp` equals one dense fused
   dot product over the whole K of the decompressed A, bit for bit, unless a B row that a row of A
   drops holds Inf/NaN (the dense 0 × Inf is NaN; the sparse hardware never forms that product).
   The extra zero products cannot move the alignment exponent: C is always a term and is either
   zero (taking the zero exponent itself) or at least the accumulator's smallest normal exponent,
   above every binding's zero exponent. `tests/test_sparse.py` checks this on every family.
3. **Any 2:4 nibble works as two indices.** `idx0 > idx1` is fine; equal indices (`0000`, `0101`,
   `1010`, `1111`, "invalid" in PTX) put both kept elements on the same B row and both products
   join the sum, deterministically. Tagged probes (B = identity, so D shows where each kept element
   went), counted per nibble with refmodel:

{_any_nibble_table()}

4. **tf32 nibbles other than `0100`/`1110`** are deterministic (repeat runs identical) but the
   element's half-words come out garbled (e.g. `0001` gives a tiny subnormal in element 0,
   `0101` element 0 slightly larger than the tag); in these probes `0110` and `1100` happened to
   act like `0100` and `1110`, and `0000`, `0010`, `1000`, `1010` gave zeros. refmodel refuses every
   tf32 nibble but `0100`/`1110` with an error. From
   `probe_05..07_any.npz` (small-integer tags) and `probe_tf32_random_any.npz` (random tags):

{_tf32_table()}

## The seed's claims (§17) and what holds

| seed | H200 / ptxas |
|---|---|
| sp-sel is 0 (T0, T1) or 1 (T2, T3) for tf32 and f16/bf16 | **holds** (ptxas: "expected to be 0 or 1") |
| sp-sel must be 0 for 8-bit, all threads contribute | **holds**: ptxas refuses 1 ("expected to be 0"); all four lanes of a quad are read |
| unused lanes may hold anything | **holds**: random garbage there changed nothing |
| one sp-meta register holds the metadata of four consecutive wgmmas; cycle an index 0,1,2,3 | **does not hold for wgmma**: for 8-bit one register holds exactly one instruction's metadata; for 16-bit/tf32 the lanes of sp-sel 0 and those of sp-sel 1 each hold one instruction's — two per register, chosen by sp-sel. The 0,1,2,3 selector is warp-level `mma.sp`'s |
| TF32 alternates "values 14 and 4" | these are the two legal tf32 *nibbles* `1110` / `0100` (keep element 1 / 0), per pair, not whole register values |
| wrong config → tensor core reads empty registers, dense or zero | a wrong sp-sel reads the other lane pair: whatever is there is used as metadata |

ptxas check (`tests/test_sparse.py::test_ptxas_accepts_exactly_the_valid_sp_sel`, nvcc 13 for
sm_90a): f16 and tf32 assemble with sp-sel 0 and 1 and are refused with 2, 3; e4m3 and s8
assemble only with 0.

## API

* `refmodel.WGMMA_SP_FORMS`, `refmodel.parse_wgmma_sp(instr)` — the 528 forms and their rules.
* `refmodel.compress(a, instr)` → `(a_compressed, meta)`; `refmodel.decompress(a_c, meta, instr)`;
  `refmodel.prune_2_4(a, instr)`; `refmodel.kept_positions(meta, instr)` — the K index of every kept element.
* `refmodel.wgmma_sp(instr, a_compressed, meta, b, c=None, *, sp_sel=0, scale_d=True, imm_scale_a=1,
  imm_scale_b=1)` — D, bit-exact; `refmodel.wgmma_sp_reference(...)` — the readable float64 formula.
* `refmodel.pack_meta(meta, dtype_a, sp_sel, fill=0)` / `unpack_meta(regs, dtype_a, sp_sel)` /
  `meta_holders(dtype_a, sp_sel)` — the (128,) sp-meta registers.
* `refmodel.wgmma_sp_registers(instr, smem, a, b_desc, meta_regs, c_regs=None, *, sp_sel=0, ...)` —
  the machine level: shared-memory image and descriptors (or A registers), sp-meta, accumulator registers.

## Worked example

{_example()}
"""
