"""FP8 and numerics commands: ``cvt`` (one value to FP8, explained), ``formats`` (the 256 codes
of a format), ``quantize`` (an array to FP8 with a scaling recipe) and ``error`` (accumulation
error vs K)."""

from __future__ import annotations

import numpy as np

from wgref.commands.common import UsageError, check_output, command, excerpt, json, number_text, shown

_SRC_DTYPES = {"f32": np.float32, "f16": np.float16, "f64": np.float64}


def _parse_value(text: str, src: str) -> np.ndarray:
    import ml_dtypes

    dtypes = dict(_SRC_DTYPES, bf16=ml_dtypes.bfloat16)
    if src not in dtypes:
        raise UsageError(f"--from must be one of {', '.join(dtypes)}, got {excerpt(src)}")
    dt = np.dtype(dtypes[src])
    t = number_text(text, "the value").strip().lower()
    if t.startswith(("0x", "-0x")) and "p" not in t:
        try:
            bits = int(t, 16)
        except ValueError:
            raise UsageError(f"cannot parse {excerpt(text)} as hex bits") from None
        if bits < 0 or bits >= 1 << (8 * dt.itemsize):
            raise UsageError(f"{excerpt(text)} does not fit in the {8 * dt.itemsize} bits of {src}")
        utype = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
        return np.array(bits, dtype=utype).view(dt)
    try:
        v = float.fromhex(t) if "p" in t else float(t)
    except OverflowError:  # a hex float beyond float64: the IEEE result, as 1e400 gives inf
        v = float("-inf") if t.startswith("-") else float("inf")
    except ValueError:
        raise UsageError(f"cannot parse {excerpt(text)} as a number (decimal, hex float like 0x1.8p3, "
                         "inf, nan, or 0x-prefixed bit pattern)") from None
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.array(v, dtype=dt)


def explain_cvt(x: np.ndarray, fmt: str, policy: str) -> dict:
    """What converting one value ``x`` (a 0-d float64/32/16 or bfloat16 array) to ``fmt`` under
    ``policy`` did, the terms used one way under every policy:

    * ``overflow``: a finite input whose correctly rounded value lies beyond +-max (the largest
      finite value: 448 for e4m3, 57344 for e5m2), so the policy decides the result;
    * ``clamped``: the policy wrote +-max in place of an overflow or an infinite input
      (satfinite, and relu for positive results);
    * ``saturated``: the input lies beyond +-max (an infinity included) and the result is +-max,
      whether by clamping or because the input rounds to max anyway (450 -> 448 under every
      policy: saturated, no overflow, not clamped);
    * ``rounding``: ``exact``, ``up (toward +inf)``, ``down (toward -inf)``, ``nan`` (a NaN input)
      or ``overflow`` (an overflow or an infinity that became NaN or Inf: e4m3 has no Inf).

    Returns those keys plus ``code``, ``value``, ``relu_zeroed`` and ``range`` (one sentence)."""
    from refmodel.numerics.formats import fp8_spec
    from refmodel.numerics.fp8 import decode, encode

    spec = fp8_spec(fmt)
    code = int(encode(x, spec, policy))
    val = float(decode(np.uint8(code), spec))
    unclamped = float(decode(np.uint8(int(encode(x, spec, "nosat"))), spec))
    xv = float(x.astype(np.float64))
    top = float(spec.max)
    nan_in, inf_in = bool(np.isnan(xv)), bool(np.isinf(xv))
    overflow = not nan_in and not inf_in and not np.isfinite(unclamped)
    at_max = np.isfinite(val) and (code & 0x7F) == spec.max_code
    clamped = (overflow or inf_in) and bool(at_max)
    saturated = not nan_in and abs(xv) > top and bool(at_max)
    relu_zeroed = policy == "relu" and not nan_in and bool(np.signbit(xv)) and xv != 0
    if nan_in:
        rounding = "nan"
    elif (overflow or inf_in) and not np.isfinite(val) and val != xv:
        rounding = "overflow"
    elif val == xv:
        rounding = "exact"
    else:
        rounding = "up (toward +inf)" if val > xv else "down (toward -inf)"
    lim = f"+-{top:g} (the largest finite {spec.name})"
    if nan_in:
        sentence = "NaN in: the canonical NaN 0x7F out (sign dropped), under every policy"
    elif relu_zeroed:
        sentence = ("negative input: relu makes the result +0"
                    + (" (it overflows first)" if overflow else " (-Inf included)" if inf_in else ""))
    elif clamped:
        sentence = (f"{'overflow: it rounds beyond ' + lim if overflow else 'infinite input'}; {policy} clamps it "
                    f"to {val:g}: saturated")
    elif inf_in and val == xv:
        sentence = f"infinite input: {spec.name} has Inf and {policy} keeps it: not saturated"
    elif overflow or inf_in:
        what = f"{xv!r} rounds beyond {lim}" if overflow else "infinite input"
        sentence = f"{what}; {policy} does not clamp: not saturated"
    elif saturated:
        sentence = (f"beyond {lim} but within half a step of it, so it rounds to {val:g} under every policy: "
                    "saturated by rounding, no overflow, nothing clamped")
    else:
        sentence = f"in range (|x| <= {top:g}): no overflow, not saturated"
    return {"code": code, "value": val, "rounding": rounding, "overflow": bool(overflow), "clamped": bool(clamped),
            "saturated": bool(saturated), "relu_zeroed": bool(relu_zeroed), "range": sentence}


@command("cvt")
def cmd_cvt(args) -> int:
    from refmodel.numerics.formats import fp8_spec

    spec = fp8_spec(args.to)
    x = _parse_value(args.value, args.src)
    ex = explain_cvt(x, args.to, args.policy)
    code, val = ex["code"], ex["value"]
    xv = float(x.astype(np.float64))
    sign, e, m = code >> 7, (code >> spec.mbits) & ((1 << spec.ebits) - 1), code & ((1 << spec.mbits) - 1)
    info = {
        "input": args.value, "from": args.src, "input_value": repr(xv),
        "format": spec.name, "policy": args.policy, "code": f"0x{code:02X}",
        "binary": f"{sign}.{e:0{spec.ebits}b}.{m:0{spec.mbits}b}", "value": repr(val),
        "rounding": ex["rounding"], "overflow": ex["overflow"], "clamped": ex["clamped"],
        "saturated": ex["saturated"], "relu_zeroed": ex["relu_zeroed"],
    }
    if args.json:
        print(json.dumps(info))
    else:
        print(f"{args.src} {xv!r} -> {spec.name} ({args.policy}) code {info['code']} "
              f"= {info['binary']} (sign.exponent.mantissa)")
        r = ex["rounding"]
        how = {"nan": "NaN input", "overflow": f"overflow -> {'NaN (e4m3 has no Inf)' if np.isnan(val) else 'Inf'}",
               "exact": "exact"}.get(r, f"rounded {r}")
        print(f"value {val!r}; {how}; {ex['range']}")
    return 0


def format_table(fmt: str) -> list[dict]:
    """One row per code of an FP8 format: code, bits, class, value."""
    from refmodel.numerics.formats import decode_scalar, fp8_spec

    spec = fp8_spec(fmt)
    rows = []
    for c in range(256):
        s, e, m = c >> 7, (c >> spec.mbits) & ((1 << spec.ebits) - 1), c & ((1 << spec.mbits) - 1)
        v = decode_scalar(c, spec)
        if spec.is_nan_code(c):
            cls = "nan"
        elif np.isinf(v):
            cls = "inf"
        elif v == 0:
            cls = "zero"
        elif e == 0:
            cls = "subnormal"
        else:
            cls = "max" if (c & 0x7F) == spec.max_code else "normal"
        rows.append({"code": f"0x{c:02X}", "bits": f"{s}.{e:0{spec.ebits}b}.{m:0{spec.mbits}b}",
                     "class": cls, "value": v})
    return rows


@command("formats")
def cmd_formats(args) -> int:
    rows = format_table(args.fmt)
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"{'code':<6}{'s.exp.man':<12}{'class':<11}value")
    for r in rows:
        print(f"{r['code']:<6}{r['bits']:<12}{r['class']:<11}{r['value']!r}")
    return 0


def _round_trip(x, codes, scales, args) -> dict:
    """What the round trip did, truthfully: the relative error over the finite inputs, and
    how many inputs saturated (+-Inf, or beyond the scaled range, clipped to +-max)."""
    from refmodel.numerics import scaling
    from refmodel.numerics.formats import fp8_spec

    spec = fp8_spec(args.fmt)
    deq = scaling.dequantize(codes, scales, args.fmt, args.granularity).astype(np.float64)
    xf = scaling._to_f32(x).astype(np.float64)
    with np.errstate(all="ignore"):
        finite = np.isfinite(xf)
        sat = (~np.isnan(xf) & ((np.asarray(codes) & 0x7F) == spec.max_code)
               & (np.abs(xf) > np.abs(deq)))
        err = np.abs(deq - xf)[finite]
        norm = float(np.linalg.norm(xf[finite])) if err.size else 0.0
        if not err.size:
            rel = None  # nothing finite to measure the error on
        elif norm == 0.0:
            rel = 0.0 if not np.any(err) else float("inf")
        else:
            rel = float(np.linalg.norm(err) / norm)
    return {"relative_error": rel, "finite": int(finite.sum()), "saturated": int(sat.sum()),
            "nan": int(np.isnan(xf).sum())}


@command("quantize")
def cmd_quantize(args) -> int:
    from refmodel.fileio import load_npy, save_npz
    from refmodel.numerics import scaling

    check_output(args.output, args.input)  # before any work: never a device, a directory or the input
    x = load_npy(args.input)
    codes, scales = scaling.quantize(x, args.fmt, args.granularity, scale_format=args.scale_format)
    check_output(args.output, args.input)
    # atomically (temp file + os.replace): a killed run leaves the previous file or none
    save_npz(args.output, codes=codes, scales=scales,
             fmt=np.array(args.fmt), granularity=np.array(args.granularity),
             scale_format=np.array(args.scale_format))
    rt = _round_trip(x, codes, scales, args)
    rel, size = rt["relative_error"], int(np.size(x))
    msg = {"output": args.output, "shape": list(x.shape), "scales_shape": list(np.shape(scales)), **rt}
    if rel is None:
        err_text = (f"no finite inputs to measure a round-trip error on "
                    f"({rt['saturated']} of {size} saturated, {rt['nan']} NaN)")
    else:
        err_text = f"round-trip relative error {rel:.3e} over the {rt['finite']} finite inputs"
        if rt["saturated"]:
            err_text += f"; {rt['saturated']} of {size} inputs saturated (clipped to +-max)"
    print(json.dumps(msg) if args.json else
          f"wrote {shown(args.output)}: codes {x.shape} uint8, scales {np.shape(scales)}; {err_text}")
    return 0


@command("error")
def cmd_error(args) -> int:
    from refmodel.numerics.error_report import error_vs_k, format_table, plot_error_vs_k

    if args.plot is not None:
        check_output(args.plot)  # before the (long) computation
    try:
        ks = [int(k) for k in args.k.split(",")]
    except ValueError:
        raise UsageError(f"--k must be comma-separated integers, got {excerpt(args.k)}") from None
    try:
        promote = [None if p.strip() in ("none", "0") else int(p) for p in args.promote.split(",")]
    except ValueError:
        raise UsageError(f"--promote must be comma-separated integers or 'none', got {excerpt(args.promote)}") from None
    rows = error_vs_k(args.instr, ks, promote, dist=args.dist, seed=args.seed,
                      promote_op=args.promote_op)
    if args.json:
        print(json.dumps(rows))
    else:
        print(format_table(rows))
    if args.plot is not None:
        try:
            plot_error_vs_k(rows, args.plot)
        except ImportError as e:
            raise UsageError(str(e)) from None
        if not args.json:
            print(f"plot written to {shown(args.plot)}")
    return 0


def add_cvt_parser(sub) -> None:
    """``wgref cvt``: one value to FP8, explained."""
    c = sub.add_parser("cvt", help="convert one value to FP8 and explain the result")
    c.add_argument("value", help="decimal, hex float (0x1.8p3), inf, nan, or 0x-prefixed bit pattern")
    c.add_argument("--to", required=True, choices=["e4m3", "e5m2"])
    c.add_argument("--policy", default="satfinite", choices=["satfinite", "nosat", "relu"])
    c.add_argument("--from", dest="src", default="f32", help="source format: f32 (default), f16, bf16, f64")
    c.add_argument("--json", action="store_true")


def add_formats_parser(sub) -> None:
    """``wgref formats``: the 256 codes of an FP8 format."""
    f = sub.add_parser("formats", help="table of all 256 codes of an FP8 format")
    f.add_argument("fmt", choices=["e4m3", "e5m2"])
    f.add_argument("--json", action="store_true")


def add_quantize_parser(sub) -> None:
    """``wgref quantize``: a .npy array to FP8 codes and scales."""
    q = sub.add_parser("quantize", help="quantize a .npy array to FP8 with a scaling recipe")
    q.add_argument("input")
    q.add_argument("--fmt", required=True, choices=["e4m3", "e5m2"])
    q.add_argument("--granularity", default="tensor", help="tensor, row, col, or a tile RxC such as 1x128")
    q.add_argument("--scale-format", default="f32", choices=["f32", "e8m0"])
    q.add_argument("-o", "--output", required=True)
    q.add_argument("--json", action="store_true")


def add_error_parser(sub) -> None:
    """``wgref error``: relative error vs K per promotion interval."""
    e = sub.add_parser("error", help="relative error vs float64 as a function of K, per promotion interval")
    e.add_argument("--instr", default="wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3")
    e.add_argument("--k", default="512,1024,2048,4096,8192,16384", help="comma-separated K values")
    e.add_argument("--promote", default="none,1,4,16", help="promotion intervals in instructions (none = never)")
    e.add_argument("--dist", default="uniform", choices=["uniform", "normal"])
    e.add_argument("--promote-op", default="fma", choices=["fma", "fma_exact", "mul_add"])
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--plot", default=None, help="write a PNG plot here (needs matplotlib)")
    e.add_argument("--json", action="store_true")

