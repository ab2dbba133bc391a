"""Campaigns beyond one process: ``wgref fuzz --devices 0,1,...`` starts one worker per GPU.

Each worker is ``wgref fuzz ... --shard k/n --out OUT/shard-k`` with ``CUDA_VISIBLE_DEVICES``
set to its device; when they are done their journals are merged
(:func:`refmodel.verify.journal.merge_journals`).  A device may be named more than once
(``--devices 0,0,0``): the workers then share that GPU.  Across hosts, give each host its own
``--shard i/n`` (a Slurm array task, a Ray task): its workers split that shard further
(:func:`refmodel.verify.journal.split_shard`), see docs/campaigns.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from refmodel.errors import InputError
from refmodel.verify.journal import MergedReport, merge_journals, split_shard


MAX_WORKERS = 256   # worker processes of one campaign on one host


def parse_devices(text: str) -> list[str]:
    """``"0,1,1"`` -> ``["0", "1", "1"]`` (CUDA device ordinals; repeats share a GPU).  Every
    entry must be an ASCII ordinal (no empty entries), at most :data:`MAX_WORKERS` of them."""
    import re

    t = str(text)
    shown = repr(t) if len(t) <= 40 else repr(t[:37]) + "..."
    devs = [d.strip() for d in t.split(",")]
    if not t.strip() or not all(re.fullmatch(r"[0-9]{1,4}", d) for d in devs):
        raise InputError(f"--devices must be comma-separated device ordinals such as 0,1,2,3 (or 'all'), "
                         f"got {shown}")
    if len(devs) > MAX_WORKERS:
        raise InputError(f"--devices starts one worker per entry, at most {MAX_WORKERS}; got {len(devs)}")
    return [str(int(d)) for d in devs]


def worker_command(fuzz_argv: list[str], shard: tuple[int, int], out: str | Path,
                   python: Optional[str] = None) -> list[str]:
    """The command line of one worker: ``wgref fuzz <fuzz_argv> --shard i/n --out OUT --json``."""
    return [python or sys.executable, "-m", "wgref.cli", "fuzz", *fuzz_argv, "--shard", f"{shard[0]}/{shard[1]}",
            "--out", str(out), "--json"]


def finished_cleanly(code: int, log: str) -> bool:
    """A worker is done when it exits 0 (clean) or 1 (mismatches found) *and* printed its JSON report
    last; a crash (a GPU fault, a traceback: also exit 1) prints none."""
    if code not in (0, 1):
        return False
    lines = [ln for ln in log.splitlines() if ln.strip()]
    try:
        return bool(lines) and "outputs" in json.loads(lines[-1])
    except ValueError:
        return False


def run_workers(fuzz_argv: list[str], devices: list[str], out: str | Path, *,
                shard: tuple[int, int] = (0, 1), restarts: int = 2, python: Optional[str] = None,
                log=print) -> tuple[MergedReport, list[dict]]:
    """Run ``wgref fuzz <fuzz_argv>`` once per device, each on its own slice of ``shard``, with its
    journal under ``out/shard-<k>``; wait for all; return the merged report and the restarts.

    A worker that crashes (a GPU fault kills its CUDA context) is started again with ``--resume``
    on the same device, up to ``restarts`` times: it continues from its journal, and the other
    workers never notice.  ``fuzz_argv`` is the target and options without ``--shard``,
    ``--devices`` or ``--out``.
    """
    if not devices or len(devices) > MAX_WORKERS:
        raise InputError(f"a campaign needs 1 to {MAX_WORKERS} devices (one worker each), got {len(devices)}")
    if isinstance(restarts, bool) or not isinstance(restarts, int) or not 0 <= restarts <= 100:
        raise InputError(f"restarts must be an integer from 0 to 100, got {restarts!r:.40}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    def start(si, sn, dev, resume):
        wdir = out / f"shard-{si}"
        wdir.mkdir(parents=True, exist_ok=True)
        argv = list(fuzz_argv) + (["--resume"] if resume and "--resume" not in fuzz_argv else [])
        cmd = worker_command(argv, (si, sn), wdir, python)
        fh = open(wdir / "worker.log", "a")
        fh.write(f"--- {' '.join(cmd[3:])}  (CUDA_VISIBLE_DEVICES={dev})\n")
        fh.flush()
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=dev)
        return subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT), fh

    running = {}
    for (si, sn), dev in zip(split_shard(shard, len(devices)), devices):
        running[si] = (*start(si, sn, dev, "--resume" in fuzz_argv), sn, dev, 0)
        log(f"worker shard {si}/{sn} on device {dev}: {out / f'shard-{si}'}")
    restarted: list[dict] = []
    failed: list[str] = []
    while running:
        time.sleep(0.1)
        for si in list(running):
            p, fh, sn, dev, tries = running[si]
            code = p.poll()
            if code is None:
                continue
            fh.close()
            del running[si]
            wlog = out / f"shard-{si}" / "worker.log"
            if finished_cleanly(code, wlog.read_text(errors="replace")):
                continue
            if tries < restarts:
                restarted.append({"shard": f"{si}/{sn}", "device": dev, "exit": code, "attempt": tries + 1})
                log(f"worker shard {si}/{sn} on device {dev} crashed (exit {code}); restarting it with --resume")
                running[si] = (*start(si, sn, dev, True), sn, dev, tries + 1)
            else:
                failed.append(f"shard-{si} (exit {code} after {tries} restarts, see {wlog})")
    if failed:
        raise InputError(f"workers failed: {', '.join(failed)}")
    shards = split_shard(shard, len(devices))
    return merge_journals([out / f"shard-{si}" / "journal.jsonl" for si, _ in shards]), restarted
