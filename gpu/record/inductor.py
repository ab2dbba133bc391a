"""Record torch.compile(mode="max-autotune") FP8 ``torch._scaled_mm`` calls on the H200: Inductor's generated
source and the outputs, for refmodel.golden.inductor.

    python -m gpu.record.inductor --out DIR [--seconds S]

Each call (:data:`CALLS`: tensor-wise scales with and without fast accumulation, row-wise scales; small and
large M) runs in a fresh process (Inductor's autotuner keeps no state across them) with Triton templates only
(``max_autotune_gemm_backends="TRITON"``), on inputs from refmodel.verify.seeded_mma.matrix_codes (the narrow
and cancel families) and seeded scales.  ``DIR/inductor_calls.json`` keeps, per call, the generated source,
the output's raw bits (hex of the little-endian bytes), and the versions.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

# (name, scaling, use_fast_accum, M, K, N)
CALLS = [
    ("tensor_fast_m32", "tensor", True, 32, 512, 256),
    ("tensor_precise_m32", "tensor", False, 32, 512, 256),
    ("row_m32", "row", False, 32, 512, 256),
    ("tensor_fast_m256", "tensor", True, 256, 512, 256),
    ("tensor_precise_m256", "tensor", False, 256, 512, 256),
    ("row_m256", "row", False, 256, 512, 256),
]
FAMILIES = ("narrow", "cancel")
SEED = 20261206


def scales(name: str, scaling: str, M: int, N: int) -> tuple[np.ndarray, np.ndarray]:
    """float32 scales of a call: tensor-wise scalars (not powers of two) or row-wise (M, 1) and (1, N)."""
    rng = np.random.default_rng(sum(map(ord, name)))
    if scaling == "tensor":
        return (np.float32(rng.uniform(0.1, 2.0)).reshape(()), np.float32(rng.uniform(0.1, 2.0)).reshape(()))
    return (rng.uniform(0.1, 2.0, (M, 1)).astype(np.float32), rng.uniform(0.1, 2.0, (1, N)).astype(np.float32))


def inputs(i: int, j: int, M: int, K: int, N: int, family: str):
    """e4m3 codes of A (M, K) and B (K, N) of call i, family j."""
    from refmodel.verify.seeded_mma import matrix_codes

    return matrix_codes("e4m3", "e4m3", family, SEED, len(FAMILIES) * i + j, (M, K, N))


def _one(i: int) -> dict:
    """Run CALLS[i] in this process: compile with max-autotune (Triton templates only), run every family."""
    import torch
    import torch._inductor.config as cfg
    from torch._inductor.utils import run_and_get_code

    cfg.max_autotune_gemm_backends = "TRITON"
    name, scaling, fast, M, K, N = CALLS[i]
    sa, sb = scales(name, scaling, M, N)
    if scaling == "tensor":     # 0-d float32 tensors (np.ascontiguousarray would make them (1,): the 2026-12-06 run failed)
        tsa = torch.tensor(float(sa), dtype=torch.float32, device="cuda")
        tsb = torch.tensor(float(sb), dtype=torch.float32, device="cuda")
    else:
        tsa = torch.from_numpy(np.ascontiguousarray(sa)).cuda()
        tsb = torch.from_numpy(np.ascontiguousarray(sb)).cuda()

    def f(a, b):
        return torch._scaled_mm(a, b, tsa, tsb, out_dtype=torch.bfloat16, use_fast_accum=fast)

    comp = torch.compile(f, mode="max-autotune", dynamic=False)
    outs, code = [], None
    for j, fam in enumerate(FAMILIES):
        a, b = inputs(i, j, M, K, N, fam)
        ta = torch.from_numpy(a.astype(np.uint8)).cuda().view(torch.float8_e4m3fn)
        tb = torch.from_numpy(np.ascontiguousarray(b.astype(np.uint8).T)).cuda().view(torch.float8_e4m3fn).t()
        if code is None:
            d, codes = run_and_get_code(comp, ta, tb)
            code = "\n\n# ----- next source -----\n\n".join(codes)
        else:
            d = comp(ta, tb)
        torch.cuda.synchronize()
        outs.append(d.view(torch.int16).cpu().numpy().astype("<u2").tobytes().hex())
    return {"name": name, "scaling": scaling, "use_fast_accum": fast, "shape": [M, K, N], "families": list(FAMILIES),
            "scale_a": np.asarray(sa).ravel().tolist(), "scale_b": np.asarray(sb).ravel().tolist(),
            "code": code, "d_hex": outs, "torch": torch.__version__, "device": torch.cuda.get_device_name()}


def record(out: str, seconds: float, only=None) -> int:
    Path(out).mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    rows = []
    for i, (name, *_rest) in enumerate(CALLS):
        if only and name not in only:
            continue
        left = seconds - (time.time() - t0)
        if left < 20:
            print(f"{name}: skipped (time)", flush=True)
            continue
        r = subprocess.run([sys.executable, "-m", "gpu.record.inductor", "--one", str(i)], capture_output=True,
                           text=True, timeout=left)
        if r.returncode != 0:
            print(f"{name}: failed: {r.stderr[-4000:]}", flush=True)
            (Path(out) / f"{name}_error.txt").write_text(r.stderr[-20000:])
            continue
        rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
        print(f"{name}: ok in {time.time() - t0:.0f} s", flush=True)
        (Path(out) / "inductor_calls.json").write_text(json.dumps({"seed": SEED, "calls": rows}, indent=0))
    return 0 if rows else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None)
    ap.add_argument("--seconds", type=float, default=400)
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--only", default=None, help="these call names only (comma-separated)")
    a = ap.parse_args(argv)
    if a.one is not None:
        print(json.dumps(_one(a.one)))
        return 0
    return record(a.out, a.seconds, set(a.only.split(",")) if a.only else None)


if __name__ == "__main__":
    sys.exit(main())
