"""Seeded inputs of the ``mma.sync`` fixtures: :mod:`refmodel.verify.seeded`'s counter-based families,
extended to the types only mma.sync has (s4, u4, b1, f64).

A batch of ``tiles`` warps holds ``problems`` = tiles (4 x tiles for the quad-pair form) independent
products; problem ``p`` is in family ``tile_families(seed, batch, problems)[p]``.  Every element's code
comes from ``(seed, batch, operand, problem, row, col)`` alone, so the fixtures keep only seeds and the
digests of the hardware's outputs.
"""

from __future__ import annotations

import numpy as np

from .._parallel import parallel_ranges
from ..mma_sync_forms import MmaSyncForm, from_codes, parse_mma_sync
from .seeded import FORMATS, _generate_tiles, formula_codes, key, tile_families

#: seeded's formats plus the narrow integers of mma.sync (4-bit and 1-bit, unsigned codes)
MMA_FORMATS = {**FORMATS, "s4": (0, 0, 4, 1), "u4": (0, 0, 4, 2), "b1": (0, 0, 1, 2)}



def f64_operand(k: int, fams: np.ndarray, rows: int, cols: int, kdim: int) -> np.ndarray:
    """(P, rows, cols) uint64 codes of an f64 operand: the float families of
    :func:`refmodel.verify.seeded.generate_operand_formula` with 11 exponent and 52 mantissa bits (the
    mantissa from a third hash, so all 52 bits vary; "bits" takes all 64 bits of the hash)."""
    return np.ascontiguousarray(formula_codes(k, fams, rows, cols, kdim, 11, 52, 64, 0), dtype=np.uint64)


def operand_codes(k: int, fams: np.ndarray, rows: int, cols: int, kdim: int, fmt: str) -> np.ndarray:
    """(P, rows, cols) uint64 codes of one operand in ``fmt`` (kdim: 1 A, 0 B, -1 C, as in seeded)."""
    if fmt == "f64":
        return f64_operand(k, fams, rows, cols, kdim)
    ebits, mbits, width, ik = MMA_FORMATS[fmt]
    fams = np.ascontiguousarray(fams, dtype=np.int64)
    out = np.empty((fams.size, rows, cols), np.uint32)
    parallel_ranges(_generate_tiles, fams.size, np.uint64(int(k) & 0xFFFFFFFFFFFFFFFF), fams, int(kdim), ebits,
                    mbits, width, ik, out, work=out.size * 16)
    return out.astype(np.uint64)


def problems(form: MmaSyncForm, tiles: int) -> int:
    """Independent products in ``tiles`` warps' instructions."""
    return tiles * (4 if form.quad_pair else 1)


def generate(form, seed: int, batch: int, tiles: int) -> dict[str, np.ndarray]:
    """Codes (uint64) of A (P, M, K), B (P, K, 8), C (P, M, 8) and the families (P,) of one batch."""
    f = form if isinstance(form, MmaSyncForm) else parse_mma_sync(form)
    P = problems(f, tiles)
    fams = tile_families(seed, batch, P)
    shapes = (("a", f.dtype_a, f.m, f.k, 1), ("b", f.dtype_b, f.k, f.n, 0), ("c", f.dtype_c, f.m, f.n, -1))
    out = {name: operand_codes(key(seed, batch, i), fams, rows, cols, kdim, fmt)
           for i, (name, fmt, rows, cols, kdim) in enumerate(shapes)}
    out["family"] = fams
    return out


def typed(form, codes: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The typed A, B, C of :func:`generate`'s codes, in warp tiles: (T, M, K) ... or (T, 4, M, K) ...
    for the quad-pair form."""
    f = form if isinstance(form, MmaSyncForm) else parse_mma_sync(form)
    out = []
    for name, t in zip("abc", (f.dtype_a, f.dtype_b, f.dtype_c)):
        x = from_codes(codes[name], t)
        if f.quad_pair:
            x = x.reshape((-1, 4) + x.shape[1:])
        out.append(x)
    return out[0], out[1], out[2]


def matrix_codes(fmt_a: str, fmt_b: str, family: str, seed: int, index: int, shape: tuple[int, int, int]):
    """A (M, K) and B (K, N) codes (uint64) of one whole-matrix draw in one family of
    :data:`refmodel.verify.seeded.FAMILIES` (the recordings of gpu.record.triton_lowering): A from key
    (seed, index, 0), B from key (seed, index, 1); in the cancel family products of neighbouring k cancel."""
    from .seeded import FAMILIES as ALL

    M, K, N = shape
    fams = np.array([ALL.index(family)])
    a = operand_codes(key(seed, index, 0), fams, M, K, 1, fmt_a)[0]
    b = operand_codes(key(seed, index, 1), fams, K, N, 0, fmt_b)[0]
    return a, b


def batch_codes(fmt: str, family: str, seed: int, base: int, shape: tuple[int, int, int, int],
                bias: bool = False) -> dict[str, np.ndarray]:
    """Codes (uint64) of a batched GEMM call's operands (the recordings of gpu.record.inductor's templates):
    ``a`` (B, M, K) and ``b`` (B, K, N), batch i from :func:`matrix_codes` at index ``base + 8 * i``, and with
    ``bias`` a (N,) vector (the A row of index ``base + 8 * B``)."""
    B, M, K, N = shape
    pairs = [matrix_codes(fmt, fmt, family, seed, base + 8 * i, (M, K, N)) for i in range(B)]
    out = {"a": np.stack([p[0] for p in pairs]), "b": np.stack([p[1] for p in pairs])}
    if bias:
        out["bias"] = matrix_codes(fmt, fmt, family, seed, base + 8 * B, (1, N, 1))[0][0]
    return out


def tensor_codes(fmt: str, family: str, seed: int, index: int, shape: tuple[int, ...]) -> np.ndarray:
    """Codes (uint64) of one tensor of ``shape`` in one family: the A operand of :func:`matrix_codes` at
    ``index`` with M the product of the leading dimensions and K the last (q, k, v of the attention
    recordings)."""
    rows = int(np.prod(shape[:-1]))
    return matrix_codes(fmt, fmt, family, seed, index, (rows, int(shape[-1]), 1))[0].reshape(shape)


def typed_matrix(codes: np.ndarray, fmt: str) -> np.ndarray:
    """Typed values of :func:`matrix_codes` codes (f32 as float32)."""
    if fmt == "f32":
        return np.ascontiguousarray(codes.astype(np.uint32)).view(np.float32)
    return from_codes(codes, fmt)
