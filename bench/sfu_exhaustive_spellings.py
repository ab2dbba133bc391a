"""Recompute every chunk (all 2^32 inputs) of the recorded spellings' digests through their models,
one spelling per line (name, chunks that differ, seconds), in the order given (default: all unary
spellings in fixtures/sfu/spellings.npz).

    python bench/sfu_exhaustive_spellings.py [NAME ...]
"""

import sys
import time

import numpy as np


def main(argv=None) -> int:
    from refmodel.numerics.sfu.unit import spelled_sweep_sums, spelled_unary
    from refmodel.verify.fixtures import default_root, load_manifest

    root = default_root() / "sfu"
    entry = next(e for e in load_manifest(root)["entries"] if e["kind"] == "sfu_spellings")
    z = np.load(root / entry["file"])
    names = (argv if argv else None) or entry["meta"]["spellings"]
    bad_total = 0
    for n in names:
        if spelled_unary(n) is None:
            print(f"{n}\tnot modelled", flush=True)
            continue
        t = time.time()
        got = spelled_sweep_sums(n, np.arange(256))
        want = z["digests_" + "".join(c if c.isalnum() else "_" for c in n)]
        bad = np.flatnonzero(got != want)
        bad_total += bad.size
        print(f"{n}\t{bad.size} of 256 chunks differ\t{bad[:8].tolist()}\t{time.time() - t:.0f}s", flush=True)
    print(f"TOTAL chunks differing: {bad_total}")
    return 1 if bad_total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
