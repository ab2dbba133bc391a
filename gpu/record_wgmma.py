"""wgmma verification campaign: run the H200, compare with refmodel bit for bit, record fixtures.

    python -m gpu.record_wgmma --out fixtures --seconds 1500          # tiers 0..4, resumable
    python -m gpu.record_wgmma --list --max-tier 1                    # print the plan only
    python -m gpu.record_wgmma --out fixtures --forms m64n8k16 --max-tier 1

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

from refmodel.verify.fixtures import host_provenance, write_fixture
from refmodel.numerics.formats import BF16, E4M3, E5M2, F16, F32, FormatSpec
from refmodel.dtypes import element_dtype, from_bits, raw_bits
from refmodel.wgmma_forms import M, WGMMA_FORMS, WgmmaForm, parse_wgmma

SEED = 20261201
FEATURE = "wgmma"
SPECS: dict[str, FormatSpec] = {"e4m3": E4M3, "e5m2": E5M2, "f16": F16, "bf16": BF16, "tf32": F32, "f32": F32}
_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32}
TF32_MASK = np.uint32(0xFFFFE000)


# ----------------------------------------------------------------------------- jobs

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


# ----------------------------------------------------------------------------- input families

def _nonfinite(bits: np.ndarray, spec: FormatSpec) -> np.ndarray:
    mag = bits.astype(np.uint64) & spec.mag_mask
    if spec.ieee_specials:
        return mag >= spec.inf_code
    return mag == spec.mag_mask


def _max_field(spec: FormatSpec) -> int:
    return spec.max_code >> spec.mbits


def _uniform_bits(rng, shape, nbits: int) -> np.ndarray:
    return rng.integers(0, 1 << nbits, size=shape, dtype=np.uint64).astype(_UINT[nbits])


def _finite_bits(rng, shape, spec: FormatSpec, nbits: int) -> np.ndarray:
    b = _uniform_bits(rng, shape, nbits)
    bad = _nonfinite(b, spec)
    b[bad] &= _UINT[nbits](~(1 << (spec.bits - 2)) & ((1 << nbits) - 1))  # clear top exponent bit
    return b


def _values(rng, shape, spec: FormatSpec, elo: int, ehi: int, nbits: int, *, sub: bool = False) -> np.ndarray:
    """Random sign and mantissa, exponent field for unbiased exponents in [elo, ehi] (finite)."""
    lo = 0 if sub else max(1, elo + spec.bias)
    lo = min(lo, _max_field(spec))
    hi = max(lo, min(_max_field(spec), ehi + spec.bias))
    fld = rng.integers(lo, hi + 1, size=shape, dtype=np.uint64)
    man = rng.integers(0, 1 << spec.mbits, size=shape, dtype=np.uint64)
    sgn = rng.integers(0, 2, size=shape, dtype=np.uint64)
    b = (sgn << np.uint64(spec.bits - 1)) | (fld << np.uint64(spec.mbits)) | man
    b = np.where(_nonfinite(b, spec), b - np.uint64(1), b)  # e4m3 S.1111.111 -> max finite
    return b.astype(_UINT[nbits])


def _subnormals(rng, shape, spec: FormatSpec, nbits: int) -> np.ndarray:
    man = rng.integers(1, 1 << spec.mbits, size=shape, dtype=np.uint64)
    sgn = rng.integers(0, 2, size=shape, dtype=np.uint64)
    return ((sgn << np.uint64(spec.bits - 1)) | man).astype(_UINT[nbits])


class _Ops:
    """Per-form helpers: specs, widths and typed conversion of the three operands."""

    def __init__(self, form: WgmmaForm, tiles: int, chain: int):
        self.form, self.tiles, self.chain = form, tiles, chain
        kk = form.k * chain
        self.shapes = {"a": (tiles, M, kk), "b": (tiles, kk, form.n), "c": (tiles, M, form.n)}
        self.names = {"a": form.dtype_a, "b": form.dtype_b, "c": form.dtype_d}

    def spec(self, op: str) -> FormatSpec:
        return SPECS[self.names[op]]

    def nbits(self, op: str) -> int:
        return 8 * element_dtype(self.names[op]).itemsize

    def typed(self, op: str, bits: np.ndarray, *, tf32_clean: bool = True) -> np.ndarray:
        if self.names[op] == "tf32" and tf32_clean:
            bits = bits & TF32_MASK
        return from_bits(bits, self.names[op])


def _float_family(gen: Callable) -> Callable:
    def make(form, rng, tiles, chain):
        ops = _Ops(form, tiles, chain)
        return gen(ops, rng)
    return make


def _fam_random_bits(ops, rng):
    return tuple(ops.typed(o, _uniform_bits(rng, ops.shapes[o], ops.nbits(o)), tf32_clean=False) for o in "abc")


def _fam_finite_bits(ops, rng):
    return tuple(ops.typed(o, _finite_bits(rng, ops.shapes[o], ops.spec(o), ops.nbits(o)), tf32_clean=False)
                 for o in "abc")


def _fam_narrow_band(ops, rng):
    lk = int(np.log2(ops.form.k))
    a = _values(rng, ops.shapes["a"], ops.spec("a"), -1, 1, ops.nbits("a"))
    b = _values(rng, ops.shapes["b"], ops.spec("b"), -1, 1, ops.nbits("b"))
    c = _values(rng, ops.shapes["c"], ops.spec("c"), 0, lk + 1, ops.nbits("c"))
    return ops.typed("a", a), ops.typed("b", b), ops.typed("c", c)


def _fam_wide_spread(ops, rng):
    a = _values(rng, ops.shapes["a"], ops.spec("a"), -200, 200, ops.nbits("a"), sub=True)
    b = _values(rng, ops.shapes["b"], ops.spec("b"), -200, 200, ops.nbits("b"), sub=True)
    c = _values(rng, ops.shapes["c"], ops.spec("c"), -40, 40, ops.nbits("c"))
    return ops.typed("a", a), ops.typed("b", b), ops.typed("c", c)


def _fam_large_c(ops, rng):
    a = _values(rng, ops.shapes["a"], ops.spec("a"), -2, 2, ops.nbits("a"))
    b = _values(rng, ops.shapes["b"], ops.spec("b"), -2, 2, ops.nbits("b"))
    mc = ops.spec("c").mbits
    c = _values(rng, ops.shapes["c"], ops.spec("c"), mc - 3, mc + 3, ops.nbits("c"))
    return ops.typed("a", a), ops.typed("b", b), ops.typed("c", c)


def _fam_subnormal_c(ops, rng):
    sa, sb = ops.spec("a"), ops.spec("b")
    a = _values(rng, ops.shapes["a"], sa, -500, sa.emin + 2, ops.nbits("a"), sub=True)
    b = _values(rng, ops.shapes["b"], sb, -500, sb.emin + 2, ops.nbits("b"), sub=True)
    rows = rng.random(ops.shapes["a"][:2]) < 0.25
    a[rows] = 0
    c = _subnormals(rng, ops.shapes["c"], ops.spec("c"), ops.nbits("c"))
    return ops.typed("a", a), ops.typed("b", b), ops.typed("c", c)


def _fam_zero_rows(ops, rng):
    a = _values(rng, ops.shapes["a"], ops.spec("a"), -1, 1, ops.nbits("a"))
    b = _values(rng, ops.shapes["b"], ops.spec("b"), -1, 1, ops.nbits("b"))
    c = _values(rng, ops.shapes["c"], ops.spec("c"), -1, 1, ops.nbits("c"))
    zsign = lambda shape, nb: (rng.integers(0, 2, size=shape).astype(np.uint64) << np.uint64(nb - 1)).astype(_UINT[nb])  # noqa: E731
    ra = rng.random(ops.shapes["a"][:2]) < 0.25                      # zero rows of A
    a[ra] = zsign(a[ra].shape, ops.nbits("a"))
    cb = rng.random((ops.shapes["b"][0], ops.shapes["b"][2])) < 0.25  # zero columns of B
    bt = b.transpose(0, 2, 1)
    bt[cb] = zsign(bt[cb].shape, ops.nbits("b"))
    zc = rng.random(ops.shapes["c"]) < 0.5
    c[zc] = zsign(c[zc].shape, ops.nbits("c"))
    return ops.typed("a", a), ops.typed("b", b), ops.typed("c", c)


def _fam_overflow(ops, rng):
    sa, sb, sc = ops.spec("a"), ops.spec("b"), ops.spec("c")
    a = _values(rng, ops.shapes["a"], sa, sa.emax - 1, sa.emax, ops.nbits("a"))
    b = _values(rng, ops.shapes["b"], sb, sb.emax - 1, sb.emax, ops.nbits("b"))
    c = _values(rng, ops.shapes["c"], sc, sc.emax, sc.emax, ops.nbits("c"))
    c[rng.random(ops.tiles) < 0.5] = 0
    return ops.typed("a", a), ops.typed("b", b), ops.typed("c", c)


def _small_int_limits(form: WgmmaForm, chain: int) -> tuple[int, int]:
    """(max |a|,|b|, max |c|) keeping every partial sum exact in the accumulator."""
    room = 1800 if form.dtype_d == "f16" else 1 << 22
    ab = int(min(8, max(1, np.sqrt((room - 64) / (form.k * chain)))))
    return ab, 64


def _fam_small_int(ops, rng):
    ab, cc = _small_int_limits(ops.form, ops.chain)
    a = rng.integers(-ab, ab + 1, size=ops.shapes["a"]).astype(np.float64)
    b = rng.integers(-ab, ab + 1, size=ops.shapes["b"]).astype(np.float64)
    c = rng.integers(-cc, cc + 1, size=ops.shapes["c"]).astype(np.float64)
    conv = lambda x, o: x.astype(element_dtype(ops.names[o]))  # noqa: E731  (exact: small ints)
    return conv(a, "a"), conv(b, "b"), conv(c, "c")


_INT_EXTREMES = {"s8": np.array([-128, -127, -1, 0, 1, 126, 127], np.int64),
                 "u8": np.array([0, 1, 127, 128, 254, 255], np.int64)}


def _int_ops(form, tiles, chain):
    ops = _Ops(form, tiles, chain)
    return ops, (lambda o, x: x.astype(element_dtype(ops.names[o])))


def _fam_int_random(form, rng, tiles, chain):
    ops, conv = _int_ops(form, tiles, chain)
    a = _uniform_bits(rng, ops.shapes["a"], 8).view(element_dtype(form.dtype_a))
    b = _uniform_bits(rng, ops.shapes["b"], 8).view(element_dtype(form.dtype_b))
    c = rng.integers(-(1 << 20), 1 << 20, size=ops.shapes["c"])
    return a, b, conv("c", c)


def _fam_int_extremes(form, rng, tiles, chain):
    ops, conv = _int_ops(form, tiles, chain)
    a = rng.choice(_INT_EXTREMES[form.dtype_a], size=ops.shapes["a"])
    b = rng.choice(_INT_EXTREMES[form.dtype_b], size=ops.shapes["b"])
    c = rng.integers(-(1 << 20), 1 << 20, size=ops.shapes["c"])
    return conv("a", a), conv("b", b), conv("c", c)


def _fam_int_c_limits(form, rng, tiles, chain):
    ops, conv = _int_ops(form, tiles, chain)
    a = rng.choice(_INT_EXTREMES[form.dtype_a], size=ops.shapes["a"])
    b = rng.choice(_INT_EXTREMES[form.dtype_b], size=ops.shapes["b"])
    r = rng.integers(0, 1 << 21, size=ops.shapes["c"])
    hi = rng.random(ops.shapes["c"]) < 0.5
    c = np.where(hi, (2**31 - 1) - r, -(2**31) + r)
    return conv("a", a), conv("b", b), conv("c", c)


def _fam_int_random_c(form, rng, tiles, chain):
    ops, conv = _int_ops(form, tiles, chain)
    a = _uniform_bits(rng, ops.shapes["a"], 8).view(element_dtype(form.dtype_a))
    b = _uniform_bits(rng, ops.shapes["b"], 8).view(element_dtype(form.dtype_b))
    c = _uniform_bits(rng, ops.shapes["c"], 32).view(np.int32)
    return a, b, c


@dataclass(frozen=True)
class Family:
    name: str
    make: Callable  # (form, rng, tiles, chain) -> (a, b, c) typed
    exact: bool = False


FLOAT_FAMILIES = (
    Family("small_int", _float_family(_fam_small_int), exact=True),
    Family("random_bits", _float_family(_fam_random_bits)),
    Family("finite_bits", _float_family(_fam_finite_bits)),
    Family("narrow_band", _float_family(_fam_narrow_band)),
    Family("wide_spread", _float_family(_fam_wide_spread)),
    Family("large_c", _float_family(_fam_large_c)),
    Family("subnormal_c", _float_family(_fam_subnormal_c)),
    Family("zero_rows", _float_family(_fam_zero_rows)),
    Family("overflow", _float_family(_fam_overflow)),
)
INT_FAMILIES = (
    Family("int_random", _fam_int_random, exact=True),
    Family("int_extremes", _fam_int_extremes, exact=True),
    Family("int_c_limits", _fam_int_c_limits),
    Family("int_random_c", _fam_int_random_c),
)


def families_for(form: WgmmaForm) -> tuple[Family, ...]:
    return INT_FAMILIES if form.family == "int8" else FLOAT_FAMILIES


def make_inputs(job: Job, rng: np.random.Generator, tiles: int,
                families: tuple[Family, ...] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(a, b, c, family_index per tile, family names) for all families of a job, concatenated."""
    form = job.form
    fams = families if families is not None else families_for(form)
    parts = [f.make(form, rng, tiles, job.chain) for f in fams]
    a, b, c = (np.concatenate([p[i] for p in parts]) for i in range(3))
    idx = np.repeat(np.arange(len(fams), dtype=np.int16), tiles)
    return a, b, c, idx, [f.name for f in fams]


# ----------------------------------------------------------------------------- oracles

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


def load_model() -> Callable:
    """refmodel.numerics.wgmma.wgmma; :class:`gpu.model_check.ModelMissingError` (one line)
    when it cannot be imported."""
    from .model_check import require_model

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
                arrays = {k: v[sel] for k, v in _bits_arrays(job, a, b, c, d).items()}
                arrays["family"] = idx[sel]
                write_fixture(FEATURE, job.key, arrays, kind="wgmma", cases=int(arrays["d"].size),
                              meta={**meta, "sample": "tiles"}, provenance=prov, root=out)
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


def hardware_runner(isolate: bool) -> Callable:
    """hw(job, a, b, c) -> D through gpu.wgmma (in a child process when ``isolate``)."""
    from .wgmma import run_wgmma_chain

    def hw(job: Job, a, b, c):
        return run_wgmma_chain(job.instr, a, b, c, chain=job.chain, scale_d_first=job.scale_d,
                               imm_scale_a=job.imm_scale_a, imm_scale_b=job.imm_scale_b, rs=job.rs,
                               isolate=isolate)
    return hw


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
    from .model_check import ModelMissingError

    try:
        model = load_model()
    except ModelMissingError as e:
        print(f"gpu.record_wgmma: error: {e}", file=sys.stderr)
        return 2
    print("refmodel.numerics.wgmma: present")
    isolate = not args.no_isolate
    try:
        if isolate:
            from .isolate import default_runner

            info = default_runner().call("gpu.runtime", "device_info")
        else:
            from .runtime import device_info

            info = device_info()
    except Exception as e:
        print(f"no usable GPU: {e}", file=sys.stderr)
        return 2
    print(f"device: {info.get('device')} driver {info.get('driver')} cupy {info.get('cupy')} nvrtc {info.get('nvrtc')}")
    prov = {**info, **host_provenance(), "generator": "gpu.record_wgmma", "seed": args.seed}
    run_campaign(jobs, hw=hardware_runner(isolate), model=model, out=out, state=state,
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
