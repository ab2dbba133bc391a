"""Record every sm_90a ``mma.sync`` form on the H200 (fixtures/mma_sync/forms.npz).

    python -m gpu.record.mma_sync --out fixtures [--raw DIR] [--sass FILE]

Per form ``i`` and seed ``s`` of :data:`SEEDS`: batch ``i`` of ``TILES`` warps' inputs from
:mod:`refmodel.verify.seeded_mma` (families round robin over the problems), run once per warp by
:mod:`gpu.kernels.mma_sync`; the fixture keeps the sha256 of the hardware's D codes per family, and the
raw D codes of the first :data:`RAW_PROBLEMS` problems of the first seed.  CI rebuilds the inputs in
numpy, runs refmodel and compares.  ``--raw`` also writes every D code (for fitting models offline);
``--sass`` writes each form's SASS (cuobjdump) to one text file.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from refmodel.mma_sync_forms import MMA_SYNC_FORMS
from refmodel.verify.fixtures import host_provenance, write_fixture
from refmodel.verify.seeded import FAMILIES
from refmodel.verify.replay_mma_sync import d_codes, family_digests
from refmodel.verify.seeded_mma import generate, typed

SEEDS = (20261206, 1206)
TILES = 7 * 64          # warps per form and seed (quad-pair forms: 4 products each)
RAW_PROBLEMS = 7        # one of each family


def record(out: str, raw_dir: str | None = None, sass_file: str | None = None) -> int:
    from gpu.kernels.mma_sync import cubin, run_mma_sync
    from gpu.kernels.runtime import device_info

    digests, raw32, raw64, outputs = [], [], [], 0
    raw_all = {}
    t0 = time.time()
    for i, form in enumerate(MMA_SYNC_FORMS):
        per_seed = []
        for si, seed in enumerate(SEEDS):
            codes = generate(form, seed, i, TILES)
            a, b, c = typed(form, codes)
            d = d_codes(form, run_mma_sync(form.instr, a, b, c))
            per_seed.append(family_digests(d, codes["family"]))
            outputs += d.size
            if si == 0:
                (raw64 if form.dtype_d == "f64" else raw32).append(d[:RAW_PROBLEMS].reshape(-1))
                if raw_dir:
                    raw_all[f"f{i}"] = d
        digests.append(np.stack(per_seed))
        print(f"{form.instr}: {len(SEEDS)} x {d.size} outputs", flush=True)
    if raw_dir:
        import os

        os.makedirs(raw_dir, exist_ok=True)
        np.savez_compressed(os.path.join(raw_dir, "mma_sync_raw.npz"), **raw_all)
    if sass_file:
        with open(sass_file, "w") as fh:
            for form in MMA_SYNC_FORMS:
                fh.write(f"==== {form.instr}\n{_sass(cubin(form.instr))}\n")
    prov = {**device_info(), **host_provenance(), "recorder": "gpu.record.mma_sync", "seeds": list(SEEDS),
            "ptxas": "NVRTC's (the cubin is NVRTC's own; see nvrtc in device info)"}
    write_fixture("mma_sync", "forms",
                  {"hw_sha256": np.stack(digests), "raw32": np.concatenate(raw32),
                   "raw64": np.concatenate(raw64) if raw64 else np.zeros(0, np.uint64)},
                  kind="mma_sync_forms", cases=outputs,
                  meta={"seeds": list(SEEDS), "tiles": TILES, "raw_problems": RAW_PROBLEMS,
                        "instrs": [f.instr for f in MMA_SYNC_FORMS],
                        "families": list(FAMILIES),
                        "inputs": "refmodel.verify.seeded_mma.generate(form, seed, form index, tiles)"},
                  provenance=prov, root=out)
    print(f"{len(MMA_SYNC_FORMS)} forms, {outputs} outputs in {time.time() - t0:.1f} s")
    return 0


def _sass(blob: bytes) -> str:
    """The SASS of a cubin: ``cuobjdump -sass``, else ``nvdisasm -c`` (cuobjdump 13.0 reads no NVRTC cubin)."""
    import os
    import shutil
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(blob)
        path = f.name
    notes = []
    try:
        for tool, args in (("cuobjdump", ["-sass"]), ("nvdisasm", ["-c"])):
            exe = shutil.which(tool) or f"/usr/local/cuda/bin/{tool}"
            try:
                r = subprocess.run([exe, *args, path], capture_output=True, text=True, timeout=60)
            except Exception as e:   # noqa: BLE001 - the SASS is a by-product; say why it is missing
                notes.append(f"{tool} failed: {e}")
                continue
            if r.returncode == 0 and r.stdout.strip():
                return r.stdout
            notes.append(f"{tool} printed nothing (rc {r.returncode}): {r.stderr[-300:]}")
        return "; ".join(notes)
    finally:
        os.unlink(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="fixtures")
    ap.add_argument("--raw", default=None, help="also write every D code to DIR/mma_sync_raw.npz")
    ap.add_argument("--sass", default=None, help="write each form's SASS to FILE")
    a = ap.parse_args(argv)
    return record(a.out, a.raw, a.sass)


if __name__ == "__main__":
    sys.exit(main())
