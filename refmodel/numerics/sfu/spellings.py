"""What people write, as data: the CUDA C++ and Triton spellings that reach the special-function unit.

Each :class:`Spelling` names a source expression in ``x`` (and ``y`` for binary ones) on float32,
the compiler setting it is built with, and (once established from the PTX and SASS recorded on the
H200, ``fixtures/sfu/spellings.json``) the instruction sequence it becomes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Spelling:
    """``compiler``: 'cuda' (nvcc/NVRTC defaults: IEEE division and square root, subnormals kept),
    'cuda-fast' (``--use_fast_math``) or 'triton'; ``expr``: the source expression."""

    compiler: str
    expr: str

    @property
    def name(self) -> str:
        return f"{self.compiler}:{self.expr}"

    @property
    def arity(self) -> int:
        return 2 if re.search(r"\by\b", self.expr) else 1


CUDA_EXPRS = (
    "__expf(x)", "expf(x)", "exp2f(x)", "__exp10f(x)", "__logf(x)", "logf(x)", "log2f(x)",
    "__log2f(x)", "rsqrtf(x)", "sqrtf(x)", "__fsqrt_rn(x)", "1.0f / x", "__frcp_rn(x)", "tanhf(x)",
    "sinf(x)", "__sinf(x)", "cosf(x)", "__cosf(x)", "1.0f / (1.0f + __expf(-x))",
    "x / y", "__fdividef(x, y)", "__fdiv_rn(x, y)",
)

TRITON_EXPRS = (
    "tl.exp(x)", "tl.exp2(x)", "tl.log(x)", "tl.log2(x)", "tl.math.rsqrt(x)", "tl.sqrt(x)",
    "tl.sqrt_rn(x)", "tl.sigmoid(x)", "tl.sin(x)", "tl.cos(x)", "1.0 / x",
    "x / y", "tl.math.div_rn(x, y)", "tl.fdiv(x, y)",
)

SPELLINGS: tuple[Spelling, ...] = (
    tuple(Spelling("cuda", e) for e in CUDA_EXPRS)
    + tuple(Spelling("cuda-fast", e) for e in CUDA_EXPRS)
    + tuple(Spelling("triton", e) for e in TRITON_EXPRS)
)
