"""The main job's time, feature by feature: ``wgref verify`` replays every fixture; this prints the wall
time of the whole run (as ``wgref verify`` runs it: worker processes, refmodel.verify.workers) beside
the seconds each feature's replays took (summed over its fixtures, in whichever process ran them), the
host's cores and vector extensions, so a speed-up can be aimed where the time goes.

    python bench/bench_verify.py [--quick] [--feature F ...] [--jobs N] [--threads T]

The first run in a fresh checkout also pays numba's compiles (the cache is then warm); run it twice to
see both.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if __name__ == "__main__" and "--avx2" in sys.argv[1:]:
    # numba compiles for an AVX2-only (Haswell) CPU, in this process and the workers it spawns:
    # the settings are read when numba loads, so set them and start again (bench_gemm.py --avx2)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_gemm import avx2_env

    _env = avx2_env()
    if any(os.environ.get(k) != v for k, v in _env.items()):
        os.environ.update(_env)
        os.execv(sys.executable, [sys.executable] + sys.argv)


def _cpu_flags() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    want = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl")
    return " ".join(f for f in want if f in flags) or "none of avx2/avx512"


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    return next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")),
                platform.machine())


def _cores() -> int:
    """The CPUs this process may run on (taskset's, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _commit() -> str:
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent, timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="wgref verify --quick")
    ap.add_argument("--feature", action="append", default=None)
    ap.add_argument("--jobs", type=int, default=None,
                    help="worker processes (default: wgref verify's, refmodel.verify.workers.default_jobs; 1: this process)")
    ap.add_argument("--threads", type=int, default=None, help="numba threads of each worker (default: cores / jobs)")
    ap.add_argument("--out", default=None, help="also write the numbers as JSON here (bench/results/verify/)")
    ap.add_argument("--avx2", action="store_true",
                    help="numba compiles for an AVX2-only CPU (Haswell; AVX-512 off), as on a host without AVX-512")
    ap.add_argument("--cache", choices=("warm", "cold"), default=None,
                    help="label the run's numba cache (cold: run after deleting refmodel's *.nbi/*.nbc)")
    args = ap.parse_args(argv)
    from refmodel.verify.workers import default_jobs, verify_all

    jobs = default_jobs() if args.jobs is None else max(1, args.jobs)
    print(f"host: {_cpu_model()} ({platform.machine()}), {_cores()} cores, {_cpu_flags()}; numba compiles for "
          f"{os.environ.get('NUMBA_CPU_NAME', 'the host CPU')}")
    print(f"jobs: {jobs} ({'this process' if jobs == 1 else 'worker processes'}), numba threads each: "
          f"{args.threads or 'default'}")
    seconds: dict[str, float] = defaultdict(float)
    outputs: dict[str, int] = defaultdict(int)
    busy: dict[int, float] = defaultdict(float)
    bad = 0
    t0 = time.perf_counter()
    rows = verify_all(full=not args.quick, features=args.feature, jobs=jobs, threads=args.threads)
    for feature, _entry, res in rows:
        if isinstance(res, Exception):
            bad += 1
            print(f"  {feature}/{_entry.get('file')}: {type(res).__name__}: {str(res)[:200]}")
        else:
            outputs[feature] += res.cases
            seconds[feature] += res.seconds
            busy[res.worker] += res.seconds
            bad += res.mismatches
    total = time.perf_counter() - t0
    replay = sum(seconds.values())
    print(f"{'feature':<14} {'seconds':>8} {'share':>6} {'outputs':>14}   (seconds: the feature's replays, "
          "summed over its fixtures)")
    for f, t in sorted(seconds.items(), key=lambda kv: -kv[1]):
        print(f"{f:<14} {t:8.1f} {100 * t / max(replay, 1e-9):5.1f}% {outputs[f]:>14,}")
    print(f"{'replays':<14} {replay:8.1f}        {sum(outputs.values()):>14,}")
    if len(busy) > 1:
        print("worker busy seconds: " + ", ".join(f"{t:.1f}" for t in sorted(busy.values(), reverse=True)))
    print(f"{'TOTAL (wall)':<14} {total:8.1f}   mismatches/errors: {bad}")
    if args.out:
        import json
        from datetime import datetime, timezone

        import numba
        import numpy

        rec = {"host": platform.processor() or platform.machine(), "cpu_model": _cpu_model(), "cpus": _cores(),
               "commit": _commit(), "numba_cpu": os.environ.get("NUMBA_CPU_NAME", "host"),
               "vector_extensions": _cpu_flags(), "jobs": jobs, "threads": args.threads, "cache": args.cache,
               "quick": args.quick, "features": args.feature, "wall_seconds": round(total, 2),
               "replay_seconds": {f: round(t, 2) for f, t in sorted(seconds.items(), key=lambda kv: -kv[1])},
               "worker_busy_seconds": sorted((round(t, 2) for t in busy.values()), reverse=True),
               "outputs": sum(outputs.values()), "mismatches_or_errors": bad,
               "load_average_1_5_15": list(os.getloadavg()), "numba": numba.__version__, "numpy": numpy.__version__,
               "python": platform.python_version(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(rec, indent=1) + "\n")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
