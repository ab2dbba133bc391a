"""Benchmark: the exhaustive 2**32 float32 -> FP8 sweep that CI runs against the H200 hashes.

Prints the wall time of refmodel's sweep (branch-free numba kernel + chunked sha256) for
each hardware form, next to baselines measured in the same run on one 2**24 chunk and
extrapolated to 2**32: ml_dtypes' astype (no hashing) and refmodel's generic rounding
kernel.  Goal: all four hardware forms in <= 60 s on 2 cores.

    python bench/bench_sweep.py [--forms 4|6] [--workers N]
"""

import argparse
import os
import time

import ml_dtypes
import numpy as np

from refmodel.numerics import fp8
from refmodel.numerics.sweep import CHUNK, SWEEP_FORMS, sweep_chunk, sweep_digests


def per_chunk(fn, reps=3):
    fn()
    best = min((lambda t0: (fn(), time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(reps))
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--forms", type=int, default=4, choices=[4, 6])
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    x = (np.arange(CHUNK, dtype=np.uint64) + (0x3C << 24)).astype(np.uint32)
    xf = x.view(np.float32)
    scale = (1 << 32) / CHUNK
    t_ml = per_chunk(lambda: xf.astype(ml_dtypes.float8_e4m3fn)) * scale
    t_gen = per_chunk(lambda: fp8.round_to_format(xf, "e4m3")) * scale
    t_fast = per_chunk(lambda: sweep_chunk("e4m3", False, 0x3C)) * scale
    print(f"cores: {os.cpu_count()}  (extrapolated from one 2^24 chunk to 2^32 inputs)")
    print(f"  ml_dtypes astype, no hash     {t_ml:7.1f} s")
    print(f"  refmodel generic kernel       {t_gen:7.1f} s")
    print(f"  refmodel fast kernel, no hash {t_fast:7.1f} s   ({t_ml / t_fast:.1f}x ml_dtypes)")
    plans = [(f, r, True) for f, r in SWEEP_FORMS] + ([("e4m3", False, False), ("e5m2", False, False)]
                                                      if args.forms == 6 else [])
    total = 0.0
    for fmt, relu, sat in plans:
        t0 = time.perf_counter()
        sweep_digests(fmt, relu, workers=args.workers, saturate=sat)
        dt = time.perf_counter() - t0
        total += dt
        print(f"  full sweep + sha256  {fmt}{' relu' if relu else ''}{'' if sat else ' nosat'}: {dt:6.1f} s")
    print(f"TOTAL {len(plans)} sweeps: {total:.1f} s  (goal <= 60 s for the 4 hardware forms); "
          f"ratio vs ml_dtypes-astype-only baseline x{len(plans)}: {total / (t_ml * len(plans)):.2f}")


if __name__ == "__main__":
    main()
