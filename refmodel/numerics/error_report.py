"""Relative error of a wgmma GEMM against float64 as a function of K, for several
promotion intervals.

The tensor core keeps F fraction bits per aligned term and truncates (13 bits and an
e8m13 result for FP8 on Hopper, per the model in :mod:`refmodel.accumulate`), so a
long unpromoted FP8 chain drifts; promoting partial sums into float32 every n
instructions (DeepGEMM) bounds the drift.  The reference is the float64 product of the
exact input values, so the error shown is the accumulation's alone (not quantisation).

>>> rows = error_vs_k(ks=(512,), promote=(None, 1), n=16)   # doctest: +SKIP
>>> print(format_table(rows))                                # doctest: +SKIP
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

import numpy as np

from ..errors import InputError
from ..fileio import atomic_write
from ..limits import check_limit
from ..validate import _describe, check_instr, check_int
from .fp8 import encode
from ..dtypes import element_dtype
from .gemm import PROMOTE_OPS, gemm
from .accumulate import params_for
from .wgmma import operand_values
from ..wgmma_forms import parse_wgmma

DEFAULT_INSTR = "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"
DISTRIBUTIONS = ("uniform", "normal")


def _draw(rng: np.random.Generator, name: str, shape, dist: str) -> np.ndarray:
    x = rng.uniform(0.0, 1.0, shape) if dist == "uniform" else rng.standard_normal(shape)
    if name in ("e4m3", "e5m2"):
        return encode(x, name).view(element_dtype(name))  # RNE, satfinite
    return x.astype(np.float32).astype(element_dtype(name))


def _items(name: str, v, what: str) -> list:
    """A short list from a sequence argument (not a string, not unbounded)."""
    try:
        if isinstance(v, (str, bytes, dict)):
            raise TypeError
        it = iter(v)
    except TypeError:   # not iterable (a number, a 0-d array)
        raise InputError(f"{name} must be a sequence of {what}, got {_describe(v)}") from None
    out = []
    for x in it:
        out.append(x)
        check_limit("sweep_items", len(out), f"{name} (entries)")
    return out


def error_vs_k(instr: str = DEFAULT_INSTR, ks: Sequence[int] = (512, 1024, 2048, 4096, 8192, 16384),
               promote: Iterable[Optional[int]] = (None, 1, 4, 16), *, m: int = 64,
               n: Optional[int] = None, dist: str = "uniform", seed: int = 0,
               promote_op: str = "fma") -> list[dict]:
    """Error of :func:`refmodel.gemm.gemm` vs float64 for each K in ``ks`` and each
    promotion interval in ``promote`` (None = no promotion).

    Inputs: ``dist`` "uniform" (U[0, 1), where truncation errors add up) or "normal"
    (N(0, 1)), rounded to the input format; one draw at the largest K, sliced for the
    smaller ones.  Intervals that do not divide K/instr_K are skipped.
    Returns rows ``{"k", "promote_every", "rel_err", "max_rel_err"}``: ``rel_err`` =
    ||D - R||_F / ||R||_F and ``max_rel_err`` = max |D - R| / |R| over R != 0.
    """
    form = parse_wgmma(check_instr("instr", instr, DEFAULT_INSTR))
    if form.family == "int8":
        raise InputError("error_vs_k needs a floating-point wgmma form; integer wgmma is exact")
    if not isinstance(dist, str) or dist not in DISTRIBUTIONS:
        raise InputError(f"dist must be one of {', '.join(DISTRIBUTIONS)}, got {_describe(dist)}")
    if not isinstance(promote_op, str) or promote_op not in PROMOTE_OPS:
        raise InputError(f"promote_op must be one of {', '.join(PROMOTE_OPS)}, got {_describe(promote_op)}")
    ks = _items("ks", ks, "K values")
    ks = sorted(check_int("each K", k) for k in ks)
    if not ks or ks[0] <= 0 or any(k % form.k for k in ks):
        raise InputError(f"ks must be positive multiples of {form.k}, got {_describe(ks)}")
    check_limit("error_k", ks[-1], "each K")
    m = check_int("m", m, 1, multiple=64, limit="error_dim", rule="a positive multiple of 64, the wgmma M")
    n = form.n if n is None else check_int("n", n)
    if n <= 0 or n % form.n:
        raise InputError(f"n must be a positive multiple of the instruction's N = {form.n}, got {_describe(n)}")
    check_limit("error_dim", n, "n")
    seed = check_int("seed", seed, 0, (1 << 64) - 1)
    promote = _items("promote", promote, "promotion intervals (positive integers or None)")
    for pe in promote:
        if pe is not None and (isinstance(pe, bool) or not isinstance(pe, (int, np.integer)) or pe <= 0):
            raise InputError(f"promotion intervals must be positive integers or None, got {_describe(pe)}")
        if pe is not None and all((k // form.k) % pe for k in ks):
            raise InputError(f"promotion interval {pe} divides none of the instruction counts "
                             f"K/{form.k} = {', '.join(str(k // form.k) for k in ks)}")
    rng = np.random.default_rng(seed)
    a = _draw(rng, form.dtype_a, (m, ks[-1]), dist)
    b = _draw(rng, form.dtype_b, (ks[-1], n), dist)
    p = params_for(form)
    av, bv = operand_values(a, form.dtype_a, p), operand_values(b, form.dtype_b, p)
    rows = []
    for k in ks:
        ref = av[:, :k] @ bv[:k]
        nz = ref != 0
        for pe in promote:
            if pe is not None and (k // form.k) % pe:
                continue
            d = gemm(a[:, :k], b[:k], instr=instr, promote_every=pe, promote_op=promote_op)
            err = d.astype(np.float64) - ref
            rows.append({
                "k": k,
                "promote_every": pe,
                "rel_err": float(np.linalg.norm(err) / np.linalg.norm(ref)),
                "max_rel_err": float(np.max(np.abs(err[nz]) / np.abs(ref[nz]))) if nz.any() else 0.0,
            })
    return rows


def _label(pe: Optional[int]) -> str:
    return "none" if pe is None else f"every {pe}"


def format_table(rows: list[dict], key: str = "rel_err") -> str:
    """Text table: one line per K, one column per promotion interval (``key`` values)."""
    pes = list(dict.fromkeys(r["promote_every"] for r in rows))
    ks = sorted({r["k"] for r in rows})
    val = {(r["k"], r["promote_every"]): r[key] for r in rows}
    head = f"{'K':>7} " + " ".join(f"{_label(pe):>12}" for pe in pes)
    lines = [f"{key} vs float64 (promotion interval in instructions)", head]
    for k in ks:
        cells = [f"{val[(k, pe)]:12.3e}" if (k, pe) in val else f"{'-':>12}" for pe in pes]
        lines.append(f"{k:>7} " + " ".join(cells))
    return "\n".join(lines)


def plot_error_vs_k(rows: list[dict], path: str, key: str = "rel_err", title: Optional[str] = None) -> str:
    """Write a log-log PNG of ``key`` against K, one line per promotion interval.
    Needs matplotlib (``pip install wgref[plot]``).  Returns ``path``."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("plot_error_vs_k needs matplotlib; install it with pip install 'wgref[plot]'") from None
    fig = Figure(figsize=(6, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for pe in dict.fromkeys(r["promote_every"] for r in rows):
        pts = sorted((r["k"], r[key]) for r in rows if r["promote_every"] == pe)
        ax.plot([x for x, _ in pts], [max(y, 1e-12) for _, y in pts], marker="o",
                label=f"promotion {_label(pe)}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("K")
    ax.set_ylabel(key.replace("_", " ") + " vs float64")
    ax.set_title(title or "wgmma GEMM accumulation error")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    from pathlib import Path

    ext = Path(str(path)).suffix[1:].lower() or "png"
    try:
        atomic_write(path, lambda f: fig.savefig(f, dpi=110, format=ext))
    except ValueError as e:  # matplotlib: unknown image format
        raise InputError(f"cannot write {path}: {str(e).splitlines()[0]}") from None
    return path
