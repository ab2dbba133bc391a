"""The GPU layout fuzzer's case generator in numpy: the twin of the seeded drawing of
``gpu/kernels/desc_gather.py`` (``DG_SOURCE``: ``wl_gen_cases``, ``wl_gen_image``, ``wl_gen_regs``),
so a batch of the GPU layout engine — and the ``device_model_layout`` fixture, which holds only
seeds and sha256 digests — can be rebuilt on a CPU with no compiler.

:func:`layout_cases` returns, for one variant of
:data:`refmodel.verify.layout_cases.WGMMA_VARIANTS` and one ``(seed, batch, cases)``, exactly the
arrays ``gpu.kernels.layout_runner.LayoutRunner.generate`` returns (tests/test_seeded_layout.py
checks it bit for bit against the host build of the C++ on every variant).  Every number is
``rand(key, case, stream, i)`` (splitmix64's finaliser, wrapping uint64 arithmetic); integers
below ``n`` are ``((h >> 32) * n) >> 32``; see desc_gather's module doc for the distribution.

:func:`layout_jobs_plan` is the job list of the ``device_model_layout`` fixture
(``python -m gpu.record.device_model_layout``).
"""

from __future__ import annotations

import numba
import numpy as np

from ..wgmma_forms import parse_wgmma
from .layout_cases import IMAGE, WGMMA_VARIANTS
from .seeded import _mix1     # wl_mix of one uint64: the splitmix64 finaliser

SEED = 20261201

_U = np.uint64
_M64 = (1 << 64) - 1
#: element type codes of DG_SOURCE and their bytes
ELEM_CODES = {"f16": 0, "bf16": 1, "tf32": 2, "e4m3": 3, "e5m2": 4, "s8": 5, "u8": 6}
ACC_CODES = {"f32": 0, "f16": 1, "s32": 2}
_EBYTES = (2, 2, 4, 1, 1, 1, 1)
#: (exponent bits, mantissa bits) of the float element codes 0..4
_EM = ((5, 10), (8, 7), (8, 23), (4, 3), (5, 2))
_FIELD_MASK = 0x3FFF | (0x3FFF << 16) | (0x3FFF << 32) | (0x7 << 49) | (0x3 << 62)


@numba.njit(cache=True, nogil=True)
def _mix_kernel(z, out):
    for i in range(z.size):
        out[i] = _mix1(z[i])


def mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 arrays (``wl_mix``): :func:`mix_formula`, compiled for
    large arrays (tests hold the two equal)."""
    z = np.ascontiguousarray(np.asarray(z, _U))
    if z.size < 4096:
        return mix_formula(z)
    out = np.empty_like(z)
    _mix_kernel(z.reshape(-1), out.reshape(-1))
    return out


def mix_formula(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 arrays (``wl_mix``), as numpy arithmetic."""
    z = np.asarray(z, _U)
    with np.errstate(over="ignore"):
        z = z + _U(0x9E3779B97F4A7C15)
        z = (z ^ (z >> _U(30))) * _U(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U(27))) * _U(0x94D049BB133111EB)
    return z ^ (z >> _U(31))


def batch_key(seed: int, batch: int) -> int:
    """``wl_mix(seed ^ wl_mix(batch + 0x51ED270B27A1))`` (seed and batch taken modulo 2**64)."""
    b = np.array([(int(batch) + 0x51ED270B27A1) & _M64], _U)
    return int(mix(np.array([int(seed) & _M64], _U) ^ mix(b))[0])


def _stream(key: int, cases: np.ndarray, stream: int) -> np.ndarray:
    """``wl_mix(key ^ wl_mix(c * 0x2545F4914F6CDD1D + stream))`` per case (the part of wl_rand
    that does not depend on the counter)."""
    c = np.asarray(cases, np.int64).astype(_U)
    with np.errstate(over="ignore"):
        inner = mix(c * _U(0x2545F4914F6CDD1D) + _U(stream))
    return mix(_U(key) ^ inner)


def _rand(pre: np.ndarray, i) -> np.ndarray:
    """``wl_rand`` from :func:`_stream`'s value and the counter(s) ``i`` (broadcast)."""
    return mix(pre ^ np.asarray(i, np.int64).astype(_U))


def _below(h: np.ndarray, n) -> np.ndarray:
    """``((h >> 32) * n) >> 32`` as int64 (``n`` < 2**32, scalar or array)."""
    return (((h >> _U(32)) * np.asarray(n, np.int64).astype(_U)) >> _U(32)).astype(np.int64)


def _int_to_fp_table(ebits: int, mbits: int) -> np.ndarray:
    """``wl_int_to_fp(v, ebits, mbits)`` for v = -8..8 (index v + 8), uint32."""
    out = np.zeros(17, np.uint32)
    bias = (1 << (ebits - 1)) - 1
    for v in range(-8, 9):
        if v == 0:
            continue
        s, m = int(v < 0), abs(v)
        e = m.bit_length() - 1
        frac = m - (1 << e)
        frac = frac << (mbits - e) if mbits >= e else frac >> (e - mbits)
        out[v + 8] = (s << (ebits + mbits)) | ((e + bias) << mbits) | frac
    return out


def _elem(h: np.ndarray, fam: np.ndarray, dt: int) -> np.ndarray:
    """``wl_elem``: element bits (uint32) of type code ``dt``; ``fam`` 0 ints, 1 floats (broadcast)."""
    if dt >= 5:
        return (h & _U(0xFF)).astype(np.uint32)
    eb, mb = _EM[dt]
    ints = _int_to_fp_table(eb, mb)[_below(h, 17)]
    if dt == 3:
        v = (h & _U(0xFF)).astype(np.uint32)
        fl = np.where((v & 0x7F) == 0x7F, v ^ np.uint32(1), v)
    elif dt == 4:
        v = (h & _U(0xFF)).astype(np.uint32)
        fl = np.where((v & 0x7C) == 0x7C, v & np.uint32(0xBB), v)
    else:
        bias = (1 << (eb - 1)) - 1
        sign = ((h >> _U(63)) & _U(1)).astype(np.uint32)
        ex = (bias - 8 + ((h >> _U(24)) & _U(15)).astype(np.int64)).astype(np.uint32)
        man = ((h >> _U(28)) & _U((1 << mb) - 1)).astype(np.uint32)
        fl = (sign << np.uint32(eb + mb)) | (ex << np.uint32(mb)) | man
    return np.where(np.asarray(fam) == 0, ints, fl).astype(np.uint32)


@numba.njit(cache=True, nogil=True)
def _elem_rand_kernel(pre, start, fam, ints, dt, eb, mb, out):
    """out[c, i] = ``wl_elem(wl_rand(pre[c], start + i), fam[c], dt)`` (:func:`_elem` of :func:`_rand`)."""
    bias = (1 << (eb - 1)) - 1
    for c in range(out.shape[0]):
        p = pre[c]
        row = out[c]
        for i in range(row.size):
            h = _mix1(p ^ np.uint64(start + i))
            v = np.uint32(h & np.uint64(0xFF))
            if dt >= 5:
                row[i] = v
                continue
            if fam[c] == 0:
                row[i] = ints[np.int64(((h >> np.uint64(32)) * np.uint64(17)) >> np.uint64(32))]
            elif dt == 3:
                row[i] = v ^ np.uint32(1) if (v & np.uint32(0x7F)) == np.uint32(0x7F) else v
            elif dt == 4:
                row[i] = v & np.uint32(0xBB) if (v & np.uint32(0x7C)) == np.uint32(0x7C) else v
            else:
                sign = np.uint32((h >> np.uint64(63)) & np.uint64(1))
                ex = np.uint32(bias - 8 + np.int64((h >> np.uint64(24)) & np.uint64(15)))
                man = np.uint32((h >> np.uint64(28)) & np.uint64((1 << mb) - 1))
                row[i] = (sign << np.uint32(eb + mb)) | (ex << np.uint32(mb)) | man


def _elem_rand(pre: np.ndarray, start: int, n: int, fam: np.ndarray, dt: int) -> np.ndarray:
    """``_elem(_rand(pre[:, None], start + arange(n)[None, :]), fam[:, None], dt)`` (C, n) uint32 in one
    compiled pass (tests hold the two equal)."""
    eb, mb = _EM[dt] if dt < 5 else (8, 0)
    ints = _int_to_fp_table(eb, mb) if dt < 5 else np.zeros(17, np.uint32)
    out = np.empty((np.size(pre), n), np.uint32)
    _elem_rand_kernel(np.ascontiguousarray(pre, _U).reshape(-1), np.int64(start),
                      np.ascontiguousarray(fam, np.int32).reshape(-1), ints, dt, eb, mb, out)
    return out


def _acc_elem(h: np.ndarray, acc: int) -> np.ndarray:
    """``wl_acc_elem``: one accumulator slot's bits (uint32)."""
    if acc == 2:
        return (_below(h, 2000) - 1000).astype(np.int32).view(np.uint32)
    table = _int_to_fp_table(8, 23) if acc == 0 else _int_to_fp_table(5, 10)
    return table[_below(h, 9) + 4]


# ----------------------------------------------------------------------------- descriptors
def _offsets(major: int, bits: np.ndarray, e: int, lbo: np.ndarray, sbo: np.ndarray, r: np.ndarray,
             k: np.ndarray) -> np.ndarray:
    """``wl_offset`` per case (rows of ``bits``, ``lbo``, ``sbo``: (n, 1)) and point (r, k: (1, P))."""
    w = 16 << bits
    if major == 0:
        kb = k * e
        plain = (r // 8) * sbo + (r % 8) * 16 + (kb // 16) * lbo + kb % 16
        sw = (r // 8) * sbo + (r % 8) * w + kb
    else:
        t = 16 // e
        plain = (r // t) * sbo + (k % 8) * 16 + (k // 8) * lbo + (r % t) * e
        tw = np.maximum(w // e, 1)
        sw = (r // tw) * lbo + (k % 8) * w + (k // 8) * sbo + (r % tw) * e
    return np.where(bits == 0, plain, sw)


def _points(R: int, K: int, e: int, major: int) -> tuple[np.ndarray, np.ndarray]:
    """The (r, k) points ``wl_range`` visits (one per 16-byte atom), as (1, P) int64 arrays."""
    if major == 0:
        r, k = np.meshgrid(np.arange(R), np.arange(0, K, 16 // e), indexing="ij")
    else:
        k, r = np.meshgrid(np.arange(K), np.arange(0, R, 16 // e), indexing="ij")
    return r.reshape(1, -1).astype(np.int64), k.reshape(1, -1).astype(np.int64)


def _swizzle(a: np.ndarray, bits: np.ndarray, bo: np.ndarray, subtract: bool) -> np.ndarray:
    """``wl_swizzle`` (int64, broadcast)."""
    phase = (a >> 7) - (bo if subtract else 0)
    sw = a ^ ((phase & ((1 << bits) - 1)) << 4)
    return np.where(bits == 0, a, sw)


def _desc_fields(d: np.ndarray):
    d = np.asarray(d, _U)
    start = ((d & _U(0x3FFF)) << _U(4)).astype(np.int64)
    lbo = (((d >> _U(16)) & _U(0x3FFF)) << _U(4)).astype(np.int64)
    sbo = (((d >> _U(32)) & _U(0x3FFF)) << _U(4)).astype(np.int64)
    bo = ((d >> _U(49)) & _U(7)).astype(np.int64)
    code = ((d >> _U(62)) & _U(3)).astype(np.int64)
    bits = np.array([0, 3, 2, 1], np.int64)[code]
    return start, lbo, sbo, bo, bits


def desc_range(d: np.ndarray, R: int, K: int, e: int, major: int, *, subtract: bool = False):
    """``wl_range`` for descriptors ``d`` (n,) uint64: (ok (n,) bool — no reserved bits set, lo, hi)
    with lo / hi the first / last byte of the 16-byte atoms read (swizzle rule 'subtract' or
    'ignore' for the base offset)."""
    d = np.asarray(d, _U).reshape(-1)
    ok = (d & _U(~_FIELD_MASK & _M64)) == 0
    start, lbo, sbo, bo, bits = (v[:, None] for v in _desc_fields(d))
    r, k = _points(R, K, e, major)
    a = _swizzle(start + _offsets(major, bits, e, lbo, sbo, r, k), bits, bo, subtract)
    return ok, a.min(axis=1), a.max(axis=1) + 15


def _draw_desc(key: int, C: int, stream: int, R: int, K: int, e: int, major: int, size: int):
    """``wl_draw_desc`` for cases 0..C-1: (descriptors (C,) uint64, kinds (C,) uint32)."""
    desc = np.zeros(C, _U)
    kind = np.zeros(C, np.uint32)
    todo = np.arange(C, dtype=np.int64)
    pre = _stream(key, todo, stream)[:, None]
    for at in range(64):
        if todo.size == 0:
            break
        h = _rand(pre, 16 * at + np.arange(10)[None, :])
        mi = _below(h[:, 0], 4)
        bits = mi
        code = np.array([0, 3, 2, 1], np.int64)[mi]
        w = 16 << bits
        dense = _below(h[:, 1], 1000) < 600
        if major == 0:
            dl, ds = np.where(bits > 0, 16, 128), np.where(bits > 0, 8 * w, 256)
        else:
            blocks = (R * 2 + w - 1) // w
            dl = np.where(bits == 0, 128 * (R // 8), 8 * w)
            ds = np.where(bits == 0, 128, 8 * w * blocks)
        lbo = np.where(dense, dl, _below(h[:, 2], 160) * 16)
        sbo = np.where(dense, ds, _below(h[:, 3], 160) * 16)
        period = np.where(bits > 0, 128 << bits, 16)
        u = _below(h[:, 4], 1000)
        s_aligned = _below(h[:, 5], size // period) * period
        s_kstep = s_aligned + 32 * _below(h[:, 6], np.maximum(w // 32, 1))
        s_any = _below(h[:, 5], size // 16) * 16
        is_k = (u >= 400) & (u < 700) & (bits > 0) & (major == 0)
        sk = np.where(u < 50, 0, np.where(u < 400, 1, np.where(is_k, 2, 3)))
        start = np.choose(sk, [np.zeros_like(s_any), s_aligned, s_kstep, s_any])
        bo = np.where((bits > 0) & (_below(h[:, 7], 1000) < 300), 1 + _below(h[:, 8], 7), 0)
        unchecked = (_below(h[:, 9], 1000) < 20) if at == 0 else np.zeros(todo.size, bool)
        d = ((start >> 4).astype(_U) | ((lbo >> 4).astype(_U) << _U(16)) | ((sbo >> 4).astype(_U) << _U(32))
             | (bo.astype(_U) << _U(49)) | (code.astype(_U) << _U(62)))
        _, lo, hi = desc_range(d, R, K, e, major)
        flush = sk == 0
        shift = (size // 128 - 1 - hi // 128) * 128
        bad_shift = (shift < 0) | (start + shift >= 1 << 18)
        skip = flush & bad_shift & ~unchecked                 # `continue`: next attempt
        shift = np.where(flush & ~bad_shift, shift, 0)
        start, lo, hi = start + shift, lo + shift, hi + shift
        d = (d & _U(~0x3FFF & _M64)) | (start >> 4).astype(_U)
        kd = (mi | (major << 2) | (dense.astype(np.int64) << 3) | (sk << 4) | (bo << 6)).astype(np.uint32)
        fits = (lo >= 0) & ((hi // 128) * 128 + 127 < size)
        done = ~skip & (unchecked | fits)
        idx = todo[done]
        desc[idx] = d[done]
        kind[idx] = np.where(unchecked[done], kd[done] | np.uint32(1 << 9), kd[done])
        todo, pre = todo[~done], pre[~done]
    if todo.size:
        kind[todo] = (major << 2) | (1 << 3) | (1 << 4) | (1 << 10)
        desc[todo] = (((128 >> 4) << 16) | ((256 >> 4) << 32) if major == 0
                      else (((128 * (R // 8)) >> 4) << 16) | ((128 >> 4) << 32))
    return desc, kind


# ----------------------------------------------------------------------------- one batch
def variant_dims(variant) -> dict:
    """The generator's parameters of a variant ``(instr, rs, trans_a, trans_b, imm_scale_a,
    imm_scale_b)``: K, N, element codes and bytes, accumulator code, D registers, majors, rs."""
    instr, rs, ta, tb = variant[0], bool(variant[1]), int(variant[2]), int(variant[3])
    f = parse_wgmma(instr)
    dt_a, dt_b = ELEM_CODES[f.dtype_a], ELEM_CODES[f.dtype_b]
    return {"K": f.k, "N": f.n, "dt_a": dt_a, "dt_b": dt_b, "ea": _EBYTES[dt_a], "eb": _EBYTES[dt_b],
            "acc": ACC_CODES[f.dtype_d], "nregs": f.d_regs, "major_a": ta, "major_b": tb, "rs": rs}


def _put(img: np.ndarray, lo: int, hi: int, e: int, vals: np.ndarray) -> None:
    """Elements (C, n) of ``e`` bytes, little-endian, into bytes [lo, hi) of every image."""
    dt = {1: "<u1", 2: "<u2", 4: "<u4"}[e]
    img[:, lo:hi] = np.ascontiguousarray(vals.astype(np.uint32).astype(dt)).view(np.uint8)


def layout_cases(variant, seed: int, batch: int, cases: int, *, size: int = IMAGE) -> dict[str, np.ndarray]:
    """The cases of one batch, as ``LayoutRunner(variant).generate(seed, batch, cases)`` returns them:
    images (C, size) uint8, desc_a / desc_b (C,) uint64 with image-relative starts (desc_a 0 for RS),
    kinds (C,) uint32 (A's in the low 16 bits, 0xFFFF for RS; B's in the high), fam (C,) int32
    (0 ints, 1 floats), scale_d (C,) int32, c_regs (C, 128, regs) and a_regs (C, 128, 4) uint32
    (zeros for SS)."""
    from ..errors import InputError

    C = int(cases)
    if C < 1:
        raise InputError(f"a batch needs at least one case, got {cases}")
    p = variant_dims(variant)
    K, N, ea, eb = p["K"], p["N"], p["ea"], p["eb"]
    key = batch_key(seed, batch)
    c = np.arange(C, dtype=np.int64)
    fam = np.where(_below(_rand(_stream(key, c, 1), 0), 1000) < 750, 0, 1).astype(np.int32)
    scale_d = np.where(_below(_rand(_stream(key, c, 2), 0), 1000) < 800, 1, 0).astype(np.int32)
    if p["rs"]:
        desc_a, ka = np.zeros(C, _U), np.full(C, 0xFFFF, np.uint32)
    else:
        desc_a, ka = _draw_desc(key, C, 16, 64, K, ea, p["major_a"], size)
    desc_b, kb = _draw_desc(key, C, 32, N, K, eb, p["major_b"], size)
    kinds = (ka | (kb << np.uint32(16))).astype(np.uint32)

    images = np.empty((C, size), np.uint8)
    pre = _stream(key, c, 3)[:, None]
    for lo, hi, dt in ((0, size // 2, p["dt_a"]), (size // 2, size, p["dt_b"])):
        e = _EBYTES[dt]
        _put(images, lo, hi, e, _elem_rand(pre, lo // e, hi // e - lo // e, fam, dt))

    nr = p["nregs"]
    q = np.arange(128 * nr, dtype=np.int64)[None, :]
    pre = _stream(key, c, 4)[:, None]
    if p["acc"] == 1:
        lo16 = _acc_elem(_rand(pre, 2 * q), 1) & np.uint32(0xFFFF)
        creg = lo16 | (_acc_elem(_rand(pre, 2 * q + 1), 1) << np.uint32(16))
    else:
        creg = _acc_elem(_rand(pre, q), p["acc"])
    c_regs = creg.astype(np.uint32).reshape(C, 128, nr)
    a_regs = np.zeros((C, 128, 4), np.uint32)
    if p["rs"]:
        e = _EBYTES[p["dt_a"]]
        per = 4 // e
        pre = _stream(key, c, 5)[:, None]
        el = _elem_rand(pre, 0, 512 * per, fam, p["dt_a"])
        el = el.reshape(C, 512, per)
        mask = np.uint32((1 << (8 * e)) - 1) if e < 4 else np.uint32(0xFFFFFFFF)
        word = np.zeros((C, 512), np.uint32)
        for s in range(per):
            word |= (el[:, :, s] & mask) << np.uint32(8 * e * s)
        a_regs = word.reshape(C, 128, 4)
    return {"desc_a": desc_a, "desc_b": desc_b, "kinds": kinds, "fam": fam, "scale_d": scale_d,
            "images": images, "c_regs": c_regs, "a_regs": a_regs}


# ----------------------------------------------------------------------------- the fixture's plan
#: cases a job of the ``device_model_layout`` plan for an n256 variant, per repeat; a narrower
#: variant gets 256 / max(N, 32) times more (at most 8 times)
PLAN_CASES = (48, 64, 96, 128)


def layout_jobs_plan(variants=None) -> list[tuple[int, int, int]]:
    """The jobs of the ``device_model_layout`` fixture: ``(variant index into WGMMA_VARIANTS, batch,
    cases)``, every variant once per entry of :data:`PLAN_CASES` (batch = the job's index, seed
    :data:`SEED`): 60 jobs, 31 023 cases.  Sized for the CPU replay — refmodel's wgmma_registers
    runs once per case (~0.5-1 ms), about 26 s for the whole plan on a 2-core host — while every
    variant gets every descriptor kind its majors allow (each swizzle mode, dense and random
    strides, each start kind, base offsets 0..7, unchecked first draws, ints and floats, scale-d 0
    and 1) and cases refmodel refuses (~260 in all, some in every variant).  The 64-attempt
    fallback does not occur at the 16 KiB image."""
    variants = WGMMA_VARIANTS if variants is None else variants
    jobs = []
    for n in PLAN_CASES:
        for vi, v in enumerate(variants):
            jobs.append((vi, len(jobs), n * 256 // max(parse_wgmma(v[0]).n, 32)))
    return jobs


__all__ = ["PLAN_CASES", "SEED", "batch_key", "desc_range", "layout_cases", "layout_jobs_plan", "mix",
           "variant_dims"]
