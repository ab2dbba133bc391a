"""Record, on the H200, the GPU port of the accumulator (gpu/kernels/device_model.py) and the hardware on the
GPU fuzzer's generated inputs, for every dense wgmma form and every input family.

    python -m gpu.record.device_model --out fixtures            # single SS wgmmas (forms.npz)
    python -m gpu.record.device_model --out fixtures --jobs     # RS and chains (jobs.npz)

Per form: one batch of 7 tiles (one per family of refmodel.verify.seeded) from (SEED, form's
index), scale-d and imm-scale varied over the forms; the sha256 of the GPU port's outputs and of
the hardware's outputs.  fixtures/device_model/forms.npz holds only those digests: CI rebuilds the
inputs in numpy (refmodel.verify.seeded), runs the CPU refmodel and compares digests.
"""

from __future__ import annotations

import argparse
import hashlib
import sys

import numpy as np

from refmodel.verify.fixtures import host_provenance, write_fixture
from refmodel.verify.seeded import FAMILIES, generate, tile_families, variant
from refmodel.wgmma_forms import WGMMA_FORMS

SEED = 20261201
TILES = len(FAMILIES)


def digest(bits: np.ndarray) -> bytes:
    """sha256 of output bits as little-endian uint32 (f16 accumulators zero-extended)."""
    return hashlib.sha256(np.ascontiguousarray(bits, dtype="<u4").tobytes()).digest()


def record(out: str) -> int:
    import cupy as cp

    from gpu.kernels.form_runner import FormRunner
    from gpu.kernels.runtime import device_info

    instrs, port, hw, outputs, bad_gen = [], [], [], 0, 0
    for i, form in enumerate(WGMMA_FORMS):
        scale_d, imm = variant(i, form.has_imm_scale)
        run = FormRunner(form, *imm)
        x = run.generate(SEED, i, cp.asarray(tile_families(SEED, i, TILES)))
        ref = generate((form.dtype_a, form.dtype_b, form.dtype_d), form.k, form.n, SEED, i, TILES)
        bad_gen += sum(int(np.count_nonzero(cp.asnumpy(x[k]) != ref[k])) for k in ref)
        p = cp.asnumpy(run.model(x, scale_d)).astype(np.uint32)
        h = cp.asnumpy(run.hardware(x, scale_d)).astype(np.uint32)
        instrs.append(form.instr)
        port.append(np.frombuffer(digest(p), np.uint8))
        hw.append(np.frombuffer(digest(h), np.uint8))
        outputs += p.size
        print(f"{form.instr} sd={int(scale_d)} imm={imm}: {p.size} outputs, port vs hardware "
              f"{int(np.count_nonzero(p != h))} differ", flush=True)
    if bad_gen:
        print(f"the GPU generator differs from refmodel.verify.seeded in {bad_gen} elements", file=sys.stderr)
        return 1
    prov = {**device_info(), **host_provenance(), "recorder": "gpu.record.device_model", "seed": SEED}
    write_fixture("device_model", "forms", {"port_sha256": np.stack(port), "hw_sha256": np.stack(hw)},
                  kind="device_model", cases=2 * outputs,
                  meta={"seed": SEED, "tiles": TILES, "instrs": instrs,
                        "variant": "refmodel.verify.seeded.variant(i, has_imm_scale)"},
                  provenance=prov, root=out)
    print(f"{len(instrs)} forms, {outputs} outputs each from the GPU port and the hardware")
    return 0


def record_jobs(out: str) -> int:
    """fixtures/device_model/jobs.npz: digests of the GPU port and the hardware on the dense jobs of
    refmodel.verify.seeded.dense_jobs (RS operands, chains of 2..128), 7 tiles each (one per family)."""
    import cupy as cp

    from gpu.kernels.form_runner import FormRunner
    from gpu.kernels.runtime import device_info
    from refmodel.verify.seeded import dense_jobs
    from refmodel.wgmma_forms import parse_wgmma

    jobs = dense_jobs(WGMMA_FORMS)
    port, hw, outputs, bad_gen, differ = [], [], 0, 0, 0
    for j, jb in enumerate(jobs):
        form = parse_wgmma(jb["instr"])
        run = FormRunner(form, *jb["imm"], rs=jb["rs"], chain=jb["chain"])
        x = run.generate(SEED, j, cp.asarray(tile_families(SEED, j, TILES)))
        if j % 16 == 0:   # the generator at this chain length against the numpy one
            ref = generate((form.dtype_a, form.dtype_b, form.dtype_d), form.k * jb["chain"], form.n, SEED, j, TILES)
            bad_gen += sum(int(np.count_nonzero(cp.asnumpy(x[k]) != ref[k])) for k in ref)
        p = cp.asnumpy(run.model(x, jb["scale_d"])).astype(np.uint32)
        h = cp.asnumpy(run.hardware(x, jb["scale_d"])).astype(np.uint32)
        port.append(np.frombuffer(digest(p), np.uint8))
        hw.append(np.frombuffer(digest(h), np.uint8))
        outputs += p.size
        differ += int(np.count_nonzero(p != h))
        print(f"{jb['instr']} {'rs' if jb['rs'] else 'ss'} chain {jb['chain']} sd={int(jb['scale_d'])} "
              f"imm={tuple(jb['imm'])}: {p.size} outputs, port vs hardware {int(np.count_nonzero(p != h))} differ",
              flush=True)
    if bad_gen:
        print(f"the GPU generator differs from refmodel.verify.seeded in {bad_gen} elements", file=sys.stderr)
        return 1
    prov = {**device_info(), **host_provenance(), "recorder": "gpu.record.device_model --jobs", "seed": SEED}
    write_fixture("device_model", "jobs", {"port_sha256": np.stack(port), "hw_sha256": np.stack(hw)},
                  kind="device_model_jobs", cases=2 * outputs,
                  meta={"seed": SEED, "tiles": TILES, "jobs": jobs, "plan": "refmodel.verify.seeded.dense_jobs"},
                  provenance=prov, root=out)
    print(f"{len(jobs)} jobs, {outputs} outputs each from the GPU port and the hardware, {differ} differ")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="fixtures")
    ap.add_argument("--jobs", action="store_true", help="record jobs.npz (RS operands, chains) instead of forms.npz")
    a = ap.parse_args(argv)
    return record_jobs(a.out) if a.jobs else record(a.out)


if __name__ == "__main__":
    sys.exit(main())
