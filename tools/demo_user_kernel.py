"""Device demo for docs/user-kernels.md: fuzz the demo kernel and its planted bugs."""

import json
import sys
import time

from gpu.fuzz.userkernel import fuzz_user_kernel
from gpu.kernels.demo_gemm import DemoFP8Gemm


def main(out_dir="."):
    res = {}
    for bug in (None, "drop_last_k", "promote_interval"):
        kern = DemoFP8Gemm(out="bf16", bug=bug)
        sched = DemoFP8Gemm(out="bf16").schedule  # what the kernel claims to do
        t0 = time.time()
        r = fuzz_user_kernel(kern, sched, m=256, n=512, k=2048, cases=12, seed=7, out=f"{out_dir}/repro_{bug}")
        res[str(bug)] = {"cases": r.cases, "outputs": r.outputs, "mismatches": r.mismatches,
                         "family": r.failing_family, "first": r.first, "minimal": r.minimal,
                         "shrink_log": r.shrink_log, "seconds": round(time.time() - t0, 2)}
        print(f"bug={bug}: {r.cases} cases, {r.outputs} outputs, {r.mismatches} mismatches", flush=True)
        if r.first:
            print(r.first)
            print("shrunk:", r.shrink_log)
            print(r.minimal["diff"])
    with open(f"{out_dir}/user_kernel_demo.json", "w") as f:
        json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main(*sys.argv[1:])
