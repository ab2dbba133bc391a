"""``wgref explain-dot``: one output element of one wgmma, explained bit by bit (every term's
exponent, its alignment to the largest, the window it keeps and the bits cut, the exact sum, the
final rounding)."""

from __future__ import annotations

import math
import sys

from refmodel.errors import InputError
from wgref.commands.common import check_output, command, excerpt, shown, write_text

MAX_TOKEN = 64          # characters of one value


def parse_value(text: str, what: str) -> float:
    """One value: decimal (``1.5``, ``-3e-2``), hex float (``0x1.8p-3``), ``inf``, ``-inf`` or ``nan``."""
    t = str(text).strip()
    if not t or len(t) > MAX_TOKEN:
        raise InputError(f"{what}: expected a number, got {excerpt(text)}")
    try:
        body = t.lstrip("+-")
        v = float.fromhex(t) if body.lower().startswith("0x") else float(t)
    except (ValueError, OverflowError):
        raise InputError(f"{what}: cannot read {excerpt(text)} as a number (decimal, hex float like 0x1.8p-3, "
                         f"inf or nan)") from None
    if math.isinf(v) and "inf" not in body.lower():
        raise InputError(f"{what}: {excerpt(text)} is beyond every wgmma format's range (write inf for an infinity)")
    return v


def parse_values(text: str, what: str) -> list[float]:
    """Comma-separated values (see :func:`parse_value`)."""
    parts = str(text).split(",")
    if len(parts) > 64:
        raise InputError(f"{what}: at most 32 values (one wgmma's K), got {len(parts)}")
    return [parse_value(p, f"{what}[{i}]") for i, p in enumerate(parts)]


@command("explain-dot")
def cmd_explain_dot(args) -> int:
    """Explain one output element d = sum_k a_k b_k + c of one wgmma."""
    from refmodel.numerics.explain import DOC_CASE, explain_dot
    from refmodel.render.explain_draw import render_explain

    if args.output is not None:
        check_output(args.output)
    if args.case == "doc":
        if args.a is not None or args.b is not None or args.c is not None:
            raise InputError("--case doc gives its own a, b and c: leave out --a, --b and --c")
        kw = dict(DOC_CASE)
        ex = explain_dot(kw.pop("a"), kw.pop("b"), kw.pop("c"), **kw)
    else:
        if args.a is None or args.b is None:
            raise InputError("give --a and --b (comma-separated values), or --case doc")
        a, b = parse_values(args.a, "--a"), parse_values(args.b, "--b")
        c = parse_value(args.c, "--c") if args.c is not None else None
        ex = explain_dot(a, b, c, dtype_ab=args.dtype, dtype_b=args.dtype_b, dtype_d=args.acc)
    text = render_explain(ex, args.format)
    if args.output is not None:
        write_text(args.output, text)
        print(f"wrote {shown(args.output)} ({args.format}, {len(text.encode())} bytes); D = {ex.result_hex} "
              f"= {ex.result!r}")
    else:
        sys.stdout.write(text)
    return 0


def add_explain_parser(sub) -> None:
    """``wgref explain-dot``: one wgmma output element explained."""
    ex = sub.add_parser("explain-dot", help="explain one output element of one wgmma: every term's exponent, "
                        "alignment, kept window and cut bits, the sum, the final rounding")
    ex.add_argument("--dtype", default="e4m3", help="A (and B) type: e4m3 e5m2 f16 bf16 tf32 (default e4m3)")
    ex.add_argument("--dtype-b", default=None, help="B type when it differs (e4m3 with e5m2)")
    ex.add_argument("--acc", default="f32", help="accumulator: f32 or f16 (default f32)")
    ex.add_argument("--a", default=None, help="A row: comma-separated values, at most K (missing ones are 0)")
    ex.add_argument("--b", default=None, help="B column: as many values as --a")
    ex.add_argument("--c", default=None, help="the accumulator C (default +0)")
    ex.add_argument("--case", default=None, choices=["doc"],
                    help="doc: docs/accumulator.md's C = 1 + 2^-20, A = 0 -> 1.0 (e4m3, f32)")
    ex.add_argument("--format", default="ascii", choices=["ascii", "svg", "html"])
    ex.add_argument("-o", "--output", default=None, help="write here (atomically) instead of stdout")


__all__ = ["add_explain_parser", "cmd_explain_dot", "parse_value", "parse_values"]
