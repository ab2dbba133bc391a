"""The ``wgref`` command line: the argument parser and the dispatch to the commands, which live
in :mod:`wgref.commands` (one module per command group).

Exit codes: 0 success / all match, 1 mismatch, 2 usage or environment error (and an internal
error, reported as one line naming the command), 130 Ctrl-C, 141 a closed output pipe.
Bad input gets one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import codecs
import re
import sys

from refmodel.errors import WgrefError
from wgref.commands import explain, explore, fp8, fuzz, golden, infer, layout, pipeline, sfu, verify
from wgref.commands.common import COMMANDS
from wgref.commands.fuzz import RECORD_KINDS

# each command's subparser, in the order ``wgref -h`` lists them (and argparse's "choose from")
_SUBPARSERS = (
    fp8.add_cvt_parser, fp8.add_formats_parser, fp8.add_quantize_parser, verify.add_diff_parser,
    fp8.add_error_parser, fuzz.add_fuzz_parser, fuzz.add_merge_parser, golden.add_golden_parser,
    verify.add_replay_parser, fuzz.add_record_parser, layout.add_layout_parser, layout.add_desc_parser,
    verify.add_verify_parser, pipeline.add_pipeline_parser, infer.add_infer_parser, explore.add_explore_parser,
    explain.add_explain_parser, explain.add_explain_attention_parser,
    sfu.add_sfu_parser,
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


# where an internal error (a bug of wgref, never the user's input) is to be reported
REPORT_TO = "this is a bug in wgref: please report it, with the command line, to the wgref maintainers"


def _say(line: str) -> None:
    """One line on stderr, whatever state stderr is in."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _end_progress_lines() -> None:
    """The rule for every error path: a progress line still on screen is ended before the error is
    written, so the error is a line of its own.  wgref's progress lines are tqdm bars (the fuzz
    campaign's, the sweep replays'; tests/test_hostile_classes.py checks there are no others):
    each live bar is closed, which leaves its last state ended by a newline or clears its line, and
    a closed bar never redraws itself later (at exit)."""
    mod = sys.modules.get("tqdm.std")
    if mod is None:     # no bar was ever made
        return
    for bar in list(getattr(mod.tqdm, "_instances", ())):
        try:
            bar.close()
        except Exception:  # noqa: BLE001 - a bar on a closed stream: nothing left to end
            pass


def _one_line(text: str, limit: int = 300) -> str:
    t = " ".join(str(text).split())
    return t if len(t) <= limit else t[: limit - 3] + "..."


def _escape_or_backslash(err: UnicodeEncodeError):
    """``surrogateescape`` where it applies (U+DC80..U+DCFF: the bytes of a file name that was not
    UTF-8, written back as they were), a backslash escape for anything else it cannot encode (a lone
    surrogate such as U+D800)."""
    bad = err.object[err.start:err.end]
    if all(0xDC80 <= ord(ch) <= 0xDCFF for ch in bad):
        return codecs.lookup_error("surrogateescape")(err)
    return codecs.lookup_error("backslashreplace")(err)


codecs.register_error("wgref.surrogateescape", _escape_or_backslash)


def _tolerant_streams():
    """stdout/stderr write unencodable characters (surrogates in file names) as backslash
    escapes instead of raising (a stream that uses surrogateescape, as under the C locale, keeps
    it for the bytes it can give back and escapes the rest); returns the function that puts the
    old setting back."""
    saved = []
    for s in (sys.stdout, sys.stderr):
        errors = getattr(s, "errors", None)
        if errors in (None, "backslashreplace", "surrogatepass", "replace", "wgref.surrogateescape"):
            continue
        try:
            s.reconfigure(errors="wgref.surrogateescape" if errors == "surrogateescape" else "backslashreplace")
            saved.append((s, errors))
        except (AttributeError, ValueError, OSError, TypeError):
            pass

    def restore():
        for s, errors in saved:
            try:
                s.reconfigure(errors=errors)
            except (AttributeError, ValueError, OSError, TypeError):
                pass
    return restore


def _quiet_broken_stdout() -> None:
    """After a closed pipe (``wgref ... | head``): point stdout at /dev/null so that the flush at
    interpreter exit does not complain a second time."""
    import os

    if sys.stdout is not sys.__stdout__:
        return
    try:
        fd = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def main(argv=None) -> int:
    """Run ``wgref ARGV`` and return its exit code.  Bad input is one line on stderr and exit 2
    (a WgrefError, or argparse's usage error); anything else that escapes a command is a bug:
    one line naming the command and the exception, exit 2, never a traceback.  A closed pipe
    exits quietly with 141, Ctrl-C with 130."""
    restore = _tolerant_streams()
    cmd = "wgref"
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        cmd = f"wgref {args.cmd}"
        if args.cmd == "record" and not args.what:
            args.what = list(RECORD_KINDS)  # the documented default: record every kind
        rc = COMMANDS[args.cmd](args)
        sys.stdout.flush()   # a closed pipe shows up here, not at interpreter exit
        return rc
    except WgrefError as e:
        msg = str(e)
        if "\n" in msg or "\r" in msg:
            msg = msg.replace("\r", "\\r").replace("\n", "\\n")
        _end_progress_lines()
        _say(f"wgref: error: {msg}")
        return 2
    except KeyboardInterrupt:
        _end_progress_lines()
        return 130
    except BrokenPipeError:
        _end_progress_lines()
        _quiet_broken_stdout()
        return 141
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001 - the guard: a bug is one line, not a traceback
        _end_progress_lines()
        _say(f"{cmd}: internal error: {type(e).__name__}: {_one_line(e) or 'no message'} ({REPORT_TO})")
        return 2
    finally:
        restore()


if __name__ == "__main__":
    sys.exit(main())
