"""Replayers of the sparse wgmma fixtures (fixtures/sparse), recorded by ``python -m
gpu.record.sparse``: compact samples of every sparse form (kind ``sparse_forms``) and the
machine-level probes of the sp-meta layout and of illegal metadata (kind ``sparse_probe``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import element_dtype, from_bits
from ..wgmma_sp_forms import parse_wgmma_sp
from .replay import Result, _count, replayer


def probe_model(cfg: dict[str, Any], arr: dict[str, np.ndarray], bases: np.ndarray) -> np.ndarray:
    """D registers refmodel gives for probe cases (machine level: image, descriptors, sp-meta)."""
    from ..machine.sparse import wgmma_sp_registers

    out = []
    for i in range(arr["meta"].shape[0]):
        base = int(bases[i])
        a = arr["a_regs"][i] if cfg["rs"] else int(arr["desc_a"][i]) + (base >> 4)
        out.append(wgmma_sp_registers(cfg["instr"], arr["images"][i], a, int(arr["desc_b"][i]) + (base >> 4),
                                      arr["meta"][i], arr["c_regs"][i], sp_sel=cfg["sp_sel"], smem_base=base,
                                      scale_d=bool(arr["scale_d"][i])))
    return np.stack(out)


def _tf32_unmodelled(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> bool:
    """True for tf32 probes whose metadata registers hold nibbles other than 0b0100/0b1110
    where the hardware reads them (recorded on the H200, refused by refmodel)."""
    from ..layouts.sparse_meta import unpack_meta

    if "tf32" not in meta["instr"]:
        return False
    nib = np.stack([unpack_meta(r, "tf32", meta["sp_sel"]) for r in arrays["meta"]])
    return bool((~np.isin(nib, (0b0100, 0b1110))).any())


@replayer("sparse_probe")
def replay_sparse_probe(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """Probes compared register for register; tf32 probes with other nibbles must be refused
    by refmodel (one case each: the refusal is what is checked, the outputs are evidence for docs)."""
    from ..errors import InputError

    if arrays["hw"].shape[0] != arrays["meta"].shape[0]:
        raise ValueError(f"sparse probe: {arrays['hw'].shape[0]} outputs for {arrays['meta'].shape[0]} cases")
    if _tf32_unmodelled(meta, arrays):
        refused = 0
        for i in range(arrays["meta"].shape[0]):
            one = {k: v[i:i + 1] for k, v in arrays.items()}
            try:
                probe_model(meta, one, arrays["bases"][i:i + 1])
            except InputError:
                refused += 1
        n = arrays["meta"].shape[0]
        return Result(n, n - refused, [] if refused == n else [f"{n - refused} unmodelled tf32 probes not refused"])
    return _count(probe_model(meta, arrays, arrays["bases"]), arrays["hw"], meta["instr"], {})


@replayer("sparse_forms")
def replay_sparse_forms(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """Each stored tile: the kept rows/columns placed back into a full tile, refmodel.wgmma_sp, compare."""
    from ..numerics.sparse import wgmma_sp

    R, C, T = meta["rows"], meta["cols"], meta["tiles_per_job"]
    off = {k: 0 for k in ("a", "meta", "b", "c", "d")}
    tile = 0
    col_off = 0
    total = Result(0, 0)
    for job in meta["jobs"]:
        f = parse_wgmma_sp(job["instr"])
        ncol = min(f.n, C)
        sizes = {"a": R * f.k_compressed, "meta": R * f.meta_cols, "b": f.k * ncol, "c": R * ncol, "d": R * ncol}
        for _ in range(T):
            part = {}
            for k, n in sizes.items():
                part[k] = arrays[k][off[k]:off[k] + n]
                if part[k].size != n:
                    raise ValueError(f"{job['instr']}: the arrays end before the jobs listed in meta")
                off[k] += n
            rows = arrays["rows"][tile * R:(tile + 1) * R].astype(np.int64)
            cols = arrays["cols"][col_off:col_off + ncol].astype(np.int64)
            col_off += ncol
            tile += 1
            ab, bb, cb = part["a"], part["b"], part["c"]
            a = np.zeros((64, f.k_compressed), ab.dtype)
            a[rows] = ab.reshape(R, f.k_compressed)
            mt = np.zeros((64, f.meta_cols), np.uint8)
            mt[rows] = part["meta"].reshape(R, f.meta_cols)
            mt[np.setdiff1d(np.arange(64), rows)] = 0b0100
            b = np.zeros((f.k, f.n), bb.dtype)
            b[:, cols] = bb.reshape(f.k, ncol)
            c = np.zeros((64, f.n), cb.dtype)
            c[np.ix_(rows, cols)] = cb.reshape(R, ncol)
            d = wgmma_sp(job["instr"], from_bits(a, f.dtype_a), mt, from_bits(b, f.dtype_b), from_bits(c, f.dtype_d),
                         sp_sel=job["sp_sel"], scale_d=bool(job["scale_d"]), imm_scale_a=job["imm_scale_a"],
                         imm_scale_b=job["imm_scale_b"])
            got = np.ascontiguousarray(d)[np.ix_(rows, cols)]
            want = part["d"].reshape(R, ncol)
            r = _count(got.view(want.dtype), want, job["instr"], {})
            total = Result(total.cases + r.cases, total.mismatches + r.mismatches, total.details + r.details)
    for k in off:
        if off[k] != arrays[k].size:
            raise ValueError(f"sparse forms: {arrays[k].size - off[k]} stored {k} values belong to no job in meta")
    if tile * R != arrays["rows"].size or col_off != arrays["cols"].size:
        raise ValueError("sparse forms: row/column samples do not match the jobs in meta")
    return total


__all__ = ["probe_model"]


@replayer("sparse_chain")
def replay_sparse_chain(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """Chains of sparse wgmmas along K (one commit group on the H200) against gemm_sp."""
    from ..numerics.sparse import gemm_sp

    f = parse_wgmma_sp(meta["instr"])
    n, chain = arrays["d"].shape[0], meta["chain"]
    if arrays["a"].shape != (n, 64, chain * f.k_compressed) or arrays["b"].shape != (n, chain * f.k, f.n):
        raise ValueError(f"sparse chain: arrays do not match {chain} x {f.shape}")
    a = from_bits(arrays["a"], f.dtype_a)
    b = from_bits(arrays["b"], f.dtype_b)
    c = from_bits(arrays["c"], f.dtype_d)
    d = np.stack([gemm_sp(meta["instr"], a[i], arrays["meta"][i], b[i], c[i], sp_sel=meta["sp_sel"]) for i in range(n)])
    from ..dtypes import bits_of

    return _count(bits_of(d.astype(element_dtype(f.dtype_d))), arrays["d"], f"chain {chain} x {meta['instr']}", {})
