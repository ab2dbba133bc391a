"""Record, on the H200, the GPU layout engine (gpu/fuzz/gpu_layout.py: wgmma through seeded random
descriptors; the GPU port of the descriptor addressing and of the accumulator) and the hardware, on
every job of :func:`refmodel.verify.seeded_layout.layout_jobs_plan` (every variant of
refmodel.verify.layout_cases.WGMMA_VARIANTS, several batches each).

    python -m gpu.record.device_model_layout --out fixtures

Per job: the cases drawn on the GPU (gpu.kernels.layout_runner.LayoutRunner.generate, checked
against the numpy twin refmodel.verify.seeded_layout.layout_cases: exit 1 if they differ), the
hardware's and the GPU port's D registers, the cases the port flags undefined (refmodel refuses
them; the hardware ran them with a safe descriptor) and the kernel's shared-memory base (the
swizzles act on absolute addresses).  fixtures/device_model/layout.npz holds only the sha256 of the
defined cases' registers (little-endian uint32, (cases, 128, regs) order); CI rebuilds the cases in
numpy, runs the CPU refmodel at the recorded base and compares digests
(refmodel.verify.replay_golden.replay_device_model_layout).
"""

from __future__ import annotations

import argparse
import hashlib
import sys

import numpy as np

from refmodel.verify.fixtures import host_provenance, write_fixture
from refmodel.verify.layout_cases import IMAGE, WGMMA_VARIANTS
from refmodel.verify.seeded_layout import SEED, layout_cases, layout_jobs_plan


def digest(regs: np.ndarray) -> bytes:
    """sha256 of D registers (cases, 128, regs) as little-endian uint32."""
    return hashlib.sha256(np.ascontiguousarray(regs, dtype="<u4").tobytes()).digest()


def record(out: str) -> int:
    import cupy as cp

    from gpu.kernels.layout_runner import LayoutRunner
    from gpu.kernels.runtime import device_info

    plan = layout_jobs_plan()
    runners: dict[int, LayoutRunner] = {}
    jobs, port, hw = [], [], []
    outputs = bad_gen = differ = undefined = 0
    for j, (vi, batch, C) in enumerate(plan):
        v = WGMMA_VARIANTS[vi]
        run = runners.get(vi)
        if run is None:
            run = runners[vi] = LayoutRunner(v)
        x = run.generate(SEED, batch, C)
        ref = layout_cases(v, SEED, batch, C, size=run.size)
        gen = sum(int(np.count_nonzero(cp.asnumpy(x[k]) != ref[k])) for k in ref)
        bad_gen += gen
        d_hw = run.hardware(x)
        d_port, undef = run.model(x)
        bases = cp.asnumpy(x["bases"])
        if not (bases == run.base).all():
            print(f"job {j} ({v}): the kernel's shared base moved from {run.base:#x} to "
                  f"{sorted(set(bases.tolist()))[:4]}; the undefined cases were chosen for the probed base",
                  file=sys.stderr)
            return 1
        u = cp.asnumpy(undef).astype(bool)
        p = cp.asnumpy(d_port).astype(np.uint32)[~u]
        h = cp.asnumpy(d_hw).astype(np.uint32)[~u]
        jobs.append({"index": vi, "variant": list(v), "batch": batch, "cases": C, "base": int(run.base),
                     "undefined": np.flatnonzero(u).tolist()})
        port.append(np.frombuffer(digest(p), np.uint8))
        hw.append(np.frombuffer(digest(h), np.uint8))
        outputs += p.size
        undefined += int(u.sum())
        n_diff = int(np.count_nonzero(p != h))
        differ += n_diff
        print(f"job {j}: {v[0]} rs={int(v[1])} trans={v[2]},{v[3]} imm={v[4]},{v[5]} batch {batch}: {C} cases "
              f"({int(u.sum())} undefined), {p.size} outputs, port vs hardware {n_diff} differ, "
              f"generator vs numpy {gen} differ, base {run.base:#x}", flush=True)
    if bad_gen:
        print(f"the GPU generator differs from refmodel.verify.seeded_layout in {bad_gen} elements", file=sys.stderr)
        return 1
    prov = {**device_info(), **host_provenance(), "recorder": "gpu.record.device_model_layout", "seed": SEED}
    write_fixture("device_model", "layout", {"port_sha256": np.stack(port), "hw_sha256": np.stack(hw)},
                  kind="device_model_layout", cases=2 * outputs,
                  meta={"seed": SEED, "image": IMAGE, "jobs": jobs,
                        "plan": "refmodel.verify.seeded_layout.layout_jobs_plan"},
                  provenance=prov, root=out)
    print(f"{len(jobs)} jobs, {outputs} outputs each from the GPU port and the hardware, {differ} differ, "
          f"{undefined} undefined cases")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="fixtures")
    a = ap.parse_args(argv)
    return record(a.out)


if __name__ == "__main__":
    sys.exit(main())
