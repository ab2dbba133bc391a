"""Replay the special-function-unit recordings (fixtures/sfu) through refmodel.

* ``sfu_forms``: per form, the chunk sums of its outputs over all 2**32 input words (f64 forms: all
  2**32 high words, for each recorded low word), the raw outputs of a sample of inputs, and for the
  16-bit forms every one of the 65536 outputs;
* ``sfu_pairs``: the div forms' (and binary spellings') chunk sums over the recorded pair sets
  (:func:`refmodel.numerics.sfu.pairs.div_pairs`), and the raw outputs of their first pairs;
* ``sfu_spellings``: the CUDA / Triton spellings' chunk sums over all 2**32 inputs and samples.

Recomputing every chunk of every sweep takes several seconds a form on two cores, so by default the
sweeps are checked on :data:`CHUNKS` (zero and subnormals, [0.5, 2), the largest values with Inf
and NaN, and -128 .. -512), the spellings on :data:`SPELLING_CHUNKS` and the pairs on
:data:`PAIR_CHUNKS` of 32 chunks, every sample in full; ``EXHAUSTIVE = True``
(``wgref verify --sfu-exhaustive``) checks every chunk of everything.
Forms with no model yet are reported, never counted as reproduced.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .replay import Result, meta_error, replayer

#: chunks of 2**24 input words a default replay recomputes (sign, exponent's top bits)
CHUNKS = (0x00, 0x3F, 0x7F, 0xC3)      # +0 and tiny, [0.5, 2), huge/Inf/NaN, -(128..512)
QUICK_CHUNKS = (0x3F,)
SPELLING_CHUNKS = (0x3F,)              # the spellings' libdevice sequences cost up to 100 ns an input
PAIR_CHUNKS = 8                        # of the 32 pair chunks, by default
EXHAUSTIVE = False


def _key(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def _chunks(full: bool) -> np.ndarray:
    return np.arange(256) if EXHAUSTIVE else np.array(CHUNKS if full else QUICK_CHUNKS)


def _compare(total: Result, label: str, got, want, inputs=None, unit: int = 1) -> None:
    got = np.asarray(got).reshape(-1)
    want = np.asarray(want).reshape(-1)
    bad = np.flatnonzero(got != want)
    total.cases += want.size * unit
    total.mismatches += bad.size * unit
    for i in bad[:3]:
        where = f"input 0x{int(inputs[i]):x}" if inputs is not None else f"chunk {i}"
        total.details.append(f"{label}: {where}: hardware 0x{int(want[i]):x}, refmodel 0x{int(got[i]):x}")


def _sample_inputs(meta) -> np.ndarray:
    n, stride = int(meta["sample_n"]), int(meta["sample_stride"])
    return (np.arange(n, dtype=np.uint64) * stride % (1 << 32)).astype(np.uint32)


def form_arrays(form) -> list[str]:
    """The arrays a recording holds for one form."""
    k = _key(form.instr)
    if form.type == "f64":
        return [f"a_{k}", f"sample_{k}"]
    if form.word_bits == 16:
        return [f"all_{k}", f"digests_{k}"]
    if form.exhaustive:
        return [f"digests_{k}", f"sample_{k}"]
    return []


@replayer("sfu_forms")
def replay_sfu_forms(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    from ..numerics.sfu import parse_sfu
    from ..numerics.sfu.sequences import UNARY
    from ..numerics.sfu.unit import MODELLED, UNARY_CODE, sweep_sums, sfu

    forms = [parse_sfu(f) for f in meta.get("forms") or []]
    if not forms:
        raise meta_error("meta lists no SFU forms")
    lo_words = [int(w) for w in meta.get("lo_words", [])]
    expected = set()
    for f in forms:
        expected |= set(form_arrays(f))
        if f.type == "f64":
            expected |= {f"digests_{_key(f.instr)}_lo{w:08x}" for w in lo_words}
    if set(arrays) != expected:
        raise meta_error(f"arrays and forms disagree: missing {sorted(expected - set(arrays))[:4]}, "
                         f"unexplained {sorted(set(arrays) - expected)[:4]}")
    chunks = _chunks(full)
    total = Result(0, 0, complete=bool(EXHAUSTIVE))
    xs = _sample_inputs(meta)
    unmodelled = []
    sums: dict[tuple, np.ndarray] = {}   # forms with one model (sin.approx.f32 and .ftz.f32): one sweep

    def swept(code: int, word_bits: int, lo: int) -> np.ndarray:
        at = (id(UNARY[code][1]), word_bits, lo)
        if at not in sums:
            sums[at] = sweep_sums(code, chunks, word_bits, lo)
        return sums[at]

    for f in forms:
        k = _key(f.instr)
        if f.n_operands == 2:          # the div forms are recorded on pairs (sfu_pairs)
            continue
        if f.instr not in MODELLED:
            unmodelled.append(f.instr)
            continue
        code = UNARY_CODE[f.instr]
        if f.type == "f64":
            a = arrays[f"a_{k}"]
            _compare(total, f.instr, sfu(f.instr, a), arrays[f"sample_{k}"], a)
            for w in lo_words:
                _compare(total, f"{f.instr} (low word 0x{w:08x})", swept(code, 64, w),
                         arrays[f"digests_{k}_lo{w:08x}"][chunks], unit=1 << 24)
            continue
        if f.word_bits == 16:
            every = np.arange(1 << 16, dtype=np.uint16)
            _compare(total, f.instr, sfu(f.instr, every), arrays[f"all_{k}"], every)
            _compare(total, f"{f.instr} (words i & 0xffff)", swept(code, 16, 0),
                     arrays[f"digests_{k}"][chunks], unit=0)
            continue
        _compare(total, f.instr, sfu(f.instr, xs), arrays[f"sample_{k}"], xs)
        _compare(total, f.instr, swept(code, 32, 0), arrays[f"digests_{k}"][chunks], unit=1 << 24)
    scope = ("SFU: every chunk of every sweep" if EXHAUSTIVE else
             f"SFU sweeps on {len(chunks)} of 256 chunks (wgref verify --sfu-exhaustive: all)")
    if unmodelled:
        total.complete = False
        total.details.append(f"recorded, no model yet (not compared): {', '.join(unmodelled)}")
        scope += f"; {len(unmodelled)} SFU forms recorded but not modelled"
    total.scope = scope
    return total


@replayer("sfu_pairs")
def replay_sfu_pairs(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    from ..numerics.sfu.pairs import div_pairs
    from ..numerics.sfu.unit import BINARY_CODE, pair_sum, sfu, spelled, spelled_binary

    names = list(meta.get("pair_names") or [])
    expected = {f"pairs_digests_{_key(n)}" for n in names} | {f"pairs_sample_{_key(n)}" for n in names}
    if not names or set(arrays) != expected:
        raise meta_error("pair names and arrays disagree")
    seed, n_chunks = int(meta["pair_seed"]), int(meta["pair_chunks"])
    chunks = range(n_chunks) if EXHAUSTIVE else range(min(n_chunks, PAIR_CHUNKS if full else 2))
    codes = {}
    unmodelled = []
    for n in names:
        c = BINARY_CODE.get(n)
        fn = None if c is not None else spelled_binary(n)
        if c is None and fn is None:
            unmodelled.append(n)
        else:
            codes[n] = (c, fn)
    got = {n: np.zeros(n_chunks, np.uint64) for n in codes}
    total = Result(0, 0, complete=bool(EXHAUSTIVE) and not unmodelled)
    for c in chunks:
        a, b = div_pairs(c, seed)
        for n, (code, fn) in codes.items():
            got[n][c] = pair_sum(code, a, b, c * (1 << 22)) if code is not None else fn(a, b, c * (1 << 22))
            if c == 0:
                m = arrays[f"pairs_sample_{_key(n)}"].size
                out = sfu(n, a[:m], b[:m]) if code is not None else spelled(n, a[:m], b[:m])
                _compare(total, n, out, arrays[f"pairs_sample_{_key(n)}"], a[:m])
    idx = np.array(list(chunks))
    for n in codes:
        _compare(total, f"{n} (pair chunks)", got[n][idx], arrays[f"pairs_digests_{_key(n)}"][idx], unit=1 << 22)
    total.scope = f"SFU pairs: {len(idx)} of {n_chunks} chunks of 2^22 pairs"
    if unmodelled:
        total.details.append(f"recorded, no model yet (not compared): {', '.join(unmodelled)}")
        total.scope += f"; {len(unmodelled)} binary spellings not modelled"
    return total


@replayer("sfu_spellings")
def replay_sfu_spellings(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    from ..numerics.sfu.unit import spelled, spelled_sweep_sums, spelled_unary

    names = list(meta.get("spellings") or [])
    expected = {f"digests_{_key(n)}" for n in names} | {f"sample_{_key(n)}" for n in names}
    if not names or set(arrays) != expected:
        raise meta_error("spelling names and arrays disagree")
    chunks = np.arange(256) if EXHAUSTIVE else np.array(SPELLING_CHUNKS)
    xs = _sample_inputs(meta)
    total = Result(0, 0, complete=bool(EXHAUSTIVE))
    unmodelled = []
    sums: dict[int, np.ndarray] = {}   # spellings with the same model (cuda:sqrtf, triton:tl.sqrt_rn): one sweep
    for n in names:
        model = spelled_unary(n)
        if model is None:
            unmodelled.append(n)
            continue
        k = _key(n)
        _compare(total, n, spelled(n, xs), arrays[f"sample_{k}"], xs)
        if id(model) not in sums:
            sums[id(model)] = spelled_sweep_sums(n, chunks)
        _compare(total, n, sums[id(model)], arrays[f"digests_{k}"][chunks], unit=1 << 24)
    total.scope = (f"SFU spellings: {len(chunks)} of 256 chunks" if not EXHAUSTIVE else
                   "SFU spellings: every chunk")
    if unmodelled:
        total.complete = False
        total.details.append(f"recorded, no model yet (not compared): {', '.join(unmodelled)}")
        total.scope += f"; {len(unmodelled)} spellings not modelled"
    return total
