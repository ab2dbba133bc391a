"""Infer, on the H200, the schedules of the library calls that pick kernels at run time, and freeze
them as fixtures (kind ``inferred_schedule``): the schedule, its probes, the kernels that ran, and the
sha256 of the target's outputs on every verification call (inputs rebuilt from the seed), so that CI
replays the verification with refmodel alone.

    python -m gpu.record.schedules --out fixtures [--only NAME,...] [--outputs 1000000]

Controls: the repo's own FP8 kernel and a Triton kernel with a known ``max_num_imprecise_acc`` (whose
schedules inference must rediscover), and a deliberately wrong candidate (verification must reject it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from gpu.libraries.gemm_targets import make_target

# (name, target, dtype, out, M, N, K, options)
CLIENTS = [
    ("cublas_bf16_64x64x8192", "cublas", "bf16", "bf16", 64, 64, 8192, {}),
    ("cublas_f16_64x64x8192", "cublas", "f16", "f16", 64, 64, 8192, {}),
    ("cublas_bf16_128x128x16384", "cublas", "bf16", "bf16", 128, 128, 16384, {}),
    ("scaled_mm_fast_64x64x8192", "scaled-mm", "e4m3", "bf16", 64, 64, 8192, {"fast_accum": True}),
    ("scaled_mm_precise_64x64x8192", "scaled-mm", "e4m3", "bf16", 64, 64, 8192, {}),
    ("scaled_mm_fast_f32_128x128x16384", "scaled-mm", "e4m3", "f32", 128, 128, 16384, {"fast_accum": True}),
    ("cusparselt_f16_64x64x8192", "cusparselt", "f16", "f16", 64, 64, 8192, {}),
    ("cusparselt_e4m3_64x64x8192", "cusparselt", "e4m3", "bf16", 64, 64, 8192, {}),
    ("cusparselt_bf16_128x128x16384", "cusparselt", "bf16", "bf16", 128, 128, 16384, {}),
    ("xla_bf16_64x64x8192", "xla", "bf16", "bf16", 64, 64, 8192, {}),
    ("cusparselt_f16_splitk4_64x64x8192", "cusparselt", "f16", "f16", 64, 64, 8192, {"split_k": 4}),
    ("cusparselt_bf16_splitk2_128x128x8192", "cusparselt", "bf16", "bf16", 128, 128, 8192, {"split_k": 2}),
    ("xla_f16_64x64x8192", "xla", "f16", "f16", 64, 64, 8192, {}),
    ("xla_bf16_128x128x4096", "xla", "bf16", "bf16", 128, 128, 4096, {}),
    ("xla_bf16_256x128x2048", "xla", "bf16", "bf16", 256, 128, 2048, {}),
    ("deepgemm_e4m3_128x128x2048", "deepgemm", "e4m3", "bf16", 128, 128, 2048, {}),
    ("control_gemm_fp8_128x128x2048", "gemm-fp8", "e4m3", "bf16", 128, 128, 2048, {}),
    ("control_triton_imp64_128x128x1024", "triton", "e4m3", "f32", 128, 128, 1024, {"block_k": 128, "imp": 64}),
]


class Recording:
    """A target that keeps every call's input digest and output bits (the raw evidence of a client whose
    schedule is not in the space yet, for study off the device: ``--raw``)."""

    def __init__(self, target):
        self.target, self.info, self.sparse = target, target.info, target.sparse
        self.digests: list[bytes] = []
        self.outputs: list[np.ndarray] = []

    @property
    def kernels(self):
        return self.target.kernels

    def __call__(self, a, b):
        from refmodel.dtypes import bits_of
        from refmodel.verify.infer import call_digest

        d = self.target(a, b)
        self.digests.append(call_digest(a, b, d)[0])
        self.outputs.append(np.ascontiguousarray(bits_of(np.asarray(d))))
        return d


def raw_arrays(rec: Recording, c, calls: int) -> dict:
    """Run the verification calls up to ``calls`` (seed [0, 2], those inference may have run already are
    reused) and return the raw evidence: input digests and output bits of every call, in call order."""
    from refmodel.verify.infer import verification_inputs

    name, tname, dt, out, M, N, K, opt = c
    for i, _, a, b in verification_inputs(dt, M, N, K, sparse=rec.sparse, outputs=calls * M * N, seed=[0, 2]):
        rec(a, b)
    return {"inputs_sha256": np.frombuffer(b"".join(rec.digests), np.uint8).reshape(len(rec.digests), 64),
            "outputs": np.stack(rec.outputs)}


def run_client(c, outputs: int, log=print, raw_calls: int = 0) -> tuple[dict, dict]:
    """Infer one client's schedule and record the verification digests: (meta, arrays).  ``raw_calls``:
    also keep the raw outputs of every call (probes and ``raw_calls`` verification calls) as ``raw.*``."""
    from refmodel.verify.infer import check_schedule, infer_schedule

    name, tname, dt, out, M, N, K, opt = c
    t = make_target(tname, dtype=dt, out_dtype=out, **opt)
    if raw_calls:
        t = Recording(t)
    t0 = time.time()
    rep = infer_schedule(t, M=M, N=N, K=K, dtype=dt, out_dtype=out, sparse=t.sparse, verify_outputs=outputs,
                         source={**{k: v for k, v in t.info.items() if k != "hlo"}, "shape": f"{M}x{N}x{K}",
                                 "device": "H200"}, log=lambda m: log(f"  {name}: {m}"))
    kernels = list(t.kernels)
    meta = {"name": name, "target": tname, "dtype": dt, "out": out, "M": M, "N": N, "K": K, "options": opt,
            "kernels": kernels, "info": {k: v for k, v in t.info.items() if k != "hlo"}, **rep.to_dict()}
    if "hlo" in t.info:
        meta["hlo_excerpt"] = [ln.strip() for ln in t.info["hlo"].splitlines()
                               if any(w in ln for w in ("custom-call", "fusion", "dot(", "split_k", "reduce"))][:40]
    arrays = {}
    if rep.schedule is not None:
        # the inference's verification calls, their inputs' and the target's digests (the replayer's evidence)
        din, dout = zip(*rep.call_digests)
        calls, done = len(din), len(din) * M * N
        arrays = {"inputs_sha256": np.frombuffer(b"".join(din), np.uint8).reshape(calls, 64),
                  "outputs_sha256": np.frombuffer(b"".join(dout), np.uint8).reshape(calls, 32)}
        meta["verification"] = {"seed": [0, 2], "calls": calls, "outputs": done,
                                "families": "refmodel.verify.families.matrix.FAMILIES in turn"}
        if name.startswith("scaled_mm_fast_64"):
            # a deliberately wrong candidate: one split fewer; verification must reject it
            wrong = rep.schedule.replace(splits=max(1, rep.schedule.splits - 1))
            n, bad = check_schedule(t, wrong, M=M, N=N, K=K, dtype=dt, outputs=M * N * 24)
            meta["wrong_candidate"] = {"schedule": wrong.to_dict(), "outputs": n, "mismatches": bad}
            log(f"  {name}: wrong candidate (S = {wrong.splits}): {bad} of {n} outputs differ")
    if raw_calls:
        arrays = {**arrays, **{f"raw.{k}": v for k, v in raw_arrays(t, c, raw_calls).items()}}
        meta["raw"] = {"calls": int(arrays["raw.outputs"].shape[0]), "verification_seed": [0, 2],
                       "hlo": t.info.get("hlo")}
    meta["seconds"] = time.time() - t0
    log(f"{name}: {rep.status}: {rep.paragraph()[:400]}")
    return meta, arrays


def record(out: Path | None, outputs: int, only=None, dump: Path | None = None, log=print, raw_calls: int = 0) -> int:
    from gpu.kernels.runtime import device_info
    from refmodel.verify.fixtures import host_provenance, write_fixture

    prov = {**device_info(), **host_provenance(), "recorder": "gpu.record.schedules"}
    metas, status = [], 0
    for c in CLIENTS:
        if only and c[0] not in only:
            continue
        try:
            meta, arrays = run_client(c, outputs, log, raw_calls=raw_calls)
        except Exception as e:  # a client that cannot run is reported with its reason, the rest goes on
            meta, arrays = {"name": c[0], "target": c[1], "status": "error", "error": f"{type(e).__name__}: {str(e)[:400]}"}, {}
            log(f"{c[0]}: error: {meta['error']}")
        metas.append(meta)
        if dump is not None:
            dump.mkdir(parents=True, exist_ok=True)
            (dump / f"{c[0]}.json").write_text(json.dumps(meta, indent=1, default=str))
            if arrays:
                np.savez_compressed(dump / f"{c[0]}.npz", **arrays)
        if out is not None and "inputs_sha256" in arrays:
            write_fixture("schedules", c[0], {k: v for k, v in arrays.items() if not k.startswith("raw.")}, kind="inferred_schedule", cases=int(meta["verification"]["outputs"]),
                          meta=meta, provenance={**prov, **{k: v for k, v in meta["info"].items() if isinstance(v, str)}},
                          root=out)
    return status


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="fixtures root (fixtures/schedules/ is written)")
    ap.add_argument("--dump", default=None, help="also write every client's report (JSON + digests) here")
    ap.add_argument("--only", default=None, help="comma-separated client names")
    ap.add_argument("--outputs", type=int, default=10**6, help="verification outputs per client")
    ap.add_argument("--raw", type=int, default=0, metavar="CALLS",
                    help="with --dump: also keep every call's output bits (probes and CALLS verification calls)")
    a = ap.parse_args(argv)
    return record(Path(a.out) if a.out else None, a.outputs, set(a.only.split(",")) if a.only else None,
                  Path(a.dump) if a.dump else None, raw_calls=a.raw)


if __name__ == "__main__":
    sys.exit(main())
