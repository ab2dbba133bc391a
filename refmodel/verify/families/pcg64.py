"""numpy's PCG64 bit generator and the Generator's normals, doubles and bounded integers, inlined.

``numpy.random.default_rng`` draws from PCG64: a 128-bit LCG ``state = state * MULT + inc`` whose
output is the XSL-RR of the new state, ``rotr64(hi ^ lo, hi >> 58)``; 32-bit draws take the low half
of an output and keep its high half for the next one.  On it the Generator builds
``standard_normal`` (the 256-layer ziggurat on 64-bit draws), ``random`` (53-bit doubles) and
``integers`` below 2**32 (Lemire's multiply-and-reject on 32-bit draws).  numba's Generator support
runs the same algorithms but calls the bit generator through a function pointer per draw; here the
state lives in four registers and the draws are inlined, about twice as fast.  The state is read
from and written back to the Generator, so the stream goes on where numpy's would (tests hold every
draw and the state after it to numpy's).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic
from numba.np.random._constants import fi_double, ki_double, wi_double, ziggurat_nor_inv_r, ziggurat_nor_r

_MULT_HI = np.uint64(2549297995355413924)       # PCG's 128-bit default multiplier
_MULT_LO = np.uint64(4865540595714422341)
_M64 = (1 << 64) - 1


@intrinsic
def _mulhi(typingctx, a, b):
    """The high 64 bits of the 128-bit product of two uint64."""
    sig = types.uint64(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        i128 = ir.IntType(128)
        p = builder.mul(builder.zext(args[0], i128), builder.zext(args[1], i128))
        return builder.trunc(builder.lshr(p, ir.Constant(i128, 64)), ir.IntType(64))
    return sig, codegen


@numba.njit(cache=True, inline="always")
def _next64(st):
    """Step the LCG (st: uint64[6] = state hi, lo, inc hi, lo, has_uint32, uinteger) and return its
    XSL-RR output."""
    hi, lo = st[0], st[1]
    nlo = lo * _MULT_LO
    nhi = _mulhi(lo, _MULT_LO) + hi * _MULT_LO + lo * _MULT_HI
    lo2 = nlo + st[3]
    nhi = nhi + st[2] + (np.uint64(1) if lo2 < nlo else np.uint64(0))
    st[0] = nhi
    st[1] = lo2
    x = nhi ^ lo2
    r = nhi >> np.uint64(58)
    return (x >> r) | (x << ((np.uint64(64) - r) & np.uint64(63)))


@numba.njit(cache=True, inline="always")
def _next32(st):
    if st[4]:
        st[4] = np.uint64(0)
        return st[5]
    v = _next64(st)
    st[4] = np.uint64(1)
    st[5] = v >> np.uint64(32)
    return v & np.uint64(0xFFFFFFFF)


@numba.njit(cache=True, inline="always")
def _next_double(st):
    return np.float64(_next64(st) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@numba.njit(cache=True, nogil=True)
def _normals(st, out):
    for i in range(out.size):
        while True:
            r = _next64(st)
            idx = np.int64(r & np.uint64(0xFF))
            r >>= np.uint64(8)
            rabs = (r >> np.uint64(1)) & np.uint64(0x000FFFFFFFFFFFFF)
            x = np.float64(rabs) * wi_double[idx]
            if r & np.uint64(1):
                x = -x
            if rabs < ki_double[idx]:
                break
            if idx == 0:
                while True:
                    xx = -ziggurat_nor_inv_r * np.log1p(-_next_double(st))
                    yy = -np.log1p(-_next_double(st))
                    if yy + yy > xx * xx:
                        x = -(ziggurat_nor_r + xx) if (rabs >> np.uint64(8)) & np.uint64(1) else ziggurat_nor_r + xx
                        break
                break
            if (fi_double[idx - 1] - fi_double[idx]) * _next_double(st) + fi_double[idx] < np.exp(-0.5 * x * x):
                break
        out[i] = x


@numba.njit(cache=True, nogil=True)
def _doubles(st, out):
    for i in range(out.size):
        out[i] = _next_double(st)


@numba.njit(cache=True, nogil=True)
def _below(st, thr, out):
    """out[i] = (the i-th 53-bit double < thr)."""
    for i in range(out.size):
        out[i] = _next_double(st) < thr


@numba.njit(cache=True, inline="always")
def _lemire(st, excl, thresh):
    """Lemire's bounded draw in [0, excl) on 32-bit draws (``thresh`` = (2**32 - excl) % excl)."""
    m = _next32(st) * excl
    left = m & np.uint64(0xFFFFFFFF)
    if left < excl:
        while left < thresh:
            m = _next32(st) * excl
            left = m & np.uint64(0xFFFFFFFF)
    return np.int64(m >> np.uint64(32))


@numba.njit(cache=True, nogil=True)
def _bounded(st, low, rng, out):
    """low + Lemire's bounded draw in [0, rng] (0 < rng < 2**32 - 1) on 32-bit draws."""
    excl = np.uint64(rng + 1)
    thresh = np.uint64((0xFFFFFFFF - rng) % (rng + 1))
    for i in range(out.size):
        out[i] = low + _lemire(st, excl, thresh)


@numba.njit(cache=True, nogil=True)
def _scale_bounded(st, rng, table, fmax, x):
    """x[i] = clip(x[i] * table[d_i], -fmax, fmax) (float32) with d_i the i-th of :func:`_bounded`'s
    draws in [0, rng] (before its ``low`` is added): the draws and the scaling in one pass."""
    excl = np.uint64(rng + 1)
    thresh = np.uint64((0xFFFFFFFF - rng) % (rng + 1))
    for i in range(x.size):
        v = x[i] * table[_lemire(st, excl, thresh)]
        x[i] = min(max(v, -fmax), fmax)


def _state(rng: np.random.Generator) -> np.ndarray | None:
    bg = rng.bit_generator
    if type(bg) is not np.random.PCG64:
        return None
    s = bg.state
    st, inc = s["state"]["state"], s["state"]["inc"]
    return np.array([st >> 64, st & _M64, inc >> 64, inc & _M64, s["has_uint32"], s["uinteger"]], np.uint64)


def _put(rng: np.random.Generator, st: np.ndarray) -> None:
    v = [int(x) for x in st]
    rng.bit_generator.state = {"bit_generator": "PCG64", "state": {"state": (v[0] << 64) | v[1],
                               "inc": (v[2] << 64) | v[3]}, "has_uint32": v[4], "uinteger": v[5]}


def _fill(rng: np.random.Generator, kernel, dtype, n: int, *args) -> np.ndarray | None:
    """``kernel(state, *args, out)`` on the Generator's PCG64 state (written back after), or None where
    ``rng`` is not PCG64 (the caller draws otherwise)."""
    st = _state(rng)
    if st is None:
        return None
    out = np.empty(n, dtype)
    kernel(st, *args, out)
    _put(rng, st)
    return out


def standard_normal(rng: np.random.Generator, n: int, dtype=np.float64) -> np.ndarray | None:
    """``rng.standard_normal(n)`` (cast to ``dtype``: float64 or float32), or None where ``rng`` is not
    PCG64 (the caller draws otherwise)."""
    return _fill(rng, _normals, dtype, n)


def scale_by_integers(rng: np.random.Generator, x: np.ndarray, low: int, high: int, table: np.ndarray,
                      fmax: float) -> bool:
    """``x = clip(x * table[rng.integers(low, high, x.size) - low], -fmax, fmax)`` in place (x, table:
    float32), the draws advancing ``rng`` as that call would; False (x untouched) where ``rng`` is not
    PCG64 or the range is not one :func:`integers` covers."""
    span = int(high) - int(low) - 1
    st = _state(rng)
    if st is None or not 0 < span < 0xFFFFFFFF or table.size != span + 1:
        return False
    _scale_bounded(st, np.int64(span), table, np.float32(fmax), x.reshape(-1))
    _put(rng, st)
    return True


def random(rng: np.random.Generator, n: int) -> np.ndarray | None:
    """``rng.random(n)``, or None where ``rng`` is not PCG64."""
    return _fill(rng, _doubles, np.float64, n)


def below(rng: np.random.Generator, thr: float, n: int) -> np.ndarray | None:
    """``rng.random(n) < thr`` (bool), or None where ``rng`` is not PCG64."""
    return _fill(rng, _below, np.bool_, n, np.float64(thr))


def integers(rng: np.random.Generator, low: int, high: int, n: int, dtype=np.int64) -> np.ndarray | None:
    """``rng.integers(low, high, n)`` as ``dtype`` (which holds low .. high - 1) for ranges of 2 ..
    2**32 - 1 values, or None (another range, or a bit generator other than PCG64: the caller draws
    otherwise)."""
    span = int(high) - int(low) - 1
    if not 0 < span < 0xFFFFFFFF:
        return None
    return _fill(rng, _bounded, dtype, n, np.int64(low), np.int64(span))
