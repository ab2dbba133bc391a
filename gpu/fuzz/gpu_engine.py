"""A fuzz campaign that stays on the GPU: inputs, hardware, model and comparison.

Per batch of T tiles of one dense wgmma job (form, SS or RS, a chain of 1..128 wgmmas along K,
scale-d, imm scales; drawn from ``(seed, batch)``):

1. **inputs on the GPU** — :data:`GEN_SOURCE`'s ``wgref_gen`` writes every element's bits from a
   counter-based hash of ``(seed, batch, operand, tile, row, col)``, in one of the input families
   of :data:`FAMILIES` per tile (NaN/Inf/subnormals/max values/cancellation/wide exponent
   spread/all-zero, as the CPU fuzzer's families).  The same text compiles for the host
   (:func:`generate_host`), and :mod:`refmodel.verify.seeded` is the same in numpy, so a batch
   can be rebuilt on any CPU from its seed;
2. **the hardware** — gpu.kernels.wgmma's kernel (one wgmma per tile), its shared-memory images and
   accumulator registers gathered on the GPU from the generated elements;
3. **the model** — :mod:`gpu.kernels.device_model`'s port of refmodel's accumulator on the CUDA cores;
4. **the comparison** on the GPU; only tiles with a differing output come back, and the CPU
   refmodel re-checks them (it stays the arbiter): a tile is reported as a mismatch only if the
   CPU refmodel also differs from the hardware; if the CPU model agrees with the hardware, the
   GPU port was wrong and that is reported as ``port_disagreements`` (a bug of ours, never hidden).

The journal has the CPU fuzzer's records (``batch``, ``tiles``, ``outputs``, ``mismatches``,
``seconds``), so ``wgref merge`` adds shards of both kinds up.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from refmodel.errors import InputError
from refmodel.fileio import atomic_write_text, save_npz
from refmodel.verify.seeded import FAMILIES, tile_families
from refmodel.wgmma_forms import WgmmaForm

from gpu.fuzz.cpu_engine import RatedReport
from gpu.kernels.compare import differing_rows
from gpu.kernels.form_runner import FormRunner
from gpu.kernels.generator import GEN_SOURCE, generate_host, typed  # noqa: F401  (the engine's generator)


@dataclass
class DeviceCampaignReport(RatedReport):
    """The counters every GPU-resident campaign (dense, sparse, layout) reports."""

    target: str
    seed: int
    batches: int = 0
    tiles: int = 0
    outputs: int = 0
    mismatches: int = 0
    port_disagreements: int = 0
    tiles_copied_back: int = 0
    seconds: float = 0.0
    compile_seconds: float = 0.0
    first: Optional[dict] = None

    def add_batch(self, tiles: int, outputs: int, mismatches: int, port_disagreements: int, seconds: float) -> None:
        """Count one finished batch."""
        self.batches += 1
        self.tiles += tiles
        self.outputs += outputs
        self.mismatches += mismatches
        self.port_disagreements += port_disagreements
        self.seconds += seconds


@dataclass
class DeviceFuzzReport(DeviceCampaignReport):
    forms: dict = field(default_factory=dict)
    instr_outputs: int = 0           # outputs times chain length: what the wgmmas of the batches wrote
    chains: dict = field(default_factory=dict)   # chain length -> [outputs, instr_outputs, seconds]


CHAINS = (1, 1, 1, 2, 4, 8, 16, 32, 64, 128)   # chain lengths a campaign draws when --chain is not given


def _draw(seed: int, batch: int, forms: list[WgmmaForm], rs: Optional[bool] = False, chain: Optional[int] = 1):
    """(form, scale_d, imm scales, rs, chain) of batch ``batch``; ``rs``/``chain`` None: drawn too
    (RS half the time, the chain from :data:`CHAINS`)."""
    rng = np.random.default_rng([seed, batch, 77])
    f = forms[int(rng.integers(len(forms)))]
    imm = (int(rng.choice([1, -1])), int(rng.choice([1, -1]))) if f.has_imm_scale else (1, 1)
    scale_d = bool(rng.integers(4) != 0)
    if rs is None or chain is None:
        r2 = np.random.default_rng([seed, batch, 78])
        rs = bool(r2.integers(2)) if rs is None else rs
        chain = int(r2.choice(CHAINS)) if chain is None else chain
    return f, scale_d, imm, bool(rs), int(chain)


def tiles_for(form: WgmmaForm, batch_tiles: int, chain: int = 1) -> int:
    """Tiles of a batch: ``batch_tiles`` counts n256 single-instruction tiles, so every batch has
    about the same number of instruction outputs whatever the form's N (narrow forms get more tiles,
    at most 8 times as many) and chain length (a chain of L gets 1/L of the tiles)."""
    return max(1, batch_tiles * 256 // max(form.n, 32) // max(int(chain), 1))


def _runner_key(form: WgmmaForm, imm, rs: bool = False, chain: int = 1) -> tuple:
    return (form.instr, tuple(imm), bool(rs), int(chain))


def precompile(forms: list[WgmmaForm], runners: dict, workers: int = 16, jobs: Optional[list] = None) -> float:
    """Build the runner (NVRTC kernels, index tables) of every job the campaign can draw (``jobs``:
    (form, imm, rs, chain) tuples; default every form and imm-scale pair, SS, chain 1), in parallel
    threads; returns the seconds it took (kept out of the outputs/s)."""
    from concurrent.futures import ThreadPoolExecutor

    from gpu.kernels.runtime import require_device

    require_device()        # CUDA initialised here, before the threads compile
    t0 = time.time()
    if jobs is None:
        jobs = [(f, imm, False, 1) for f in forms
                for imm in ([(1, 1), (1, -1), (-1, 1), (-1, -1)] if f.has_imm_scale else [(1, 1)])]
    todo = list({_runner_key(*j): j for j in jobs if _runner_key(*j) not in runners}.values())
    from gpu.kernels.device_model import _device_form

    def build(j):   # the runner, and the port's per-form tables (built on a form's first model call otherwise:
        r = FormRunner(j[0], *j[1], rs=j[2], chain=j[3])      # 0.45-0.72 s, probe_slow_batches.json)
        _device_form(j[0])
        return r

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for j, r in zip(todo, pool.map(build, todo)):
            runners[_runner_key(*j)] = r
    return time.time() - t0


def cpu_recheck(form: WgmmaForm, bits: dict, d_hw_bits: np.ndarray, scale_d: bool, imm, chain: int = 1) -> np.ndarray:
    """refmodel's D for the copied-back tiles vs the hardware: a boolean (T, 64*N) of real mismatches
    (a chain: one refmodel wgmma per K step, :func:`refmodel.verify.jobs.model_chain`)."""
    from refmodel.dtypes import bits_of
    from refmodel.numerics.wgmma import wgmma
    from refmodel.verify.jobs import Job, model_chain

    a, b, c = typed(form, bits)
    job = Job(form.instr, rs=False, scale_d=scale_d, imm_scale_a=imm[0], imm_scale_b=imm[1], chain=int(chain))
    want = model_chain(wgmma, job, a, b, c)
    w = bits_of(want).reshape(a.shape[0], -1).astype(np.uint32)
    return w != d_hw_bits.astype(np.uint32)


def fuzz_device(target: str, *, seconds: Optional[float] = None, cases: int = 10**12, seed: int = 0,
                batch_tiles: int = 8192, out: str | Path = "wgref-fuzz", shard: tuple[int, int] = (0, 1),
                plant: Optional[int] = None, progress: bool = False, resume: bool = False,
                fault_at: Optional[int] = None, rs: Optional[bool] = None,
                chain: Optional[int] = None) -> DeviceFuzzReport:
    """Fuzz the dense wgmma forms of ``target`` (gpu.fuzz.cpu_engine.select_forms: ``e4m3``, ``bf16``, ``all``,
    an instruction, ...) with everything on the GPU; see the module doc.  ``rs`` (A from registers)
    and ``chain`` (wgmmas per K chain, 1..128) are drawn per batch when None.

    ``plant=b``: flip one bit of one hardware output in batch ``b`` (a self-test: the campaign must
    report exactly that output).  ``fault_at=b``: launch an illegal-address kernel before batch
    ``b`` once per ``out`` folder (as gpu.fuzz.cpu_engine.fuzz).  Journal records as gpu.fuzz.cpu_engine.fuzz's.
    """
    import cupy as cp

    from refmodel.verify.journal import append_record, open_journal

    from gpu.fuzz.cpu_engine import check_campaign, check_shard, select_forms

    forms = select_forms(target)
    si, sn = check_shard(shard)
    check_campaign(cases=cases, seed=seed, seconds=seconds, batch_tiles=batch_tiles, chain=chain, engine="gpu")
    if rs is not None and not isinstance(rs, bool):
        raise InputError(f"rs must be True, False or None (drawn per batch), got {rs!r:.40}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    journal = out / "journal.jsonl"
    header = {"target": target, "seed": seed, "engine": "gpu", "batch_tiles": batch_tiles, "rs": rs, "chain": chain}
    if sn > 1:
        header["shard"] = [int(si), int(sn)]
    rep = DeviceFuzzReport(target, seed)
    b = si
    for rec in open_journal(journal, header, resume):
        b = max(b, rec["batch"] + sn)
        for k in ("tiles", "outputs", "mismatches", "seconds"):
            setattr(rep, k, getattr(rep, k) + rec[k])
        rep.port_disagreements += rec.get("port_disagreements", 0)
        rep.instr_outputs += rec.get("instr_outputs", rec["outputs"])
    runners: dict = {}
    if rs is False and chain == 1:
        rep.compile_seconds = precompile(forms, runners)
    else:   # only the jobs the first batches draw; later ones compile when first drawn (timed apart)
        first = [_draw(seed, bb, forms, rs, chain) for bb in range(b, b + 64 * sn, sn)]
        rep.compile_seconds = precompile(forms, runners, jobs=[(f, imm, r_, L) for f, _, imm, r_, L in first])
    t_start = time.time()
    while rep.tiles < cases and (seconds is None or time.time() - t_start < seconds):
        if fault_at is not None and b == fault_at and not (out / "fault-injected").exists():
            atomic_write_text(out / "fault-injected", f"batch {b}\n")
            from gpu.kernels.runtime import fault_illegal_address

            try:
                fault_illegal_address()
            except Exception as e:  # the context is dead: exit now, without unloading ~900 modules noisily
                print(f"injected fault before batch {b}: {type(e).__name__}: {e}", flush=True)
                os._exit(70)
        form, scale_d, imm, job_rs, L = _draw(seed, b, forms, rs, chain)
        key = _runner_key(form, imm, job_rs, L)
        if key not in runners:
            tc = time.time()
            runners[key] = FormRunner(form, *imm, rs=job_rs, chain=L)
            rep.compile_seconds += time.time() - tc
        t0 = time.time()
        run = runners[key]
        T = int(min(tiles_for(form, batch_tiles, L), cases - rep.tiles))
        fams = cp.asarray(tile_families(seed, b, T))
        x = run.generate(seed, b, fams)
        d_hw = run.hardware(x, scale_d)
        d_model = run.model(x, scale_d)
        if plant == b:
            d_hw[T // 2, 7] ^= 1
        bad_tiles = differing_rows(d_hw, d_model)
        n_port = n_bad = 0
        if bad_tiles.size:     # only these tiles come back; the CPU refmodel decides
            idx = cp.asnumpy(bad_tiles)
            bits = {k: cp.asnumpy(v[bad_tiles]) for k, v in x.items()}
            hw_bits = cp.asnumpy(d_hw[bad_tiles])
            port_bits = cp.asnumpy(d_model[bad_tiles])
            real = cpu_recheck(form, bits, hw_bits, scale_d, imm, L)
            n_bad = int(real.sum())
            n_port = int(((port_bits != hw_bits.astype(np.uint32)) != real).sum())
            rep.tiles_copied_back += int(idx.size)
            if (n_bad or n_port) and rep.first is None:
                t, col = np.argwhere(real | ((port_bits != hw_bits.astype(np.uint32)) != real))[0]
                rep.first = {"batch": b, "instr": form.instr, "tile": int(idx[t]), "row": int(col) // form.n,
                             "col": int(col) % form.n, "family": FAMILIES[int(tile_families(seed, b, T)[idx[t]])],
                             "scale_d": scale_d, "imm_scale": list(imm), "rs": job_rs, "chain": L,
                             "hw": int(hw_bits[t, col]),
                             "gpu_model": int(port_bits[t, col]), "real_mismatch": bool(real[t, col])}
                save_npz(out / f"mismatch_batch{b}.npz", tiles=idx, hw=hw_bits, gpu_model=port_bits,
                         **bits, meta=np.array(json.dumps({"instr": form.instr, "scale_d": scale_d,
                                                           "imm": list(imm), "rs": job_rs, "chain": L,
                                                           "seed": seed, "batch": b})))
        cp.cuda.runtime.deviceSynchronize()
        dt = time.time() - t0
        outputs = T * 64 * form.n
        rec = {"batch": b, "job": f"{form.instr}|{'rs' if job_rs else 'ss'}|sd={int(scale_d)}|imm={imm[0]},{imm[1]}"
                                  f"|chain={L}", "tiles": T,
               "outputs": outputs, "instr_outputs": outputs * L, "mismatches": n_bad, "port_disagreements": n_port,
               "tiles_copied_back": int(bad_tiles.size), "seconds": round(dt, 5)}
        append_record(journal, rec)
        rep.add_batch(T, outputs, n_bad, n_port, dt)
        rep.instr_outputs += outputs * L
        ch = rep.chains.setdefault(str(L), [0, 0, 0.0])
        ch[0] += outputs
        ch[1] += outputs * L
        ch[2] = round(ch[2] + dt, 5)
        f = rep.forms.setdefault(form.instr, [0, 0])
        f[0] += outputs
        f[1] += n_bad
        if progress:
            print(f"batch {b}: {form.instr} {'rs' if job_rs else 'ss'} chain {L}: {outputs} outputs {n_bad} mismatches; "
                  f"{rep.rate / 1e9:.2f} G outputs/s", flush=True)
        b += sn
    return rep
