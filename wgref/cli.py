"""The ``wgref`` command line.

Exit codes: 0 success / all match, 1 mismatch, 2 usage or environment error.
Bad input gets one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json as _stdjson
import re
import sys
import time
import types
from typing import Callable

import numpy as np

from refmodel.errors import WgrefError
from refmodel.validate import dumps_strict

# every --json output is strict JSON: NaN / +-Inf are written as the strings "nan", "inf",
# "-inf" (json.dumps would write NaN / Infinity, which strict parsers reject)
json = types.SimpleNamespace(dumps=dumps_strict, loads=_stdjson.loads)

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


class UsageError(WgrefError, ValueError):
    pass


def command(name):
    def deco(fn):
        COMMANDS[name] = fn
        return fn
    return deco


# ----------------------------------------------------------------------------- cvt

_SRC_DTYPES = {"f32": np.float32, "f16": np.float16, "f64": np.float64}


def _parse_value(text: str, src: str) -> np.ndarray:
    import ml_dtypes

    dtypes = dict(_SRC_DTYPES, bf16=ml_dtypes.bfloat16)
    if src not in dtypes:
        raise UsageError(f"--from must be one of {', '.join(dtypes)}, got {src!r}")
    dt = np.dtype(dtypes[src])
    t = text.strip().lower()
    if t.startswith(("0x", "-0x")) and "p" not in t:
        try:
            bits = int(t, 16)
        except ValueError:
            raise UsageError(f"cannot parse {text!r} as hex bits") from None
        if bits < 0 or bits >= 1 << (8 * dt.itemsize):
            raise UsageError(f"{text!r} does not fit in the {8 * dt.itemsize} bits of {src}")
        utype = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
        return np.array(bits, dtype=utype).view(dt)
    try:
        v = float.fromhex(t) if "p" in t else float(t)
    except ValueError:
        raise UsageError(f"cannot parse {text!r} as a number (decimal, hex float like 0x1.8p3, "
                         "inf, nan, or 0x-prefixed bit pattern)") from None
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.array(v, dtype=dt)


@command("cvt")
def cmd_cvt(args) -> int:
    from refmodel.numerics.formats import fp8_spec
    from refmodel.numerics.fp8 import decode, encode

    spec = fp8_spec(args.to)
    x = _parse_value(args.value, args.src)
    code = int(encode(x, spec, args.policy))
    val = float(decode(np.uint8(code), spec))
    xv = float(x.astype(np.float64))
    if np.isnan(xv) or np.isnan(val):
        direction = "nan"
    elif val == xv:
        direction = "exact"
    else:
        direction = "up (toward +inf)" if val > xv else "down (toward -inf)"
    mag = code & 0x7F
    saturated = (args.policy != "nosat" and not np.isnan(xv)
                 and (abs(xv) > spec.max or np.isinf(xv)) and mag == spec.max_code)
    relu_zeroed = args.policy == "relu" and (np.signbit(xv) and not np.isnan(xv)) and xv != 0
    sign, e, m = code >> 7, (code >> spec.mbits) & ((1 << spec.ebits) - 1), code & ((1 << spec.mbits) - 1)
    info = {
        "input": args.value, "from": args.src, "input_value": repr(xv),
        "format": spec.name, "policy": args.policy, "code": f"0x{code:02X}",
        "binary": f"{sign}.{e:0{spec.ebits}b}.{m:0{spec.mbits}b}", "value": repr(val),
        "rounding": direction, "saturated": bool(saturated), "relu_zeroed": bool(relu_zeroed),
    }
    if args.json:
        print(json.dumps(info))
    else:
        print(f"{args.src} {xv!r} -> {spec.name} ({args.policy}) code {info['code']} "
              f"= {info['binary']} (sign.exponent.mantissa)")
        print(f"value {val!r}; rounded {direction}; saturated: {'yes' if saturated else 'no'}"
              + ("; negative input zeroed by relu" if relu_zeroed else ""))
    return 0


# ----------------------------------------------------------------------------- formats

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


# ----------------------------------------------------------------------------- quantize

@command("quantize")
def cmd_quantize(args) -> int:
    from refmodel.fileio import load_npy, save_npz
    from refmodel.numerics import scaling

    x = load_npy(args.input)
    codes, scales = scaling.quantize(x, args.fmt, args.granularity, scale_format=args.scale_format)
    # atomically (temp file + os.replace): a killed run leaves the previous file or none
    save_npz(args.output, codes=codes, scales=scales,
             fmt=np.array(args.fmt), granularity=np.array(args.granularity),
             scale_format=np.array(args.scale_format))
    deq = scaling.dequantize(codes, scales, args.fmt, args.granularity)
    xf = scaling._to_f32(x).astype(np.float64)
    finite = np.isfinite(xf)
    err = np.abs(deq.astype(np.float64) - xf)[finite]
    rel = float(np.linalg.norm(err) / max(np.linalg.norm(xf[finite]), 1e-300)) if err.size else 0.0
    msg = {"output": args.output, "shape": list(x.shape), "scales_shape": list(np.shape(scales)),
           "relative_error": rel}
    print(json.dumps(msg) if args.json else
          f"wrote {args.output}: codes {x.shape} uint8, scales {np.shape(scales)}; "
          f"round-trip relative error {rel:.3e}")
    return 0


# ----------------------------------------------------------------------------- verify

@command("verify")
def cmd_verify(args) -> int:
    """Replay every fixture (default: every stored output, the 2^32 sweeps recomputed)."""
    from refmodel.verify.fixtures import default_root, FIXTURE_ROOT_ENV
    from refmodel.verify.replay import verify_all

    root = args.fixtures or default_root()
    from pathlib import Path

    if not Path(root).is_dir() or not any(Path(root).glob("*/manifest.json")):
        print(f"wgref: error: no fixtures found in {root}: pass --fixtures DIR or set {FIXTURE_ROOT_ENV}",
              file=sys.stderr)
        return 2
    full = not args.quick
    rows, scopes = [], []
    t0 = time.time()
    progress = (not args.json) and sys.stderr.isatty()
    for feature, entry, res in verify_all(root, full=full, features=args.feature, progress=progress):
        prov = entry.get("provenance") or {}
        recorded = f"{prov.get('device', '?')} {str(prov.get('date', '?'))[:10]}" if prov else "-"
        if isinstance(res, Exception):
            short = getattr(res, "short", None) or f"{res.__class__.__name__}: {str(res)[:80]}"
            rows.append({"feature": feature, "fixture": entry.get("file", "?"), "cases": 0, "mismatches": None,
                         "error": f"{res.__class__.__name__}: {res}", "short": short, "recorded": recorded})
            continue
        rows.append({"feature": feature, "fixture": entry["file"], "cases": res.cases,
                     "mismatches": res.mismatches, "details": res.details, "recorded": recorded,
                     "complete": res.complete, "scope": res.scope})
        if res.scope:
            scopes.append(res.scope)
    if not rows:
        print(f"wgref: error: no fixtures selected in {root}", file=sys.stderr)
        return 2
    errors = [{"feature": r["feature"], "fixture": r["fixture"], "error": r["error"], "short": r["short"]}
              for r in rows if r["mismatches"] is None]
    checked = [r for r in rows if r["mismatches"] is not None]
    total = sum(r["cases"] for r in checked)
    bad = sum(r["mismatches"] for r in checked)
    worst = 1 if (bad or errors) else 0
    scope = "; ".join(dict.fromkeys(scopes)) or "every stored output"
    if not full:
        scope += " (without --quick every stored output is checked)"
    summary = (f"{len(checked)} fixtures checked, {total} hardware outputs, {bad} mismatches"
               + (f", {len(errors)} fixture(s) could not be checked: "
                  + ", ".join(f"{e['feature']}/{e['fixture']} ({e['short']})" for e in errors) if errors else "")
               + f"; checked: {scope}; {time.time() - t0:.1f}s")
    if args.json:
        print(json.dumps({"rows": rows, "errors": errors, "checked": scope, "mode": "full" if full else "quick",
                          "fixtures_checked": len(checked), "outputs": total, "mismatches": bad,
                          "seconds": round(time.time() - t0, 2), "summary": summary, "ok": worst == 0}))
        return worst
    print(f"{'feature':<12}{'fixture':<32}{'cases':>14}{'mismatches':>12}  recorded on")
    for r in rows:
        mm = "ERROR" if r["mismatches"] is None else r["mismatches"]
        print(f"{r['feature']:<12}{r['fixture']:<32}{r['cases']:>14}{mm:>12}  {r['recorded']}")
        for d in r.get("details", [])[:3]:
            print(f"    {d}")
        if "error" in r:
            print(f"    {r['error']}")
    print(summary)
    return worst


# ----------------------------------------------------------------------------- diff

def _load_array(path: str) -> np.ndarray:
    from refmodel.fileio import load_npy, load_npz

    if path.endswith(".npz"):
        raise UsageError(f"{path}: give a .npy file (one array), or NAME.npz:key")
    if ".npz:" in path:
        f, key = path.split(".npz:", 1)
        z = load_npz(f + ".npz")
        if key not in z:
            raise UsageError(f"{f}.npz has no array {key!r}; it has {', '.join(z) or 'none'}")
        return z[key]
    return load_npy(path)


@command("diff")
def cmd_diff(args) -> int:
    from refmodel.verify.differ import diff

    got, want = _load_array(args.got), _load_array(args.want)
    rep = diff(got, want, fmt=args.fmt, nan_equal=args.nan_equal, name=args.name or "diff")
    if args.junit:
        from refmodel.fileio import atomic_write_text

        atomic_write_text(args.junit, rep.to_junit())
    print(rep.to_json() if args.json else rep.to_text())
    return 0 if rep.ok else 1


# ----------------------------------------------------------------------------- golden

_GOLDEN_DT = ("e4m3", "e5m2", "f16", "bf16", "f32")


def _as_dtype(x: np.ndarray, name: str, dt: str) -> np.ndarray:
    """An array loaded from .npy as ``dt``: raw codes (unsigned ints), or the saved dtype itself
    (ml_dtypes arrays come back from np.save as void of the same width)."""
    from refmodel.dtypes import element_dtype

    want = np.dtype(element_dtype(dt))
    if x.dtype == want:
        return x
    if x.dtype.kind in "uV" and x.dtype.itemsize == want.itemsize:
        return x.view(want)
    raise UsageError(f"{name} must hold {dt} values or {8 * want.itemsize}-bit codes, got {x.dtype}")


@command("golden")
def cmd_golden(args) -> int:
    from refmodel.dtypes import bits_of, element_dtype
    from refmodel.fileio import atomic_write

    a, b = _load_array(args.a), _load_array(args.b)
    if args.library == "triton":
        from refmodel.golden import triton_matmul

        if args.block_k is None:
            raise UsageError("wgref golden triton needs --block-k (the kernel's BLOCK_K)")
        d = triton_matmul(_as_dtype(a, "a", args.dtype), _as_dtype(b, "b", args.dtype), block_k=args.block_k,
                          input_precision=args.input_precision, max_num_imprecise_acc=args.imp,
                          out_dtype=np.dtype(element_dtype(args.out_dtype)))
    elif args.library == "cutlass":
        from refmodel.golden import cutlass_dense_gemm

        if args.dtype not in ("e4m3", "e5m2", "bf16", "f16"):
            raise UsageError(f"cutlass inputs are e4m3, e5m2, bf16 or f16, got --dtype {args.dtype}")
        d = cutlass_dense_gemm(_as_dtype(a, "a", args.dtype), _as_dtype(b, "b", args.dtype), acc_dtype=args.acc,
                               out_dtype=np.dtype(element_dtype(args.out_dtype)),
                               mma_promotion_interval=args.promotion_interval)
    elif args.library == "cublas":
        from refmodel.golden import cublas_matmul, cublas_schedule

        if args.dtype not in ("e4m3", "e5m2", "bf16", "f16"):
            raise UsageError(f"cublas inputs are e4m3, e5m2, bf16 or f16, got --dtype {args.dtype}")
        aa, bb = _as_dtype(a, "a", args.dtype), _as_dtype(b, "b", args.dtype)
        if args.kernel:
            kw = cublas_schedule(args.kernel.split(","), aa.shape[0], bb.shape[1], aa.shape[1]).kwargs()
        else:
            kw = {"splits": args.splits}
        d = cublas_matmul(aa, bb, **kw, out_dtype=args.out_dtype)
    else:  # torch._scaled_mm
        from refmodel.numerics.scaled_mm import scaled_mm

        if args.dtype not in ("e4m3", "e5m2"):
            raise UsageError(f"scaled-mm inputs are e4m3 or e5m2, got --dtype {args.dtype}")
        sa = _load_array(args.scale_a) if args.scale_a and args.scale_a.endswith(".npy") else np.float32(args.scale_a or 1)
        sb = _load_array(args.scale_b) if args.scale_b and args.scale_b.endswith(".npy") else np.float32(args.scale_b or 1)
        d = scaled_mm(_as_dtype(a, "a", args.dtype), _as_dtype(b, "b_nk", args.dtype), sa, sb,
                      out_dtype=args.out_dtype, use_fast_accum=args.fast_accum)
    bits = bits_of(d)
    atomic_write(args.output, lambda fh: np.save(fh, bits))
    print(f"wrote {args.output}: {d.shape[0]}x{d.shape[1]} {args.out_dtype} as raw bits ({bits.dtype}); "
          f"compare with: wgref diff {args.output} YOURS.npy --fmt {args.out_dtype}")
    return 0


# ----------------------------------------------------------------------------- error

@command("error")
def cmd_error(args) -> int:
    from refmodel.numerics.error_report import error_vs_k, format_table, plot_error_vs_k

    try:
        ks = [int(k) for k in args.k.split(",")]
    except ValueError:
        raise UsageError(f"--k must be comma-separated integers, got {args.k!r}") from None
    try:
        promote = [None if p.strip() in ("none", "0") else int(p) for p in args.promote.split(",")]
    except ValueError:
        raise UsageError(f"--promote must be comma-separated integers or 'none', got {args.promote!r}") from None
    rows = error_vs_k(args.instr, ks, promote, dist=args.dist, seed=args.seed,
                      promote_op=args.promote_op)
    if args.json:
        print(json.dumps(rows))
    else:
        print(format_table(rows))
    if args.plot:
        try:
            plot_error_vs_k(rows, args.plot)
        except ImportError as e:
            raise UsageError(str(e)) from None
        if not args.json:
            print(f"plot written to {args.plot}")
    return 0


# ----------------------------------------------------------------------------- fuzz / replay / record

@command("merge")
def cmd_merge(args) -> int:
    from refmodel.verify.journal import merge_journals

    rep = merge_journals(args.paths)
    _print_merged(rep, args.json)
    return 1 if rep.mismatches or rep.port_disagreements else (3 if rep.missing else 0)


def _seconds(text: str | None) -> float | None:
    if text is None:
        return None
    t = text.strip().lower()
    mult = {"s": 1, "m": 60, "h": 3600}.get(t[-1:], None)
    try:
        return float(t[:-1]) * mult if mult else float(t)
    except ValueError:
        raise UsageError(f"--time must look like 90, 90s, 5m or 1h, got {text!r}") from None


def _fuzz_worker_argv(args, workers: int) -> list[str]:
    """The options a ``--devices`` worker repeats (all but --shard, --devices, --out, --json)."""
    per = -(-args.cases // workers)  # --cases is this invocation's total, dealt among its workers
    argv = [args.target, "--cases", str(per), "--seed", str(args.seed), "--operand", args.operand]
    for flag, v in (("--families", args.families), ("--time", args.time), ("--chain", args.chain),
                    ("--inject-fault", args.inject_fault), ("--engine", args.engine),
                    ("--batch-tiles", args.batch_tiles)):
        if v is not None:
            argv += [flag, str(v)]
    for flag, v in (("--resume", args.resume), ("--keep-going", args.keep_going), ("--dry-run", args.dry_run)):
        if v:
            argv.append(flag)
    return argv


def _print_merged(rep, as_json: bool) -> None:
    if as_json:
        print(json.dumps(rep.to_dict()))
        return
    n = rep.shards[0][1]
    print(f"{len(rep.shards)} of {n} shards, {rep.batches} batches, {rep.tiles} tiles, {rep.outputs} outputs compared, "
          f"{rep.mismatches} mismatches; {rep.rate:.3g} outputs/s with the workers side by side "
          f"({rep.worker_seconds:.1f} worker-seconds)")
    if rep.port_disagreements:
        print(f"{rep.port_disagreements} outputs where the GPU port of the model disagreed with the CPU refmodel "
              "(a wgref bug: see the workers' mismatch_batch*.npz)")
    if rep.missing:
        print(f"partial: shards {', '.join(rep.missing)} missing")
    for r in rep.repros:
        print(f"minimal reproducer: {r}  (wgref replay {r})")


def _side_report(rep, as_json: bool, summary: str, where: str) -> int:
    """Print a cvt / layout / sparse campaign's report (JSON, or its summary and first mismatch)."""
    if as_json:
        print(json.dumps(rep.to_dict()))
    else:
        print(summary)
        if rep.repro:
            print(f"first mismatch: {rep.first['minimal']}  ({where})")
    return 1 if rep.mismatches else 0


_LIB_TARGETS = ("lib:triton", "lib:cublas", "lib:scaled-mm")


def _fuzz_library(args, target: str, shard: tuple[int, int], secs: float | None) -> int:
    """``wgref fuzz lib:...``: library calls on the GPU against their golden models (gpu.fuzz_library)."""
    if target not in _LIB_TARGETS:
        raise UsageError(f"unknown library target {target!r}; choose from {', '.join(_LIB_TARGETS)}")
    if args.devices or args.dry_run or args.engine == "gpu" or args.inject_fault:
        raise UsageError("--devices, --dry-run, --engine gpu and --inject-fault do not apply to lib: targets "
                         "(one process per campaign; split it with --shard)")
    if args.cases < 1:
        raise UsageError(f"--cases must be >= 1 (library calls), got {args.cases}")
    from gpu.fuzz_library import fuzz_library

    rep = fuzz_library(target, cases=args.cases, seed=args.seed, seconds=secs, out=args.out, shard=shard,
                       resume=args.resume, progress=not args.json)
    return _side_report(rep, args.json, f"{rep.calls} {target[4:]} calls ({rep.skipped} skipped), {rep.outputs} "
                        f"outputs compared, {rep.mismatches} mismatches, {rep.rate:.3g} outputs/s; journal "
                        f"{args.out}/journal.jsonl", f"saved to {rep.repro}")


def _parse_fault(text: str | None) -> tuple[int, int] | None:
    """``--inject-fault SHARD:BATCH`` as two non-negative ints (None when not given)."""
    if text is None:
        return None
    try:
        fs, fb = (int(x) for x in text.split(":"))
    except ValueError:
        raise UsageError(f"--inject-fault must look like SHARD:BATCH (e.g. 1:4), got {text!r}") from None
    if fs < 0 or fb < 0:
        raise UsageError(f"--inject-fault SHARD and BATCH must be >= 0, got {text!r}")
    return fs, fb


@command("fuzz")
def cmd_fuzz(args) -> int:
    from refmodel.verify.journal import parse_shard

    shard = parse_shard(args.shard) if args.shard else (0, 1)
    target, secs = args.target.strip(), _seconds(args.time)
    if target.startswith("lib:"):
        return _fuzz_library(args, target, shard, secs)
    if (args.shard or args.devices or args.dry_run) and target.startswith(("sparse", "layout", "cvt")):
        raise UsageError("--shard, --devices and --dry-run apply to wgmma targets "
                         "(cvt, layout and sparse campaigns run in one process)")
    if args.restarts < 0:
        raise UsageError(f"--restarts must be >= 0, got {args.restarts}")
    if args.engine == "gpu" and (args.dry_run or target.startswith(("sparse", "layout", "cvt"))):
        raise UsageError("--engine gpu runs dense wgmma targets on a GPU (no --dry-run, no cvt/layout/sparse)")
    if args.batch_tiles is not None and args.batch_tiles < 1:
        raise UsageError(f"--batch-tiles must be >= 1, got {args.batch_tiles}")
    fault_spec = _parse_fault(args.inject_fault)  # checked here, before any worker starts
    if not args.dry_run:
        from gpu.runtime import require_device

        require_device()  # one line saying what is missing, exit 2
    if args.devices:
        from gpu.campaign import parse_devices, run_workers

        if args.devices.strip() == "all":
            if args.dry_run:
                raise UsageError("--devices all counts GPUs; with --dry-run list the workers (e.g. 0,0,0)")
            from gpu.runtime import device_count

            devices = [str(i) for i in range(device_count())]
        else:
            devices = parse_devices(args.devices)
        rep, restarted = run_workers(_fuzz_worker_argv(args, len(devices)), devices, args.out, shard=shard,
                                     restarts=args.restarts, log=(lambda *_: None) if args.json else print)
        if args.json:
            print(json.dumps({**rep.to_dict(), "devices": devices, "restarts": restarted}))
        else:
            _print_merged(rep, False)
            for r in restarted:
                print(f"restarted: shard {r['shard']} on device {r['device']} after exit {r['exit']}")
        return 1 if rep.mismatches or rep.port_disagreements else 0
    from gpu.fuzz import fuzz, fuzz_cvt, fuzz_layout, fuzz_sparse

    if target.startswith("sparse"):
        rep = fuzz_sparse(target, cases=args.cases, seed=args.seed, seconds=secs, out=args.out)
        return _side_report(rep, args.json, f"{rep.tiles} sparse tiles, {rep.outputs} outputs compared, "
                            f"{rep.mismatches} mismatches, {rep.rate:.3g} outputs/s", f"wgref replay {rep.repro}")
    if target.startswith("layout"):
        rep = fuzz_layout(target, cases=args.cases, seed=args.seed, seconds=secs, out=args.out)
        return _side_report(rep, args.json, f"{rep.tiles} descriptor cases, {rep.outputs} outputs compared, "
                            f"{rep.mismatches} mismatches, {rep.rate:.3g} outputs/s", f"saved to {rep.repro}")
    if target.startswith("cvt"):
        rep = fuzz_cvt(args.target, cases=args.cases * 1024, seed=args.seed, seconds=secs, out=args.out)
        return _side_report(rep, args.json, f"{rep.outputs} conversions compared, {rep.mismatches} mismatches, "
                            f"{rep.rate:.3g}/s", f"saved to {rep.repro}")
    fams = [f for f in args.families.split(",") if f] if args.families else None
    from gpu.fuzz import model_device

    hw = model_device if args.dry_run else None
    fault_at = fault = None
    if fault_spec is not None:
        fs, fb = fault_spec
        if fs == shard[0]:
            fault_at = fb
            if not args.dry_run:
                from gpu.runtime import fault_illegal_address as fault
    if args.engine == "gpu":
        from gpu.fuzz_device import fuzz_device

        rep = fuzz_device(args.target, cases=args.cases, seed=args.seed, seconds=secs, out=args.out,
                          shard=shard, batch_tiles=args.batch_tiles or 8192, resume=args.resume,
                          fault_at=fault_at, progress=not args.json)
        if args.json:
            print(json.dumps(rep.to_dict()))
        else:
            print(f"{rep.tiles} tiles, {rep.outputs} outputs compared on the GPU, {rep.mismatches} mismatches "
                  f"(CPU-confirmed), {rep.port_disagreements} GPU-port disagreements, {rep.tiles_copied_back} tiles "
                  f"copied back; {rep.rate:.3g} outputs/s; journal {args.out}/journal.jsonl")
        return 1 if rep.mismatches or rep.port_disagreements else 0
    rep = fuzz(args.target, cases=args.cases, seed=args.seed, families=fams,
               seconds=secs, rs={"ss": False, "rs": True}.get(args.operand),
               chain=args.chain, out=args.out, resume=args.resume, keep_going=args.keep_going,
               progress=not args.json, shard=shard, hw=hw, fault_at=fault_at, fault=fault,
               batch_tiles=args.batch_tiles or 64)
    if args.json:
        print(json.dumps(rep.to_dict()))
    else:
        print(f"{rep.tiles} tiles, {rep.outputs} outputs compared, {rep.mismatches} mismatches, "
              f"{rep.rate:.3g} outputs/s; journal {args.out}/journal.jsonl")
        if rep.repro:
            print(f"minimal reproducer: {rep.repro}  (wgref replay {rep.repro})")
            print(rep.first["minimal"])
    return 1 if rep.mismatches else 0


def _is_sparse_replay(path: str) -> bool:
    try:
        with np.load(path, allow_pickle=False) as z:
            return "config" in z.files and bool(json.loads(str(z["config"])).get("sparse"))
    except Exception:
        return False


def _replay_sparse(args) -> int:
    from refmodel.verify.differ import diff
    from refmodel.verify.shrink_sparse import load_sparse_case

    case, hw = load_sparse_case(args.file)
    model = case.model()
    if hw is None:
        raise UsageError(f"{args.file} holds no hardware output")
    rep = diff(model, hw, name="refmodel vs recorded hardware")
    if args.json:
        print(json.dumps({"case": case.config(), "notes": case.notes, "reports": [rep.to_dict()]}))
    else:
        print(f"{case.instr} sp_sel={case.sp_sel} scale_d={case.scale_d} imm=({case.imm_scale_a},{case.imm_scale_b})")
        print(rep.to_text())
    return 0 if rep.ok else 1


@command("replay")
def cmd_replay(args) -> int:
    from refmodel.verify.case import load_case
    from refmodel.verify.differ import diff

    if _is_sparse_replay(args.file):
        return _replay_sparse(args)
    case, hw = load_case(args.file)
    model = case.model()
    reports = []
    if hw is not None:
        reports.append(diff(model, hw, name="refmodel vs recorded hardware"))
    try:
        from gpu.runtime import gpu_available
        from gpu.wgmma import run_case

        live = gpu_available() and not args.cpu
    except Exception:
        live = False
    if live:
        reports.append(diff(model, run_case(case, isolate=True), name="refmodel vs this GPU"))
    if not reports:
        raise UsageError(f"{args.file} holds no hardware output and no GPU is available to run it")
    if args.json:
        print(json.dumps({"case": case.config(), "notes": case.notes,
                          "reports": [r.to_dict() for r in reports]}))
    else:
        print(f"{case.instr} rs={case.rs} scale_d={case.scale_d} imm=({case.imm_scale_a},"
              f"{case.imm_scale_b}) chain={case.chain}; {case.nonzeros()} nonzero inputs")
        for r in reports:
            print(r.to_text())
    return 0 if all(r.ok for r in reports) else 1


@command("record")
def cmd_record(args) -> int:
    from gpu.runtime import require_device

    require_device()
    rc = 0
    if "cvt" in args.what:
        from gpu import record_cvt

        rc |= record_cvt.main(["--out", args.out])
    if "torch" in args.what:
        from gpu import record_torch

        rc |= record_torch.main(["--out", args.out])
    if "wgmma" in args.what:
        from gpu import record_wgmma

        rc |= record_wgmma.main(["--out", args.out, "--seconds", str(_seconds(args.time) or 1200)])
    if "forms" in args.what:
        from gpu import record_forms

        rc |= record_forms.main(["--out", args.out])
    if "layouts" in args.what:
        from gpu import record_layouts

        rc |= record_layouts.main(["--out", args.out])
    return 2 if rc & 2 else (1 if rc else 0)


# ----------------------------------------------------------------------------- layout / desc diagrams

def _write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file in the same folder, then os.replace)."""
    import os
    import tempfile

    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"cannot write {path}: folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".wgref-", suffix=".tmp", dir=folder)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


_write_atomic = _write_text


def _emit_diagram(kind: str, args, **opts) -> int:
    from refmodel.render import render

    text = render(kind, args.format, **opts)
    if args.output:
        _write_text(args.output, text)
        print(f"wrote {args.output} ({args.format}, {len(text.encode())} bytes)")
    else:
        sys.stdout.write(text)
    return 0


_LAYOUT_DTYPE = {"acc": "f32", "a-frag": "f16", "swizzle": "f16", "smem": "f16"}


@command("layout")
def cmd_layout(args) -> int:
    """Draw a layout: accumulator / A fragment / ldmatrix / stmatrix / swizzle / smem tile."""
    kind = args.kind
    dtype = args.dtype or _LAYOUT_DTYPE.get(kind, "f16")
    if kind == "acc":
        opts = {"n": args.n, "dtype": dtype}
    elif kind == "a-frag":
        opts = {"dtype": dtype}
    elif kind in ("stmatrix", "ldmatrix"):
        opts = {"num": args.num, "trans": args.trans}
    elif kind == "swizzle":
        opts = {"mode": args.swizzle, "dtype": dtype}
    elif kind == "sparse-meta":
        opts = {"dtype": dtype, "sel": args.sel}
    else:
        opts = {"major": args.major, "mode": args.swizzle, "dtype": dtype, "rows": args.rows, "k": args.k,
                "lbo": args.lbo, "sbo": args.sbo}
    return _emit_diagram(kind, args, **opts)


@command("desc")
def cmd_desc(args) -> int:
    """Decode and check a wgmma matrix descriptor; draw which bytes the hardware reads."""
    from refmodel.render.diagrams import parse_descriptor

    value = parse_descriptor(args.descriptor)
    return _emit_diagram("desc", args, value=value, dtype=args.dtype, rows=args.rows, k=args.k, major=args.major)


# ----------------------------------------------------------------------------- pipeline

@command("pipeline")
def cmd_pipeline(args) -> int:
    """check: hazards of a trace (0 none, 1 hazards, 2 bad trace); draw: the commit-group
    timeline; gen: the canonical mainloop trace (or a broken variant)."""
    from refmodel.machine import pipeline as pl

    if args.pipeline_cmd == "gen":
        promote = None if args.promote_every in (None, 0) else args.promote_every
        events = pl.gemm_mainloop_trace(args.stages, args.k_iters, args.wait_depth, args.consumers, promote,
                                        instr=args.instr, broken=args.broken)
        text = pl.dump_trace(events)
        if args.output:
            _write_atomic(args.output, text)
        else:
            sys.stdout.write(text)
        return 0
    rep = pl.check(pl.load_trace(args.trace))
    if args.pipeline_cmd == "check":
        if args.json:
            print(json.dumps({"events": len(rep.events), "hazards": [
                {"kind": h.kind, "severity": h.severity, "events": list(h.events),
                 "trace_lines": [rep.events[i].lineno for i in h.events], "message": h.message}
                for h in rep.hazards]}))
        else:
            for h in rep.hazards:
                print(pl.format_hazard(h, rep.events))
            print(f"{len(rep.events)} events, {len(rep.groups)} commit groups: {len(rep.errors)} hazard(s), "
                  f"{len(rep.warnings)} warning(s)")
        return 1 if rep.errors or (args.strict and rep.warnings) else 0
    from refmodel.machine.pipeline_draw import draw_ascii, draw_svg

    text = draw_svg(rep) if args.format == "svg" else draw_ascii(rep)
    if args.output:
        _write_atomic(args.output, text)
        print(f"timeline written to {args.output}")
    else:
        sys.stdout.write(text)
    return 0


# ----------------------------------------------------------------------------- main

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


RECORD_KINDS = ("cvt", "wgmma", "torch", "forms", "layouts")


def _record_kind(text: str) -> str:
    if text not in RECORD_KINDS:
        raise argparse.ArgumentTypeError(f"invalid choice {text!r} (choose from {', '.join(RECORD_KINDS)})")
    return text


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="wgref", description="Bit-exact reference model of Hopper "
                                "warpgroup MMA features, verified against the H200.")
    sub = p.add_subparsers(dest="cmd", metavar="command")
    sub.required = True

    c = sub.add_parser("cvt", help="convert one value to FP8 and explain the result")
    c.add_argument("value", help="decimal, hex float (0x1.8p3), inf, nan, or 0x-prefixed bit pattern")
    c.add_argument("--to", required=True, choices=["e4m3", "e5m2"])
    c.add_argument("--policy", default="satfinite", choices=["satfinite", "nosat", "relu"])
    c.add_argument("--from", dest="src", default="f32", help="source format: f32 (default), f16, bf16, f64")
    c.add_argument("--json", action="store_true")

    f = sub.add_parser("formats", help="table of all 256 codes of an FP8 format")
    f.add_argument("fmt", choices=["e4m3", "e5m2"])
    f.add_argument("--json", action="store_true")

    q = sub.add_parser("quantize", help="quantize a .npy array to FP8 with a scaling recipe")
    q.add_argument("input")
    q.add_argument("--fmt", required=True, choices=["e4m3", "e5m2"])
    q.add_argument("--granularity", default="tensor", help="tensor, row, col, or a tile RxC such as 1x128")
    q.add_argument("--scale-format", default="f32", choices=["f32", "e8m0"])
    q.add_argument("-o", "--output", required=True)
    q.add_argument("--json", action="store_true")

    d = sub.add_parser("diff", help="compare two arrays bit for bit (.npy, or FILE.npz:key)")
    d.add_argument("got")
    d.add_argument("want")
    d.add_argument("--fmt", default=None, help="read integer arrays as codes of this format (e4m3, f32, ...)")
    d.add_argument("--nan-equal", action="store_true", help="treat NaNs with different payloads as equal")
    d.add_argument("--name", default=None)
    d.add_argument("--junit", default=None, help="also write a JUnit XML report here")
    d.add_argument("--json", action="store_true")

    e = sub.add_parser("error", help="relative error vs float64 as a function of K, per promotion interval")
    e.add_argument("--instr", default="wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3")
    e.add_argument("--k", default="512,1024,2048,4096,8192,16384", help="comma-separated K values")
    e.add_argument("--promote", default="none,1,4,16", help="promotion intervals in instructions (none = never)")
    e.add_argument("--dist", default="uniform", choices=["uniform", "normal"])
    e.add_argument("--promote-op", default="fma", choices=["fma", "fma_exact", "mul_add"])
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--plot", default=None, help="write a PNG plot here (needs matplotlib)")
    e.add_argument("--json", action="store_true")

    z = sub.add_parser("fuzz", help="fuzz wgmma on the GPU against refmodel, shrink the first mismatch")
    z.add_argument("target", help="a wgmma instruction, a family (tf32 f16 bf16 fp8 int8), a fragment (e4m3, n256), "
                   "'wgmma'; or a cvt opcode, or 'cvt' for every cvt form; or 'layout[:fragment]' for random descriptors; "
                   "or 'sparse[:fragment]' for sparse wgmma; or 'lib:triton', 'lib:cublas', 'lib:scaled-mm' to run "
                   "that library call on the GPU against its golden model")
    z.add_argument("--cases", type=int, default=10000,
                   help="tiles to run (with --devices: in all, dealt among the workers; cvt: thousands of "
                   "conversions; lib: library calls)")
    z.add_argument("--seed", type=int, default=0)
    z.add_argument("--families", default=None, help="comma-separated input families (default: all)")
    z.add_argument("--time", default=None, help="stop after this long (90s, 5m)")
    z.add_argument("--operand", choices=["ss", "rs", "both"], default="both", help="A from shared memory, registers, or either")
    z.add_argument("--chain", type=int, default=None, help="instructions per K chain (default: random 1..4)")
    z.add_argument("--out", default="wgref-fuzz", help="journal and reproducers go here")
    z.add_argument("--resume", action="store_true")
    z.add_argument("--keep-going", action="store_true", help="do not stop at the first mismatch")
    z.add_argument("--shard", default=None,
                   help="run shard i/n of the campaign (disjoint batches; wgmma and lib: targets)")
    z.add_argument("--devices", default=None,
                   help="one worker per listed GPU (0,1,2,3; repeat an ordinal to share a GPU); journals under "
                        "OUT/shard-k, merged at the end")
    z.add_argument("--restarts", type=int, default=2, help="with --devices: restart a crashed worker this often")
    z.add_argument("--inject-fault", default=None, metavar="SHARD:BATCH",
                   help="test recovery: the worker of shard SHARD faults (an illegal-address launch; with "
                        "--dry-run an exception) before batch BATCH, once")
    z.add_argument("--dry-run", action="store_true",
                   help="the CPU model stands in for the GPU (checks sharding and journals without a device)")
    z.add_argument("--engine", choices=["cpu", "gpu"], default="cpu",
                   help="cpu: inputs and refmodel on the host (default); gpu: inputs, the GPU port of the model and "
                        "the comparison on the GPU, mismatching tiles re-checked by the CPU refmodel (dense wgmma)")
    z.add_argument("--batch-tiles", type=int, default=None, help="tiles per batch (default: 64 cpu; gpu: 8192 n256-equivalent tiles)")
    z.add_argument("--json", action="store_true")

    mg = sub.add_parser("merge", help="merge the journals of a sharded fuzz campaign into one report")
    mg.add_argument("paths", nargs="+", help="journal files, or folders with journal.jsonl or */journal.jsonl")
    mg.add_argument("--json", action="store_true")

    g = sub.add_parser("golden", help="the bit-exact output of a library kernel (triton matmul, torch._scaled_mm, CUTLASS DSL GEMM, cuBLAS matmul)")
    g.add_argument("library", choices=["triton", "scaled-mm", "cutlass", "cublas"])
    g.add_argument("a", help="A (M, K) as .npy (values, or raw codes with --dtype)")
    g.add_argument("b", help="B (K, N) for triton; B as (N, K) for scaled-mm (torch's b.T)")
    g.add_argument("--dtype", required=True, choices=list(_GOLDEN_DT), help="the inputs' format")
    g.add_argument("--out-dtype", default="f32", choices=["f32", "bf16", "f16"])
    g.add_argument("-o", "--output", required=True, help="D as raw bits (.npy)")
    g.add_argument("--block-k", type=int, default=None, help="triton: BLOCK_K")
    g.add_argument("--input-precision", default="tf32", help="triton, f32 inputs: tf32, tf32x3 or ieee")
    g.add_argument("--imp", type=int, default=None, help="triton, FP8: max_num_imprecise_acc (0, 32, 64, ...)")
    g.add_argument("--scale-a", default=None, help="scaled-mm: a number, or (M, 1) .npy")
    g.add_argument("--scale-b", default=None, help="scaled-mm: a number, or (1, N) .npy")
    g.add_argument("--fast-accum", action="store_true", help="scaled-mm: use_fast_accum=True")
    g.add_argument("--acc", default="f32", choices=["f32", "f16"], help="cutlass: the accumulator")
    g.add_argument("--promotion-interval", type=int, default=None,
                   help="cutlass: the FP8 2xacc example's mma_promotion_interval")
    g.add_argument("--kernel", default=None,
                   help="cublas: the kernel name(s) torch's profiler showed (comma-separated); gives the schedule")
    g.add_argument("--splits", type=int, default=1, help="cublas without --kernel: the split-K count")

    r = sub.add_parser("replay", help="re-run a saved reproducer on the CPU (and the GPU if present)")
    r.add_argument("file")
    r.add_argument("--cpu", action="store_true", help="do not use a GPU even if one is present")
    r.add_argument("--json", action="store_true")

    rec = sub.add_parser("record", help="re-record fixtures on the GPU, with provenance")
    rec.add_argument("what", nargs="*", type=_record_kind, default=None,
                     help=f"what to record: {', '.join(RECORD_KINDS)} (default: all)")
    rec.add_argument("--out", default="fixtures")
    rec.add_argument("--time", default=None, help="time budget of the wgmma campaign")

    lay = sub.add_parser("layout", help="draw a layout (ascii, svg or html): acc, a-frag, stmatrix, ldmatrix, "
                         "swizzle, smem, sparse-meta")
    lay.add_argument("kind", choices=["acc", "a-frag", "stmatrix", "ldmatrix", "swizzle", "smem", "sparse-meta"])
    lay.add_argument("--n", type=int, default=64, help="acc: N of m64nN (8..256, default 64)")
    lay.add_argument("--dtype", default=None, help="acc: f32/s32/f16; a-frag, swizzle, smem: f16 bf16 tf32 e4m3 ...")
    lay.add_argument("--swizzle", default="128B", help="swizzle, smem: none, 32B, 64B, 128B (default 128B)")
    lay.add_argument("--trans", action="store_true", help="stmatrix, ldmatrix: the .trans form")
    lay.add_argument("--num", type=int, default=4, help="stmatrix, ldmatrix: matrices, 1 2 or 4 (default 4)")
    lay.add_argument("--major", default="K", choices=["K", "MN"], help="smem: operand major (default K)")
    lay.add_argument("--rows", type=int, default=64, help="smem: rows of the operand tile (M, or N of B)")
    lay.add_argument("--k", type=int, default=None, help="smem: K of the tile (default: one swizzle row / one wgmma)")
    lay.add_argument("--lbo", type=int, default=None, help="smem: LBO in bytes (default: dense canonical)")
    lay.add_argument("--sbo", type=int, default=None, help="smem: SBO in bytes (default: dense canonical)")
    lay.add_argument("--sel", type=int, default=0, help="sparse-meta: sp-sel, 0 or 1 (8-bit types: 0)")
    lay.add_argument("--format", default="ascii", choices=["ascii", "svg", "html"])
    lay.add_argument("-o", "--output", default=None, help="write here (atomically) instead of stdout")

    ds = sub.add_parser("desc", help="decode and check a wgmma matrix descriptor, draw what the hardware reads")
    ds.add_argument("descriptor", help="the 64-bit descriptor, hex (0x...) or decimal")
    ds.add_argument("--dtype", default="f16", help="operand element type: f16 bf16 tf32 e4m3 e5m2 s8 u8")
    ds.add_argument("--rows", type=int, default=64, help="rows of the operand (A: 64; B: N)")
    ds.add_argument("--k", type=int, default=None, help="K of the operand (default: one wgmma, 32 bytes)")
    ds.add_argument("--major", default="K", choices=["K", "MN"])
    ds.add_argument("--format", default="ascii", choices=["ascii", "svg", "html"])
    ds.add_argument("-o", "--output", default=None, help="write here (atomically) instead of stdout")

    v = sub.add_parser("verify", help="replay every hardware fixture through refmodel")
    v.add_argument("--quick", action="store_true", help="check the 2^32 sweeps on a subset of chunks only")
    v.add_argument("--full", action="store_true", help="check everything (the default; kept as an alias)")
    v.add_argument("--feature", action="append", help="only this feature (repeatable)")
    v.add_argument("--fixtures", default=None, help="fixtures directory (default: the package's)")
    v.add_argument("--json", action="store_true")

    pl = sub.add_parser("pipeline", help="wgmma pipeline traces: hazard check, timeline, canonical GEMM mainloop")
    pls = pl.add_subparsers(dest="pipeline_cmd", metavar="action")
    pls.required = True
    plc = pls.add_parser("check", help="list the hazards of a JSON-lines trace (exit 0 none, 1 hazards, 2 bad trace)")
    plc.add_argument("trace")
    plc.add_argument("--strict", action="store_true", help="warnings (pointless waits) also exit 1")
    plc.add_argument("--json", action="store_true")
    pld = pls.add_parser("draw", help="draw the commit-group timeline of a trace")
    pld.add_argument("trace")
    pld.add_argument("--format", choices=["ascii", "svg"], default="ascii")
    pld.add_argument("-o", "--output", default=None)
    plg = pls.add_parser("gen", help="write the canonical warp-specialised GEMM mainloop trace")
    plg.add_argument("--stages", type=int, default=4)
    plg.add_argument("--k-iters", type=int, default=8)
    plg.add_argument("--wait-depth", type=int, default=1)
    plg.add_argument("--consumers", type=int, default=2)
    plg.add_argument("--promote-every", type=int, default=None)
    plg.add_argument("--instr", default="wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16")
    plg.add_argument("--broken", choices=["lax_wait", "no_proxy_fence", "early_reuse"], default=None)
    plg.add_argument("-o", "--output", default=None)
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
