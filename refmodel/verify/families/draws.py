"""A numpy Generator's draws, compiled: the same numbers from the same stream, faster.

For PCG64 (``default_rng``'s bit generator) the draws run inlined on its state (:mod:`.pcg64`);
for any other bit generator, or a range :mod:`.pcg64` does not cover, through numba's Generator
methods.

numba implements ``np.random.Generator``'s methods by NumPy's own algorithms (the ziggurat for
normals, Lemire's bounded integers, the 53-bit doubles) on the Generator's bit generator, whose state
it advances in place.  So ``standard_normal(rng, shape)`` returns what ``rng.standard_normal(shape)``
would and leaves ``rng`` where it would (``tests/test_draws.py`` holds every function here to the
Generator method it replaces, interleaved, over many shapes and bounds).  The recorded fixtures' inputs are rebuilt from seeds by these draws, and each replay
checks the rebuilt inputs against the recorded sha256: a stream that changed is reported, never
compared.
"""

from __future__ import annotations

import numba
import numpy as np

try:        # numba's private ziggurat tables: where a numba lacks them, its Generator methods draw
    from . import pcg64
except ImportError:  # pragma: no cover - numba without numba.np.random._constants
    pcg64 = None


@numba.njit(cache=True)
def _standard_normal(rng, n):
    return rng.standard_normal(n)


@numba.njit(cache=True)
def _integers(rng, lo, hi, n):
    return rng.integers(lo, hi, n)


@numba.njit(cache=True)
def _random(rng, n):
    return rng.random(n)


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _draw(inline: str, compiled, rng: np.random.Generator, shape, *args, **kw) -> np.ndarray:
    """:mod:`.pcg64`'s ``inline`` draw of ``shape``'s elements, or (other bit generators and ranges,
    or no :mod:`.pcg64`) numba's Generator method ``compiled``."""
    n = _size(shape)
    out = getattr(pcg64, inline)(rng, *args, n, **kw) if pcg64 is not None else None
    return (out if out is not None else compiled(rng, *(np.int64(a) for a in args), n)).reshape(shape)


def standard_normal(rng: np.random.Generator, shape) -> np.ndarray:
    """``rng.standard_normal(shape)`` (float64)."""
    return _draw("standard_normal", _standard_normal, rng, shape)


def integers(rng: np.random.Generator, low: int, high: int, shape, dtype=np.int64) -> np.ndarray:
    """``rng.integers(low, high, shape)`` (``high`` excluded) as ``dtype`` (int64, or a narrower
    integer type that holds every value drawn)."""
    out = _draw("integers", _integers, rng, shape, low, high, dtype=dtype)
    return out if out.dtype == dtype else out.astype(dtype)


def random(rng: np.random.Generator, shape) -> np.ndarray:
    """``rng.random(shape)`` (float64 in [0, 1))."""
    return _draw("random", _random, rng, shape)


def below(rng: np.random.Generator, thr: float, shape) -> np.ndarray:
    """``rng.random(shape) < thr`` (bool), the doubles never stored."""
    if pcg64 is not None:
        out = pcg64.below(rng, thr, _size(shape))
        if out is not None:
            return out.reshape(shape)
    return _random(rng, _size(shape)).reshape(shape) < thr
