"""``wgref fuzz``: random and adversarial wgmma cases on the GPU, diffed against refmodel.

Each batch draws one job (form, SS/RS, scale-d, imm scales, chain) and a few tiles of
every selected input family (:mod:`refmodel.verify.families.tile`), runs the hardware and the
model, and compares raw bits.  One JSON line per batch goes to the journal
(``<out>/journal.jsonl``), so a killed campaign continues with ``--resume``
(batch ``i`` always draws from seed ``(seed, i)``: resumed runs see the same cases).
On the first mismatch the failing tiles are shrunk to a minimal reproducer
(:mod:`refmodel.verify.shrink`) and saved as a replay file for ``wgref replay``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from refmodel.verify.case import WgmmaCase, save_case
from refmodel.errors import InputError
from refmodel.validate import check_flag, check_int, check_real_scalar
from refmodel.fileio import atomic_write_text, save_npz
from refmodel.dtypes import bits_of
from refmodel.verify.shrink import shrink
from refmodel.wgmma_forms import WGMMA_FORMS, WgmmaForm, parse_wgmma

from concurrent.futures import ThreadPoolExecutor

from refmodel.verify.journal import append_record, open_journal, read_journal  # noqa: F401  (read_journal re-exported)

from refmodel.verify.jobs import Job, families_for, model_chain

def select_forms(target: str) -> list[WgmmaForm]:
    """An instruction, a family name (tf32, f16, bf16, fp8, int8), a dtype fragment
    ('e4m3', 'n256'), or 'wgmma' for all forms; several, comma-separated, for their union."""
    if not isinstance(target, str) or not target.strip():
        raise InputError(f"a fuzz target must be a non-empty string (an instruction, a family such as fp8, "
                         f"a fragment such as e4m3, or 'wgmma'), got {target!r:.60}")
    if "," in target:
        seen: dict = {}
        for part in target.split(","):
            if part.strip():
                seen.update((f.instr, f) for f in select_forms(part))
        if not seen:
            raise InputError(f"fuzz target {target!r:.60} names no wgmma form")
        return list(seen.values())
    t = target.strip()
    if t.startswith("wgmma.mma_async"):
        return [parse_wgmma(t)]
    if t in ("wgmma", "all"):
        return list(WGMMA_FORMS)
    fams = {"tf32", "f16", "bf16", "fp8", "int8"}
    if t in fams:
        return [f for f in WGMMA_FORMS if f.family == t]
    hits = [f for f in WGMMA_FORMS if t in f.instr]
    if not hits:
        raise InputError(f"fuzz target {target!r:.60} matches no wgmma form; give an instruction, "
                         "a family (tf32, f16, bf16, fp8, int8), a fragment such as 'e4m3' or 'n256', or 'wgmma'")
    return hits


# ----------------------------------------------------------------------------- campaign arguments
# The rules every campaign's arguments follow, checked before any work starts (the CLI calls the
# same checks with its flag names, so ``--cases -5`` and ``cases=-5`` are refused by one rule).

MAX_CASES = 10**12                   # tiles (calls, conversions / 1024) of one campaign
MAX_SEED = 2**63 - 1
MAX_CHAIN = 128                      # instructions per K chain
MAX_BATCH_TILES = {"cpu": 4096, "gpu": 65536}   # tiles per batch (gpu: n256-equivalent tiles)


def check_campaign(*, cases=None, seed=None, seconds=None, chain=None, batch_tiles=None, engine: str = "cpu",
                   names: Optional[dict] = None, cases_unit: int = 1) -> None:
    """Refuse campaign arguments that would run nothing, run forever or make no sense: ``cases``
    an int from 1 to :data:`MAX_CASES` (times ``cases_unit``), ``seed`` an int >= 0, ``seconds``
    None or a finite number > 0, ``chain`` None or 1..:data:`MAX_CHAIN`, ``batch_tiles`` None or
    1..:data:`MAX_BATCH_TILES`.  ``names`` spells the parameters (the CLI's flags)."""
    nm = (names or {}).get
    if cases is not None:
        check_int(nm("cases", "cases"), cases, 1, MAX_CASES * cases_unit)
    if seed is not None:
        check_int(nm("seed", "seed"), seed, 0, MAX_SEED)
    if seconds is not None:
        t = check_real_scalar(nm("seconds", "seconds"), seconds, finite=True)
        if t <= 0:
            raise InputError(f"{nm('seconds', 'seconds')} must be a duration > 0, got {seconds!r}")
    if chain is not None:
        check_int(nm("chain", "chain"), chain, 1, MAX_CHAIN)
    if batch_tiles is not None:
        check_int(nm("batch_tiles", "batch_tiles"), batch_tiles, 1, MAX_BATCH_TILES[engine])


def tile_family_names() -> tuple[str, ...]:
    """Every input family the tile engine draws (float forms, then int8 forms)."""
    from refmodel.verify.jobs import FLOAT_FAMILIES, INT_FAMILIES

    return tuple(dict.fromkeys(f.name for f in FLOAT_FAMILIES + INT_FAMILIES))


def check_families(forms: list[WgmmaForm], families, name: str = "families") -> Optional[list[str]]:
    """None (every family), or a non-empty list of known tile families with one for every form."""
    if families is None:
        return None
    known = tile_family_names()
    if isinstance(families, str) or not isinstance(families, (list, tuple)) or not families:
        raise InputError(f"{name} must be a non-empty list of input families ({', '.join(known)}), "
                         f"got {families!r:.60}")
    bad = [f for f in families if not isinstance(f, str) or f not in known]
    if bad:
        raise InputError(f"{name}: unknown input famil{'ies' if len(bad) > 1 else 'y'} "
                         f"{', '.join(repr(b)[:40] for b in bad[:3])}; known are {', '.join(known)}")
    for f in forms:
        if not any(t.name in families for t in families_for(f)):
            raise InputError(f"{name}: none of {', '.join(families)} applies to {f.instr} (its families: "
                             f"{', '.join(t.name for t in families_for(f))})")
    return list(families)


def check_shard(shard) -> tuple[int, int]:
    if not isinstance(shard, (tuple, list)) or len(shard) != 2:
        raise InputError(f"shard must be (i, n) with n >= 1 and 0 <= i < n, got {shard!r:.60}")
    si, sn = shard
    if isinstance(si, bool) or isinstance(sn, bool) or not isinstance(si, (int, np.integer)) \
            or not isinstance(sn, (int, np.integer)) or sn < 1 or not 0 <= si < sn:
        raise InputError(f"shard must be (i, n) with n >= 1 and 0 <= i < n, got {shard!r:.60}")
    return int(si), int(sn)


def cvt_forms(target: str) -> list:
    """The cvt forms of a cvt target: 'cvt' (all of them) or one opcode."""
    from refmodel.numerics.cvt import CVT_FORMS, parse_cvt

    return list(CVT_FORMS) if str(target).strip() == "cvt" else [parse_cvt(target)]


def _fragment(target: str, kind: str, example: str) -> str:
    t = str(target).strip()
    if t == kind:
        return ""
    if not t.startswith(kind + ":") or not t[len(kind) + 1:].strip():
        raise InputError(f"fuzz target {target!r:.60}: give '{kind}' or '{kind}:<fragment>' (e.g. {example})")
    return t[len(kind) + 1:].strip()


def layout_variants(target: str) -> list:
    """The wgmma variants of a layout target: 'layout' or 'layout:<fragment>'."""
    from refmodel.verify import layout_cases as R

    frag = _fragment(target, "layout", "'layout:bf16'")
    variants = [v for v in R.WGMMA_VARIANTS if frag in v[0]]
    if not variants:
        raise InputError(f"fuzz target {target!r:.60}: no layout variant matches {frag!r:.40}; "
                         f"try 'layout', 'layout:f16', 'layout:e4m3'")
    return variants


def sparse_jobs(target: str) -> list[dict]:
    """The sparse jobs of a sparse target: 'sparse' or 'sparse:<fragment>'."""
    from refmodel.verify import sparse_cases as RS

    frag = _fragment(target, "sparse", "'sparse:e4m3'")
    jobs = [j for j in RS.plan_jobs() if frag in j["instr"]]
    if not jobs:
        raise InputError(f"fuzz target {target!r:.60}: no sparse form matches {frag!r:.40}; try 'sparse', "
                         f"'sparse:f16', 'sparse:m64n256k64'")
    return jobs


class RatedReport:
    """What every campaign report adds to its counters: ``rate`` (outputs per second of batch time)
    and ``to_dict()`` (the counters and ``outputs_per_second``, for ``--json``)."""

    outputs: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.outputs / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["outputs_per_second"] = self.rate
        return d


@dataclass
class FuzzReport(RatedReport):
    target: str
    seed: int
    batches: int = 0
    tiles: int = 0
    outputs: int = 0
    mismatches: int = 0
    seconds: float = 0.0
    repro: Optional[str] = None
    shrink_log: list[str] = field(default_factory=list)
    first: Optional[dict] = None


def _draw_job(rng: np.random.Generator, forms: list[WgmmaForm], *, rs, chain, scale_d) -> Job:
    f = forms[int(rng.integers(len(forms)))]
    imm = (lambda: int(rng.choice([1, -1]))) if f.has_imm_scale else (lambda: 1)
    return Job(f.instr, rs=bool(rng.integers(2)) if rs is None else rs,
               scale_d=bool(rng.integers(2)) if scale_d is None else scale_d,
               imm_scale_a=imm(), imm_scale_b=imm(),
               chain=int(rng.choice([1, 1, 2, 4])) if chain is None else chain)


def _gen_batch(seed, b, forms, fam_names, rs, chain, scale_d, batch_tiles, remaining, pool):
    """Job and inputs of batch ``b``: families generated in parallel, each from its own
    stream ``(seed, b, family index)`` so the batch is the same however it is scheduled."""
    rng = np.random.default_rng([seed, b])
    job = _draw_job(rng, forms, rs=rs, chain=chain, scale_d=scale_d)
    fams = [f for f in families_for(job.form) if fam_names is None or f.name in fam_names]
    if not fams:
        raise InputError(f"none of the families {fam_names} applies to {job.instr}")
    per = max(1, min(batch_tiles, remaining) // len(fams))
    parts = list(pool.map(lambda fi: fams[fi].make(job.form, np.random.default_rng([seed, b, fi]), per,
                                                   job.chain), range(len(fams))))
    a, bm, c = (np.concatenate([p[i] for p in parts]) for i in range(3))
    idx = np.repeat(np.arange(len(fams), dtype=np.int16), per)
    return job, a, bm, c, idx, [f.name for f in fams]


def _journal_header(target, seed, families, rs, chain, scale_d, batch_tiles, shard=(0, 1)) -> dict:
    head = {"target": target, "seed": seed, "families": families, "rs": rs, "chain": chain,
            "scale_d": scale_d, "batch_tiles": batch_tiles}
    if shard[1] > 1:  # an unsharded journal keeps the old header (and stays resumable)
        head["shard"] = [int(shard[0]), int(shard[1])]
    return head


def fuzz(target: str, *, cases: int, seed: int = 0, families: Optional[list[str]] = None,
         seconds: Optional[float] = None, rs: Optional[bool] = None, chain: Optional[int] = None,
         scale_d: Optional[bool] = None, out: str | Path = "wgref-fuzz", resume: bool = False,
         hw: Optional[Callable] = None, model: Optional[Callable] = None, batch_tiles: int = 64,
         keep_going: bool = False, progress: bool = True, shard: tuple[int, int] = (0, 1),
         fault_at: Optional[int] = None, fault: Optional[Callable[[], None]] = None) -> FuzzReport:
    """Run a campaign of ``cases`` tiles (or until ``seconds``); see the module docstring.

    ``fault_at``/``fault``: call ``fault()`` (which should crash the process, e.g.
    :func:`gpu.kernels.runtime.fault_illegal_address`) before batch ``fault_at`` runs, once per ``out`` folder
    (a marker file remembers it), to test that a campaign survives a faulting worker.

    ``shard=(i, n)`` runs only the batches ``i, i + n, i + 2n, ...`` (``cases`` tiles of them):
    shards of one campaign are disjoint and ``wgref merge`` adds their journals up
    (:mod:`refmodel.verify.journal`).

    ``hw(job, a, b, c)`` and ``model(instr, a, b, c, ...)`` default to the GPU
    (:func:`gpu.kernels.wgmma.job_runner`) and :func:`refmodel.numerics.wgmma.wgmma`.
    """
    forms = select_forms(target)
    si, sn = check_shard(shard)
    check_campaign(cases=cases, seed=seed, seconds=seconds, chain=chain, batch_tiles=batch_tiles)
    families = check_families(forms, families)
    rs = None if rs is None else check_flag("rs", rs)
    scale_d = None if scale_d is None else check_flag("scale_d", scale_d)
    if hw is None:
        from gpu.kernels.wgmma import job_runner

        hw = job_runner(isolate=False)
    if model is None:
        from refmodel.numerics.wgmma import wgmma as model
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    journal = out / "journal.jsonl"
    header = _journal_header(target, seed, families, rs, chain, scale_d, batch_tiles, (si, sn))
    rep = FuzzReport(target, seed)
    start_batch = si
    for rec in open_journal(journal, header, resume):
        start_batch = max(start_batch, rec["batch"] + sn)
        rep.tiles += rec["tiles"]
        rep.outputs += rec["outputs"]
        rep.mismatches += rec["mismatches"]
        rep.seconds += rec["seconds"]
    rep.batches = (start_batch - si) // sn
    bar = _progress(cases, rep.tiles, progress)
    t_start = time.time()
    b = start_batch
    # pipeline: the next batch's inputs are generated while this one runs on the GPU and the
    # model (the model's numba kernels release the GIL)
    gen_pool = ThreadPoolExecutor(max_workers=16)
    ahead = ThreadPoolExecutor(max_workers=1)
    hw_pool = ThreadPoolExecutor(max_workers=1)
    submit = lambda bb, left: ahead.submit(_gen_batch, seed, bb, forms, families, rs, chain,  # noqa: E731
                                           scale_d, batch_tiles, left, gen_pool)
    nxt = submit(b, cases - rep.tiles)
    try:
        while rep.tiles < cases and (seconds is None or time.time() - t_start < seconds):
            if fault_at is not None and b == fault_at and not (out / "fault-injected").exists():
                atomic_write_text(out / "fault-injected", f"batch {b}\n")
                (fault or _default_fault)()
            t0 = time.time()
            job, a, bm, c, fam_idx, names = nxt.result()
            left = cases - rep.tiles - a.shape[0]
            nxt = submit(b + sn, left) if left > 0 else None
            hw_fut = hw_pool.submit(hw, job, a, bm, c)   # the GPU works while the model runs
            d_model = model_chain(model, job, a, bm, c)
            d_hw = hw_fut.result()
            bad = bits_of(d_hw) != bits_of(d_model)
            dt = time.time() - t0
            n_bad = int(bad.sum())
            rec = {"batch": b, "job": job.key, "tiles": int(a.shape[0]), "outputs": int(bad.size),
                   "mismatches": n_bad, "seconds": round(dt, 4)}
            rep.tiles += rec["tiles"]
            rep.outputs += rec["outputs"]
            rep.mismatches += n_bad
            rep.seconds += dt
            rep.batches += 1
            if n_bad and rep.repro is None:
                rec["repro"] = str(_shrink_and_save(job, a, bm, c, bad, fam_idx, names, hw, model, out, b, rep))
            append_record(journal, rec)
            bar(rec["tiles"], rep)
            b += sn
            if (n_bad and not keep_going) or nxt is None:
                break
    finally:
        ahead.shutdown(wait=True, cancel_futures=True)
        hw_pool.shutdown(wait=True)
        gen_pool.shutdown(wait=True)
    bar(0, rep, close=True)
    return rep


def model_device(job: Job, a, b, c) -> np.ndarray:
    """The CPU model standing in for the GPU (``wgref fuzz --dry-run``): the campaign machinery runs
    end to end and, by construction, finds nothing."""
    from refmodel.numerics.wgmma import wgmma

    return model_chain(wgmma, job, a, b, c)


def _default_fault() -> None:
    raise RuntimeError("injected fault (wgref fuzz --inject-fault)")


def _shrink_and_save(job, a, b, c, bad, fam_idx, names, hw, model, out, batch, rep) -> Path:
    t, i, j = (int(v) for v in np.argwhere(bad)[0])
    tiles = np.flatnonzero(bad.reshape(bad.shape[0], -1).any(axis=1))[:4]
    case = WgmmaCase(job.instr, a[tiles], b[tiles], c[tiles], rs=job.rs, scale_d=job.scale_d,
                     imm_scale_a=job.imm_scale_a, imm_scale_b=job.imm_scale_b, chain=job.chain,
                     notes={"batch": batch, "seed": rep.seed, "family": names[int(fam_idx[t])]})

    def run_hw(cs: WgmmaCase):
        jb = Job(cs.instr, rs=cs.rs, scale_d=cs.scale_d, imm_scale_a=cs.imm_scale_a,
                 imm_scale_b=cs.imm_scale_b, chain=cs.chain)
        return hw(jb, cs.a, cs.b, cs.c)

    def run_model(cs: WgmmaCase):
        jb = Job(cs.instr, rs=cs.rs, scale_d=cs.scale_d, imm_scale_a=cs.imm_scale_a,
                 imm_scale_b=cs.imm_scale_b, chain=cs.chain)
        return model_chain(model, jb, cs.a, cs.b, cs.c)

    res = shrink(case, lambda cs: bits_of(run_hw(cs)) != bits_of(run_model(cs)))
    res.case.notes["shrink"] = res.log
    path = out / f"repro_batch{batch}.npz"
    save_case(path, res.case, hardware=run_hw(res.case))
    from refmodel.verify.differ import diff

    d = diff(run_model(res.case), run_hw(res.case), name=path.name)
    rep.repro = str(path)
    rep.shrink_log = res.log
    rep.first = {"tile": t, "row": i, "col": j, "job": job.key, "family": names[int(fam_idx[t])],
                 "minimal": d.to_text()}
    return path


def _progress(total: int, done: int, enabled: bool):
    """A tqdm bar with rate and mismatches when tqdm is installed, else a plain line."""
    if not enabled:
        return lambda n, rep, close=False: None
    try:
        from tqdm import tqdm
    except ImportError:
        def plain(n, rep, close=False):
            if close:
                print(f"{rep.tiles}/{total} tiles, {rep.outputs} outputs, {rep.mismatches} mismatches")
        return plain
    bar = tqdm(total=total, initial=done, unit="tile", dynamic_ncols=True)

    def upd(n, rep, close=False):
        if n:
            bar.update(n)
            bar.set_postfix(outputs=rep.outputs, mismatches=rep.mismatches,
                            Mout_s=f"{rep.rate / 1e6:.1f}")
        if close:
            bar.close()
    return upd


# ----------------------------------------------------------------------------- cvt forms

def fuzz_cvt(target: str, *, cases: int, seed: int = 0, seconds: Optional[float] = None,
             batch: int = 1 << 20, out: str | Path = "wgref-fuzz", hw: Optional[Callable] = None) -> FuzzReport:
    """Fuzz cvt forms (``target``: one opcode, or 'cvt' for all 28) on adversarial operands.

    A mismatch is already minimal (one element): its operands, both results and the form
    are saved to ``<out>/repro_cvt.json``."""
    from refmodel.numerics.cvt import cvt
    from refmodel.verify.families.f32 import adversarial_f32

    forms = cvt_forms(target)
    check_campaign(cases=cases, seed=seed, seconds=seconds, cases_unit=1024)
    check_int("batch", batch, 1, 1 << 24)
    if hw is None:
        from gpu.kernels.cvt import run_cvt as hw
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rep = FuzzReport(target, seed)
    t0 = time.time()
    b = 0
    while rep.outputs < cases and (seconds is None or time.time() - t0 < seconds):
        rng = np.random.default_rng([seed, b])
        f = forms[int(rng.integers(len(forms)))]
        n = min(batch, cases - rep.outputs)
        if f.src == "f32":
            ops = (adversarial_f32(rng, n), adversarial_f32(rng, n))
        elif f.src == "f16x2":
            ops = (rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32), None)
        else:
            ops = (rng.integers(0, 1 << 16, n, dtype=np.uint64).astype(np.uint16), None)
        got, want = cvt(f.instr, *ops), hw(f.instr, *ops)
        bad = np.flatnonzero(got != want)
        rep.batches, rep.outputs, rep.mismatches = b + 1, rep.outputs + n, rep.mismatches + bad.size
        if bad.size and rep.repro is None:
            i = int(bad[0])
            first = {"instr": f.instr, "a": f"0x{int(ops[0][i]):x}",
                     "b": None if ops[1] is None else f"0x{int(ops[1][i]):x}",
                     "refmodel": f"0x{int(got[i]):x}", "hardware": f"0x{int(want[i]):x}", "seed": [seed, b]}
            path = out / "repro_cvt.json"
            atomic_write_text(path, json.dumps(first, indent=1))
            rep.repro, rep.first = str(path), {**first, "minimal": json.dumps(first)}
            break
        b += 1
    rep.seconds = time.time() - t0
    rep.tiles = rep.outputs
    return rep


def fuzz_layout(target: str = "layout", *, cases: int, seed: int = 0, seconds: Optional[float] = None,
                batch: int = 64, out: str | Path = "wgref-fuzz", hw: Optional[Callable] = None) -> FuzzReport:
    """Fuzz wgmma operand reads through random descriptors (``target``: 'layout', or
    'layout:<fragment>' to restrict the instruction variants, e.g. 'layout:bf16').

    Each batch takes one variant of :data:`refmodel.verify.layout_cases.WGMMA_VARIANTS` and ``batch``
    cases with random legal and near-illegal descriptors (every swizzle mode, both majors
    where allowed, dense and wrong LBO/SBO, starts on the pattern, at 32-byte K steps,
    anywhere, or flush with the image end, base offsets 0..7), runs them on the GPU and
    through :func:`refmodel.machine.wgmma.wgmma_registers`, and compares raw bits.  The
    first mismatching case is saved to ``<out>/repro_layout.npz`` with both answers."""
    from refmodel.verify.replay_layouts import wgmma_model

    from refmodel.verify import layout_cases as R
    variants = layout_variants(target)
    check_campaign(cases=cases, seed=seed, seconds=seconds)
    check_int("batch", batch, 1, 4096)
    if hw is None:
        from gpu.kernels.layouts import WgmmaVariant, run_wgmma_desc

        def hw(v, arr):
            return run_wgmma_desc(WgmmaVariant(*v), arr["images"], arr["desc_a"], arr["desc_b"], arr["c_regs"],
                                  arr["scale_d"], arr["a_regs"] if v[1] else None)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rep = FuzzReport(target, seed)
    t0 = time.time()
    b = 0
    while rep.tiles < cases and (seconds is None or time.time() - t0 < seconds):
        rng = np.random.default_rng([seed, b])
        v = variants[int(rng.integers(len(variants)))]
        n = min(batch, cases - rep.tiles)
        arr = R.wgmma_cases(v, n, tag=f"fuzz-{seed}-{b}")
        notes = arr.pop("notes")
        d, bases = hw(v, arr)
        m = wgmma_model(v, arr, bases)
        bad = [i for i in range(n) if not np.array_equal(d[i], m[i])]
        rep.batches, rep.tiles = b + 1, rep.tiles + n
        rep.outputs += int(d.size)
        rep.mismatches += int(sum(np.count_nonzero(d[i] != m[i]) for i in bad))
        if bad and rep.repro is None:
            i = bad[0]
            path = out / "repro_layout.npz"
            cfg = {"variant": list(v), "notes": notes[i], "seed": [seed, b], "case": i}
            save_npz(path, image=arr["images"][i], desc_a=arr["desc_a"][i:i + 1],
                     desc_b=arr["desc_b"][i:i + 1], a_regs=arr["a_regs"][i], c_regs=arr["c_regs"][i],
                     scale_d=arr["scale_d"][i:i + 1], base=bases[i:i + 1], hardware=d[i], refmodel=m[i],
                     config=np.array(json.dumps(cfg)))
            rep.repro = str(path)
            rep.first = {"minimal": f"{v[0]} {notes[i]}: {int(np.count_nonzero(d[i] != m[i]))} registers differ",
                         **cfg}
        b += 1
    rep.seconds = time.time() - t0
    return rep


def fuzz_sparse(target: str = "sparse", *, cases: int, seed: int = 0, seconds: Optional[float] = None,
                out: str | Path = "wgref-fuzz", hw: Optional[Callable] = None) -> FuzzReport:
    """Fuzz sparse wgmma (``target``: 'sparse', or 'sparse:<fragment>', e.g. 'sparse:e4m3'):
    each batch is one job of :func:`refmodel.verify.sparse_cases.plan_jobs` (a sparse form with SS/RS,
    sp-sel, scale-d, imm scales) with :data:`refmodel.verify.sparse_cases.TILES` fresh tiles (operand
    families, legal and any-nibble metadata, garbage in the metadata lanes not read), run on
    the GPU and through refmodel.wgmma_sp.  The first mismatch is shrunk to the nibble and
    elements that matter (:mod:`refmodel.verify.shrink_sparse`) and saved for ``wgref replay``."""
    from refmodel.dtypes import bits_of as _bits
    from refmodel.layouts.fragment import unpack_accumulator
    from refmodel.numerics.sparse import wgmma_sp
    from refmodel.verify.shrink_sparse import SparseCase, save_sparse_case, shrink_sparse
    from refmodel.wgmma_sp_forms import parse_wgmma_sp

    from refmodel.verify import sparse_cases as RS
    jobs = sparse_jobs(target)
    check_campaign(cases=cases, seed=seed, seconds=seconds)
    if hw is None:
        from gpu.kernels.sparse import SpVariant, run_wgmma_sp

        def hw(job, x):
            f = parse_wgmma_sp(job["instr"])
            v = SpVariant(job["instr"], job["rs"], job["sp_sel"], 0, 0, job["imm_scale_a"], job["imm_scale_b"])
            d, _ = run_wgmma_sp(v, x["images"], x["desc_a"], x["desc_b"], x["meta_regs"], x["c_regs"],
                                np.full(len(x["images"]), job["scale_d"], np.int32), x["a_regs"] if job["rs"] else None)
            return unpack_accumulator(d, f.n, f.dtype_d)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rep = FuzzReport(target, seed)
    t0 = time.time()
    b = 0
    while rep.tiles < cases and (seconds is None or time.time() - t0 < seconds):
        rng = np.random.default_rng([seed, b])
        job = dict(jobs[int(rng.integers(len(jobs)))])
        x = RS.job_inputs(job, seed=(seed, b))
        d = hw(job, x)
        m = wgmma_sp(job["instr"], x["a"], x["meta"], x["b"], x["c"], sp_sel=job["sp_sel"], scale_d=bool(job["scale_d"]),
                     imm_scale_a=job["imm_scale_a"], imm_scale_b=job["imm_scale_b"])
        diff = _bits(np.ascontiguousarray(d)) != _bits(np.ascontiguousarray(m))
        rep.batches, rep.tiles, rep.outputs = b + 1, rep.tiles + len(d), rep.outputs + int(d.size)
        rep.mismatches += int(diff.sum())
        bad = [t for t in range(len(d)) if diff[t].any()]
        if bad and rep.repro is None:
            t = bad[0]
            case = SparseCase(job["instr"], x["a"][t], x["meta"][t], x["b"][t], x["c"][t], sp_sel=job["sp_sel"],
                              scale_d=bool(job["scale_d"]), imm_scale_a=job["imm_scale_a"],
                              imm_scale_b=job["imm_scale_b"], rs=job["rs"], notes={"seed": [seed, b], "tile": t})

            def run_one(cs):
                f = parse_wgmma_sp(cs.instr)
                one = {"a": cs.a[None], "meta": cs.meta[None], "b": cs.b[None], "c": cs.c[None],
                       **RS.inputs_from_math(f, cs.a[None], cs.meta[None], cs.b[None], cs.c[None], job["sp_sel"])}
                return hw(job, one)[0]

            small, summary = shrink_sparse(case, run_one)
            path = save_sparse_case(out / "repro_sparse.npz", small, hardware=run_one(small), summary=summary)
            rep.repro = str(path)
            rep.first = {"minimal": f"{job['instr']}: D{summary['output']} needs nibbles {summary['nibbles']}, "
                                    f"A columns {summary['a_nonzero']}, B rows {summary['b_nonzero']}", **summary}
        b += 1
    rep.seconds = time.time() - t0
    return rep
