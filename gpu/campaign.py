"""Campaigns beyond one process: ``wgref fuzz --devices 0,1,...`` starts one worker per GPU.

Each worker is ``wgref fuzz ... --shard k/n --out OUT/shard-k`` with ``CUDA_VISIBLE_DEVICES``
set to its device; when they are done their journals are merged
(:func:`refmodel.verify.journal.merge_journals`).  A device may be named more than once
(``--devices 0,0,0``): the workers then share that GPU.  Across hosts, give each host its own
``--shard i/n`` (a Slurm array task, a Ray task): its workers split that shard further
(:func:`refmodel.verify.journal.split_shard`), see docs/campaigns.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

from refmodel.errors import InputError
from refmodel.verify.journal import MergedReport, merge_journals, split_shard


def parse_devices(text: str) -> list[str]:
    """``"0,1,1"`` -> ``["0", "1", "1"]`` (CUDA device ordinals; repeats share a GPU)."""
    devs = [d.strip() for d in str(text).split(",") if d.strip()]
    if not devs or not all(d.isdigit() for d in devs):
        raise InputError(f"--devices must be comma-separated device ordinals such as 0,1,2,3, got {text!r}")
    return devs


def run_workers(fuzz_argv: list[str], devices: list[str], out: str | Path, *,
                shard: tuple[int, int] = (0, 1), python: Optional[str] = None,
                log=print) -> tuple[MergedReport, list[int]]:
    """Run ``wgref fuzz <fuzz_argv>`` once per device, each on its own slice of ``shard``, with its
    journal under ``out/shard-<k>``; wait for all; return the merged report and the exit codes.

    ``fuzz_argv`` is the target and options without ``--shard``, ``--devices`` or ``--out``.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    procs = []
    for (si, sn), dev in zip(split_shard(shard, len(devices)), devices):
        wdir = out / f"shard-{si}"
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=dev)
        cmd = [python or sys.executable, "-m", "wgref.cli", "fuzz", *fuzz_argv, "--shard", f"{si}/{sn}",
               "--out", str(wdir), "--json"]
        wdir.mkdir(parents=True, exist_ok=True)
        fh = open(wdir / "worker.log", "w")
        procs.append((subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT), fh, si, sn, dev))
        log(f"worker shard {si}/{sn} on device {dev}: {wdir}")
    codes = []
    for p, fh, si, sn, dev in procs:
        codes.append(p.wait())
        fh.close()
    if any(c not in (0, 1) for c in codes):  # 1 = mismatches found; anything else is a failed worker
        bad = [f"shard-{si} (exit {c}, see {out / f'shard-{si}' / 'worker.log'})"
               for (p, fh, si, sn, dev), c in zip(procs, codes) if c not in (0, 1)]
        raise InputError(f"workers failed: {', '.join(bad)}")
    return merge_journals([out / f"shard-{si}" / "journal.jsonl" for _, _, si, _, _ in procs]), codes
