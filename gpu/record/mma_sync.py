"""Record every sm_90a ``mma.sync`` form on the H200 (fixtures/mma_sync/forms.npz).

    python -m gpu.record.mma_sync --out fixtures [--raw DIR] [--sass FILE.json]
    python -m gpu.record.mma_sync --sass docs/data/mma_sync_sass.json --sass-only

Per form ``i`` and seed ``s`` of :data:`SEEDS`: batch ``i`` of ``TILES`` warps' inputs from
:mod:`refmodel.verify.seeded_mma` (families round robin over the problems), run once per warp by
:mod:`gpu.kernels.mma_sync`; the fixture keeps the sha256 of the hardware's D codes per family, and the
raw D codes of the first :data:`RAW_PROBLEMS` problems of the first seed.  CI rebuilds the inputs in
numpy, runs refmodel and compares.  ``--raw`` also writes every D code (for fitting models offline);
``--sass`` writes each form's SASS arithmetic (nvcc -arch=sm_90a, cuobjdump) as JSON.
"""

from __future__ import annotations

import argparse
import re
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
    from gpu.kernels.mma_sync import run_mma_sync
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
        write_sass_summary(sass_file)
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


#: SASS mnemonics that carry the arithmetic (the rest moves data: loads, stores, shuffles, selects)
ARITH = re.compile(r"^(HMMA|IMMA|BMMA|DMMA|F2FP|HADD2|HFMA2|FADD|FMUL|FFMA|DFMA|DADD|POPC|F2F|IMNMX|VIMNMX)")


def sass_counts(sass: str) -> dict[str, dict[str, int]]:
    """Per kernel ``k<i>`` of a ``cuobjdump -sass`` listing: {mnemonic with modifiers: count} of the arithmetic
    instructions (:data:`ARITH`), zero-register moves (``HFMA2.MMA Rx, -RZ, RZ, 0, 0``) left out."""
    out: dict[str, dict[str, int]] = {}
    for chunk in re.split(r"\n\s*Function : ", sass)[1:]:
        name = chunk.split("\n", 1)[0].strip()
        counts: dict[str, int] = {}
        for ins in re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([^;]*);", chunk):
            op = ins.split()[0] if ins.split() else ""
            if not ARITH.match(op) or (op == "HFMA2.MMA" and "-RZ, RZ, 0, 0" in ins):
                continue
            counts[op] = counts.get(op, 0) + 1
        out[name] = counts
    return out


def sass_summary(sass: str, nvcc_version: str) -> dict:
    """{"nvcc", "arch", "forms": {instr: {mnemonic: count}}} of the listing of :func:`write_sass_summary`'s cubin."""
    counts = sass_counts(sass)
    return {"nvcc": nvcc_version, "arch": "sm_90a",
            "forms": {f.instr: counts.get(f"k{i}", {}) for i, f in enumerate(MMA_SYNC_FORMS)}}


def write_sass_summary(path: str) -> None:
    """Compile every form's kernel with nvcc (sm_90a) into one cubin, disassemble it (cuobjdump; it reads
    no NVRTC cubin) and write {instr: {mnemonic: count}} as JSON, with the nvcc version."""
    import json
    import os
    import subprocess
    import tempfile

    from gpu.kernels.mma_sync import kernel_source
    from gpu.kernels.runtime import PRELUDE

    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "all.cu")
        with open(src, "w") as fh:
            fh.write(PRELUDE + "\n".join(kernel_source(f, f"k{i}") for i, f in enumerate(MMA_SYNC_FORMS)))
        subprocess.run(["nvcc", "-arch=sm_90a", "-cubin", "-o", os.path.join(d, "all.cubin"), src], check=True)
        sass = subprocess.run(["cuobjdump", "-sass", os.path.join(d, "all.cubin")], check=True,
                              capture_output=True, text=True).stdout
        version = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    summary = sass_summary(sass, version)
    with open(path, "w") as fh:
        json.dump(summary, fh, indent=1, sort_keys=True)
        fh.write("\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="fixtures")
    ap.add_argument("--raw", default=None, help="also write every D code to DIR/mma_sync_raw.npz")
    ap.add_argument("--sass", default=None, help="write each form's SASS arithmetic (nvcc + cuobjdump) to FILE (JSON)")
    ap.add_argument("--sass-only", action="store_true", help="only --sass (no recording)")
    a = ap.parse_args(argv)
    if a.sass_only:
        if not a.sass:
            ap.error("--sass-only needs --sass FILE")
        write_sass_summary(a.sass)
        return 0
    return record(a.out, a.raw, a.sass)


if __name__ == "__main__":
    sys.exit(main())
