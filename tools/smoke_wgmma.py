"""Device smoke test of the wgmma layouts, independent of the accumulator model.

Inputs are small integers, so every form's result is exact and equals a float64
matmul: any mismatch is a layout (descriptor / fragment / packing) error, not numerics.
"""

import sys
import time

import ml_dtypes
import numpy as np

from gpu.kernels.wgmma import run_wgmma, run_wgmma_chain
from refmodel.layouts.fragment import element_dtype

FORMS = [
    ("wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32", (-3, 4)),
    ("wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16", (-3, 4)),
    ("wgmma.mma_async.sync.aligned.m64n{n}k16.f16.f16.f16", (-3, 4)),
    ("wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16", (-3, 4)),
    ("wgmma.mma_async.sync.aligned.m64n{n}k32.f32.e4m3.e4m3", (-3, 4)),
    ("wgmma.mma_async.sync.aligned.m64n{n}k32.f32.e5m2.e4m3", (-3, 4)),
    ("wgmma.mma_async.sync.aligned.m64n{n}k32.f16.e4m3.e5m2", (-3, 4)),
    ("wgmma.mma_async.sync.aligned.m64n{n}k32.s32.s8.s8", (-100, 100)),
    ("wgmma.mma_async.sync.aligned.m64n{n}k32.s32.u8.s8", (0, 200)),
]


def typed(x, name):
    return x.astype(element_dtype(name)) if name != "tf32" else x.astype(np.float32)


def main():
    from refmodel.wgmma_forms import parse_wgmma

    rng = np.random.default_rng(1)
    total_bad = 0
    t0 = time.time()
    for tmpl, (lo, hi) in FORMS:
        for n in (8, 64, 256):
            instr = tmpl.format(n=n)
            f = parse_wgmma(instr)
            for rs in (False, True):
                for chain, sd, sa in ((1, True, 1), (4, True, 1), (1, False, 1), (2, True, -1)):
                    if sa == -1 and not f.has_imm_scale:
                        continue
                    T = 3
                    blo, bhi = ((-100, 100) if f.dtype_b == "s8" else (0, 200)) if f.family == "int8" else (lo, hi)
                    a = rng.integers(lo, hi, (T, 64, f.k * chain))
                    b = rng.integers(blo, bhi, (T, f.k * chain, n))
                    c = rng.integers(-8, 8, (T, 64, n))
                    try:
                        d = run_wgmma_chain(instr, typed(a, f.dtype_a), typed(b, f.dtype_b),
                                            typed(c, f.dtype_d), chain=chain, scale_d_first=sd,
                                            imm_scale_a=sa, rs=rs)
                    except Exception as e:
                        print(f"{instr} rs={rs} chain={chain}: ERROR {e.__class__.__name__}: {str(e)[:300]}")
                        total_bad += 1
                        continue
                    ref = sa * (a.astype(np.float64) @ b.astype(np.float64)) + (c if sd else 0)
                    got = d.astype(np.float64)
                    bad = int(np.sum(got != ref))
                    total_bad += bad
                    msg = f"{instr} rs={int(rs)} chain={chain} sd={int(sd)} sa={sa}: {bad}/{ref.size} wrong"
                    if bad:
                        idx = np.argwhere(got != ref)[:3]
                        msg += " e.g. " + "; ".join(f"{tuple(i)} got {got[tuple(i)]} want {ref[tuple(i)]}" for i in idx)
                    print(msg, flush=True)
    print(f"SMOKE TOTAL wrong: {total_bad} ({time.time() - t0:.1f}s)")
    return 0 if total_bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
