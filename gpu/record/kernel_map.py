"""Map which kernels the run-time-dispatching libraries pick over a grid of GEMM shapes on the H200.

    python -m gpu.record.kernel_map --out DIR [--seconds S]

For every op (``torch.matmul`` bf16/f16, ``torch._scaled_mm`` e4m3 fast and precise, cuSPARSELt
f16/bf16 and e4m3) and every (M, N, K) of the grid, one call under torch's profiler records the CUDA
kernel names (inputs are random: only the choice of kernel is recorded, not the bits).  The map
(``kernel_map.json``) is what the golden models consult to warn where a library switches to a
split-K / segment-K kernel.  Written after every op, so a run stopped by its time budget keeps
what it has.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

MN = (64, 128, 256, 512, 1024, 2048, 4096)
KS = (512, 1024, 2048, 4096, 8192, 16384)
OPS = ("matmul_bf16", "matmul_f16", "scaled_mm_fast", "scaled_mm_precise", "sparse_f16", "sparse_bf16",
       "sparse_e4m3")


def _call(op: str, m: int, n: int, k: int):
    import torch

    from gpu.libraries.cusparselt import cslt_sparse_mm, semi_structured_mm
    from gpu.libraries.torch_cublas import profiled

    g = torch.Generator(device="cuda").manual_seed(m * 7 + n * 13 + k)
    if op.startswith("matmul"):
        dt = torch.bfloat16 if op.endswith("bf16") else torch.float16
        a = torch.randn(m, k, device="cuda", generator=g).to(dt)
        b = torch.randn(k, n, device="cuda", generator=g).to(dt)
        return profiled(lambda: torch.matmul(a, b))[1]
    if op.startswith("scaled_mm"):
        a = torch.randn(m, k, device="cuda", generator=g).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda", generator=g).to(torch.float8_e4m3fn)
        one = torch.tensor(1.0, device="cuda")
        fast = op.endswith("fast")
        return profiled(lambda: torch._scaled_mm(a, b.t(), one, one, out_dtype=torch.bfloat16,
                                                 use_fast_accum=fast))[1]
    dt = {"sparse_f16": torch.float16, "sparse_bf16": torch.bfloat16, "sparse_e4m3": torch.float8_e4m3fn}[op]
    mask = torch.tensor([1, 1, 0, 0], device="cuda", dtype=torch.bool).repeat(m, k // 4)
    a = (torch.randn(m, k, device="cuda", generator=g) * mask).to(dt)
    if op == "sparse_e4m3":
        b = torch.randn(n, k, device="cuda", generator=g).to(dt).t()          # column-major B (FP8 needs it)
        return cslt_sparse_mm(a, b, out_dtype=torch.bfloat16)[1]
    b = torch.randn(k, n, device="cuda", generator=g).to(dt)
    return semi_structured_mm(a, b)[1]


def run(out: Path, seconds: float) -> None:
    import torch

    from gpu.libraries.cusparselt import version
    from gpu.libraries.torch_cublas import versions

    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    result = {**versions(), "cusparselt": version(), "device": torch.cuda.get_device_name(0),
              "grid": {"MN": MN, "K": KS}, "ops": {}}
    for op in OPS:
        rows = []
        for m in MN:
            for n in MN:
                for k in KS:
                    if time.time() - t0 > seconds:
                        break
                    try:
                        kern = [x for x in _call(op, m, n, k) if not x.startswith(("Memset", "Memcpy"))]
                        rows.append([m, n, k, kern])
                    except Exception as e:  # a shape the library refuses is recorded as such
                        rows.append([m, n, k, f"error: {type(e).__name__}: {str(e)[:160]}"])
        result["ops"][op] = rows
        (out / "kernel_map.json").write_text(json.dumps(result, indent=0))
        print(f"{op}: {len(rows)} shapes, {time.time() - t0:.0f} s", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for kernel_map.json")
    p.add_argument("--seconds", type=float, default=400.0, help="stop starting calls after this long")
    a = p.parse_args(argv)
    run(Path(a.out), a.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
