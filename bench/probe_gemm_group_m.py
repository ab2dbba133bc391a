"""Timing-only probe (bench/results/gemm_kernel_h200_session6/call5_group_m.json; python bench/probe_gemm_group_m.py OUT.json): GROUP_M (row blocks per raster group) of the per-tensor configs, vs torch._scaled_mm precise."""
import sys, json
sys.path.insert(0, ".")
import cupy as cp, torch
import gpu.kernels.gemm_fp8 as G
from bench.bench_gemm_kernel import _time_pair, e4m3_inputs

orig = G.kernel_source
GM = {"v": 8}
def hacked(cfg):
    s = orig(cfg)
    assert "#define GROUP_M 8\n" in s
    return s.replace("#define GROUP_M 8\n", f"#define GROUP_M {GM['v']}\n")
G.kernel_source = hacked
rows = []
for n in (8192, 4096):
    A, B, Ac, Bc = e4m3_inputs(n, n, n, n)
    tsa, tsb = torch.tensor(0.3, device="cuda"), torch.tensor(0.7, device="cuda")
    f = lambda: torch._scaled_mm(A, B.t(), tsa, tsb, out_dtype=torch.bfloat16, use_fast_accum=False)
    ref = f()
    for t in ("scales=tensor", "scales=tensor,bn=144"):
        for gm in (4, 8, 16, 32):
            GM["v"] = gm
            cfg = G.parse_config(t)
            launch, D = G.launcher(Ac, Bc, cp.asarray(tsa), cp.asarray(tsb), cfg=cfg)
            tc, to = _time_pair(f, launch, 0, 10)
            launch(); cp.cuda.runtime.deviceSynchronize()
            same = bool(cp.array_equal(D.view(cp.int16), cp.asarray(ref.view(torch.int16))))
            r = dict(n=n, config=cfg.name, group_m=gm, cublas=2 * n**3 / tc / 1e12, ours=2 * n**3 / to / 1e12, ratio=tc / to, bits_equal_cublas=same)
            rows.append(r); print(r, flush=True)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
