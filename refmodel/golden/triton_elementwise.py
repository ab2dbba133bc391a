"""What Triton 3.6's compiler makes of float32 multiply-add expressions on sm_90, as recorded on the H200
(fixtures/triton/elementwise.npz, gpu.record.triton_fma): a product that feeds an add or a subtract is
contracted to one ``fma.rn.f32`` (LLVM's fp-contract), every other ``*``/``+`` is ``mul.f32``/``add.f32``;
a NaN result is 0x7FFFFFFF.  :data:`EXPRESSIONS` maps each recorded expression in ``x`` and ``y`` to its
model; ``wgref.triton``'s interpreter applies the same rule to any kernel.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..numerics.promotion import add_f32 as _add
from ..numerics.promotion import fma_f32_array
from ..numerics.promotion import mul_f32 as _mul


def _neg(x) -> np.ndarray:
    return np.negative(np.asarray(x, np.float32))      # neg.f32: the sign bit flipped, NaN payload kept


#: the recorded expressions and the instruction each becomes (PTX float opcodes recorded alongside)
EXPRESSIONS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "x * y": _mul,                                                  # mul.f32
    "x + y": _add,                                                  # add.f32
    "x * y + x": lambda x, y: fma_f32_array(x, y, x),               # fma.rn.f32
    "x * y - x": lambda x, y: fma_f32_array(x, y, _neg(x)),         # neg.f32; fma.rn.f32
    "x - x * y": lambda x, y: fma_f32_array(_neg(x), y, x),         # neg.f32; fma.rn.f32
    "x * y + y * x": lambda x, y: fma_f32_array(x, y, _mul(y, x)),  # mul.f32; fma.rn.f32
    "(x * y) * x + y": lambda x, y: fma_f32_array(_mul(x, y), x, y),  # mul.f32; fma.rn.f32
}


def elementwise(expr: str, x, y) -> np.ndarray:
    """The float32 result of a recorded Triton expression (:data:`EXPRESSIONS`) on ``x`` and ``y``."""
    from ..errors import InputError

    if expr not in EXPRESSIONS:
        raise InputError(f"expression {expr!r} was not recorded (recorded: {', '.join(EXPRESSIONS)})")
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    return np.asarray(EXPRESSIONS[expr](x, y), np.float32)
