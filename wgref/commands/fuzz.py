"""GPU campaigns: ``fuzz`` (wgmma, cvt, layout, sparse and library targets against refmodel,
sharded over devices), ``merge`` (the journals of a sharded campaign) and ``record``
(re-recording fixtures on the GPU). The gpu package is imported only inside the commands."""

from __future__ import annotations

import argparse

from wgref.commands.common import UsageError, command, json

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
    """``wgref fuzz lib:...``: library calls on the GPU against their golden models (gpu.fuzz.library)."""
    if target not in _LIB_TARGETS:
        raise UsageError(f"unknown library target {target!r}; choose from {', '.join(_LIB_TARGETS)}")
    if args.devices or args.dry_run or args.engine == "gpu" or args.inject_fault:
        raise UsageError("--devices, --dry-run, --engine gpu and --inject-fault do not apply to lib: targets "
                         "(one process per campaign; split it with --shard)")
    if args.cases < 1:
        raise UsageError(f"--cases must be >= 1 (library calls), got {args.cases}")
    from gpu.fuzz.library import fuzz_library

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
        from gpu.kernels.runtime import require_device

        require_device()  # one line saying what is missing, exit 2
    if args.devices:
        from gpu.fuzz.campaign import parse_devices, run_workers

        if args.devices.strip() == "all":
            if args.dry_run:
                raise UsageError("--devices all counts GPUs; with --dry-run list the workers (e.g. 0,0,0)")
            from gpu.kernels.runtime import device_count

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
    from gpu.fuzz.cpu_engine import fuzz, fuzz_cvt, fuzz_layout, fuzz_sparse

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
    from gpu.fuzz.cpu_engine import model_device

    hw = model_device if args.dry_run else None
    fault_at = fault = None
    if fault_spec is not None:
        fs, fb = fault_spec
        if fs == shard[0]:
            fault_at = fb
            if not args.dry_run:
                from gpu.kernels.runtime import fault_illegal_address as fault
    if args.engine == "gpu":
        from gpu.fuzz.gpu_engine import fuzz_device

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


@command("merge")
def cmd_merge(args) -> int:
    from refmodel.verify.journal import merge_journals

    rep = merge_journals(args.paths)
    _print_merged(rep, args.json)
    return 1 if rep.mismatches or rep.port_disagreements else (3 if rep.missing else 0)


@command("record")
def cmd_record(args) -> int:
    from gpu.kernels.runtime import require_device

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
        rc |= record_wgmma.main(["--out", args.out, "--seconds", str(_seconds(args.time) or 1200)])
    if "forms" in args.what:
        from gpu.record import forms as record_forms
        rc |= record_forms.main(["--out", args.out])
    if "layouts" in args.what:
        from gpu.record import layouts as record_layouts
        rc |= record_layouts.main(["--out", args.out])
    return 2 if rc & 2 else (1 if rc else 0)


RECORD_KINDS = ("cvt", "wgmma", "torch", "forms", "layouts")


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

