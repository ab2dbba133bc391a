"""Record torch._scaled_mm (cuBLASLt FP8 GEMM) on the GPU and check refmodel.numerics.scaled_mm against it.

    python -m gpu.record.torch --out fixtures

Writes fixtures/torch/scaled_mm_<M>x<N>x<K>.npz (+ manifest, provenance) for the kept
shape and compares every recorded configuration with refmodel.numerics.scaled_mm on the spot:
per-tensor scales (powers of two and not) and row-wise scales, f32 / bf16 outputs,
use_fast_accum False / True.  The call is gpu.libraries.torch_cublas.scaled_mm.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from refmodel.verify.fixtures import host_provenance, write_fixture

from gpu.libraries import torch_cublas
from gpu.record.model_check import ModelMissingError, require_model

SHAPES = ((128, 256, 1024), (256, 512, 4096))
KEEP = (128, 256, 1024)  # the shape stored as a fixture (the others are compared only)
PER_TENSOR = ((0.5, 0.25), (0.3, 0.7))


def record_shape(torch, m, n, k, g, scaled_mm):
    dev = "cuda"
    a = (torch.randn(m, k, generator=g) * 32).to(torch.float8_e4m3fn)
    b_nk = (torch.randn(n, k, generator=g) * 32).to(torch.float8_e4m3fn)
    ra = (torch.rand(m, 1, generator=g) + 0.5).float()
    rb = (torch.rand(1, n, generator=g) + 0.5).float()
    arrays = {"a": a.view(torch.uint8).numpy(), "b_nk": b_nk.view(torch.uint8).numpy(),
              "ra": ra.numpy(), "rb": rb.numpy()}
    configs = [(sa, sb, od, fast) for sa, sb in PER_TENSOR for od in ("f32", "bf16") for fast in (False, True)]
    configs += [("ra", "rb", "bf16", fast) for fast in (False, True)]
    cases, rows = [], []
    for i, (sa, sb, od, fast) in enumerate(configs):
        ta = ra if sa == "ra" else torch.tensor(sa, dtype=torch.float32)
        tb = rb if sb == "rb" else torch.tensor(sb, dtype=torch.float32)
        d = torch_cublas.scaled_mm(a.to(dev), b_nk.to(dev), ta.to(dev), tb.to(dev), od, use_fast_accum=fast)
        hw = torch_cublas.bits_view(d)
        ref = np.ascontiguousarray(scaled_mm(arrays["a"], arrays["b_nk"],
                                             arrays["ra"] if sa == "ra" else np.float32(sa),
                                             arrays["rb"] if sb == "rb" else np.float32(sb),
                                             out_dtype=od, use_fast_accum=fast))
        bad = int(np.count_nonzero(ref.view(hw.dtype) != hw))
        rows.append((f"{m}x{n}x{k} scales={sa},{sb} {od} fast={fast}", hw.size, bad))
        arrays[f"d{i}"] = hw
        cases.append({"scale_a": sa, "scale_b": sb, "out_dtype": od, "use_fast_accum": fast, "array": f"d{i}"})
    return arrays, cases, rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="fixtures")
    args = ap.parse_args(argv)
    try:
        scaled_mm = require_model("refmodel.numerics.scaled_mm", "scaled_mm")
    except ModelMissingError as e:
        print(f"gpu.record.torch: error: {e}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError as e:
        print(f"gpu.record.torch: error: torch is needed to record torch._scaled_mm ({e})", file=sys.stderr)
        return 2

    from gpu.kernels.runtime import device_info

    prov = {**device_info(), **host_provenance(), "torch": torch.__version__,
            "torch_cuda": str(torch.version.cuda), "seed": "torch.Generator('cpu').manual_seed(0)"}
    g = torch.Generator(device="cpu").manual_seed(0)
    all_rows = []
    for m, n, k in SHAPES:
        arrays, cases, rows = record_shape(torch, m, n, k, g, scaled_mm)
        all_rows += rows
        if (m, n, k) == KEEP:
            write_fixture("torch", f"scaled_mm_{m}x{n}x{k}", arrays, kind="scaled_mm",
                          cases=sum(arrays[c["array"]].size for c in cases),
                          meta={"cases": cases, "what": "torch._scaled_mm(a, b_nk.t(), scale_a, scale_b, "
                                "out_dtype, use_fast_accum) on the GPU (cuBLASLt)"},
                          provenance=prov, root=args.out)
    total = 0
    for name, cnt, bad in all_rows:
        print(f"{name:<58} {cnt:>9} {bad:>9}")
        total += bad
    print(f"TOTAL mismatches vs refmodel.numerics.scaled_mm: {total}")
    return 0 if total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
