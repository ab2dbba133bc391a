"""Where the two slow batches of the drawn-mix campaign went (bench/results/fuzz_gpu_h200, session 4):
time each stage of a job's first three batches separately, with the runner built beforehand.

    python bench/probe_slow_batches.py [--json F]      (on the H200)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

JOBS = [("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", (1, -1), False, 2, 32768),
        ("wgmma.mma_async.sync.aligned.m64n16k32.satfinite.s32.s8.u8", (1, 1), True, 128, 512),
        ("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3", (1, 1), False, 2, 4096)]


def main(argv=None) -> int:
    import cupy as cp

    from gpu.kernels.compare import differing_rows
    from gpu.kernels.form_runner import FormRunner
    from refmodel.verify.seeded import tile_families
    from refmodel.wgmma_forms import parse_wgmma

    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    out = []
    for instr, imm, rs, chain, T in JOBS:
        t0 = time.time()
        run = FormRunner(parse_wgmma(instr), *imm, rs=rs, chain=chain)
        build = time.time() - t0
        reps = []
        for b in range(3):
            st = {}
            cp.cuda.runtime.deviceSynchronize()
            for name, fn in (("families", lambda: cp.asarray(tile_families(1, b, T))),):
                t = time.time(); fams = fn(); cp.cuda.runtime.deviceSynchronize(); st[name] = time.time() - t
            t = time.time(); x = run.generate(1, b, fams); cp.cuda.runtime.deviceSynchronize(); st["generate"] = time.time() - t
            t = time.time(); hw = run.hardware(x, True); cp.cuda.runtime.deviceSynchronize(); st["hardware"] = time.time() - t
            t = time.time(); mo = run.model(x, True); cp.cuda.runtime.deviceSynchronize(); st["model"] = time.time() - t
            t = time.time(); bad = cp.nonzero((hw != mo).any(axis=1))[0]; cp.cuda.runtime.deviceSynchronize(); st["compare"] = time.time() - t
            st["differ_tiles"] = int(bad.size)
            t = time.time(); bad2 = differing_rows(hw, mo); cp.cuda.runtime.deviceSynchronize(); st["compare_differing_rows"] = time.time() - t
            assert int(bad2.size) == int(bad.size)
            reps.append(st)
        row = {"instr": instr, "imm": imm, "rs": rs, "chain": chain, "tiles": T, "build_s": build, "batches": reps}
        out.append(row)
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items() if k != "batches"}))
        for st in reps:
            print("   ", {k: (round(v, 4) if isinstance(v, float) else v) for k, v in st.items()})
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
