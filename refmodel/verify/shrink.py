"""Shrink a failing wgmma case to a minimal reproducer (Hypothesis-style, greedy).

``shrink(case, mismatch)`` takes a case and a function returning the boolean mask
of mismatching outputs (hardware vs refmodel, or any two implementations), and
applies reductions that keep *some* mismatch, in this order:

1. one tile (the first failing one);
2. one output element: every A row, B column and C element not feeding it is zeroed;
3. the shortest chain (single steps, then dropping steps at either end);
4. the smallest N: the failing column moved to column 0 of the m64n8 form;
5. the fewest nonzero inputs (halves, then quarters, ... then single elements);
6. the simplest values: each remaining input replaced by +-1, then by a power of two
   nearer 1, then with its mantissa cleared;
7. the failing element moved to row 0, column 0 where that still fails.

Every step is checked with ``mismatch``; the result still fails by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .case import WgmmaCase
from ..dtypes import bits_of
from ..errors import InputError
from ..wgmma_forms import WGMMA_FORMS, M

MismatchFn = Callable[[WgmmaCase], np.ndarray]


@dataclass
class ShrinkResult:
    case: WgmmaCase
    calls: int
    log: list[str] = field(default_factory=list)


class _Shrinker:
    def __init__(self, mismatch: MismatchFn, max_calls: int):
        self.mismatch = mismatch
        self.calls = 0
        self.max_calls = max_calls
        self.log: list[str] = []

    def fails(self, case: WgmmaCase) -> bool:
        if self.calls >= self.max_calls:
            return False
        self.calls += 1
        try:
            return bool(np.any(self.mismatch(case)))
        except Exception:  # an invalid reduction (e.g. a device fault) does not count as failing
            return False

    def first_failure(self, case: WgmmaCase) -> tuple[int, int, int]:
        self.calls += 1
        m = np.asarray(self.mismatch(case)).reshape(-1, M, case.form.n)
        t, i, j = (int(v) for v in np.argwhere(m)[0])
        return t, i, j


def _zero(x: np.ndarray) -> np.ndarray:
    return np.zeros_like(x)


def _candidates(v: float, dtype) -> list:
    """Simpler replacement values for one nonzero input, simplest first."""
    out = []
    if np.dtype(dtype).kind in "iu":
        iv = int(v)
        for c in (1 if iv > 0 else -1, iv // 2):
            if c != iv and c != 0:
                out.append(c)
        return out
    if not np.isfinite(v):
        return [1.0 if v > 0 or np.isnan(v) else -1.0]
    s = -1.0 if v < 0 else 1.0
    m, e = np.frexp(abs(v))  # abs(v) = m * 2**e, m in [0.5, 1)
    e -= 1
    cands = [s * 1.0, s * 2.0 ** int(e / 2), s * 2.0 ** e]
    return [c for c in cands if c != v]


def _cast(v, dtype):
    with np.errstate(all="ignore"):
        return np.array(v, dtype=np.float64).astype(dtype)


def shrink(case: WgmmaCase, mismatch: MismatchFn, *, max_calls: int = 2000) -> ShrinkResult:
    """Minimal failing case reachable by the reductions above (see the module docstring)."""
    sh = _Shrinker(mismatch, max_calls)
    if not sh.fails(case):
        raise InputError("the case does not fail: nothing to shrink")
    f = case.form
    k_all = f.k * case.chain

    # 1. one tile
    t, i, j = sh.first_failure(case)
    one = case.with_(a=case.a[t:t + 1].copy(), b=case.b[t:t + 1].copy(), c=case.c[t:t + 1].copy())
    if sh.fails(one):
        sh.log.append(f"kept tile {t} of {case.a.shape[0] if case.a.ndim == 3 else 1}")
        case = one

    # 2. one output element
    _, i, j = sh.first_failure(case)
    a = _zero(case.a); a[..., i, :] = case.a[..., i, :]
    b = _zero(case.b); b[..., :, j] = case.b[..., :, j]
    c = _zero(case.c); c[..., i, j] = case.c[..., i, j]
    cand = case.with_(a=a, b=b, c=c)
    if sh.fails(cand):
        case = cand
        sh.log.append(f"isolated output ({i}, {j})")

    # 3. shortest chain
    while case.chain > 1:
        kk = f.k
        opts = [case.with_(a=case.a[..., s * kk:(s + 1) * kk], b=case.b[..., s * kk:(s + 1) * kk, :], chain=1)
                for s in range(case.chain)]
        opts += [case.with_(a=case.a[..., kk:], b=case.b[..., kk:, :], chain=case.chain - 1),
                 case.with_(a=case.a[..., :-kk], b=case.b[..., :-kk, :], chain=case.chain - 1)]
        for o in opts:
            if sh.fails(o):
                sh.log.append(f"chain {case.chain} -> {o.chain}")
                case = o
                break
        else:
            break

    # 4. smallest N: move the failing column to column 0 of an N=8 form
    f = case.form
    if f.n > 8:
        small = next((g for g in WGMMA_FORMS if g.n == 8 and g.k == f.k and g.dtype_d == f.dtype_d
                      and g.dtype_a == f.dtype_a and g.dtype_b == f.dtype_b and g.satfinite == f.satfinite))
        _, i, j = sh.first_failure(case)
        b = np.zeros(case.b.shape[:-1] + (8,), case.b.dtype); b[..., :, 0] = case.b[..., :, j]
        c = np.zeros(case.c.shape[:-1] + (8,), case.c.dtype); c[..., :, 0] = case.c[..., :, j]
        cand = case.with_(instr=small.instr, b=b, c=c)
        if sh.fails(cand):
            sh.log.append(f"N {f.n} -> 8 (column {j} -> 0)")
            case = cand

    # 5. fewest nonzero inputs: delta debugging over the nonzero positions
    def positions(cs):
        out = []
        for name in ("a", "b", "c"):
            for idx in np.argwhere(bits_of(getattr(cs, name)) != 0):
                out.append((name, tuple(int(v) for v in idx)))
        return out

    def without(cs, drop):
        arrs = {n: getattr(cs, n).copy() for n in ("a", "b", "c")}
        for name, idx in drop:
            bits_of(arrs[name])[idx] = 0
        return cs.with_(**arrs)

    pos = positions(case)
    chunk = max(1, len(pos) // 2)
    while pos and chunk >= 1:
        progressed = False
        for s in range(0, len(pos), chunk):
            drop = pos[s:s + chunk]
            cand = without(case, drop)
            if sh.fails(cand):
                case, progressed = cand, True
                pos = positions(case)
                break
        if not progressed:
            if chunk == 1:
                break
            chunk = max(1, chunk // 2)
    sh.log.append(f"{case.nonzeros()} nonzero inputs left")

    # 6. simplest values
    for name, idx in positions(case):
        arr = getattr(case, name)
        v = float(np.asarray(arr[idx]).astype(np.float64)) if arr.dtype.kind not in "iu" else int(arr[idx])
        for cv in _candidates(v, arr.dtype):
            new = arr.copy()
            new[idx] = _cast(cv, arr.dtype)
            if bits_of(new)[idx] == bits_of(arr)[idx]:
                continue
            cand = case.with_(**{name: new})
            if sh.fails(cand):
                case = cand
                sh.log.append(f"{name}{list(idx)}: {v!r} -> {cv!r}")
                break

    # 7. cosmetic: the failing output at row 0 (rows of A and C rolled)
    _, i, j = sh.first_failure(case)
    if i:
        cand = case.with_(a=np.roll(case.a, -i, axis=-2), c=np.roll(case.c, -i, axis=-2))
        if sh.fails(cand):
            case = cand
            sh.log.append(f"row {i} -> 0")
    return ShrinkResult(case, sh.calls, sh.log)
