"""Benchmark (on the H200): end-to-end outputs/s of an e4m3 m64n256k32 fuzz campaign,
next to the hardware alone and the model alone, measured in the same run — for both engines:

* ``--engine gpu`` (gpu/fuzz/gpu_engine.py): inputs, hardware, the GPU port of the model and the
  comparison on the GPU; stages timed alone on the same batch, then a campaign end to end;
* ``--engine cpu`` (gpu/fuzz/cpu_engine.py): inputs and refmodel (numba) on the host, the baseline.

    python bench/bench_fuzz.py [--engine both] [--seconds 30] [--tiles 256] [--gpu-tiles 8192]
"""

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

INSTR = "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"


GPU_JOBS = [   # (instr, rs, chain): the 12 G/s goal's form first, then RS operands and chains
    (INSTR, False, 1),
    ("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", False, 1),
    (INSTR, True, 1),
    (INSTR, False, 8),
    (INSTR, True, 128),
    ("wgmma.mma_async.sync.aligned.m64n128k16.f16.f16.f16", True, 32),
    ("wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32", False, 4),
    ("wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8", True, 2),
]


def gpu_engine(seconds: float, tiles: int, jobs=GPU_JOBS, mixed=("wgmma",)) -> dict:
    """Stage rates and end-to-end rate of the GPU engine per (form, rs, chain) job, then campaigns
    with RS and the chain drawn per batch; returns {label: end-to-end outputs/s, ...}."""
    import cupy as cp
    from gpu_timing import mean_wall_seconds

    from gpu.fuzz.gpu_engine import fuzz_device, tiles_for
    from gpu.kernels.form_runner import FormRunner
    from refmodel.verify.seeded import tile_families
    from refmodel.wgmma_forms import parse_wgmma

    def rate(fn, outs, reps=5):
        return outs / mean_wall_seconds(cp, fn, reps)

    res = {}
    for instr, rs, chain in jobs:
        form = parse_wgmma(instr)
        run = FormRunner(form, 1, 1, rs=rs, chain=chain)
        T = tiles_for(form, tiles, chain)
        fams = cp.asarray(tile_families(0, 0, T))
        x = run.generate(0, 0, fams)
        outs = T * 64 * form.n
        hw, model = run.hardware(x, True), run.model(x, True)
        differ = int(cp.count_nonzero(hw != model))
        st = {"generate": rate(lambda: run.generate(0, 0, fams), outs),
              "hardware": rate(lambda: run.hardware(x, True), outs),
              "model": rate(lambda: run.model(x, True), outs),
              "model_per_output_kernel": rate(lambda: run.model_per_output(x, True), outs, reps=2),
              "compare": rate(lambda: cp.nonzero((hw != model).any(axis=1))[0], outs)}
        with tempfile.TemporaryDirectory() as d:
            rep = fuzz_device(instr, seconds=seconds, seed=1, batch_tiles=tiles, out=d, rs=rs, chain=chain)
        label = f"{instr.split('aligned.')[1]} {'rs' if rs else 'ss'} chain {chain}"
        res[label] = {"stages_outputs_per_s": st, "end_to_end_outputs_per_s": rep.rate,
                      "end_to_end_instr_outputs_per_s": rep.instr_outputs / rep.seconds if rep.seconds else 0.0,
                      "outputs": rep.outputs, "mismatches": rep.mismatches,
                      "port_disagreements": rep.port_disagreements, "stage_batch_port_vs_hw_differ": differ}
        print(f"GPU engine, {label}: batch {T} tiles = {outs} outputs; stages alone (G outputs/s): "
              + ", ".join(f"{k} {v / 1e9:.2f}" for k, v in st.items()))
        print(f"  end to end ({rep.seconds:.0f} s, {rep.outputs} outputs, {rep.mismatches} mismatches, "
              f"{rep.port_disagreements} port disagreements): {rep.rate / 1e9:.2f} G outputs/s, "
              f"{res[label]['end_to_end_instr_outputs_per_s'] / 1e9:.2f} G instruction outputs/s")
    for target in mixed:
        with tempfile.TemporaryDirectory() as d:
            rep = fuzz_device(target, seconds=seconds, seed=2, batch_tiles=tiles, out=d)
            # where the seconds went: each job's first batch apart from its later ones, and the slowest batches
            recs = [json.loads(x) for x in (Path(d) / "journal.jsonl").read_text().splitlines() if x.strip()]
        seen: set = set()
        first_s = later_s = 0.0
        for r in recs:
            if "job" not in r:
                continue
            if r["job"] in seen:
                later_s += r["seconds"]
            else:
                seen.add(r["job"])
                first_s += r["seconds"]
        slow = sorted((r for r in recs if "job" in r), key=lambda r: -r["seconds"])[:6]
        res[f"{target} (rs, chain drawn)"] = {"end_to_end_outputs_per_s": rep.rate, "outputs": rep.outputs,
                                              "instr_outputs": rep.instr_outputs, "mismatches": rep.mismatches,
                                              "port_disagreements": rep.port_disagreements, "chains": rep.chains,
                                              "compile_seconds": rep.compile_seconds,
                                              "jobs_first_batch_seconds": first_s, "later_batches_seconds": later_s,
                                              "slowest_batches": [{k: r[k] for k in ("batch", "job", "tiles", "seconds")}
                                                                  for r in slow]}
        print(f"  first batch of each of {len(seen)} jobs: {first_s:.2f} s; later batches: {later_s:.2f} s; slowest: "
              + ", ".join(f"{r['job'].split('|')[-1]} {r['seconds']:.2f} s" for r in slow[:3]))
        print(f"GPU engine, {target} with RS and chains drawn ({rep.seconds:.0f} s, {rep.batches} batches, "
              f"{rep.mismatches} mismatches, {rep.port_disagreements} port disagreements): "
              f"{rep.rate / 1e9:.2f} G outputs/s, {rep.instr_outputs / max(rep.seconds, 1e-9) / 1e9:.2f} G instruction "
              f"outputs/s; by chain length: " + ", ".join(f"{k}: {v[0] / max(v[2], 1e-9) / 1e9:.2f}" for k, v in
                                                          sorted(rep.chains.items(), key=lambda kv: int(kv[0]))))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--tiles", type=int, default=256)
    ap.add_argument("--gpu-tiles", type=int, default=8192)
    ap.add_argument("--engine", choices=["cpu", "gpu", "both"], default="both")
    ap.add_argument("--json", default=None, help="write the GPU engine's rates here (with device and versions)")
    ap.add_argument("--mixed-only", action="store_true", help="GPU engine: only the campaign with RS and chains drawn")
    args = ap.parse_args()
    gpu_rates = gpu_engine(args.seconds, args.gpu_tiles, jobs=[] if args.mixed_only else GPU_JOBS) \
        if args.engine in ("gpu", "both") else {}
    if args.json and gpu_rates:
        import json

        from gpu.kernels.runtime import device_info
        from refmodel.verify.fixtures import host_provenance

        with open(args.json, "w") as f:
            json.dump({"device": device_info(), "host": host_provenance(), "gpu_tiles": args.gpu_tiles,
                       "seconds": args.seconds, "jobs": gpu_rates}, f, indent=1, default=str)
    if args.engine == "gpu":
        return
    from gpu.fuzz.cpu_engine import fuzz
    from gpu.kernels.wgmma import job_runner
    from refmodel.numerics.wgmma import wgmma
    from refmodel.verify.jobs import Job, make_inputs, model_chain

    job = Job(INSTR)
    rng = np.random.default_rng(0)
    a, b, c, _, _ = make_inputs(job, rng, max(1, args.tiles // 9))
    hw = job_runner(isolate=False)
    hw(job, a, b, c)
    model_chain(wgmma, job, a, b, c)
    outs = c.size

    def rate(fn, reps=5):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return outs * reps / (time.perf_counter() - t0)

    r_hw = rate(lambda: hw(job, a, b, c))
    r_model = rate(lambda: model_chain(wgmma, job, a, b, c))
    with tempfile.TemporaryDirectory() as d:
        rep = fuzz(INSTR, cases=10**9, seconds=args.seconds, seed=1, rs=False, chain=1, scale_d=True,
                   out=d, batch_tiles=args.tiles, progress=False)
    print(f"cores {os.cpu_count()}; {INSTR}; batch {a.shape[0]} tiles = {outs} outputs")
    print(f"  hardware alone (launch + copies): {r_hw / 1e6:8.1f} M outputs/s")
    print(f"  refmodel alone (numba, parallel): {r_model / 1e6:8.1f} M outputs/s")
    print(f"  fuzz end to end ({rep.seconds:.0f} s, {rep.outputs} outputs, {rep.mismatches} mismatches): "
          f"{rep.rate / 1e6:8.1f} M outputs/s  (goal 50; ratio to model alone {rep.rate / r_model:.2f})")
    key = next((k for k in gpu_rates if k.startswith("m64n256k32.f32.e4m3.e4m3 ss chain 1")), None)
    if key:
        print(f"GPU engine / CPU engine, end to end, same form: "
              f"{gpu_rates[key]['end_to_end_outputs_per_s'] / rep.rate:.1f}x")


if __name__ == "__main__":
    main()
