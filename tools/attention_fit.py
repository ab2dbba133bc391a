"""Compare an attention recording (``python -m gpu.record.attention --out DIR``) with refmodel's drafts: for each
case, how many O words and LSE words each draft variant gets wrong.  A development tool for the attention
issue: it decides the drafts' open choices (FA2's three FMA contractions) from the hardware's bits.

    python tools/attention_fit.py DIR [--backend flash|flex|efficient|cudnn] [--limit N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def variants(backend: str, case: dict, opts=("max", "sum", "lse", "combine")):
    """(label, fn(q, k, v, causal)) of every draft variant of one case: FA2's open contractions (each subset of
    ``opts``) on the split count ATen picks; FlexAttention's template."""
    from refmodel.golden import attention as A

    if backend == "flash":
        ns = A.fa2_num_splits(case["B"], case["H"], case["S"], case["S"], case["D"])
        for r in range(len(opts) + 1):
            for c in itertools.combinations(opts, r):
                if "combine" in c and ns == 1:
                    continue
                yield f"splits={ns} contract=" + (",".join(c) or "none"), \
                    lambda q, k, v, causal, c=c: A.fa2_forward(q, k, v, is_causal=causal, contract=c,
                                                                     num_splits=ns)
    elif backend == "efficient":
        yield "cutlassF", lambda q, k, v, causal: A.memeff_forward(q, k, v, is_causal=causal)
    elif backend == "flex":
        mod = None
        if case.get("mod") == "relbias":
            from refmodel.numerics.promotion import fma_f32_array

            def mod(qk, sc, qi, ki):        # qk·SM_SCALE + (q - kv): one FMA (LLVM contracts it)
                return fma_f32_array(qk, np.broadcast_to(sc, qk.shape),
                                     np.broadcast_to((qi - ki).astype(np.float32), qk.shape))
        yield "template", lambda q, k, v, causal: A.flex_forward(q, k, v, is_causal=causal, score_mod=mod)
    elif backend == "cudnn":
        # a closed kernel (cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128xD): only
        # asked whether one of the open schedules happens to give its bits
        yield "as flash", lambda q, k, v, causal: A.fa2_forward(q, k, v, is_causal=causal, num_splits=1)
        yield "as efficient", lambda q, k, v, causal: A.memeff_forward(q, k, v, is_causal=causal)
        for bm, bn in ((64, 128), (128, 128), (128, 64)):
            yield f"as flex {bm}x{bn}", lambda q, k, v, causal, bm=bm, bn=bn: A.flex_forward(
                q, k, v, is_causal=causal, block_m=bm, block_n=bn)
    else:
        raise SystemExit(f"no draft for backend {backend!r}")


def fit(src: Path, backend: str, limit: int | None, families=None, opts=("max", "sum", "lse", "combine")) -> dict:
    import ml_dtypes

    import gpu.record.attention as R
    from refmodel.verify.seeded_mma import typed_matrix

    z = np.load(src / f"attention_{backend}.npz")
    report: dict = {}
    done = 0
    for i, j in itertools.product(range(len(R.CASES)), range(len(R.FAMILIES))):
        name = R.case_name(i, R.FAMILIES[j])
        if families and R.FAMILIES[j] not in families:
            continue
        if f"o_{name}" not in z.files:
            continue
        c = R.CASES[i]
        types = ("bf16", "f16") if backend == "cudnn" else R.MODELLED_DTYPES[backend]
        if (c.get("mod") and backend != "flex") or c["dtype"] not in types:
            continue                    # the types each model takes; score_mod: FlexAttention
        qc, kc, vc = R.qkv_codes(i, j)
        q, k, v = (typed_matrix(x.reshape(-1, c["D"]), c["dtype"]).reshape(x.shape) for x in (qc, kc, vc))
        o_hw = z[f"o_{name}"]           # (B, H, S, D), or its first heads of batch 0 (a big case)
        lse_hw = z[f"lse_{name}"]
        lse_hw = lse_hw.reshape(lse_hw.shape[0], lse_hw.shape[1], -1)[..., :c["S"]]
        for label, fn in variants(backend, c, opts):
            bad_o = bad_l = 0
            for b, h in itertools.product(range(o_hw.shape[0]), range(o_hw.shape[1])):
                o, lse = fn(q[b, h], k[b, h], v[b, h], c["causal"])
                bad_o += int(np.count_nonzero(o.view(o_hw.dtype) != o_hw[b, h]))
                bad_l += int(np.count_nonzero(np.asarray(lse, np.float32).view(np.uint32) != lse_hw[b, h]))
            report.setdefault(name, {})[label] = {"o_mismatch": bad_o, "lse_mismatch": bad_l,
                                                  "o_total": int(o_hw.size), "lse_total": int(lse_hw.size)}
            print(f"{name:40s} {label:24s} O {bad_o}/{o_hw.size}  LSE {bad_l}/{lse_hw.size}", flush=True)
        done += 1
        if limit and done >= limit:
            break
    del ml_dtypes
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--backend", default="flash", choices=["flash", "flex", "efficient", "cudnn"])
    ap.add_argument("--limit", type=int, default=None, help="at most N cases")
    ap.add_argument("--json", default=None, help="write the report here")
    ap.add_argument("--families", default=None, help="these families only (comma-separated)")
    ap.add_argument("--opts", default="max,sum,lse,combine", help="FA2 contractions to try (comma-separated)")
    a = ap.parse_args(argv)
    rep = fit(Path(a.dir), a.backend, a.limit, a.families.split(",") if a.families else None,
              tuple(x for x in a.opts.split(",") if x))
    if a.json:
        Path(a.json).write_text(json.dumps(rep, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
