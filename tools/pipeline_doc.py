"""docs/pipeline.md: the wgmma pipeline chapter (seed §1-3), generated from refmodel.machine.pipeline."""

from __future__ import annotations

from refmodel.machine import pipeline as pl
from refmodel.machine.pipeline_draw import LEGEND, draw_ascii


def _ops_table() -> str:
    rows = ["| op | required fields | optional fields | meaning |", "|---|---|---|---|"]
    for op, (req, opt, what) in pl.OPS.items():
        rows.append(f"| `{op}` | {', '.join(f'`{f}`' for f in req) or '—'} | "
                    f"{', '.join(f'`{f}`' for f in opt) or '—'} | {what} |")
    return "\n".join(rows)


def _hazard_table() -> str:
    rows = ["| kind | severity | rule |", "|---|---|---|"]
    for kind, h in pl.HAZARDS.items():
        rows.append(f"| `{kind}` | {h.severity} | {h.summary} |")
    return "\n".join(rows)


def _broken_section() -> str:
    out = []
    for name, (kind, what) in pl.BROKEN.items():
        ev = pl.gemm_mainloop_trace(broken=name)
        rep = pl.check(ev)
        hits = [h for h in rep.hazards if h.kind == kind]
        others = sorted({h.kind for h in rep.hazards} - {kind})
        lines = [pl.format_hazard(h, ev) for h in hits[:2]]
        more = len(hits) - len(lines)
        out.append(f"### `broken=\"{name}\"`\n\n{what[0].upper() + what[1:]}.  The checker reports "
                   f"{len(hits)} `{kind}` hazard(s)"
                   + (f" (and also: {', '.join(f'`{k}`' for k in others)})" if others else "")
                   + "; the first:\n\n```text\n" + "\n".join(lines)
                   + (f"\n... {more} more" if more > 0 else "") + "\n```\n")
    return "\n".join(out)


def _slot_table(cfg: pl.MainloopConfig) -> str:
    rows = ["| region | shared bytes | written by | read by |", "|---|---|---|---|"]
    for s in range(cfg.stages):
        rows.append(f"| slot {s} A ({cfg.block_m}×{cfg.block_k}) | {cfg.a_slot(s):#07x}..{cfg.a_slot(s) + cfg.a_tile_bytes - 1:#07x} "
                    f"| TMA (`full{s}`) | consumer c: rows 64c..64c+63 through `desc_a` |")
        rows.append(f"| slot {s} B ({cfg.block_n}×{cfg.block_k}) | {cfg.b_slot(s):#07x}..{cfg.b_slot(s) + cfg.b_tile_bytes - 1:#07x} "
                    f"| TMA (`full{s}`) | every consumer through `desc_b` |")
    for p in range(cfg.c_panels):
        lo, hi = cfg.c_panel(p)
        rows.append(f"| output panel {p} | {lo:#07x}..{hi - 1:#07x} | stmatrix (each consumer its 64 rows) "
                    f"| TMA store by consumer 0 |")
    return "\n".join(rows)


def _kernel_section() -> str:
    """The real kernel: its steps tied to refmodel, its trace checked, its evidence and speed."""
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    from gpu.kernels.gemm_fp8 import BK, BM, BN, GemmConfig, trace

    rows = []
    for cfg in (GemmConfig(), GemmConfig(promote=False), GemmConfig(bn=192), GemmConfig(bn=192, xtile=True, scales="global")):
        rep = pl.check(trace(cfg, K=4096))
        rows.append(f"| `{cfg.name}`, K=4096, 2 tiles | {len(rep.events)} | {len(rep.groups)} | "
                    f"{len(rep.errors)} | {len(rep.warnings)} |")
    broken = []
    for b in ("lax_wait", "no_proxy_fence", "early_reuse"):
        kinds = sorted({h.kind for h in pl.check(trace(GemmConfig(), K=1024, broken=b)).errors})
        broken.append((b, ", ".join(kinds)))
    man = json.loads((root / "fixtures" / "gemm" / "manifest.json").read_text())
    fx = "\n".join(f"| {e['meta']['M']}x{e['meta']['N']}x{e['meta']['K']} | {e['meta']['family']} | "
                   f"{e['meta']['promote']} | {e['meta'].get('recipe', 'blockwise') if e['meta']['promote'] else '-'} | "
                   f"{e['meta']['out']} | {e['cases']:,} |" for e in man["entries"])
    bench = json.loads((root / "bench" / "results" / "gemm_kernel_h200.json").read_text())
    bt = "\n".join(f"| {r['n']}³ | {r['mode']} | {r.get('recipe', '-')} | `{r.get('config', 'simple')}` | "
                   f"{r['cublas_tflops']:.0f} | "
                   + (f"{r['cublas_blockwise_tflops']:.0f} | " if "cublas_blockwise_tflops" in r else "- | ")
                   + f"{r['ours_tflops']:.0f} | {r['ratio']:.2f} | "
                   + (f"{r['ratio_blockwise']:.2f} |" if "ratio_blockwise" in r else "- |") for r in bench)
    b6 = bench + json.loads((root / "bench" / "results" / "gemm_kernel_h200_session6" / "call6_gemm_kernel_b.json").read_text())
    rb = [r["ratio_blockwise"] for r in b6 if "ratio_blockwise" in r]
    blk_lo, blk_hi = min(rb), max(rb)
    blk_diff = max(r["max_rel_diff_vs_cublas"] for r in b6 if "ratio_blockwise" in r)
    t128 = next(r["ratio"] for r in bench if r["n"] == 4096 and r["config"] == "persistent-p1-bn128-s6-st-bf16")
    t144 = next(r["ratio"] for r in bench if r["n"] == 8192 and r["config"] == "persistent-p1-bn144-s5-st-bf16")
    yl = {(r["n"], r["config"]): r["ours_tflops"] for r in json.loads(
        (root / "bench" / "results" / "gemm_kernel_h200_session6" / "call1_yield.json").read_text())}
    pct = lambda a, b: ", ".join(f"{100 * (yl[(n, b)] / yl[(n, a)] - 1):+.0f} %" for n in (4096, 8192))
    y_up = pct("persistent-p1-bn192-s4-q1-bf16", "persistent-p1-bn192-s4-q1-y9-bf16")
    y_down = pct("persistent-p1-bn128-s5-bf16", "persistent-p1-bn128-s5-y9-bf16") + " (9/16), " + \
        pct("persistent-p1-bn128-s5-bf16", "persistent-p1-bn128-s5-y16-bf16") + " (16/16)"
    races = json.loads((root / "bench" / "results" / "gemm_kernel_races_h200.json").read_text())
    what = {"lax_wait": "`wait_group 1` where 0 is needed before the accumulators are read",
            "no_proxy_fence": "no `fence.proxy.async` between the epilogue's stmatrix and the TMA store",
            "early_reuse": "the producer refills a ring slot without waiting on its `empty` barrier"}
    rt = "\n".join(f"| `{b}` | {what[b]} | {k} | {races[b]['outcome']}"
                   f"{'' if races[b]['outcome'] != 'ok' else ' (' + format(races[b]['outputs'], ',') + ' outputs equal refmodel)'} |"
                   for b, k in broken)
    return f"""## 8. The real kernel: `gpu/kernels/gemm_fp8.py`, step by step

A tiled FP8 GEMM for the H200 that is bit-identical to `refmodel.gemm` with its schedule. CTA tile
{BM} x {BN}, K blocks of {BK} e4m3 (one 128-byte swizzle row); 384 threads: warpgroup 0 produces,
warpgroups 1 and 2 consume 64 rows each. Each step and the refmodel function that models it:

| step | kernel | refmodel |
|---|---|---|
| load | one thread: `mbarrier.arrive.expect_tx` (32 KiB) + two `cp.async.bulk.tensor.2d` (A 128x128, B^T 128x128, `CU_TENSOR_MAP_SWIZZLE_128B`) into ring slot `kb % stages` after waiting on its `empty` barrier | `refmodel.tma_load` (rows of 128 B, absolute-address swizzle), `refmodel.machine.pipeline` (the mbarrier phases) |
| operands | descriptors: start = slot + 8192 c (+32 B per K step), LBO 16, SBO 1024, 128B swizzle, base offset 0 (slots are 1024-aligned) | `make_descriptor(..., k_step=j)`, `operand_addresses`, `wgmma_smem` |
| multiply | `wgmma.fence`, 4 x `wgmma.mma_async.m64n128k32.f32.e4m3.e4m3`, `commit_group`, `wait_group 0`, arrive on `empty` | `refmodel.wgmma` (the fused, truncated dot product: docs/accumulator.md) |
| promote | per K block: scale-d 0 for the first wgmma, then `acc = fma(RN(sa[row,kb] * sb[kb,nb]), partial, acc)` | `refmodel.gemm(promote_every=4, scale_a, scale_b, promote_op="fma")` |
| convert | `cvt.rn.bf16x2.f32 p, d[2j+1], d[2j]` | `refmodel.cvt` (docs/fp8.md) |
| store | 8 x `stmatrix.x4` per warp into a 128B-swizzled 128 x 128 bf16 tile, `fence.proxy.async.shared::cta`, `bar.sync 1, 256`, two TMA stores (64-column boxes) | `refmodel.epilogue_stmatrix`, `rowmajor_offsets` (docs/layouts.md) |

M and N may have tails (TMA zero-fills loads and clips the store); `refmodel` computes the
padded problem and crops (`refmodel.verify.replay_gemm.kernel_reference`).

**Its own trace passes the checker** (`gpu.kernels.gemm_fp8.trace(cfg, K)`, the same stages, ring and
waits, computed here):

| configuration | events | commit groups | hazards | warnings |
|---|---:|---:|---:|---:|
{chr(10).join(rows)}

**Evidence.** `python -m gpu.record.gemm --out fixtures` runs 4096³ and tail shapes (random,
every-code with NaN, wide exponent spread; promotion on and off; bf16 and f32 out) and fails on a
single mismatch; these small cases are kept as fixtures and replayed by CI:

| shape | inputs | promote | scales | out | outputs |
|---|---|---|---|---|---:|
{fx}

**Deliberately broken kernels on the H200** (`python -m gpu.fuzz.userkernel --races F`, each variant
through `gpu.fuzz.userkernel.fuzz_user_kernel`; `bench/results/gemm_kernel_races_h200.json`):

| variant | bug | checker on its trace | H200 |
|---|---|---|---|
{rt}

The checker flags all three; the hardware turns none into wrong bits: ptxas injects the missing
wait itself (`lax_wait` compiles with ptxas performance warning C7518: the wgmmas are serialised
behind a compiler-inserted wait), the unfenced store read the finished tile in every case tried, and the
early refill faults the launch (`CUDA_ERROR_LAUNCH_FAILED`) instead of computing garbage.

**Speed** (`python bench/bench_gemm_kernel.py`, median of CUDA events, same run as
`torch._scaled_mm`, e4m3 → bf16; `bench/results/gemm_kernel_h200.json`): precise = promotion every
K block, against `use_fast_accum=False` with per-tensor scales and, for the blockwise recipe, also against
`torch._scaled_mm` with the same 1x128 / 128x128 blockwise scales; fast = one accumulator chain vs
`use_fast_accum=True` (docs/performance.md has the like-for-like ratios, reruns and clocks).

| size | mode | scales | config | cuBLAS per-tensor TFLOP/s | cuBLAS blockwise TFLOP/s | this kernel TFLOP/s | ratio per-tensor | ratio blockwise |
|---|---|---|---|---:|---:|---:|---:|---:|
{bt}

Config names: `persistent`/`simple` schedule, `p1`/`p0` promotion on/off, `bn` tile N, `s` ring stages, `x`
the cross-tile k-block pipelining, `c2` 2-CTA clusters, `q1` one partial set, `st` per-tensor scales (`scales="tensor"`), `y9` the FFMA-yield
rewrite of 9/16 of each promotion FFMA run (`ffma_yield=9`), `sg` scales loaded from global
memory (no `sg`: the producer stages them in shared memory, `scales="smem"`; rows recorded before that option
existed, in `bench/results/gemm_kernel_h200_previous.json`, loaded them from global memory without the tag).
The default configs are `persistent-p1-bn128-s5` (precise: two partial sets, scales in shared memory, `xtile`
off) and `persistent-p0-bn256-s4` (fast). Bit checks (`python -m gpu.record.gemm --check-only --configs ...`,
the `tiny` family included), 0 mismatches each: the eight precise configs of `bench/h200_session.sh`, 372,140,032
outputs (`bench/results/gemm_kernel_h200_session4/check.txt`); the default, `cluster=2`, `cluster=2,xtile=1` and
the since-removed `scales="gather"` variants, 258,615,808 and 189,207,040 outputs
(`bench/results/gemm_kernel_h200_session5/call1_gemm_check.txt`, `call2_gemm_check.txt`). The table's run timed each
config beside cuBLAS in alternating batches (`bench/results/gemm_kernel_h200.json`; the previous session's table,
with the one-partial and global-scale configs, is `gemm_kernel_h200_session4.json`).

**Subnormals.** cupy's `RawModule(code=...)` appends `-ftz=true` to NVRTC's options, so until this session the
promotion compiled to `FFMA.FTZ` (ncu's SASS on the H200) and flushed a float32-subnormal `sa * sb` or sum to zero,
where refmodel keeps it. `gpu.kernels.runtime` now calls NVRTC itself with `-ftz=false`
(`bench/results/session_h200/ftz_probe.json`: cupy's path flushes 3,054 to 4,096 of 4,096 subnormal results per
operation, wgref's none), and the `tiny` input family (scales near 2^-66, so `sa * sb` is subnormal) is in the gpu
tests, the bit check and the fixtures (`gemm_128x144x256_tiny_p1_f32`).

**The persistent schedule** (`GemmConfig()`, `gpu/kernels/gemm_fp8_source.py`; the table above at
the top of this section is the `simple` schedule, still selectable): one CTA per SM walks its tiles in
grouped raster order; the producer warpgroup gives registers away (`setmaxnreg.dec 24`, consumers
`setmaxnreg.inc 240`); the load ring runs on across tiles so the next tile's loads start during the
epilogue; in precise mode each K block's partial alternates between two register sets and block
kb+1 is issued before block kb is promoted (`wait_group 1`), and in fast mode the tile is 128 x 256
(one m64n256k32 chain per consumer). ptxas reports 168 registers and no spills or wgmma
serialisation warnings for every config (`tests/test_gemm_kernel.py`).

**What limits precise mode** (Nsight Compute on the H200, `bench/profile_gemm_kernel.py`; files in
`bench/results/gemm_kernel_h200_session4/`, profiled before the `-ftz=false` change, which alters only the
promotion FMAs' flush bit): with the scales in shared memory the tensor pipe is active 83.1 % of the time at
4096³ (`sm__pipe_tensor_cycles_active`, `ncu_4096_smem_ftz_build.txt`), against 53.2 % for the one-partial
128 x 192 tile (`ncu_4096_bn192_ftz_build.txt`). At 8192³ the default's largest stall sites are the first wgmma
of each K block (12 % of the samples, under no stall reason the CSV export names) and the full-barrier waits of
the ring (`@!P0 BRA` after `SYNCS.PHASECHK`, 9 %: waiting for loads); in fast mode the 128 x 128 tile reaches only 0.88x
of cuBLAS at 8192³ (`bench/results/gemm_kernel_h200_previous.json`) where 128 x 256 reaches 1.04x, so 128 x 128
is a ceiling of its own for precise mode too. The ring depth matters down to 4 stages: 5 and 4 give the same
8192³ rate, 3 loses 16 % (`stage_sweep_ftz_build.txt`).

**Wider precise tiles.** Promotion cannot use 128 x 256 (an m64n256 partial and its f32 sums are 256
registers, over the 240 a consumer has), so `GemmConfig(bn=192)` takes 128 x 192 with **one** partial set
(`partials=1`, `-q1` in the names): each K block is waited for (`wait_group 0`) and promoted while the other
consumer warpgroup's wgmmas run, as DeepGEMM does; a tile then spans two 128-column B-scale blocks (the boundary
is at column 128 of even tile columns, 64 of odd ones), and the epilogue's three 64-column chunks alternate
staging buffers by a running count. They are bit-exact on the H200 but slower than the default (table above).
The SASS profile of the global-scale variant at 8192³ (`ncu_8192_bn192_xtile_stalls_ftz_build.txt` and its
`…_sass_…csv.gz`) put 39 % of the stall samples on the `wait_group 0` and 18 % on an `R2UR` that moved the
just-loaded B scale into a uniform register ahead of the block's wgmmas, stalling their issue on the load;
the global scales of one-partial configs are now loaded one K block ahead (`persistent-p1-bn192-s4-q1-sg`: 830 → 969 TFLOP/s at 4096³,
826 → 925 at 8192³, `ftz_build_first_run.json` against `gemm_kernel_h200_session4.json`).

**Where the rest of the gap is** (`bench/gemm_k_sweep.py`, docs/performance.md): timed over K at M = N = 4096, the
default precise config is ahead of cuBLAS at K ≤ 2048 and behind from K = 4096 on, so the loss is in the steady
K loop, not in a tile's fill, drain and epilogue; the same 128 x 128 tile without promotion keeps level with
cuBLAS's fast kernel there. cuBLAS's own precise kernel is also a 128 x 128 tile
(`nvjet_sm90_qqtst_128x128_128x6_2x1_v_bz_coopA`, 2 x 1 clusters, recorded by the bench) and gives up about 4 %
to its fast kernel at K = 16384; this kernel's promotion costs it about 11 % on the same tile. The H200 of these
runs drew 593-687 W at 1200-1650 MHz right after the timings, so the clock, and with it every ratio, moves with
power; the promotion's 64 FMAs per thread per K block are power too. The small kernel that lays the scales out
for the producer's bulk copies costs 0-4 % (*kernel alone* in the table).

**Two recipes, each against its own cuBLAS call** (session 6, `bench/results/gemm_kernel_h200_session6/`).
The precise default computes DeepSeek's blockwise recipe; with CUDA ≥ 12.9 `torch._scaled_mm` computes it too
(1x128 scales of A, 128x128 of B), and on the H200 the two gave the same outputs (the bench's `--check`, largest
difference {blk_diff:.1g}) with this kernel {blk_lo:.2f}x-{blk_hi:.2f}x as fast in the table's run and its rerun. The per-tensor cuBLAS call it had been measured against does
less: it adds each K block's partial and scales once at the end. `GemmConfig(scales="tensor")` is that recipe
(`acc += partial`, no scale loads, no scale area in shared memory: 6 ring slots), bit-identical to
`torch._scaled_mm(use_fast_accum=False)` (`test_tensor_recipe_equals_torch_scaled_mm`, and `refmodel.scaled_mm`
through `kernel_reference(tensor_scales=True)`; fixtures `*_st`). Its tile width follows the shape as cuBLAS's
does: 128 x 128 at 4096³ ({t128:.2f}x) and 128 x 144 at 8192³ (`bn=144`, {t144:.2f}x; m64n144 partials, 72 + 72 + 72
registers, the 16-column tail of each tile stored directly), chosen by `tensor_config(M, N)`.

**DeepGEMM's FFMA rewrite** (`ffma_yield=N`, `gpu.kernels.sass`): the cubin's promotion FFMAs lose their
operand-reuse flag and the scheduling bit that keeps the warp issuing, in the leading N/16 of each run of
at least 8, so the scheduler may switch to the other consumer warpgroup between them (only scheduling bits
change; `tests/test_sass.py` checks the rewrite against `cuobjdump`). It lifts the one-partial 128 x 192 tile,
whose warpgroups take turns at the tensor core, by {y_up}, and changes the two-partial default by {y_down}
(`call1_yield.json`, TFLOP/s at 4096³ and 8192³): neither beats the default, so it stays off.

**One partial set at bn = 128** (`partials=1`, scales in shared memory, `bench/results/gemm_kernel_h200_session5/call5_*`):
0.78x-0.81x against the default's 0.90x-0.93x in the same run, and 829 against 727 cycles per K block in the K
sweep; the two-set default stays.

**Promotion FMAs spread between the next block's wgmmas** (`interleave=1`, tried and removed): each K block
waited for with `wait_group 0`, its slot released, and its 64 FMAs issued a quarter after each of the next
block's four wgmmas, so they do not come in one burst. Bit-exact on the H200 and slower: 0.88x-0.89x against
the default's 0.92x-0.93x at 4096³, and 0.87x against 0.89x-0.90x at 8192³, in the same run
(`bench/results/gemm_kernel_h200_session5/call6_*`).

**Scales copied by the producer instead** (`scales="gather"`, tried and removed): the producer's first warp
copied each K block's 128 A-row scales straight from `scale_a` (M, K/128), 32 rows per instruction, so no
layout kernel runs first. It was bit-exact and 0.57x-0.71x with blocking loads and with `cp.async` copies
counted on the full barrier (`cp.async.mbarrier.arrive.noinc`), at both sizes
(`bench/results/gemm_kernel_h200_session5/`): one scattered 4-byte copy per row, every K block, costs far more
than the one 512-byte bulk copy of the transposed layout.

**2-CTA clusters** (`cluster=2`, experimental): B is multicast into both CTAs of a pair, which halves the B
traffic from L2. An earlier H200 run put it at 0.29x-0.32x precise and 0.65x-0.71x fast
(`bench/results/gemm_kernel_h200_persistent/cluster2.txt`, bit-exact); its SASS had `MEMBAR.ALL.CTA` +
`MEMBAR.ALL.GPU` before each remote slot release (`mbarrier.arrive.release.cluster`), twice per K block. The
arrive now uses the default `.release.cta` semantics, as CUTLASS's `ClusterBarrier::arrive` does, and the launcher
sizes the grid from the driver's `cuOccupancyMaxActiveClusters` (a persistent kernel must not launch more pairs
than fit at once). On the H200 it is now bit-exact and level with the default in fast mode, and below it in
precise mode (the table: 0.89x against 0.93x at 4096³, 0.88x against 0.90x at 8192³, twice each in one session):
halving B's L2 traffic does not help, so L2 is not what limits the 128 x 128 tile.

"""


def pipeline_page() -> str:
    cfg = pl.mainloop_config()
    ev = pl.gemm_mainloop_trace()
    rep = pl.check(ev)
    small = pl.check(pl.gemm_mainloop_trace(stages=4, k_iters=8, wait_depth=1, consumers=1))
    example = pl.dump_trace(ev[:3] + [e for e in ev if e.role == "consumer0"][:9])
    return f"""# The wgmma pipeline: commit groups, fences, proxies, and a hazard checker

*Generated by `tools/gen_docs.py` (`tools/pipeline_doc.py`) from `refmodel.machine.pipeline`: the
tables, timelines and checker outputs below are computed by the code, not typed.*

A Hopper GEMM keeps three asynchronous machines busy at once: the TMA copy engine filling a
ring of shared-memory slots, the tensor cores running `wgmma.mma_async`, and the threads that
issue both.  Nothing waits unless the program says so; this chapter explains the waits (seed
§1-3), defines a trace format for what a kernel does, and describes the model that checks a
trace for the ordering mistakes that make such kernels silently wrong.

## 1. Commit groups: `wgmma.commit_group` / `wgmma.wait_group N` (seed §1)

`wgmma.mma_async` is asynchronous: it puts work "in flight" and returns at once.  Tracking every
instruction would need a heavy scoreboard or an over-conservative "wait for everything", so the
hardware tracks **groups**:

* `wgmma.commit_group.sync.aligned` closes every not-yet-committed `mma_async` of the warpgroup
  into one group (with none, an empty group).  Typically one group = the instructions of one
  k-block (or one output tile).
* `wgmma.wait_group.sync.aligned N` stalls until at most `N` committed groups are still running:
  all but the newest `N` retire, oldest first.  `wait_group 0` waits for everything — required
  before the accumulator registers are read (the epilogue).  `wait_group N > 0` leaves `N` groups
  running in the background while the warpgroup prepares the next one.

Uncommitted `mma_async` are invisible to `wait_group`: a wait with uncommitted instructions does
not wait for them.  While a group is in flight its accumulator registers (and, for RS forms, the
A-fragment registers) belong to the tensor core: reading or writing them is undefined.

## 2. The pipelined timeline (seed §2)

Not "commit, then wait", but a pipeline: issue a k-block's `mma_async`, `commit_group`, start
preparing the next (TMA, addresses), `wait_group N` keeping N groups running, ...; drain with
`wait_group 0`; only then read D.  The timeline of the canonical mainloop below (generated by
`gemm_mainloop_trace(stages=4, k_iters=8, wait_depth=1, consumers=1)`) shows it: each group is
issued (`m`), committed (`C`), in flight (`=`), and retired (`X`) by the `wait_group 1` of the
next k-block; after every wait exactly one group is in flight, at most two just before it.

```text
{draw_ascii(small).rstrip()}
```

The last block is the producer's TMA lane: per ring slot (the mbarrier its loads complete on)
`e` the `arrive_expect_tx`, `L` each `tma_load`, `:` the slot holding that data until the producer
refills it.  `wgref pipeline draw TRACE --format svg -o timeline.svg` draws the same as SVG, with a
colour legend, and every event a hazard names marked `!` with the hazard's explanation as its
tooltip.  With two consumer
warpgroups (the default plan, {cfg.describe()}) each consumer gets its own block:

```text
{draw_ascii(rep).rstrip()}
```

## 3. `wgmma.fence`'s two roles, and `fence.proxy.async` (seed §3)

`wgmma.fence.sync.aligned` is the warpgroup's fence for the wgmma pipeline, with two closely
related roles:

1. **The start of an issue window.** It marks where the warpgroup begins issuing a batch of
   `mma_async`; PTX requires one before the first `mma_async` of a warpgroup.
2. **Register ordering.** It orders the warpgroup's earlier register accesses before the
   following `mma_async` that use those registers as accumulators or as the A fragment (RS):
   zeroing or rescaling the accumulators, writing a new A fragment, reading D after a promotion.
   Successive `mma_async` of the same shape chaining the same accumulator need no fence.

It is **not** a cross-proxy fence.  Shared memory has two views: the *generic proxy* (ordinary
`st.shared`, `stmatrix`, `ld.shared`) and the *async proxy* (the TMA engine and the tensor cores
reading operands through descriptors).  Writes through one proxy are not ordered with accesses
through the other by barriers alone: data written by `stmatrix` that a TMA store (or a wgmma) then
reads needs `fence.proxy.async.shared::cta` in each writing thread, then a barrier so the thread
that issues the TMA store sees every writer's fence.  The reverse direction (TMA load → wgmma or
`ld.shared`) is published by the mbarrier the load completes on: the reader waits on the phase.
That is why the epilogue is `wait_group 0` → cvt → `stmatrix` → `fence.proxy.async` → `bar.sync`
→ TMA store.

## 4. The model and its hazards

`refmodel.machine.pipeline.check(trace)` replays a trace through the state the hardware keeps:

* per role (warpgroup): the uncommitted `mma_async`, the FIFO of committed groups in flight
  (`wait_group N` retires all but the newest N), and the registers accessed since its last
  `wgmma.fence`;
* per CTA: each mbarrier's phase, pending arrivals and transaction bytes (a phase completes when
  all `count` arrivals are in and the transaction count is back to 0; `mbarrier.wait` with parity
  `p` returns once the phase with parity `p` has completed, so parity 1 passes at once on a fresh
  barrier), the shared ranges written by the generic proxy (fenced? published by a barrier after
  the fence?), the ranges written by TMA loads (which roles have observed the completing phase),
  and the ranges read by every wgmma not yet retired.

A wgmma has no duration in the model: it is in flight from its commit until a `wait_group` of its
role retires it — the only point a program may rely on.  It returns the in-flight groups after
every event (`PipelineReport.snapshots`, what the timelines draw) and the hazards:

{_hazard_table()}

Each hazard carries the indices of the events involved and one sentence naming them.  The rules
are data (`refmodel.machine.pipeline.HAZARDS`: severity, summary, explanation template).

## 5. Trace format

A trace is UTF-8 text, one JSON object per line (blank lines are skipped), the CTA's events of
every role interleaved in one program order — an order the synchronisation allows (a role's
`mbarrier.wait` placed after the arrivals it waits for).  Event indices are 0-based over the
non-blank lines; messages also give the trace line (1-based) and the `line` tag.  Every event has
`op` and may carry `t` (the role issuing it: a warpgroup, warp or thread name; default `main`;
wgmma and register state is per role, shared memory and mbarriers per CTA) and `line` (a free
source tag such as `gemm.cu:88`).  Unknown fields are errors.

{_ops_table()}

* Registers: a list of names (`["d0", "d1"]`), ranges in a list (`["d[0:64]", "a0"]`) or one range
  string `"d[0:64]"` (`d0`..`d63`, end exclusive).
* `smem`: a list of half-open byte ranges `[[start, end], ...]` of shared addresses.
* `mma_async` reads: `smem` and/or the bytes derived from `desc_b` (and `desc_a` for SS) — 64-bit
  descriptors as ints or `"0x..."` strings — with `instr` (the full wgmma opcode) and optional
  `trans_a`/`trans_b` (0/1: MN-major), through `refmodel.layouts.descriptor.operand_addresses`, so
  the swizzle and the base offset are the hardware's.  RS forms list `a_regs` instead of `desc_a`.
* `tma_load.bytes`, when given, must equal the size of `smem` (the bytes a TMA completes are the
  bytes it writes); they count toward the barrier's current phase at the load's position.
* `bar.sync` is a CTA-level barrier at its position (its `t` may list the roles, e.g.
  `"consumer0,consumer1"`); it publishes generic writes already fenced by `fence.proxy.async`.

A bad line stops the check with one sentence naming the line and the rule (`wgref pipeline check`
exits 2), for example `trace line 2: mbarrier.wait needs field 'phase'`.

The first events of the canonical mainloop trace:

```json
{example.rstrip()}
```

## 6. The canonical GEMM mainloop

`gemm_mainloop_trace(stages=4, k_iters=8, wait_depth=1, consumers=2, promote_every=None,
instr="{pl.DEFAULT_INSTR}")` emits the trace of a warp-specialised kernel (what a CUTLASS
`KernelTmaWarpSpecialized` mainloop does), scheduled so that the producer runs as far ahead as the
ring allows:

* **init**: `mbarrier.init` of `full{{s}}` (count 1) and `empty{{s}}` (count = consumers) per stage, `bar.sync`.
* **producer warp**, per k-block `k` (slot `s = k % stages`, round `r = k / stages`): wait `empty{{s}}`
  with parity `(r & 1) ^ 1`, `arrive_expect_tx(full{{s}}, stage_bytes)`, TMA-load the A and B tiles.
* **consumer warpgroup c**: wait `full{{s}}` with parity `r & 1`; `wgmma.fence`; the k-block's
  `mma_async` (descriptors of its 64 A rows and of B, 128B swizzle, K steps of 32 bytes inside
  the swizzle row: `make_descriptor(..., k_step=j)`); `commit_group`; once more than `wait_depth`
  groups are in flight `wait_group(wait_depth)`, then arrive on `empty` of each slot whose
  wgmmas just retired.  `promote_every=P` (FP8 two-level accumulation) adds, every P k-blocks,
  `wait_group 0`, a read of the wgmma accumulators and a write of the float32 accumulators `f`.
* **epilogue**: `wait_group 0`, release the last slots, read the accumulators (cvt), `stmatrix` the
  warpgroup's 64 rows of each output panel, `fence.proxy.async`, `bar.sync` of the consumers,
  consumer 0 TMA-stores every panel.

The parameters are a real kernel's (`MainloopConfig`: stage count, tile shapes, bytes per stage,
the ring's shared-memory plan) so that a CUDA kernel's own trace can be diffed against this one.
The default plan:

{_slot_table(cfg)}

Every plan in the tests checks clean, with exactly `wait_depth` groups in flight after each
mainloop wait and never more than `wait_depth + 1`.  Plans that cannot work are refused:
`wait_depth >= stages` deadlocks the ring, more than {pl.SMEM_LIMIT} bytes of shared memory does
not fit a Hopper block.

## 7. Three broken variants and what the checker says

`wgref pipeline gen --broken NAME -o t.jsonl && wgref pipeline check t.jsonl` (exit 1):

{_broken_section()}
{_kernel_section()}## Command line

```text
wgref pipeline check TRACE [--strict] [--json]      # hazards; exit 0 none, 1 hazards, 2 bad trace
wgref pipeline draw TRACE --format ascii|svg [-o F]  # the commit-group timeline
wgref pipeline gen [--stages 4 --k-iters 8 --wait-depth 1 --consumers 2 --promote-every P
                    --instr OPCODE --broken NAME] [-o F]   # the canonical mainloop trace
```

Warnings (`pointless_wait`) are printed but exit 0 unless `--strict`.

## Limits

TMA stores are modelled as one bulk group each: a store reads its shared bytes until a
`bulk_wait_group N` (`cp.async.bulk.wait_group.read N`) of its role leaves at most N newer stores, and
overwriting those bytes earlier (`stmatrix`, `st_shared`, a `tma_load` refill) is
`smem_overwrite_store_in_flight` -- the race of an epilogue that reuses a staging buffer too soon.

Not modelled: a store's completion in global memory (`cp.async.bulk.wait_group` without `.read` is
treated like `.read`), clusters and multicast, `fence.mbarrier_init`, named-barrier ids (a
`bar.sync` is CTA-wide), real durations (a wgmma is in flight until a wait says otherwise).

Timeline legend: {LEGEND}.
"""
