"""Replayer of the golden-model fixtures of library kernels (fixtures/triton, kind
``triton_matmul``): recorded on the H200 from the library itself (``python -m gpu.record_triton``)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ..dtypes import bits_of
from .replay import Result, _count, replayer

_FP = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "f16": np.float16,
       "bf16": ml_dtypes.bfloat16, "f32": np.float32}
_OUT = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


@replayer("triton_matmul")
def replay_triton(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """D[rows, cols] of the recorded Triton matmul against refmodel.golden.triton_matmul on the kept
    A rows and B columns (rows and columns of a matmul are independent)."""
    from ..golden import triton_matmul

    a = arrays["a"].view(_FP[meta["dtype"]])
    b = arrays["b"].view(_FP[meta["dtype"]])
    if a.shape[1] != b.shape[0] or arrays["d"].shape != (a.shape[0], b.shape[1]):
        raise ValueError(f"triton fixture: a {a.shape}, b {b.shape} and d {arrays['d'].shape} do not match")
    d = triton_matmul(a, b, block_k=meta["BK"], input_precision=meta["input_precision"] or "tf32",
                      max_num_imprecise_acc=meta["imp"] if meta["dtype"] in ("e4m3", "e5m2") else 0, out_dtype=_OUT[meta["out"]])
    return _count(bits_of(d), arrays["d"], f"triton {meta['dtype']} BK={meta['BK']}", {})
