"""docs/performance.md: the speed numbers, quoted from bench/results (never typed in)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(rel: str) -> dict:
    return json.loads((ROOT / rel).read_text())


def like_for_like(r: dict) -> float:
    """A row's ratio against the cuBLAS call with the same recipe: per-tensor scales (``scales=tensor``)
    and fast mode against the per-tensor baseline, blockwise scales against the blockwise one."""
    return r["ratio_blockwise"] if r.get("recipe") == "blockwise" else r["ratio"]


def _cpu_gemm_row(path: Path) -> str:
    """One stored ``bench/bench_gemm.py`` run as a table row (its file, numba's target, promotion, rates)."""
    r = json.loads(path.read_text())
    tgt = r["machine"].get("numba_target") or {}
    target = f"{tgt.get('cpu', '?')} ({'AVX-512' if tgt.get('avx512') else 'AVX2, no AVX-512'})"
    blas = {b["core"]: b["ratio_fast_to_blas"] for b in r.get("blas_baselines", [])}
    cell = lambda core: f"{blas[core]:.3f}" if core in blas else "-"
    prom = r.get("ratio_promoted_to_unpromoted")
    cells = [f"`{path.name}`", target, f"every {r['promote_every']}" if r.get("promote_every") else "none",
             r.get("scales", "none"), f"{r['fast']['g_products_per_s']:.2f}", cell("Haswell"), cell("SkylakeX"),
             "-" if prom is None else f"{prom:.2f}"]
    return "| " + " | ".join(cells) + " |"


def verify_section() -> str:
    """The main job's time (``bench/bench_verify.py``): every stored run under bench/results/verify."""
    import re

    runs = sorted((ROOT / "bench/results/verify").glob("*.json"), key=lambda p: json.loads(p.read_text())["date"])
    rows = []
    for path in runs:
        r = json.loads(path.read_text())
        top = ", ".join(f"{f} {t:.0f}" for f, t in list(r["replay_seconds"].items())[:5])
        machine = f"{r.get('cpu_model', r['host'])}, {r['cpus']} cores" + (
            f", numba for {r['numba_cpu']}" if r.get("numba_cpu", "host") != "host" else "")
        rows.append(f"| `{path.name}` | {machine} | {r.get('commit', '-')} | {r.get('cache') or '?'} | {r['jobs']} | "
                    f"**{r['wall_seconds']:.1f}** | "
                    f"{' / '.join(f'{t:.0f}' for t in r['worker_busy_seconds'])} | {top} | {r['outputs']:,} | "
                    f"{r['mismatches_or_errors']} | {r['load_average_1_5_15'][0]:.2f}, {r['date'][:16]} |")
    base = (ROOT / "bench/results/verify/bench_verify_2core.txt").read_text()
    before = re.search(r"^TOTAL\s+([\d.]+)", base, re.M).group(1)
    host = json.loads(runs[0].read_text()) if runs else {}
    return f"""## The main job (`bench/bench_verify.py`, on 2 cores)

`wgref verify` replays every fixture: every stored hardware output, the six 2^32-input cvt sweeps, the
verification calls of every inferred schedule re-drawn from their seeds, the SFU sweeps on their chunks. It runs
the fixtures on worker processes (`--jobs`, default the CPUs up to 4; `refmodel.verify.workers`) and reports them
in the serial order, the same report as one process. The machines: this project's 2-core VM ({host.get('cpus', '?')} cores,
{host.get('vector_extensions', '?')}; rows named `verify_2core_*`), and the device host's Intel Xeon
held to two of its physical cores by `taskset` (`verify_device_xeon_*`; AVX-512 too). *cold* runs follow deleting
refmodel's numba cache (what a fresh clone or venv sees: every kernel compiles), *warm* ones reuse it; `avx2`
rows are `bench_verify.py --avx2` (numba compiles for Haswell: no AVX-512 instruction, as on a host without it).
Before this work the VM took {before} s warm in one process (`bench_verify_2core.txt`). The VM is shared: the same
commit's runs moved by up to ±15 % from hour to hour, and by 12 % between two runs minutes apart; rows named
`verify_2core_ab_<commit>_*` are runs of two commits alternated within minutes, to compare them under the same
conditions. The device hosts differ too: the `_3` Xeon rows ran on another host than the `_2` ones, slower per core
(its SFU and cvt replays, code unchanged between the two, took 1.5 and 1.2 times as long).

| run | machine | commit | cache | jobs | wall s | worker busy s | slowest features (replay s) | outputs | mismatches | load, date |
|---|---|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}
"""


def _kernel_row(r: dict, rerun) -> str:
    """One row of the FP8 GEMM kernel table (fields a run recorded; '-' where it did not)."""
    blk = r.get("recipe") == "blockwise"
    cells = [f"{r['n']}^3", r["mode"], r.get("recipe", "-"), f"`{r.get('config', 'simple')}`",
             f"{r['ours_tflops']:.0f}", f"{r['cublas_tflops']:.0f}", f"{r['ratio']:.2f}",
             f"{r['cublas_blockwise_tflops']:.0f}" if blk else "-", f"{r['ratio_blockwise']:.2f}" if blk else "-",
             f"**{like_for_like(r):.2f}**", "-" if rerun is None else f"{rerun:.2f}",
             f"{r['ours_kernel_only_tflops']:.0f}" if "ours_kernel_only_tflops" in r else "-",
             f"{r['sm_clock_mhz']:.0f} MHz, {r['power_w']:.0f} W" if "sm_clock_mhz" in r else "-"]
    return "| " + " | ".join(cells) + " |"


def performance_page() -> str:
    g = _load("bench/results/golden_gpu/golden_gpu_8192.json")
    c = _load("bench/results/cpu_gemm/e4m3_e4m3_f32_m64n256k4096.json")
    k = _load("bench/results/gemm_kernel_h200.json")
    gpu_rows = "\n".join(
        f"| {m} | {g['gpu'][m]['seconds']:.3f} s | {g['gpu'][m]['products_per_s']:.3g} | "
        f"{g['cpu'][m]['products_per_s']:.3g} ({g['cpu'][m]['size']}^3) | "
        f"{g['sample'][m]['mismatches']} of {g['sample'][m]['checked']:,} |" for m in ("promote_4", "promote_none"))
    tc = "\n".join(f"| `torch._scaled_mm` {m} | {v['seconds'] * 1e3:.3f} ms | {v['products_per_s']:.3g} | "
                   f"{v['outputs_differing_from_golden']:,} of {g['size'] ** 2:,} |" for m, v in g["tensor_core"].items())
    best = {}
    for r in k:       # the best config of each mode, recipe and size, by its like-for-like ratio
        key = (r["mode"], r["recipe"], r["n"])
        if key not in best or like_for_like(r) > like_for_like(best[key]):
            best[key] = r
    order = sorted(best, key=lambda x: (x[0] != "precise", x[1], x[2]))
    label = lambda m, rc: f"{m} ({rc} scales)" if m == "precise" else m
    best_txt = "; ".join(f"{label(m, rc)} {n}^3: {like_for_like(best[(m, rc, n)]):.2f}x (`{best[(m, rc, n)]['config']}`)"
                         for m, rc, n in order)
    groups = sorted({(m, rc) for m, rc, _ in best}, key=lambda x: (x[0] != "precise", x[1]))
    ahead = ", ".join(f"{m}" + (f" with {rc} scales" if m == "precise" else "") for m, rc in groups
                      if all(like_for_like(r) >= 1.0 for (mm, rr, _), r in best.items() if (mm, rr) == (m, rc))) or "none"
    kb = _load("bench/results/gemm_kernel_h200_session6/call6_gemm_kernel_b.json")     # the same configs, rerun
    ratio_b = {(r["n"], r["config"]): like_for_like(r) for r in kb}
    kern = "\n".join(_kernel_row(r, ratio_b.get((r["n"], r["config"]))) for r in k)
    from gpu.kernels.gemm_fp8 import choose_bn, tile_rounds

    rounds_txt = "; ".join(f"{n}²: {tile_rounds(n, n, 128)} of 128 against {tile_rounds(n, n, 144)} of 144, "
                           f"bn {choose_bn(n, n)}" for n in sorted({r['n'] for r in k}))
    diffs = lambda rc: max(r["max_rel_diff_vs_cublas"] for r in k + kb if r.get("recipe") == rc)
    diff_blk, diff_ten = f"{diffs('blockwise'):.1g}", f"{diffs('tensor'):.1g}"
    import re

    util_rows = []
    for tag, cfg, n in (("ffma_yield_0_4096", "persistent-p1-bn128-s5-bf16 (blockwise)", 4096),
                        ("scales_tensor_4096", "persistent-p1-bn128-s6-st-bf16 (per-tensor)", 4096),
                        ("ffma_yield_0_8192", "persistent-p1-bn128-s5-bf16 (blockwise)", 8192),
                        ("scales_tensor_bn_144_8192", "persistent-p1-bn144-s5-st-bf16 (per-tensor)", 8192),
                        ("promote_0_8192", "persistent-p0-bn256-s4-bf16 (fast)", 8192)):
        t = (ROOT / f"bench/results/gemm_kernel_h200_session6/call7_ncu_{tag}.txt").read_text()
        pct = re.search(r"sm__pipe_tensor_cycles_active\.avg\.pct_of_peak_sustained_active\s+%\s+([\d.]+)", t).group(1)
        dur = re.search(r"Duration\s+(\w+)\s+([\d.,]+)", t)
        clk = re.search(r"SM Frequency\s+Ghz\s+([\d.]+)", t).group(1)
        util_rows.append(f"| {n}^3 | `{cfg}` | {pct} % | {dur.group(2)} {dur.group(1)} | {clk} GHz |")
    util = "\n".join(util_rows)
    cross = [r for r in k if r.get("recipe") == "blockwise"]
    cross_txt = "; ".join(f"{r['n']}^3 {r['ratio']:.2f}x" for r in cross)
    yl = _load("bench/results/gemm_kernel_h200_session6/call1_yield.json")
    yrow = {(r["n"], r["config"]): r for r in yl}
    ytxt = "; ".join(f"{n}^3: default {yrow[(n, 'persistent-p1-bn128-s5-bf16')]['ratio']:.2f}x, "
                     f"`ffma_yield=9` {yrow[(n, 'persistent-p1-bn128-s5-y9-bf16')]['ratio']:.2f}x, "
                     f"`bn=192` {yrow[(n, 'persistent-p1-bn192-s4-q1-bf16')]['ratio']:.2f}x -> "
                     f"`bn=192,ffma_yield=9` {yrow[(n, 'persistent-p1-bn192-s4-q1-y9-bf16')]['ratio']:.2f}x"
                     for n in (4096, 8192))
    sw = _load("bench/results/gemm_kernel_h200_session5/call3_k_sweep.json")
    sweep_rows = "\n".join(f"| `{r['config']}` | {r['k']} | {r['tflops']:.0f} | {r['cublas_tflops']:.0f} | "
                           f"{r['tflops'] / r['cublas_tflops']:.2f} | {r['sm_clock_mhz']:.0f} |" for r in sw if "fit" not in r)
    fits = "; ".join(f"`{r['config']}` {r['cycles_per_128cube_kblock']:.0f} cycles per K block in the steady state "
                     f"and {r['fixed_cycles_per_tile']:.0f} fixed per tile" for r in sw if "fit" in r)
    fz = _load("bench/results/fuzz_gpu_h200/dense_rs_chains_session4.json")
    pr = _load("bench/results/fuzz_gpu_h200/probe_slow_batches_session5.json")
    probe_rows = "\n".join(
        f"| {r['instr'].split('aligned.')[1]} {'RS' if r['rs'] else 'SS'} chain {r['chain']} | {r['tiles']:,} | "
        f"{r['batches'][0]['model']:.3f} s / {r['batches'][1]['model'] * 1e3:.1f} ms | "
        f"{r['batches'][0]['compare']:.2f} s / {r['batches'][1]['compare'] * 1e3:.1f} ms | "
        f"{r['batches'][0]['compare_differing_rows'] * 1e3:.1f} ms / {r['batches'][1]['compare_differing_rows'] * 1e3:.1f} ms | "
        f"{r['batches'][0]['hardware'] * 1e3:.1f} ms |" for r in pr)
    mx = _load("bench/results/fuzz_gpu_h200/mixed_differing_rows_session5.json")
    fz0 = _load("bench/results/fuzz_gpu_h200/dense_rs_chains_first_port.json")
    first_rows = "\n".join(
        f"| {job} | {fz0['jobs'][job]['end_to_end_outputs_per_s'] / 1e9:.2f} | {v['end_to_end_outputs_per_s'] / 1e9:.2f} | "
        f"{v['end_to_end_outputs_per_s'] / fz0['jobs'][job]['end_to_end_outputs_per_s']:.1f}x |"
        for job, v in fz["jobs"].items() if job in fz0["jobs"] and "stages_outputs_per_s" in v)
    fuzz_rows = "\n".join(
        f"| {job} | {v['stages_outputs_per_s']['generate'] / 1e9:.1f} | {v['stages_outputs_per_s']['hardware'] / 1e9:.1f} | "
        f"{v['stages_outputs_per_s']['model'] / 1e9:.2f} | {v['end_to_end_outputs_per_s'] / 1e9:.2f} | "
        f"{v['end_to_end_instr_outputs_per_s'] / 1e9:.2f} | {v['mismatches']} / {v['port_disagreements']} |"
        for job, v in fz["jobs"].items() if "stages_outputs_per_s" in v)
    mixed0 = fz["jobs"]["wgmma (rs, chain drawn)"]
    mixed = mx["jobs"]["wgmma (rs, chain drawn)"]
    chain_rows = "\n".join(
        f"| {L} | {o:,} | {io:,} | {sec:.3f} | {o / sec / 1e9:.2f} | {io / sec / 1e9:.2f} |"
        for L, (o, io, sec) in sorted(mixed["chains"].items(), key=lambda kv: int(kv[0])))
    sg = _load("bench/results/sparse_gpu_h200/gather_model.json")
    sc = _load("bench/results/sparse_gpu_h200/chain_model.json")
    sp_rows = "\n".join(
        f"| {f} | {v['outputs_per_second']['hardware'] / 1e9:.1f} | {v['outputs_per_second']['model'] / 1e9:.2f} | "
        f"{v['outputs_per_second']['model_chain'] / 1e9:.2f} | {v['gpu_engine']['outputs_per_second'] / 1e9:.2f} | "
        f"{sc['forms'][f]['gpu_engine']['outputs_per_second'] / 1e9:.2f} | "
        f"{v['gpu_engine']['outputs'] + sc['forms'][f]['gpu_engine']['outputs']:,} | "
        f"{v['gpu_engine']['mismatches'] + sc['forms'][f]['gpu_engine']['mismatches']} / "
        f"{v['gpu_engine']['port_disagreements'] + sc['forms'][f]['gpu_engine']['port_disagreements']} / "
        f"{v['chain_vs_gather_differences'] + sc['forms'][f]['chain_vs_gather_differences']} | "
        f"{v['cpu_engine']['outputs_per_second'] / 1e6:.2f} |"
        for f, v in sg["forms"].items())
    pt = _load("bench/results/fuzz_gpu_h200/port_chain_kernel_session3.json")
    port_rows = "\n".join(
        f"| {r['instr'].split('aligned.')[1]} | {r['old_G_outputs_per_s']:.1f} | {r['new_G_outputs_per_s']:.1f} | "
        f"{r['new_chain4_G_step_outputs_per_s']:.1f} | {r['hw_G_outputs_per_s']:.0f} | {r['new_products_per_s']:.3g} | "
        f"{r['new_vs_old_mismatches']} / {r['new_vs_hw_mismatches']} |" for r in pt["results"])
    ly = _load("bench/results/fuzz_gpu_h200/layout_gpu.json")               # model stage: the first port
    lc = _load("bench/results/fuzz_gpu_h200/layout_gpu_chain.json")         # model stage: the tiled chain kernel
    lcv = {tuple(v["variant"]): v for v in lc["variants"]}
    lay_rows = "\n".join(
        f"| {v['variant'][0].split('aligned.')[1]} | {'RS' if v['variant'][1] else 'SS'} | {v['variant'][2]}{v['variant'][3]} | "
        f"{v['stage_g_outputs_per_s']['model']:.1f} / {w['stage_g_outputs_per_s']['model']:.1f} | "
        f"{v['end_to_end_g_outputs_per_s']:.2f} / {w['end_to_end_g_outputs_per_s']:.2f} | "
        f"{v['campaign']['outputs'] + w['campaign']['outputs']:,} | "
        f"{v['campaign']['undefined'] + w['campaign']['undefined']:,} | "
        f"{v['campaign']['mismatches'] + w['campaign']['mismatches']} / "
        f"{v['campaign']['port_disagreements'] + w['campaign']['port_disagreements']} |"
        for v, w in ((v, lcv[tuple(v["variant"])]) for v in ly["variants"]))
    m = c["machine"]
    cpu_runs = "\n".join(_cpu_gemm_row(p) for p in sorted((ROOT / "bench/results/cpu_gemm").glob("*.json")))
    return f"""# Performance

*Generated by `tools/gen_docs.py` from `bench/results/` (rerun the benches named below to refresh them).*

## Golden GEMMs on the GPU (`bench/bench_golden_gpu.py`, {g['device']['device']})

`gpu.kernels.golden_gemm.golden_gemm_device` (and `wgref golden … --device`) computes refmodel's bits of a
whole GEMM on the CUDA cores: {g['size']}^3 e4m3, promotion every 4 instructions and none; the CPU model's
rate on the same device (16 cores, a smaller cube) and sampled outputs checked against it in the same run.

| promotion | GPU time | GPU products/s | CPU model products/s | sample mismatches |
|---|---|---|---|---|
{gpu_rows}

The tensor cores' own time for the same call, and how many of its outputs the golden model misses:

| call | time | products/s | outputs differing from the golden model |
|---|---|---|---|
{tc}

## The CPU model (`bench/bench_gemm.py`, this project's 2-core machine)

`refmodel.gemm` e4m3 m64n256, K = {c['K']}, {c['products']:,} products per call, warm, best of {c['repeat']},
measured with float64 BLAS in the same run ({m['cpu']}, {m['cpus']} cores, numba {m['numba']}, load average
{m['load_average_1_5_15'][0]:.2f} at {m['date']}):

| kernel | seconds | G products/s |
|---|---|---|
| fast (`fdpa_fast`, the default) | {c['fast']['seconds']:.4f} | {c['fast']['g_products_per_s']:.2f} |
| int (the previous kernel, `kernel="int"`) | {c['int']['seconds']:.4f} | {c['int']['g_products_per_s']:.2f} |
| numpy float64 matmul (not bit-exact; the baseline) | {c['numpy_float64']['seconds']:.4f} | {c['numpy_float64']['g_products_per_s']:.2f} |

Ratios in that run: fast / int = {c['ratio_fast_to_int']:.2f}, fast / float64 BLAS = {c['ratio_fast_to_numpy']:.3f}.

Every stored run of the bench (`bench/results/cpu_gemm/*.json`), natively (numba targets the host, which has
AVX-512) and as an AVX2-only host (`--avx2`: numba compiles for Haswell with AVX-512 off, OpenBLAS runs its Haswell
kernels; no AVX2-only machine was at hand, so this is the emulation, on the same AMD EPYC). *BLAS* is float64
numpy matmul in the same run with each OpenBLAS kernel set (Haswell: what an AVX2-only host runs; SkylakeX: the
AVX-512 kernels); *promoted / unpromoted* is the promoted chain's rate over the same GEMM without promotion, in
the same run:

| run | numba target | promotion | scales | fast G products/s | fast / BLAS (Haswell) | fast / BLAS (SkylakeX) | promoted / unpromoted |
|---|---|---|---|---|---|---|---|
{cpu_runs}

{verify_section()}
## The FP8 GEMM kernel vs cuBLAS (`bench/bench_gemm_kernel.py`, H200)

Each config timed beside `torch._scaled_mm` in alternating batches of about 40 ms (`_time_pair`: the
H200's clock moves with its power draw, so a cuBLAS time taken once per size was not a fair baseline; cuBLAS's
own rate moved 1190-1366 TFLOP/s between the rows of one earlier run). Precise mode comes in two recipes, and
each is compared with the cuBLAS call that computes the same thing (**like-for-like**):

- **blockwise scales** (the default, DeepSeek's recipe: 1x128 scales of A, 128x128 of B, `acc = fma(RN(sa*sb),
  partial, acc)` every K block) against `torch._scaled_mm` with blockwise scales (cuBLASLt's 1x128 / 128x128
  modes) and the same scale values; the bench's `--check` compared the two outputs: largest difference
  {diff_blk} of the largest output in these rows;
- **per-tensor scales** (`scales=tensor`: `acc += partial` every K block, `D = RN(RN(sa*sb)*acc)`, the recipe of
  `torch._scaled_mm(use_fast_accum=False)` with scalar scales, docs/torch-scaled-mm.md) against that call with
  the same two scales, 0.3 and 0.7 (largest difference {diff_ten} of the largest output), and
  `tests/test_gemm_kernel.py` compares the bits with torch's directly;
- fast mode (no promotion) against `use_fast_accum=True`.

*Per-tensor* is the per-tensor cuBLAS call (for blockwise rows a cross-recipe number: cuBLAS does less work
there); *rerun* is the like-for-like ratio of the same configs in a second run of the same session
(`call6_gemm_kernel_b.json`); *kernel alone* leaves out the small kernel that lays the blockwise scales out for
the producer's bulk copies; the clock and power are nvidia-smi's right after the row's timing.

| shape | mode | recipe | config | ours TFLOP/s | per-tensor cuBLAS TFLOP/s | ratio | blockwise cuBLAS TFLOP/s | ratio | like-for-like | rerun | kernel alone TFLOP/s | SM clock, power |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
{kern}

Config names and the bit checks: docs/pipeline.md §8. The best config of each mode, recipe and size in this run:
{best_txt}; like-for-like at or above 1.0x at every size: {ahead}. The per-tensor recipe's tile width follows
the shape, as cuBLAS's does (its precise kernel is 128 x 128 at 4096³ and 144 x 128 at 8192³, recorded by the
bench): `gpu.kernels.gemm_fp8.tensor_config(M, N)` picks bn 128 or 144 by the busiest CTA's work
(`choose_bn`, the rounds of tiles of the busiest of 132 CTAs: {rounds_txt}).
The blockwise recipe measured against per-tensor cuBLAS, which needs no per-block multiply: {cross_txt}.

Tensor-pipe utilisation under Nsight Compute (`sm__pipe_tensor_cycles_active`, one launch of
`bench/profile_gemm_kernel.py`; `bench/results/gemm_kernel_h200_session6/call7_ncu_*.txt`; ncu holds the clock
lower than the bench's runs):

| shape | config | tensor pipe active | kernel duration | SM clock |
|---|---|---|---|---|
{util}

**Tried this session and not kept as defaults** (`bench/results/gemm_kernel_h200_session6/`, all bit-exact):
DeepGEMM's FFMA rewrite of the cubin (`ffma_yield=N`, `gpu.kernels.sass`: the leading N/16 of each run of
promotion FFMAs lose their register-reuse flag and the control bit that keeps the warp issuing) slows the
two-partial default and speeds the one-partial 128 x 192 tile, ratios against per-tensor cuBLAS in
`call1_yield.json`: {ytxt}. The per-tensor K loop without any scale handling (`bench/probe_gemm_scale_free.py`)
was the first sign that the scale loads and multiplies are what the blockwise recipe pays for.

Where precise mode loses (`bench/gemm_k_sweep.py`, M = N = 4096, the kernel alone, each K timed beside
cuBLAS; `bench/results/gemm_kernel_h200_session5/call3_k_sweep.json`):

| config | K | ours TFLOP/s | cuBLAS TFLOP/s | ratio | SM MHz |
|---|---|---|---|---|---|
{sweep_rows}

A line fitted through time against K splits the cost into a steady state and a fixed part per tile wave
(cycles from the clock nvidia-smi reported, an estimate): {fits}. Precise mode is ahead of cuBLAS at short K,
where the fixed part dominates, and behind from K = 4096 on: the gap is in the K loop, not in the tile's fill,
drain and epilogue, and the 128 x 128 tile's own fast mode runs its K block in fewer cycles than precise mode.

## The GPU fuzz engine (`bench/bench_fuzz.py --engine gpu`, {fz['device']['device']})

Dense jobs with RS operands and chains (`wgref fuzz … --engine gpu --operand rs --chain L`): stages
alone and the campaign end to end ({fz['seconds']} s a job), G outputs/s, with the tiled chain port
(`FormRunner.model`) and the in-kernel-gather hardware stage (`FormRunner.hardware`). *Outputs* are the
final accumulator elements compared; *instruction outputs* count each wgmma of a chain (outputs × L):
a chain's intermediate accumulators are computed by both sides but only the final one is compared.

| job | generate | hardware | model | end to end | end to end, instruction outputs | mismatches / port disagreements |
|---|---|---|---|---|---|---|
{fuzz_rows}

The same jobs with the first port and the staged hardware path (an earlier run, `dense_rs_chains_first_port.json`),
end to end, G outputs/s:

| job | first port | now | ratio |
|---|---|---|---|
{first_rows}

Long chains stay below 1 G *final* outputs/s: each costs L wgmmas on both sides, and the port's rate per
instruction output (about 18-38 G/s) is the bound, so a chain of 128 can reach at most about 0.3 G final
outputs/s with this port.

Every dense form with RS and the chain drawn per batch (1..128): {mixed['end_to_end_outputs_per_s'] / 1e9:.2f} G
outputs/s end to end ({mixed['instr_outputs']:,} instruction outputs, {mixed['mismatches']} mismatches,
{mixed['port_disagreements']} port disagreements; `mixed_differing_rows_session5.json`, compile
{mixed['compile_seconds']:.1f} s apart), against {mixed0['end_to_end_outputs_per_s'] / 1e9:.2f} in the previous session.
What the previous run spent its time on (`bench/probe_slow_batches.py` on the H200, `probe_slow_batches_session5.json`:
each stage of a job's first and second batch timed apart, the runner built beforehand): cupy's own comparison
`cp.nonzero((hw != model).any(axis=1))`, which cupy compiles with NVRTC the first time for each row length (the
third job shares the first's dtypes and still paid it), and the first port call of a dtype family:

| job | tiles | port: first / second batch | cupy's comparison: first / second batch | `differing_rows`: first / second batch | hardware, first batch |
|---|---|---|---|---|---|
{probe_rows}

The campaigns now compare with `gpu.kernels.compare.differing_rows` (one compiled kernel for every shape and a
mask for the layout family's undefined cases), and the dense campaign's precompile also builds the port's
per-form tables. In this run the jobs' first batches took {mixed['jobs_first_batch_seconds']:.2f} s in all and later
batches {mixed['later_batches_seconds']:.2f} s (a short campaign draws a new job almost every batch); the slowest
batch, {mixed['slowest_batches'][0]['seconds']:.2f} s, was the first of a chain of 128 (`{mixed['slowest_batches'][0]['job'].split('aligned.')[1]}`), which
is why chains of 128 run far below the others here. By chain length (seconds summed over the batches of that length):

| chain | outputs | instruction outputs | seconds | G outputs/s | G instruction outputs/s |
|---|---|---|---|---|---|
{chain_rows}

The port of the accumulator (`bench/bench_port.py`; `FormRunner.model_per_output`, the first port, vs the tiled
chain kernel `gpu.kernels.device_model.model_chain_device`, now `FormRunner.model`; the hardware column is
`FormRunner.hardware`, which builds its shared-memory images and registers inside the kernel), G outputs/s:

| form | first port | chain kernel | chain kernel, chain 4 (per step) | hardware | products/s | mismatches: new vs first / new vs hardware |
|---|---|---|---|---|---|---|
{port_rows}

The layout family (`bench/bench_layout_gpu.py`, `wgref fuzz layout --engine gpu`; variant, operand source,
imm-trans; each rate as *first port / tiled chain kernel*, the model-stage kernel of the two runs of the same
session, `layout_gpu.json` and `layout_gpu_chain.json` in `bench/results/fuzz_gpu_h200/`):

| variant | A | trans | model G/s | end to end G outputs/s | outputs compared (both runs) | undefined cases (not compared) | mismatches / port disagreements |
|---|---|---|---|---|---|---|---|
{lay_rows}

All variants mixed: {ly['gpu_mixed']['g_outputs_per_s']:.2f} G outputs/s with the first port,
{lc['gpu_mixed']['g_outputs_per_s']:.2f} with the chain kernel ({ly['gpu_mixed']['outputs'] + lc['gpu_mixed']['outputs']:,}
outputs, {ly['gpu_mixed']['mismatches'] + lc['gpu_mixed']['mismatches']} mismatches,
{ly['gpu_mixed']['port_disagreements'] + lc['gpu_mixed']['port_disagreements']} port disagreements); the CPU
engine (`fuzz_layout`) in the same runs: {ly['cpu_engine']['outputs_per_second'] / 1e6:.2f} and
{lc['cpu_engine']['outputs_per_second'] / 1e6:.2f} M outputs/s. The chain kernel is the campaign's default; every
variant is at least 1 G outputs/s end to end with either kernel.

The sparse family (`bench/bench_sparse_gpu.py`, `wgref fuzz sparse --engine gpu`; stages alone and the
campaign end to end with each model kernel, {sg['args']['seconds']} s a form, {sg['args']['batch_tiles']} tiles a
batch; `bench/results/sparse_gpu_h200/`), G outputs/s:

| form | hardware | model, gather kernel | model, chain kernel | end to end, gather | end to end, chain (the default) | outputs compared | mismatches / port disagreements / chain vs gather differences | CPU engine M outputs/s |
|---|---|---|---|---|---|---|---|---|
{sp_rows}

Every form is at least 1 G outputs/s end to end with either kernel; the chain kernel is the default.
"""
