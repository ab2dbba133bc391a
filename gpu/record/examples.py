"""Record the worked examples of docs/accumulator.md on the H200 (kind ``wgmma`` fixtures in
fixtures/examples), so that the docs' "H200" column is read from hardware recordings.

    python -m gpu.record.examples --out fixtures
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

FP8 = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"
BF16 = "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"

# name -> (instr, row 0 of A, column 0 of B, C[0, 0]); everything else zero
EXAMPLES = {
    "small_term_vanishes": (FP8, [256, 2.0 ** -6], [1, 1], None),
    "c_truncated_when_ab_zero": (FP8, [], [], 1 + 2.0 ** -20),
    "c_truncated_with_product": (FP8, [1], [1], 1 + 2.0 ** -20),
    "bf16_cancellation_too_wide": (BF16, [2.0 ** 15, -2.0 ** 15, 1], [2.0 ** 15, 2.0 ** 15, 1], None),
    "bf16_cancellation_within_f": (BF16, [2.0 ** 12, -2.0 ** 12, 1], [2.0 ** 12, 2.0 ** 12, 1], None),
    "large_c_fraction_lost": (FP8, [448], [448], 1 / 3),
}


def example_tiles(name: str):
    """(instr, a (64, K), b (K, N), c (64, N)) typed tiles of one worked example."""
    from refmodel.dtypes import element_dtype
    from refmodel.wgmma_forms import parse_wgmma

    instr, a_vals, b_vals, c_val = EXAMPLES[name]
    f = parse_wgmma(instr)
    a = np.zeros((64, f.k), element_dtype(f.dtype_a))
    b = np.zeros((f.k, f.n), element_dtype(f.dtype_b))
    a[0, :len(a_vals)] = np.asarray(a_vals, np.float64).astype(np.float32).astype(a.dtype)
    b[:len(b_vals), 0] = np.asarray(b_vals, np.float64).astype(np.float32).astype(b.dtype)
    c = np.zeros((64, f.n), element_dtype(f.dtype_d))
    if c_val is not None:
        c[0, 0] = c_val
    return instr, a, b, c


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="fixtures")
    a = p.parse_args(argv)
    from refmodel import wgmma as model  # the model must exist (fail loudly)
    from refmodel.dtypes import bits_of
    from refmodel.verify.fixtures import host_provenance, write_fixture

    from gpu.kernels.runtime import device_info
    from gpu.kernels.wgmma import run_wgmma

    prov = {**device_info(), **host_provenance(), "recorder": "gpu.record.examples"}
    bad = 0
    for name in EXAMPLES:
        instr, A, B, C = example_tiles(name)
        d = run_wgmma(instr, A, B, C)
        m = model(instr, A, B, C)
        ok = np.array_equal(bits_of(d), bits_of(m))
        bad += not ok
        print(f"{name:<30} H200 {float(d[0, 0])!r:<24} refmodel {float(m[0, 0])!r:<24} {'ok' if ok else 'MISMATCH'}")
        write_fixture("examples", name, {"a": bits_of(A)[None], "b": bits_of(B)[None], "c": bits_of(C)[None],
                                         "d": bits_of(d)[None]}, kind="wgmma", cases=int(d.size),
                      meta={"instr": instr, "rs": False, "scale_d": True, "imm_scale_a": 1, "imm_scale_b": 1,
                            "chain": 1, "example": name}, provenance=prov, root=Path(a.out))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
