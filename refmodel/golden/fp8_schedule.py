"""What an FP8 GEMM kernel does along K, in refmodel.numerics.gemm's terms: the wgmma instruction,
the promotion interval into the float32 accumulator, the promotion arithmetic, the scale block and
the output dtype.  A user's kernel claims one (``gpu.fuzz.userkernel``); :meth:`Schedule.expected`
is the bit-exact output it must produce."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import ml_dtypes
import numpy as np

from ..wgmma_forms import parse_wgmma

_FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
_OUT = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


@dataclass(frozen=True)
class Schedule:
    """What a kernel does along K, in refmodel.numerics.gemm's terms."""

    instr: str
    promote_every: Optional[int] = 4      # wgmma instructions per float32 promotion (None: never)
    promote_op: str = "fma"               # acc = fma(RN(sa*sb), partial, acc); or "mul_add", "fma_exact"
    out_dtype: str = "f32"                # f32, bf16 or f16
    scale_block: int = 128                # K (and N for B) extent of one scale

    def expected(self, a, b_nk, scale_a, scale_b) -> np.ndarray:
        from ..numerics.gemm import gemm

        f = parse_wgmma(self.instr)
        at = np.asarray(a, np.uint8).view(_FP8[f.dtype_a])
        bt = np.ascontiguousarray(np.asarray(b_nk, np.uint8).T).view(_FP8[f.dtype_b])
        kw = {}
        if self.promote_every is not None:
            kw = dict(scale_a=scale_a, scale_b=scale_b, promote_op=self.promote_op)
        return gemm(at, bt, instr=self.instr, promote_every=self.promote_every,
                    out_dtype=_OUT[self.out_dtype], **kw)
