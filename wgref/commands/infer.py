"""``infer``: ask a library's GEMM on the GPU how it sums (refmodel.verify.infer), verify the schedule
and store it (``-o schedule.json``) for ``wgref golden … --schedule`` and the golden models' ``schedule=``."""

from __future__ import annotations

import json
import sys

from wgref.commands.common import UsageError, command


def _shape(text: str) -> tuple[int, int, int]:
    parts = text.split(",")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise UsageError(f"--shape must be M,N,K (three positive integers), got {text!r:.60}")
    m, n, k = (int(p) for p in parts)
    if not (0 < m <= 65536 and 0 < n <= 65536 and 0 < k <= 1 << 20):
        raise UsageError(f"--shape must have 1 <= M, N <= 65536 and 1 <= K <= 2^20, got {text!r:.60}")
    return m, n, k


@command("infer")
def cmd_infer(args) -> int:
    from refmodel.fileio import atomic_write_text, check_output

    M, N, K = _shape(args.shape)
    if args.outputs < 1 or args.outputs > 10**9:
        raise UsageError(f"--outputs must be an integer from 1 to 10^9, got {args.outputs}")
    if args.output is not None:
        check_output(args.output)
    from gpu.kernels.runtime import require_device

    require_device()
    from gpu.libraries.gemm_targets import make_target
    from refmodel.verify.infer import infer_schedule

    t = make_target(args.target, dtype=args.dtype, out_dtype=args.out_dtype, fast_accum=args.fast_accum,
                    block_k=args.block_k, imp=args.imp)
    log = (lambda m: None) if args.json else (lambda m: print(m, file=sys.stderr))
    rep = infer_schedule(t, M=M, N=N, K=K, dtype=args.dtype, out_dtype=args.out_dtype, sparse=t.sparse,
                         verify_outputs=args.outputs, seed=args.seed,
                         source={**{k: v for k, v in t.info.items() if k != "hlo"}, "shape": f"{M}x{N}x{K}"}, log=log)
    if rep.schedule is not None:
        src = dict(rep.schedule.source, kernel=", ".join(t.kernels)[:400], device=_device())
        extra = {}
        if args.target == "scaled-mm":   # probed with unit scales; the epilogue is torch's (fixtures/torch)
            extra["epilogue_scale"] = "tensor"
            src["epilogue"] = "per-tensor scales D = RN(RN(sa*sb) * acc), as recorded in fixtures/torch"
        rep.schedule = rep.schedule.replace(source=src, **extra)
        if args.output is not None:
            atomic_write_text(args.output, rep.schedule.to_json() + "\n")
    if args.json:
        print(json.dumps({**rep.to_dict(), "kernels": t.kernels}, indent=1, default=str))
    else:
        print(rep.paragraph())
        for p in rep.probes:
            print(f"  probe {p.name}: {p.question} -> {p.answer}")
        for s, why, n in rep.closest:
            print(f"  closest: {s.describe()[:200]} (ruled out by {why}: {n} outputs differ)")
        if args.output is not None and rep.schedule is not None:
            print(f"wrote {args.output}: use it with wgref golden … --schedule {args.output}")
    return 0 if rep.schedule is not None else 1


def _device() -> str:
    try:
        from gpu.kernels.runtime import device_info

        return str(device_info().get("device", "?"))
    except Exception:  # the device name is provenance only
        return "?"


def add_infer_parser(sub) -> None:
    """``wgref infer``: a library GEMM's schedule from crafted probes on the GPU, verified."""
    p = sub.add_parser("infer", help="GPU: infer how a library GEMM sums (probes + verification), store the schedule")
    from refmodel.golden.registry import infer_targets

    p.add_argument("target", choices=list(infer_targets()))
    p.add_argument("--shape", required=True, help="M,N,K of the call (libraries pick kernels by shape)")
    p.add_argument("--dtype", required=True, choices=["f16", "bf16", "e4m3", "e5m2"])
    p.add_argument("--out-dtype", required=True, choices=["f32", "bf16", "f16"])
    p.add_argument("--fast-accum", action="store_true", help="scaled-mm: use_fast_accum=True")
    p.add_argument("--block-k", type=int, default=64, help="triton: BLOCK_K")
    p.add_argument("--imp", type=int, default=None, help="triton, FP8: max_num_imprecise_acc")
    p.add_argument("--outputs", type=int, default=10**6, help="verification outputs (default 10^6)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", default=None, help="write the schedule here (JSON)")
    p.add_argument("--json", action="store_true", help="the whole report as JSON")
