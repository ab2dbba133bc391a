"""``python -m wgref.triton replay``: the recorded Triton kernels in wgref's bit-exact interpreter."""

from __future__ import annotations

import os
import sys

from .replay import replay_elementwise, replay_fixtures, replay_inductor, replay_spellings


def _main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m wgref.triton", description="wgref's bit-exact Triton interpreter")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("replay", help="run the recorded Triton kernels (the lowering matmul on every configuration "
                       "of fixtures/triton/lowering*.npz, the Inductor templates, the special-function and "
                       "multiply-add kernels) in the patched interpreter and compare with the H200's bits")
    r.add_argument("--family", action="append", default=None, help="only this input family (repeatable)")
    r.add_argument("--plain", action="store_true", help="Triton's own interpreter, unpatched (for contrast)")
    r.add_argument("--only", default=None, help="these replays only, comma-separated: lowering, inductor, spellings, "
                   "elementwise (default: all)")
    a = ap.parse_args(argv)
    os.environ["TRITON_INTERPRET"] = "1"          # before triton is imported
    parts = ("lowering", "inductor", "spellings", "elementwise")
    only = a.only.split(",") if a.only else list(parts)
    if set(only) - set(parts):
        ap.error(f"--only takes {', '.join(parts)}, got {a.only!r}")
    bad = 0
    if "lowering" in only:
        bad += replay_fixtures(a.family, numerics=not a.plain)[1]
    if not a.plain and not a.family:
        for name, fn in (("inductor", replay_inductor), ("spellings", replay_spellings),
                         ("elementwise", replay_elementwise)):
            if name in only:
                bad += fn()[1]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(_main())
