"""Record Triton kernels whose float32 multiply-adds Triton's compiler contracts (``x * y + x`` ->
``fma.rn.f32``), on the H200, for wgref.triton's interpreter.

    python -m gpu.record.triton_fma --out DIR                          # on the GPU
    python -m gpu.record.triton_fma --fixture DIR --fixtures fixtures  # here: write the fixture

Each expression of :data:`EXPRS` runs in gpu.libraries.triton_sfu's elementwise kernel (the source the
special-function recordings used) on chunk 0 of :func:`refmodel.numerics.sfu.pairs.div_pairs` (seed
:data:`SEED`: 4,194,304 adversarial float32 pairs: random bits, equal and adjacent exponents, NaN/Inf,
subnormals, cancellation).  ``DIR/triton_fma.json`` keeps per expression the sha256 of the whole output
(little-endian words), its first :data:`SAMPLE` words, and the float opcodes of the PTX.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

import numpy as np

EXPRS = ("x * y", "x + y", "x * y + x", "x * y - x", "x - x * y", "x * y + y * x", "(x * y) * x + y")
SEED = 20261206
SAMPLE = 1 << 14


def record(out: str) -> int:
    import cupy as cp
    import torch

    from gpu.libraries import triton_sfu
    from refmodel.numerics.sfu.pairs import div_pairs

    a, b = div_pairs(0, SEED)
    tx = torch.from_dlpack(cp.asarray(a).view(cp.float32))
    ty = torch.from_dlpack(cp.asarray(b).view(cp.float32))
    rows = []
    for expr in EXPRS:
        o, compiled = triton_sfu.run(expr, tx, ty)
        torch.cuda.synchronize()
        w = cp.from_dlpack(o).view(cp.uint32).get().astype("<u4")
        ops = sorted(set(re.findall(r"\b((?:mul|add|sub|fma|neg)\.[\w.]*f32)\b", compiled.asm["ptx"])))
        rows.append({"expr": expr, "sha256": hashlib.sha256(w.tobytes()).hexdigest(),
                     "sample_hex": w[:SAMPLE].tobytes().hex(), "ptx_ops": ops})
        print(f"{expr}: {ops}", flush=True)
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "triton_fma.json").write_text(json.dumps(
        {"seed": SEED, "chunk": 0, "n": int(a.size), "sample": SAMPLE, "device": torch.cuda.get_device_name(),
         "torch": torch.__version__, "triton": __import__("triton").__version__, "exprs": rows}))
    return 0


def write_fixture_from(src: str, root: str) -> str:
    """fixtures/triton/elementwise.npz (kind triton_elementwise) from a recording's triton_fma.json."""
    from refmodel.verify.fixtures import host_provenance, write_fixture

    rec = json.loads((Path(src) / "triton_fma.json").read_text())
    rows = rec["exprs"]
    arrays = {"sample": np.stack([np.frombuffer(bytes.fromhex(r["sample_hex"]), "<u4") for r in rows]),
              "hw_sha256": np.stack([np.frombuffer(bytes.fromhex(r["sha256"]), np.uint8) for r in rows])}
    meta = {"seed": rec["seed"], "chunk": rec["chunk"], "n": rec["n"], "sample": rec["sample"],
            "exprs": [r["expr"] for r in rows], "ptx_ops": {r["expr"]: r["ptx_ops"] for r in rows},
            "inputs": "refmodel.numerics.sfu.pairs.div_pairs(chunk, seed) as float32 (x, y)",
            "kernel": "gpu.libraries.triton_sfu (o = expr over x and y)"}
    prov = {"device": rec["device"], "torch": rec["torch"], "triton": rec["triton"], "recorder": "gpu.record.triton_fma",
            "merged_on": host_provenance(), "date": host_provenance()["date"]}
    e = write_fixture("triton", "elementwise", arrays, kind="triton_elementwise", cases=len(rows) * int(rec["n"]),
                      meta=meta, provenance=prov, root=root)
    return f"{e.file}: {len(rows)} expressions, {e.cases} outputs"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="record into DIR (on the GPU)")
    ap.add_argument("--fixture", default=None, metavar="DIR", help="write fixtures/triton/elementwise.npz from DIR")
    ap.add_argument("--fixtures", default="fixtures")
    a = ap.parse_args(argv)
    if a.fixture:
        print(write_fixture_from(a.fixture, a.fixtures))
        return 0
    if not a.out:
        ap.error("give --out DIR (record) or --fixture DIR (write the fixture)")
    return record(a.out)


if __name__ == "__main__":
    sys.exit(main())
