"""Replayer of the ``mma_sync_forms`` fixtures (fixtures/mma_sync/forms.npz, recorded by
``python -m gpu.record.mma_sync`` on the H200): every sm_90a ``mma.sync`` form on the seeded input families.

The fixture holds, per form and seed, the sha256 of the hardware's D codes of each family's problems
(``hw_sha256``, (forms, seeds, 7, 32)) and the raw D codes of the first ``raw_problems`` problems of the
first seed (``raw32`` for 16/32-bit D, ``raw64`` for f64, the forms in table order).  The replayer rebuilds
the inputs (:mod:`refmodel.verify.seeded_mma`), runs :func:`refmodel.numerics.mma_sync.mma_sync`, compares
the raw codes element by element and every family's digest; a differing digest counts all that family's
outputs as mismatches.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ..mma_sync_forms import element_codes, parse_mma_sync
from .replay import Result, _count, meta_error, replayer
from .seeded import FAMILIES

KIND = "mma_sync_forms"


def d_codes(form, d) -> np.ndarray:
    """(P, M, 8) little-endian D codes as recorded: uint32 (f16 zero-extended, f32, s32) or uint64 (f64)."""
    codes = element_codes(d, form.dtype_d).reshape((-1, form.m, form.n))
    return np.ascontiguousarray(codes, dtype="<u8" if form.dtype_d == "f64" else "<u4")


def family_digests(codes: np.ndarray, fams: np.ndarray) -> np.ndarray:
    """(7, 32) uint8: sha256 of the D codes of each family's problems, in problem order."""
    return np.stack([np.frombuffer(hashlib.sha256(np.ascontiguousarray(codes[fams == k]).tobytes()).digest(),
                                   np.uint8) for k in range(len(FAMILIES))])


@replayer(KIND)
def replay_mma_sync(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """Every form and seed of the file through refmodel: raw codes bit for bit, family digests."""
    from ..numerics.mma_sync import mma_sync
    from .seeded_mma import generate, typed

    instrs, seeds = list(meta.get("instrs") or []), list(meta.get("seeds") or [])
    tiles, nraw = int(meta.get("tiles", 0)), int(meta.get("raw_problems", 0))
    if set(arrays) != {"hw_sha256", "raw32", "raw64"}:
        raise meta_error(f"an {KIND} fixture holds hw_sha256, raw32 and raw64, this one {sorted(arrays)}")
    hw = arrays["hw_sha256"]
    if not instrs or not seeds or tiles < 1 or hw.shape != (len(instrs), len(seeds), len(FAMILIES), 32):
        raise meta_error(f"{len(instrs)} forms x {len(seeds)} seeds but digests of shape {hw.shape}")
    forms = [parse_mma_sync(i) for i in instrs]
    raw = {"raw32": arrays["raw32"], "raw64": arrays["raw64"]}
    need = {"raw32": 0, "raw64": 0}
    for f in forms:
        need["raw64" if f.dtype_d == "f64" else "raw32"] += nraw * f.m * f.n
    for k, n in need.items():
        if raw[k].size != n:
            raise meta_error(f"{k} holds {raw[k].size} codes, the forms' first {nraw} problems need {n}")
    off = {"raw32": 0, "raw64": 0}
    total = Result(0, 0)
    for i, (instr, form) in enumerate(zip(instrs, forms)):
        for s, seed in enumerate(seeds):
            codes = generate(form, int(seed), i, tiles)
            a, b, c = typed(form, codes)
            got = d_codes(form, mma_sync(instr, a, b, c))
            fams = codes["family"]
            if s == 0 and nraw:
                key = "raw64" if form.dtype_d == "f64" else "raw32"
                n = got[:nraw].size
                want = raw[key][off[key]:off[key] + n]
                off[key] += n
                total.add(_count(got[:nraw].reshape(-1), want, f"{form.name} seed {seed}", {}))
            mine = family_digests(got, fams)
            for k, name in enumerate(FAMILIES):
                size = int(np.count_nonzero(fams == k)) * form.m * form.n
                ok = mine[k].tobytes() == hw[i, s, k].tobytes()
                total.add(Result(size, 0 if ok else size,
                                 [] if ok else [f"{form.name} seed {seed} family {name}: refmodel's digest differs"]))
    return total
