"""Every valid sparse ``wgmma.mma_async.sp.sync.aligned`` form of sm_90a, as data.

A sparse form multiplies a structured-sparse A (64 x K, stored compressed as 64 x K/2)
by a dense B (K x N).  Each sparse form pairs with the dense form of half its K: same
types, accumulators and N set (PTX ISA "wgmma.mma_async.sp"):

======================  ===  ===========  ==============  ==========
A x B                   K    sparsity     D               sp-sel
======================  ===  ===========  ==============  ==========
tf32 x tf32             16   1:2 (pairs)  f32             0, 1
f16 x f16               32   2:4          f16 or f32      0, 1
bf16 x bf16             32   2:4          f32             0, 1
e4m3/e5m2 (4 mixes)     64   2:4          f16 or f32      0
s8/u8 (4 mixes)         64   2:4          s32 (.satfinite) 0
======================  ===  ===========  ==============  ==========
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import FormError
from .validate import opcode
from .wgmma_forms import M, WGMMA_FORMS, WgmmaForm, parse_wgmma


@dataclass(frozen=True)
class WgmmaSpForm:
    """One valid sparse wgmma form; ``dense`` is the dense form with K/2."""

    dense: WgmmaForm

    @property
    def k(self) -> int:
        return 2 * self.dense.k

    @property
    def n(self) -> int:
        return self.dense.n

    @property
    def m(self) -> int:
        return M

    dtype_a = property(lambda self: self.dense.dtype_a)
    dtype_b = property(lambda self: self.dense.dtype_b)
    dtype_d = property(lambda self: self.dense.dtype_d)
    satfinite = property(lambda self: self.dense.satfinite)
    family = property(lambda self: self.dense.family)
    has_imm_scale = property(lambda self: self.dense.has_imm_scale)
    has_transpose = property(lambda self: self.dense.has_transpose)
    d_regs = property(lambda self: self.dense.d_regs)

    @property
    def shape(self) -> str:
        return f"m{M}n{self.n}k{self.k}"

    @property
    def instr(self) -> str:
        sat = ".satfinite" if self.satfinite else ""
        return (f"wgmma.mma_async.sp.sync.aligned.{self.shape}{sat}."
                f"{self.dtype_d}.{self.dtype_a}.{self.dtype_b}")

    @property
    def k_compressed(self) -> int:
        """Columns of the compressed A (K/2)."""
        return self.dense.k

    @property
    def chunk(self) -> int:
        """Elements per metadata chunk: 4 (2:4), or 2 for tf32 (1:2)."""
        return 2 if self.dtype_a == "tf32" else 4

    @property
    def meta_cols(self) -> int:
        """Metadata nibbles per row: K/4 (2:4) or K/2 (tf32 pairs)."""
        return self.k // self.chunk

    @property
    def sp_sels(self) -> tuple[int, ...]:
        """Valid sparsity selectors: 0, 1 for 16-bit and tf32 inputs; 0 for 8-bit."""
        return (0,) if self.family in ("fp8", "int8") else (0, 1)


WGMMA_SP_FORMS: tuple[WgmmaSpForm, ...] = tuple(WgmmaSpForm(f) for f in WGMMA_FORMS)
_BY_INSTR = {f.instr: f for f in WGMMA_SP_FORMS}
_RE = re.compile(r"^wgmma\.mma_async\.sp\.sync\.aligned\.m(\d+)n(\d+)k(\d+)((?:\.\w+)*)$")


MAX_OPCODE = 120   # longer than any sm_90a wgmma opcode: refused before parsing (no huge echoes or ints)


def parse_wgmma_sp(instr: str) -> WgmmaSpForm:
    """Validate a sparse wgmma opcode; errors name the rule (via the dense table)."""
    op = opcode(instr, "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16", MAX_OPCODE)
    if op in _BY_INSTR:
        return _BY_INSTR[op]
    m = _RE.match(op)
    if not m:
        raise FormError(f"{op!r} is not of the form wgmma.mma_async.sp.sync.aligned.m64nNkK[.satfinite]"
                        f".dtype.atype.btype")
    k = int(m.group(3))
    if k % 2:
        raise FormError(f"{op!r}: a sparse K must be twice a dense K (16 tf32, 32 f16/bf16, 64 8-bit), got {k}")
    dense_op = f"wgmma.mma_async.sync.aligned.m{m.group(1)}n{m.group(2)}k{k // 2}{m.group(4)}"
    try:
        d = parse_wgmma(dense_op)
    except FormError as e:
        msg = str(e).replace(dense_op, op)
        for fk, sk in (("K must be 8", "K must be 16"), ("K must be 16", "K must be 32"),
                       ("K must be 32", "K must be 64")):
            if fk in msg:
                msg = msg.replace(fk, sk)
                break
        msg = re.sub(r"got (\d+)$", lambda g: f"got {2 * int(g.group(1))}", msg) if "K must be" in msg else msg
        raise FormError(msg) from None
    return _BY_INSTR[WgmmaSpForm(d).instr]


__all__ = ["WgmmaSpForm", "WGMMA_SP_FORMS", "parse_wgmma_sp"]
