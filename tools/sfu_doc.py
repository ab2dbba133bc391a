"""docs/sfu.md: the special-function unit, generated from refmodel.numerics.sfu and fixtures/sfu."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

_REF = {"ex2": np.exp2, "lg2": np.log2, "rcp": lambda x: 1 / x, "rsqrt": lambda x: 1 / np.sqrt(x),
        "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tanh": np.tanh}


def _ordered(b):
    b = np.asarray(b, np.uint32)
    return np.where(b >> 31, -(b & 0x7FFFFFFF).astype(np.int64), b.astype(np.int64))


def ulp_errors(op: str, x_bits: np.ndarray, out_bits: np.ndarray) -> np.ndarray:
    """Errors in float32 ulps of outputs against the float64 reference rounded to float32, on the
    inputs where both are finite (NaN and Inf outputs left out)."""
    x = x_bits.view(np.float32).astype(np.float64)
    with np.errstate(all="ignore"):
        ref = _REF[op](x).astype(np.float32)
    out = out_bits.view(np.float32)
    ok = np.isfinite(ref) & np.isfinite(out)
    return _ordered(out_bits[ok]) - _ordered(ref.view(np.uint32)[ok])


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def sample_error(op: str, xs: np.ndarray, out: np.ndarray) -> str:
    """The largest error on recorded outputs, in the measure the manual uses for ``op``, over the
    inputs its bound covers (normal operands and results; sin/cos on |x| <= 2 pi; lg2 absolute on
    (0.5, 2))."""
    x = xs.view(np.float32).astype(np.float64)
    y = out.view(np.float32).astype(np.float64)
    with np.errstate(all="ignore"):
        ref = _REF[op](x)
    tiny = np.finfo(np.float32).tiny
    ok = np.isfinite(ref) & np.isfinite(y) & (np.abs(x) >= tiny) & (np.abs(ref) >= tiny) & (np.abs(ref) < 3e38)
    if op in ("sin", "cos"):
        m = ok & (np.abs(x) <= 2 * np.pi)
        return f"abs 2^{np.log2(np.abs(y[m] - ref[m]).max()):.1f} on [-2π, 2π] ({m.sum()} inputs)"
    if op == "lg2":
        m = ok & (x > 0.5) & (x < 2)
        r = ok & ~((x > 0.5) & (x < 2))
        return (f"abs 2^{np.log2(np.abs(y[m] - ref[m]).max()):.1f} on (0.5, 2); rel "
                f"2^{np.log2(np.abs(y[r] / ref[r] - 1).max()):.1f} elsewhere")
    e = ulp_errors(op, xs[ok], out[ok])
    return f"{int(np.abs(e).max())} ulp ({ok.sum()} inputs)"


def _manifest():
    return json.loads((ROOT / "fixtures" / "sfu" / "manifest.json").read_text())


def forms_table() -> str:
    from refmodel.numerics.sfu import SFU_FORMS
    from refmodel.numerics.sfu.sequences import SASS

    man = _manifest()
    forms = next(e for e in man["entries"] if e["kind"] == "sfu_forms")
    m = forms["meta"]
    z = np.load(ROOT / "fixtures" / "sfu" / "forms.npz")
    xs = (np.arange(m["sample_n"], dtype=np.uint64) * m["sample_stride"] % (1 << 32)).astype(np.uint32)
    rows = ["| form | SASS (ptxas 13.0, sm_90a) | PTX ISA states | H200, recorded sample: largest error vs "
            "float64 | recorded |", "|---|---|---|---|---|"]
    for f in SFU_FORMS:
        key = "".join(c if c.isalnum() else "_" for c in f.instr)
        err = "–"
        if f.type == "f32" and f.n_operands == 1 and f"sample_{key}" in z:
            err = sample_error(f.op, xs, z[f"sample_{key}"])
        if f.type == "f64":
            rec = f"all 2^32 high words × {len(m['lo_words'])} low words + {m['sample_n']} random"
        elif f.word_bits == 16:
            rec = "every input (65536)"
        elif f.n_operands == 2:
            rec = "134,217,728 pairs"
        else:
            rec = "all 2^32 inputs"
        rows.append(f"| `{f.instr}` | {_cell(SASS[f.instr])} | {_cell(f.bound)} | {err} | {rec} |")
    return "\n".join(rows)


def table_sizes() -> str:
    from refmodel.numerics.sfu import tables as T

    rows = ["| function | segments | index | coefficients | table |", "|---|---|---|---|---|"]
    for name, tab, idx in (("RCP", T.RCP, "7 fraction bits"), ("RSQ", T.RSQRT, "exponent parity + 6 fraction bits"),
                           ("SQRT", T.SQRT, "exponent parity + 6 fraction bits"), ("EX2", T.EX2, "6 fraction bits"),
                           ("LG2", T.LG2, "6 fraction bits"), ("SIN / COS", T.SIN, "6 bits of the quadrant's fraction"),
                           ("TANH", T.TANH[:, 3:], "0-4 fraction bits per binade of [2^-8, 8)")):
        bits = [int(np.abs(tab[:, j]).max()).bit_length() for j in range(3)]
        rows.append(f"| {name} | {len(tab)} | {idx} | A {bits[0]}, B {bits[1]}, C {bits[2]} bits (+ sign) | "
                    f"{len(tab) * sum(b + 1 for b in bits) // 8} bytes |")
    return "\n".join(rows)


def error_histograms(write: bool) -> str:
    """Per-form error histograms in ulps on every input of [1, 2) (sin/cos: [0.5, 1)), from the model."""
    from refmodel.numerics.sfu.unit import sfu

    ops = [("ex2.approx.ftz.f32", 0x3F800000), ("lg2.approx.ftz.f32", 0x3F800000), ("rcp.approx.ftz.f32", 0x3F800000),
           ("rsqrt.approx.ftz.f32", 0x3F800000), ("sqrt.approx.ftz.f32", 0x3F800000),
           ("sin.approx.ftz.f32", 0x3F000000), ("cos.approx.ftz.f32", 0x3F000000), ("tanh.approx.f32", 0x3F000000)]
    rows = ["| form | inputs | −3 | −2 | −1 | 0 | +1 | +2 | +3 | beyond | correctly rounded |", "|---" * 11 + "|"]
    hists = []
    for instr, start in ops:
        x = (start + np.arange(1 << 23)).astype(np.uint32)
        e = ulp_errors(instr.split(".")[0], x, sfu(instr, x))
        counts = [int(np.count_nonzero(e == k)) for k in range(-3, 4)]
        beyond = int(e.size - sum(counts))
        lo = f"{x[0].view(np.float32):g}"
        rows.append(f"| `{instr}` | [{lo}, {2 * float(x[0].view(np.float32)):g}) | " + " | ".join(map(str, counts))
                    + f" | {beyond} | {100 * counts[3] / e.size:.1f} % |")
        hists.append((instr, e))
    if write:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(2, 4, figsize=(14, 6))
        for ax, (instr, e) in zip(axes.flat, hists):
            lim = int(min(max(3, np.abs(e).max()), 140))
            ax.hist(np.clip(e, -lim, lim), bins=np.arange(-lim - 0.5, lim + 1.5, max(1, lim // 20)), color="#4477aa")
            ax.set_title(instr, fontsize=9)
            ax.set_yscale("log")
            ax.set_xlabel("ulps from the float64 reference")
        fig.suptitle("SFU errors on every input of one binade (model, bit-identical to the H200: fixtures/sfu)")
        fig.tight_layout()
        fig.savefig(ROOT / "docs" / "img" / "sfu_errors.png", dpi=80)
        plt.close(fig)
    return "\n".join(rows)


def spellings_table() -> str:
    from refmodel.numerics.sfu.spellings import SPELLINGS
    from refmodel.numerics.sfu.unit import spelled_binary, spelled_unary

    try:
        from refmodel.numerics.sfu.spelled import SEQUENCE
    except ImportError:
        SEQUENCE = {}
    rows = ["| spelling | compiled to (SASS, sm_90a) | model |", "|---|---|---|"]
    for sp in SPELLINGS:
        modelled = (spelled_unary(sp.name) if sp.arity == 1 else spelled_binary(sp.name)) is not None
        rows.append(f"| `{sp.name}` | {_cell(SEQUENCE.get(sp.name, '(recorded; not yet described)'))} | "
                    f"{'modelled; replayed by wgref verify' if modelled else 'not modelled yet'} |")
    return "\n".join(rows)


def sfu_page(write_images: bool = False) -> str:
    import refmodel.numerics.sfu.mufu as M

    man = _manifest()
    total = sum(e["cases"] for e in man["entries"])
    prov = man["entries"][0]["provenance"]
    doc = M.__doc__.split("\n\n", 1)[1]
    return f"""# The special-function unit (SFU): every approximate math instruction, bit for bit

*Generated by `tools/gen_docs.py` from `refmodel.numerics.sfu` and `fixtures/sfu`.*

`refmodel.sfu(op, x, y=None)` returns what the H200 returns for the 30 sm_90a forms of `ex2`, `lg2`, `rcp`,
`rsqrt`, `sqrt`, `sin`, `cos`, `tanh` (`.approx`) and `div` (`.approx`, `.full`), f32 / f64 / f16 / bf16 and
their `x2` packings: `refmodel.sfu("ex2.approx.ftz.f32", x)`.  `wgref sfu OP X [Y]` explains one evaluation
(the fixed-point operand, the table segment and its coefficients, the squarer, the sum, the result and its
error).  The recordings hold {total:,} hardware outputs ({prov['device']}, driver {prov['driver']},
CUDA {prov['cuda_runtime']}, {prov['date'][:10]}): every input of every unary form as chunk digests,
every 16-bit input raw, the div forms on 134,217,728 structured pairs each.  `wgref verify` replays them
(every sample; the 2^32 sweeps on 4 of 256 chunks per form, the spellings' on 1, the pairs on 8 of 32 chunks:
about 2 minutes on two cores); `wgref verify --sfu-exhaustive` recomputes every chunk (about 100 minutes for
the forms on two cores; `bench/results/sfu/verify_exhaustive.txt`: 120,259,706,880 outputs, 0 mismatches);
CI replays one chunk per sweep and 2 pair chunks.

## The forms, what ptxas makes of them, what the manual promises

{forms_table()}

The MUFU unit itself flushes subnormal operands and results (except TANH); the non-`.ftz` f32 forms are
ptxas's wrappers that scale such operands into range and undo the scaling (column 2).  The error column is
measured on the recorded outputs (16384 inputs spread over all bit patterns; those with normal operands and
results) against the float64 result, in the measure the manual uses.

## How the unit computes

{doc}
The coefficient tables (`refmodel/numerics/sfu/tables.py`) were solved from the H200's outputs by
`tools/sfu_fit.py`: every output pins the segment's quadratic to an integer interval, and each segment's
(A, B, C) is the unique integer solution of those inequalities (the tool refuses a segment with none or
several).  Sizes:

{table_sizes()}

## What the H200 does that the leads did not say

* **The tables are the G80's.**  RCP, RSQ, EX2, LG2 and SIN/COS, solved from H200 outputs, are entry for
  entry the ROM that envytools (`nvhw/sfu_tab.c`, 2015) read out of a 2006 G80.  Since Volta the old
  range-reduction instruction (RRO) is gone: MUFU.EX2 converts its float operand to the same 7.23 fixed point
  itself (truncating), and MUFU.SIN/COS take revolutions: ptxas multiplies by 1/(2π) with `FMUL.RZ`.
* **MUFU.SQRT** has its own 128-segment table (none in the leads): A shifted by 15, B up to 17 bits, a
  rounding constant 0x7fff and a shift of 17.  It is not `x * rsqrt(x)`.
* **MUFU.TANH** (51 segments over [2^-8, 8), 0-4 index bits per binade, the last 6 − index bits of the
  fraction unused, the result truncated): subnormals pass through unchanged, |x| ≥ 8 gives ±1.
  `tanh.approx.f16/.bf16` are the f32 unit's result truncated to 16 bits (rounding to nearest would miss
  14730 f16 and 2086 bf16 inputs).
* **`ex2.approx.f16`** truncates the f32 unit's result to f16, and overflow gives +Inf (not 65504).
* **`div.full.f32` has no Newton step**: it scales huge and tiny divisors and multiplies `a` by MUFU.RCP of
  the divisor, hence its 2 ulp; `div.approx.f32` is the same without the scaling of huge divisors.
* **`FMUL.FTZ` flushes on the unrounded product**: in `div.approx.ftz.f32` a quotient just below 2^-126
  that rounds up to 2^-126 comes out 0.
* **`sin.approx.f32` is `sin.approx.ftz.f32`**: ptxas emits the same two instructions, so a subnormal x
  gives ±0 (and cos gives 1), although the manual says the non-`.ftz` forms support subnormals.
* **`lg2.approx(2^k)` is not k** for k ≠ 0: the first segment's A is 4, not 0; only 1.0 is special-cased.
* **RCP64H / RSQ64H** (`rcp.approx.ftz.f64`, `rsqrt.approx.ftz.f64`) are the f32 polynomials on the top 20
  fraction bits of the high word, truncated to 20 bits, low word 0; `rsqrt.approx.f64` adds one float64
  correction step (DMUL/DFMA) and a slow path for zero, subnormal, negative, Inf and NaN.
* NaN results are the canonical `0x7fffffff` (16-bit forms: `0x7fff`).

## Error histograms

Errors in ulps against the float64 reference rounded to float32, on every input of one binade (the model;
it is bit-identical to the H200 on all 2^32 inputs of these forms, fixtures/sfu):

{error_histograms(write_images)}

![SFU error histograms](img/sfu_errors.png)

## Compiler spellings

What CUDA (`nvcc -arch=sm_90a` with its defaults, and with `--use_fast_math`) and Triton 3.6 make of the
functions people write, read from the SASS of the recorded kernels; `refmodel.numerics.sfu.unit.spelled(name, x)`
evaluates each.  Their H200 outputs are recorded like the forms' (all 2^32 inputs as chunk digests, the binary
ones on the div pair sets) and `wgref verify` replays them.  The CUDA spellings are built with nvcc: NVRTC 13.0
made a byte-identical cubin with and without `--use_fast_math` (`bench/sfu_nvrtc_fastmath_probe.py`, result in
`bench/results/sfu/nvrtc_fastmath_probe_h200.txt`), although the PTX it printed for the same options was the
fast-math PTX.

{spellings_table()}
"""
