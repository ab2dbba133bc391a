"""``wgref explain-dot``: one output element of one wgmma, explained bit by bit (every term's
exponent, its alignment to the largest, the window it keeps and the bits cut, the exact sum, the
final rounding); ``wgref explain-attention``: one attention output element's online softmax, step by step."""

from __future__ import annotations

import math

from refmodel.errors import InputError
from wgref.commands.common import check_output, command, emit_text, excerpt

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
    return emit_text(args.output, text, f"{args.format}, {len(text.encode())} bytes); D = {ex.result_hex} "
                     f"= {ex.result!r}")


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


@command("explain-attention")
def cmd_explain_attention(args) -> int:
    """One attention output element's online softmax, step by step."""
    import ml_dtypes
    import numpy as np

    from refmodel.golden import attention as A
    from wgref.commands.common import load_array
    from refmodel.render.attention_draw import render_attention_trace

    if args.output is not None:
        check_output(args.output)
    if args.case == "doc":
        if any(x is not None for x in (args.q, args.k, args.v)):
            raise InputError("--case doc gives its own q, k and v: leave out --q, --k and --v")
        rng = np.random.default_rng(20261206)
        q, k, v = (rng.standard_normal((200, 64)).astype(ml_dtypes.bfloat16) for _ in range(3))
        batch_heads = 1
        row = 150 if args.row is None else args.row
        col = 3 if args.col is None else args.col
    else:
        if args.q is None or args.k is None or args.v is None:
            raise InputError("give --q, --k and --v (.npy files of shape (S, D) or (B, H, S, D)), or --case doc")
        typed = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "e4m3": ml_dtypes.float8_e4m3fn}[args.dtype]
        q, k, v = (load_array(x, args.dtype) for x in (args.q, args.k, args.v))
        q, k, v = (x.view(typed) if x.dtype.kind == "u" else x for x in (q, k, v))
        batch_heads = q.shape[0] * q.shape[1] if q.ndim == 4 else 1
        if q.ndim == 4:
            if not (0 <= args.batch < q.shape[0] and 0 <= args.head < q.shape[1]):
                raise InputError(f"--batch/--head must name one of the {q.shape[0]} x {q.shape[1]} heads, got "
                                 f"{args.batch}, {args.head}")
            q, k, v = (x[args.batch, args.head] for x in (q, k, v))
        if q.ndim != 2 or k.ndim != 2 or v.ndim != 2:
            raise InputError(f"q, k and v must be (S, D) or (B, H, S, D) arrays, got {q.shape}, {k.shape}, {v.shape}")
        row, col = (0 if args.row is None else args.row), (0 if args.col is None else args.col)
    if not (0 <= row < q.shape[0] and 0 <= col < v.shape[1]):
        raise InputError(f"--row must be in 0..{q.shape[0] - 1} and --col in 0..{v.shape[1] - 1}, got {row}, {col}")
    trace = A.Trace(row, col)
    if args.backend == "flash":
        bh = args.batch_heads if args.batch_heads is not None else batch_heads
        if bh < 1:
            raise InputError(f"--batch-heads must be at least 1, got {bh}")
        ns = A.fa2_num_splits(bh, 1, q.shape[0], k.shape[0], q.shape[1])
        A.fa2_forward(q, k, v, is_causal=args.causal, num_splits=ns, trace=trace)
    elif args.backend == "efficient":
        A.memeff_forward(q, k, v, is_causal=args.causal, trace=trace)
    else:
        A.flex_forward(q, k, v, is_causal=args.causal, trace=trace)
    verified = args.backend in A.VERIFIED
    label = "" if verified else " (a draft schedule: not yet reproduced bit for bit on the hardware)"
    text = render_attention_trace(trace, backend=args.backend, shape=(q.shape[0], k.shape[0], q.shape[1]),
                                  causal=args.causal, dtype={"bfloat16": "bf16", "float16": "f16",
                                                             "float8_e4m3fn": "e4m3"}.get(str(q.dtype), str(q.dtype)),
                                  label=label)
    return emit_text(args.output, text, f"{len(text.encode())} bytes")


def add_explain_attention_parser(sub) -> None:
    """``wgref explain-attention``: one attention output element explained."""
    ex = sub.add_parser("explain-attention", help="explain one attention output element: which key blocks it "
                        "summed and in what order, the running max and rescale, where each rounding happened")
    ex.add_argument("--backend", default="flash", choices=["flash", "flex", "efficient"],
                    help="flash: SDPA's FlashAttention-2 kernels (torch 2.11); flex: FlexAttention's template; "
                    "efficient: SDPA's memory-efficient (CUTLASS) kernels")
    ex.add_argument("--q", default=None, help="q .npy, (S, D) or (B, H, S, D), bf16 or f16")
    ex.add_argument("--k", default=None, help="k .npy, like q")
    ex.add_argument("--v", default=None, help="v .npy, like q")
    ex.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "e4m3"], help="the type of inputs numpy "
                    "saved as raw words (it writes ml_dtypes' types as |V2 or |V1); e4m3: FlexAttention only; "
                    "default bf16")
    ex.add_argument("--batch", type=int, default=0, help="batch of a (B, H, S, D) input (default 0)")
    ex.add_argument("--head", type=int, default=0, help="head of a (B, H, S, D) input (default 0)")
    ex.add_argument("--batch-heads", type=int, default=None, help="flash: batch x heads of the whole call, on which "
                    "ATen's split-KV choice depends (default: those of the input, 1 for an (S, D) one)")
    ex.add_argument("--row", type=int, default=None, help="query row (default 0; --case doc: 150)")
    ex.add_argument("--col", type=int, default=None, help="output column (default 0; --case doc: 3)")
    ex.add_argument("--causal", action="store_true", help="causal attention")
    ex.add_argument("--case", default=None, choices=["doc"], help="doc: a seeded 200 x 64 bf16 case")
    ex.add_argument("-o", "--output", default=None, help="write here (atomically) instead of stdout")


__all__ = ["add_explain_attention_parser", "add_explain_parser", "cmd_explain_attention", "cmd_explain_dot",
           "parse_value", "parse_values"]
