"""``sfu(op, x, y=None)``: every modelled sm_90a SFU form on numpy arrays, and the kernels that
recompute the recorded digests (all 2**32 inputs of a unary form, the div pair sets).

One compiled dispatcher per arity (:func:`eval_unary`, :func:`eval_binary`) picks the form's model
by its code, its index in :data:`.sequences.UNARY` / :data:`.sequences.BINARY`, so every form shares
one cached machine-code kernel.
"""

from __future__ import annotations

import warnings

import numba
import numpy as np
from numba import literal_unroll

from ...errors import DTypeError, InputError, UnmodelledError
from .digest import key
from .forms import SfuForm, parse_sfu
from .sequences import BINARY, UNARY

warnings.filterwarnings("ignore", message=".*First-class function type feature is experimental")

_UNARY_FNS = tuple(f for _, f in UNARY)
_BINARY_FNS = tuple(f for _, f in BINARY)
UNARY_CODE = {name: i for i, (name, _) in enumerate(UNARY)}
BINARY_CODE = {name: i for i, (name, _) in enumerate(BINARY)}
MODELLED = frozenset(UNARY_CODE) | frozenset(BINARY_CODE)


@numba.njit(cache=True)
def eval_unary(code, x):
    r = np.int64(0)
    k = 0
    for f in literal_unroll(_UNARY_FNS):
        if k == code:
            r = f(x)
        k += 1
    return r


@numba.njit(cache=True)
def eval_binary(code, a, b):
    r = np.int64(0)
    k = 0
    for f in literal_unroll(_BINARY_FNS):
        if k == code:
            r = f(a, b)
        k += 1
    return r


@numba.njit(cache=True, parallel=True)
def _map_unary(code, xs, out):
    for i in numba.prange(xs.size):
        out[i] = eval_unary(code, np.int64(xs[i]))


@numba.njit(cache=True, parallel=True)
def _map_binary(code, a, b, out):
    for i in numba.prange(a.size):
        out[i] = eval_binary(code, np.int64(a[i]), np.int64(b[i]))


@numba.njit(cache=True, parallel=True)
def sweep_sums(code, chunks, word_bits, lo):
    """Chunk sums (:mod:`.digest`) of a unary form over inputs i = c << 24 .. for each chunk c;
    the operand word is i (32-bit forms), i & 0xffff (16-bit forms) or (i << 32) | lo (f64)."""
    out = np.zeros(chunks.size, np.uint64)
    for j in range(chunks.size):
        parts = np.zeros(256, np.uint64)
        for t in numba.prange(256):
            s = np.uint64(0)
            base = (np.int64(chunks[j]) << 24) + t * (1 << 16)
            for i in range(base, base + (1 << 16)):
                if word_bits == 64:
                    w = (i << 32) | lo
                elif word_bits == 16:
                    w = i & 0xFFFF
                else:
                    w = i
                s += key(i, np.uint64(eval_unary(code, w)) & np.uint64(0xFFFFFFFFFFFFFFFF))
            parts[t] = s
        out[j] = parts.sum()
    return out


@numba.njit(cache=True, parallel=True)
def pair_sum(code, a, b, start):
    """Digest of a binary form over pairs (a[j], b[j]) with pair index start + j."""
    parts = np.zeros(256, np.uint64)
    n = a.size
    step = (n + 255) // 256
    for t in numba.prange(256):
        s = np.uint64(0)
        for j in range(t * step, min(n, (t + 1) * step)):
            s += key(start + j, np.uint64(eval_binary(code, np.int64(a[j]), np.int64(b[j]))))
        parts[t] = s
    return parts.sum()


# ------------------------------------------------------------------------------------ the API
_WORD = {16: np.uint16, 32: np.uint32, 64: np.uint64}


def _operand(name: str, v, form: SfuForm) -> tuple[np.ndarray, bool]:
    """(operand words, given as floats?) of one operand of ``form``."""
    import ml_dtypes

    elem = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
            "bfloat16": ml_dtypes.bfloat16}[form.element]
    word = _WORD[form.word_bits]
    a = np.asarray(v)
    if a.dtype == np.dtype(word):
        return a, False
    if form.lanes == 1 and a.dtype == np.dtype(elem):
        return a.view(word), True
    if form.lanes == 1 and a.dtype.kind in "iuf" and a.dtype.kind != "u" and a.ndim == 0 and isinstance(v, (int, float)):
        return np.asarray(v, dtype=elem).view(word), True
    want = (f"{form.element} values or {np.dtype(word).name} bit patterns" if form.lanes == 1 else
            f"uint32 words packing two {form.element} values (low half first)")
    raise DTypeError(f"{form.instr} takes {want} as {name}, got {a.dtype}")


def sfu(op: str, x, y=None):
    """The H200's result of the SFU instruction ``op`` (PTX spelling, e.g. ``'ex2.approx.ftz.f32'``,
    ``'div.full.f32'``, ``'ex2.approx.f16x2'``) on ``x`` (and ``y`` for div), elementwise with numpy
    broadcasting.  Operands are arrays of the element type (float32, float64, float16, bfloat16)
    or raw bits (uint32 / uint64 / uint16; the ``x2`` forms take uint32 packed pairs, low half
    first); the result is of the same kind as ``x``."""
    form = parse_sfu(op)
    if form.instr not in MODELLED:
        raise UnmodelledError(f"{form.instr} has no model yet: its H200 outputs are recorded "
                              f"(fixtures/sfu) but wgref does not reproduce them, so it returns nothing")
    if (y is None) != (form.n_operands == 1):
        raise InputError(f"{form.instr} takes {form.n_operands} operand{'s' * (form.n_operands > 1)}, "
                         f"got {1 if y is None else 2}")
    xw, as_float = _operand("x", x, form)
    word = _WORD[form.word_bits]
    if y is None:
        xs = np.ascontiguousarray(xw).reshape(-1)
        out = np.empty(xs.size, np.int64)
        _map_unary(UNARY_CODE[form.instr], xs.astype(np.int64) if word == np.uint64 else xs, out)
        res = out.astype(word).reshape(np.shape(xw)) if word != np.uint64 else out.view(np.uint64).reshape(np.shape(xw))
    else:
        yw, _ = _operand("y", y, form)
        try:
            a, b = np.broadcast_arrays(xw, yw)
        except ValueError:
            raise InputError(f"x of shape {np.shape(xw)} and y of shape {np.shape(yw)} do not broadcast") from None
        out = np.empty(a.size, np.int64)
        _map_binary(BINARY_CODE[form.instr], np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1), out)
        res = out.astype(word).reshape(a.shape)
    if as_float:
        import ml_dtypes

        elem = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
                "bfloat16": ml_dtypes.bfloat16}[form.element]
        return res.view(elem)
    return res


# ------------------------------------------------------------------ compiler spellings (spelled.py)
def _spelled():
    from . import spelled_unit

    return spelled_unit


def spelled_unary(name: str):
    """The model of a unary compiler spelling (``'cuda-fast:__expf(x)'``), or None."""
    sp = _spelled()
    return sp.UN_FNS[sp.UN_NAMES.index(name)] if name in sp.UN_NAMES else None


def spelled_binary(name: str):
    """``f(a, b, start) -> digest`` of a binary spelling's model over pairs, or None."""
    sp = _spelled()
    if name not in sp.BI_NAMES:
        return None
    code = sp.BI_NAMES.index(name)
    return lambda a, b, start: sp.pair_sum(code, np.ascontiguousarray(a, np.uint32), np.ascontiguousarray(b, np.uint32), start)


def spelled(name: str, x, y=None) -> np.ndarray:
    """A compiler spelling's model on float32 bit patterns (uint32 arrays in, uint32 out)."""
    sp = _spelled()
    x = np.ascontiguousarray(x, dtype=np.uint32).reshape(-1)
    out = np.empty(x.size, np.int64)
    if y is None:
        sp.map_unary(sp.UN_NAMES.index(name), x, out)
    else:
        sp.map_binary(sp.BI_NAMES.index(name), x, np.ascontiguousarray(y, dtype=np.uint32).reshape(-1), out)
    return out.astype(np.uint32)


def spelled_sweep_sums(name: str, chunks) -> np.ndarray:
    sp = _spelled()
    return sp.sweep_sums(sp.UN_NAMES.index(name), np.asarray(chunks, dtype=np.int64))
