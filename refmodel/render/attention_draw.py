"""Text of one attention output element's online softmax, step by step (``wgref explain-attention``): which key
blocks it summed and in what order, the running max and its rescale, the exponentials and their rounding to
the MMA type, the row sum's lanes, the accumulator before and after each P·V chain, and the end (the sum, the
normalisation, the final rounding, the LSE).  Reads a :class:`refmodel.golden.attention.Trace`."""

from __future__ import annotations

import numpy as np

#: what each backend's steps compute, and where they round (one line each)
RECIPES = {
    "flash": [
        "S = Q·Kᵀ: a chain of mma.sync m16n8k16 fused dots over the head dim (float32, unscaled)",
        "m = max(m_prev, max_k S) (FMNMX: a NaN operand is skipped)",
        "rescale r = exp2f(rn((m_prev − m)·c)), c = rn(scale·log2 e); row sum and O multiplied by r",
        "p = exp2f(rn(rn(S·c) − rn(m·c))) (MUFU.EX2 with the denormal wrapper; no FFMA)",
        "row sum: each quad lane adds its own columns in order; a later block starts with FFMA(sum, r, p0)",
        "O += rn16(p)·V: p rounded to the input type (F2FP, RN), a chain of k16 fused dots over the keys",
        "end: sum = (s0 + s2) + (s1 + s3); o = rn16(O · rcp.rn(sum)); lse = FFMA(m, scale, __logf(sum))",
    ],
    "flex": [
        "S = rn(Q·Kᵀ · SM_SCALE): a wgmma chain of k16 fused dots, then mul.f32 (a score_mod's qk·SM_SCALE ± x: "
        "one FMA); out-of-range and masked -> -inf",
        "t = rn(S·RCP_LN2); m = max(m_prev, max_k t)",
        "alpha = ex2.approx(m_prev − m); p = ex2.approx(rn(t − m)) where a tl.where (boundary, mask) stands between, "
        "else ex2.approx(FMA(S, RCP_LN2, −m))",
        "l = FMA(l, alpha, tl.sum(p)) (tl.sum: each lane in order, then the quad butterfly)",
        "O = O·alpha, then O += rn16(p)·V (a wgmma chain of k16 fused dots)",
        "end: o = rn16(O / l) (div.full); lse = rn(rn(m + lg2.approx(l)) · ln 2)",
    ],
    "efficient": [
        "S = Q·Kᵀ: a chain of mma.sync m16n8k8 fused dots over the head dim (float32)",
        "u = rn(rn(scale·S)·log2 e) (two FMULs; the causal mask between them)",
        "m: each thread's fmaxf over its 8 columns per 32-column warp tile, merged by shared-memory atomicMax",
        "when m grew: s = rn(s·exp2f(m_old − m)), O = rn(O·exp2f(m_old − m)) (after the first block)",
        "p = exp2f(rn(u − m)); s += per-warp-tile sums (each lane from 0 in order, quad (t0 + t1) + (t2 + t3))",
        "O += rn16(p)·V: a chain of k8 fused dots over the keys (whole 32-key steps)",
        "end: o = rn16(O · rcp.rn(s)); lse = rn(m / log2 e) + logf(s)",
    ],
}


def _f(x) -> str:
    """A float32 value exactly: decimal and its bits."""
    v = np.float32(x)
    return f"{float(v):.9g} (0x{int(v.view(np.uint32)):08x})"


def render_attention_trace(trace, *, backend: str, shape: tuple[int, int, int], causal: bool, dtype: str,
                           label: str = "") -> str:
    """The text of one traced output element ``o[trace.row, trace.col]``."""
    Sq, Sk, D = shape
    lines = [f"o[{trace.row}, {trace.col}] of the {backend} backend{label}: Sq {Sq}, Sk {Sk}, D {D}, {dtype}, "
             f"{'causal' if causal else 'not causal'}", ""]
    lines += ["what each step computes (and where it rounds):"] + [f"  {r}" for r in RECIPES[backend]] + [""]
    for st in trace.steps:
        if "split" in st:
            lines.append(f"split {st['split']}: key blocks {st['blocks'][0]}..{st['blocks'][1]} "
                         "(its own max, sum and O; merged at the end)")
            continue
        s, p, pr = st["s"], st["p"], st["p_rounded"]
        live = np.isfinite(s) | np.isnan(s)
        lines.append(f"key block {st['block']} (keys {st['cols'][0]}..{st['cols'][1]}): {int(live.sum())} scores "
                     f"in play, {st['masked']} masked to -inf")
        if st.get("m_prev") is not None:
            lines.append(f"  running max {_f(st['m_prev'])} -> {_f(st['m'])}")
        else:
            lines.append(f"  running max (first block) {_f(st['m'])}")
        if st.get("rescale") is not None:
            lines.append(f"  rescale factor {_f(st['rescale'])}")
        with np.errstate(invalid="ignore"):
            changed = int(np.count_nonzero((pr != p) & ~np.isnan(p)))
            top = np.argsort(-np.nan_to_num(p, nan=-1.0))[:3]
        lines.append(f"  p: {int(np.count_nonzero(p))} nonzero, largest at keys "
                     + ", ".join(f"{st['cols'][0] + int(t)} ({_f(p[t])})" for t in top)
                     + f"; {changed} of them changed by the rounding to {dtype}")
        if len(st["sum_after"]) == 1:
            lines.append(f"  l: {_f(st['sum_before'][0])} -> {_f(st['sum_after'][0])} (this block's tl.sum lanes: "
                         + ", ".join(_f(x) for x in st["lanes"]) + ")")
        else:
            lines.append("  row-sum lanes after: [" + ", ".join(_f(x) for x in st["sum_after"]) + "]")
        contrib = [(st["cols"][0] + int(t), float(pr[t]) * float(st["v"][t])) for t in np.flatnonzero(pr)]
        lines.append(f"  O[{trace.row}, {trace.col}]: {_f(st['acc_before'])} (after the rescale) + "
                     f"{len(contrib)} products p·v -> {_f(st['acc_after'])}")
    e = trace.end
    lines.append("")
    lines.append(f"end ({e.get('kernel', backend)}):")
    if "split_out" in e:
        lines.append("  per split O (normalised, float32): " + ", ".join(_f(x) for x in e["split_out"]))
        lines.append("  per split LSE: " + ", ".join(_f(x) for x in e["split_lse"]))
    if "total" in e and len(e.get("lanes", ())) == 0:
        lines.append(f"  l {_f(e['total'])}")
    elif "total" in e:
        lines.append(f"  row sum {_f(e['total'])} from lanes [" + ", ".join(_f(x) for x in e["lanes"]) + "]")
    if "acc" in e:
        lines.append(f"  O accumulator {_f(e['acc'])}")
    lines.append(f"  normalised (float32) {_f(e['out_f32'])} -> rounded to {dtype}: {e['out']!r}")
    lines.append(f"  lse {_f(e['lse'])}")
    return "\n".join(lines) + "\n"
