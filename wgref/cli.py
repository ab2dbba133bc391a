"""The ``wgref`` command line: the argument parser and the dispatch to the commands, which live
in :mod:`wgref.commands` (one module per command group).

Exit codes: 0 success / all match, 1 mismatch, 2 usage or environment error.
Bad input gets one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import re
import sys

from refmodel.errors import WgrefError
from wgref.commands import fp8, fuzz, golden, layout, pipeline, verify
from wgref.commands.common import COMMANDS
from wgref.commands.fuzz import RECORD_KINDS

# each command's subparser, in the order ``wgref -h`` lists them (and argparse's "choose from")
_SUBPARSERS = (
    fp8.add_cvt_parser, fp8.add_formats_parser, fp8.add_quantize_parser, verify.add_diff_parser,
    fp8.add_error_parser, fuzz.add_fuzz_parser, fuzz.add_merge_parser, golden.add_golden_parser,
    verify.add_replay_parser, fuzz.add_record_parser, layout.add_layout_parser, layout.add_desc_parser,
    verify.add_verify_parser, pipeline.add_pipeline_parser,
)

# a value such as -1.5, -inf, -nan, -0x1.8p3 or -1e-3 is a value, not an option
_NEGATIVE_VALUE = re.compile(r"^-(\d|\.\d|inf|infinity|nan|0x)", re.IGNORECASE)


class _Parser(argparse.ArgumentParser):
    """argparse with wgref's rules: negative numbers are values, and a usage error is one
    line on stderr (exit 2), not the usage block."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._negative_number_matcher = _NEGATIVE_VALUE

    def error(self, message):
        msg = " ".join(str(message).split())
        sys.stderr.write(f"{self.prog}: error: {msg} (see {self.prog} -h)\n")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="wgref", description="Bit-exact reference model of Hopper "
                                "warpgroup MMA features, verified against the H200.")
    sub = p.add_subparsers(dest="cmd", metavar="command")
    sub.required = True
    for add_parser in _SUBPARSERS:
        add_parser(sub)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.cmd == "record" and not args.what:
        args.what = list(RECORD_KINDS)  # the documented default: record every kind
    try:
        return COMMANDS[args.cmd](args)
    except WgrefError as e:
        print(f"wgref: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
