"""``wgref fuzz lib:triton|lib:cublas|lib:scaled-mm``: fuzz a library call against its golden model.

Each batch ``b`` is one call of the real library on the GPU, drawn from ``np.random.default_rng([seed, b])``
(so a resumed or sharded campaign sees the same calls): a configuration of the call and one input
family (``refmodel.verify.families``, engine ``matrix``), built on the host with numpy + ml_dtypes
(:func:`refmodel.verify.library_calls.draw_call`).  The library's output is compared bit for bit (NaN
payloads included) with refmodel's golden model of that library
(:func:`refmodel.verify.library_calls.golden`):

=================  ====================================================  ==========================================
target             the call                                              golden model
=================  ====================================================  ==========================================
``lib:triton``     the textbook Triton tiled matmul (``TRITON_BM`` x     :func:`refmodel.golden.triton_matmul`
                   ``TRITON_BN`` tiles): e4m3/e5m2/f16/bf16/f32,
                   BLOCK_K, num_warps, max_num_imprecise_acc,
                   input_precision, out dtype
``lib:cublas``     ``torch.matmul`` bf16/f16 (cuBLAS)                    :func:`refmodel.golden.cublas_matmul` under
                                                                         :func:`~refmodel.golden.cublas_schedule`
``lib:scaled-mm``  ``torch._scaled_mm`` e4m3, per-tensor or row-wise     :func:`refmodel.numerics.scaled_mm.scaled_mm`
                   scales, f32/bf16 out, ``use_fast_accum``
=================  ====================================================  ==========================================

A call whose schedule the golden model cannot tell is ``skipped`` (journaled with the reason), never
counted as a mismatch: a cuBLAS split-K kernel whose split count was not recorded, a ``_scaled_mm``
that ran a split-K kernel (the model is the unsplit schedule), or a configuration the library refused
to build (:class:`gpu.libraries.torch_cublas.CallRefused`).

The library sits behind a runner (:class:`gpu.libraries.torch_cublas.TorchRunner` on the GPU;
:class:`refmodel.verify.library_calls.GoldenRunner`, the golden models themselves, for tests): one
method per target taking the numpy inputs and the configuration and returning ``(output, kernel names
or None)``.  The journal (``<out>/journal.jsonl``) has the wgmma fuzzer's records, one per call
(``tiles`` = 1), so ``wgref merge`` adds shards up; the first mismatch is saved to
``<out>/mismatch_batch<b>.npz`` (inputs and both outputs as bits, the configuration).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from refmodel.dtypes import bits_of
from refmodel.errors import InputError
from refmodel.fileio import save_npz
from refmodel.validate import dumps_strict
from refmodel.verify.library_calls import draw_call, golden, job_string, parse_target, shorten

from gpu.fuzz.cpu_engine import RatedReport, check_campaign, check_shard
from gpu.libraries import torch_cublas
from gpu.libraries.torch_cublas import CallRefused


@dataclass
class LibraryFuzzReport(RatedReport):
    target: str
    seed: int
    batches: int = 0
    calls: int = 0
    outputs: int = 0
    mismatches: int = 0
    skipped: int = 0
    seconds: float = 0.0
    first: Optional[dict] = None
    repro: Optional[str] = None


# ----------------------------------------------------------------------------- the campaign

def _header(target: str, seed: int, shard: tuple[int, int]) -> dict:
    head = {"target": f"lib:{target}", "seed": seed, "engine": "library"}
    if shard[1] > 1:
        head["shard"] = [int(shard[0]), int(shard[1])]
    return head


def _check_args(cases, seed, shard, seconds=None) -> None:
    check_shard(shard)
    check_campaign(cases=cases, seed=seed, seconds=seconds)


def _save_mismatch(out: Path, target: str, seed: int, b: int, job: str, cfg: dict, family: str, x: dict,
                   got: np.ndarray, want: np.ndarray, bad: np.ndarray, kernels) -> dict:
    """Save the first mismatching call and return its summary (``report.first``)."""
    path = out / f"mismatch_batch{b}.npz"
    conf = {"target": f"lib:{target}", "seed": seed, "batch": b, "family": family, "config": cfg,
            "kernels": kernels}
    arrays = {k: bits_of(v) if k in ("a", "b", "b_nk") else np.asarray(v, np.float32) for k, v in x.items()}
    save_npz(path, **arrays, library=bits_of(got), golden=bits_of(want), config=np.array(dumps_strict(conf)))
    i, j = (int(v) for v in np.argwhere(bad)[0])
    w = 2 * got.dtype.itemsize
    lib, gold = f"0x{int(bits_of(got)[i, j]):0{w}x}", f"0x{int(bits_of(want)[i, j]):0{w}x}"
    n = int(bad.sum())
    return {"batch": b, "job": job, "row": i, "col": j, "library": lib, "golden": gold, "mismatches": n,
            "file": str(path), "minimal": f"{job}: D[{i},{j}] library {lib}, golden {gold} "
                                          f"({n} of {bad.size} outputs differ)"}


def fuzz_library(target: str, *, cases: int, seed: int = 0, seconds: Optional[float] = None,
                 out: str | Path = "wgref-fuzz", shard: tuple[int, int] = (0, 1), resume: bool = False,
                 runner: Any = None, progress: bool = False) -> LibraryFuzzReport:
    """Run ``cases`` library calls (or until ``seconds``) of ``target`` ('triton', 'cublas',
    'scaled-mm', with or without the 'lib:' prefix) and diff each against its golden model (module doc).

    ``shard=(i, n)`` runs the batches ``i, i + n, ...``; ``resume`` continues after the last journaled
    batch of the same campaign.  ``runner`` defaults to :class:`gpu.libraries.torch_cublas.TorchRunner`
    (the GPU)."""
    name = parse_target(target)
    _check_args(cases, seed, shard, seconds)
    from refmodel.verify.journal import append_record, open_journal

    si, sn = shard
    if runner is None:
        runner = torch_cublas.TorchRunner()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    journal = out / "journal.jsonl"
    header = _header(name, int(seed), (si, sn))
    rep = LibraryFuzzReport(f"lib:{name}", int(seed))
    b = si
    for rec in open_journal(journal, header, resume):
        b = max(b, rec["batch"] + sn)
        rep.batches += 1
        rep.calls += rec["tiles"]
        rep.outputs += rec["outputs"]
        rep.mismatches += rec["mismatches"]
        rep.skipped += int(bool(rec.get("skipped")))
        rep.seconds += rec["seconds"]
    call = getattr(runner, name.replace("-", "_"))
    t_start = time.time()
    while rep.calls < cases and (seconds is None or time.time() - t_start < seconds):
        t0 = time.time()
        cfg, family, x = draw_call(name, int(seed), b)
        job = job_string(name, cfg, family)
        rec: dict = {"batch": b, "job": job, "tiles": 1, "outputs": 0, "mismatches": 0}
        kernels = None
        try:
            got, kernels = call(x, cfg)
            with np.errstate(all="ignore"):       # overflow and Inf - Inf are data, not faults
                want, why = golden(name, x, cfg, kernels)
        except CallRefused as e:
            want, why = None, str(e)
        if kernels is not None:
            rec["kernels"] = [shorten(k) for k in kernels]
        if want is None:
            why = " ".join(str(why).split())
            rec["skipped"], rec["why"] = True, why if len(why) <= 1000 else why[:997] + "..."
            rep.skipped += 1
        else:
            got, want = np.asarray(got), np.asarray(want)
            if got.dtype != want.dtype or got.shape != want.shape:
                raise InputError(f"the {name} runner returned {got.dtype} {got.shape}, the golden model "
                                 f"{want.dtype} {want.shape}")
            bad = bits_of(got) != bits_of(want)
            rec["outputs"], rec["mismatches"], rec["skipped"] = int(bad.size), int(bad.sum()), False
            if rec["mismatches"] and rep.first is None:
                rep.first = _save_mismatch(out, name, int(seed), b, job, cfg, family, x, got, want, bad, kernels)
                rep.repro = rep.first["file"]
                rec["mismatch_file"] = rep.repro
        dt = time.time() - t0
        rec["seconds"] = round(dt, 4)
        append_record(journal, rec)
        rep.batches += 1
        rep.calls += 1
        rep.outputs += rec["outputs"]
        rep.mismatches += rec["mismatches"]
        rep.seconds += dt
        if progress:
            what = f"skipped ({rec['why']})" if rec.get("skipped") else \
                f"{rec['outputs']} outputs, {rec['mismatches']} mismatches"
            print(f"batch {b}: {job}: {what}", flush=True)
        b += sn
    return rep
