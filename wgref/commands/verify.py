"""Checking outputs: ``diff`` (two arrays bit for bit), ``verify`` (every hardware fixture
through refmodel) and ``replay`` (a saved reproducer, on the CPU and a GPU if present)."""

from __future__ import annotations

import sys
import time

import numpy as np

from wgref.commands.common import UsageError, check_output, command, json, load_array, shown, write_text

def _unnamed(x: np.ndarray, which: str, path: str) -> None:
    if x.dtype.kind == "V":
        raise UsageError(f"{which} ({shown(path)}) holds {8 * x.dtype.itemsize}-bit values of an unnamed "
                         "type (numpy saves bfloat16 and float8 arrays so): give --fmt, e.g. --fmt bf16")


@command("diff")
def cmd_diff(args) -> int:
    from refmodel.verify.differ import diff

    if args.junit is not None:  # refused before any work: not a device, directory, symlink or an input
        check_output(args.junit, args.got, args.want)
    got, want = load_array(args.got, args.fmt), load_array(args.want, args.fmt)
    if args.fmt is None:
        _unnamed(got, "got", args.got)
        _unnamed(want, "want", args.want)
    # the name goes into the text, JSON and JUnit reports: printable, XML-safe, short
    name = shown(args.name)[:200] if args.name else "diff"
    rep = diff(got, want, fmt=args.fmt, nan_equal=args.nan_equal, name=name)
    if args.junit is not None:
        write_text(args.junit, rep.to_junit(), inputs=(args.got, args.want))
    print(rep.to_json() if args.json else rep.to_text())
    return 0 if rep.ok else 1


@command("verify")
def cmd_verify(args) -> int:
    """Replay every fixture (default: every stored output, the 2^32 sweeps recomputed)."""
    from refmodel.verify.fixtures import default_root, FIXTURE_ROOT_ENV
    from refmodel.verify.workers import default_jobs, verify_all

    root = args.fixtures or default_root()
    from pathlib import Path

    if not Path(root).is_dir() or not any(Path(root).glob("*/manifest.json")):
        print(f"wgref: error: no fixtures found in {shown(root)}: pass --fixtures DIR or set {FIXTURE_ROOT_ENV}",
              file=sys.stderr)
        return 2
    full = not args.quick
    if getattr(args, "sfu_exhaustive", False):
        from refmodel.verify import replay_sfu

        replay_sfu.EXHAUSTIVE = True
    rows, scopes = [], []
    t0 = time.time()
    progress = (not args.json) and sys.stderr.isatty()
    jobs = default_jobs() if getattr(args, "jobs", None) is None else args.jobs
    for feature, entry, res in verify_all(root, full=full, features=args.feature, progress=progress, jobs=jobs):
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
        print(f"wgref: error: no fixtures selected in {shown(root)}", file=sys.stderr)
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
        print(f"{shown(r['feature']):<12}{shown(r['fixture']):<32}{r['cases']:>14}{mm:>12}  "
              f"{shown(r['recorded'])}")
        for d in r.get("details", [])[:3]:
            print(f"    {shown(d)}")
        if "error" in r:
            print(f"    {shown(r['error'])}")
    print(shown(summary))
    return worst


def _is_sparse_replay(path: str) -> bool:
    from refmodel.fileio import load_npz

    try:  # only the 'config' member is read (bounded); anything wrong is load_case's to say
        z = load_npz(path)
        return "config" in z and bool(json.loads(str(z["config"])).get("sparse"))
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
        from gpu.kernels.runtime import gpu_available
        from gpu.kernels.wgmma import run_case

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


def add_diff_parser(sub) -> None:
    """``wgref diff``: two arrays bit for bit."""
    d = sub.add_parser("diff", help="compare two arrays bit for bit (.npy, or FILE.npz:key)")
    d.add_argument("got")
    d.add_argument("want")
    d.add_argument("--fmt", default=None, help="read integer arrays as codes of this format (e4m3, f32, ...)")
    d.add_argument("--nan-equal", action="store_true", help="treat NaNs with different payloads as equal")
    d.add_argument("--name", default=None)
    d.add_argument("--junit", default=None, help="also write a JUnit XML report here")
    d.add_argument("--json", action="store_true")


def add_replay_parser(sub) -> None:
    """``wgref replay``: a saved reproducer."""
    r = sub.add_parser("replay", help="re-run a saved reproducer on the CPU (and the GPU if present)")
    r.add_argument("file")
    r.add_argument("--cpu", action="store_true", help="do not use a GPU even if one is present")
    r.add_argument("--json", action="store_true")


def _jobs(text: str) -> int:
    try:
        n = int(text, 10)
    except ValueError:
        n = 0
    if not 1 <= n <= 64:
        import argparse

        raise argparse.ArgumentTypeError(f"--jobs must be a whole number of processes in 1..64, got {shown(text)}")
    return n


def add_verify_parser(sub) -> None:
    """``wgref verify``: every hardware fixture."""
    v = sub.add_parser("verify", help="replay every hardware fixture through refmodel")
    v.add_argument("--quick", action="store_true", help="check the 2^32 sweeps on a subset of chunks only")
    v.add_argument("--sfu-exhaustive", action="store_true",
                   help="recompute every chunk of the SFU sweeps (all 2^32 inputs of every form; ~30 s a form on 2 cores)")
    v.add_argument("--full", action="store_true", help="check everything (the default; kept as an alias)")
    v.add_argument("--feature", action="append", help="only this feature (repeatable)")
    v.add_argument("--fixtures", default=None, help="fixtures directory (default: the package's)")
    v.add_argument("--jobs", type=_jobs, default=None,
                   help="worker processes replaying fixtures (default: the CPUs, at most 4; 1: this process only)")
    v.add_argument("--json", action="store_true")

