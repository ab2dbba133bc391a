"""Verify the FP8 GEMM kernel (gpu/kernels/gemm_fp8.py) against refmodel.gemm bit for bit on the H200 and
record small cases as fixtures (kind ``gemm_kernel``).

    python -m gpu.record.gemm --out fixtures          # checks (incl. 4096^3) + fixtures
    python -m gpu.record.gemm --check-only [--configs "" "schedule=simple" "bn=128,stages=4" ...]

``--check-only`` writes nothing.  ``--configs`` runs every case under each listed kernel config
(``gpu.kernels.gemm_fp8.parse_config`` items without promote/out, which come from the case; a case a
config cannot run, e.g. bn=256 with promotion, is skipped); the default is the default config.
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
    rounded to e4m3), 'bits' (every code, NaN included), 'wide' (exponents across the range), 'tiny'
    (the 'wide' codes with scales near 2^-66 each, so that sa * sb and the promoted sums are float32
    subnormals or near them: a kernel that flushes subnormals to zero differs)."""
    import ml_dtypes

    rng = np.random.default_rng([SEED, seed, zlib.crc32(family.encode())])
    if family == "bits":
        a = rng.integers(0, 256, (M, K), dtype=np.uint8)
        b = rng.integers(0, 256, (N, K), dtype=np.uint8)
    else:
        spread = 6 if family in ("wide", "tiny") else 1
        a = (rng.standard_normal((M, K)) * 2.0 ** rng.integers(-spread, spread + 1, (M, K))).astype(np.float32)
        b = (rng.standard_normal((N, K)) * 2.0 ** rng.integers(-spread, spread + 1, (N, K))).astype(np.float32)
        a = np.clip(a, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
        b = np.clip(b, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    KB, NB = K // 128, -(-N // 128)
    sa = (2.0 ** rng.integers(-3, 4, (M, KB)) * rng.uniform(0.5, 1.5, (M, KB))).astype(np.float32)
    sb = (2.0 ** rng.integers(-3, 4, (KB, NB)) * rng.uniform(0.5, 1.5, (KB, NB))).astype(np.float32)
    if family == "tiny":
        sa, sb = sa * np.float32(2.0 ** -66), sb * np.float32(2.0 ** -66)    # exact: still normal float32
    return a, b, sa, sb


def scales_for(cfg, sa, sb):
    """The scales a kernel config takes from a case's (M, K/128) and (K/128, N/128) ones: as they are, or
    with per-tensor scales (``scales="tensor"``) their first values (non-powers of two: applied in the
    epilogue, not at each promotion, they round differently)."""
    if cfg.scales == "tensor":
        return np.float32(sa.flat[0]), np.float32(sb.flat[0])
    return sa, sb


CHECKS = [  # (M, N, K, family, promote, out)
    (4096, 4096, 4096, "normal", True, "bf16"),
    (4096, 4096, 4096, "normal", False, "bf16"),
    (4096, 4096, 4096, "wide", True, "f32"),
    (4096, 4096, 4096, "bits", False, "f32"),
    (1008, 1040, 1024, "normal", True, "bf16"),
    (1008, 1040, 1024, "bits", True, "bf16"),
    (1008, 1040, 1024, "wide", False, "f32"),
    (208, 400, 512, "normal", False, "bf16"),
    (1008, 1040, 1024, "tiny", True, "f32"),
    (1008, 1040, 1024, "tiny", True, "bf16"),
]
STORE = [(192, 272, 512, "normal", True, "bf16"), (128, 144, 256, "bits", False, "f32"),
         (144, 160, 384, "wide", True, "f32"), (128, 144, 256, "tiny", True, "f32")]


def run(out: Path | None, log=print, configs: list[str] | None = None) -> int:
    import cupy as cp

    from gpu.kernels.gemm_fp8 import gemm_fp8, parse_config, reference
    from gpu.kernels.runtime import device_info
    from refmodel.dtypes import bits_of
    from refmodel.errors import InputError
    from refmodel.verify.fixtures import host_provenance, write_fixture

    configs = [""] if not configs else configs
    for text in configs:
        if "promote" in text or "out=" in text:
            raise InputError(f"--configs items take promote and out from each case; got {text!r}")
        parse_config(text)      # fail early on a bad item
    bad_total = compared = 0
    for i, (M, N, K, fam, promote, o) in enumerate(STORE + CHECKS):
        a, b, sa, sb = inputs(M, N, K, fam, i)
        refs: dict = {}     # per recipe: blockwise scales, or per tensor
        stored: set = set()
        for j, text in enumerate(configs):
            try:
                cfg = parse_config(",".join(x for x in (text, f"promote={int(promote)}", f"out={o}") if x))
            except InputError as e:
                log(f"{M}x{N}x{K} {fam:<6} promote={int(promote)} out={o} [{text or 'default'}]: skipped ({e})")
                continue
            t0 = time.time()
            csa, csb = scales_for(cfg, sa, sb)
            d, _ = gemm_fp8(a, b, csa if promote else None, csb if promote else None, cfg=cfg)
            hw = cp.asnumpy(d)
            recipe = promote and cfg.scales == "tensor"
            if recipe not in refs:
                refs[recipe] = reference(a, b, csa if promote else None, csb if promote else None, cfg=cfg)
            ref = refs[recipe]
            refb = bits_of(ref)
            bad = int(np.count_nonzero(hw.view(refb.dtype) != refb))
            compared += hw.size
            bad_total += bad
            log(f"{M}x{N}x{K} {fam:<6} promote={int(promote)} out={o} [{cfg.name}]: {hw.size} outputs, {bad} mismatches "
                f"({time.time() - t0:.1f} s)")
            # the first config of each recipe (blockwise or per-tensor scales) stores the STORE cases
            if recipe not in stored and (M, N, K, fam, promote, o) in STORE and out is not None and not bad:
                stored.add(recipe)
                prov = {**device_info(), **host_provenance(), "seed": SEED, "recorder": "gpu.record.gemm",
                        "config": cfg.name}
                sched = ("refmodel.scaled_mm(use_fast_accum=False): m64n128k32 e4m3 chain, promote_every=4, "
                         "acc += partial, D = RN(RN(sa*sb)*acc)" if recipe else
                         "refmodel.gemm(m64n128k32 e4m3 chain, promote_every=4 with 1x128 / 128x128 scales, fma)"
                         if promote else "refmodel.gemm(m64n128k32 e4m3 chain over all K)")
                meta = {"M": M, "N": N, "K": K, "family": fam, "promote": promote, "out": o, "schedule": sched}
                if recipe:
                    meta["recipe"] = "tensor"
                write_fixture("gemm", f"gemm_{M}x{N}x{K}_{fam}_p{int(promote)}_{o}" + ("_st" if recipe else ""),
                              {"a": a, "b_nk": b, "scale_a": np.asarray(csa), "scale_b": np.asarray(csb),
                               "d": hw.view(refb.dtype)},
                              kind="gemm_kernel", cases=int(hw.size), meta=meta, provenance=prov, root=out)
    log(f"gemm kernel: {compared} outputs compared with refmodel.gemm, {bad_total} mismatches")
    return 1 if bad_total else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, help="fixtures root (omit: check only)")
    p.add_argument("--check-only", action="store_true", help="compare only, write no fixtures (overrides --out)")
    p.add_argument("--configs", nargs="*", default=None,
                   help="kernel configs to check, e.g. '' 'schedule=simple' 'bn=128' (default: the default config)")
    a = p.parse_args(argv)
    from refmodel.numerics.gemm import gemm  # noqa: F401  the model must exist (fail loudly)

    return run(None if a.check_only or not a.out else Path(a.out), configs=a.configs)


if __name__ == "__main__":
    sys.exit(main())
