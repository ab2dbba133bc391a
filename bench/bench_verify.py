"""The main job's time, feature by feature: ``wgref verify`` replays every fixture; this prints the wall
time each feature's replay takes (in one process, in the order verify runs them) beside the total, the
host's cores and vector extensions, so a speed-up can be aimed where the time goes.

    python bench/bench_verify.py [--quick] [--feature F ...]

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


def _cpu_flags() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    want = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl")
    return " ".join(f for f in want if f in flags) or "none of avx2/avx512"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="wgref verify --quick")
    ap.add_argument("--feature", action="append", default=None)
    args = ap.parse_args(argv)
    from refmodel.verify.replay import verify_all

    print(f"host: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, {_cpu_flags()}")
    times: dict[str, float] = defaultdict(float)
    outputs: dict[str, int] = defaultdict(int)
    bad = 0
    t0 = last = time.perf_counter()
    for feature, _entry, res in verify_all(full=not args.quick, features=args.feature):
        now = time.perf_counter()
        times[feature] += now - last
        last = now
        if isinstance(res, Exception):
            bad += 1
        else:
            outputs[feature] += res.cases
            bad += res.mismatches
    total = time.perf_counter() - t0
    print(f"{'feature':<14} {'seconds':>8} {'share':>6} {'outputs':>14}")
    for f, t in sorted(times.items(), key=lambda kv: -kv[1]):
        print(f"{f:<14} {t:8.1f} {100 * t / total:5.1f}% {outputs[f]:>14,}")
    print(f"{'TOTAL':<14} {total:8.1f}        {sum(outputs.values()):>14,}   mismatches/errors: {bad}")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
