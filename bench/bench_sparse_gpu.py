"""Benchmark (on the H200): the GPU-resident sparse wgmma fuzz engine (gpu/fuzz/gpu_sparse.py) end to
end and per stage, next to the CPU engine (``wgref fuzz sparse``: gpu/fuzz/cpu_engine.py::fuzz_sparse,
hardware on the GPU, inputs and refmodel on the host) measured in the same run, for a few forms.

Stages, timed alone on the same batch (synchronised, best of ``--reps``): inputs generated on the GPU,
the hardware (images / registers gathered + the wgmma kernel), the model (codes, kept positions and the
accumulator port), the comparison; then a campaign of ``--seconds`` on that form.

    python bench/bench_sparse_gpu.py [--seconds 20] [--cpu-seconds 10] [--batch-tiles 2048] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FORMS = ["m64n256k64.f32.e4m3.e4m3", "m64n256k32.f32.f16.f16", "m64n128k16.f32.tf32.tf32", "m64n256k64.s32.s8.s8"]


def versions() -> dict:
    import numpy as np

    from gpu.kernels.runtime import device_info

    out = {"python": platform.python_version(), "numpy": np.__version__, **device_info()}
    try:
        out["git"] = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False,
                                    cwd=Path(__file__).resolve().parents[1]).stdout.strip()
    except OSError:
        out["git"] = "unknown"
    return out


def stages(frag: str, batch_tiles: int, reps: int) -> dict:
    import cupy as cp

    from gpu.fuzz.cpu_engine import sparse_jobs
    from gpu.fuzz.gpu_sparse import tiles_for
    from gpu.kernels.sparse_runner import SparseRunner

    job = sparse_jobs(f"sparse:{frag}")[0]
    t0 = time.time()
    run = SparseRunner(job)
    try:
        chain = SparseRunner(job, model_kernel="chain")
        chain.model(run.generate(0, 0, 1))
    except Exception as e:  # noqa: BLE001  (the other kernel is optional: say why, measure the rest)
        chain = None
        print(f"  (chain model kernel unavailable: {type(e).__name__}: {e})")
    build = time.time() - t0
    T = tiles_for(run.form, batch_tiles)
    outs = T * 64 * run.form.n

    def best(fn):
        fn()
        cp.cuda.runtime.deviceSynchronize()
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            cp.cuda.runtime.deviceSynchronize()
            ts.append(time.perf_counter() - t)
        return min(ts)

    x = run.generate(0, 0, T)
    hw, md = run.hardware(x), run.model(x)
    res = {"job": job, "tiles": T, "outputs": outs, "build_seconds": build}
    res["seconds"] = {"generate": best(lambda: run.generate(0, 0, T)),
                      "hardware_inputs": best(lambda: run.hardware_inputs(x)),
                      "hardware": best(lambda: run.hardware(x)),
                      "positions": best(lambda: run.positions(x)),
                      "model": best(lambda: run.model(x)),
                      "compare": best(lambda: cp.nonzero((hw != md).any(axis=1))[0])}
    if chain is not None:
        res["seconds"]["model_chain"] = best(lambda: chain.model(x))
        res["chain_vs_gather_differences"] = int((chain.model(x) != md).sum())
    res["outputs_per_second"] = {k: outs / v for k, v in res["seconds"].items()}
    res["batch_differences"] = int((hw != md).sum())
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="GPU-engine campaign seconds per form")
    ap.add_argument("--cpu-seconds", type=float, default=10.0, help="CPU-engine (fuzz_sparse) seconds per form")
    ap.add_argument("--batch-tiles", type=int, default=2048, help="n256-equivalent tiles per GPU batch")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--forms", default=",".join(FORMS), help="comma-separated form fragments")
    ap.add_argument("--model-kernel", default="chain", choices=("gather", "chain"), help="the campaign's model (chain: the default, faster on the H200)")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args(argv)

    from gpu.fuzz.cpu_engine import fuzz_sparse
    from gpu.fuzz.gpu_sparse import fuzz_sparse_device

    res = {"versions": versions(), "args": vars(a), "forms": {}}
    print(f"device: {res['versions'].get('device')}  cupy {res['versions'].get('cupy')}  "
          f"nvrtc {res['versions'].get('nvrtc')}  driver {res['versions'].get('driver')}")
    for frag in a.forms.split(","):
        r = stages(frag, a.batch_tiles, a.reps)
        print(f"\n{frag}: batch {r['tiles']} tiles = {r['outputs']} outputs (runner built in {r['build_seconds']:.1f} s)")
        for k, v in r["outputs_per_second"].items():
            print(f"  {k:16s} alone: {v / 1e9:8.2f} G outputs/s  ({r['seconds'][k] * 1e3:8.2f} ms)")
        with tempfile.TemporaryDirectory() as d:
            g = fuzz_sparse_device(f"sparse:{frag}", seconds=a.seconds, seed=1, batch_tiles=a.batch_tiles, out=d,
                                   model_kernel=a.model_kernel)
        r["gpu_engine"] = {k: v for k, v in g.to_dict().items() if k != "forms"}
        print(f"  GPU engine end to end ({g.seconds:.1f} s, {g.batches} batches, {g.outputs} outputs, {g.mismatches} "
              f"mismatches, {g.port_disagreements} port disagreements, {g.tiles_copied_back} tiles back): "
              f"{g.rate / 1e9:.3f} G outputs/s (goal 1; compile {g.compile_seconds:.1f} s)")
        with tempfile.TemporaryDirectory() as d:
            c = fuzz_sparse(f"sparse:{frag}", cases=10**9, seed=1, seconds=a.cpu_seconds, out=d)
        r["cpu_engine"] = {k: v for k, v in c.to_dict().items() if k not in ("shrink_log",)}
        print(f"  CPU engine fuzz_sparse ({c.seconds:.1f} s, {c.outputs} outputs, {c.mismatches} mismatches): "
              f"{c.rate / 1e9:.4f} G outputs/s  -> GPU engine x{g.rate / max(c.rate, 1e-9):.0f}")
        res["forms"][frag] = r
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, default=str))
        print(f"\nwrote {a.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
