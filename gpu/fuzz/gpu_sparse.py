"""A sparse wgmma fuzz campaign that stays on the GPU (the device counterpart of
:func:`gpu.fuzz.cpu_engine.fuzz_sparse`, in the style of :func:`gpu.fuzz.gpu_engine.fuzz_device`).

Per batch: one job of :func:`gpu.fuzz.cpu_engine.sparse_jobs` (a sparse form with SS/RS, sp-sel,
scale-d, imm scales) drawn from ``(seed, batch)``, and T tiles of it built by
:class:`gpu.kernels.sparse_runner.SparseRunner` — inputs generated on the GPU (element families,
legal and any-nibble metadata, garbage in the sp-meta nibbles not read), the hardware, the GPU port
of the model and the comparison on the GPU.  Only tiles with a differing output come back; the CPU
refmodel (:func:`refmodel.numerics.sparse.wgmma_sp`) re-checks them and is the arbiter: an output
is a mismatch only if refmodel also differs from the hardware; where refmodel agrees with the
hardware the GPU port was wrong (``port_disagreements``, reported, never hidden).

The first real mismatch is shrunk on the hardware (:func:`refmodel.verify.shrink_sparse.shrink_sparse`)
and saved as ``repro_sparse.npz`` (``wgref replay`` reads it), as ``fuzz_sparse`` does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gpu.fuzz.gpu_engine import DeviceCampaignReport
from gpu.kernels.compare import differing_rows
from gpu.kernels.sparse_runner import SparseRunner
from refmodel.verify.seeded import FAMILIES


@dataclass
class SparseDeviceReport(DeviceCampaignReport):
    repro: str | None = None
    forms: dict = field(default_factory=dict)


def job_key(job: dict) -> tuple:
    return (job["instr"], bool(job["rs"]), int(job["sp_sel"]), int(job["scale_d"]), int(job["imm_scale_a"]),
            int(job["imm_scale_b"]))


def job_name(job: dict) -> str:
    return (f"{job['instr']}|{'rs' if job['rs'] else 'ss'}|sel={job['sp_sel']}|sd={int(job['scale_d'])}|"
            f"imm={job['imm_scale_a']},{job['imm_scale_b']}")


def precompile(jobs: list[dict], runners: dict, workers: int = 16, model_kernel: str = "chain") -> float:
    """Build the runner (NVRTC kernels, index tables) of every job in parallel threads; returns the
    seconds it took (kept out of the outputs/s)."""
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.time()
    todo = list({job_key(j): j for j in jobs if job_key(j) not in runners}.values())
    if todo:    # the shared generator / model modules once, before the threads
        SparseRunner(todo[0], model_kernel=model_kernel)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for j, r in zip(todo, pool.map(lambda jb: SparseRunner(jb, model_kernel=model_kernel), todo)):
            runners[job_key(j)] = r
    return time.time() - t0


def tiles_for(form, batch_tiles: int) -> int:
    """``batch_tiles`` counts n256 tiles (every batch about the same outputs; at most 8x the tiles)."""
    return max(1, batch_tiles * 256 // max(form.n, 32))


def _draw(seed: int, batch: int, jobs: list[dict]) -> dict:
    rng = np.random.default_rng([seed, batch, 78])
    return jobs[int(rng.integers(len(jobs)))]


def _save_first(run: SparseRunner, bits: dict, hw_bits: np.ndarray, t: int, out: Path, notes: dict) -> tuple:
    """Shrink tile ``t`` on the hardware (one-tile runs of the same kernel) and save repro_sparse.npz;
    a mismatch that does not survive on its own (a planted one) is saved unshrunk."""
    from refmodel.dtypes import bits_of, from_bits
    from refmodel.errors import InputError
    from refmodel.verify.shrink_sparse import (
        SparseCase,
        save_sparse_case,
        shrink_sparse,
    )

    cp = run.xp
    asnumpy = getattr(cp, "asnumpy", np.asarray)       # numpy for a host runner (the tests)
    f, j = run.form, run.job
    a, meta, b, c = run.typed({k: bits[k][t:t + 1] for k in ("a", "b", "c", "meta")})
    case = SparseCase(f.instr, a[0], meta[0], b[0], c[0], sp_sel=j["sp_sel"], scale_d=bool(j["scale_d"]),
                      imm_scale_a=j["imm_scale_a"], imm_scale_b=j["imm_scale_b"], rs=j["rs"], notes=notes)
    utype = run.utype

    garbage = cp.asarray(bits["garbage"][t:t + 1])

    def run_one(cs: SparseCase) -> np.ndarray:
        x = {k: cp.asarray(bits_of(np.ascontiguousarray(v)).astype(np.uint32)[None])
             for k, v in (("a", cs.a), ("b", cs.b), ("c", cs.c))}
        x["meta"] = cp.asarray(np.asarray(cs.meta, np.uint8)[None])
        x["garbage"] = garbage
        d = asnumpy(run.hardware(x))[0].astype(utype).reshape(64, f.n)
        return from_bits(d, f.dtype_d)

    observed = from_bits(hw_bits[t].astype(utype).reshape(64, f.n), f.dtype_d)
    try:
        small, summary = shrink_sparse(case, run_one)
        hw = run_one(small)
    except InputError:   # does not reproduce alone (e.g. planted): keep the tile and what the campaign saw
        small, hw = case, observed
        d = np.argwhere(bits_of(observed) != bits_of(np.ascontiguousarray(case.model())))
        summary = {"output": [int(v) for v in d[0]] if d.size else None, "shrunk": False}
    path = save_sparse_case(out / "repro_sparse.npz", small, hardware=hw, summary=summary)
    return str(path), summary


def fuzz_sparse_device(target: str = "sparse", *, seconds: float | None = None, cases: int = 10**12, seed: int = 0,
                       batch_tiles: int = 2048, out: str | Path = "wgref-fuzz", plant: int | None = None,
                       progress: bool = False, resume: bool = False, model_kernel: str = "chain",
                       _runners: dict | None = None) -> SparseDeviceReport:
    """Fuzz the sparse jobs of ``target`` ('sparse' or 'sparse:<fragment>') with everything on the GPU
    (see the module doc).  ``cases``: tiles in all; ``batch_tiles``: n256-equivalent tiles a batch.
    ``plant=b``: flip one bit of one hardware output in batch ``b`` (the campaign must report exactly
    that output).  ``model_kernel``: SparseRunner's ("chain", the default, or "gather").  ``_runners`` (tests only):
    prebuilt runners by :func:`job_key`, host ones (numpy) included.  Journal records: batch, job,
    tiles, outputs, mismatches, port_disagreements, tiles_copied_back, seconds (and repro)."""
    from gpu.fuzz.cpu_engine import check_campaign, sparse_jobs
    from refmodel.fileio import save_npz
    from refmodel.verify.journal import append_record, open_journal

    jobs = sparse_jobs(target)
    check_campaign(cases=cases, seed=seed, seconds=seconds, batch_tiles=batch_tiles, engine="gpu")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    journal = out / "journal.jsonl"
    header = {"target": target, "seed": seed, "engine": "gpu-sparse", "batch_tiles": batch_tiles}
    rep = SparseDeviceReport(target, seed)
    b = 0
    for rec in open_journal(journal, header, resume):
        b = max(b, rec["batch"] + 1)
        for k in ("tiles", "outputs", "mismatches", "seconds"):
            setattr(rep, k, getattr(rep, k) + rec[k])
        rep.port_disagreements += rec.get("port_disagreements", 0)
    if _runners is None:
        from gpu.kernels.runtime import require_device

        cp = require_device()
        runners: dict = {}
        # only the jobs of the first batches (1,056 jobs in all: building every one first would take
        # minutes); a job first drawn later is built outside the batch's timing
        first = [_draw(seed, bb, jobs) for bb in range(b, b + 64)]
        rep.compile_seconds = precompile(first, runners, model_kernel=model_kernel)
    else:
        runners = _runners
        cp = next(iter(runners.values())).xp

    def asnumpy(v):
        return cp.asnumpy(v) if cp is not np else v

    def sync():
        if cp is not np:
            cp.cuda.runtime.deviceSynchronize()
    t_start = time.time()
    while rep.tiles < cases and (seconds is None or time.time() - t_start < seconds):
        job = _draw(seed, b, jobs)
        if job_key(job) not in runners:
            tc = time.time()
            runners[job_key(job)] = SparseRunner(job, model_kernel=model_kernel)
            rep.compile_seconds += time.time() - tc
        t0 = time.time()
        run = runners[job_key(job)]
        form = run.form
        T = int(min(tiles_for(form, batch_tiles), cases - rep.tiles))
        x = run.generate(seed, b, T)
        d_hw = run.hardware(x)
        d_model = run.model(x)
        if plant == b:
            d_hw[T // 2, 7] ^= 1
        bad_tiles = differing_rows(d_hw, d_model)
        n_port = n_bad = 0
        repro_rec = None
        if bad_tiles.size:     # only these tiles come back; the CPU refmodel decides
            idx = asnumpy(bad_tiles)
            bits = {k: asnumpy(x[k][bad_tiles]) for k in ("a", "b", "c", "meta", "garbage")}
            hw_bits = asnumpy(d_hw[bad_tiles])
            port_bits = asnumpy(d_model[bad_tiles])
            cpu = run.refmodel(bits)
            real = cpu != hw_bits
            port = (port_bits != hw_bits) & ~real          # the port differed where refmodel agrees
            n_bad, n_port = int(real.sum()), int(port.sum())
            rep.tiles_copied_back += int(idx.size)
            if (n_bad or n_port) and rep.first is None:
                t, col = np.argwhere(real | port)[0]
                fams = asnumpy(x["fams"])
                rep.first = {"batch": b, "job": job_name(job), "tile": int(idx[t]), "row": int(col) // form.n,
                             "col": int(col) % form.n, "family": FAMILIES[int(fams[idx[t]])],
                             "hw": int(hw_bits[t, col]), "gpu_model": int(port_bits[t, col]),
                             "refmodel": int(cpu[t, col]), "real_mismatch": bool(real[t, col])}
                save_npz(out / f"mismatch_batch{b}.npz", tiles=idx, hw=hw_bits, gpu_model=port_bits, refmodel=cpu,
                         **bits, job=np.array(job_name(job)))
            if n_bad and rep.repro is None:
                t = int(np.argwhere(real.any(axis=1))[0][0])
                rep.repro, summary = _save_first(run, bits, hw_bits, t, out,
                                                 {"seed": [seed, b], "tile": int(idx[t]), "engine": "gpu-sparse"})
                rep.first["repro_summary"] = summary
                repro_rec = rep.repro
        sync()
        dt = time.time() - t0
        outputs = T * 64 * form.n
        rec = {"batch": b, "job": job_name(job), "tiles": T, "outputs": outputs, "mismatches": n_bad,
               "port_disagreements": n_port, "tiles_copied_back": int(bad_tiles.size), "seconds": round(dt, 5)}
        if repro_rec:
            rec["repro"] = repro_rec
        append_record(journal, rec)
        rep.add_batch(T, outputs, n_bad, n_port, dt)
        fr = rep.forms.setdefault(form.instr, [0, 0])
        fr[0] += outputs
        fr[1] += n_bad
        if progress:
            print(f"batch {b}: {job_name(job)} {outputs} outputs {n_bad} mismatches {n_port} port; "
                  f"{rep.rate / 1e9:.2f} G outputs/s", flush=True)
        b += 1
    return rep


__all__ = ["SparseDeviceReport", "fuzz_sparse_device", "precompile", "tiles_for"]
