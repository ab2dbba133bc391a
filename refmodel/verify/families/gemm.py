"""The gemm engine's input families: FP8 operands with 1 x 128 / 128 x 128 block scales for a
user's FP8 GEMM kernel (``gpu.fuzz.userkernel``), from a numpy Generator; what each family
stresses is in the catalogue (:mod:`refmodel.verify.families`)."""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...numerics.fp8 import encode
from ...wgmma_forms import parse_wgmma
from . import names

FAMILIES = names("gemm")   # normal, wide, specials, sparse, uniform_scales


def make_case(rng: np.random.Generator, family: str, m: int, n: int, k: int, sched):
    """(a (M,K) codes, b_nk (N,K) codes, scale_a, scale_b) of one input family; ``sched`` names the
    wgmma instruction (``.instr``) and the scale block (``.scale_block``)."""
    f = parse_wgmma(sched.instr)
    kb, nb = k // sched.scale_block, -(-n // sched.scale_block)
    if family in ("normal", "uniform_scales", "sparse"):
        a = rng.standard_normal((m, k)) * 64
        b = rng.standard_normal((n, k)) * 64
    elif family == "wide":
        a = rng.standard_normal((m, k)) * 2.0 ** rng.integers(-12, 9, (m, k))
        b = rng.standard_normal((n, k)) * 2.0 ** rng.integers(-12, 9, (n, k))
    elif family == "specials":
        a = rng.standard_normal((m, k)) * 2.0 ** rng.integers(-9, 9, (m, k))
        b = rng.standard_normal((n, k)) * 2.0 ** rng.integers(-9, 9, (n, k))
        a[rng.random((m, k)) < 0.002] = 1e9          # saturates to max
        b[rng.random((n, k)) < 0.01] = 0.0
    else:
        raise InputError(f"unknown input family {family!r}; known: {', '.join(FAMILIES)}")
    if family == "sparse":
        a[rng.random((m, k)) < 0.9] = 0.0
    ac = encode(a, f.dtype_a)
    bc = encode(b, f.dtype_b)
    if family == "uniform_scales":
        sa = np.ones((m, kb), np.float32)
        sb = np.ones((kb, nb), np.float32)
    else:
        sa = (rng.uniform(0.5, 2.0, (m, kb)) * 2.0 ** rng.integers(-8, 4, (m, kb))).astype(np.float32)
        sb = (rng.uniform(0.5, 2.0, (kb, nb)) * 2.0 ** rng.integers(-8, 4, (kb, nb))).astype(np.float32)
    return ac, bc, sa, sb
