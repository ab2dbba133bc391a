"""The part of docs/libraries.md about schedules: the table of every library, its kernels and its
schedule, cuSPARSELt, split-K torch._scaled_mm and the kernel map — generated from fixtures/ and
refmodel.golden."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _entry(feature: str, file: str) -> dict:
    m = json.loads((ROOT / "fixtures" / feature / "manifest.json").read_text())
    return next(e for e in m["entries"] if e["file"] == file)


def _short(kernel: str) -> str:
    if "sparse_gemm" in kernel:
        tile = kernel.split("tilesize")[1].split("_")[0]
        mode = "split_k" if "split_k" in kernel else ("segment_k_on" if "segment_k_on" in kernel else "segment_k_off")
        return f"sparse_gemm {kernel.split('sparse_gemm_')[1].split('_')[0]} {tile} {mode}"
    return kernel


def _cusparselt() -> str:
    from refmodel.golden.cusparselt import cusparselt_schedule

    e = _entry("cusparselt", "calls.npz")
    rows = []
    for c in e["meta"]["calls"]:
        kern = [k for k in c["kernels"] if "sparse_gemm" in k]
        if c["expect"] == "match":
            s = cusparselt_schedule(c["dtype"], c["M"], c["N"], c["K"], out_dtype=c["out"], kernel=c["kernels"])
            sched = "one K chain" if s.splits == 1 else f"{s.splits} segments, {s.reduce} reduction"
            result = f"0 mismatches in {c['recorded_outputs'] if c['recorded_outputs'] <= 65536 else 4096:,}"
        else:
            sched, result = "refused (split not modelled)", "refused"
        rows.append(f"| `{c['name']}` | {c['api']} | {c['dtype']} → {c['out']} | "
                    f"{'<br>'.join('`' + _short(k) + '`' for k in kern)} | {sched} | {result} |")
    p = e["provenance"]
    return (f"Recorded with torch {p.get('torch')} (CUDA {p.get('cuda')}, cuSPARSELt {p.get('cusparselt')}) on the "
            f"H200: {len(rows)} calls, {e['cases']:,} outputs stored (all of each output up to 256 x 256, else 64 rows "
            f"x 64 columns).\n\n| call | API | types | kernels | schedule | outputs |\n|---|---|---|---|---|---|\n"
            + "\n".join(rows))


def _scaled_mm_split() -> str:
    e = _entry("cublas", "scaled_mm_split.npz")
    rows = []
    from refmodel.golden.torch_scaled_mm import scaled_mm_schedule

    for c in e["meta"]["calls"]:
        kern = next(k for k in c["kernels"] if k.startswith("nvjet"))
        if c["expect"] == "match":
            s = scaled_mm_schedule(c["M"], c["N"], c["K"], use_fast_accum=c["use_fast_accum"], rowwise=False,
                                   out_dtype=c["out"], kernel=c["kernels"])
            sched = "unsplit" if s.splits == 1 else f"S = {s.splits}"
            result = f"0 mismatches in {int(c['M'] * c['N']):,}"
        else:
            sched, result = "refused (S not determined)", "refused"
        rows.append(f"| {c['M']}x{c['N']}x{c['K']} | {'fast' if c['use_fast_accum'] else 'precise'} | {c['out']} | "
                    f"`{kern}` | {sched} | {result} |")
    return ("| M x N x K | accumulation | out | kernel | schedule | outputs |\n|---|---|---|---|---|---|\n"
            + "\n".join(rows))


def _kernel_map() -> str:
    import numpy as np

    e = _entry("kernel_map", "h200_grid.npz")
    z = np.load(ROOT / "fixtures" / "kernel_map" / "h200_grid.npz")
    rows = []
    for op in e["meta"]["ops"]:
        cls = z[op]
        rows.append(f"| `{op}` | {int((cls == 0).sum())} | {int((cls == 1).sum())} | {int((cls == 2).sum())} |")
    mn, ks = e["meta"]["MN"], e["meta"]["K"]
    return (f"`python -m gpu.record.kernel_map` ran every op at M, N in {mn} and K in {ks} "
            f"({len(mn) * len(mn) * len(ks)} shapes each) and kept the kernel names (fixtures/kernel_map):\n\n"
            "| op | plain (one K chain) | segment-K | split-K |\n|---|---|---|---|\n" + "\n".join(rows))


def schedules_section() -> str:
    from refmodel.golden.schedule import Schedule

    W = "wgmma.mma_async.sync.aligned.m64n8k"
    example = Schedule(W + "32.f32.e4m3.e4m3", splits=3, split_align=128, epilogue_scale="tensor", out_dtype="bf16",
                       source={"library": "cuBLASLt 13.1 (torch 2.11.0+cu130)",
                               "kernel": "nvjet_sm90_qqtst_64x32_128x16_1x2_h_bz_splitK_TNT",
                               "shape": "64x64x8192", "device": "H200"})
    return f"""## Every library, its kernels and its schedule

Every golden model states its schedule as data, a `refmodel.golden.Schedule` (the instruction, the K
order, where chains restart, promotion, split-K and its reduction, the epilogue), and one executor,
`Schedule.run`, computes all of them (`tests/test_schedule.py` checks it against every model).
`Schedule.describe()` says one in words; `to_json()` stores it and `wgref golden … --schedule s.json`
runs a stored one. Where a library picks its kernel at run time, the model takes `kernel=` (the name
torch's profiler shows) and refuses, in one sentence naming what to pass, a kernel whose split it does
not know; without `kernel=`/`schedule=` it warns (`refmodel.golden.ScheduleWarning`) wherever the
library was seen switching kernels near that shape (the kernel map below).

| library (call) | kernels | schedule | evidence |
|---|---|---|---|
| Triton 3.6 `tl.dot` tiled matmul | wgmma (FP8, f16, bf16, tf32), mma.sync (FP8 imp = 0), FMAs (ieee) | `triton_matmul`: per `max_num_imprecise_acc` / `input_precision` (docs/triton.md) | fixtures/triton |
| CUTLASS CuTe DSL 4.8.1 Hopper GEMM | wgmma chain | one K chain; 2xacc: promotion every p (`mul_add`) | fixtures/cutlass |
| cuBLAS 13.1 `torch.matmul` bf16/f16 | nvjet (split-K or not), `cutlass_75` s1688 | one chain, or S splits of round_up(ceil(K/S), 64) reduced in split order | fixtures/cublas/calls.npz |
| cuBLASLt `torch._scaled_mm` | nvjet unsplit, nvjet `splitK` + `splitKreduce` | unsplit: chain (fast) or promotion every 4 (precise); `splitK` fast: S recorded per shape | fixtures/torch, fixtures/cublas/scaled_mm_split.npz |
| cuSPARSELt 0.8.0 (torch semi-structured) | `sparse_gemm … segment_k_off / segment_k_on / split_k` | sparse wgmma chain; segment-K: S segments reduced pairwise; split_k refused | fixtures/cusparselt |

An example, the split-K `_scaled_mm` call of 64 x 64 x 8192 with fast accumulation:

> {example.describe()}

### torch._scaled_mm in split-K shapes

With `use_fast_accum=True`, cuBLASLt runs `nvjet_…_splitK_TNT` plus `splitKreduce_kernel` at small M x N
and long K; the unsplit schedule misses most of these outputs, `refmodel.golden.scaled_mm(..., kernel=...)`
reproduces them (S from the recordings, `refmodel.golden.torch_scaled_mm.RECORDED_SPLITS`). In precise mode
every S from 1 to 5 reproduces the recording, so S is not determined and the split kernel is refused.

{_scaled_mm_split()}

### cuSPARSELt

`refmodel.golden.cusparselt_matmul(a, b, *, out_dtype, kernel=None, schedule=None)`: `a` (M, K) dense,
2:4 pruned along K (PyTorch's convention), `b` (K, N), any M and N. The `segment_k_on` segment count is
not in the kernel name; for the recorded shapes it was found by trying every count and reduction order
against the H200's outputs (a pairwise tree is the one order consistent with every recording).

{_cusparselt()}

### Where the libraries switch kernels

{_kernel_map()}
"""
