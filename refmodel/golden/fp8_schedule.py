"""The schedule a user's FP8 GEMM kernel claims (``gpu.fuzz.userkernel``), as a
:class:`refmodel.golden.Schedule`: the wgmma instruction, the promotion interval into the float32
accumulator with 1 x ``scale_block`` (A) and ``scale_block`` x ``scale_block`` (B) block scales, the
promotion arithmetic and the output dtype.  :meth:`Schedule.expected` is the bit-exact output the
kernel must produce for its operands as it stores them (A (M, K), B (N, K), FP8 codes)."""

from __future__ import annotations

from typing import Optional

from ..errors import InputError
from ..validate import _describe
from .schedule import Schedule


def fp8_kernel_schedule(instr: str, *, promote_every: Optional[int] = 4, promote_op: str = "fma",
                        out_dtype: str = "f32", scale_block: int = 128) -> Schedule:
    """The :class:`Schedule` of a DeepGEMM-style FP8 GEMM: ``promote_every`` wgmma instructions per float32
    promotion (None: one chain over K, no scales), ``acc = fma(RN(sa*sb), partial, acc)`` (``promote_op``),
    then ``out_dtype`` (f32, bf16 or f16)."""
    if not isinstance(out_dtype, str) or out_dtype not in ("f32", "bf16", "f16"):
        raise InputError(f"out_dtype must be 'f32', 'bf16' or 'f16', got {_describe(out_dtype)}")
    return Schedule(instr, promote_every=promote_every, promote_op=promote_op, block_scales=promote_every is not None,
                    scale_block=scale_block, out_dtype=out_dtype,
                    source={"evidence": "claimed by the kernel's author (checked by gpu.fuzz.userkernel)"})


__all__ = ["fp8_kernel_schedule"]
