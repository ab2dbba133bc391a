"""wgmma jobs: one dense form in one configuration (SS or RS A operand, scale-d, imm scales, chain
length), the plan of jobs the recorders and the CPU fuzz engine run, the inputs of a job, and the
two oracles a hardware result is checked against (the CPU model, and exact products for the
exact families)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..wgmma_forms import WGMMA_FORMS, WgmmaForm, parse_wgmma
from .families.tile import (
    FLOAT_FAMILIES,
    INT_FAMILIES,
    TileFamily,
    families_for,
    tile_inputs,
)

__all__ = ["Job", "plan_jobs", "make_inputs", "exact_oracle", "model_chain", "families_for",
           "FLOAT_FAMILIES", "INT_FAMILIES"]


@dataclass(frozen=True)
class Job:
    """One form in one configuration; all input families run in one launch."""

    instr: str
    rs: bool = False
    scale_d: bool = True
    imm_scale_a: int = 1
    imm_scale_b: int = 1
    chain: int = 1
    tier: int = 0

    @property
    def form(self) -> WgmmaForm:
        return parse_wgmma(self.instr)

    @property
    def key(self) -> str:
        f = self.form
        sat = ".satfinite" if f.satfinite else ""
        pm = lambda v: "p1" if v == 1 else "m1"  # noqa: E731
        return (f"{f.shape}{sat}.{f.dtype_d}.{f.dtype_a}.{f.dtype_b}_{'rs' if self.rs else 'ss'}"
                f"_sd{int(self.scale_d)}_imm_{pm(self.imm_scale_a)}_{pm(self.imm_scale_b)}_chain{self.chain}")

    def meta(self) -> dict:
        return {"instr": self.instr, "rs": self.rs, "scale_d": self.scale_d,
                "imm_scale_a": self.imm_scale_a, "imm_scale_b": self.imm_scale_b, "chain": self.chain}


def _combos() -> list[tuple]:
    seen: dict[tuple, None] = {}
    for f in WGMMA_FORMS:
        seen.setdefault((f.family, f.dtype_d, f.dtype_a, f.dtype_b, f.satfinite), None)
    return list(seen)


def _form_of(combo: tuple, n: int) -> WgmmaForm:
    fam, d, a, b, sat = combo
    return WgmmaForm(n, {"tf32": 8, "f16": 16, "bf16": 16, "fp8": 32, "int8": 32}[fam], d, a, b, sat)


def plan_jobs(max_tier: int = 4) -> list[Job]:
    """All jobs up to ``max_tier``, most informative first, without duplicates."""
    combos = _combos()
    jobs: list[Job] = []
    for n in (8, 256):
        jobs += [Job(_form_of(c, n).instr, tier=0) for c in combos]
    if max_tier >= 1:
        for c in combos:
            f8 = _form_of(c, 8).instr
            jobs += [Job(f8, rs=True, tier=1), Job(f8, scale_d=False, tier=1),
                     Job(f8, rs=True, scale_d=False, tier=1),
                     Job(f8, chain=4, tier=1), Job(f8, rs=True, chain=3, tier=1)]
            if c[0] != "int8":
                jobs += [Job(f8, imm_scale_a=-1, tier=1), Job(f8, imm_scale_b=-1, tier=1),
                         Job(f8, imm_scale_a=-1, imm_scale_b=-1, tier=1),
                         Job(f8, rs=True, imm_scale_a=-1, imm_scale_b=-1, tier=1)]
            f256 = _form_of(c, 256).instr
            jobs += [Job(f256, rs=True, tier=1), Job(f256, chain=2, tier=1)]
            for n in ((16, 24, 48, 128) if c[0] == "int8" else (16, 24, 40, 136)):
                jobs.append(Job(_form_of(c, n).instr, tier=1))
        # staged chains (more steps than fit in shared memory at once)
        for c in (("bf16", "f32", "bf16", "bf16", False), ("fp8", "f32", "e4m3", "e4m3", False),
                  ("int8", "s32", "s8", "s8", False)):
            jobs.append(Job(_form_of(c, 256).instr, chain=48, tier=1))
        jobs.append(Job(_form_of(("f16", "f16", "f16", "f16", False), 256).instr, rs=True, chain=40, tier=1))
        # K-chains of 128 instructions (K = 1024..4096): the accumulator's rounding compounds
        for c in (("fp8", "f32", "e4m3", "e4m3", False), ("fp8", "f16", "e5m2", "e4m3", False),
                  ("bf16", "f32", "bf16", "bf16", False), ("f16", "f16", "f16", "f16", False),
                  ("tf32", "f32", "tf32", "tf32", False), ("int8", "s32", "s8", "u8", True)):
            jobs.append(Job(_form_of(c, 8).instr, chain=128, tier=1))
            jobs.append(Job(_form_of(c, 8).instr, rs=True, chain=128, tier=1))
        jobs.append(Job(_form_of(("fp8", "f32", "e4m3", "e4m3", False), 256).instr, chain=128, tier=1))
    if max_tier >= 2:
        jobs += [Job(f.instr, tier=2) for f in WGMMA_FORMS]
    if max_tier >= 3:
        jobs += [Job(f.instr, rs=True, tier=3) for f in WGMMA_FORMS]
    if max_tier >= 4:
        jobs += [Job(f.instr, scale_d=False, tier=4) for f in WGMMA_FORMS]
        jobs += [Job(f.instr, imm_scale_a=-1, imm_scale_b=-1, tier=4) for f in WGMMA_FORMS if f.has_imm_scale]
    out, seen = [], set()
    for j in jobs:
        if j.key not in seen:
            seen.add(j.key)
            out.append(j)
    return out


# ----------------------------------------------------------------------------- inputs and oracles

def make_inputs(job: Job, rng: np.random.Generator, tiles: int,
                families: tuple[TileFamily, ...] | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(a, b, c, family index per tile, family names) of a job: ``tiles`` tiles of every tile-engine
    family (:mod:`refmodel.verify.families.tile`), concatenated."""
    return tile_inputs(job.form, job.chain, rng, tiles, families)



def exact_oracle(job: Job, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Exact D (float64, or int64 for integer forms) of the chained wgmma, by matrix products."""
    form = job.form
    k = form.k
    is_int = form.family == "int8"
    cast = (lambda x: x.astype(np.int64)) if is_int else (lambda x: x.astype(np.float64))
    af, bf = cast(a), cast(b)
    s = job.imm_scale_a * job.imm_scale_b
    d = cast(c) if job.scale_d else np.zeros(c.shape, dtype=np.int64 if is_int else np.float64)
    for i in range(job.chain):
        d = s * (af[..., i * k:(i + 1) * k] @ bf[..., i * k:(i + 1) * k, :]) + d
    return d


def model_chain(model: Callable, job: Job, a, b, c) -> np.ndarray:
    """The CPU model's D for a chained job: one model wgmma per K step."""
    k = job.form.k
    d = c
    for i in range(job.chain):
        kw = {"scale_d": job.scale_d if i == 0 else True}
        if job.form.has_imm_scale:
            kw.update(imm_scale_a=job.imm_scale_a, imm_scale_b=job.imm_scale_b)
        d = model(job.instr, a[..., i * k:(i + 1) * k], b[..., i * k:(i + 1) * k, :], d, **kw)
    return np.asarray(d)
