"""docs/triton.md: the Triton golden model, generated from fixtures/triton and refmodel.golden."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _natural_order_misses(path: Path) -> tuple[int, int]:
    """Mismatches of a recorded FP8 imp=0 fixture against f16 wgmma k16 chained in the natural K order."""
    import ml_dtypes
    import numpy as np

    import refmodel
    from refmodel.dtypes import bits_of

    with np.load(path) as z:
        a = z["a"].view(ml_dtypes.float8_e4m3fn).astype(np.float16)
        b = z["b"].view(ml_dtypes.float8_e4m3fn).astype(np.float16)
        d = z["d"]
    got = refmodel.gemm(a, b, instr="wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16")
    return int(np.count_nonzero(bits_of(got) != d)), int(d.size)


def _lowering_section(entries: list) -> str:
    import importlib

    L = importlib.import_module("refmodel.golden.triton_lowering")   # the module (the package exports the function)

    survey = json.loads((ROOT / "docs" / "data" / "triton_lowering_survey.json").read_text())
    rows = survey["configs"]
    ok = [r for r in rows if "error" not in r]
    table = L.__doc__.split("\n\n", 2)[2].split("\n\nWhat it means")[0]
    meaning = L.__doc__.split("What it means for the bits: ", 1)[1].split("\n\nEstablished")[0]
    domain = L.__doc__.split("\n\nEstablished", 1)[1].strip()
    fx = []
    for e in entries:
        m, p = e["meta"], e["provenance"]
        fx.append(f"| {e['file']} | {len(m['configs'])} | {', '.join(m['families'])} | "
                  f"{', '.join(sorted({' x '.join(str(x) for x in (c.get('shape') or m['shape'])) for c in m['configs']}))} | "
                  f"{e['cases']:,} | "
                  f"{p['device']}, Triton {p['triton']}, torch {p['torch']} |")
    return f"""## Which instructions: the configuration decides (Triton {L.TRITON_VERSION})

Triton does not always use wgmma. `refmodel.golden.triton_lowering(dtype_a, dtype_b, block_m=, block_n=,
block_k=, num_warps=, ...)` says what it emits, and `triton_matmul` follows it:

```
{table}
```

What it means for the bits: {meaning}

This is what made small-tile FP8 silently wrong before: `torch.compile(mode="max-autotune")` picks Triton
templates with BLOCK_M 16 or 32 and 2 warps for small FP8 GEMMs, which run the f16 `mma.sync` path, while the
model assumed wgmma. Now an FP8 call without its configuration is refused in one sentence.

Established{(' ' + domain) if not domain.startswith('for') else ' ' + domain}

Evidence: the PTX of {len(rows)} compiled configurations (`python -m gpu.record.triton_lowering --survey
docs/data/triton_lowering_survey.json`; {len(rows) - len(ok)} refused by Triton itself: shared memory, FP8
with BLOCK_K 16), every one named by the rule (`tests/test_triton_lowering.py`), and recordings of whole
outputs on seeded inputs in four families (narrow, cancelling pairs, wide exponents, NaN/Inf), replayed by
CI with 0 mismatches (`wgref verify --feature triton`):

| fixture | configurations | families | M x K x N | outputs | recorded on |
|---|---:|---|---|---:|---|
{chr(10).join(fx)}

## A bit-exact Triton interpreter

Triton's own interpreter (`TRITON_INTERPRET=1`) runs kernels on the CPU with numpy and never gives the GPU's
bits: its `tl.dot` is `np.matmul`, its FP8 and bf16 casts truncate or round half up, its f32 arithmetic keeps
NaN payloads. `wgref.triton.interpret()` patches it with the H200's numerics:

```python
import os; os.environ["TRITON_INTERPRET"] = "1"     # before the first `import triton`
import triton, triton.language as tl, wgref.triton

@triton.jit
def kernel(...): ...

with wgref.triton.interpret():
    kernel[grid](a, b, c, ..., BM=32, BN=64, BK=64, num_warps=4)   # numpy arrays (ml_dtypes) or CPU tensors
```

(or the `wgref_triton` pytest fixture). Every `tl.dot` is `refmodel.golden.triton_lowering.tl_dot` — the
path above for the dot's block shapes and the launch's `num_warps` — and `acc += tl.dot(a, b)` is folded where
Triton folds it; f32 `+ - *` and `tl.fma` are the GPU's (one rounding, NaN 0x7FFFFFFF); `.to()` among f32,
f16 and bf16 is `cvt.rn`. `tl.exp`, `exp2`, `log`, `log2`, `sin`, `cos`, `sqrt`, `rsqrt`, `sqrt_rn`, `/`,
`fdiv` and `div_rn` are the instruction sequences Triton 3.6 compiles them to on sm_90 — the `triton:`
spellings of `refmodel.sfu` (`docs/sfu.md`), recorded on the H200 over all 2^32 inputs (134M adversarial pairs
for the divisions) — and `tl.sigmoid` is their composition; a float32 multiply feeding an add or a subtract is
the `fma.rn.f32` Triton's compiler contracts it to (recorded: `fixtures/triton/elementwise.npz`, 7 expressions
on 4,194,304 adversarial pairs each, `wgref verify --feature triton`). What it cannot run bit-exactly is
refused in one sentence: float reductions and scans (`tl.sum`, `tl.max`, `tl.cumsum` over floats: the order
Triton compiles for the tensor's layout is not modelled yet; over integers they run), `tl.erf` and other
libdevice calls, float min/max, f16 multiply-adds, FP8 casts in the kernel body.

`python -m wgref.triton replay` runs the very kernel sources recorded on the GPU in the patched interpreter
and compares each whole output with the H200's:

* `gpu.libraries.triton`'s lowering kernel on every configuration and family of the fixtures above:
  {_replay_summary()}; Triton's own interpreter (`--plain`, on numpy arguments) gets
  {_replay_summary(plain=True)};
* the recorded `torch.compile(mode="max-autotune")` calls (`docs/inductor.md`: `_scaled_mm` tensor-wise and
  row-wise, mm, addmm, bmm, mm + relu, f16 and tf32), their Triton template taken out of the source
  `torch._inductor.utils.run_and_get_code` returned (`template_kernel`, `interpret_template`) and run without
  torch: {_replay_summary(inductor=True)};
* the special-function kernels of the SFU recordings (`gpu.libraries.triton_sfu`: `tl.exp(x)` ... `x / y`)
  on their recorded samples: {_replay_summary(which="spellings")};
* the multiply-add kernels of `fixtures/triton/elementwise.npz` on their 4M pairs:
  {_replay_summary(which="elementwise")}.
"""


def _replay_summary(plain: bool = False, inductor: bool = False, which: str = "") -> str:
    """The counts ``python -m wgref.triton replay`` printed, as stored in docs/data/triton_interpret.json
    (tests/test_triton_interpret.py checks them against a fresh run)."""
    d = json.loads((ROOT / "docs" / "data" / "triton_interpret.json").read_text())
    if inductor or which:
        r = d["inductor" if inductor else which]
        unit = {"spellings": "spellings", "elementwise": "kernels"}.get(which, "runs (every call and family)")
        return f"{r['runs']} {unit}, {r['runs'] - r['differ']} bit-identical, {r['differ']} differ"
    r = d["plain" if plain else "patched"]
    if plain:
        return f"{r['differ']} of {r['runs']} runs ({', '.join(r['families'])} family) differ"
    return (f"{r['runs']} runs ({len(r['families'])} families), {r['runs'] - r['differ']} bit-identical, "
            f"{r['differ']} differ")


def triton_page() -> str:
    import refmodel.golden.triton as T

    man = json.loads((ROOT / "fixtures" / "triton" / "manifest.json").read_text())
    rows = []
    lowering = [e for e in man["entries"] if e["kind"] == "triton_lowering"]
    man = {**man, "entries": [e for e in man["entries"] if e["kind"] == "triton_matmul"]}
    for e in man["entries"]:
        m, p = e["meta"], e["provenance"]
        rows.append(f"| {e['file'][:-4]} | {m['dtype']} | {m['BK']} | {m['warps']} | {m['input_precision'] or '–'} | "
                    f"{m['imp'] if m['imp'] is not None else ('None (default)' if m['dtype'] in ('e4m3', 'e5m2') else '–')} | {m['out']} | "
                    f"{m['recorded_shape'][0]}x{m['recorded_shape'][2]}x{m['recorded_shape'][1]} | "
                    f"{e['cases']:,} | Triton {p['triton']} |")
    doc = T.__doc__.split("\n\n", 1)[1]
    natural = []  # the e4m3 / f32-output imp=0 fixtures replayed in the natural K order
    for e in man["entries"]:
        m = e["meta"]
        if m["dtype"] == "e4m3" and m["imp"] == 0 and m["out"] == "f32":
            natural.append(_natural_order_misses(ROOT / "fixtures" / "triton" / e["file"]))
    miss = " and ".join(f"{n:,}" for n, _ in natural)
    total = natural[0][1] if natural else 0
    return f"""# Golden model: the standard Triton matmul on Hopper

*Generated by `tools/gen_docs.py` from `refmodel.golden.triton` and `fixtures/triton`.*

`refmodel.golden.triton_matmul(a, b, *, block_k, block_m=None, block_n=None, num_warps=None, num_stages=None,
pattern="dot_acc", input_precision="tf32", max_num_imprecise_acc=None, out_dtype=numpy.float32,
acc_dtype=numpy.float32)` returns, bit for bit, what the textbook Triton kernel computes on the H200:

{doc}
{_lowering_section(lowering)}
## Evidence

`python -m gpu.record.triton --explore DIR` runs the kernel on an H200 for every configuration
(256 x 256 x 512, inputs N(0,1) x 2^[-4,4], keeping the PTX); `python -m gpu.record.triton --store DIR`
checks the whole output against `triton_matmul` and keeps 64 rows x 64 columns of each reproduced
configuration (with the A rows and B columns they depend on), replayed by CI:

| fixture | inputs | BLOCK_K | warps | input_precision | max_num_imprecise_acc | out | recorded M×N×K | outputs kept | library |
|---|---|---|---|---|---|---|---|---:|---|
{chr(10).join(rows)}

What this means for accuracy: Triton's FP8 `tl.dot` is refmodel's FP8 wgmma chain (13-bit
accumulator, `docs/accumulator.md`) with a float32 promotion every `max_num_imprecise_acc` K elements
(and at the end of every BLOCK_K slice) — the same cure DeepGEMM and cuBLAS's precise mode use, at the
interval you choose.  **Triton's default on sm_90 does not promote at all**: with
`max_num_imprecise_acc` left out (2**30) the whole K is one 13-bit-aligned wgmma chain, as in the
`fp8_*none*` recordings (no `add.f32` in their PTX); an explicit value above BLOCK_K does not compile.
With `max_num_imprecise_acc=0` Triton leaves wgmma altogether: it widens FP8 to f16 (exact) and runs
`mma.sync.m16n8k16`, whose sums on the H200 are those of wgmma k16 f16 (25-bit aligned sum, f32
accumulator) — but in a K order of its own: in every 32-wide K window the first instruction takes
k ≡ 0, 1 (mod 4) and the second k ≡ 2, 3 (mod 4).  The order is visible: in the natural K order the
{len(natural)} e4m3 fixtures with a float32 output miss in {miss} of their {total:,} outputs (the bf16 output
of the e5m2 one hides it; `tests/test_golden.py::test_the_fp8_k_order_is_what_the_h200_recordings_need`).
`input_precision="tf32x3"` is three tf32 wgmma chains per BLOCK_K (small·big, big·small, then big·big)
added into the f32 accumulator; `"ieee"` is one correctly rounded FMA per K element, in K order.
"""
