"""Where numba's compile time goes in ``wgref verify``: run the replays with a cold (empty, temporary)
numba cache and list the functions whose compiles took longest (their own time, without the
compiles nested in them), per feature.

    python bench/profile_compile.py [--feature F ...] [--top 30]

A cold cache is what a fresh checkout or a fresh venv sees; bench/bench_verify.py times the warm run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--feature", action="append", default=None)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if "NUMBA_CACHE_DIR" not in os.environ:
        os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="wgref-cold-numba-")
    from numba.core import event

    own: dict[str, float] = defaultdict(float)
    stack: list[list] = []      # [name, start, nested seconds]
    feature_of: dict[str, str] = {}
    current = ["import"]

    class Listener(event.Listener):
        def on_start(self, ev):
            d = ev.data["dispatcher"]
            stack.append([f"{d.py_func.__module__}.{d.py_func.__qualname__}", time.perf_counter(), 0.0])

        def on_end(self, ev):
            name, t0, nested = stack.pop()
            dt = time.perf_counter() - t0
            own[name] += dt - nested
            feature_of.setdefault(name, current[0])
            if stack:
                stack[-1][2] += dt

    event.register("numba:compile", Listener())
    from refmodel.verify.replay import verify_all

    per_feature: dict[str, float] = defaultdict(float)
    wall: dict[str, float] = defaultdict(float)
    t0 = last = time.perf_counter()
    before = 0.0
    it = verify_all(full=not args.quick, features=args.feature)
    while True:
        try:
            feature, _e, _r = next(it)
        except StopIteration:
            break
        now = time.perf_counter()
        total_own = sum(own.values())
        per_feature[feature] += total_own - before
        wall[feature] += now - last
        before, last = total_own, now
        current[0] = feature
    total = time.perf_counter() - t0
    print(f"cold numba cache: {os.environ['NUMBA_CACHE_DIR']}")
    print(f"{'feature':<14} {'wall s':>8} {'compile s':>10}")
    for f, t in sorted(wall.items(), key=lambda kv: -kv[1]):
        print(f"{f:<14} {t:8.1f} {per_feature[f]:10.1f}")
    print(f"{'TOTAL':<14} {total:8.1f} {sum(own.values()):10.1f}")
    print(f"\nthe {args.top} longest compiles (own seconds):")
    for name, t in sorted(own.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{t:7.2f}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
