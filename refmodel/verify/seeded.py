"""The GPU fuzzer's input generator in numpy: every element's bits from ``(seed, batch, operand,
tile, row, col)`` by a counter-based hash, in one of :data:`FAMILIES` per tile.

gpu/fuzz/gpu_engine.py runs the same formulas as CUDA C++ on the GPU (and, compiled for the host, in
the tests, which check the three agree bit for bit), so any batch of a GPU campaign — and the
``device_model`` fixtures, which hold only seeds and hashes — can be rebuilt on a CPU with no
compiler.
"""

from __future__ import annotations

import hashlib

import numba
import numpy as np

from .._parallel import parallel_ranges
from .families import names as family_names

FAMILIES = family_names("seeded")   # ("bits", "narrow", "wide", "special", "cancel", "zero", "subnormal")
_BITS, _NARROW, _WIDE, _SPECIAL, _CANCEL, _ZERO, _SUBNORMAL = (FAMILIES.index(n) for n in (
    "bits", "narrow", "wide", "special", "cancel", "zero", "subnormal"))

# element formats: (exponent bits, mantissa bits, total bits, integer kind 0 float / 1 signed / 2 unsigned)
FORMATS = {"e4m3": (4, 3, 8, 0), "e5m2": (5, 2, 8, 0), "f16": (5, 10, 16, 0), "bf16": (8, 7, 16, 0),
           "tf32": (8, 23, 32, 0), "f32": (8, 23, 32, 0), "s8": (0, 0, 8, 1), "u8": (0, 0, 8, 2),
           "s32": (0, 0, 32, 1)}

_U = np.uint64


def key(seed: int, batch: int, operand: int) -> int:
    """The hash key of one operand (0 A, 1 B, 2 C; 3 the families) of one batch."""
    h = hashlib.sha256(f"wgref-gen/{seed}/{batch}/{operand}".encode()).digest()
    return int.from_bytes(h[:8], "little")


def tile_families(seed: int, batch: int, tiles: int) -> np.ndarray:
    """The family index (into :data:`FAMILIES`) of every tile of a batch: round robin from a
    seeded start, so every family is in every batch of at least 7 tiles."""
    start = key(seed, batch, 3) % len(FAMILIES)
    return ((np.arange(tiles) + start) % len(FAMILIES)).astype(np.int32)


def mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 arrays (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = z + _U(0x9E3779B97F4A7C15)
        z = (z ^ (z >> _U(30))) * _U(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U(27))) * _U(0x94D049BB133111EB)
    return z ^ (z >> _U(31))


def generate_operand_formula(k: int, fams: np.ndarray, rows: int, cols: int, kdim: int, fmt: str) -> np.ndarray:
    """:func:`generate_operand` as numpy array formulas (the readable version the compiled one is
    tested against).  (T, rows, cols) uint32 element bits of one operand.  ``kdim``: 1 for A (columns are K), 0 for
    B (rows are K), -1 for C.  In the cancel family A[r, k^1] = A[r, k] and B[k^1, j] = -B[k, j]
    (k odd; one in 16 off by one ulp), so pairs of products cancel."""
    return formula_codes(k, fams, rows, cols, kdim, *FORMATS[fmt])


def formula_codes(k: int, fams: np.ndarray, rows: int, cols: int, kdim: int, ebits: int, mbits: int, width: int,
                  ik: int) -> np.ndarray:
    """:func:`generate_operand_formula` for a format given as (exponent bits, mantissa bits, width, integer kind).
    Width 64 (f64, refmodel.verify.seeded_mma) returns uint64 codes whose mantissa comes from a third hash
    (all 52 bits vary) and whose "bits" family takes all 64 bits of the hash; narrower formats are unchanged."""
    T = fams.size
    t = np.arange(T, dtype=np.uint64)[:, None, None]
    r = np.arange(rows, dtype=np.int64)[None, :, None]
    c = np.arange(cols, dtype=np.int64)[None, None, :]
    f = fams.astype(np.int64)[:, None, None]
    hr = np.where((f == _CANCEL) & (kdim == 0), r & ~1, r)
    hc = np.where((f == _CANCEL) & (kdim == 1), c & ~1, c)
    inner = (t << _U(24)) ^ ((hr & 0xFFF).astype(np.uint64) << _U(12)) ^ (hc & 0xFFF).astype(np.uint64)
    h = mix(_U(k) ^ mix(inner))
    h2 = mix(h ^ _U(0xA5A5A5A5))
    wide64 = width == 64
    wmask = np.uint64(0xFFFFFFFFFFFFFFFF if wide64 else 0xFFFFFFFF if width >= 32 else (1 << width) - 1)
    shape = np.broadcast_shapes(h.shape, f.shape)
    f = np.broadcast_to(f, shape)
    if ik:
        x = h & wmask
        ext = np.array([0, int(wmask), (1 << (width - 1)) if ik == 1 else 0, int(wmask) >> 1 if ik == 1 else 1],
                       np.uint64)
        x = np.where(((f == _SPECIAL) | (f == _WIDE)) & ((h2 & _U(3)) != 0), ext[((h2 >> _U(2)) & _U(3)).astype(np.int64)], x)
        x = np.where((f == _ZERO) & ((h2 & _U(31)) != 0), _U(0), x)
        x = np.where(f == _NARROW, ((h & _U(7)) - _U(3)) & _U(0xFFFFFFFF), x)
        return (x & wmask).astype(np.uint32)
    sbit = _U(1 << (ebits + mbits))
    emax = _U((1 << ebits) - 1)
    mmask = _U((1 << mbits) - 1)
    bias = (1 << (ebits - 1)) - 1
    sign = (h >> _U(63)) & _U(1)
    man = (mix(h ^ _U(0x5A5A5A5A5A5A)) if wide64 else (h >> _U(8)) & _U(0xFFFFFFFF)) & mmask
    narrow = _U(bias - 2) + (h >> _U(40)) % _U(5)
    e = np.where(f == _WIDE, _U(1) + (h >> _U(40)) % (emax - _U(1)), narrow)
    e = np.where((f == _SUBNORMAL) & ((h2 & _U(1)) != 0), _U(0), e)
    x = (sign * sbit) | (e << _U(mbits)) | man
    s = sign * sbit
    sp = np.stack([s, s | (emax << _U(mbits)), s | (emax << _U(mbits)) | mmask,
                   s | (emax << _U(mbits)) | (man | _U(1)), s | ((emax - _U(1)) << _U(mbits)) | mmask,
                   s | _U(1), s | (man & mmask), s | (emax << _U(mbits)) | (mmask - _U(1))])
    pick = ((h2 >> _U(3)) & _U(7)).astype(np.int64)
    special = np.take_along_axis(sp, pick[None], 0)[0]
    x = np.where((f == _SPECIAL) & ((h2 & _U(7)) == 0), special, x)
    x = np.where((f == _ZERO) & ((h2 & _U(31)) != 0), s, x)
    if kdim == 0:
        odd = (f == _CANCEL) & ((r & 1) == 1)
        x = np.where(odd, x ^ sbit, x)
        x = np.where(odd & ((h2 & _U(15)) == 0), x ^ _U(1), x)
    x = np.where(f == _BITS, h if wide64 else (h >> _U(16)) & _U(0xFFFFFFFF), x)
    return (x & wmask).astype(np.uint64 if wide64 else np.uint32)


@numba.njit(cache=True)
def _mix1(z):
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True)
def _generate_tiles(t_lo, t_hi, k, fams, kdim, ebits, mbits, width, ik, out):
    """:func:`generate_operand_formula` element by element, for tiles t_lo .. t_hi of out (T, rows, cols)."""
    rows, cols = out.shape[1], out.shape[2]
    wmask = np.uint64(0xFFFFFFFF) if width >= 32 else np.uint64((1 << width) - 1)
    sbit = np.uint64(1) << np.uint64(ebits + mbits)
    emax = np.uint64((1 << ebits) - 1)
    mmask = np.uint64((1 << mbits) - 1)
    bias = np.uint64((1 << (ebits - 1)) - 1) if ebits > 0 else np.uint64(0)
    ext = np.empty(4, np.uint64)
    ext[0] = 0
    ext[1] = wmask
    ext[2] = (np.uint64(1) << np.uint64(width - 1)) if ik == 1 else np.uint64(0)
    ext[3] = (wmask >> np.uint64(1)) if ik == 1 else np.uint64(1)
    sp = np.empty(8, np.uint64)
    ku = np.uint64(k)
    for t in range(t_lo, t_hi):
        f = fams[t]
        for r in range(rows):
            hr = r & ~1 if (f == _CANCEL and kdim == 0) else r
            for c in range(cols):
                hc = c & ~1 if (f == _CANCEL and kdim == 1) else c
                inner = (np.uint64(t) << np.uint64(24)) ^ (np.uint64(hr & 0xFFF) << np.uint64(12)) \
                    ^ np.uint64(hc & 0xFFF)
                h = _mix1(ku ^ _mix1(inner))
                h2 = _mix1(h ^ np.uint64(0xA5A5A5A5))
                if ik:
                    x = h & wmask
                    if (f == _SPECIAL or f == _WIDE) and (h2 & np.uint64(3)) != 0:
                        x = ext[(h2 >> np.uint64(2)) & np.uint64(3)]
                    if f == _ZERO and (h2 & np.uint64(31)) != 0:
                        x = np.uint64(0)
                    if f == _NARROW:
                        x = ((h & np.uint64(7)) - np.uint64(3)) & np.uint64(0xFFFFFFFF)
                    out[t, r, c] = np.uint32(x & wmask)
                    continue
                sign = (h >> np.uint64(63)) & np.uint64(1)
                man = ((h >> np.uint64(8)) & np.uint64(0xFFFFFFFF)) & mmask
                if f == _WIDE:
                    e = np.uint64(1) + (h >> np.uint64(40)) % (emax - np.uint64(1))
                else:
                    e = bias - np.uint64(2) + (h >> np.uint64(40)) % np.uint64(5)
                if f == _SUBNORMAL and (h2 & np.uint64(1)) != 0:
                    e = np.uint64(0)
                s = sign * sbit
                x = s | (e << np.uint64(mbits)) | man
                if f == _SPECIAL and (h2 & np.uint64(7)) == 0:
                    sp[0] = s
                    sp[1] = s | (emax << np.uint64(mbits))
                    sp[2] = s | (emax << np.uint64(mbits)) | mmask
                    sp[3] = s | (emax << np.uint64(mbits)) | (man | np.uint64(1))
                    sp[4] = s | ((emax - np.uint64(1)) << np.uint64(mbits)) | mmask
                    sp[5] = s | np.uint64(1)
                    sp[6] = s | (man & mmask)
                    sp[7] = s | (emax << np.uint64(mbits)) | (mmask - np.uint64(1))
                    x = sp[(h2 >> np.uint64(3)) & np.uint64(7)]
                if f == _ZERO and (h2 & np.uint64(31)) != 0:
                    x = s
                if kdim == 0 and f == _CANCEL and (r & 1) == 1:
                    x = x ^ sbit
                    if (h2 & np.uint64(15)) == 0:
                        x = x ^ np.uint64(1)
                if f == _BITS:
                    x = (h >> np.uint64(16)) & np.uint64(0xFFFFFFFF)
                out[t, r, c] = np.uint32(x & wmask)


def generate_operand(k: int, fams: np.ndarray, rows: int, cols: int, kdim: int, fmt: str) -> np.ndarray:
    """(T, rows, cols) uint32 element bits of one operand.  ``kdim``: 1 for A (columns are K), 0 for
    B (rows are K), -1 for C.  In the cancel family A[r, k^1] = A[r, k] and B[k^1, j] = -B[k, j]
    (k odd; one in 16 off by one ulp), so pairs of products cancel.  Compiled; the same bits as
    :func:`generate_operand_formula` (tests hold the two equal)."""
    ebits, mbits, width, ik = FORMATS[fmt]
    fams = np.ascontiguousarray(fams, dtype=np.int64)
    out = np.empty((fams.size, rows, cols), np.uint32)
    parallel_ranges(_generate_tiles, fams.size, np.uint64(int(k) & 0xFFFFFFFFFFFFFFFF), fams, int(kdim), ebits, mbits, width,
                    ik, out, work=out.size * 16)
    return out


def generate(dtypes: tuple[str, str, str], k: int, n: int, seed: int, batch: int,
             tiles: int) -> dict[str, np.ndarray]:
    """A (T, 64, k), B (T, k, n), C (T, 64, n) element bits (uint32) of one batch of a wgmma form
    whose A, B and D types are ``dtypes``."""
    fams = tile_families(seed, batch, tiles)
    shapes = (("a", dtypes[0], 64, k, 1), ("b", dtypes[1], k, n, 0), ("c", dtypes[2], 64, n, -1))
    return {name: generate_operand(key(seed, batch, i), fams, rows, cols, kdim, fmt)
            for i, (name, fmt, rows, cols, kdim) in enumerate(shapes)}


def typed(dtypes: tuple[str, str, str], bits: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Element bits (uint32) of :func:`generate` -> the typed A, B, C arrays refmodel takes."""
    from ..dtypes import from_bits

    out = []
    for name, dt in zip(("a", "b", "c"), dtypes):
        x = bits[name]
        if dt in ("s8", "u8"):
            out.append(x.astype(np.uint8).view(np.int8 if dt == "s8" else np.uint8))
        elif dt == "s32":
            out.append(x.view(np.int32))
        else:
            out.append(from_bits(x.astype({8: np.uint8, 16: np.uint16, 32: np.uint32}[FORMATS[dt][2]]), dt))
    return out[0], out[1], out[2]


def variant(i: int, has_imm_scale: bool) -> tuple[bool, tuple[int, int]]:
    """scale-d and imm-scale of the ``i``-th form in the ``device_model`` fixtures (every
    combination appears across the forms)."""
    imm = ((-1, 1)[i % 2], (-1, 1)[(i // 2) % 2]) if has_imm_scale else (1, 1)
    return i % 4 != 3, imm


CHAIN_CYCLE = (2, 3, 4, 8)            # the chain of form i's job in the ``device_model`` jobs fixture
LONG_CHAINS = (16, 32, 64, 128)       # ... and of the long-chain jobs, on every LONG_STRIDE-th form
LONG_STRIDE = 33


def dense_jobs(forms) -> list[dict]:
    """The dense jobs of the ``device_model`` jobs fixture, for the GPU engine's RS operands and
    chains: every form once (RS on odd forms, the chain from :data:`CHAIN_CYCLE`, scale-d and imm
    scales from :func:`variant`), then every :data:`LONG_STRIDE`-th form with a long chain
    (:data:`LONG_CHAINS`) from registers and shared memory by turns.  Job ``j`` draws its inputs
    from batch ``j``."""
    jobs = []
    for i, f in enumerate(forms):
        sd, imm = variant(i, f.has_imm_scale)
        jobs.append({"instr": f.instr, "rs": bool(i % 2), "chain": CHAIN_CYCLE[i % len(CHAIN_CYCLE)],
                     "scale_d": sd, "imm": list(imm)})
    for j, i in enumerate(range(0, len(forms), LONG_STRIDE)):
        f = forms[i]
        sd, imm = variant(i + j, f.has_imm_scale)
        jobs.append({"instr": f.instr, "rs": bool(j % 2), "chain": LONG_CHAINS[j % len(LONG_CHAINS)],
                     "scale_d": sd, "imm": list(imm)})
    return jobs


_LIB_DTYPES = {"bf16": "bfloat16", "f16": "float16", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2",
               "f32": "float32"}


def library_matrices(seed: int, dtype: str, m: int, n: int, k: int, *, exp_range: tuple[int, int] = (-3, 4),
                     lim: float = 1e4) -> tuple[np.ndarray, np.ndarray]:
    """The inputs the library recorders (gpu.record.cublas, gpu.record.cutlass) feed a library call:
    a (m, k) and b (k, n) of ``dtype`` (bf16, f16, e4m3, e5m2, f32), standard normals times 2**e
    (e uniform in ``exp_range``, high end excluded), clipped to ±``lim``, rounded to the dtype.

    numpy's Generator streams are not frozen across numpy versions, so the fixtures keep the
    sha256 of what was fed (:func:`matrix_sha256`) and the replayers check it first."""
    import ml_dtypes

    fp = np.dtype(getattr(ml_dtypes, _LIB_DTYPES[dtype], None) or getattr(np, _LIB_DTYPES[dtype]))
    rng = np.random.default_rng(seed)
    lo, hi = exp_range
    sa = np.exp2(rng.integers(lo, hi, (m, k))).astype(np.float32)
    sb = np.exp2(rng.integers(lo, hi, (k, n))).astype(np.float32)
    a = np.clip(rng.standard_normal((m, k), dtype=np.float32) * sa, -lim, lim).astype(fp)
    b = np.clip(rng.standard_normal((k, n), dtype=np.float32) * sb, -lim, lim).astype(fp)
    return a, b


def matrix_sha256(x: np.ndarray) -> str:
    """sha256 of an array's C-order bytes."""
    return hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()


def prune_rows_2_4_formula(a: np.ndarray) -> np.ndarray:
    """:func:`prune_rows_2_4` by a stable argsort of each group (numpy; the compiled rank rule is
    tested equal)."""
    m, k = a.shape
    mag = np.abs(a.astype(np.float32)).reshape(m, k // 4, 4)
    mag = np.where(np.isnan(mag), np.float32(np.inf), mag)
    order = np.argsort(-mag, axis=-1, kind="stable")
    keep = np.zeros(mag.shape, bool)
    np.put_along_axis(keep, order[..., :2], True, axis=-1)
    out = a.copy().reshape(m, k // 4, 4)
    out[~keep] = 0
    return out.reshape(m, k)


@numba.njit(cache=True, nogil=True)
def _drop_2_of_4(mag, keep):
    """keep[g, i]: element i is among the two largest of group g (NaN largest; ties: the lower index),
    i.e. fewer than two elements come before it in a stable descending sort."""
    for g in range(mag.shape[0]):
        for i in range(4):
            mi = mag[g, i]
            mi = np.inf if mi != mi else mi
            before = 0
            for j in range(4):
                mj = mag[g, j]
                mj = np.inf if mj != mj else mj
                if mj > mi or (mj == mi and j < i):
                    before += 1
            keep[g, i] = before < 2


@numba.njit(cache=True, nogil=True)
def _prune_bits(bits, mask, cap, out):
    """out = bits with the two smallest magnitudes of every group of four set to +0 (bits: unsigned
    codes of an IEEE-like format; a magnitude's rank is its code without the sign (``& mask``), NaN
    codes -- above ``cap`` -- counted as ``cap``, +Inf's code or e4m3's NaN; ties: the lower index
    kept)."""
    for g in range(bits.size // 4):
        k0 = min(bits[4 * g] & mask, cap)
        k1 = min(bits[4 * g + 1] & mask, cap)
        k2 = min(bits[4 * g + 2] & mask, cap)
        k3 = min(bits[4 * g + 3] & mask, cap)
        # fewer than two elements before i in a stable descending sort: i is kept
        n0 = (k1 > k0) + (k2 > k0) + (k3 > k0)
        n1 = (k0 >= k1) + (k2 > k1) + (k3 > k1)
        n2 = (k0 >= k2) + (k1 >= k2) + (k3 > k2)
        n3 = (k0 >= k3) + (k1 >= k3) + (k2 >= k3)
        z = bits.dtype.type(0)
        out[4 * g] = bits[4 * g] if n0 < 2 else z
        out[4 * g + 1] = bits[4 * g + 1] if n1 < 2 else z
        out[4 * g + 2] = bits[4 * g + 2] if n2 < 2 else z
        out[4 * g + 3] = bits[4 * g + 3] if n3 < 2 else z


#: formats whose magnitude order is their code order without the sign, NaN above +Inf (e4m3: above max)
_BITS_ORDERED = ("float16", "float32", "bfloat16", "float8_e4m3fn", "float8_e5m2")


def prune_rows_2_4(a: np.ndarray) -> np.ndarray:
    """``a`` (M, K) with the two smallest-magnitude elements of every group of four along K set to +0
    (ties: the lower index is kept; NaN counts as largest): PyTorch's 2:4 convention for a whole matrix.
    f16, f32, bf16, e4m3 and e5m2 are ranked on their codes in one compiled pass; other types through
    float32 magnitudes."""
    m, k = a.shape
    if a.dtype.name in _BITS_ORDERED:
        import ml_dtypes

        bits = np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}")).reshape(-1)
        fi = ml_dtypes.finfo(a.dtype) if a.dtype.name not in ("float16", "float32") else np.finfo(a.dtype)
        cap = np.array(fi.max, a.dtype).view(bits.dtype)[()] + bits.dtype.type(1)  # +Inf, or e4m3's NaN
        out = np.empty_like(bits)
        _prune_bits(bits, bits.dtype.type((1 << (8 * a.dtype.itemsize - 1)) - 1), cap, out)
        return out.view(a.dtype).reshape(m, k)
    mag = np.abs(a.astype(np.float32)).reshape(m * (k // 4), 4)
    keep = np.empty(mag.shape, np.bool_)
    _drop_2_of_4(mag, keep)
    out = a.copy().reshape(m * (k // 4), 4)
    out[~keep] = 0
    return out.reshape(m, k)


def sparse_library_matrices(seed: int, dtype: str, m: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The inputs the cuSPARSELt recorder (gpu.record.cusparselt) feeds a call: :func:`library_matrices`
    (exponents -3..3, clipped to ±400 for e4m3, ±1e4 otherwise) with A then 2:4 pruned along K."""
    a, b = library_matrices(seed, dtype, m, n, k, exp_range=(-3, 4), lim=400.0 if dtype == "e4m3" else 1e4)
    return prune_rows_2_4(a), b
