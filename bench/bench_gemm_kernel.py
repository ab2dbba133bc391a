"""FP8 GEMM kernel (gpu/kernels/gemm_fp8.py) vs torch._scaled_mm (cuBLASLt), e4m3 -> bf16, same shapes,
same run, on the H200: TFLOP/s and the ratio (cuBLAS time / ours; > 1 means ours is faster).

    python bench/bench_gemm_kernel.py [--sizes 4096 8192] [--reps 20] [--configs "" "promote=0" ...] [--json F]

Each ``--configs`` item is a ``gpu.kernels.gemm_fp8.parse_config`` string (``key=value`` joined by commas;
"" is the default config, i.e. the persistent schedule with promotion).  A config with promote=1 is
"precise" and is compared with use_fast_accum=False, one with promote=0 is "fast" and compared with
use_fast_accum=True.  Default: the default precise and fast configs.  Both sides are timed the same way:
``reps`` back-to-back launches between two CUDA events, the median over ``--trials`` such batches, the two
sides' batches alternating (so each config's row has its own cuBLAS time, measured beside it).
Precise rows time our kernel beside two baselines.  (1) per-tensor scales (0.3 and 0.7) with
use_fast_accum=False: cuBLAS adds each K block's partial and scales once in the epilogue, which is
the recipe of ``scales=tensor`` configs (those give it the same two scales, and --check then expects 0
difference).  (2) Blockwise scales (skipped by ``--no-blockwise`` and for ``scales=tensor``):
``torch._scaled_mm`` with 1x128 scales of A and 128x128 scales of B (cuBLASLt's blockwise modes) and the
same scale values as ours, the recipe of the other precise configs.
``--json F`` writes a list of rows (n, mode, config, cublas_tflops, ours_tflops, ratio, and the device,
driver, CUDA, cupy and torch versions).  ``--check`` also reports each config's largest |ours - cuBLAS| / max|cuBLAS| (a sanity check only; the
bit-exact check is ``python -m gpu.record.gemm --check-only``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _batch(h, reps: int) -> float:
    """Seconds per call of ``h`` over ``reps`` back-to-back calls between two CUDA events."""
    import torch

    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        h()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / 1e3 / reps


def _time_pair(f, g, reps: int, trials: int) -> tuple[float, float]:
    """Median seconds per call of ``f`` and of ``g``, timed in alternating batches (f g, g f, f g, ...):
    clocks and power on the H200 drift over seconds, so a batch of one next to a batch of the other is
    the fair comparison (one run measured the same kernel 14 % apart a few seconds later)."""
    import numpy as np
    import torch

    for _ in range(3):
        f()
        g()
    torch.cuda.synchronize()
    if reps <= 0:       # auto: batches of about 40 ms (0.1-ms calls in batches of 20 timed mostly clock ramps)
        reps = max(10, int(0.04 / max(_batch(f, 5), 1e-9)))
    ts = {0: [], 1: []}
    for i in range(trials):
        for j in ((0, 1) if i % 2 == 0 else (1, 0)):
            ts[j].append(_batch((f, g)[j], reps))
    return float(np.median(ts[0])), float(np.median(ts[1]))


def e4m3_inputs(M: int, N: int, K: int, seed: int):
    """Seeded N(0, 1) operands rounded to e4m3, A (M, K) and B (N, K): the torch tensors and cupy uint8 views
    of the same memory (the bench, the K sweep and the probes all time these)."""
    import cupy as cp
    import torch

    torch.manual_seed(seed)
    A = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    B = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn)
    return A, B, cp.asarray(A.view(torch.uint8)), cp.asarray(B.view(torch.uint8))


def _gpu_state() -> dict:
    """SM clock (MHz), power (W) and temperature (C) right after a timing: provenance of its noise."""
    import subprocess
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10).stdout
        clk, pw, temp = (float(x) for x in out.strip().splitlines()[0].split(","))
        return {"sm_clock_mhz": clk, "power_w": pw, "temperature_c": temp}
    except Exception:
        return {}


def _kernel_names(f) -> list:
    """The CUDA kernels one call of ``f`` launches (torch.profiler), e.g. cuBLAS's nvjet tile name."""
    import torch
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            f()
            torch.cuda.synchronize()
        return sorted({e.key for e in prof.key_averages()
                       if getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0)) > 0})
    except Exception as e:      # provenance only: the timing does not depend on it
        return [f"unknown ({type(e).__name__})"]


def _blockwise_cublas(A, B, sa, sb):
    """``torch._scaled_mm`` with the recipe our precise kernel computes: 1x128 scales of A (M, K/128)
    and 128x128 scales of B (K/128, N/128) (cuBLASLt's VEC128 / BLK128x128 modes, CUDA >= 12.9), in
    the strides torch asks for (outer-dim-major).  Returns the call, or ``None`` and why when this torch
    or cuBLAS refuses the recipe."""
    import torch

    scale_a = torch.as_tensor(sa, device="cuda").t().contiguous().t()          # (M, KB), stride (1, M)
    scale_b = torch.as_tensor(sb, device="cuda").t().contiguous().t()          # (KB, NB), stride (1, KB)

    def f():
        return torch._scaled_mm(A, B.t(), scale_a, scale_b, out_dtype=torch.bfloat16)
    try:
        f()
        torch.cuda.synchronize()
    except Exception as e:
        return None, f"torch._scaled_mm: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    return f, "torch._scaled_mm"


def main(argv=None) -> int:
    import cupy as cp
    import torch

    from gpu.kernels.gemm_fp8 import launcher, parse_config
    from gpu.kernels.runtime import device_info

    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="*", default=[4096, 8192])
    p.add_argument("--reps", type=int, default=0, help="calls per timed batch (0: about 40 ms of calls)")
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--configs", nargs="*", default=["", "promote=0"])
    p.add_argument("--check", action="store_true")
    p.add_argument("--no-blockwise", dest="blockwise", action="store_false",
                   help="precise rows: skip the blockwise-scaled cuBLAS baseline (the same recipe as ours)")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    cfgs = [parse_config(c) for c in a.configs]
    info = {**device_info(), "torch": torch.__version__, "torch_cuda": torch.version.cuda}
    rows = []
    for n in a.sizes:
        A, B, Ac, Bc = e4m3_inputs(n, n, n, n)      # B is (N, K)
        one = torch.ones((), device="cuda")
        # per-tensor scales of the precise baseline (and of scales=tensor configs): not powers of two, so
        # --check tells a scale applied in the epilogue from one applied at each promotion
        tsa, tsb = torch.tensor(0.3, device="cuda"), torch.tensor(0.7, device="cuda")
        KB = n // 128
        # scales in [0.5, 2): the same arithmetic as ones (the timing does not depend on them), and the
        # blockwise cuBLAS baseline gets the same ones, so --check compares the same computation
        rs = cp.random.RandomState(n)
        sa = (0.5 + 1.5 * rs.random_sample((n, KB))).astype(cp.float32)
        sb = (0.5 + 1.5 * rs.random_sample((KB, -(-n // 128)))).astype(cp.float32)
        f_block, block_api = (_blockwise_cublas(A, B, sa, sb) if any(c.promote for c in cfgs) and a.blockwise
                              else (None, "not asked"))
        block_ref = f_block() if f_block is not None and a.check else None
        block_kern = _kernel_names(f_block) if f_block is not None else None
        print(f"{n}^3 blockwise cuBLAS baseline: {block_api}", flush=True)
        cublas = {}
        for fast in sorted({not c.promote for c in cfgs}):
            def f(A=A, B=B, fast=fast, s1=one if fast else tsa, s2=one if fast else tsb):
                return torch._scaled_mm(A, B.t(), s1, s2, out_dtype=torch.bfloat16, use_fast_accum=fast)
            cublas[fast] = (f, f() if a.check else None, _kernel_names(f))
        flops = 2.0 * n ** 3
        for cfg in cfgs:
            fast = not cfg.promote
            f_cublas, ref, kern = cublas[fast]
            tensor = cfg.scales == "tensor"
            csa, csb = (cp.asarray(tsa), cp.asarray(tsb)) if tensor else (sa, sb)
            launch, D = launcher(Ac, Bc, None if fast else csa, None if fast else csb, cfg=cfg)
            t_cublas, t_ours = _time_pair(f_cublas, launch, a.reps, a.trials)
            state = _gpu_state()
            r = {"n": n, "mode": "fast" if fast else "precise", "recipe": "none" if fast else ("tensor" if tensor else "blockwise"),
                 "config": cfg.name, "cublas_tflops": flops / t_cublas / 1e12,
                 "ours_tflops": flops / t_ours / 1e12, "ratio": t_cublas / t_ours, "cublas_kernels": kern,
                 "grid": list(getattr(launch, "grid", ())), **state}
            if not fast and not tensor and f_block is not None:   # the same recipe in cuBLAS (1x128 / 128x128 scales)
                tb, tq = _time_pair(f_block, launch, a.reps, a.trials)
                r.update(cublas_blockwise_tflops=flops / tb / 1e12, ours_tflops_beside_blockwise=flops / tq / 1e12,
                         ratio_blockwise=tb / tq, cublas_blockwise_api=block_api, cublas_blockwise_kernels=block_kern)
            elif not fast and not tensor:
                r["cublas_blockwise_api"] = block_api
            if getattr(launch, "kernel_only", None) is not None:     # what the scale-layout kernel costs
                tc, tk = _time_pair(f_cublas, launch.kernel_only, a.reps, a.trials)
                r["ours_kernel_only_tflops"], r["cublas_tflops_beside_kernel_only"] = flops / tk / 1e12, flops / tc / 1e12
            if a.check:
                launch()
                cp.cuda.runtime.deviceSynchronize()
                ours = torch.as_tensor(D.view(cp.int16), device="cuda").view(torch.bfloat16).float()
                # (blockwise scales: compared with the blockwise baseline where it ran)
                want = (ref if fast or tensor or block_ref is None else block_ref).float()
                r["max_rel_diff_vs_cublas"] = float((ours - want).abs().max() / want.abs().max())
            rows.append(r)
            extra = f"   rel diff {r['max_rel_diff_vs_cublas']:.2e}" if a.check else ""
            if state:
                extra += f"   [{state['sm_clock_mhz']:.0f} MHz {state['power_w']:.0f} W]"
            if "ratio_blockwise" in r:
                extra += f"   blockwise cuBLAS {r['cublas_blockwise_tflops']:.1f}, ratio {r['ratio_blockwise']:.3f}"
            if "ours_kernel_only_tflops" in r:
                extra += f"   (kernel alone {r['ours_kernel_only_tflops']:.1f})"
            print(f"{n}^3 {r['mode']:<8} {cfg.name:<28} cuBLAS {r['cublas_tflops']:7.1f} TFLOP/s   ours "
                  f"{r['ours_tflops']:7.1f} TFLOP/s   ratio {r['ratio']:.3f}{extra}", flush=True)
            del launch, D
        for fast, (_, _, kern) in sorted(cublas.items()):
            print(f"{n}^3 {'fast' if fast else 'precise'} cuBLAS kernels: {', '.join(kern)}", flush=True)
    if a.json:   # a list of rows (the format tools/pipeline_doc.py reads), each with the run's provenance
        Path(a.json).write_text(json.dumps([{**r, "reps": a.reps, "trials": a.trials, **info} for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
