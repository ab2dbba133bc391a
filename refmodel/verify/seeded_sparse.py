"""The sparse GPU fuzz engine's input generator in numpy: everything
``gpu.kernels.sparse_runner.SP_GEN_SOURCE`` draws for one sparse job from ``(seed, batch, tiles)``
— compressed A, B and C element bits (the dense formulas of :mod:`refmodel.verify.seeded`), the
metadata nibbles (legal 2:4 / 1:2, or in one 2:4 tile in :data:`ANY_NIBBLE_ONE_IN` any 4-bit nibble)
and the 32-bit garbage of every sp-meta register — so the ``device_model_sparse`` fixtures, which
hold only seeds and sha256 digests, can be rebuilt on a CPU with no compiler and no GPU.

:func:`sparse_jobs_plan` is the list of jobs those fixtures cover (every sparse form once).
Pure CPU: nothing here imports gpu/ (the tests hold this equal to the C++ bit for bit).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .seeded import FAMILIES, generate_operand, key, mix, tile_families

KEY_META, KEY_GARBAGE = 4, 5          # hash keys of the metadata and the register garbage (0 A, 1 B, 2 C, 3 families)
ANY_NIBBLE_ONE_IN = 4                 # 2:4 tiles whose nibbles are any 4-bit value (hash of the tile)
LEGAL_NIBBLES = np.array([0x4, 0x8, 0xC, 0x9, 0xD, 0xE], np.uint64)   # wg_sp_nibble's table (idx0 < idx1)

SEED = 20261201                       # the device_model_sparse fixture's seed (job j draws batch j)
TILES = len(FAMILIES)                 # 7 tiles a job: one per family

_U = np.uint64


def _tile_hash(k: int, t: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """wg_mix(key ^ wg_mix((t << 24) ^ inner)) on uint64 arrays."""
    with np.errstate(over="ignore"):
        return mix(_U(k) ^ mix((t.astype(np.uint64) << _U(24)) ^ inner.astype(np.uint64)))


def any_nibble_tiles(k: int, tiles: int) -> np.ndarray:
    """(T,) bool: the 2:4 tiles whose metadata is any 4-bit nibble (``wg_sp_any``), ``k`` the metadata key."""
    t = np.arange(tiles, dtype=np.uint64)
    return (_tile_hash(k, t, np.full(tiles, 0xFFFFFF, np.uint64)) % _U(ANY_NIBBLE_ONE_IN)) == _U(0)


def metadata(k: int, tiles: int, meta_cols: int, tf32: bool) -> np.ndarray:
    """(T, 64, meta_cols) uint8 nibbles (``wg_sp_nibble``): tf32 0b0100 / 0b1110; 2:4 a legal nibble
    of :data:`LEGAL_NIBBLES`, or any 4-bit nibble in the tiles of :func:`any_nibble_tiles`."""
    t = np.arange(tiles, dtype=np.uint64)[:, None, None]
    r = np.arange(64, dtype=np.uint64)[None, :, None]
    c = np.arange(meta_cols, dtype=np.uint64)[None, None, :]
    h = _tile_hash(k, t, ((r & _U(0xFFF)) << _U(12)) ^ (c & _U(0xFFF)))
    if tf32:
        return np.where(((h >> _U(7)) & _U(1)) != 0, _U(0xE), _U(0x4)).astype(np.uint8)
    anyn = np.broadcast_to(any_nibble_tiles(k, tiles)[:, None, None], h.shape)
    return np.where(anyn, (h >> _U(11)) & _U(15), LEGAL_NIBBLES[((h >> _U(11)) % _U(6)).astype(np.int64)]).astype(np.uint8)


def garbage(k: int, tiles: int) -> np.ndarray:
    """(T, 128) uint32: the fill of every thread's sp-meta register (``wg_sp_garbage``)."""
    t = np.arange(tiles, dtype=np.uint64)[:, None]
    th = np.arange(128, dtype=np.uint64)[None, :]
    return ((_tile_hash(k, t, th & _U(0xFFF)) >> _U(16)) & _U(0xFFFFFFFF)).astype(np.uint32)


def generate_sparse(job: dict[str, Any] | str, seed: int, batch: int, tiles: int) -> dict[str, np.ndarray]:
    """A sparse job's batch (``job``: a dict with ``instr``, or the instruction): ``a`` (T, 64, K/2),
    ``b`` (T, K, N), ``c`` (T, 64, N) element bits (uint32), ``meta`` (T, 64, K/4; tf32 K/2) uint8
    nibbles, ``garbage`` (T, 128) uint32, ``fams`` (T,) int32 — what
    ``gpu.kernels.sparse_runner.SparseRunner.generate`` builds on the GPU."""
    from ..errors import InputError
    from ..wgmma_sp_forms import parse_wgmma_sp

    f = parse_wgmma_sp(job if isinstance(job, str) else job["instr"])
    T = int(tiles)
    if T < 1:
        raise InputError(f"tiles must be a positive number of tiles, got {tiles!r}")
    fams = tile_families(seed, batch, T)
    out = {"fams": fams}
    for i, (name, dt, rows, cols, kdim) in enumerate((("a", f.dtype_a, 64, f.k_compressed, 1),
                                                      ("b", f.dtype_b, f.k, f.n, 0),
                                                      ("c", f.dtype_d, 64, f.n, -1))):
        out[name] = generate_operand(key(seed, batch, i), fams, rows, cols, kdim, dt)
    out["meta"] = metadata(key(seed, batch, KEY_META), T, f.meta_cols, f.dtype_a == "tf32")
    out["garbage"] = garbage(key(seed, batch, KEY_GARBAGE), T)
    return out


def typed_sparse(instr: str, bits: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bits of :func:`generate_sparse` -> the typed (a, meta, b, c) refmodel.numerics.sparse.wgmma_sp takes."""
    from ..wgmma_sp_forms import parse_wgmma_sp
    from .seeded import typed

    f = parse_wgmma_sp(instr)
    a, b, c = typed((f.dtype_a, f.dtype_b, f.dtype_d), {k: bits[k] for k in ("a", "b", "c")})
    return a, np.asarray(bits["meta"], np.uint8), b, c


def job_variants(form) -> list[tuple[bool, int, int, tuple[int, int]]]:
    """Every (rs, sp_sel, scale_d, (imm_scale_a, imm_scale_b)) of a sparse form."""
    imms = [(1, 1), (-1, 1), (1, -1), (-1, -1)] if form.has_imm_scale else [(1, 1)]
    return [(rs, sel, sd, imm) for sel in form.sp_sels for imm in imms for sd in (1, 0) for rs in (False, True)]


VARIANT_STRIDE = 7   # coprime to every variant count (4, 16, 32): the variants cycle without following N


def sparse_jobs_plan(forms=None) -> list[dict[str, Any]]:
    """The jobs of the ``device_model_sparse`` fixture: every sparse form once, in
    refmodel.wgmma_sp_forms order.  Within each type mix (the forms that differ only in N, in
    order), form ``k`` takes variant ``k * VARIANT_STRIDE mod V`` of :func:`job_variants` (V of them),
    so every SS/RS x sp-sel x scale-d x imm-scale combination of the mix appears (each mix has at
    least V forms).  Job ``j`` draws batch ``j`` of :data:`SEED`, :data:`TILES` tiles."""
    from ..wgmma_sp_forms import WGMMA_SP_FORMS

    forms = WGMMA_SP_FORMS if forms is None else forms
    seen: dict[tuple, int] = {}
    jobs = []
    for f in forms:
        mix_key = (f.dtype_a, f.dtype_b, f.dtype_d, f.satfinite)
        k = seen.get(mix_key, 0)
        seen[mix_key] = k + 1
        vs = job_variants(f)
        rs, sel, sd, imm = vs[(k * VARIANT_STRIDE) % len(vs)]
        jobs.append({"instr": f.instr, "rs": rs, "sp_sel": sel, "scale_d": sd, "imm_scale_a": imm[0],
                     "imm_scale_b": imm[1]})
    return jobs


def model_bits(job: dict[str, Any], bits: dict[str, np.ndarray]) -> np.ndarray:
    """refmodel.numerics.sparse.wgmma_sp's D bits (T, 64*N) uint32 (f16 zero-extended, s32 as uint32)
    of a batch of :func:`generate_sparse` — the layout of SparseRunner.model / .hardware outputs."""
    from ..dtypes import bits_of
    from ..numerics.sparse import wgmma_sp

    a, meta, b, c = typed_sparse(job["instr"], bits)
    d = wgmma_sp(job["instr"], a, meta, b, c, sp_sel=int(job["sp_sel"]), scale_d=bool(job["scale_d"]),
                 imm_scale_a=int(job["imm_scale_a"]), imm_scale_b=int(job["imm_scale_b"]))
    return bits_of(np.ascontiguousarray(d)).reshape(a.shape[0], -1).astype(np.uint32)


def digest(bits: np.ndarray) -> bytes:
    """sha256 of output bits as little-endian uint32 (gpu.record.device_model.digest)."""
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(bits, dtype="<u4").tobytes()).digest()


__all__ = ["ANY_NIBBLE_ONE_IN", "KEY_GARBAGE", "KEY_META", "LEGAL_NIBBLES", "SEED", "TILES", "any_nibble_tiles",
           "digest", "garbage", "generate_sparse", "job_variants", "metadata", "model_bits", "sparse_jobs_plan",
           "typed_sparse"]
