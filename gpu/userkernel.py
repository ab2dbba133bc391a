"""Fuzz *your* FP8 GEMM kernel against refmodel.

You give wgref a function that runs your kernel, and the *schedule* it claims to follow
(the wgmma instruction, the promotion interval into the float32 accumulator, the
scale layout, the promotion arithmetic and the output dtype).  wgref generates
adversarial inputs, runs your function, computes the expected output with
:func:`refmodel.numerics.gemm.gemm` under that schedule, diffs bit for bit, and shrinks the
first mismatch to a minimal reproducer::

    from gpu.userkernel import Schedule, fuzz_user_kernel

    def run(a, b_nk, scale_a, scale_b):       # numpy in, numpy out
        ...launch your kernel (cupy, torch, ctypes, ...)...
        return d                               # (M, N) float32 or bfloat16

    sched = Schedule("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3",
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

import ml_dtypes
import numpy as np

from refmodel.verify.differ import diff
from refmodel.errors import DTypeError, InputError
from refmodel.fileio import save_npz
from refmodel.numerics.fp8 import encode
from refmodel.dtypes import bits_of
from refmodel.wgmma_forms import parse_wgmma

_FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
_OUT = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


@dataclass(frozen=True)
class Schedule:
    """What a kernel does along K, in refmodel.numerics.gemm's terms."""

    instr: str
    promote_every: Optional[int] = 4      # wgmma instructions per float32 promotion (None: never)
    promote_op: str = "fma"               # acc = fma(RN(sa*sb), partial, acc); or "mul_add", "fma_exact"
    out_dtype: str = "f32"                # f32, bf16 or f16
    scale_block: int = 128                # K (and N for B) extent of one scale

    def expected(self, a, b_nk, scale_a, scale_b) -> np.ndarray:
        from refmodel.numerics.gemm import gemm

        f = parse_wgmma(self.instr)
        at = np.asarray(a, np.uint8).view(_FP8[f.dtype_a])
        bt = np.ascontiguousarray(np.asarray(b_nk, np.uint8).T).view(_FP8[f.dtype_b])
        kw = {}
        if self.promote_every is not None:
            kw = dict(scale_a=scale_a, scale_b=scale_b, promote_op=self.promote_op)
        return gemm(at, bt, instr=self.instr, promote_every=self.promote_every,
                    out_dtype=_OUT[self.out_dtype], **kw)


# ----------------------------------------------------------------------------- inputs

FAMILIES = ("normal", "wide", "specials", "sparse", "uniform_scales")


def make_case(rng: np.random.Generator, family: str, m: int, n: int, k: int, sched: Schedule):
    """(a (M,K) codes, b_nk (N,K) codes, scale_a, scale_b) of one input family."""
    f = parse_wgmma(sched.instr)
    kb, nb = k // sched.scale_block, -(-n // sched.scale_block)
    if family in ("normal", "uniform_scales", "sparse"):
        a = rng.standard_normal((m, k)) * 64
        b = rng.standard_normal((n, k)) * 64
    elif family == "wide":
        a = rng.standard_normal((m, k)) * 2.0 ** rng.integers(-12, 9, (m, k))
        b = rng.standard_normal((n, k)) * 2.0 ** rng.integers(-12, 9, (n, k))
    elif family == "specials":
        a = rng.standard_normal((m, k)) * 2.0 ** rng.integers(-9, 9, (m, k))
        b = rng.standard_normal((n, k)) * 2.0 ** rng.integers(-9, 9, (n, k))
        a[rng.random((m, k)) < 0.002] = 1e9          # saturates to max
        b[rng.random((n, k)) < 0.01] = 0.0
    else:
        raise InputError(f"unknown input family {family!r}; known: {', '.join(FAMILIES)}")
    if family == "sparse":
        a[rng.random((m, k)) < 0.9] = 0.0
    ac = encode(a, f.dtype_a)
    bc = encode(b, f.dtype_b)
    if family == "uniform_scales":
        sa = np.ones((m, kb), np.float32)
        sb = np.ones((kb, nb), np.float32)
    else:
        sa = (rng.uniform(0.5, 2.0, (m, kb)) * 2.0 ** rng.integers(-8, 4, (m, kb))).astype(np.float32)
        sb = (rng.uniform(0.5, 2.0, (kb, nb)) * 2.0 ** rng.integers(-8, 4, (kb, nb))).astype(np.float32)
    return ac, bc, sa, sb


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


# ----------------------------------------------------------------------------- a demo kernel

DEMO_SOURCE = r"""
// DeepGEMM-style FP8 GEMM: one warpgroup per 64 x BN tile, wgmma m64nBNk32 (SS),
// the first wgmma of each stage with scale-d = 0, promotion into float32 every PROMOTE
// instructions: acc = fmaf(sa[row, kb] * sb[kb, col / 128], partial, acc).
// A: M x K e4m3 codes (K-major), B: N x K (K-major), D: M x N (f32 or bf16), row-major.
#define BN {bn}
#define NREGS {nregs}
#define PROMOTE {promote}
#define STAGE_EVERY {stage_every}
#define SKIP_LAST {skip_last}
#define OUT_BF16 {out_bf16}
extern "C" __global__ void __launch_bounds__(128, 1)
demo_fp8_gemm(const u8* __restrict__ A, const u8* __restrict__ B, const float* __restrict__ SA,
              const float* __restrict__ SB, void* __restrict__ D, int M, int N, int K, u64 desc_tmpl)
{{
  __shared__ __align__(128) u8 sA[64 * 32];
  __shared__ __align__(128) u8 sB[BN * 32];
  const int t = threadIdx.x, w = t / 32, l = t % 32, g = l / 4, q = l % 4;
  const int m0 = blockIdx.y * 64, n0 = blockIdx.x * BN;
  const int KB = K / 128, NB = (N + 127) / 128;
  u32 aaddr, baddr;
  asm volatile("{{ .reg .u64 x; cvta.to.shared.u64 x, %1; cvt.u32.u64 %0, x; }}" : "=r"(aaddr) : "l"((u64)sA));
  asm volatile("{{ .reg .u64 x; cvta.to.shared.u64 x, %1; cvt.u32.u64 %0, x; }}" : "=r"(baddr) : "l"((u64)sB));
  const u64 da = desc_tmpl | (u64)((aaddr >> 4) & 0x3FFF);
  const u64 db = desc_tmpl | (u64)((baddr >> 4) & 0x3FFF);
  float acc[NREGS], d[NREGS];
#pragma unroll
  for (int i = 0; i < NREGS; ++i) {{ acc[i] = 0.f; d[i] = 0.f; }}
  const int steps = K / 32 - SKIP_LAST;
  for (int s = 0; s < steps; ++s) {{
    const int k0 = s * 32;
    for (int x = t; x < 64 * 2; x += 128) {{      // 16-byte chunks of the A tile
      const int r = x / 2, kc = x % 2;
      *(uint4*)(sA + (r / 8) * 256 + kc * 128 + (r % 8) * 16) = *(const uint4*)(A + (u64)(m0 + r) * K + k0 + kc * 16);
    }}
    for (int x = t; x < BN * 2; x += 128) {{
      const int r = x / 2, kc = x % 2;
      *(uint4*)(sB + (r / 8) * 256 + kc * 128 + (r % 8) * 16) = *(const uint4*)(B + (u64)(n0 + r) * K + k0 + kc * 16);
    }}
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const int sd = (s % STAGE_EVERY) != 0;
#pragma unroll
    for (int i = 0; i < NREGS; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    {wgmma_asm}
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
    for (int i = 0; i < NREGS; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
    __syncthreads();
    if ((s + 1) % STAGE_EVERY == 0 || s + 1 == steps) {{
      const int kb = ((s / STAGE_EVERY) * STAGE_EVERY * 32) / 128;   // scale block of the stage's start
#pragma unroll
      for (int i = 0; i < NREGS; ++i) {{
        const int row = m0 + 16 * w + g + 8 * ((i >> 1) & 1);
        const int col = n0 + 2 * q + (i & 1) + 8 * (i >> 2);
        const float sc = SA[(u64)row * KB + kb] * SB[(u64)kb * NB + col / 128];
        acc[i] = fmaf(sc, d[i], acc[i]);
      }}
    }}
  }}
#pragma unroll
  for (int i = 0; i < NREGS; ++i) {{
    const int row = m0 + 16 * w + g + 8 * ((i >> 1) & 1);
    const int col = n0 + 2 * q + (i & 1) + 8 * (i >> 2);
#if OUT_BF16
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(acc[i]));
    ((unsigned short*)D)[(u64)row * N + col] = h;
#else
    ((float*)D)[(u64)row * N + col] = acc[i];
#endif
  }}
}}
"""


class DemoFP8Gemm:
    """A small DeepGEMM-style e4m3 GEMM kernel on the GPU, with optional planted bugs:

    ``bug="drop_last_k"``: the K loop stops one instruction early (an off-by-one bound).
    ``bug="promote_interval"``: promotes every 2*promote instructions (and applies the scale
    of the stage's first block to both), while the schedule says every ``promote``.
    """

    def __init__(self, bn: int = 128, promote: int = 4, out: str = "f32", bug: Optional[str] = None):
        if bug not in (None, "drop_last_k", "promote_interval"):
            raise InputError(f"bug must be None, 'drop_last_k' or 'promote_interval', got {bug!r}")
        self.bn, self.promote, self.out, self.bug = bn, promote, out, bug
        self.instr = f"wgmma.mma_async.sync.aligned.m64n{bn}k32.f32.e4m3.e4m3"
        self.schedule = Schedule(self.instr, promote_every=promote, out_dtype=out)

    def source(self) -> str:
        nregs = self.bn // 2
        dl = ", ".join(f"%{i}" for i in range(nregs))
        outs = ", ".join(f'"+f"(d[{i}])' for i in range(nregs))
        wg = (f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{nregs + 2}, 0;\\n'
              f'{self.instr} {{{dl}}}, %{nregs}, %{nregs + 1}, p, 1, 1;\\n}}\\n"\n'
              f'      : {outs}\n      : "l"(da), "l"(db), "r"(sd));')
        every = self.promote * (2 if self.bug == "promote_interval" else 1)
        return DEMO_SOURCE.format(bn=self.bn, nregs=nregs, promote=self.promote, stage_every=every,
                                  skip_last=int(self.bug == "drop_last_k"), out_bf16=int(self.out == "bf16"),
                                  wgmma_asm=wg)

    def __call__(self, a, b_nk, scale_a, scale_b) -> np.ndarray:
        from refmodel.layouts.descriptor import MatrixDescriptor

        from .runtime import compile_module, require_device

        cp = require_device()
        m, k = a.shape
        n = b_nk.shape[0]
        kern = compile_module(self.source()).get_function("demo_fp8_gemm")
        out_dt = np.uint16 if self.out == "bf16" else np.float32
        dA, dB = cp.asarray(np.ascontiguousarray(a, np.uint8)), cp.asarray(np.ascontiguousarray(b_nk, np.uint8))
        dSA = cp.asarray(np.ascontiguousarray(scale_a, np.float32))
        dSB = cp.asarray(np.ascontiguousarray(scale_b, np.float32))
        dD = cp.zeros((m, n), dtype=out_dt)
        tmpl = MatrixDescriptor(0, 128, 256).encode()
        kern((n // self.bn, m // 64), (128,), (dA, dB, dSA, dSB, dD, np.int32(m), np.int32(n), np.int32(k),
                                               np.uint64(tmpl)))
        cp.cuda.runtime.deviceSynchronize()
        d = cp.asnumpy(dD)
        return d.view(ml_dtypes.bfloat16) if self.out == "bf16" else d
