"""wgmma verification campaign: run the H200, compare with refmodel bit for bit, record fixtures.

    python -m gpu.record.wgmma --out fixtures --seconds 1500          # tiers 0..4, resumable
    python -m gpu.record.wgmma --list --max-tier 1                    # print the plan only
    python -m gpu.record.wgmma --out fixtures --forms m64n8k16 --max-tier 1

Each *job* is one form with one configuration (SS or RS A operand, scale-d, imm
scales, chain length).  Its tiles come from several input families (random bit
patterns with NaN/Inf/subnormals, cancellation, wide exponent spread, large C,
subnormal C, zero rows, overflow, exact small integers; for int8: random,
extremes, C near the int32 limits).  One launch per job runs all its tiles.

Two checks per job:

* **model**: hardware D against ``refmodel.numerics.wgmma.wgmma`` as raw bits (NaN payloads
  included).  Without the model module the campaign refuses to start (one line, exit 2):
  a recorder never records what it cannot compare.
* **exact**: families whose result is exactly representable (small integers) are
  also compared, by value, with float64/int64 matrix products.  This needs no model
  and checks the fragment and descriptor layouts on its own: if it fails, the
  layouts are wrong, not the arithmetic.

Jobs are ordered by tier: 0 = each type combination at N=8 and N=256; 1 = RS,
scale-d=0, imm scales, chains (a staged long chain too), more N; 2 = every form
(SS); 3 = every form RS; 4 = every form with scale-d=0 and imm scales -1.
Stops starting jobs after ``--seconds``; finished jobs are appended to a state file
(``<out>/wgmma_campaign/state.jsonl``) and skipped on the next run, so rerunning
the same command continues.  Any exception in a job is logged and the campaign
goes on; GPU launches run in a child process (``--no-isolate`` to disable).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from refmodel.dtypes import element_dtype, raw_bits
from refmodel.verify.fixtures import host_provenance, write_fixture
from refmodel.verify.replay_wgmma import to_seeded
from refmodel.verify.jobs import (FLOAT_FAMILIES, INT_FAMILIES, Job, exact_oracle, families_for,  # noqa: F401
                                  make_inputs, model_chain, plan_jobs)
from refmodel.wgmma_forms import M, WGMMA_FORMS

from gpu.kernels.wgmma import job_runner

SEED = 20261201
FEATURE = "wgmma"


def load_model() -> Callable:
    """refmodel.numerics.wgmma.wgmma; :class:`gpu.record.model_check.ModelMissingError` (one line)
    when it cannot be imported."""
    from gpu.record.model_check import require_model

    return require_model("refmodel.numerics.wgmma", "wgmma")


# ----------------------------------------------------------------------------- running

@dataclass
class JobResult:
    key: str
    instr: str
    rs: bool
    scale_d: bool
    imm: str
    chain: int
    tier: int
    status: str = "pending"  # ok | MISMATCH | LAYOUT | model error | error
    tiles: int = 0
    outputs: int = 0
    mismatches: int = 0
    nan_only: int = 0
    exact_checked: int = 0
    exact_bad: int = 0
    seconds: float = 0.0
    error: str = ""
    by_family: dict = field(default_factory=dict)

    def row(self) -> str:
        return (f"{self.instr.removeprefix('wgmma.mma_async.sync.aligned.'):<34} {'rs' if self.rs else 'ss'} "
                f"{int(self.scale_d)} {self.imm:>5} {self.chain:>3} {self.outputs:>9} {self.mismatches:>9} "
                f"{self.nan_only:>7} {self.exact_bad:>6}/{self.exact_checked:<8} {self.seconds:6.1f}s  {self.status}"
                + (f": {self.error.splitlines()[0][:120]}" if self.error else ""))


TABLE_HEAD = (f"{'form':<34} op sd {'imm':>5} {'ch':>3} {'outputs':>9} {'mismatch':>9} {'nanonly':>7} "
              f"{'exact bad/checked':>15}  {'time':>6}  status")


def _bits_equal(x: np.ndarray, y: np.ndarray, name: str) -> np.ndarray:
    return raw_bits(x, name) == raw_bits(y, name)


SAMPLE_INPUT_BYTES = 160 * 1024  # cap on the A and B bytes a fixture sample keeps per job


def _sample_tiles(idx: np.ndarray, n: int, outputs: int, salt: int, tile_input_bytes: int = 0) -> np.ndarray:
    """Tile indices for the fixture: about ``outputs`` outputs (and at most
    :data:`SAMPLE_INPUT_BYTES` of A and B, for long chains), round-robin over families."""
    want = max(1, outputs // (M * n))
    if tile_input_bytes:
        want = max(1, min(want, SAMPLE_INPUT_BYTES // tile_input_bytes))
    fams = np.unique(idx)
    by = [list(np.flatnonzero(idx == f)) for f in np.roll(fams, -(salt % len(fams)))]
    out = []
    while len(out) < want and any(by):
        for lst in by:
            if lst and len(out) < want:
                out.append(lst.pop(0))
    return np.array(sorted(out), dtype=np.int64)


def _bits_arrays(job: Job, a, b, c, d) -> dict[str, np.ndarray]:
    f = job.form
    return {"a": raw_bits(a, f.dtype_a), "b": raw_bits(b, f.dtype_b),
            "c": raw_bits(c, f.dtype_d), "d": raw_bits(d, f.dtype_d)}


def run_job(job: Job, *, hw: Callable, model: Callable | None, seed: int, tiles: int, out: Path | None,
            prov: dict, save_sample: bool, sample_outputs: int, max_mismatch_tiles: int,
            diag: Path | None = None) -> JobResult:
    """Generate, run, compare and record one job; never raises."""
    t0 = time.time()
    res = JobResult(job.key, job.instr, job.rs, job.scale_d, f"{job.imm_scale_a:+d}{job.imm_scale_b:+d}",
                    job.chain, job.tier)
    try:
        form = job.form
        job_seed = [seed, zlib.crc32(job.key.encode())]
        rng = np.random.default_rng(job_seed)
        a, b, c, idx, names = make_inputs(job, rng, tiles)
        res.tiles = int(idx.size)
        d = hw(job, a, b, c)
        if d.dtype != element_dtype(form.dtype_d) or d.shape != c.shape:
            raise RuntimeError(f"hardware returned {d.dtype} {d.shape}, expected {element_dtype(form.dtype_d)} {c.shape}")
        res.outputs = int(d.size)
        fams = families_for(form)
        # exact oracle (layout check, no model needed)
        for fi, fam in enumerate(fams):
            if not fam.exact:
                continue
            sel = idx == fi
            ex = exact_oracle(job, a[sel], b[sel], c[sel])
            got = d[sel].astype(np.int64 if form.family == "int8" else np.float64)
            if form.family == "int8" and np.abs(ex).max() > 2**31 - 1:
                continue
            res.exact_checked += int(ex.size)
            bad = int(np.count_nonzero(got != ex))
            res.exact_bad += bad
            res.by_family.setdefault(fam.name, {})["exact_bad"] = bad
        mism_tiles = np.zeros(0, dtype=np.int64)
        ref = None
        if model is None:
            raise RuntimeError("no model to compare with: refusing to record")
        else:
            try:
                ref = model_chain(model, job, a, b, c)
                if ref.dtype != d.dtype or ref.shape != d.shape:
                    raise RuntimeError(f"model returned {ref.dtype} {ref.shape}, expected {d.dtype} {d.shape}")
                eq = _bits_equal(d, ref, form.dtype_d)
                res.mismatches = int(eq.size - np.count_nonzero(eq))
                if form.family != "int8":
                    both_nan = np.isnan(d.astype(np.float32)) & np.isnan(ref.astype(np.float32))
                    res.nan_only = int(np.count_nonzero(~eq & both_nan))
                tile_bad = (~eq).reshape(eq.shape[0], -1).sum(axis=1)
                for fi, fam in enumerate(fams):
                    res.by_family.setdefault(fam.name, {})["mismatches"] = int(tile_bad[idx == fi].sum())
                mism_tiles = np.flatnonzero(tile_bad)[:max_mismatch_tiles]
                res.status = "MISMATCH" if res.mismatches else "ok"
            except Exception as e:  # model bug or unsupported form: hardware still recorded
                res.status = "model error"
                res.error = f"{type(e).__name__}: {e}"
        if res.exact_bad:
            res.status = "LAYOUT" if res.status == "ok" else res.status + "+LAYOUT"
        if out is not None and not res.exact_bad:
            meta = {**job.meta(), "seed": job_seed, "tiles_per_family": tiles, "families": names,
                    "model": "error" if ref is None else "present",
                    "mismatches": res.mismatches}
            tile_bytes_all = int(a[0].nbytes + b[0].nbytes)
            if save_sample and tile_bytes_all <= 4 * SAMPLE_INPUT_BYTES:  # huge tiles: compared, not kept
                tile_bytes = int(a[0].nbytes + b[0].nbytes)
                sel = _sample_tiles(idx, form.n, sample_outputs, zlib.crc32(job.key.encode()), tile_bytes)
                bits = {k: v[sel] for k, v in _bits_arrays(job, a, b, c, d).items()}
                arrays, smeta = to_seeded({**meta, "sample": "tiles"}, sel, bits["a"], bits["b"], bits["c"], bits["d"])
                write_fixture(FEATURE, job.key, arrays, kind="wgmma_seeded", cases=int(bits["d"].size),
                              meta=smeta, provenance=prov, root=out)     # seeds + digests
            if mism_tiles.size:
                arrays = {k: v[mism_tiles] for k, v in _bits_arrays(job, a, b, c, d).items()}
                arrays["family"] = idx[mism_tiles]
                arrays["d_model"] = raw_bits(ref[mism_tiles], form.dtype_d)
                write_fixture(FEATURE, job.key + "__mismatch", arrays, kind="wgmma",
                              cases=int(arrays["d"].size), meta={**meta, "sample": "mismatching tiles"},
                              provenance=prov, root=out)
        if diag is not None and res.exact_bad:
            # hardware disagrees with exact integer products: a layout problem, not a fixture
            ex_idx = [i for i, f in enumerate(fams) if f.exact]
            sel = np.flatnonzero(np.isin(idx, ex_idx))[:max_mismatch_tiles]
            arrays = {k: v[sel] for k, v in _bits_arrays(job, a, b, c, d).items()}
            arrays["exact"] = exact_oracle(job, a[sel], b[sel], c[sel]).astype(np.float64)
            diag.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(diag / f"{job.key}.npz", meta=json.dumps(job.meta()), **arrays)
    except Exception as e:
        res.status = "error"
        res.error = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"
    res.seconds = time.time() - t0
    return res


def _load_state(path: Path) -> dict[str, dict]:
    done: dict[str, dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
                done[rec["key"]] = rec
            except (ValueError, KeyError):
                continue
    return done


def run_campaign(jobs: list[Job], *, hw: Callable, model: Callable | None, out: Path | None,
                 state: Path | None, seconds: float, seed: int = SEED, tiles: int = 4,
                 fixtures: str = "representative", sample_outputs: int = 16384, max_mismatch_tiles: int = 4,
                 prov: dict | None = None, retry_errors: bool = True, log=print) -> list[JobResult]:
    """Run jobs until ``seconds`` have passed; returns this run's results (resumed ones skipped)."""
    t_start = time.time()
    prev = _load_state(state) if state is not None else {}
    results: list[JobResult] = []
    log(TABLE_HEAD)
    skipped = 0
    for job in jobs:
        rec = prev.get(job.key)
        if rec is not None and (rec.get("status") != "error" or not retry_errors):
            skipped += 1
            continue
        if time.time() - t_start > seconds:
            log(f"time budget of {seconds:g} s reached; rerun the same command to continue")
            break
        save = fixtures == "all" or (fixtures == "representative" and job.tier <= 1)
        r = run_job(job, hw=hw, model=model, seed=seed, tiles=tiles, out=out, prov=prov or {},
                    save_sample=save, sample_outputs=sample_outputs, max_mismatch_tiles=max_mismatch_tiles,
                    diag=state.parent / "diagnostics" if state is not None else None)
        results.append(r)
        log(r.row())
        if r.status == "error":
            log("    " + r.error.strip().replace("\n", "\n    "))
        if state is not None:
            state.parent.mkdir(parents=True, exist_ok=True)
            with state.open("a") as fh:
                fh.write(json.dumps(asdict(r), sort_keys=True) + "\n")
    if skipped:
        log(f"({skipped} jobs already done in {state}; not rerun)")
    return results


def summarize(records: list[dict]) -> str:
    """Totals over all recorded jobs (this run and earlier ones)."""
    by: dict[str, int] = {}
    for r in records:
        by[r["status"]] = by.get(r["status"], 0) + 1
    outs = sum(r.get("outputs", 0) for r in records)
    mism = sum(r.get("mismatches", 0) for r in records)
    exb = sum(r.get("exact_bad", 0) for r in records)
    exc = sum(r.get("exact_checked", 0) for r in records)
    forms = len({r["instr"] for r in records if r["status"] != "error"})
    lines = [f"jobs: {len(records)} ({', '.join(f'{k}: {v}' for k, v in sorted(by.items()))})",
             f"forms run: {forms} of {len(WGMMA_FORMS)}; outputs compared: {outs}; model mismatches: {mism}; "
             f"exact-oracle mismatches: {exb} of {exc}"]
    if exb:
        lines.append("EXACT ORACLE FAILED: hardware disagrees with exact small-integer products -> "
                     "fragment or descriptor layout is wrong (inputs/outputs in wgmma_campaign/diagnostics/)")
    return "\n".join(lines)


def _filter(jobs: list[Job], pats: list[str] | None) -> list[Job]:
    if not pats:
        return jobs
    return [j for j in jobs if any(p in j.instr or p in j.key for p in pats)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="fixtures", help="fixtures root (fixtures/wgmma/ is written)")
    ap.add_argument("--seconds", type=float, default=1200.0, help="stop starting jobs after this long")
    ap.add_argument("--max-tier", type=int, default=4, help="0: type combos at N=8/256 ... 4: everything")
    ap.add_argument("--forms", nargs="*", help="only jobs whose instr or key contains one of these")
    ap.add_argument("--tiles", type=int, default=4, help="tiles per input family per job")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--fixtures", choices=("all", "representative", "none"), default="representative",
                    help="save a sample of every job, of tiers 0-1 only, or none (mismatches always)")
    ap.add_argument("--sample-outputs", type=int, default=16384, help="about this many outputs per sample")
    ap.add_argument("--max-mismatch-tiles", type=int, default=4)
    ap.add_argument("--state", default=None, help="resume file (default <out>/wgmma_campaign/state.jsonl)")
    ap.add_argument("--fresh", action="store_true", help="ignore (and overwrite) the resume file")
    ap.add_argument("--no-isolate", action="store_true", help="launch in this process (a fault kills the run)")
    ap.add_argument("--list", action="store_true", help="print the job plan and exit")
    args = ap.parse_args(argv)

    jobs = _filter(plan_jobs(args.max_tier), args.forms)
    if args.list:
        for j in jobs:
            print(f"tier {j.tier}  {j.key}")
        print(f"{len(jobs)} jobs")
        return 0
    out = Path(args.out)
    state = Path(args.state) if args.state else out / "wgmma_campaign" / "state.jsonl"
    if args.fresh and state.exists():
        state.unlink()
    from gpu.record.model_check import ModelMissingError

    try:
        model = load_model()
    except ModelMissingError as e:
        print(f"gpu.record.wgmma: error: {e}", file=sys.stderr)
        return 2
    print("refmodel.numerics.wgmma: present")
    isolate = not args.no_isolate
    try:
        if isolate:
            from gpu.kernels.isolate import default_runner

            info = default_runner().call("gpu.kernels.runtime", "device_info")
        else:
            from gpu.kernels.runtime import device_info

            info = device_info()
    except Exception as e:
        print(f"no usable GPU: {e}", file=sys.stderr)
        return 2
    print(f"device: {info.get('device')} driver {info.get('driver')} cupy {info.get('cupy')} nvrtc {info.get('nvrtc')}")
    prov = {**info, **host_provenance(), "generator": "gpu.record.wgmma", "seed": args.seed}
    run_campaign(jobs, hw=job_runner(isolate), model=model, out=out, state=state,
                 seconds=args.seconds, seed=args.seed, tiles=args.tiles,
                 fixtures=args.fixtures if args.fixtures != "none" else "", sample_outputs=args.sample_outputs,
                 max_mismatch_tiles=args.max_mismatch_tiles, prov=prov)
    records = list(_load_state(state).values())
    summary = summarize(records)
    print(summary)
    report = state.parent / "report.txt"
    rows = [JobResult(**{k: v for k, v in r.items()}).row() for r in records]
    report.write_text(TABLE_HEAD + "\n" + "\n".join(rows) + "\n\n" + summary + "\n")
    print(f"report: {report}")
    bad = any(r["status"] != "ok" for r in records)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
