"""Record, on the H200, the sparse GPU fuzz engine (gpu/kernels/sparse_runner.py: inputs generated on
the GPU, the GPU port of the model, the hardware) on every sparse wgmma form.

    python -m gpu.record.device_model_sparse --out fixtures

Per job of refmodel.verify.seeded_sparse.sparse_jobs_plan (every sparse form once, SS/RS, sp-sel,
scale-d and imm scales cycled): one batch of 7 tiles (one per family; legal and any-nibble metadata,
garbage in the sp-meta nibbles not read) from (SEED, job's index), generated on the GPU and checked
against the numpy twin (refmodel.verify.seeded_sparse.generate_sparse); the sha256 of the GPU
port's outputs and of the hardware's.  fixtures/device_model/sparse.npz holds only those digests:
CI rebuilds the inputs in numpy, runs refmodel.numerics.sparse.wgmma_sp and compares digests
(refmodel.verify.replay_golden.replay_device_model_sparse).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from gpu.record.device_model import digest
from refmodel.verify.fixtures import host_provenance, write_fixture
from refmodel.verify.seeded_sparse import SEED, TILES, generate_sparse, sparse_jobs_plan

PLAN = "refmodel.verify.seeded_sparse.sparse_jobs_plan"


def record(out: str, *, workers: int = 16, check_every: int = 1, log=print) -> int:
    """Run every planned job on the GPU; write fixtures/device_model/sparse.npz (exit 1, writing
    nothing, if the GPU generator disagrees with the numpy twin on a checked job)."""
    import cupy as cp

    from gpu.kernels.runtime import device_info
    from gpu.kernels.sparse import SpVariant, sp_kernel_source
    from gpu.kernels.sparse_runner import SparseRunner

    jobs = sparse_jobs_plan()
    if workers > 0:   # NVRTC in a process pool fills the disk cubin cache; the runners then load from it
        from gpu.kernels.runtime import compile_in_processes

        srcs = [sp_kernel_source(SpVariant(j["instr"], j["rs"], j["sp_sel"], 0, 0, j["imm_scale_a"], j["imm_scale_b"]))
                for j in jobs]
        log(f"compiled {len(srcs)} sparse kernels in {compile_in_processes(srcs, workers, chunksize=8):.1f}s",
            flush=True)
    t0 = time.time()
    port, hw, outputs, differ, bad_gen, checked = [], [], 0, 0, 0, 0
    for j, jb in enumerate(jobs):
        run = SparseRunner(jb)
        x = run.generate(SEED, j, TILES)
        if j % check_every == 0:   # the GPU generator against the numpy twin
            ref = generate_sparse(jb, SEED, j, TILES)
            bad = sum(int(np.count_nonzero(cp.asnumpy(x[k]) != ref[k])) for k in ref)
            bad_gen += bad
            checked += 1
            if bad:
                log(f"{jb['instr']}: the GPU generator differs from the numpy twin in {bad} elements", file=sys.stderr)
        p = cp.asnumpy(run.model(x)).astype(np.uint32)
        h = cp.asnumpy(run.hardware(x)).astype(np.uint32)
        port.append(np.frombuffer(digest(p), np.uint8))
        hw.append(np.frombuffer(digest(h), np.uint8))
        outputs += p.size
        nd = int(np.count_nonzero(p != h))
        differ += nd
        log(f"{j} {jb['instr']} {'rs' if jb['rs'] else 'ss'} sel={jb['sp_sel']} sd={int(jb['scale_d'])} "
            f"imm={jb['imm_scale_a']},{jb['imm_scale_b']}: {p.size} outputs, port vs hardware {nd} differ", flush=True)
    if bad_gen:
        log(f"the GPU generator differs from refmodel.verify.seeded_sparse in {bad_gen} elements "
            f"({checked} jobs checked): nothing written", file=sys.stderr)
        return 1
    prov = {**device_info(), **host_provenance(), "recorder": "gpu.record.device_model_sparse", "seed": SEED}
    write_fixture("device_model", "sparse", {"port_sha256": np.stack(port), "hw_sha256": np.stack(hw)},
                  kind="device_model_sparse", cases=2 * outputs,
                  meta={"seed": SEED, "tiles": TILES, "jobs": jobs, "plan": PLAN}, provenance=prov, root=out)
    log(f"{len(jobs)} jobs, {outputs} outputs each from the GPU port and the hardware, {differ} differ; "
        f"generator checked on {checked} jobs; {time.time() - t0:.1f}s after compiling")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="fixtures")
    ap.add_argument("--workers", type=int, default=16, help="NVRTC processes compiling the kernels first (0: none)")
    ap.add_argument("--check-every", type=int, default=1, help="check every n-th job's inputs against numpy")
    a = ap.parse_args(argv)
    return record(a.out, workers=a.workers, check_every=max(1, a.check_every))


if __name__ == "__main__":
    sys.exit(main())
