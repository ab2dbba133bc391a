"""Record a compact hardware fixture for EVERY dense sm_90a wgmma form (all 528).

    python -m gpu.record.forms --out fixtures          # on an H200; a few minutes
    python -m gpu.record.forms --list                  # the plan only (no GPU)

Each form runs twice: A from shared memory (SS) and from registers (RS).  Scale-d = 0
and imm-scale -1 (a, b or both) are spread over the forms so that every type
combination sees every option (:func:`plan_jobs`).  Every job runs one tile per input
family -- floats: random bit patterns (NaN, Inf, subnormals), exact small integers,
wide exponent spread (cancellation); int8: extremes, C near the int32 limits, random
bits -- through :mod:`gpu.kernels.wgmma` on the GPU, and every output is compared bit for bit
with ``refmodel.numerics.wgmma`` (and the exact families with exact integer products).

Any mismatch, layout failure or missing model fails loudly: exit 1 (2 for a missing
model or GPU), nothing written to the fixtures, the mismatching tiles saved under
``--diag``.  Otherwise a sample of every tile (:data:`ROWS` rows x :data:`COLS` columns of
D with exactly the inputs they depend on, see :mod:`refmodel.verify.replay_forms`) is
written to ``fixtures/wgmma_forms/<family>.npz``, one file per dtype family, replayed by
``wgref verify``.  NVRTC compilation, the slow part, runs first in a process pool
(``--workers``); the on-disk cubin cache (``gpu.kernels.runtime.cache_dir``) then serves every launch.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import zlib
from pathlib import Path
from typing import Callable

import numpy as np

from refmodel.dtypes import element_dtype, raw_bits
from refmodel.verify.fixtures import host_provenance, write_fixture
from refmodel.verify.families.tile import TileFamily
from refmodel.verify.jobs import Job, exact_oracle, families_for, make_inputs, model_chain
from refmodel.verify.replay_forms import FEATURE, KIND, compact, pack
from refmodel.wgmma_forms import M, WGMMA_FORMS

from gpu.record.wgmma import load_model
SEED = 20261202
FLOAT_FAMILIES = ("random_bits", "small_int", "wide_spread")
INT_FAMILIES = ("int_extremes", "int_c_limits", "int_random")
IMMS = ((1, 1), (-1, 1), (1, -1), (-1, -1))
ROWS = 8   # rows of D kept per tile
COLS = 12  # columns of D kept per tile (all of them for N < 12)


def _combo(f) -> tuple:
    return (f.family, f.dtype_d, f.dtype_a, f.dtype_b, f.satfinite)


def plan_jobs(forms=None) -> list[Job]:
    """Two jobs (SS, RS) per form; scale-d 0 and the imm scales rotate with the form's
    index inside its type combination, so every combination gets every option."""
    forms = list(WGMMA_FORMS if forms is None else forms)
    seen: dict[tuple, int] = {}
    jobs = []
    for f in forms:
        i = seen.get(_combo(f), 0)
        seen[_combo(f)] = i + 1
        ia, ib = IMMS[i % 4] if f.has_imm_scale else (1, 1)
        ra, rb = IMMS[(i + 2) % 4] if f.has_imm_scale else (1, 1)
        jobs.append(Job(f.instr, rs=False, scale_d=(i % 4 != 2), imm_scale_a=ia, imm_scale_b=ib, tier=0))
        jobs.append(Job(f.instr, rs=True, scale_d=(i % 4 != 0), imm_scale_a=ra, imm_scale_b=rb, tier=0))
    return jobs


def families_of(job: Job) -> tuple[TileFamily, ...]:
    names = INT_FAMILIES if job.form.family == "int8" else FLOAT_FAMILIES
    by = {f.name: f for f in families_for(job.form)}
    return tuple(by[n] for n in names)


def group_name(job: Job) -> str:
    """Fixture file of a job: one per dtype family and accumulator type (uniform widths)."""
    f = job.form
    return f"{f.family}_{f.dtype_d}"


def job_seed(job: Job, seed: int = SEED) -> list[int]:
    return [seed, zlib.crc32(job.key.encode())]


def make_job_inputs(job: Job, seed: int = SEED):
    """(a, b, c, family index per tile, family names): one tile per family."""
    rng = np.random.default_rng(job_seed(job, seed))
    return make_inputs(job, rng, 1, families_of(job))


def sample_positions(job: Job, tiles: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(job_seed(job, seed) + [1])
    n = job.form.n
    rows = np.stack([np.sort(rng.choice(M, ROWS, replace=False)) for _ in range(tiles)])
    cols = np.stack([np.sort(rng.choice(n, min(n, COLS), replace=False)) for _ in range(tiles)])
    return rows, cols


def kernel_sources(jobs: list[Job]) -> list[str]:
    from gpu.kernels.wgmma import kernel_source

    return list(dict.fromkeys(kernel_source(j.form, rs=j.rs, chain=j.chain, imm_scale_a=j.imm_scale_a,
                                            imm_scale_b=j.imm_scale_b) for j in jobs))


def precompile(jobs: list[Job], workers: int, log=print) -> None:
    """Compile every kernel in a process pool, filling the on-disk cubin cache."""
    from gpu.kernels.runtime import compile_in_processes

    srcs = kernel_sources(jobs)
    secs = compile_in_processes(srcs, workers)
    log(f"compiled {len(srcs)} kernels with {workers} processes in {secs:.1f}s")


def hardware(job: Job, a, b, c, *, isolate: bool = False):
    from gpu.kernels.wgmma import run_wgmma_chain

    return run_wgmma_chain(job.instr, a, b, c, chain=job.chain, scale_d_first=job.scale_d,
                           imm_scale_a=job.imm_scale_a, imm_scale_b=job.imm_scale_b, rs=job.rs, isolate=isolate)


def record(jobs: list[Job], *, hw: Callable, model: Callable, out: Path | None, prov: dict,
           diag: Path | None = None, seed: int = SEED, log=print) -> int:
    """Run, compare and (only if everything matches) write the fixtures; returns the exit code."""
    if model is None:
        raise RuntimeError("no model to compare with: refusing to record")
    groups: dict[str, tuple[list, list]] = {}
    families: dict[str, list[str]] = {}
    failures: list[str] = []
    bad_tiles: dict[str, np.ndarray] = {}
    outputs = 0
    t0 = time.time()
    for job in jobs:
        f = job.form
        a, b, c, idx, names = make_job_inputs(job, seed)
        try:
            d = np.asarray(hw(job, a, b, c))
        except Exception as e:
            failures.append(f"{job.key}: hardware run failed: {type(e).__name__}: {e}")
            continue
        if d.dtype != element_dtype(f.dtype_d) or d.shape != c.shape:
            failures.append(f"{job.key}: hardware returned {d.dtype} {d.shape}, expected "
                            f"{element_dtype(f.dtype_d)} {c.shape}")
            continue
        outputs += d.size
        fams = families_of(job)
        for fi, fam in enumerate(fams):
            if fam.exact:
                sel = idx == fi
                ex = exact_oracle(job, a[sel], b[sel], c[sel])
                got = d[sel].astype(np.int64 if f.family == "int8" else np.float64)
                if not (f.family == "int8" and np.abs(ex).max() > 2**31 - 1):
                    nbad = int(np.count_nonzero(got != ex))
                    if nbad:
                        failures.append(f"{job.key}: {nbad} outputs of family {fam.name} differ from exact "
                                        "integer products (layout?)")
        try:
            ref = model_chain(model, job, a, b, c)
            eq = raw_bits(ref.astype(d.dtype, copy=False), f.dtype_d) == raw_bits(d, f.dtype_d)
        except Exception as e:
            failures.append(f"{job.key}: model error: {type(e).__name__}: {e}")
            continue
        if not eq.all():
            failures.append(f"{job.key}: {int(eq.size - np.count_nonzero(eq))} of {eq.size} outputs differ "
                            "from refmodel")
            t = np.flatnonzero(~eq.reshape(eq.shape[0], -1).all(axis=1))
            for k, v in {"a": raw_bits(a, f.dtype_a), "b": raw_bits(b, f.dtype_b), "c": raw_bits(c, f.dtype_d),
                         "d": raw_bits(d, f.dtype_d), "d_model": raw_bits(ref, f.dtype_d)}.items():
                bad_tiles[f"{job.key}|{k}"] = v[t]
            continue
        rows, cols = sample_positions(job, d.shape[0], seed)
        part = compact(raw_bits(a, f.dtype_a), raw_bits(b, f.dtype_b), raw_bits(c, f.dtype_d),
                       raw_bits(d, f.dtype_d), rows, cols, idx)
        parts, metas = groups.setdefault(group_name(job), ([], []))
        parts.append(part)
        metas.append({**job.meta(), "tiles": int(rows.shape[0]), "rows": int(rows.shape[1]),
                      "cols": int(cols.shape[1])})
        families[group_name(job)] = names
    forms = {j.instr for j in jobs}
    log(f"{len(jobs)} jobs, {len(forms)} forms, {outputs} hardware outputs compared with refmodel "
        f"in {time.time() - t0:.1f}s: {len(failures)} failures")
    if failures:
        for line in failures[:50]:
            log("FAIL " + line)
        if diag is not None and bad_tiles:
            diag.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(diag / "record_forms_mismatches.npz", **bad_tiles)
            log(f"mismatching tiles saved in {diag / 'record_forms_mismatches.npz'}")
        log("nothing written: fix the mismatches first")
        return 1
    if out is not None:
        for fam, (parts, metas) in sorted(groups.items()):
            arrays = pack(parts)
            cases = int(arrays["d"].size)
            meta = {"jobs": metas, "forms": sorted({m["instr"] for m in metas}), "families": families[fam],
                    "seed": seed, "job_seed": "[seed, zlib.crc32(Job.key)]",
                    "sample": f"per tile: {ROWS} rows x up to {COLS} columns of D with A rows, B columns, C",
                    "generator": "gpu.record.forms"}
            e = write_fixture(FEATURE, fam, arrays, kind=KIND, cases=cases, meta=meta, provenance=prov, root=out)
            log(f"wrote {FEATURE}/{e.file}: {len(metas)} jobs, {len(meta['forms'])} forms, {cases} outputs")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="fixtures", help="fixtures root (fixtures/wgmma_forms/ is written)")
    ap.add_argument("--forms", nargs="*", help="only forms whose instr contains one of these")
    ap.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1), help="NVRTC compile processes")
    ap.add_argument("--isolate", action="store_true", help="launch in a child process (slower, survives faults)")
    ap.add_argument("--diag", default="record_forms_diagnostics", help="mismatching tiles go here")
    ap.add_argument("--list", action="store_true", help="print the plan and exit (no GPU)")
    args = ap.parse_args(argv)
    jobs = plan_jobs()
    if args.forms:
        jobs = [j for j in jobs if any(p in j.instr for p in args.forms)]
    if args.list:
        for j in jobs:
            print(j.key)
        print(f"{len(jobs)} jobs, {len({j.instr for j in jobs})} forms")
        return 0
    from gpu.record.model_check import ModelMissingError

    try:
        model = load_model()
    except ModelMissingError as e:
        print(f"gpu.record.forms: error: {e}", file=sys.stderr)
        return 2
    from refmodel.errors import DeviceError

    try:
        from gpu.kernels.runtime import device_info

        info = device_info()
    except DeviceError as e:
        print(f"gpu.record.forms: error: {e}", file=sys.stderr)
        return 2
    print(f"device: {info.get('device')} driver {info.get('driver')} cupy {info.get('cupy')} "
          f"nvrtc {info.get('nvrtc')}", flush=True)
    prov = {**info, **host_provenance(), "generator": "gpu.record.forms", "seed": SEED}
    if args.workers > 1:
        precompile(jobs, args.workers)
    return record(jobs, hw=lambda job, a, b, c: hardware(job, a, b, c, isolate=args.isolate), model=model,
                  out=Path(args.out), prov=prov, diag=Path(args.diag))


if __name__ == "__main__":
    sys.exit(main())
