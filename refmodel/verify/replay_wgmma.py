"""Replayer of the wgmma fixtures (kind ``wgmma``) recorded by gpu/record_wgmma.py.

Arrays: ``a`` (S, 64, K*chain), ``b`` (S, K*chain, N), ``c`` and ``d`` (S, 64, N), all
raw bits; ``d`` is the hardware's result.  Meta: instr, rs, scale_d, imm_scale_a,
imm_scale_b, chain.  Extra arrays (``family``, ``d_model``) are ignored.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .case import WgmmaCase
from ..dtypes import bits_of, element_dtype
from .replay import Result, _count, replayer
from ..wgmma_forms import parse_wgmma


def case_from_fixture(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> WgmmaCase:
    f = parse_wgmma(meta["instr"])
    return WgmmaCase(meta["instr"], arrays["a"].view(element_dtype(f.dtype_a)),
                     arrays["b"].view(element_dtype(f.dtype_b)),
                     arrays["c"].view(element_dtype(f.dtype_d)), rs=bool(meta.get("rs", False)),
                     scale_d=bool(meta.get("scale_d", True)), imm_scale_a=int(meta.get("imm_scale_a", 1)),
                     imm_scale_b=int(meta.get("imm_scale_b", 1)), chain=int(meta.get("chain", 1)))


@replayer("wgmma")
def replay_wgmma(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    case = case_from_fixture(meta, arrays)
    got_bits = bits_of(case.model())
    return _count(got_bits, arrays["d"], meta["instr"].split(".")[4] + " " + meta["instr"].split(".", 5)[-1],
                  {})
