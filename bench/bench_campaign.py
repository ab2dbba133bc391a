"""Benchmark: how a fuzz campaign scales with workers (``wgref fuzz --devices``), measured in one run.

    python bench/bench_campaign.py --devices 0,1,2,3 [--seconds 60] [--target e4m3]   # GPUs
    python bench/bench_campaign.py --devices 0,0,0,0 --dry-run                        # CPU only

Runs the campaign first with one worker (the first listed device), then with every listed
worker, each for the same wall time, and prints outputs/s per worker and in total, and the
scaling ratio (total rate with W workers / rate with one; ideal = W).  Wall time includes
starting the worker processes; the journals' batch times give the rate while they ran.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(target, devices, seconds, dry_run, out, engine="cpu"):
    cmd = [sys.executable, "-m", "wgref.cli", "fuzz", target, "--cases", str(10 ** 12), "--time", f"{seconds}s",
           "--devices", ",".join(devices), "--out", str(out), "--json", "--keep-going", "--engine", engine]
    cmd += ["--dry-run"] if dry_run else []
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    if r.returncode not in (0, 1):
        sys.exit(f"campaign failed (exit {r.returncode}):\n{r.stderr[-2000:]}")
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    return rep, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", required=True, help="comma-separated devices, one worker each (repeat = share)")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--target", default="e4m3")
    ap.add_argument("--dry-run", action="store_true", help="the CPU model stands in for the GPU")
    ap.add_argument("--engine", choices=["cpu", "gpu"], default="cpu", help="wgref fuzz --engine (gpu: GPU-resident)")
    ap.add_argument("--json", default=None, help="also write the results here")
    a = ap.parse_args()
    devices = [d.strip() for d in a.devices.split(",") if d.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        one, wall1 = _run(a.target, devices[:1], a.seconds, a.dry_run, Path(tmp) / "one", a.engine)
        many, wallw = _run(a.target, devices, a.seconds, a.dry_run, Path(tmp) / "many", a.engine)
    # rates while the workers ran (outputs / the slowest worker's batch time): start-up and kernel
    # builds are left out; the wall times are printed beside them
    r1 = one["outputs_per_second"]
    rw = many["outputs_per_second"]
    res = {"target": a.target, "devices": devices, "dry_run": a.dry_run, "engine": a.engine, "seconds": a.seconds,
           "one_worker": {"outputs": one["outputs"], "wall_s": round(wall1, 2), "outputs_per_s": r1,
                          "mismatches": one["mismatches"]},
           "all_workers": {"outputs": many["outputs"], "wall_s": round(wallw, 2), "outputs_per_s": rw,
                           "per_worker_outputs_per_s": rw / len(devices), "mismatches": many["mismatches"],
                           "restarts": many.get("restarts", [])},
           "scaling": rw / r1 if r1 else 0.0}
    print(f"target {a.target}; {'CPU model as device' if a.dry_run else 'GPUs'} {','.join(devices)}; "
          f"{a.seconds:g} s each; engine {a.engine}; rates while the workers ran (wall {wall1:.0f} s / {wallw:.0f} s "
          "with start-up)")
    print(f"  1 worker : {one['outputs']:>14,} outputs  {r1 / 1e6:10.1f} M outputs/s  ({one['mismatches']} mismatches)")
    print(f"  {len(devices)} workers: {many['outputs']:>14,} outputs  {rw / 1e6:10.1f} M outputs/s  "
          f"({rw / len(devices) / 1e6:.1f} M per worker, {many['mismatches']} mismatches)")
    print(f"  scaling: {res['scaling']:.2f}x with {len(devices)} workers (ideal {len(devices)}x)")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
