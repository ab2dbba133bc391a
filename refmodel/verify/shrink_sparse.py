"""Shrink a sparse-wgmma mismatch to the inputs that matter, naming the metadata nibble.

A :class:`SparseCase` is one tile: compressed A, metadata nibbles, B, C and the instruction's
configuration.  Given two runners (hardware and refmodel, each ``case -> D``) that disagree,
:func:`shrink_sparse` keeps only the first differing output ``D[m, n]`` and what it depends
on (row m of A and of the metadata, column n of B, ``C[m, n]``), then greedily resets every
nibble to the harmless 0b0100 (tf32: unchanged) and zeroes every element whose removal keeps
the disagreement.  What survives is the reproducer: typically one or two nibbles and a few
elements, each of which the mismatch needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from ..dtypes import bits_of, from_bits
from ..errors import InputError, WgrefError
from ..wgmma_forms import M
from ..wgmma_sp_forms import parse_wgmma_sp
from .case import REPLAY_COMMON, Field, config_text, replay_config, typed_array

NEUTRAL = 0b0100


@dataclass(frozen=True)
class SparseCase:
    """One sparse wgmma tile in math form (what refmodel.wgmma_sp takes)."""

    instr: str
    a: np.ndarray        # (64, K/2) compressed A
    meta: np.ndarray     # (64, K/4) uint8 nibbles (tf32: (64, K/2))
    b: np.ndarray        # (K, N)
    c: np.ndarray        # (64, N)
    sp_sel: int = 0
    scale_d: bool = True
    imm_scale_a: int = 1
    imm_scale_b: int = 1
    rs: bool = False
    notes: dict = field(default_factory=dict)

    def config(self) -> dict[str, Any]:
        return {"instr": self.instr, "sp_sel": self.sp_sel, "scale_d": self.scale_d,
                "imm_scale_a": self.imm_scale_a, "imm_scale_b": self.imm_scale_b, "rs": self.rs}

    def model(self) -> np.ndarray:
        from ..numerics.sparse import wgmma_sp

        return wgmma_sp(self.instr, self.a, self.meta, self.b, self.c, sp_sel=self.sp_sel, scale_d=self.scale_d,
                        imm_scale_a=self.imm_scale_a, imm_scale_b=self.imm_scale_b)


def _differs(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return bits_of(np.ascontiguousarray(x)) != bits_of(np.ascontiguousarray(y))


def shrink_sparse(case: SparseCase, hw: Callable[[SparseCase], np.ndarray],
                  model: Optional[Callable[[SparseCase], np.ndarray]] = None,
                  log: Callable[[str], None] = lambda s: None) -> tuple[SparseCase, dict[str, Any]]:
    """(minimal case, summary) for a case where ``hw`` and ``model`` disagree."""
    model = model or (lambda cs: cs.model())
    f = parse_wgmma_sp(case.instr)
    bad = np.argwhere(_differs(hw(case), model(case)))
    if not bad.size:
        raise InputError("the case does not reproduce a mismatch: nothing to shrink")
    m, n = (int(v) for v in bad[0])

    def still(cs: SparseCase) -> bool:
        return bool(_differs(hw(cs), model(cs))[m, n])

    ab, bb, cb = bits_of(case.a).copy(), bits_of(case.b).copy(), bits_of(case.c).copy()
    mt = case.meta.astype(np.uint8).copy()
    keep_rows = np.arange(64) != m
    ab[keep_rows] = 0
    mt[keep_rows] = NEUTRAL
    cols = np.arange(f.n) != n
    bb[:, cols] = 0
    cmask = np.ones_like(cb, bool)
    cmask[m, n] = False
    cb[cmask] = 0

    def make() -> SparseCase:
        return replace(case, a=from_bits(ab, f.dtype_a), meta=mt.copy(), b=from_bits(bb, f.dtype_b),
                       c=from_bits(cb, f.dtype_d))

    cur = make()
    if not still(cur):  # the mismatch needs other rows/columns: keep the full tile
        log("the mismatch does not survive isolating its row and column; kept the full tile")
        ab, bb, cb, mt = bits_of(case.a).copy(), bits_of(case.b).copy(), bits_of(case.c).copy(), case.meta.astype(np.uint8).copy()
        cur = make()
    if f.dtype_a != "tf32":
        for ch in range(mt.shape[1]):
            if mt[m, ch] == NEUTRAL:
                continue
            old = mt[m, ch]
            mt[m, ch] = NEUTRAL
            if not still(make()):
                mt[m, ch] = old
    for j in range(ab.shape[1]):
        if ab[m, j]:
            old = ab[m, j]
            ab[m, j] = 0
            if not still(make()):
                ab[m, j] = old
    for k in range(bb.shape[0]):
        if bb[k, n]:
            old = bb[k, n]
            bb[k, n] = 0
            if not still(make()):
                bb[k, n] = old
    if cb[m, n]:
        old = cb[m, n]
        cb[m, n] = 0
        if not still(make()):
            cb[m, n] = old
    cur = make()
    nibbles = {int(ch): f"0b{int(mt[m, ch]):04b}" for ch in range(mt.shape[1]) if mt[m, ch] != NEUTRAL}
    summary = {"output": [m, n], "nibbles": nibbles,
               "a_nonzero": [int(j) for j in np.flatnonzero(ab[m])],
               "b_nonzero": [int(k) for k in np.flatnonzero(bb[:, n])], "c_nonzero": bool(cb[m, n]),
               "hardware": f"0x{int(bits_of(hw(cur))[m, n]):x}", "refmodel": f"0x{int(bits_of(model(cur))[m, n]):x}"}
    log(f"shrunk: D[{m},{n}] needs nibbles {nibbles or 'none (all 0b0100)'}, A[{m}, {summary['a_nonzero']}], "
        f"B[{summary['b_nonzero']}, {n}]")
    return cur, summary


# a sparse replay file's configuration: the fields of every replay file, and its own
SPARSE_REPLAY: dict[str, Field] = {
    **REPLAY_COMMON,
    "sp_sel": Field("int", 0, 1, default=0),
    "sparse": Field("flag", required=True, rule=lambda v: None if v else "must be true in a sparse replay file"),
    "summary": Field("object", default={}),
}
SPARSE_ARRAYS = ("a", "meta", "b", "c", "hardware", "config")


def save_sparse_case(path: str | Path, case: SparseCase, *, hardware: Optional[np.ndarray] = None,
                     summary: Optional[dict] = None) -> Path:
    """Replay file: raw bits + JSON configuration (``wgref replay`` reads it)."""
    from ..fileio import save_npz

    cfg = {**case.config(), "sparse": True, "notes": case.notes, "summary": summary or {}}
    arrays = {"a": bits_of(case.a), "meta": case.meta.astype(np.uint8), "b": bits_of(case.b), "c": bits_of(case.c),
              "config": np.array(config_text(cfg, SPARSE_REPLAY))}
    if hardware is not None:
        arrays["hardware"] = bits_of(hardware)
    path = Path(path)
    save_npz(path, **arrays)
    return path


def load_sparse_case(path: str | Path) -> tuple[SparseCase, Optional[np.ndarray]]:
    """Read a sparse replay file: (case, hardware D or None).  The configuration is checked by
    :data:`SPARSE_REPLAY` (the dense loader's common fields and rules: ``"scale_d": "false"`` is
    refused, not read as true), the arrays by their form's shapes and types."""
    from ..fileio import load_npz

    z = load_npz(path)
    cfg = replay_config(path, z, SPARSE_REPLAY, SPARSE_ARRAYS)
    try:
        f = parse_wgmma_sp(cfg["instr"])
    except WgrefError as e:
        raise InputError(f"{path}: bad replay configuration: {e}") from None
    if cfg["sp_sel"] not in f.sp_sels:
        raise InputError(f"{path}: bad replay configuration: sp_sel must be {' or '.join(map(str, f.sp_sels))} "
                         f"for .{f.dtype_a} sparse wgmma, got {cfg['sp_sel']}")
    for k in ("imm_scale_a", "imm_scale_b"):
        if cfg[k] == -1 and not f.has_imm_scale:
            raise InputError(f"{path}: bad replay configuration: {k} must be 1 for .{f.dtype_a} wgmma "
                             "(no imm-scale operands), got -1")
    a = typed_array(path, z, "a", f.dtype_a, (M, f.k_compressed))
    b = typed_array(path, z, "b", f.dtype_b, (f.k, f.n))
    c = typed_array(path, z, "c", f.dtype_d, (M, f.n))
    hw = typed_array(path, z, "hardware", f.dtype_d, (M, f.n)) if "hardware" in z else None
    meta = z.get("meta")
    if meta is None:
        raise InputError(f"{path} is not a wgref sparse replay file: it has no array 'meta'")
    if meta.dtype != np.uint8 or meta.shape != (M, f.meta_cols):
        raise InputError(f"{path}: array 'meta' must be uint8 nibbles of shape ({M}, {f.meta_cols}) for "
                         f"{f.instr}, got {meta.dtype} {meta.shape}")
    if meta.size and int(meta.max()) > 15:
        raise InputError(f"{path}: array 'meta' must hold 4-bit nibbles (0..15), got {int(meta.max())}")
    return SparseCase(f.instr, a, meta, b, c, sp_sel=cfg["sp_sel"], scale_d=cfg["scale_d"],
                      imm_scale_a=cfg["imm_scale_a"], imm_scale_b=cfg["imm_scale_b"], rs=cfg["rs"],
                      notes=cfg["notes"]), hw


__all__ = ["SparseCase", "shrink_sparse", "save_sparse_case", "load_sparse_case"]
