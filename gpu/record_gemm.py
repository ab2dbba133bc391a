"""Verify the FP8 GEMM kernel (gpu/gemm_fp8.py) against refmodel.gemm bit for bit on the H200 and
record small cases as fixtures (kind ``gemm_kernel``).

    python -m gpu.record_gemm --out fixtures          # checks (incl. 4096^3) + fixtures
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from pathlib import Path

import numpy as np

SEED = 20261201


def inputs(M: int, N: int, K: int, family: str, seed: int):
    """e4m3 codes a (M, K), b_nk (N, K) and f32 scales of a family: 'normal' (N(0, 1)*2^e
    rounded to e4m3), 'bits' (every code, NaN included), 'wide' (exponents across the range)."""
    import ml_dtypes

    rng = np.random.default_rng([SEED, seed, zlib.crc32(family.encode())])
    if family == "bits":
        a = rng.integers(0, 256, (M, K), dtype=np.uint8)
        b = rng.integers(0, 256, (N, K), dtype=np.uint8)
    else:
        spread = 6 if family == "wide" else 1
        a = (rng.standard_normal((M, K)) * 2.0 ** rng.integers(-spread, spread + 1, (M, K))).astype(np.float32)
        b = (rng.standard_normal((N, K)) * 2.0 ** rng.integers(-spread, spread + 1, (N, K))).astype(np.float32)
        a = np.clip(a, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
        b = np.clip(b, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    KB, NB = K // 128, -(-N // 128)
    sa = (2.0 ** rng.integers(-3, 4, (M, KB)) * rng.uniform(0.5, 1.5, (M, KB))).astype(np.float32)
    sb = (2.0 ** rng.integers(-3, 4, (KB, NB)) * rng.uniform(0.5, 1.5, (KB, NB))).astype(np.float32)
    return a, b, sa, sb


CHECKS = [  # (M, N, K, family, promote, out)
    (4096, 4096, 4096, "normal", True, "bf16"),
    (4096, 4096, 4096, "normal", False, "bf16"),
    (4096, 4096, 4096, "wide", True, "f32"),
    (4096, 4096, 4096, "bits", False, "f32"),
    (1008, 1040, 1024, "normal", True, "bf16"),
    (1008, 1040, 1024, "bits", True, "bf16"),
    (1008, 1040, 1024, "wide", False, "f32"),
    (208, 400, 512, "normal", False, "bf16"),
]
STORE = [(192, 272, 512, "normal", True, "bf16"), (128, 144, 256, "bits", False, "f32"),
         (144, 160, 384, "wide", True, "f32")]


def run(out: Path | None, log=print) -> int:
    import cupy as cp

    from refmodel.dtypes import bits_of
    from refmodel.verify.fixtures import host_provenance, write_fixture

    from .gemm_fp8 import GemmConfig, gemm_fp8, reference
    from .runtime import device_info

    bad_total = compared = 0
    for i, (M, N, K, fam, promote, o) in enumerate(STORE + CHECKS):
        cfg = GemmConfig(promote=promote, out=o)
        a, b, sa, sb = inputs(M, N, K, fam, i)
        t0 = time.time()
        d, _ = gemm_fp8(a, b, sa if promote else None, sb if promote else None, cfg=cfg)
        hw = cp.asnumpy(d)
        ref = reference(a, b, sa if promote else None, sb if promote else None, cfg=cfg)
        refb = bits_of(ref)
        bad = int(np.count_nonzero(hw.view(refb.dtype) != refb))
        compared += hw.size
        bad_total += bad
        log(f"{M}x{N}x{K} {fam:<6} promote={int(promote)} out={o}: {hw.size} outputs, {bad} mismatches "
            f"({time.time() - t0:.1f} s)")
        if (M, N, K, fam, promote, o) in STORE and out is not None and not bad:
            prov = {**device_info(), **host_provenance(), "seed": SEED, "recorder": "gpu.record_gemm"}
            write_fixture("gemm", f"gemm_{M}x{N}x{K}_{fam}_p{int(promote)}_{o}",
                          {"a": a, "b_nk": b, "scale_a": sa, "scale_b": sb, "d": hw.view(refb.dtype)},
                          kind="gemm_kernel", cases=int(hw.size),
                          meta={"M": M, "N": N, "K": K, "family": fam, "promote": promote, "out": o,
                                "schedule": "refmodel.gemm(m64n128k32 e4m3 chain, promote_every=4 with 1x128 / "
                                            "128x128 scales, fma)" if promote else
                                            "refmodel.gemm(m64n128k32 e4m3 chain over all K)"},
                          provenance=prov, root=out)
    log(f"gemm kernel: {compared} outputs compared with refmodel.gemm, {bad_total} mismatches")
    return 1 if bad_total else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, help="fixtures root (omit: check only)")
    p.add_argument("--races", default=None, help="run the broken variants instead; write a JSON report here")
    p.add_argument("--race-one", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    from refmodel.numerics.gemm import gemm  # noqa: F401  the model must exist (fail loudly)

    if a.race_one:
        import json

        print(json.dumps(race_one(None if a.race_one == "none" else a.race_one)))
        return 0
    if a.races:
        import json

        Path(a.races).write_text(json.dumps(races(), indent=1))
        return 0
    return run(Path(a.out) if a.out else None)



def race_one(broken: str | None) -> dict:
    """One variant through gpu.userkernel.fuzz_user_kernel (adversarial families, bit-for-bit diff
    with refmodel.gemm, shrinking of the first mismatch)."""
    import cupy as cp
    import ml_dtypes

    from .gemm_fp8 import INSTR, GemmConfig, gemm_fp8
    from .userkernel import Schedule, fuzz_user_kernel

    cfg = GemmConfig(promote=True, out="bf16", broken=broken)

    def run(a, b_nk, sa, sb):
        d, _ = gemm_fp8(np.ascontiguousarray(a), np.ascontiguousarray(b_nk), sa, sb, cfg=cfg)
        return cp.asnumpy(d).view(ml_dtypes.bfloat16)

    rep = fuzz_user_kernel(run, Schedule(INSTR, promote_every=4, out_dtype="bf16"), m=256, n=256, k=2048,
                           cases=8, seed=7)
    return {"cases": rep.cases, "outputs": rep.outputs, "mismatches": rep.mismatches, "minimal": rep.minimal}


def races(log=print) -> dict:
    """The good kernel and each deliberately broken variant, each in its own process (a variant
    may fault the device): outcome 'ok', 'wrong bits' (with the shrunk reproducer) or 'fault'."""
    import json
    import subprocess

    out = {}
    for broken in ("none", "lax_wait", "no_proxy_fence", "early_reuse"):
        r = subprocess.run([sys.executable, "-m", "gpu.record_gemm", "--race-one", broken],
                           capture_output=True, text=True, timeout=300)
        lines = [x for x in r.stdout.splitlines() if x.startswith("{")]
        if r.returncode == 0 and lines:
            res = json.loads(lines[-1])
            res["outcome"] = "wrong bits" if res["mismatches"] else "ok"
        else:
            tail = (r.stderr.strip().splitlines() or ["?"])[-1]
            res = {"outcome": "fault", "error": tail[-200:]}
        out[broken] = res
        log(f"{broken:<15} {json.dumps(res)[:400]}")
    return out

if __name__ == "__main__":
    sys.exit(main())
