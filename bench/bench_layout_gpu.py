"""Benchmark (on the H200): the GPU layout fuzzer (gpu/fuzz/gpu_layout.py) per variant of
refmodel.verify.layout_cases.WGMMA_VARIANTS — G outputs/s (D registers compared) of each stage
(generate, hardware, model, compare) timed alone on the same batch, and end to end (a campaign of
that variant) — next to the CPU engine (gpu.fuzz.cpu_engine.fuzz_layout: cases and refmodel on
the host, the hardware on the GPU) in the same run.  Goal: >= 1 G outputs/s end to end.

    python bench/bench_layout_gpu.py [--batch 4096] [--seconds 3] [--cpu-seconds 10] [--json PATH]
"""

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_timing import mean_wall_seconds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=4096, help="cases a batch for an n256 variant (narrower: more)")
    ap.add_argument("--seconds", type=float, default=3.0, help="end-to-end campaign seconds per variant")
    ap.add_argument("--cpu-seconds", type=float, default=10.0, help="seconds of the CPU engine (all variants)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--variants", default="", help="comma-separated indices into WGMMA_VARIANTS (default all)")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--model-kernel", default="chain", choices=("per_output", "chain"),
                    help="the port kernel of the model stage (gpu.kernels.layout_runner.LayoutRunner)")
    a = ap.parse_args(argv)

    import cupy as cp

    from gpu.fuzz.cpu_engine import fuzz_layout
    from gpu.fuzz.gpu_layout import cases_for, fuzz_layout_device
    from gpu.kernels.layout_runner import LayoutRunner
    from gpu.kernels.runtime import device_info
    from refmodel.verify.layout_cases import WGMMA_VARIANTS

    idx = [int(s) for s in a.variants.split(",") if s.strip()] or list(range(len(WGMMA_VARIANTS)))
    rows = []
    for vi in idx:
        v = WGMMA_VARIANTS[vi]
        t0 = time.time()
        run = LayoutRunner(v, model_kernel=a.model_kernel)
        compile_s = time.time() - t0
        C = cases_for(v, a.batch)
        x = run.generate(0, 0, C)
        hw = run.hardware(x)
        model, undef = run.model(x)
        outs = int((~undef).sum()) * 128 * run.nregs

        def compare():
            diff = (hw != model) & ~undef[:, None, None]
            return cp.nonzero(diff.reshape(C, -1).any(axis=1))[0].size

        stages = {"generate": mean_wall_seconds(cp, lambda: run.generate(0, 0, C), a.reps),
                  "hardware": mean_wall_seconds(cp, lambda: run.hardware(x), a.reps),
                  "model": mean_wall_seconds(cp, lambda: run.model(x), a.reps),
                  "compare": mean_wall_seconds(cp, compare, a.reps)}
        with tempfile.TemporaryDirectory() as d:
            rep = fuzz_layout_device("layout", seconds=a.seconds, seed=1, batch=a.batch, out=d, variants=[v],
                                     model_kernel=a.model_kernel)
        row = {"variant": list(v), "cases_per_batch": C, "outputs_per_batch": outs,
               "stage_g_outputs_per_s": {k: outs / t / 1e9 for k, t in stages.items()},
               "stage_seconds": stages, "stages_sum_g_outputs_per_s": outs / sum(stages.values()) / 1e9,
               "end_to_end_g_outputs_per_s": rep.rate / 1e9, "campaign": {k: getattr(rep, k) for k in (
                   "batches", "tiles", "outputs", "mismatches", "port_disagreements", "undefined",
                   "tiles_copied_back", "seconds")}, "compile_seconds": compile_s}
        rows.append(row)
        print(f"{vi:2d} {v[0].split('.aligned.')[1]:24s} rs={int(v[1])} t={v[2]}{v[3]} "
              f"gen {row['stage_g_outputs_per_s']['generate']:7.2f} hw {row['stage_g_outputs_per_s']['hardware']:7.2f} "
              f"model {row['stage_g_outputs_per_s']['model']:7.2f} cmp {row['stage_g_outputs_per_s']['compare']:7.2f} "
              f"e2e {row['end_to_end_g_outputs_per_s']:6.2f} G/s  mism {rep.mismatches} port {rep.port_disagreements} "
              f"undef {rep.undefined}", flush=True)
    with tempfile.TemporaryDirectory() as d:
        cpu = fuzz_layout("layout", cases=10 ** 9, seconds=a.cpu_seconds, seed=1, out=d)
    cpu_rate = cpu.outputs / cpu.seconds if cpu.seconds else 0.0
    print(f"CPU engine fuzz_layout: {cpu_rate / 1e6:.1f} M outputs/s ({cpu.outputs} outputs, {cpu.mismatches} mismatches)")
    all_gpu = fuzz_layout_device("layout", seconds=max(a.seconds, 5.0), seed=2, batch=a.batch,
                                 out=tempfile.mkdtemp(), model_kernel=a.model_kernel)
    print(f"GPU engine, all variants mixed: {all_gpu.rate / 1e9:.2f} G outputs/s, {all_gpu.mismatches} mismatches, "
          f"{all_gpu.port_disagreements} port disagreements, {all_gpu.undefined} undefined")
    try:
        import cupy as _c
        versions = {"cupy": _c.__version__, "cuda_runtime": _c.cuda.runtime.runtimeGetVersion(),
                    "driver": _c.cuda.runtime.driverGetVersion()}
    except Exception as e:  # pragma: no cover
        versions = {"error": str(e)}
    rec = {"bench": "layout_gpu", "device": device_info(), "python": platform.python_version(),
           "numpy": __import__("numpy").__version__, "versions": versions, "batch": a.batch,
           "variants": rows, "cpu_engine": {"outputs_per_second": cpu_rate, "outputs": cpu.outputs,
                                            "mismatches": cpu.mismatches, "seconds": cpu.seconds},
           "gpu_mixed": {"g_outputs_per_s": all_gpu.rate / 1e9, "outputs": all_gpu.outputs,
                         "mismatches": all_gpu.mismatches, "port_disagreements": all_gpu.port_disagreements,
                         "undefined": all_gpu.undefined, "seconds": all_gpu.seconds},
           "speedup_vs_cpu_engine": (all_gpu.rate / cpu_rate) if cpu_rate else None,
           "min_end_to_end_g_outputs_per_s": min(r["end_to_end_g_outputs_per_s"] for r in rows)}
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(rec, indent=1, default=str))
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
