"""docs/infer.md: schedule inference — the method (refmodel.verify.infer), the probes, the clients
inferred on the H200 (fixtures/schedules, bench/results/schedules_h200) and the limits."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _picture(breaks: list, K: int, width: int = 64) -> str:
    """K as a line of chain segments: '|' where the chain breaks."""
    line = ["-"] * width
    for b in breaks:
        line[min(width - 1, int(b * width / K))] = "|"
    return "0 " + "".join(line) + f" {K}"


def _short(s: dict) -> str:
    bits = [f"S = {s['splits']}" if s["splits"] > 1 else "no split"]
    if s["splits"] > 1:
        bits.append(f"align {s['split_align']}, {s['reduce']}")
    if s.get("promote_every"):
        bits.append(f"promotion every {s['promote_every']}" + (f", restart {s['restart_every']}" if s.get("restart_every") else ""))
    return "; ".join(bits)


def _structure_picture() -> str:
    """The structure probe on one recorded client: the observed breaks against the breaks that a few
    candidates of the space predict (refmodel.verify.infer.predicted_breaks)."""
    from refmodel.golden.schedule import Schedule
    from refmodel.verify.infer import predicted_breaks

    d = json.loads((ROOT / "bench" / "results" / "schedules_h200" / "cublas_bf16_64x64x8192.json").read_text())
    K, obs = d["K"], frozenset(d["breaks"])
    found = Schedule.from_dict(d["schedule"])
    lines = [f"{'observed (H200)':<34} " + _picture(sorted(obs), K)]
    for S, a in ((found.splits - 1, found.split_align), (found.splits, found.split_align),
                 (found.splits, 4 * found.split_align), (found.splits + 1, found.split_align)):
        c = found.replace(splits=S, split_align=a, source={})
        pb = predicted_breaks(c, K, 16)
        mark = "fits" if pb == obs else "ruled out"
        lines.append(f"{f'S = {S}, align {a}: {mark}':<34} " + _picture(sorted(pb), K))
    return "\n".join(lines)


def _fprev_pictures(S: int = 8) -> str:
    """The pair probe's cells for S = 8 chunks under four orders, computed by refmodel (what each order
    shows the probe): cell (i, j) = how many chunk sums were added after chunks i (+B) and j (-B) met."""
    import warnings

    import numpy as np

    from refmodel.golden.schedule import Schedule
    from refmodel.verify.infer import _fprev_probe_inputs

    K = 64 * S
    a, b = _fprev_probe_inputs(64, 64, K, "bf16", [(g * 64, (g + 1) * 64) for g in range(S)])
    blocks = []
    for r in ("sequential", "tree", "lanes4-strided-down", "lanes2-chunked-down"):
        s = Schedule("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16", splits=S, split_align=64, reduce=r,
                     out_dtype="bf16")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            d = np.asarray(s.run(a, b)).astype(np.float64)[:S, :S] / 2.0 ** -20
        rows = [" ".join("  ." if i == j else f"{int(round(d[i, j])):3d}" for j in range(S)) for i in range(S)]
        blocks.append([f"{r:<31}"] + [f"{x:<31}" for x in rows])
    return "\n".join("  ".join(b[k] for b in blocks[:2]) + "\n" if k == len(blocks[0]) - 1 else
                     "  ".join(b[k] for b in blocks[:2]) for k in range(len(blocks[0]))) + "\n" + \
        "\n".join("  ".join(b[k] for b in blocks[2:]) for k in range(len(blocks[0])))


def infer_page() -> str:
    import refmodel.verify.infer as I

    res = ROOT / "bench" / "results" / "schedules_h200"
    rows, pics, notes = [], [], []
    for p in sorted(res.glob("*.json")):
        d = json.loads(p.read_text())
        name = d["name"]
        kern = next((k for k in d.get("kernels", []) if "splitKreduce" not in k), "?")
        kern = kern if len(kern) <= 70 else kern[:67] + "..."
        if d.get("status") == "error":
            rows.append(f"| `{name}` | — | error: {d['error'][:80]} | — | — |")
            continue
        sched = _short(d["schedule"]) if d.get("schedule") else "none"
        eq = f" (+{len(d['equivalent'])} equivalent)" if d.get("equivalent") else ""
        ver = f"{d['verified_outputs']:,}" if d.get("schedule") else "—"
        fx = "fixtures/schedules" if d.get("schedule") else "bench/results"
        found = f"{d['status']}: {sched}{eq}" if d.get("schedule") else "none"
        rows.append(f"| `{name}` | `{kern}` | {found} | {ver} | {fx} |")
        if d.get("breaks") is not None:
            pics.append(f"{name:<36} " + _picture(d["breaks"], d["K"]))
        if d.get("status") == "none":
            why = "; ".join(f"{_short(c['schedule'])} misses {c['misses']} ({c['ruled_out_by']})" for c in d["closest"])
            notes.append(f"- `{name}`: the chain breaks were found ({len(d['breaks'])} breaks), but no reduction of "
                         f"the space reproduces the verification: closest {why}.")
        if d.get("wrong_candidate"):
            w = d["wrong_candidate"]
            notes.append(f"- Control, a deliberately wrong candidate for `{name}` ({_short(w['schedule'])}): "
                         f"{w['mismatches']:,} of {w['outputs']:,} outputs differ — rejected.")
    doc = I.__doc__.split("\n\n", 1)[1]
    return f"""# Schedule inference: ask the GPU how a GEMM sums

*Generated by `tools/gen_docs.py` from `refmodel/verify/infer.py`, `fixtures/schedules` and
`bench/results/schedules_h200` (written by `python -m gpu.record.schedules --out fixtures --dump DIR` on
the H200).*

`refmodel.verify.infer.infer_schedule(run, M=..., N=..., K=..., dtype=..., out_dtype=...)` takes any
callable that runs a GEMM on the GPU (`gpu.libraries.gemm_targets.make_target` builds them for cuBLAS,
`torch._scaled_mm`, cuSPARSELt, Triton, JAX/XLA and this repo's FP8 kernel) and returns the schedule, the
probes and what each showed, and the verification count.

{doc}

## What the chain-break probe sees

One line per client: K from 0 to its end, `|` where the probe found the tensor-core chain broken (a
split-K chunk or a float32 promotion), `-` where the chain runs on.

```text
{chr(10).join(pics)}
```

## What the structure probe sees

The candidates whose predicted breaks are exactly the observed ones survive; for cuBLAS bf16 64x64x8192
(kernel `..._splitK_...`), the observed line against four candidates of the space:

```text
{_structure_picture()}
```

## What the reduction-order probe sees

FPRev's pair probe (bf16): cell (i, j) has chunk i sum to +B, chunk j to -B and every other chunk to a
tiny e; what survives is e times the number of chunks added after i and j met, so the S x S cells draw
the reduction tree. Below, S = 8 under four orders of the space, computed by refmodel (the H200's answers
for the recorded clients are in the verification digests, not drawn):

```text
{_fprev_pictures()}
```

In order, each chunk's row counts down; a pairwise tree shows its blocks; a lane shape interleaves
(strided) or blocks (chunked) its threads before the shuffle tree.

## The clients, inferred on the H200

| client | GEMM kernel | schedule found | outputs verified (0 mismatches) | evidence |
|---|---|---|---|---|
{chr(10).join(rows)}

"found": one schedule of the space; "ambiguous": several, which give the same bits on every probe and on
every verified output (the first, the simplest, is reported; e.g. promotion every p and split-K with p-aligned
chunks added in order are the same float32 additions); "none": no schedule of the space. Every "found" and
"ambiguous" client is a fixture: its verification inputs are rebuilt from the seed and refmodel recomputes the
schedule's digest on every call (`wgref verify`, CI).

{chr(10).join(notes)}

## The space and its limits

- Candidates: split counts 1..64 with chunk alignments 16..256 (cuBLAS's `round_up(ceil(K/S), align)` rule),
  promotion every 1..16 instructions (FP8), restarts at 64..256 (Triton's BLOCK_K slices), reductions in split
  order, reverse, a pairwise tree or a GPU reduction's shape (`lanes{{T}}-{{strided|chunked}}-{{down|pairwise}}`, T a
  power of two below S: XLA's split-K reduce is one, its T depending on the shape), and the output's NaN bits
  (the cvt's own or canonical). The K order inside an instruction is not probed: one fused sum does not
  depend on it; the K order across instructions (Triton's FP8 `mma.sync` path) is outside the space.
- Promotion and split-K in order are the same float32 additions, so they are reported as equivalent, not
  told apart; so are split counts whose chunk sums are exact on every input tried.
- A break is seen only through the output rounding: the probe's values are chosen by simulating refmodel until
  a chain and a break give different bits after the output conversion (bf16 outputs use a tie of the output
  format so a 2^-20 term decides the rounding).
- Still "none", and refmodel says so instead of guessing: XLA bf16 at 64x64x8192 (every order misses one cell
  of the reduction probes), cuSPARSELt f16 segment-K (the orders that fit the probes miss special values),
  cuSPARSELt's bf16 segment-K + split-K kernel pair (its chain breaks fit no chunking of the space). cuSPARSELt
  refused `split_k=` for f16/bf16 here (`cusparseLtMatmulAlgSetAttribute(... SPLIT_K ...)`: invalid value).
- `wgref fuzz lib:TARGET --schedule s.json` then checks a stored schedule on new calls at its shape and shrinks
  the first mismatch to one row of A, one column of B and a few K positions (`gpu.fuzz.schedule`).
"""
