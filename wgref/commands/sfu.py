"""``wgref sfu OP X [Y]``: one special-function-unit evaluation, explained step by step."""

from __future__ import annotations

import json

import numpy as np

from wgref.commands.common import command


def add_sfu_parser(sub) -> None:
    """``wgref sfu``: one SFU instruction on one value, with the table entry and fixed-point steps."""
    s = sub.add_parser("sfu", help="evaluate one SFU instruction (ex2/lg2/rcp/rsqrt/sqrt/sin/cos/tanh/div "
                                   "f32 forms) on a value and explain it")
    s.add_argument("op", help="PTX spelling, e.g. ex2.approx.ftz.f32, div.full.f32")
    s.add_argument("x", help="decimal, hex float (0x1.8p3), inf, nan, or 0x-prefixed float32 bit pattern")
    s.add_argument("y", nargs="?", default=None, help="the divisor of a div form")
    s.add_argument("--json", action="store_true")


@command("sfu")
def cmd_sfu(args) -> int:
    from refmodel.numerics.sfu.explain import explain, render
    from wgref.commands.fp8 import _parse_value

    def value(text):
        return int(_parse_value(text, "f32").view(np.uint32))

    res = explain(args.op, value(args.x), None if args.y is None else value(args.y))
    if args.json:
        t = dict(res["trace"])
        if "coefficients" in t:
            t["coefficients"] = list(t["coefficients"])
        print(json.dumps({**res, "trace": t}))
    else:
        print(render(res))
    return 0
