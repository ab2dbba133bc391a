"""The GPU port of the accumulator on the H200's CUDA cores: the per-output kernel (wgref_wgmma_model, one
thread per output: FormRunner.model_per_output, or FormRunner.model where that is missing) vs the tiled chain kernel (wgref_model_chain: one CTA
per tile and column block, operands decoded once into shared memory) vs the tensor core itself
(FormRunner.hardware), on the fuzz engine's generated batches (every input family, round robin).

    PYTHONPATH=$PWD python bench/bench_port.py [--tiles 8192] [--reps 5] [--json PATH]

Prints G outputs/s of each and the ratios; checks the new kernel against the old one on the benched batch
(mismatching outputs counted) and, for information, both against the hardware.  Also times the new kernel
on a chain of 4 steps (G step-outputs/s).  Goal: >= 40 G outputs/s for e4m3 m64n256k32.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu_timing import median_event_seconds

FORMS = ("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3",
         "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16",
         "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32")


#: source variants of the new kernel timed with --variants (tuning experiments; "base" is SOURCE as is)
VARIANTS = {
    "base": [],
    "packed": [("#define WC_PACKED 0", "#define WC_PACKED 1")],
    "hoist": [("#define WC_HOIST 0", "#define WC_HOIST 1")],
    "packed_hoist": [("#define WC_PACKED 0", "#define WC_PACKED 1"), ("#define WC_HOIST 0", "#define WC_HOIST 1")],
    "sb4": [("#define WC_SB 8", "#define WC_SB 4")],
    "sb16": [("#define WC_SB 8", "#define WC_SB 16")],
    "kloop2": [('#define WC_KLOOP _Pragma("unroll 1")', '#define WC_KLOOP _Pragma("unroll 2")'),
               ("WC_KERNEL(wgref_model_chain, false, unsigned int, 3)", "WC_KERNEL(wgref_model_chain, false, unsigned int, 2)")],
    "minb2": [("WC_KERNEL(wgref_model_chain, false, unsigned int, 3)", "WC_KERNEL(wgref_model_chain, false, unsigned int, 2)")],
    "minb4": [("WC_KERNEL(wgref_model_chain, false, unsigned int, 3)", "WC_KERNEL(wgref_model_chain, false, unsigned int, 4)")],
    "grp2": [("if (j % 4 == 3) dep = res;", "if (j % 2 == 1) dep = res;")],
    "grp8": [("if (j % 4 == 3) dep = res;", "if (j % 8 == 7) dep = res;")],
}


def bench_form(instr: str, tiles: int, reps: int, seed: int = 1, variants=("base",)) -> dict:
    import cupy as cp

    from gpu.kernels.device_model import launch_model_chain
    from gpu.kernels.form_runner import FormRunner
    from refmodel.verify.seeded import tile_families
    from refmodel.wgmma_forms import parse_wgmma

    form = parse_wgmma(instr)
    run = FormRunner(form, 1, 1)
    fams = cp.asarray(tile_families(seed, 0, tiles))
    x = run.generate(seed, 0, fams)
    T, K, N = tiles, form.k, form.n

    def codes():
        a, b = x["a"], x["b"]
        if form.dtype_a == "tf32":
            a = a >> run.tf32_shift
        if form.dtype_b == "tf32":
            b = b >> run.tf32_shift
        return cp.ascontiguousarray(a).reshape(T, 1, 64, K), cp.ascontiguousarray(b).reshape(T, 1, K, N)

    def new(chain: int = 1, mod=None):
        a, b = codes()
        if chain > 1:
            a = cp.ascontiguousarray(cp.broadcast_to(a, (T, chain, 64, K)))
            b = cp.ascontiguousarray(cp.broadcast_to(b, (T, chain, K, N)))
        out = cp.empty((T, 64, N), cp.uint32)
        launch_model_chain(mod or run.model_mod, a, b, None, x["c"], out, T, chain, 64, K, K, N, run.tables, run.pv,
                           F=run.p.F)
        return out.reshape(T, -1)

    outputs = T * 64 * N
    old = getattr(run, "model_per_output", None) or run.model     # FormRunner.model is the new kernel once integrated
    t_old, d_old = median_event_seconds(cp, lambda: old(x, True), reps)
    t_new, d_new = median_event_seconds(cp, new, reps)
    t_hw, d_hw = median_event_seconds(cp, lambda: run.hardware(x, True), reps)
    t_ch, _ = median_event_seconds(cp, lambda: new(4), max(1, reps // 2))
    mism = int(cp.count_nonzero(d_new != d_old))
    var = {}
    for v in variants:
        if v == "base":
            continue
        from gpu.kernels import device_model
        from gpu.kernels.runtime import compile_module

        src = device_model.SOURCE
        for o, n in VARIANTS[v]:
            assert o in src, (v, o)
            src = src.replace(o, n)
        mod = compile_module(src)
        tv, dv = median_event_seconds(cp, lambda mod=mod: new(1, mod), reps)
        var[v] = {"G_outputs_per_s": outputs / tv / 1e9, "mismatches_vs_old": int(cp.count_nonzero(dv != d_old))}
        print(f"   variant {v}: {var[v]}")
        del dv
    hw = d_hw.astype(cp.uint32)
    res = {"instr": instr, "tiles": T, "outputs": outputs,
           "old_s": t_old, "new_s": t_new, "hw_s": t_hw, "new_chain4_s": t_ch,
           "old_G_outputs_per_s": outputs / t_old / 1e9, "new_G_outputs_per_s": outputs / t_new / 1e9,
           "hw_G_outputs_per_s": outputs / t_hw / 1e9, "new_chain4_G_step_outputs_per_s": 4 * outputs / t_ch / 1e9,
           "new_products_per_s": outputs * K / t_new,
           "speedup_new_over_old": t_old / t_new, "new_over_hw_throughput": t_hw / t_new,
           "new_vs_old_mismatches": mism,
           "old_vs_hw_mismatches": int(cp.count_nonzero(d_old != hw)),
           "new_vs_hw_mismatches": int(cp.count_nonzero(d_new != hw)), "variants": var}
    del d_old, d_new, d_hw, hw
    cp.get_default_memory_pool().free_all_blocks()
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", type=int, default=8192, help="tiles per batch (for N = 256; scaled up for smaller N)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--forms", default=",".join(FORMS), help="comma-separated instructions")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--variants", default="base", help="comma-separated source variants of the new kernel to time "
                    f"as well ({', '.join(VARIANTS)})")
    args = ap.parse_args(argv)
    from gpu.kernels.runtime import device_info

    info = device_info()
    print(f"device: {info['device']}  driver {info.get('driver')}  cupy {info['cupy']}  nvrtc {info['nvrtc']}")
    results = []
    for instr in args.forms.split(","):
        n = int(instr.split(".m64n")[1].split("k")[0])
        r = bench_form(instr, args.tiles * max(1, 256 // n), args.reps, variants=args.variants.split(","))
        results.append(r)
        print(f"{instr.split('aligned.')[1]:28s} old {r['old_G_outputs_per_s']:6.2f}  new {r['new_G_outputs_per_s']:6.2f}"
              f"  hw {r['hw_G_outputs_per_s']:6.2f} G outputs/s   new/old x{r['speedup_new_over_old']:.2f}"
              f"  new/hw {r['new_over_hw_throughput']:.2f}   chain4 {r['new_chain4_G_step_outputs_per_s']:6.2f}"
              f"   products/s {r['new_products_per_s']:.3g}   new!=old {r['new_vs_old_mismatches']}"
              f"  (old!=hw {r['old_vs_hw_mismatches']}, new!=hw {r['new_vs_hw_mismatches']})")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"device": info, "results": results}, indent=1))
    return 1 if any(r["new_vs_old_mismatches"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
