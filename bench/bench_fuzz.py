"""Benchmark (on the H200): end-to-end outputs/s of an e4m3 m64n256k32 fuzz campaign,
next to the hardware alone and the model alone, measured in the same run.

    python bench/bench_fuzz.py [--seconds 30] [--tiles 256]
"""

import argparse
import os
import tempfile
import time

import numpy as np

INSTR = "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--tiles", type=int, default=256)
    args = ap.parse_args()
    from gpu.fuzz import fuzz
    from gpu.record_wgmma import Job, hardware_runner, make_inputs, model_chain
    from refmodel.numerics.wgmma import wgmma

    job = Job(INSTR)
    rng = np.random.default_rng(0)
    a, b, c, _, _ = make_inputs(job, rng, max(1, args.tiles // 9))
    hw = hardware_runner(isolate=False)
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


if __name__ == "__main__":
    main()
