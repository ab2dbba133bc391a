"""Schedule inference: ask a black-box GEMM (any callable that runs one on the GPU) how it sums, with
crafted inputs that each answer one question, choose the :class:`refmodel.golden.Schedule` consistent
with every answer, and verify it on random and adversarial inputs before reporting it.

The target is ``run(a, b) -> d`` for ``a`` (M, K) and ``b`` (K, N) typed numpy arrays (ml_dtypes), ``d``
(M, N) in the output dtype; the shape is the call's own (libraries pick kernels by shape), and every
probe is answered on all M x N outputs of one call.  Rows and columns of a GEMM are independent, so each
output cell carries its own question.

Probes, in order:

1. **chain breaks** — for every instruction boundary t along K, one cell holds a *template*: a few
   values in the instruction before t and the one after (chosen by simulating refmodel until the
   two answers differ after the output rounding): a tensor-core chain across t aligns the later terms
   to the accumulator and truncates them, a break at t (split-K chunk or float32 promotion) adds two
   separately rounded sums with add.f32.  The answer is the set of K positions where the chain breaks.
2. **structure** — every candidate of the schedule space (split count and alignment, promotion
   interval, restarts) whose breaks are exactly the observed ones survives.
3. **reduction order** — three calls whose cells hold one value per group of exact, widely spread
   magnitudes, and (bf16) FPRev's pair probe: in cell (r, c) the group r mod S sums to +B, the group
   c mod S to -B and every other group to a tiny e, so the cell counts the groups added after the two
   big ones met — the whole reduction tree in one call.  Orders of the space: split order, reverse, a
   pairwise tree, and the shapes of a GPU reduction kernel (``lanes{T}-{strided|chunked}-{down|pairwise}``:
   T threads each add their partials in order, then a shuffle-down or pairwise tree across the threads).
4. **verification** — the surviving candidates run against the target on at least ``verify_outputs``
   outputs drawn from the fuzzer's families (refmodel.verify.families.matrix); a candidate that misses
   one output is dropped, with the input family that ruled it out.  Each candidate is tried with the
   output conversion's own NaN bits and with every NaN made the canonical quiet NaN (``out_nan``; XLA's
   bf16 convert writes 0x7FC0 where cvt.rn.bf16.f32 keeps the payload's top bits).

The result is the simplest survivor (fewest splits, split order) plus every other survivor: schedules
that no probe and no verified output tells apart give the same bits on everything tried, which is
reported, never hidden.  No survivor: the report says so, with the closest candidates and the probe
that ruled each out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import ml_dtypes
import numpy as np

from ..dtypes import bits_of
from ..errors import InputError
from ..golden.cublas import split_bounds
from ..golden.schedule import Schedule, canonical_nans, reduce_orders
from ..validate import _describe

_DT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
       "e5m2": ml_dtypes.float8_e5m2}
_KINSTR = {"f16": 16, "bf16": 16, "e4m3": 32, "e5m2": 32}


@dataclass
class Probe:
    """One question asked of the target: its name, what it asks, what it showed."""

    name: str
    question: str
    answer: str
    cells: int = 0
    ruled_out: int = 0


@dataclass
class InferReport:
    status: str                                   # "found", "ambiguous" or "none"
    schedule: Optional[Schedule]
    equivalent: list = field(default_factory=list)   # other survivors (same bits on everything tried)
    probes: list = field(default_factory=list)
    verified_outputs: int = 0
    verification_mismatches: int = 0
    closest: list = field(default_factory=list)      # with "none": (candidate, probe that ruled it out, misses)
    breaks: list = field(default_factory=list)
    seconds: float = 0.0
    call_digests: list = field(default_factory=list)   # (inputs sha256, output sha256) per verification call

    def to_dict(self) -> dict:
        return {"status": self.status, "schedule": self.schedule.to_dict() if self.schedule else None,
                "equivalent": [s.to_dict() for s in self.equivalent],
                "probes": [vars(p) for p in self.probes], "verified_outputs": self.verified_outputs,
                "verification_mismatches": self.verification_mismatches, "breaks": self.breaks,
                "closest": [{"schedule": s.to_dict(), "ruled_out_by": why, "misses": n} for s, why, n in self.closest],
                "seconds": self.seconds}

    def paragraph(self) -> str:
        if self.schedule is None:
            return "No schedule of the space explains the probes."
        extra = "" if not self.equivalent else (f" {len(self.equivalent)} other schedule(s) give the same bits on every "
                                                f"probe and verified output: "
                                                + "; ".join(_short(s) for s in self.equivalent[:6]) + ".")
        return (self.schedule.describe() + f" Verified on {self.verified_outputs:,} outputs of random and adversarial "
                f"inputs: {self.verification_mismatches} mismatches." + extra)


def _short(s: Schedule) -> str:
    bits = [f"S={s.splits}" if s.splits > 1 else "no split"]
    if s.splits > 1:
        bits.append(f"align {s.split_align}, {s.reduce}")
    if s.promote_every:
        bits.append(f"promote every {s.promote_every}" + (f" restart {s.restart_every}" if s.restart_every else ""))
    return ", ".join(bits)


def instr_for(dtype: str, sparse: bool = False) -> str:
    """The instruction family of a target's inputs (f32 accumulator)."""
    if dtype not in _DT:
        raise InputError(f"dtype must be one of {', '.join(_DT)}, got {_describe(dtype)}")
    if sparse:
        return f"wgmma.mma_async.sp.sync.aligned.m64n8k{2 * _KINSTR[dtype]}.f32.{dtype}.{dtype}"
    return f"wgmma.mma_async.sync.aligned.m64n8k{_KINSTR[dtype]}.f32.{dtype}.{dtype}"


# ----------------------------------------------------------------------------- candidate space

def candidate_space(K: int, dtype: str, *, sparse: bool = False, out_dtype: str = "f32",
                    max_splits: int = 64, aligns=(16, 32, 64, 128, 256),
                    promotions=(None, 1, 2, 4, 8, 16), restarts=(None, 64, 128, 256)) -> list[Schedule]:
    """Every schedule of the space for a K (one per distinct chunking), split order; the reduction
    order is decided by its own probe."""
    instr = instr_for(dtype, sparse)
    kinstr = 2 * _KINSTR[dtype] if sparse else _KINSTR[dtype]
    fp8 = dtype in ("e4m3", "e5m2")
    out = []
    seen = set()
    for S in range(1, max_splits + 1):
        for a in aligns:
            if a % kinstr or (S == 1 and a != aligns[-1]):
                continue
            if S > 1:
                try:
                    bnd = tuple(split_bounds(K, S, a))
                except InputError:
                    continue
                if any((b % kinstr) for b in bnd):
                    continue
            else:
                bnd = (0, K)
            for p in (promotions if fp8 and not sparse else (None,)):
                for r in (restarts if p else (None,)):
                    if r is not None and (r % kinstr or K % r or r <= p * kinstr):
                        continue
                    key = (bnd, p, r)
                    if key in seen:
                        continue
                    seen.add(key)
                    try:
                        s = Schedule(instr, splits=S, split_align=a if S > 1 else 64, promote_every=p,
                                     restart_every=r if S == 1 else None, out_dtype=out_dtype,
                                     source={"evidence": "inferred"})
                    except InputError:
                        continue
                    if r is not None and S > 1:
                        continue
                    out.append(s)
    return out


def predicted_breaks(s: Schedule, K: int, kinstr: int) -> frozenset:
    """The K positions where a schedule's tensor-core chain breaks (a new chunk or a promotion)."""
    bnd = split_bounds(K, s.splits, s.split_align) if s.splits > 1 else [0, K]
    out = set(bnd[1:-1])
    if s.promote_every:
        g = s.promote_every * kinstr
        for k0, k1 in zip(bnd[:-1], bnd[1:]):
            if s.restart_every:
                for r0 in range(k0, k1, s.restart_every):
                    out |= set(range(r0, min(r0 + s.restart_every, k1), g)) - {r0}
                    out.add(r0)
            else:
                out |= set(range(k0 + g, k1, g))
        out.discard(0)
    return frozenset(x for x in out if 0 < x < K)


# ----------------------------------------------------------------------------- probes

def _values(rng, dtype: str, n: int, lo: int, hi: int) -> np.ndarray:
    """n finite values of ``dtype`` with random signs, exponents in [lo, hi] and mantissas."""
    x = rng.choice([-1.0, 1.0], n) * np.exp2(rng.integers(lo, hi + 1, n)) * (1 + rng.random(n))
    return x.astype(np.float32).astype(_DT[dtype])


def _sparse_positions(rng, start: int, width: int, count: int) -> list[int]:
    """``count`` positions in [start, start+width), at most two per quartet (2:4)."""
    quartets = rng.choice(width // 4, size=count, replace=False)
    return sorted(int(start + 4 * q + rng.integers(0, 4)) for q in quartets)


def _distinct_mod(rng, lo: int, width: int, count: int, kinstr: int, used: set, sparse: bool) -> list[int]:
    """``count`` positions in [lo, lo+width) whose residues mod ``kinstr`` are new (so templates at different
    boundaries never share a K position), at most two per quartet when ``sparse``."""
    out = []
    for _ in range(200):
        if len(out) == count:
            break
        p = int(lo + rng.integers(0, width))
        if p % kinstr in used or (sparse and sum(1 for q in out if q // 4 == p // 4) >= 2):
            continue
        used.add(p % kinstr)
        out.append(p)
    return sorted(out)


def _template_rows(rng, dtype: str, out_dtype: str, kinstr: int, sparse: bool, tries: int):
    """Candidate templates: random ones, and 'tie' ones whose first part sums exactly to a rounding tie of
    the output format (b + half an output ulp) so that a tiny later term decides the output rounding."""
    rows = []
    mbits = {"f32": 23, "bf16": 7, "f16": 10}[out_dtype]
    for r in range(tries):
        used: set = set()
        if r % 2 and out_dtype != "f32":
            e_b = int(rng.integers(0, 5))
            b = np.float32(rng.choice([-1.0, 1.0]) * 2.0 ** e_b * (1 + int(rng.integers(0, 8)) / 8))
            h = np.float32(np.sign(b) * 2.0 ** (e_b - mbits - 1))
            d = int(rng.integers(mbits + 8, 30))
            e = np.float32(rng.choice([-1.0, 1.0]) * 2.0 ** (e_b - d) * (1 + int(rng.integers(0, 4)) / 4))
            vals0, vals1 = np.array([b, h]), np.array([e])
        else:
            n0, n1 = int(rng.integers(1, 3)), int(rng.integers(1, 4))
            vals0 = _values(rng, dtype, n0, 2, 6).astype(np.float32)
            vals1 = _values(rng, dtype, n1, -14, 4).astype(np.float32)
        v0, v1 = vals0.astype(_DT[dtype]), vals1.astype(_DT[dtype])
        if not (np.array_equal(v0.astype(np.float32), vals0) and np.array_equal(v1.astype(np.float32), vals1)):
            continue                                   # not exact in the input type
        p0 = _distinct_mod(rng, 0, kinstr, len(v0), kinstr, used, sparse)
        p1 = _distinct_mod(rng, kinstr, kinstr, len(v1), kinstr, used, sparse)
        if len(p0) != len(v0) or len(p1) != len(v1):
            continue
        rows.append((p0 + p1, np.concatenate([v0, v1])))
    return rows


def find_template(dtype: str, out_dtype: str, *, sparse: bool = False, seed: int = 0, tries: int = 4096):
    """Values that tell a chain across an instruction boundary from a break there, after the output
    rounding: (positions relative to the boundary, values), or None if no template of the family does."""
    instr = instr_for(dtype, sparse)
    kinstr = 2 * _KINSTR[dtype] if sparse else _KINSTR[dtype]
    rng = np.random.default_rng(seed)
    rows = _template_rows(rng, dtype, out_dtype, kinstr, sparse, tries)
    K0 = 2 * kinstr
    A = np.zeros((len(rows) + (-len(rows)) % 64, K0), _DT[dtype])
    for r, (pos, vals) in enumerate(rows):
        A[r, pos] = vals
    B = np.ones((K0, 8), _DT[dtype])
    chain = Schedule(instr, out_dtype=out_dtype)
    split = Schedule(instr, splits=2, split_align=kinstr, out_dtype=out_dtype)
    with np.errstate(all="ignore"):
        dc = bits_of(chain.run(A, B))[:len(rows), 0]
        ds = bits_of(split.run(A, B))[:len(rows), 0]
    good = np.flatnonzero(dc != ds)
    if not good.size:
        return None
    pos, vals = rows[int(good[0])]
    return [p - kinstr for p in pos], vals


def _break_probe(run: Callable, M: int, N: int, K: int, dtype: str, out_dtype: str, sparse: bool,
                 template) -> tuple[set, int, int]:
    """Ask, for every instruction boundary t, whether the chain breaks there: (breaks, cells, unclear)."""
    kinstr = 2 * _KINSTR[dtype] if sparse else _KINSTR[dtype]
    instr = instr_for(dtype, sparse)
    rel, vals = template
    ts = list(range(kinstr, K, kinstr))
    if len(ts) > M * N or M < 3:
        raise InputError(f"the chain-break probe needs M >= 3 and M*N >= K/{kinstr} - 1 = {len(ts)} outputs, got "
                         f"M={M}, N={N}")
    a = np.zeros((M, K), _DT[dtype])
    b = np.zeros((K, N), _DT[dtype])
    cell = {}
    for j, t in enumerate(ts):
        r, c = j % M, j // M
        for p, v in zip(rel, vals):
            a[r, t + p] = v
            b[t + p, c] = 1
        cell[t] = (r, c)
    d = np.asarray(run(a, b))
    # the two answers of each cell, from refmodel on the cell's own values
    K0 = 2 * kinstr
    a0 = np.zeros((64, K0), _DT[dtype])
    for p, v in zip(rel, vals):
        a0[0, kinstr + p] = v
    b0 = np.ones((K0, 8), _DT[dtype])
    chain = bits_of(Schedule(instr, out_dtype=out_dtype).run(a0, b0))[0, 0]
    split = bits_of(Schedule(instr, splits=2, split_align=kinstr, out_dtype=out_dtype).run(a0, b0))[0, 0]
    got = bits_of(d)
    breaks, unclear = set(), 0
    for t, (r, c) in cell.items():
        v = got[r, c]
        if v == split:
            breaks.add(t)
        elif v != chain:
            unclear += 1
    return breaks, len(cell), unclear


def _order_probe_inputs(rng, M: int, N: int, K: int, dtype: str, groups: list) -> tuple[np.ndarray, np.ndarray]:
    """One value per group of K positions in every row, exact products with widely spread magnitudes."""
    a = np.zeros((M, K), _DT[dtype])
    b = np.zeros((K, N), _DT[dtype])
    top = 7 if dtype in ("e4m3", "e5m2") else 14
    for c in range(N):
        v = _values(rng, dtype, len(groups), -top, top)
        for (k0, _), x in zip(groups, v):
            b[k0, c] = x
    for r in range(M):
        v = _values(rng, dtype, len(groups), -top, top)
        for (k0, _), x in zip(groups, v):
            a[r, k0] = x
    return a, b


def _fprev_probe_inputs(M: int, N: int, K: int, dtype: str, groups: list, out_dtype: str = "f32"):
    """FPRev's pair probe (Xie et al., arXiv 2411.00442) on the chunk sums: in cell (r, c) the chunk
    r mod S sums to +B, the chunk c mod S to -B and every other chunk to e (A holds P or s, B holds -P
    or s: B = P*s, e = s*s), with B/e = 2^34 so that even S e's added to B are lost in float32.  The
    cell then holds e times the number of chunks added after the two big ones met (S minus the size of
    their smallest common subtree): one call shows the whole reduction tree.  bf16 only (f16 and FP8
    cannot hold both a B/e that large and an e their output can show); None otherwise."""
    if dtype != "bf16" or len(groups) < 3:
        return None
    S, P, small = len(groups), 2.0 ** 24, 2.0 ** -10
    a = np.zeros((M, K), _DT[dtype])
    b = np.zeros((K, N), _DT[dtype])
    for g, (k0, _) in enumerate(groups):
        a[:, k0] = [P if r % S == g else small for r in range(M)]
        b[k0, :] = [-P if c % S == g else small for c in range(N)]
    return a, b


def _misses_of(s: Schedule, got: np.ndarray, d) -> int:
    """Mismatches of ``s``'s output, given its run with ``out_nan=None`` (``got``), against ``d``."""
    if s.out_nan == "canonical":
        got = canonical_nans(got, s.out_dtype or "f32")
    return int(np.count_nonzero(bits_of(got) != bits_of(np.asarray(d))))


def _misses(s: Schedule, a, b, d, rows=None, cols=None) -> int:
    rows = np.arange(a.shape[0]) if rows is None else rows
    cols = np.arange(b.shape[1]) if cols is None else cols
    aa = a[rows]
    pad = (-len(rows)) % 64
    if pad:
        aa = np.concatenate([aa, np.zeros((pad, a.shape[1]), a.dtype)])
    with np.errstate(all="ignore"):
        got = s.run(aa, b[:, cols])[:len(rows)]
    return int(np.count_nonzero(bits_of(got) != bits_of(np.asarray(d)[np.ix_(rows, cols)])))


def infer_schedule(run: Callable, *, M: int, N: int, K: int, dtype: str, out_dtype: str = "f32",
                   sparse: bool = False, verify_outputs: int = 10**6, seed: int = 0, space=None,
                   source: Optional[dict] = None, max_full: int = 3, log=print) -> InferReport:
    """Infer how ``run`` (a GEMM on the GPU) sums, and verify it (see the module doc)."""
    t0 = time.time()
    kinstr = 2 * _KINSTR[dtype] if sparse else _KINSTR[dtype]
    if K % kinstr:
        raise InputError(f"K must be a multiple of {kinstr} for {dtype}, got {K}")
    rep = InferReport("none", None)
    cands = list(space) if space is not None else candidate_space(K, dtype, sparse=sparse, out_dtype=out_dtype)
    # 1. chain breaks
    tpl = find_template(dtype, out_dtype, sparse=sparse, seed=seed)
    if tpl is None:
        rep.probes.append(Probe("chain breaks", "where does the tensor-core chain break along K?",
                                f"not observable: no template of values tells a chain from a break after the "
                                f"{out_dtype} rounding"))
        observed = None
    else:
        observed, cells, unclear = _break_probe(run, M, N, K, dtype, out_dtype, sparse, tpl)
        rep.breaks = sorted(observed)
        ans = (f"breaks at K = {_ranges(sorted(observed), kinstr)}" if observed else "no break: one chain over K")
        if unclear:
            ans += f"; {unclear} cells answered neither (a window or rounding outside the model)"
        rep.probes.append(Probe("chain breaks", "where does the tensor-core chain break along K?", ans, cells))
        log(f"probe chain breaks: {ans}")
    # 2. structure
    if observed is not None:
        keep = [s for s in cands if predicted_breaks(s, K, kinstr) == frozenset(observed)]
        ruled = [(s, "chain breaks") for s in cands if s not in keep]
        rep.probes.append(Probe("structure", "which split counts, alignments and promotion intervals make these "
                                "breaks?", f"{len(keep)} of {len(cands)} candidates", len(observed), len(ruled)))
        log(f"probe structure: {len(keep)} of {len(cands)} candidates left")
        if not keep:
            closest = sorted(cands, key=lambda s: len(predicted_breaks(s, K, kinstr) ^ frozenset(observed)))[:3]
            rep.closest = [(s, "chain breaks", len(predicted_breaks(s, K, kinstr) ^ frozenset(observed)))
                           for s in closest]
            rep.seconds = time.time() - t0
            return rep
        cands = keep
    # 3. reduction order (only when some candidate has three or more groups)
    multi = [s for s in cands if s.splits > 2]
    if multi:
        cands = [s.replace(reduce=r) for s in cands for r in (reduce_orders(s.splits) if s.splits > 2
                                                               else ("sequential",))]
        rng = np.random.default_rng([seed, 1])
        if observed:                   # one value in every chain segment between observed breaks
            cuts = [0] + sorted(observed) + [K]
        else:
            s0 = multi[0]
            cuts = split_bounds(K, s0.splits, s0.split_align)
        groups = list(zip(cuts[:-1], cuts[1:]))
        rows = np.arange(min(M, 64))
        cols = np.arange(min(N, 64))
        probes = [_order_probe_inputs(rng, M, N, K, dtype, groups) for _ in range(3)]
        probes.append(_fprev_probe_inputs(M, N, K, dtype, groups))
        scores = [[s, 0] for s in cands]
        for a, b in [p for p in probes if p is not None]:
            d = run(a, b)
            for sc in scores:
                if sc[1] == 0:             # a candidate already ruled out needs no second probe
                    sc[1] = _misses(sc[0], a, b, d, rows, cols)
        scores = [tuple(x) for x in scores]
        keep = [s for s, n in scores if n == 0]
        rep.probes.append(Probe("reduction order", "in which order are the chunk sums added?",
                                (_orders_text(sorted({s.reduce for s in keep}))
                                 or "none of split order, reverse, tree or a lane shape"),
                                len(rows) * len(cols) * len([p for p in probes if p is not None]),
                                len(cands) - len(keep)))
        log(f"probe reduction order: {len(keep)} of {len(cands)} left")
        if not keep:
            rep.closest = [(s, "reduction order", n) for s, n in sorted(scores, key=lambda x: x[1])[:3]]
            rep.seconds = time.time() - t0
            return rep
        cands = keep
    # 4. verification on the fuzzer's families: every candidate on a few calls, the simplest in full
    from .families.matrix import FAMILIES

    def order(s):
        return (s.splits, s.reduce != "sequential", s.promote_every or 0, s.split_align)

    cands = sorted(cands, key=order)
    # the NaN bits of the output: the cvt's own, or the canonical quiet NaN (XLA's bf16 convert)
    cands = [c for s in cands for c in (s, s.replace(out_nan="canonical"))]
    alive = list(range(len(cands)))
    why = {}
    done = calls = 0
    screened = 0
    for call, fam, a, b in verification_inputs(dtype, M, N, K, sparse=sparse, outputs=verify_outputs,
                                               seed=[seed, 2]):
        d = run(a, b)
        rep.call_digests.append(call_digest(a, b, d))
        checking = alive if call < len(FAMILIES) else alive[:max_full]
        runs = {}                          # one run per schedule, whatever its out_nan: the NaN bits differ only
        for i in checking:
            base = cands[i].replace(out_nan=None, source={})
            key = base.to_json()
            if key not in runs:
                with np.errstate(all="ignore"):
                    runs[key] = np.asarray(base.run(a, b))
            n = _misses_of(cands[i], runs[key], d)
            if n:
                why[i] = (fam, n)
                alive.remove(i)
        done, calls = done + M * N, call + 1
        if calls <= len(FAMILIES):
            screened = len(alive)
        if not alive:
            break
    full = alive[:max_full]
    rep.verified_outputs = done
    rest = len(alive) - len(full)
    rep.probes.append(Probe("verification", f"do the candidates reproduce {verify_outputs:,} outputs of the fuzzer's "
                            f"families ({', '.join(FAMILIES)})?",
                            f"{len(full)} candidate(s) reproduce all {done:,} outputs of {calls} calls"
                            + (f"; {rest} more reproduce the first {len(FAMILIES)} calls (one per family) and were not "
                               f"run further" if rest else ""), done, len(cands) - len(alive)))
    log(f"verification: {len(full)} candidate(s) reproduce {done:,} outputs ({screened} passed the screening)")
    if not alive:
        rep.closest = [(cands[i], f"verification ({why[i][0]} family)", why[i][1])
                       for i in sorted(why, key=lambda i: why[i][1])[:3]]
        rep.seconds = time.time() - t0
        return rep
    alive = full + alive[max_full:]
    survivors = [cands[i] for i in alive]
    best = survivors[0].replace(source={**(source or {}), "evidence": f"inferred: {len(rep.probes)} probes, "
                                        f"verified on {done:,} outputs"})
    rep.schedule, rep.equivalent = best, survivors[1:]
    rep.status = "found" if len(survivors) == 1 else "ambiguous"
    rep.seconds = time.time() - t0
    return rep


def _orders_text(orders: list, limit: int = 6) -> str:
    return ", ".join(orders[:limit]) + (f" and {len(orders) - limit} more" if len(orders) > limit else "")


def _ranges(xs: list, step: int) -> str:
    if not xs:
        return "none"
    out, start, prev = [], xs[0], xs[0]
    for x in xs[1:] + [None]:
        if x is not None and x == prev + step:
            prev = x
            continue
        out.append(str(start) if start == prev else f"{start}..{prev} every {step}")
        if x is not None:
            start = prev = x
    return ", ".join(out)


def verification_inputs(dtype: str, M: int, N: int, K: int, *, sparse: bool, outputs: int, seed):
    """(call index, family, a, b) of the verification calls: the matrix engine's families in turn from
    ``default_rng(seed)`` (A 2:4 pruned for a sparse target) until ``outputs`` outputs are covered.  The
    inference, the wrong-candidate check, the recorder and the replayer all draw from here."""
    from .families.matrix import FAMILIES, make_inputs
    from .seeded import prune_rows_2_4

    rng = np.random.default_rng(seed)
    calls = 0
    while calls * M * N < outputs:
        fam = FAMILIES[calls % len(FAMILIES)]
        a, b = make_inputs(rng, fam, dtype, M, N, K)
        yield calls, fam, (prune_rows_2_4(a) if sparse else a), b
        calls += 1


def call_digest(a, b, d) -> tuple[bytes, bytes]:
    """(sha256 of A then of B (64 bytes), sha256 of D's bits (32 bytes)) of one call."""
    import hashlib

    from .seeded import matrix_sha256

    return (bytes.fromhex(matrix_sha256(a) + matrix_sha256(b)),
            hashlib.sha256(np.ascontiguousarray(bits_of(np.asarray(d))).tobytes()).digest())


def check_schedule(run: Callable, schedule: Schedule, *, M: int, N: int, K: int, dtype: str,
                   sparse: bool = False, outputs: int = 10**6, seed: int = 0) -> tuple[int, int]:
    """(outputs compared, mismatches) of a given schedule against the target on the fuzzer's families:
    how a wrong candidate is rejected."""
    done = bad = 0
    for _, _, a, b in verification_inputs(dtype, M, N, K, sparse=sparse, outputs=outputs, seed=[seed, 3]):
        bad += _misses(schedule, a, b, run(a, b))
        done += M * N
    return done, bad


__all__ = ["infer_schedule", "check_schedule", "candidate_space", "predicted_breaks", "find_template",
           "InferReport", "Probe", "instr_for", "verification_inputs", "call_digest"]
