"""The layout fuzzer (wgmma operand reads through random descriptors) with everything on the GPU.

Per batch (one variant of the target, drawn from ``(seed, batch)``): the cases are drawn on the GPU
(:class:`gpu.kernels.layout_runner.LayoutRunner.generate`, the seeded drawing of
:mod:`gpu.kernels.desc_gather`, whose host build rebuilds any batch on a CPU), the H200 runs them
(gpu.kernels.layouts' ``wgmma_desc_kernel``), the GPU port of the descriptor addressing and of the
accumulator gives the expected registers, and the comparison runs on the GPU.  Cases the refmodel
would refuse are flagged *undefined* by the port and never compared (counted in ``undefined``).
Only the cases with a differing register come back; the CPU refmodel
(:func:`refmodel.machine.wgmma.wgmma_registers`) re-checks them and is the arbiter: a register
counts as a mismatch only if the CPU refmodel also differs from the hardware; where the CPU model
agrees with the hardware the GPU port was wrong (``port_disagreements``).  Two undefined cases a
batch are also given to the CPU refmodel, which must refuse them (else a port disagreement).

Outputs are D registers compared (as :func:`gpu.fuzz.cpu_engine.fuzz_layout` counts them).  The
journal has fuzz_device's records; the first real mismatch is saved as ``<out>/repro_layout.npz``
in fuzz_layout's format.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gpu.fuzz.gpu_engine import DeviceCampaignReport
from gpu.kernels.compare import differing_rows
from refmodel.errors import InputError
from refmodel.fileio import save_npz
from refmodel.validate import check_int


@dataclass
class LayoutDeviceReport(DeviceCampaignReport):
    """``tiles``: cases drawn; ``outputs``: D registers compared (defined cases only)."""

    undefined: int = 0             # cases refmodel refuses, never compared
    repro: str | None = None
    variants: dict = field(default_factory=dict)


def draw_variant(seed: int, batch: int, variants: list):
    """The variant of batch ``batch`` (numpy's generator seeded with ``[seed, batch, 91]``)."""
    rng = np.random.default_rng([seed, batch, 91])
    return variants[int(rng.integers(len(variants)))]


def cases_for(variant, batch: int) -> int:
    """Cases of a batch: ``batch`` counts n256 cases, narrower variants get more (at most 8 times)."""
    from refmodel.wgmma_forms import parse_wgmma

    return max(1, batch * 256 // max(parse_wgmma(variant[0]).n, 32))


def recheck(variant, host: dict, hw: np.ndarray, port: np.ndarray):
    """CPU refmodel vs hardware on copied-back cases: (real mismatch mask (c, 128, regs), refmodel's
    registers, refused (c,) bool: refmodel raised InputError — the port said defined)."""
    from gpu.kernels.layout_runner import refmodel_registers

    real = np.zeros(hw.shape, bool)
    ref = np.zeros_like(hw)
    refused = np.zeros(hw.shape[0], bool)
    for j in range(hw.shape[0]):
        try:
            ref[j] = refmodel_registers(variant, host, j)
        except InputError:
            refused[j] = True
            continue
        real[j] = ref[j] != hw[j]
    return real, ref, refused


def fuzz_layout_device(target: str = "layout", *, seconds: float | None = None, cases: int = 10 ** 12,
                       seed: int = 0, batch: int = 4096, out: str | Path = "wgref-fuzz",
                       plant: int | None = None, progress: bool = False,
                       variants: list | None = None, model_kernel: str = "chain") -> LayoutDeviceReport:
    """Fuzz the layout variants of ``target`` ('layout' or 'layout:<fragment>',
    :func:`gpu.fuzz.cpu_engine.layout_variants`) on the GPU; see the module doc.  ``batch``: cases a
    batch for an n256 variant (narrower ones get up to 8 times more); ``plant=b``: flip one bit of
    one hardware register in batch ``b`` (the campaign must report exactly that register);
    ``variants``: run these variants (tuples of WGMMA_VARIANTS) instead of the target's."""
    import cupy as cp

    from gpu.fuzz.cpu_engine import check_campaign, layout_variants
    from gpu.kernels.layout_runner import LayoutRunner
    from refmodel.verify.journal import append_record, open_journal

    variants = layout_variants(target) if variants is None else [tuple(v) for v in variants]
    check_campaign(cases=cases, seed=seed, seconds=seconds)
    check_int("batch", batch, 1, 1 << 16)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    journal = out / "journal.jsonl"
    open_journal(journal, {"target": target, "seed": seed, "engine": "gpu-layout", "batch_tiles": batch}, False)
    rep = LayoutDeviceReport(target, seed)
    t0 = time.time()
    runners = {v: LayoutRunner(v, model_kernel=model_kernel) for v in variants}
    rep.compile_seconds = time.time() - t0
    t_start = time.time()
    b = 0
    while rep.tiles < cases and (seconds is None or time.time() - t_start < seconds):
        t1 = time.time()
        v = draw_variant(seed, b, variants)
        run = runners[v]
        C = int(min(cases_for(v, batch), cases - rep.tiles))
        x = run.generate(seed, b, C)
        d_hw = run.hardware(x)
        d_model, undef = run.model(x)
        if plant == b:
            ok = cp.nonzero(~undef)[0]
            if ok.size:
                d_hw[int(ok[min(int(ok.size) - 1, int(cp.searchsorted(ok, C // 2)))]), 7, 0] ^= 1
        bad = differing_rows(d_hw, d_model, skip=undef)
        n_undef = int(undef.sum())
        moved = bool((x["bases"] != run.base).any())
        if moved:
            raise InputError(f"the kernel's shared base moved from {run.base:#x} during the campaign; "
                             f"the undefined cases were chosen for the old base")
        n_bad = n_port = 0
        if bad.size:
            idx = cp.asnumpy(bad)
            host = run.to_host(x, bad)
            hw, port = cp.asnumpy(d_hw[bad]), cp.asnumpy(d_model[bad])
            real, ref, refused = recheck(v, host, hw, port)
            n_bad = int(real.sum())
            n_port = int(((port != hw) != real)[~refused].sum()) + int(refused.sum())
            rep.tiles_copied_back += int(idx.size)
            hit = np.nonzero(real.reshape(len(idx), -1).any(axis=1))[0]
            if hit.size and rep.repro is None:
                j = int(hit[0])
                i = int(idx[j])
                notes = run.notes(host["kinds"][j:j + 1], host["fam"][j:j + 1])[0]
                cfg = {"variant": list(v), "notes": notes, "seed": [seed, b], "case": i, "engine": "gpu-layout"}
                path = out / "repro_layout.npz"
                save_npz(path, image=host["images"][j], desc_a=host["desc_a"][j:j + 1],
                         desc_b=host["desc_b"][j:j + 1], a_regs=host["a_regs"][j], c_regs=host["c_regs"][j],
                         scale_d=host["scale_d"][j:j + 1], base=host["bases"][j:j + 1], hardware=hw[j],
                         refmodel=ref[j], config=np.array(json.dumps(cfg)))
                rep.repro = str(path)
                reg = np.argwhere(real[j])[0]
                rep.first = {"minimal": f"{v[0]} {notes}: {int(real[j].sum())} registers differ", **cfg,
                             "batch": b, "thread": int(reg[0]), "reg": int(reg[1]), "hw": int(hw[j][tuple(reg)]),
                             "refmodel": int(ref[j][tuple(reg)]), "gpu_model": int(port[j][tuple(reg)])}
            elif n_port and rep.first is None:
                rep.first = {"batch": b, "variant": list(v), "case": int(idx[0]), "port_disagreement": True}
        if n_undef:      # the CPU refmodel must refuse what the port calls undefined (two a batch)
            uidx = cp.nonzero(undef)[0][:2]
            host_u = run.to_host(x, uidx)
            _, _, refused_u = recheck(v, host_u, np.zeros((len(uidx), 128, run.nregs), np.uint32),
                                      np.zeros((len(uidx), 128, run.nregs), np.uint32))
            n_port += int((~refused_u).sum())
        cp.cuda.runtime.deviceSynchronize()
        dt = time.time() - t1
        outputs = (C - n_undef) * 128 * run.nregs
        append_record(journal, {"batch": b, "job": f"{v[0]}|rs={int(v[1])}|trans={v[2]},{v[3]}|imm={v[4]},{v[5]}"
                                f"|undefined={n_undef}", "tiles": C, "outputs": outputs, "mismatches": n_bad,
                                "port_disagreements": n_port, "tiles_copied_back": int(bad.size),
                                "seconds": round(dt, 5)})
        rep.add_batch(C, outputs, n_bad, n_port, dt)
        rep.undefined += n_undef
        s = rep.variants.setdefault("|".join(map(str, v)), [0, 0, 0])
        s[0] += outputs
        s[1] += n_bad
        s[2] += n_undef
        if progress:
            print(f"batch {b}: {v[0]} {outputs} outputs {n_bad} mismatches {n_port} port; "
                  f"{rep.rate / 1e9:.2f} G outputs/s", flush=True)
        b += 1
    return rep


__all__ = ["LayoutDeviceReport", "cases_for", "draw_variant", "fuzz_layout_device", "recheck"]
