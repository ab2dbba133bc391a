"""Fixed-point pieces of the special-function unit's datapath, shared by the model and the table fitter.

* :func:`square17` — the unit's truncated squarer of a 17-bit fraction: the partial product of bit
  ``i`` is ``x >> (18 - i)`` (each truncated before the sum), and the sum is halved, so the result is
  about ``x**2 / 2**19`` with the truncation the hardware makes.
* :func:`fmul_rz_f32` — float32 multiply rounded toward zero (SASS ``FMUL.RZ``), exact.
* :func:`revolutions_fixed` — how MUFU.SIN/COS read their operand (in revolutions): ``|r| * 2**25``
  truncated, modulo ``2**25``: two quadrant bits and 23 fraction bits.
"""

from __future__ import annotations

import numba
import numpy as np


def square17(x: np.ndarray) -> np.ndarray:
    """The truncated square of 17-bit integers (numpy, int64)."""
    x = np.asarray(x, dtype=np.int64)
    res = np.zeros_like(x)
    for i in range(17):
        res += np.where((x >> i) & 1, x >> (18 - i), 0)
    return res >> 1


@numba.njit(cache=True)
def square17_bits(x):
    """:func:`square17` of one integer (branch-free: each partial product masked by its bit)."""
    res = 0
    for i in range(17):
        res += (-((x >> i) & 1)) & (x >> (18 - i))
    return res >> 1


#: :func:`square17` of every 17-bit integer (at most 2**15, so uint16: a 256 KiB table)
SQUARE17 = square17(np.arange(1 << 17)).astype(np.uint16)


@numba.njit(cache=True)
def square17_scalar(x):
    """:func:`square17` of one 17-bit integer ``x`` (0 <= x < 2**17), looked up in :data:`SQUARE17`."""
    return np.int64(SQUARE17[x & 0x1FFFF])


def fmul_rz_f32(a, b) -> np.ndarray:
    """float32 ``a * b`` rounded toward zero, on bit patterns (uint32 in, uint32 out).  The float64
    product of two float32 values is exact (48 significant bits), so rounding it to float32 and
    stepping one ulp toward zero where that rounded away from zero gives the RZ result."""
    fa = np.asarray(a, np.uint32).view(np.float32).astype(np.float64)
    fb = np.asarray(b, np.uint32).view(np.float32).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        p = fa * fb
        q = p.astype(np.float32)
        away = np.isfinite(p) & (np.abs(q.astype(np.float64)) > np.abs(p))
        q = np.where(away, np.nextafter(q, np.float32(0)), q)
    # RZ never overflows to infinity: a finite product beyond the largest float is the largest float
    big = np.isfinite(p) & np.isinf(q)
    q = np.where(big, np.copysign(np.float32(3.4028235e38), p).astype(np.float32), q)
    return np.ascontiguousarray(q, dtype=np.float32).view(np.uint32)


def revolutions_fixed(r) -> np.ndarray:
    """``|r| * 2**25`` truncated, modulo ``2**25`` (int64), for float32 bit patterns ``r`` that are
    finite; zero and subnormal ``r`` give 0 (the unit flushes them)."""
    r = np.asarray(r, np.int64) & 0x7FFFFFFF
    e = r >> 23
    m = (r & 0x7FFFFF) | 0x800000
    sh = e - 127 + 2
    left = np.where(sh >= 0, (m << np.clip(sh, 0, 40)) & 0x1FFFFFF, 0)
    right = np.where(sh < 0, m >> np.clip(-sh, 0, 63), 0)
    fx = np.where(sh >= 0, np.where(sh >= 32, 0, left), right)
    return np.where(e == 0, 0, fx)
