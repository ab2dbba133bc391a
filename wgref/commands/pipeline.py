"""``pipeline``: wgmma pipeline traces -- check (hazards), draw (the commit-group timeline)
and gen (the canonical warp-specialised GEMM mainloop, or a broken variant)."""

from __future__ import annotations

import sys

from wgref.commands.common import check_output, command, json, shown, write_text

@command("pipeline")
def cmd_pipeline(args) -> int:
    """check: hazards of a trace (0 none, 1 hazards, 2 bad trace); draw: the commit-group
    timeline; gen: the canonical mainloop trace (or a broken variant)."""
    from refmodel.machine import pipeline as pl

    out = getattr(args, "output", None)
    if out is not None:  # refused before any work: not a device, a directory, a symlink or the input trace
        check_output(out, getattr(args, "trace", None))
    if args.pipeline_cmd == "gen":
        promote = None if args.promote_every in (None, 0) else args.promote_every
        events = pl.gemm_mainloop_trace(args.stages, args.k_iters, args.wait_depth, args.consumers, promote,
                                        instr=args.instr, broken=args.broken)
        text = pl.dump_trace(events)
        if args.output is not None:
            write_text(args.output, text)
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
    if args.output is not None:
        write_text(args.output, text, inputs=(args.trace,))
        print(f"timeline written to {shown(args.output)}")
    else:
        sys.stdout.write(text)
    return 0


def add_pipeline_parser(sub) -> None:
    """``wgref pipeline check|draw|gen``: wgmma pipeline traces."""
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

