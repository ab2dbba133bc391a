"""Fuzz campaigns over many hosts with Ray (the optional extra ``wgref[ray]``).

    python -m gpu.fuzz.ray_campaign fp8 --shards 64 --cases 200000 --out campaign --address auto

starts one Ray task per shard, each asking Ray for one GPU (``--gpus-per-shard``); a task runs
``wgref fuzz ... --shard k/n`` in a scratch folder on whatever host Ray chose and hands back its
journal and reproducers, which are written to ``OUT/shard-k`` on the driver and merged
(:func:`refmodel.verify.journal.merge_journals`).  No shared file system is needed.
``--dry-run`` (the CPU model stands in for the GPU, no GPU asked for) checks the whole path
on a laptop.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

from refmodel.errors import InputError
from refmodel.verify.journal import MergedReport, merge_journals

from gpu.fuzz.campaign import finished_cleanly, worker_command


def _run_shard(fuzz_argv: list[str], shard: tuple[int, int], python: str) -> dict:
    """One shard in a scratch folder; returns its files (name -> bytes) and the exit code."""
    with tempfile.TemporaryDirectory(prefix="wgref-shard-") as tmp:
        p = subprocess.run(worker_command(fuzz_argv, shard, tmp, python), capture_output=True)
        files = {f.relative_to(tmp).as_posix(): f.read_bytes() for f in Path(tmp).rglob("*") if f.is_file()}
        return {"files": files, "code": p.returncode, "log": (p.stdout + p.stderr).decode(errors="replace")}


def run_ray(fuzz_argv: list[str], shards: int, out: str | Path, *, gpus_per_shard: float = 1.0,
            address: Optional[str] = None, python: Optional[str] = None, log=print) -> MergedReport:
    """Run shards ``0/n .. n-1/n`` of ``wgref fuzz <fuzz_argv>`` as Ray tasks and merge their journals."""
    try:
        import ray
    except ImportError:
        raise InputError("Ray is not installed: pip install 'wgref[ray]'") from None
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= 4096:
        raise InputError(f"--shards must be an integer from 1 to 4096, got {shards!r:.40}")
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    task = ray.remote(num_gpus=gpus_per_shard, num_cpus=1)(_run_shard)
    refs = {task.remote(fuzz_argv, (k, shards), python or sys.executable): k for k in range(shards)}
    out = Path(out)
    failed = []
    while refs:
        done, _ = ray.wait(list(refs), num_returns=1)
        k = refs.pop(done[0])
        res = ray.get(done[0])
        wdir = out / f"shard-{k}"
        for name, data in res["files"].items():
            (wdir / name).parent.mkdir(parents=True, exist_ok=True)
            (wdir / name).write_bytes(data)
        (wdir / "worker.log").write_text(res["log"])
        if not finished_cleanly(res["code"], res["log"]):  # the same rule as the local launcher
            failed.append(f"shard-{k} (exit {res['code']}, see {wdir / 'worker.log'})")
        log(f"shard {k}/{shards} done (exit {res['code']})")
    if failed:
        raise InputError(f"Ray shards failed: {', '.join(failed)}")
    return merge_journals([out / f"shard-{k}" / "journal.jsonl" for k in range(shards)])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target")
    p.add_argument("--shards", type=int, required=True)
    p.add_argument("--cases", type=int, default=10000, help="tiles per shard")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="wgref-campaign")
    p.add_argument("--address", default=None, help="Ray cluster address (auto = the running cluster)")
    p.add_argument("--gpus-per-shard", type=float, default=1.0, help="fractions share a GPU (0.25 = 4 per GPU)")
    p.add_argument("--keep-going", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="the CPU model stands in for the GPU; asks Ray for no GPU")
    a = p.parse_args(argv)
    from gpu.fuzz.cpu_engine import check_campaign

    try:   # the arguments checked here, before Ray starts or a GPU is asked for
        check_campaign(cases=a.cases, seed=a.seed, names={"cases": "--cases", "seed": "--seed"})
        if not 1 <= a.shards <= 4096:
            raise InputError(f"--shards must be an integer from 1 to 4096, got {a.shards}")
        if not (0 < a.gpus_per_shard <= 8) and not a.dry_run:
            raise InputError(f"--gpus-per-shard must be a number in (0, 8], got {a.gpus_per_shard}")
        if not a.target.strip():
            raise InputError("give a fuzz target (e.g. fp8)")
    except InputError as e:
        p.error(str(e))
    fz = [a.target, "--cases", str(a.cases), "--seed", str(a.seed)]
    fz += ["--keep-going"] if a.keep_going else []
    fz += ["--dry-run"] if a.dry_run else []
    rep = run_ray(fz, a.shards, a.out, gpus_per_shard=0 if a.dry_run else a.gpus_per_shard, address=a.address)
    print(json.dumps(rep.to_dict()))
    return 1 if rep.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
