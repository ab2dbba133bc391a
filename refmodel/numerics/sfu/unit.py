"""``sfu(op, x, y=None)``: every modelled sm_90a SFU form on numpy arrays, and the kernels that
recompute the recorded digests (all 2**32 inputs of a unary form, the div pair sets).

One compiled dispatcher per arity and task (the sweep and map kernels) picks the
form's model by its code, its index in :data:`.sequences.UNARY` / :data:`.sequences.BINARY`, once,
outside the loop: every form has its own optimised loop inside one cached machine-code kernel.
"""

from __future__ import annotations

import warnings

import numba
import numpy as np
from numba import literal_unroll

from ..._parallel import parallel_ranges
from ...errors import DTypeError, InputError, UnmodelledError
from .digest import block_sweep, key
from .forms import SfuForm, parse_sfu
from .sequences import BINARY, UNARY

warnings.filterwarnings("ignore", message=".*First-class function type feature is experimental")

_UNARY_FNS = tuple(f for _, f in UNARY)
_BINARY_FNS = tuple(f for _, f in BINARY)
UNARY_CODE = {name: i for i, (name, _) in enumerate(UNARY)}
BINARY_CODE = {name: i for i, (name, _) in enumerate(BINARY)}
MODELLED = frozenset(UNARY_CODE) | frozenset(BINARY_CODE)


# The kernels below pick the form once, outside their loops (each form gets a loop of its own,
# which LLVM optimises for that form), and take a range lo .. hi of their work so that
# refmodel._parallel.parallel_ranges runs them on several threads.

@numba.njit(cache=True, nogil=True)
def _map_unary(lo, hi, code, xs, out):
    k = 0
    for f in literal_unroll(_UNARY_FNS):
        if k == code:
            for i in range(lo, hi):
                out[i] = f(np.int64(xs[i]))
        k += 1


@numba.njit(cache=True, nogil=True)
def _map_binary(lo, hi, code, a, b, out):
    k = 0
    for f in literal_unroll(_BINARY_FNS):
        if k == code:
            for i in range(lo, hi):
                out[i] = f(np.int64(a[i]), np.int64(b[i]))
        k += 1


@numba.njit(cache=True, nogil=True)
def _pair_pieces(lo, hi, code, a, b, start, step, parts):
    """parts[p] for pieces p = lo .. hi of ``step`` pairs each (:func:`pair_sum`)."""
    n = a.size
    k = 0
    for f in literal_unroll(_BINARY_FNS):
        if k == code:
            for p in range(lo, hi):
                s = np.uint64(0)
                for j in range(p * step, min(n, (p + 1) * step)):
                    s += key(start + j, np.uint64(f(np.int64(a[j]), np.int64(b[j]))))
                parts[p] = s
        k += 1


def _map(kernel, n, *args) -> None:
    parallel_ranges(kernel, n, *args, min_piece=4096)


#: the two-halves forms and their one-half form: the model of the word is the half form's model of
#: each 16-bit half (:mod:`.sequences`: ``ex2_f16x2(w) = ex2_f16(lo) | ex2_f16(hi) << 16``)
HALVES = {"ex2.approx.f16x2": "ex2.approx.f16", "ex2.approx.ftz.bf16x2": "ex2.approx.ftz.bf16",
          "tanh.approx.f16x2": "tanh.approx.f16", "tanh.approx.bf16x2": "tanh.approx.bf16"}


@numba.njit(cache=True, nogil=True)
def _table_sweep_pieces(lo, hi, chunks, table, pair, parts):
    """Chunk-sum pieces (2**16 inputs each, 256 a chunk) of a form whose output is a function of 16-bit
    halves: ``table[h]`` is the model's output for half h (all 65536 of them), looked up for each input."""
    for p in range(lo, hi):
        s = np.uint64(0)
        base = (np.int64(chunks[p >> 8]) << 24) + np.int64(p & 255) * (1 << 16)
        for i in range(base, base + (1 << 16)):
            if pair:
                o = table[i & 0xFFFF] | (table[(i >> 16) & 0xFFFF] << np.uint64(16))
            else:
                o = table[i & 0xFFFF]
            s += key(i, o)
        parts[p] = s


def _words(word_bits: int, lo_word: int):
    """The operand words (int64) of sweep inputs i: i, i & 0xffff, or (i << 32) | lo (f64 high words)."""
    if word_bits == 64:
        return lambda i: ((i.astype(np.uint64) << np.uint64(32)) | np.uint64(lo_word)).view(np.int64)
    if word_bits == 16:
        return lambda i: i & 0xFFFF
    return lambda i: i


def sweep_sums(code: int, chunks, word_bits: int, lo: int) -> np.ndarray:
    """Chunk sums (:mod:`.digest`) of a unary form over inputs i = c << 24 .. for each chunk c;
    the operand word is i (32-bit forms), i & 0xffff (16-bit forms) or (i << 32) | lo (f64).
    A 16-bit form, or a two-halves form (:data:`HALVES`), is evaluated on each of the 65536 half
    words once and looked up for every input (the same outputs: tests hold it to the direct loop)."""
    chunks = np.ascontiguousarray(chunks, dtype=np.int64)
    name = UNARY[code][0]
    if word_bits == 16 or name in HALVES:
        parts = np.zeros(chunks.size * 256, np.uint64)
        halves = np.arange(1 << 16, dtype=np.int64)
        table = np.empty(1 << 16, np.int64)
        _map(_map_unary, halves.size, UNARY_CODE[HALVES.get(name, name)], halves, table)
        table = table.view(np.uint64)
        parallel_ranges(_table_sweep_pieces, parts.size, chunks, table, name in HALVES, parts)
        return parts.reshape(chunks.size, 256).sum(axis=1, dtype=np.uint64)
    return _sweep_sums_direct(code, chunks, word_bits, lo)


def _sweep_sums_direct(code: int, chunks, word_bits: int, lo: int) -> np.ndarray:
    """:func:`sweep_sums` evaluating the form on every input word: its path for the other forms, and
    the tests' reference for the table path."""
    return block_sweep(_map_unary, code, np.ascontiguousarray(chunks, dtype=np.int64), _words(word_bits, lo),
                       (1 << 64) - 1)


def pair_sum(code: int, a: np.ndarray, b: np.ndarray, start: int) -> int:
    """Digest of a binary form over pairs (a[j], b[j]) with pair index start + j."""
    parts = np.zeros(256, np.uint64)
    step = (a.size + 255) // 256
    parallel_ranges(_pair_pieces, 256, code, a, b, start, step, parts)
    return np.uint64(parts.sum(dtype=np.uint64))


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
        # int64 words whatever the word size: one compiled signature of the map (the sweeps use it too)
        _map(_map_unary, xs.size, UNARY_CODE[form.instr], xs.astype(np.int64), out)
        res = out.astype(word).reshape(np.shape(xw)) if word != np.uint64 else out.view(np.uint64).reshape(np.shape(xw))
    else:
        yw, _ = _operand("y", y, form)
        try:
            a, b = np.broadcast_arrays(xw, yw)
        except ValueError:
            raise InputError(f"x of shape {np.shape(xw)} and y of shape {np.shape(yw)} do not broadcast") from None
        out = np.empty(a.size, np.int64)
        _map(_map_binary, a.size, BINARY_CODE[form.instr], np.ascontiguousarray(a).reshape(-1),
             np.ascontiguousarray(b).reshape(-1), out)
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


def spelled_f32(name: str, *xs) -> np.ndarray:
    """:func:`spelled` on float32 arrays (broadcast to one shape), float32 out."""
    shape = np.broadcast_shapes(*(np.shape(x) for x in xs))
    words = [np.ascontiguousarray(np.broadcast_to(np.asarray(x, np.float32), shape)).view(np.uint32) for x in xs]
    return spelled(name, *words).view(np.float32).reshape(shape)


def spelled_sweep_sums(name: str, chunks) -> np.ndarray:
    sp = _spelled()
    return sp.sweep_sums(sp.UN_NAMES.index(name), np.asarray(chunks, dtype=np.int64))
