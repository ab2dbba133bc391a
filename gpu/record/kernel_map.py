"""Map which kernels the run-time-dispatching libraries pick over a grid of GEMM shapes on the H200.

    python -m gpu.record.kernel_map --out DIR [--seconds S]              # GPU: record kernel_map.json
    python -m gpu.record.kernel_map --store DIR/kernel_map.json --out fixtures   # CPU: the fixture

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


def classify(kernels) -> int:
    """0 plain (one K chain), 1 segment-K, 2 split-K (from the kernel names), as the golden models use it."""
    s = " ".join(kernels) if isinstance(kernels, list) else str(kernels)
    if "split" in s.lower():
        return 2
    if "segment_k_on" in s:
        return 1
    return 0


def store(recorded: Path, out: Path) -> int:
    """fixtures/kernel_map/h200_grid.npz (kind ``kernel_map``): per op the kernel class of every grid
    shape (``<op>``, uint8 (M, N, K)) and the index of its kernel names (``<op>_names``) into the
    op's name list in the meta."""
    import numpy as np

    from refmodel.verify.fixtures import host_provenance, write_fixture

    d = json.loads(Path(recorded).read_text())
    mn, ks = tuple(d["grid"]["MN"]), tuple(d["grid"]["K"])
    arrays, names = {}, {}
    for op, rows in d["ops"].items():
        cls = np.zeros((len(mn), len(mn), len(ks)), np.uint8)
        idx = np.zeros(cls.shape, np.int16)
        uniq: list[str] = []
        for m, n, k, kern in rows:
            key = " | ".join(kern) if isinstance(kern, list) else str(kern)
            if key not in uniq:
                uniq.append(key)
            pos = (mn.index(m), mn.index(n), ks.index(k))
            cls[pos] = classify(kern)
            idx[pos] = uniq.index(key)
        arrays[op], arrays[f"{op}_names"], names[op] = cls, idx, uniq
    versions = {k: d[k] for k in ("torch", "cuda", "cusparselt") if k in d}
    prov = {**host_provenance(), "device": d.get("device", "?"), "recorder": "gpu.record.kernel_map", **versions}
    write_fixture("kernel_map", "h200_grid", arrays, kind="kernel_map", cases=sum(a.size for k, a in arrays.items()
                                                                                   if not k.endswith("_names")),
                  meta={"MN": list(mn), "K": list(ks), "ops": list(d["ops"]), "names": names, "versions": versions},
                  provenance=prov, root=out)
    print(f"kernel map: {len(d['ops'])} ops x {len(mn) * len(mn) * len(ks)} shapes stored")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for kernel_map.json (with --store: the fixtures root)")
    p.add_argument("--seconds", type=float, default=400.0, help="stop starting calls after this long")
    p.add_argument("--store", default=None, metavar="JSON", help="(CPU) turn a recorded kernel_map.json into the fixture")
    a = p.parse_args(argv)
    if a.store:
        return store(Path(a.store), Path(a.out))
    run(Path(a.out), a.seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
