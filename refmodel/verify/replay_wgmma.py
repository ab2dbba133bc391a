"""Replayer of the wgmma fixtures (kind ``wgmma``) recorded by gpu/record/wgmma.py.

Arrays: ``a`` (S, 64, K*chain), ``b`` (S, K*chain, N), ``c`` and ``d`` (S, 64, N), all
raw bits; ``d`` is the hardware's result.  Meta: instr, rs, scale_d, imm_scale_a,
imm_scale_b, chain.  Extra arrays (``family``, ``d_model``) are ignored.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .case import WgmmaCase
from ..dtypes import bits_of, element_dtype
from .replay import Result, _count, check_output_arrays, meta_error, replayer
from ..wgmma_forms import M, parse_wgmma


def check_wgmma_arrays(meta: dict[str, Any], arrays: dict[str, np.ndarray], prefix: str = "") -> None:
    """The arrays ``{prefix}a/b/c/d`` have the shapes meta's form, chain and tile count imply."""
    f = parse_wgmma(meta["instr"])
    chain = int(meta.get("chain", 1))
    for k in "abcd":
        if prefix + k not in arrays:
            raise meta_error(f"{meta['instr']}: array {prefix + k!r} is missing")
    s = arrays[prefix + "d"].shape[:-2]
    want = {"a": s + (M, f.k * chain), "b": s + (f.k * chain, f.n), "c": s + (M, f.n), "d": s + (M, f.n)}
    for k, shp in want.items():
        if arrays[prefix + k].shape != shp:
            raise meta_error(f"{meta['instr']} chain {chain}: array {prefix + k!r} has shape "
                             f"{arrays[prefix + k].shape}, meta implies {shp}")


def case_from_fixture(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> WgmmaCase:
    f = parse_wgmma(meta["instr"])
    return WgmmaCase(meta["instr"], arrays["a"].view(element_dtype(f.dtype_a)),
                     arrays["b"].view(element_dtype(f.dtype_b)),
                     arrays["c"].view(element_dtype(f.dtype_d)), rs=bool(meta.get("rs", False)),
                     scale_d=bool(meta.get("scale_d", True)), imm_scale_a=int(meta.get("imm_scale_a", 1)),
                     imm_scale_b=int(meta.get("imm_scale_b", 1)), chain=int(meta.get("chain", 1)))


@replayer("wgmma")
def replay_wgmma(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    if "instr" not in meta:
        raise meta_error("meta names no instruction")
    check_output_arrays(arrays, ["d"], pattern="d", allowed=("a", "b", "c", "family", "d_model"))
    check_wgmma_arrays(meta, arrays)
    case = case_from_fixture(meta, arrays)
    got_bits = bits_of(case.model())
    return _count(got_bits, arrays["d"], meta["instr"].split(".")[4] + " " + meta["instr"].split(".", 5)[-1],
                  {})
