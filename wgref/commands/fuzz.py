"""GPU campaigns: ``fuzz`` (wgmma, cvt, layout, sparse and library targets against refmodel,
sharded over devices), ``merge`` (the journals of a sharded campaign) and ``record``
(re-recording fixtures on the GPU). The gpu package is imported only inside the commands."""

from __future__ import annotations

import argparse
import math
import re

from refmodel.golden.registry import fuzz_targets as _fuzz_targets
from wgref.commands.common import UsageError, command, json

_DURATION = re.compile(r"\s*((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*([smh]?)\s*", re.IGNORECASE)


def _seconds(text: str | None, flag: str = "--time") -> float | None:
    """``--time`` as seconds: 90, 90s, 5m, 1h, 1.5h; a finite duration > 0 (not nan, inf, -1, 0)."""
    if text is None:
        return None
    m = _DURATION.fullmatch(str(text))
    secs = float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2).lower()] if m else None
    if secs is None or not math.isfinite(secs) or secs <= 0:
        shown = repr(str(text)) if len(str(text)) <= 40 else repr(str(text)[:37]) + "..."
        raise UsageError(f"{flag} must be a duration > 0 such as 90, 90s, 5m or 1h, got {shown}")
    return secs


def _fuzz_worker_argv(args, workers: int) -> list[str]:
    """The options a ``--devices`` worker repeats (all but --shard, --devices, --out, --json, --restarts)."""
    per = -(-args.cases // workers)  # --cases is this invocation's total, dealt among its workers
    argv = [args.target, "--cases", str(per), "--seed", str(args.seed)]
    for flag, v in (("--operand", args.operand), ("--families", args.families), ("--time", args.time),
                    ("--chain", args.chain), ("--inject-fault", args.inject_fault), ("--engine", args.engine),
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
    for t in getattr(rep, "torn", ()):
        print(f"torn last line not counted: {t} (an interrupted or ongoing write; the file is left as it is)")
    for r in rep.repros:
        print(f"minimal reproducer: {r}  (wgref replay {r})")


def _side_report(rep, as_json: bool, summary: str, where: str) -> int:
    """Print a cvt / layout / sparse campaign's report (JSON, or its summary and first mismatch)."""
    if as_json:
        print(json.dumps(rep.to_dict()))
    else:
        print(summary)
        if rep.repro:
            first = rep.first or {}
            what = first.get("minimal") or ", ".join(f"{k} {v}" for k, v in first.items()
                                                     if k in ("job", "tile", "row", "col", "family", "hw", "refmodel"))
            print(f"first mismatch: {what}  ({where})")
    return 1 if rep.mismatches else 0


_LIB_TARGETS = tuple(f"lib:{t}" for t in _fuzz_targets())

# which options each kind of target takes: dense wgmma on the cpu engine ("wgmma") or the GPU
# engine ("wgmma-gpu"), library calls, cvt forms, layout (descriptor) and sparse campaigns.
# --cases, --seed, --time, --out and --json apply to every target.
_KINDS = {"wgmma": "wgmma targets on the cpu engine", "wgmma-gpu": "wgmma targets on the gpu engine",
          "lib": "lib: targets", "cvt": "cvt targets", "layout": "layout targets on the cpu engine",
          "sparse": "sparse targets on the cpu engine", "layout-gpu": "layout targets on the gpu engine",
          "sparse-gpu": "sparse targets on the gpu engine"}
_TAKES = {
    "--shard": {"wgmma", "wgmma-gpu", "lib"},
    "--resume": {"wgmma", "wgmma-gpu", "lib"},
    "--devices": {"wgmma", "wgmma-gpu"},
    "--engine": {"wgmma", "wgmma-gpu", "layout", "sparse", "layout-gpu", "sparse-gpu"},
    "--batch-tiles": {"wgmma", "wgmma-gpu", "layout-gpu", "sparse-gpu"},
    "--inject-fault": {"wgmma", "wgmma-gpu"},
    "--dry-run": {"wgmma"},
    "--families": {"wgmma"},
    "--operand": {"wgmma", "wgmma-gpu"},
    "--chain": {"wgmma", "wgmma-gpu"},
    "--keep-going": {"wgmma"},
}
_FLAG_NAMES = {"cases": "--cases", "seed": "--seed", "seconds": "--time", "chain": "--chain",
               "batch_tiles": "--batch-tiles"}


def _given(args) -> list[str]:
    """The target-specific options given on this command line."""
    vals = {"--shard": args.shard, "--resume": args.resume or None, "--devices": args.devices,
            "--engine": args.engine, "--batch-tiles": args.batch_tiles, "--inject-fault": args.inject_fault,
            "--dry-run": args.dry_run or None, "--families": args.families, "--operand": args.operand,
            "--chain": args.chain, "--keep-going": args.keep_going or None}
    return [k for k, v in vals.items() if v is not None]


def _target_kind(target: str, engine: str | None) -> str:
    for kind in ("lib", "sparse", "layout"):
        if target == kind or target.startswith(kind + ":"):
            return f"{kind}-gpu" if engine == "gpu" and kind != "lib" else kind
    if target == "cvt" or target.startswith("cvt."):
        return "cvt"
    return "wgmma-gpu" if engine == "gpu" else "wgmma"


def _refuse_options(args, kind: str) -> None:
    bad = [o for o in _given(args) if kind not in _TAKES[o]]
    if not bad:
        return
    if kind.endswith("-gpu"):
        why = "they apply to the cpu engine: drop --engine gpu"
    else:
        notes = [f"{o} also to lib: targets" for o in bad if "lib" in _TAKES[o]]
        notes += [f"{o} only on the cpu engine" for o in bad if "wgmma-gpu" not in _TAKES[o]]
        why = "they apply to wgmma targets" + (f"; {', '.join(notes)}" if notes else "")
    raise UsageError(f"options that do not apply to {_KINDS[kind]}: {', '.join(bad)} ({why})")


def _check_out_dir(flag: str, path: str) -> None:
    """``path`` is a folder we can write in, or a path where one can be created: before any work."""
    import os
    from pathlib import Path

    if not str(path).strip() or "\x00" in str(path):
        raise UsageError(f"{flag} must name a folder, got {str(path)[:40]!r}")
    p = Path(path)
    if p.exists() or p.is_symlink():
        if not p.is_dir():
            raise UsageError(f"{flag} {p}: not a folder (journals and reproducers go in a folder)")
        if not os.access(p, os.W_OK | os.X_OK):
            raise UsageError(f"{flag} {p}: the folder is not writable")
        return
    anc = p.absolute().parent
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise UsageError(f"{flag} {p}: cannot create it, {anc} is not a folder")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {p}: cannot create it, {anc} is not writable")


def _parse_fault(text: str | None) -> tuple[int, int] | None:
    """``--inject-fault SHARD:BATCH`` as two non-negative ints (None when not given)."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*([0-9]{1,18})\s*:\s*([0-9]{1,18})\s*", str(text))
    if not m:
        shown = repr(str(text)) if len(str(text)) <= 40 else repr(str(text)[:37]) + "..."
        if re.fullmatch(r"\s*-?[0-9]+\s*:\s*-?[0-9]+\s*", str(text)):
            raise UsageError(f"--inject-fault SHARD and BATCH must be >= 0, got {shown}")
        raise UsageError(f"--inject-fault must look like SHARD:BATCH (e.g. 1:4), got {shown}")
    return int(m.group(1)), int(m.group(2))


def _check_fuzz(args) -> dict:
    """Every flag of ``wgref fuzz`` checked before anything runs: no worker started, no GPU
    touched, nothing written.  Returns what the campaign needs (target kind, shard, seconds, ...)."""
    from gpu.fuzz import cpu_engine as E
    from refmodel.verify.journal import parse_shard

    target = args.target.strip()
    if not target:
        raise UsageError("wgref fuzz needs a target: a wgmma instruction, a family (tf32 f16 bf16 fp8 int8), "
                         "a fragment (e4m3, n256), 'wgmma', 'cvt', 'layout', 'sparse' or lib:triton/cublas/scaled-mm")
    kind = _target_kind(target, args.engine)
    _refuse_options(args, kind)
    E.check_campaign(cases=args.cases, seed=args.seed, chain=args.chain, batch_tiles=args.batch_tiles,
                     engine="gpu" if kind.endswith("-gpu") else "cpu", names=_FLAG_NAMES)
    plan = {"target": target, "kind": kind, "secs": _seconds(args.time), "families": None,
            "shard": parse_shard(args.shard) if args.shard is not None else (0, 1)}
    if args.schedule is not None and kind != "lib":
        raise UsageError("--schedule applies to lib: targets (a library call against a stored schedule)")
    if kind == "lib" and args.schedule is not None:
        from gpu.fuzz.schedule import call_of
        from refmodel.golden.schedule import load_schedule

        sched = load_schedule(args.schedule)
        call = call_of(sched)
        if target != f"lib:{call['target']}":
            raise UsageError(f"the schedule was inferred from lib:{call['target']} "
                             f"{call['M']}x{call['N']}x{call['K']}, not {target!r:.40}")
        if args.shard is not None or args.resume:
            raise UsageError("--schedule campaigns take no --shard or --resume (one shape, one journal)")
        plan["schedule"] = sched
    elif kind == "lib":
        if target not in _LIB_TARGETS:
            raise UsageError(f"unknown library target {target!r:.60}; choose from {', '.join(_LIB_TARGETS)} "
                             f"(any infer target with --schedule)")
    elif kind == "cvt":
        E.cvt_forms(target)
    elif kind in ("layout", "layout-gpu"):
        E.layout_variants(target)
    elif kind in ("sparse", "sparse-gpu"):
        E.sparse_jobs(target)
    else:
        forms = E.select_forms(target)
        if args.families is not None:
            names = [f.strip() for f in args.families.split(",")]
            if not all(names):
                raise UsageError(f"--families must be comma-separated family names without empty entries, "
                                 f"got {args.families!r:.60}")
            plan["families"] = E.check_families(forms, names, "--families")
    if args.restarts is not None and args.devices is None:
        raise UsageError("--restarts applies with --devices (it restarts a crashed worker)")
    restarts = 2 if args.restarts is None else args.restarts
    if not 0 <= restarts <= 100:
        raise UsageError(f"--restarts must be an integer from 0 to 100, got {restarts}")
    plan["restarts"] = restarts
    plan["fault"] = _parse_fault(args.inject_fault)
    plan["devices"] = None
    if args.devices is not None:
        from gpu.fuzz.campaign import parse_devices

        if args.devices.strip() == "all":
            if args.dry_run:
                raise UsageError("--devices all counts GPUs; with --dry-run list the workers (e.g. 0,0,0)")
            plan["devices"] = "all"
        else:
            plan["devices"] = parse_devices(args.devices)
    _check_out_dir("--out", args.out)
    return plan


def _fuzz_library(args, plan) -> int:
    """``wgref fuzz lib:...``: library calls on the GPU against their golden models (gpu.fuzz.library)."""
    from gpu.fuzz.library import fuzz_library

    target = plan["target"]
    if plan.get("schedule") is not None:
        from gpu.fuzz.schedule import fuzz_schedule

        rep = fuzz_schedule(plan["schedule"], cases=args.cases, seed=args.seed, seconds=plan["secs"], out=args.out,
                            progress=not args.json)
        return _side_report(rep, args.json, f"{rep.calls} {target[4:]} calls against the schedule, {rep.outputs} "
                            f"outputs compared, {rep.mismatches} mismatches, {rep.rate:.3g} outputs/s; journal "
                            f"{args.out}/journal.jsonl", f"shrunk and saved to {rep.repro}")
    rep = fuzz_library(target, cases=args.cases, seed=args.seed, seconds=plan["secs"], out=args.out,
                       shard=plan["shard"], resume=args.resume, progress=not args.json)
    return _side_report(rep, args.json, f"{rep.calls} {target[4:]} calls ({rep.skipped} skipped), {rep.outputs} "
                        f"outputs compared, {rep.mismatches} mismatches, {rep.rate:.3g} outputs/s; journal "
                        f"{args.out}/journal.jsonl", f"saved to {rep.repro}")


@command("fuzz")
def cmd_fuzz(args) -> int:
    plan = _check_fuzz(args)           # every flag, before any worker starts or a GPU is touched
    target, kind, shard, secs = plan["target"], plan["kind"], plan["shard"], plan["secs"]
    if kind == "lib":   # the library runner finds its device itself (torch)
        return _fuzz_library(args, plan)
    if not args.dry_run:
        from gpu.kernels.runtime import require_device

        require_device()  # one line saying what is missing, exit 2
    if plan["devices"] is not None:
        from gpu.fuzz.campaign import run_workers
        from gpu.kernels.runtime import device_count

        devices = plan["devices"]
        if not args.dry_run:
            have = device_count()
            if devices == "all":
                devices = [str(i) for i in range(have)]
            missing = sorted({d for d in devices if int(d) >= have}, key=int)
            if missing or not devices:
                raise UsageError(f"--devices names GPU {', '.join(missing) or 'none'} but this machine has "
                                 f"{have} (ordinals 0..{have - 1})")
        rep, restarted = run_workers(_fuzz_worker_argv(args, len(devices)), devices, args.out, shard=shard,
                                     restarts=plan["restarts"], log=(lambda *_: None) if args.json else print)
        if args.json:
            print(json.dumps({**rep.to_dict(), "devices": devices, "restarts": restarted}))
        else:
            _print_merged(rep, False)
            for r in restarted:
                print(f"restarted: shard {r['shard']} on device {r['device']} after exit {r['exit']}")
        return 1 if rep.mismatches or rep.port_disagreements else 0
    from gpu.fuzz.cpu_engine import fuzz, fuzz_cvt, fuzz_layout, fuzz_sparse

    if kind == "sparse-gpu":
        from gpu.fuzz.gpu_sparse import fuzz_sparse_device

        rep = fuzz_sparse_device(target, cases=args.cases, seed=args.seed, seconds=secs, out=args.out,
                                 batch_tiles=args.batch_tiles or 2048, progress=not args.json)
        return _side_report(rep, args.json, f"{rep.tiles} sparse tiles, {rep.outputs} outputs compared on the GPU, "
                            f"{rep.mismatches} mismatches (CPU-confirmed), {rep.port_disagreements} GPU-port "
                            f"disagreements, {rep.rate:.3g} outputs/s", f"wgref replay {rep.repro}") \
            or (1 if rep.port_disagreements else 0)
    if kind == "layout-gpu":
        from gpu.fuzz.gpu_layout import fuzz_layout_device

        rep = fuzz_layout_device(target, cases=args.cases, seed=args.seed, seconds=secs, out=args.out,
                                 batch=args.batch_tiles or 4096, progress=not args.json)
        return _side_report(rep, args.json, f"{rep.tiles} descriptor cases ({rep.undefined} undefined, not compared), "
                            f"{rep.outputs} outputs compared on the GPU, {rep.mismatches} mismatches (CPU-confirmed), "
                            f"{rep.port_disagreements} GPU-port disagreements, {rep.rate:.3g} outputs/s",
                            f"saved to {rep.repro}") or (1 if rep.port_disagreements else 0)
    if kind == "sparse":
        rep = fuzz_sparse(target, cases=args.cases, seed=args.seed, seconds=secs, out=args.out)
        return _side_report(rep, args.json, f"{rep.tiles} sparse tiles, {rep.outputs} outputs compared, "
                            f"{rep.mismatches} mismatches, {rep.rate:.3g} outputs/s", f"wgref replay {rep.repro}")
    if kind == "layout":
        rep = fuzz_layout(target, cases=args.cases, seed=args.seed, seconds=secs, out=args.out)
        return _side_report(rep, args.json, f"{rep.tiles} descriptor cases, {rep.outputs} outputs compared, "
                            f"{rep.mismatches} mismatches, {rep.rate:.3g} outputs/s", f"saved to {rep.repro}")
    if kind == "cvt":
        rep = fuzz_cvt(target, cases=args.cases * 1024, seed=args.seed, seconds=secs, out=args.out)
        return _side_report(rep, args.json, f"{rep.outputs} conversions compared, {rep.mismatches} mismatches, "
                            f"{rep.rate:.3g}/s", f"saved to {rep.repro}")
    from gpu.fuzz.cpu_engine import model_device

    hw = model_device if args.dry_run else None
    fault_at = fault = None
    if plan["fault"] is not None:
        fs, fb = plan["fault"]
        if fs == shard[0]:
            fault_at = fb
            if not args.dry_run:
                from gpu.kernels.runtime import fault_illegal_address as fault
    if kind == "wgmma-gpu":
        from gpu.fuzz.gpu_engine import fuzz_device

        rep = fuzz_device(target, cases=args.cases, seed=args.seed, seconds=secs, out=args.out,
                          shard=shard, batch_tiles=args.batch_tiles or 8192, resume=args.resume,
                          fault_at=fault_at, progress=not args.json,
                          rs={"ss": False, "rs": True}.get(args.operand), chain=args.chain)
        if args.json:
            print(json.dumps(rep.to_dict()))
        else:
            print(f"{rep.tiles} tiles, {rep.outputs} outputs compared on the GPU, {rep.mismatches} mismatches "
                  f"(CPU-confirmed), {rep.port_disagreements} GPU-port disagreements, {rep.tiles_copied_back} tiles "
                  f"copied back; {rep.rate:.3g} outputs/s; journal {args.out}/journal.jsonl")
        return 1 if rep.mismatches or rep.port_disagreements else 0
    rep = fuzz(target, cases=args.cases, seed=args.seed, families=plan["families"],
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


@command("merge")
def cmd_merge(args) -> int:
    from refmodel.verify.journal import merge_journals

    rep = merge_journals(args.paths)
    _print_merged(rep, args.json)
    return 1 if rep.mismatches or rep.port_disagreements else (3 if rep.missing else 0)


@command("record")
def cmd_record(args) -> int:
    from gpu.kernels.runtime import require_device

    secs = _seconds(args.time)
    _check_out_dir("--out", args.out)
    require_device()
    rc = 0
    if "cvt" in args.what:
        from gpu.record import cvt as record_cvt
        rc |= record_cvt.main(["--out", args.out])
    if "torch" in args.what:
        from gpu.record import torch as record_torch
        rc |= record_torch.main(["--out", args.out])
    if "wgmma" in args.what:
        from gpu.record import wgmma as record_wgmma
        rc |= record_wgmma.main(["--out", args.out, "--seconds", str(secs or 1200)])
    if "forms" in args.what:
        from gpu.record import forms as record_forms
        rc |= record_forms.main(["--out", args.out])
    if "layouts" in args.what:
        from gpu.record import layouts as record_layouts
        rc |= record_layouts.main(["--out", args.out])
    return 2 if rc & 2 else (1 if rc else 0)


RECORD_KINDS = ("cvt", "wgmma", "torch", "forms", "layouts")


def _integer(text: str) -> int:
    """An integer option: ASCII digits with an optional minus sign (not 1_000, 1e3, 0x10 or 5.0)."""
    if not re.fullmatch(r"\s*-?[0-9]{1,30}\s*", str(text)):
        shown = repr(str(text)) if len(str(text)) <= 40 else repr(str(text)[:37]) + "..."
        raise argparse.ArgumentTypeError(f"must be an integer, got {shown}")
    return int(text)


def _record_kind(text: str) -> str:
    if text not in RECORD_KINDS:
        raise argparse.ArgumentTypeError(f"invalid choice {text!r} (choose from {', '.join(RECORD_KINDS)})")
    return text


def add_fuzz_parser(sub) -> None:
    """``wgref fuzz``: a fuzz campaign against refmodel."""
    z = sub.add_parser("fuzz", help="fuzz wgmma on the GPU against refmodel, shrink the first mismatch")
    z.add_argument("target", help="a wgmma instruction, a family (tf32 f16 bf16 fp8 int8), a fragment (e4m3, n256), "
                   "'wgmma'; or a cvt opcode, or 'cvt' for every cvt form; or 'layout[:fragment]' for random descriptors; "
                   "or 'sparse[:fragment]' for sparse wgmma; or 'lib:triton', 'lib:cublas', 'lib:scaled-mm' to run "
                   "that library call on the GPU against its golden model")
    z.add_argument("--cases", type=_integer, default=10000,
                   help="tiles to run (with --devices: in all, dealt among the workers; cvt: thousands of "
                   "conversions; lib: library calls)")
    z.add_argument("--seed", type=_integer, default=0, help="campaign seed (an integer >= 0)")
    z.add_argument("--families", default=None, help="comma-separated input families (default: all)")
    z.add_argument("--time", default=None, help="stop after this long (90s, 5m)")
    z.add_argument("--operand", choices=["ss", "rs", "both"], default=None,
                   help="A from shared memory, registers, or either (default: both)")
    z.add_argument("--chain", type=_integer, default=None, help="instructions per K chain, 1..128 (default: drawn per batch; cpu engine 1..4, gpu engine 1..128)")
    z.add_argument("--out", default="wgref-fuzz", help="journal and reproducers go here")
    z.add_argument("--resume", action="store_true")
    z.add_argument("--keep-going", action="store_true", help="do not stop at the first mismatch")
    z.add_argument("--shard", default=None,
                   help="run shard i/n of the campaign (disjoint batches; wgmma and lib: targets)")
    z.add_argument("--devices", default=None,
                   help="one worker per listed GPU (0,1,2,3; repeat an ordinal to share a GPU); journals under "
                        "OUT/shard-k, merged at the end")
    z.add_argument("--restarts", type=_integer, default=None,
                   help="with --devices: restart a crashed worker this often (default: 2)")
    z.add_argument("--inject-fault", default=None, metavar="SHARD:BATCH",
                   help="test recovery: the worker of shard SHARD faults (an illegal-address launch; with "
                        "--dry-run an exception) before batch BATCH, once")
    z.add_argument("--dry-run", action="store_true",
                   help="the CPU model stands in for the GPU (checks sharding and journals without a device)")
    z.add_argument("--engine", choices=["cpu", "gpu"], default=None,
                   help="cpu: inputs and refmodel on the host (default); gpu: inputs, the GPU port of the model and "
                        "the comparison on the GPU, mismatching tiles re-checked by the CPU refmodel (dense wgmma "
                        "with RS and chains, sparse and layout targets)")
    z.add_argument("--batch-tiles", type=_integer, default=None, help="tiles per batch (default: 64 cpu; gpu: 8192 n256-equivalent tiles)")
    z.add_argument("--schedule", default=None, metavar="S.JSON",
                   help="lib: targets: compare the call against this stored schedule (wgref infer -o), at its "
                   "shape, and shrink the first mismatch")
    z.add_argument("--json", action="store_true")


def add_merge_parser(sub) -> None:
    """``wgref merge``: the journals of a sharded campaign."""
    mg = sub.add_parser("merge", help="merge the journals of a sharded fuzz campaign into one report")
    mg.add_argument("paths", nargs="+", help="journal files, or folders with journal.jsonl or */journal.jsonl")
    mg.add_argument("--json", action="store_true")


def add_record_parser(sub) -> None:
    """``wgref record``: fixtures re-recorded on the GPU."""
    rec = sub.add_parser("record", help="re-record fixtures on the GPU, with provenance")
    rec.add_argument("what", nargs="*", type=_record_kind, default=None,
                     help=f"what to record: {', '.join(RECORD_KINDS)} (default: all)")
    rec.add_argument("--out", default="fixtures")
    rec.add_argument("--time", default=None, help="time budget of the wgmma campaign")

