"""Benchmark (on the H200): end-to-end outputs/s of an e4m3 m64n256k32 fuzz campaign,
next to the hardware alone and the model alone, measured in the same run — for both engines:

* ``--engine gpu`` (gpu/fuzz/gpu_engine.py): inputs, hardware, the GPU port of the model and the
  comparison on the GPU; stages timed alone on the same batch, then a campaign end to end;
* ``--engine cpu`` (gpu/fuzz/cpu_engine.py): inputs and refmodel (numba) on the host, the baseline.

    python bench/bench_fuzz.py [--engine both] [--seconds 30] [--tiles 256] [--gpu-tiles 8192]
"""

import argparse
import os
import tempfile
import time

import numpy as np

INSTR = "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"


def gpu_engine(seconds: float, tiles: int, targets=(INSTR, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16",
                                                       "e4m3,bf16")) -> dict:
    """Stage rates and end-to-end rate of the GPU engine; returns {target: end-to-end outputs/s}."""
    import cupy as cp

    from gpu.kernels.form_runner import FormRunner, fuzz_device, tile_families
    from refmodel.wgmma_forms import parse_wgmma

    def rate(fn, outs, reps=10):
        fn()
        cp.cuda.runtime.deviceSynchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        cp.cuda.runtime.deviceSynchronize()
        return outs * reps / (time.perf_counter() - t0)

    res = {}
    for target in targets:
        if target.startswith("wgmma."):
            form = parse_wgmma(target)
            run = FormRunner(form, 1, 1)
            fams = cp.asarray(tile_families(0, 0, tiles))
            x = run.generate(0, 0, fams)
            outs = tiles * 64 * form.n
            r_gen = rate(lambda: run.generate(0, 0, fams), outs)
            r_hw = rate(lambda: run.hardware(x, True), outs)
            r_model = rate(lambda: run.model(x, True), outs)
            print(f"GPU engine, {target.split('.')[-4:]}: batch {tiles} tiles = {outs} outputs")
            print(f"  inputs generated on the GPU alone: {r_gen / 1e9:7.2f} G outputs/s")
            print(f"  hardware alone (images + wgmma):   {r_hw / 1e9:7.2f} G outputs/s")
            print(f"  GPU port of the model alone:       {r_model / 1e9:7.2f} G outputs/s")
        with tempfile.TemporaryDirectory() as d:
            rep = fuzz_device(target, seconds=seconds, seed=1, batch_tiles=tiles, out=d)
        print(f"  fuzz end to end, {target if not target.startswith('wgmma.') else 'that form'} ({rep.seconds:.0f} s, "
              f"{rep.outputs} outputs, {rep.mismatches} mismatches, {rep.port_disagreements} port disagreements): "
              f"{rep.rate / 1e9:7.2f} G outputs/s  (goal 1; kernels built first in {rep.compile_seconds:.1f} s)")
        res[target] = rep.rate
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--tiles", type=int, default=256)
    ap.add_argument("--gpu-tiles", type=int, default=8192)
    ap.add_argument("--engine", choices=["cpu", "gpu", "both"], default="both")
    args = ap.parse_args()
    gpu_rates = gpu_engine(args.seconds, args.gpu_tiles) if args.engine in ("gpu", "both") else {}
    if args.engine == "gpu":
        return
    from gpu.fuzz.cpu_engine import fuzz
    from gpu.kernels.wgmma import job_runner
    from refmodel.verify.jobs import Job, make_inputs, model_chain
    from refmodel.numerics.wgmma import wgmma

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
    if INSTR in gpu_rates:
        print(f"GPU engine / CPU engine, end to end, same form: {gpu_rates[INSTR] / rep.rate:.1f}x")


if __name__ == "__main__":
    main()
