"""How Triton 3.6 lowers ``tl.dot`` on the H200, by kernel configuration: a PTX survey and recordings.

    python -m gpu.record.triton_lowering --survey FILE.json [--workers N]   # compile the grid, keep PTX facts
    python -m gpu.record.triton_lowering --record DIR --out fixtures         # run RECORD configs, write fixtures

The kernel is gpu.libraries.triton's lowering kernel (the textbook tiled matmul with the accumulation pattern
``acc = tl.dot(a, b, acc)`` or ``acc += tl.dot(a, b)`` and the accumulator type as constexprs).  The survey
compiles :func:`survey_configs` (block shapes, warps, stages, dtypes, precisions, patterns) and keeps, per
configuration, the MMA instructions of its PTX (wgmma with its N, or mma.sync), its conversions, FMAs and
adds: what :mod:`refmodel.golden.triton_lowering` reads its rules from.  The recording runs
:data:`RECORD` on inputs from the counter-based generator (refmodel.verify.seeded_mma, so CI rebuilds them)
in three families and keeps the sha256 of every output plus a 16 x 16 corner of each.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

# dtype options: (name, A type, B type, input_precision ("none": not passed), max_num_imprecise_acc (-1: not
# passed), accumulator)
OPTIONS = [
    ("f16", "f16", "f16", "none", -1, "f32"),
    ("bf16", "bf16", "bf16", "none", -1, "f32"),
    ("tf32", "f32", "f32", "tf32", -1, "f32"),
    ("ieee", "f32", "f32", "ieee", -1, "f32"),
    ("tf32x3", "f32", "f32", "tf32x3", -1, "f32"),
    ("e4m3", "e4m3", "e4m3", "none", -1, "f32"),
    ("e4m3_imp0", "e4m3", "e4m3", "none", 0, "f32"),
    ("e4m3_imp32", "e4m3", "e4m3", "none", 32, "f32"),
    ("e5m2", "e5m2", "e5m2", "none", -1, "f32"),
    ("e4m3_e5m2", "e4m3", "e5m2", "none", -1, "f32"),
    ("f16_acc16", "f16", "f16", "none", -1, "f16"),
    ("e4m3_acc16", "e4m3", "e4m3", "none", -1, "f16"),
]
_OPT = {o[0]: o for o in OPTIONS}
SURVEY_OPTIONS = ("f16", "bf16", "tf32", "e4m3", "e4m3_imp0", "f16_acc16")
SURVEY_TILES = [(bm, bn) for bm in (16, 32, 64, 128) for bn in (16, 64, 128)]
WARPS = (1, 2, 4, 8)


def survey_configs() -> list[dict]:
    """The surveyed grid: :data:`SURVEY_OPTIONS` x tiles x warps at BLOCK_K 64, default stages, ``dot_acc``;
    the ``add`` pattern on a few tiles for f16 and e4m3."""
    out = []
    for opt, (bm, bn), w in itertools.product(SURVEY_OPTIONS, SURVEY_TILES, WARPS):
        out.append(dict(opt=opt, BM=bm, BN=bn, BK=64, warps=w, stages=None, pattern="dot_acc"))
    for name, (bm, bn), w in itertools.product(("f16", "e4m3"), ((16, 64), (64, 64)), (2, 4)):
        out.append(dict(opt=name, BM=bm, BN=bn, BK=64, warps=w, stages=None, pattern="add"))
    for name, (bm, bn, w), st in itertools.product(("f16", "e4m3", "e4m3_imp0", "tf32"),
                                                    ((32, 64, 4), (64, 64, 4), (128, 128, 8), (64, 64, 2)), (1, 2, 4, 5)):
        out.append(dict(opt=name, BM=bm, BN=bn, BK=64, warps=w, stages=st, pattern="dot_acc"))
    for name, bm, bn, w in itertools.product(("f16", "e4m3", "tf32"), (16, 32, 64, 128, 256), (32, 256), (2, 4, 8)):
        out.append(dict(opt=name, BM=bm, BN=bn, BK=64, warps=w, stages=None, pattern="dot_acc"))
    for name, bm, bn, w, bk in itertools.product(("f16", "e4m3"), (32, 64), (64,), (2, 4), (16, 32, 128, 256)):
        out.append(dict(opt=name, BM=bm, BN=bn, BK=bk, warps=w, stages=None, pattern="dot_acc"))
    return out


def config_name(c: dict) -> str:
    st = "" if c["stages"] is None else f"_s{c['stages']}"
    return f"{c['opt']}_{c['pattern']}_m{c['BM']}n{c['BN']}k{c['BK']}_w{c['warps']}{st}"


PTX_MMA = re.compile(r"\b(wgmma\.mma_async[\w.]*|mma\.sync\.aligned[\w.]*)")
PTX_CVT = re.compile(r"\b(cvt\.[\w.]+)")
PTX_ARITH = re.compile(r"\b((?:fma|add|sub|mul)\.(?:rn\.)?(?:ftz\.)?(?:f32|f16|f16x2|bf16x2)|"
                       r"(?:fma|add)\.rn\.(?:ftz\.)?f32)\b")


def ptx_facts(ptx: str) -> dict:
    """The MMA instructions of a PTX text (opcode -> count), its conversions and float arithmetic."""
    return {"mma": dict(Counter(PTX_MMA.findall(ptx))), "cvt": dict(Counter(PTX_CVT.findall(ptx))),
            "arith": dict(Counter(PTX_ARITH.findall(ptx)))}


_TORCH = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def _launch(cfg: dict, a, b, out: str = "f32"):
    import torch
    import triton.language as tl

    from gpu.libraries.triton import lowering_matmul_kernel

    _, _, _, prec, imp, acc = _OPT[cfg["opt"]]
    M, K = a.shape
    N = b.shape[1]
    t_out, tl_out = {"f32": (torch.float32, tl.float32), "bf16": (torch.bfloat16, tl.bfloat16),
                     "f16": (torch.float16, tl.float16)}[out]
    c = torch.empty(M, N, device="cuda", dtype=t_out)
    kw = {} if cfg["stages"] is None else {"num_stages": cfg["stages"]}
    compiled = lowering_matmul_kernel()[(M // cfg["BM"], N // cfg["BN"])](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], PREC=prec, IMP=imp, OUT=tl_out, ACC=acc, PATTERN=cfg["pattern"],
        num_warps=cfg["warps"], **kw)
    return c, compiled


def _survey_one(cfg: dict) -> dict:
    import torch

    _, ta, tb, *_ = _OPT[cfg["opt"]]
    try:
        a = torch.zeros(cfg["BM"], 2 * cfg["BK"], device="cuda").to(getattr(torch, _TORCH[ta]))
        b = torch.zeros(2 * cfg["BK"], cfg["BN"], device="cuda").to(getattr(torch, _TORCH[tb]))
        _, k = _launch(cfg, a, b)
        torch.cuda.synchronize()
        facts = ptx_facts(k.asm.get("ptx", ""))
        meta = getattr(k, "metadata", None)
        facts["num_stages"] = getattr(meta, "num_stages", None)
        facts["num_warps"] = getattr(meta, "num_warps", None)
        return {**cfg, **facts}
    except Exception as e:   # noqa: BLE001 - a refusal is a finding: kept with its type and first line
        return {**cfg, "error": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"}


def _pool_map(fn, items, workers: int, deadline: float) -> list:
    """fn over items in ``workers`` spawned processes, in completion order, stopping at ``deadline``
    (time.time()): what finished is returned, the rest is dropped."""
    import multiprocessing as mp

    out = []
    ctx = mp.get_context("spawn")
    pool = ctx.Pool(workers)
    try:
        for r in pool.imap_unordered(fn, items):
            out.append(r)
            if time.time() > deadline:
                print(f"deadline: {len(out)} of {len(items)} done", flush=True)
                break
    finally:
        pool.terminate()
    return out


def compact_rows(rows: list[dict]) -> list[dict]:
    """Survey rows as stored (docs/data/triton_lowering_survey.json): the configuration, the MMA opcodes, the
    FP8 and tf32 conversions and the f32 adds and FMAs of its PTX, or the refusal; sorted."""
    out = []
    for r in rows:
        cvt, ar = r.get("cvt", {}), r.get("arith", {})
        out.append({**{k: r.get(k) for k in ("opt", "pattern", "BM", "BN", "BK", "warps", "stages")},
                    "mma": r.get("mma", {}),
                    "fp8_cvt": sum(v for k, v in cvt.items() if "e4m3" in k or "e5m2" in k),
                    "tf32_cvt": sum(v for k, v in cvt.items() if "tf32" in k),
                    "add_f32": ar.get("add.f32", 0), "fma_f32": ar.get("fma.rn.f32", 0),
                    **({"error": r["error"]} if "error" in r else {})})
    return sorted(out, key=lambda r: (r["opt"], r["pattern"], r["BM"], r["BN"], r["BK"], r["warps"], r["stages"] or 0))


def survey(path: str, workers: int, seconds: float) -> int:
    cfgs = survey_configs()
    t0 = time.time()
    rows = _pool_map(_survey_one, cfgs, workers, t0 + seconds)
    import torch
    import triton

    Path(path).write_text(json.dumps({"triton": triton.__version__, "torch": torch.__version__,
                                      "device": torch.cuda.get_device_name(), "arch": "sm_90a",
                                      "command": "python -m gpu.record.triton_lowering --survey FILE",
                                      "configs": compact_rows(rows)}, indent=0, sort_keys=True) + "\n")
    bad = sum("error" in r for r in rows)
    print(f"survey: {len(rows)} of {len(cfgs)} configurations ({bad} refused) in {time.time() - t0:.0f} s", flush=True)
    return 0


# ----------------------------------------------------------------------------- recordings

#: the recorded configurations: every option on MMAv2-sized and MMAv3-sized tiles, both patterns where they differ
RECORD = ([dict(opt=o, BM=bm, BN=bn, BK=bk, warps=w, stages=None, pattern="dot_acc")
           for o in ("f16", "bf16", "tf32", "e4m3", "e4m3_imp0", "e5m2", "f16_acc16", "e4m3_acc16")
           for (bm, bn, bk, w) in ((16, 32, 64, 2), (32, 64, 32, 4), (64, 64, 64, 2), (64, 64, 64, 4), (128, 64, 128, 8))]
          + [dict(opt=o, BM=32, BN=64, BK=32, warps=4, stages=None, pattern="dot_acc") for o in ("ieee", "tf32x3",
                                                                                              "e4m3_e5m2", "e4m3_imp32")]
          + [dict(opt=o, BM=bm, BN=64, BK=bk, warps=4, stages=None, pattern="add")
             for o in ("f16", "e4m3", "e4m3_imp0") for (bm, bk) in ((32, 32), (64, 64))]
          + [dict(opt=o, BM=bm, BN=bn, BK=64, warps=w, stages=st, pattern="dot_acc")
             for o in ("f16", "e4m3", "tf32") for (bm, bn, w) in ((32, 64, 4), (64, 64, 4)) for st in (2, 4)]
          + [dict(opt=o, BM=bm, BN=bn, BK=64, warps=w, stages=None, pattern="dot_acc", shape=[256, 256, 256])
             for o in ("f16", "e4m3") for (bm, bn, w) in ((256, 32, 8), (64, 256, 4), (16, 256, 2))])
SHAPE = (128, 256, 128)          # M, K, N
FAMILIES = ("narrow", "cancel", "wide", "special")
SEED = 20261206
CORNER = 16


def inputs(cfg: dict, family: str, seed: int = SEED, index: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A (M, K) and B (K, N) codes (uint64) of one recording (refmodel.verify.seeded_mma.matrix_codes), of the
    configuration's ``shape`` (M, K, N), or :data:`SHAPE`: M and N must be multiples of the tile."""
    from refmodel.verify.seeded_mma import matrix_codes

    _, ta, tb, *_ = _OPT[cfg["opt"]]
    return matrix_codes(ta, tb, family, seed, index, tuple(cfg.get("shape") or SHAPE))


def _record_one(i: int) -> dict:
    """Run RECORD[i] on the three families: {"i", "name", "ptx", "d": [outputs]} or {"i", "error"}."""
    import torch

    cfg = RECORD[i]
    _, ta, tb, *_ = _OPT[cfg["opt"]]
    try:
        ds, facts = [], None
        for j, fam in enumerate(FAMILIES):
            a, b = inputs(cfg, fam, SEED, len(FAMILIES) * i + j)
            ts = []
            for x, t in ((a, ta), (b, tb)):
                u = {8: (np.uint8, np.uint8), 16: (np.uint16, np.int16), 32: (np.uint32, np.int32)}[_bits(t)]
                ts.append(torch.from_numpy(x.astype(u[0]).view(u[1])).cuda().view(getattr(torch, _TORCH[t])))
            c, k = _launch(cfg, ts[0], ts[1])
            torch.cuda.synchronize()
            ds.append(c.cpu().numpy().view(np.uint32))
            facts = ptx_facts(k.asm.get("ptx", ""))
        return {"i": i, "name": config_name(cfg), "ptx": facts, "d": ds}
    except Exception as e:   # noqa: BLE001 - a refused configuration is reported, the rest goes on
        return {"i": i, "name": config_name(cfg), "error": f"{type(e).__name__}: {str(e)[:200]}"}


def record(raw_dir: str, out: str, workers: int, seconds: float, only=None, name: str = "lowering") -> int:
    import torch

    import triton
    from gpu.kernels.runtime import device_info
    from refmodel.verify.fixtures import host_provenance, write_fixture

    Path(raw_dir).mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    todo = [i for i in range(len(RECORD)) if only is None or config_name(RECORD[i]) in only]
    res = sorted(_pool_map(_record_one, todo, workers, t0 + seconds), key=lambda r: r["i"])
    digests, corners, raw, ptx, done = [], [], {}, {}, []
    for r in res:
        if "error" in r:
            print(f"{r['name']}: {r['error']}", flush=True)
            continue
        cfg = RECORD[r["i"]]
        digests.append(np.stack([np.frombuffer(hashlib.sha256(np.ascontiguousarray(d, "<u4").tobytes()).digest(),
                                               np.uint8) for d in r["d"]]))
        corners.append(np.stack([d[:CORNER, :CORNER] for d in r["d"]]))
        for fam, d in zip(FAMILIES, r["d"]):
            raw[f"{r['name']}__{fam}"] = d
        ptx[r["name"]] = r["ptx"]
        done.append({**cfg, "name": r["name"], "index": r["i"]})
        print(f"{r['name']}: {r['ptx']['mma']}", flush=True)
    for fam in FAMILIES:                 # one file a family (each under the 16 MiB a device file may hold)
        np.savez_compressed(Path(raw_dir) / f"triton_{name}_raw_{fam}.npz",
                            **{k: v for k, v in raw.items() if k.endswith(f"__{fam}")})
    prov = {**device_info(), **host_provenance(), "triton": triton.__version__, "torch": torch.__version__,
            "recorder": "gpu.record.triton_lowering"}
    cases = sum(len(FAMILIES) * (c.get("shape") or SHAPE)[0] * (c.get("shape") or SHAPE)[2] for c in done)
    write_fixture("triton", name, {"hw_sha256": np.stack(digests), "corner": np.stack(corners)},
                  kind="triton_lowering", cases=cases,
                  meta={"configs": done, "options": {o[0]: list(o[1:]) for o in OPTIONS}, "families": list(FAMILIES),
                        "shape": list(SHAPE), "seed": SEED, "corner": CORNER, "out": "f32",
                        "inputs": "refmodel.verify.seeded_mma.matrix_codes(A type, B type, family, seed, families * index + family)",
                        "ptx_mma": {c["name"]: ptx[c["name"]]["mma"] for c in done}},
                  provenance=prov, root=out)
    print(f"recorded {len(done)} of {len(RECORD)} configurations in {time.time() - t0:.0f} s", flush=True)
    return 0


def _bits(t: str) -> int:
    return {"f16": 16, "bf16": 16, "f32": 32, "e4m3": 8, "e5m2": 8}[t]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--survey", default=None, help="compile the survey grid, write its PTX facts to FILE (JSON)")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=240, help="stop each stage after this long, keeping what finished")
    ap.add_argument("--record", default=None, help="run RECORD, write raw outputs and PTX facts to DIR")
    ap.add_argument("--out", default="fixtures")
    ap.add_argument("--only", default=None, help="--record: these configuration names only (comma-separated)")
    ap.add_argument("--name", default="lowering", help="--record: the fixture's name (default lowering)")
    a = ap.parse_args(argv)
    rc = 0
    if a.survey:
        rc |= survey(a.survey, a.workers, a.seconds)
    if a.record:
        rc |= record(a.record, a.out, a.workers, a.seconds, set(a.only.split(",")) if a.only else None, a.name)
    if not (a.survey or a.record):
        ap.error("give --survey FILE and/or --record DIR")
    return rc


if __name__ == "__main__":
    sys.exit(main())
