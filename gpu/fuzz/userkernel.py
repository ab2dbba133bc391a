"""Fuzz *your* FP8 GEMM kernel against refmodel.

You give wgref a function that runs your kernel, and the *schedule* it claims to follow
(the wgmma instruction, the promotion interval into the float32 accumulator, the
scale layout, the promotion arithmetic and the output dtype).  wgref generates
adversarial inputs, runs your function, computes the expected output with
:func:`refmodel.numerics.gemm.gemm` under that schedule, diffs bit for bit, and shrinks the
first mismatch to a minimal reproducer::

    from gpu.fuzz.userkernel import fp8_kernel_schedule, fuzz_user_kernel

    def run(a, b_nk, scale_a, scale_b):       # numpy in, numpy out
        ...launch your kernel (cupy, torch, ctypes, ...)...
        return d                               # (M, N) float32 or bfloat16

    sched = fp8_kernel_schedule("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3",
                     promote_every=4, out_dtype="bf16")
    report = fuzz_user_kernel(run, sched, m=128, n=256, k=1024, cases=20)

Operands: ``a`` (M, K) FP8 codes (uint8, K-major), ``b_nk`` (N, K) FP8 codes (B
transposed, K-major, as kernels store it), ``scale_a`` (M, K/128) float32 and
``scale_b`` (K/128, N/128) float32 (DeepSeek-V3 / DeepGEMM 1x128 and 128x128 blocks;
``scale_block`` changes the block).  ``DemoFP8Gemm`` is a small DeepGEMM-style kernel
with switchable bugs that docs/ uses to show the tool at work.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from refmodel.verify.differ import diff
from refmodel.errors import DTypeError, InputError
from refmodel.fileio import save_npz
from refmodel.dtypes import bits_of
from refmodel.verify.families.gemm import FAMILIES, make_case
from refmodel.wgmma_forms import parse_wgmma
from refmodel.golden.fp8_schedule import fp8_kernel_schedule
from refmodel.golden.schedule import Schedule


# ----------------------------------------------------------------------------- fuzz + shrink

@dataclass
class UserFuzzReport:
    cases: int = 0
    outputs: int = 0
    mismatches: int = 0
    failing_family: Optional[str] = None
    first: Optional[str] = None
    repro: Optional[str] = None
    minimal: Optional[dict] = None
    shrink_log: list[str] = field(default_factory=list)


def fuzz_user_kernel(run: Callable, sched: Schedule, *, m: int = 128, n: int = 256, k: int = 1024,
                     cases: int = 10, seed: int = 0, families=FAMILIES, out: str | Path | None = None,
                     shrink: bool = True) -> UserFuzzReport:
    """Run ``cases`` inputs (cycling through ``families``) through ``run`` and the schedule's
    refmodel.numerics.gemm, diff bit for bit, shrink and save the first mismatch (see module doc)."""
    from refmodel.validate import check_flag, check_int

    from gpu.fuzz.cpu_engine import check_campaign

    if not callable(run):
        raise InputError(f"run must be a function (a, b_nk, scale_a, scale_b) -> d, got {type(run).__name__}")
    if not isinstance(sched, Schedule):
        raise InputError(f"sched must be a refmodel.golden.Schedule (e.g. fp8_kernel_schedule(...)), got {type(sched).__name__}")
    check_campaign(cases=cases, seed=seed)
    for name, v in (("m", m), ("n", n), ("k", k)):
        check_int(name, v, 1, 1 << 16)
    shrink = check_flag("shrink", shrink)
    if isinstance(families, str) or not isinstance(families, (list, tuple)) or not families \
            or any(fam not in FAMILIES for fam in families):
        raise InputError(f"families must be a non-empty list of {', '.join(FAMILIES)}, got {families!r:.60}")
    f = parse_wgmma(sched.instr)
    if m % 64 or n % f.n or k % sched.scale_block or (sched.scale_block % (32 * (sched.promote_every or 1))
                                                       and sched.promote_every):
        raise InputError(f"shape must have M % 64 == 0, N % {f.n} == 0, K % {sched.scale_block} == 0, "
                         f"and a promotion stage must fit in one scale block; got M={m} N={n} K={k}")
    rep = UserFuzzReport()
    for i in range(cases):
        fam = families[i % len(families)]
        rng = np.random.default_rng([seed, i])
        a, b, sa, sb = make_case(rng, fam, m, n, k, sched)
        want = sched.expected(a, b, sa, sb)
        d = compare_output(run(a, b, sa, sb), want, name=f"case {i} ({fam})")
        rep.cases += 1
        rep.outputs += d.total
        rep.mismatches += d.mismatches
        if d.mismatches and rep.first is None:
            rep.failing_family, rep.first = fam, d.to_text()
            if shrink:
                small, log = shrink_gemm(run, sched, a, b, sa, sb)
                rep.shrink_log = log
                rep.minimal = {k2: (v.tolist() if isinstance(v, np.ndarray) else v) for k2, v in small.items()
                               if k2 in ("m", "n", "k", "nonzero_a", "nonzero_b", "scale_a", "scale_b", "diff")}
                if out is not None:
                    p = Path(out)
                    p.mkdir(parents=True, exist_ok=True)
                    path = p / "user_kernel_repro.npz"
                    save_npz(path, a=small["a"], b_nk=small["b"], scale_a=small["sa"],
                                        scale_b=small["sb"], got=bits_of(small["got"]), want=bits_of(small["want"]),
                                        schedule=np.array(json.dumps(asdict(sched))))
                    rep.repro = str(path)
            break
    return rep


def compare_output(got, want: np.ndarray, *, name: str = "diff"):
    """Bit-for-bit diff of a kernel's output with the expected one.  Bit for bit includes
    the dtype: a kernel that returns float32 (or float64) where the schedule says bf16 is
    refused with a DTypeError, never converted to bf16 first and then called a match."""
    from refmodel.validate import as_array

    got = as_array("the kernel's output", got, what="a numpy array")
    if got.dtype != want.dtype:
        raise DTypeError(f"the kernel returned {got.dtype.name} but the schedule's out_dtype "
                         f"expects {want.dtype.name}; bit for bit includes the dtype")
    if got.shape != want.shape:
        raise InputError(f"the kernel returned shape {got.shape} but the expected output has "
                         f"shape {want.shape}")
    return diff(got, want, labels=("row", "col"), name=name)


def shrink_gemm(run: Callable, sched: Schedule, a, b, sa, sb) -> tuple[dict, list[str]]:
    """Greedy reduction of a failing GEMM case: one 64 x N_instr tile, the shortest K
    (whole scale blocks), one output's row and column, the fewest nonzero inputs,
    unit scales and +-1-like values, each step kept only if the mismatch persists."""
    f = parse_wgmma(sched.instr)
    blk = sched.scale_block
    log: list[str] = []

    def mism(a_, b_, sa_, sb_):
        try:
            got = np.asarray(run(a_, b_, sa_, sb_))
        except Exception:
            return None
        want = sched.expected(a_, b_, sa_, sb_)
        if got.dtype != want.dtype or got.shape != want.shape:
            return None
        bad = bits_of(got) != bits_of(want)
        return bad if bad.any() else None

    cur = [a, b, sa, sb]
    bad = mism(*cur)
    if bad is None:
        raise InputError("the mismatch does not reproduce (the kernel gave the expected output, or failed, "
                         "when run again): nothing to shrink")
    r, c = (int(v) for v in np.argwhere(bad)[0])
    # one tile of 64 rows and one N block (the scale's N block is the instruction's multiple)
    nb_w = max(f.n, blk) if b.shape[0] >= blk else f.n
    r0, c0 = (r // 64) * 64, (c // nb_w) * nb_w
    cand = [a[r0:r0 + 64], b[c0:c0 + nb_w], sa[r0:r0 + 64], sb[:, c0 // blk:(c0 + nb_w + blk - 1) // blk]]
    if mism(*cand) is not None:
        cur = cand
        log.append(f"tile rows {r0}..{r0 + 63}, cols {c0}..{c0 + nb_w - 1}")
    # shortest K in whole scale blocks: keep a prefix / suffix of blocks
    while cur[0].shape[1] > blk:
        kb = cur[0].shape[1] // blk
        done = False
        for lo, hi in ((0, kb - 1), (1, kb), (0, kb // 2), (kb // 2, kb)):
            if hi - lo < 1:
                continue
            cand = [cur[0][:, lo * blk:hi * blk], cur[1][:, lo * blk:hi * blk], cur[2][:, lo:hi], cur[3][lo:hi]]
            if mism(*cand) is not None:
                cur, done = cand, True
                log.append(f"K -> {cand[0].shape[1]}")
                break
        if not done:
            break
    # one output element: zero the other rows of A and columns (rows of b_nk)
    bad = mism(*cur)
    r, c = (int(v) for v in np.argwhere(bad)[0])
    a1 = np.zeros_like(cur[0]); a1[r] = cur[0][r]
    b1 = np.zeros_like(cur[1]); b1[c] = cur[1][c]
    if mism(a1, b1, cur[2], cur[3]) is not None:
        cur = [a1, b1, cur[2], cur[3]]
        log.append(f"isolated output ({r}, {c})")
    # fewest nonzero inputs (delta debugging over A row r and B row c)
    for which in (0, 1):
        arr = cur[which]
        nz = [tuple(int(v) for v in ix) for ix in np.argwhere(arr != 0)]
        chunk = max(1, len(nz) // 2)
        while nz:
            progressed = False
            for s in range(0, len(nz), chunk):
                trial = cur[which].copy()
                for ix in nz[s:s + chunk]:
                    trial[ix] = 0
                cand = list(cur)
                cand[which] = trial
                if mism(*cand) is not None:
                    cur, progressed = cand, True
                    nz = [tuple(int(v) for v in ix) for ix in np.argwhere(cur[which] != 0)]
                    break
            if not progressed:
                if chunk == 1:
                    break
                chunk = max(1, chunk // 2)
    log.append(f"{int(np.count_nonzero(cur[0]))} nonzero A and {int(np.count_nonzero(cur[1]))} nonzero B codes left")
    # unit scales
    cand = [cur[0], cur[1], np.ones_like(cur[2]), np.ones_like(cur[3])]
    if mism(*cand) is not None:
        cur = cand
        log.append("all scales -> 1.0")
    # simpler values: e4m3/e5m2 code of +-1.0 (keep sign)
    fa = parse_wgmma(sched.instr)
    one = {"e4m3": 0x38, "e5m2": 0x3C}
    for which, t in ((0, fa.dtype_a), (1, fa.dtype_b)):
        for ix in [tuple(int(v) for v in i) for i in np.argwhere(cur[which] != 0)]:
            trial = cur[which].copy()
            trial[ix] = one[t] | (int(trial[ix]) & 0x80)
            if trial[ix] == cur[which][ix]:
                continue
            cand = list(cur)
            cand[which] = trial
            if mism(*cand) is not None:
                cur = cand
    got = np.asarray(run(*cur))
    want = sched.expected(*cur)
    d = compare_output(got, want, name="minimal case")
    res = {"a": cur[0], "b": cur[1], "sa": cur[2], "sb": cur[3], "got": got, "want": want,
           "m": cur[0].shape[0], "n": cur[1].shape[0], "k": cur[0].shape[1],
           "nonzero_a": int(np.count_nonzero(cur[0])), "nonzero_b": int(np.count_nonzero(cur[1])),
           "scale_a": cur[2], "scale_b": cur[3], "diff": d.to_text()}
    return res, log


# ----------------------------------------------------------------------------- the FP8 GEMM kernel's races

def race_one(broken: str | None) -> dict:
    """One variant through gpu.fuzz.userkernel.fuzz_user_kernel (adversarial families, bit-for-bit diff
    with refmodel.gemm, shrinking of the first mismatch)."""
    import cupy as cp
    import ml_dtypes

    from gpu.kernels.gemm_fp8 import INSTR, GemmConfig, gemm_fp8

    cfg = GemmConfig(promote=True, out="bf16", broken=broken)

    def run(a, b_nk, sa, sb):
        d, _ = gemm_fp8(np.ascontiguousarray(a), np.ascontiguousarray(b_nk), sa, sb, cfg=cfg)
        return cp.asnumpy(d).view(ml_dtypes.bfloat16)

    rep = fuzz_user_kernel(run, fp8_kernel_schedule(INSTR, promote_every=4, out_dtype="bf16"), m=256, n=256, k=2048,
                           cases=8, seed=7)
    return {"cases": rep.cases, "outputs": rep.outputs, "mismatches": rep.mismatches, "minimal": rep.minimal}


def races(log=print) -> dict:
    """The good kernel and each deliberately broken variant, each in its own process (a variant
    may fault the device): outcome 'ok', 'wrong bits' (with the shrunk reproducer) or 'fault'."""
    import subprocess

    out = {}
    for broken in ("none", "lax_wait", "no_proxy_fence", "early_reuse"):
        r = subprocess.run([sys.executable, "-m", "gpu.fuzz.userkernel", "--race-one", broken],
                           capture_output=True, text=True, timeout=300)
        lines = [x for x in r.stdout.splitlines() if x.startswith("{")]
        if r.returncode == 0 and lines:
            res = json.loads(lines[-1])
            res["outcome"] = "wrong bits" if res["mismatches"] else "ok"
        else:
            tail = (r.stderr.strip().splitlines() or ["?"])[-1]
            res = {"outcome": "fault", "error": tail[-200:]}
        out[broken] = res
        log(f"{broken:<15} {json.dumps(res)[:400]}")
    return out


def main(argv=None) -> int:
    """``python -m gpu.fuzz.userkernel --races F``: the FP8 GEMM kernel (gpu.kernels.gemm_fp8) and its
    deliberately broken pipeline variants through the user-kernel fuzzer; a JSON report in F."""
    import argparse

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("--races", default=None, help="run the good kernel and its broken variants; write a JSON report here")
    p.add_argument("--race-one", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.race_one:
        print(json.dumps(race_one(None if a.race_one == "none" else a.race_one)))
        return 0
    if a.races:
        Path(a.races).write_text(json.dumps(races(), indent=1))
        return 0
    p.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
