"""Exhaustive sweeps: every float32 bit pattern through f32 -> FP8 conversion.

The hardware side (gpu/record/cvt.py) runs ``cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f32``
with both operands equal to x, for x = 0 .. 2**32-1 in ascending bit-pattern order,
and keeps the high byte of each result (the run also checks that both halves agree).
The byte stream is hashed in chunks of 2**24 inputs::

    chunk_digest[c] = sha256(out[c * 2**24 : (c + 1) * 2**24])
    sweep_digest    = sha256(chunk_digest[0] || chunk_digest[1] || ... || chunk_digest[255])

The chunk digests are stored too, so a mismatch is localised to 2**24 inputs.
:func:`sweep_digests` recomputes the same digests from refmodel with the fast
branch-free kernel :func:`encode_f32_fast` (the kernel :func:`refmodel.cvt.cvt` uses
for float32 sources), in parallel, chunk by chunk.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable

import numba
import numpy as np

from .._parallel import parallel_ranges
from ..errors import InputError
from ..validate import check_flag, check_int
from .formats import FormatSpec, format_spec

CHUNK_BITS = 24
CHUNK = 1 << CHUNK_BITS
N_CHUNKS = 1 << (32 - CHUNK_BITS)

SWEEP_FORMS = (
    ("e4m3", False), ("e4m3", True), ("e5m2", False), ("e5m2", True),
)


def sweep_instr(fmt: str, relu: bool) -> str:
    return f"cvt.rn.satfinite{'.relu' if relu else ''}.{fmt}x2.f32"


@numba.njit(cache=True)
def _rne_normal(a, shift, bias_adj):
    """The code of magnitude bits ``a`` in the target's normal range: re-bias the exponent, round the
    mantissa to nearest even (a carry bumps the exponent).  RNE of an integer ``v`` by ``s`` bits is
    ``(v + 2**(s-1) - 1 + ((v >> s) & 1)) >> s``."""
    return (a - bias_adj + ((1 << (shift - 1)) - 1) + ((a >> shift) & 1)) >> shift


@numba.njit(cache=True)
def _rne_subnormal(a, qe):
    """The code of magnitude bits ``a`` below the target's smallest normal: the significand times
    2**e0 rounded to nearest even to a multiple of 2**qe."""
    e = a >> 23
    sig = (a & 0x7FFFFF) | (0x800000 if e > 0 else 0)
    e0 = (e if e > 0 else 1) - 150
    s = qe - e0
    s = 62 if s > 62 else s
    return (sig + (1 << (s - 1)) - 1 + ((sig >> s) & 1)) >> s


@numba.njit(cache=True)
def _finish(c, neg, max_code, overflow_code, relu, sign_shift):
    """Overflow to ``overflow_code``, the sign, and .relu's zero for negative inputs."""
    c = overflow_code if c > max_code else c
    c = c | (neg << sign_shift)
    return 0 if (relu and neg) else c


@numba.njit(cache=True)
def _f32_rne(u, shift, bias_adj, min_normal_bits, qe, max_code, nan_code, overflow_code,
             relu, sign_shift):
    """RNE of one float32 bit pattern (int64) to a narrower binary format (branch-free once
    vectorised: both roundings are computed and one is selected)."""
    a = u & 0x7FFFFFFF
    neg = u >> 31
    c = _rne_subnormal(a, qe) if a < min_normal_bits else _rne_normal(a, shift, bias_adj)
    c = _finish(c, neg, max_code, overflow_code, relu, sign_shift)
    return nan_code if a > 0x7F800000 else c


@numba.njit(cache=True, nogil=True)
def _fast_kernel(lo, hi, bits, out, shift, bias_adj, min_normal_bits, qe, max_code, nan_code,
                 overflow_code, relu, sign_shift):
    for i in range(lo, hi):
        out[i] = _f32_rne(np.int64(bits[i]), shift, bias_adj, min_normal_bits, qe, max_code,
                          nan_code, overflow_code, relu, sign_shift)


@numba.njit(cache=True, nogil=True)
def _fast_range_kernel(lo, hi, base, out, shift, bias_adj, min_normal_bits, qe, max_code, nan_code,
                       overflow_code, relu, sign_shift):
    """out[i] = _f32_rne(base + i) for i in lo .. hi, for consecutive bit patterns: within one sign
    the magnitude bits grow with i, so the inputs below the smallest normal, the normal ones and the
    NaNs are three runs, each looped over with its branch of :func:`_f32_rne` alone (tests hold
    this equal to :func:`_f32_rne` on every input)."""
    i = lo
    while i < hi:
        u0 = base + i
        neg = (u0 >> 31) & 1
        end = min(hi, ((u0 >> 31) + 1 << 31) - base)         # the end of this sign's run
        a0 = u0 & 0x7FFFFFFF
        n_end = min(end, max(i, i + (min_normal_bits - a0)))   # first input at or above the smallest normal
        q_end = min(end, max(n_end, i + (0x7F800001 - a0)))    # first NaN
        o = out[i:n_end]
        for j in range(o.size):
            o[j] = _finish(_rne_subnormal(a0 + j, qe), neg, max_code, overflow_code, relu, sign_shift)
        a1 = a0 + (n_end - i)
        o = out[n_end:q_end]
        for j in range(o.size):
            o[j] = _finish(_rne_normal(a1 + j, shift, bias_adj), neg, max_code, overflow_code, relu, sign_shift)
        o = out[q_end:end]
        for j in range(o.size):
            o[j] = nan_code
        i = end


def _fast_params(dst: FormatSpec, saturate: bool, relu: bool) -> tuple:
    saturate, relu = check_flag("saturate", saturate), check_flag("relu", relu)
    if dst.bits > 16 or dst.mbits >= 23 or dst.ebits > 8:
        raise InputError(f"the fast float32 encoder targets formats narrower than f32, got {dst.name}")
    shift = 23 - dst.mbits
    bias_adj = (127 - dst.bias) << 23
    min_normal_bits = (127 + dst.emin) << 23
    special = dst.inf_code if dst.ieee_specials else dst.nan_code
    overflow = dst.max_code if saturate else special
    return (shift, bias_adj, min_normal_bits, dst.emin - dst.mbits, dst.max_code, dst.nan_code,
            overflow, bool(relu), dst.bits - 1)


def encode_f32_fast(bits: np.ndarray, fmt: str | FormatSpec, *, saturate: bool = True,
                    relu: bool = False) -> np.ndarray:
    """RNE of float32 bit patterns (uint32 array) to ``fmt`` codes; same results as
    :func:`refmodel.numerics.fp8.round_to_format` (tests/test_sweep_fast.py holds the two equal), several times faster."""
    dst = format_spec(fmt)
    b = np.ascontiguousarray(bits, dtype=np.uint32).reshape(-1)
    out = np.empty(b.size, dtype=np.uint8 if dst.bits == 8 else np.uint16)
    parallel_ranges(_fast_kernel, b.size, b, out, *_fast_params(dst, saturate, relu), min_piece=1 << 14)
    return out.reshape(np.shape(bits))


def sweep_chunk(fmt: str, relu: bool, chunk: int, out: np.ndarray | None = None, *,
                saturate: bool = True) -> np.ndarray:
    """refmodel's output bytes for inputs chunk*2**24 .. (chunk+1)*2**24 - 1."""
    dst = format_spec(fmt)
    chunk = check_int("chunk", chunk, 0, N_CHUNKS - 1)
    if out is None:
        out = np.empty(CHUNK, dtype=np.uint8)
    parallel_ranges(_fast_range_kernel, out.size, np.int64(chunk) << CHUNK_BITS, out,
                    *_fast_params(dst, saturate, relu), min_piece=1 << 14)
    return out


def sweep_digests(fmt: str, relu: bool, chunks: Iterable[int] | None = None,
                  workers: int = 2, *, saturate: bool = True) -> tuple[list[str], str | None]:
    """(chunk digests, total digest) of refmodel's sweep (``saturate=False``: the
    nosat policy).  The total is None unless all 256 chunks were computed."""
    idx = list(range(N_CHUNKS)) if chunks is None else [check_int("chunk", c, 0, N_CHUNKS - 1) for c in chunks]
    workers = check_int("workers", workers, 1, 256)
    digests: dict[int, str] = {}
    bufs = [np.empty(CHUNK, dtype=np.uint8) for _ in range(workers + 1)]
    with ThreadPoolExecutor(max_workers=workers) as ex:
        pending = []
        for n, c in enumerate(idx):
            buf = bufs[n % len(bufs)]
            if len(pending) >= len(bufs) - 1:
                c0, fut = pending.pop(0)
                digests[c0] = fut.result()
            sweep_chunk(fmt, relu, c, buf, saturate=saturate)
            pending.append((c, ex.submit(chunk_digest, buf)))
        for c0, fut in pending:
            digests[c0] = fut.result()
    ordered = [digests[c] for c in idx]
    total = None
    if chunks is None:
        total = combine_digests(ordered)
    return ordered, total


_CONSTANT_DIGESTS: dict[tuple[int, int, str], str] = {}


def chunk_digest(buf: np.ndarray) -> str:
    """sha256 (hex) of a chunk of output bytes.  Most chunks of a sweep hold one byte value (inputs that
    all round to zero, or all overflow to max/Inf/NaN): their digest is the digest of that constant
    buffer, hashed once per value and size and remembered (the same bytes, the same digest)."""
    if buf.size == 0:
        return hashlib.sha256(b"").hexdigest()
    lo, hi = int(buf.min()), int(buf.max())
    if lo == hi:
        key = (lo, buf.size, buf.dtype.str)
        if key not in _CONSTANT_DIGESTS:
            _CONSTANT_DIGESTS[key] = hashlib.sha256(np.full(buf.size, lo, buf.dtype).tobytes()).hexdigest()
        return _CONSTANT_DIGESTS[key]
    return hashlib.sha256(buf).hexdigest()


def combine_digests(chunk_digests: list[str]) -> str:
    """sha256 over the concatenated binary chunk digests."""
    h = hashlib.sha256()
    for d in chunk_digests:
        h.update(bytes.fromhex(d))
    return h.hexdigest()
