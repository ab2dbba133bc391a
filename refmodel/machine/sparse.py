"""Sparse wgmma from what a kernel holds: the shared-memory image, descriptors, the per-thread
``sp-meta`` registers (and A registers for RS), accumulator registers in and out.

The compressed A (64 x K/2) sits in shared memory exactly like a dense operand of K/2
columns (same descriptor, same canonical layouts) or in registers in the dense A fragment
of K/2 columns; B is a dense K x N operand; the metadata nibbles come out of the sp-meta
registers by :func:`refmodel.layouts.sparse_meta.unpack_meta` (the threads ``sp_sel``
names); then :func:`refmodel.numerics.sparse.wgmma_sp`.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..layouts.descriptor import MatrixDescriptor
from ..layouts.fragment import pack_accumulator, unpack_a_fragment, unpack_accumulator
from ..layouts.sparse_meta import unpack_meta
from ..numerics.sparse import parse_wgmma_sp, wgmma_sp
from ..validate import as_array, check_registers
from .wgmma import _flag, read_operand


def wgmma_sp_registers(instr: str, smem, a, b_desc, meta_regs, c_regs=None, *, sp_sel: int = 0,
                       smem_base: int = 0, scale_d=True, imm_scale_a: int = 1, imm_scale_b: int = 1,
                       imm_trans_a: int = 0, imm_trans_b: int = 0) -> np.ndarray:
    """Accumulator registers (128, regs) after one sparse wgmma.

    ``a``: a descriptor of the compressed A (SS) or its registers, uint32 (128, 4) (RS);
    ``meta_regs``: (128,) uint32 sp-meta registers; ``c_regs`` None means zeros.
    """
    form = parse_wgmma_sp(instr)
    ta, tb = _flag("imm_trans_a", imm_trans_a), _flag("imm_trans_b", imm_trans_b)
    if (ta or tb) and not form.has_transpose:
        raise InputError(f"{form.instr}: imm-trans is only for f16/bf16; {form.dtype_a} operands must be K-major")
    regs_a = not isinstance(a, (int, np.integer, MatrixDescriptor))
    if regs_a:
        if ta:
            raise InputError("imm_trans_a applies only when A is in shared memory")
        ar = as_array("A registers", a)
        if ar.shape != (128, 4) or ar.dtype.kind not in "iu":
            raise InputError(f"A registers must be uint32 of shape (128, 4), got {ar.dtype} {ar.shape}")
        a_c = unpack_a_fragment(check_registers("A registers", ar), form.dtype_a)
    else:
        a_c = read_operand(smem, a, 64, form.k_compressed, form.dtype_a, major="MN" if ta else "K",
                           smem_base=smem_base, name="A")
    bt = read_operand(smem, b_desc, form.n, form.k, form.dtype_b, major="MN" if tb else "K",
                      smem_base=smem_base, name="B")
    meta = unpack_meta(meta_regs, form.dtype_a, sp_sel)
    c = None if c_regs is None else unpack_accumulator(as_array("c_regs", c_regs), form.n, form.dtype_d)
    d = wgmma_sp(form.instr, a_c, meta, np.ascontiguousarray(bt.T), c, sp_sel=sp_sel, scale_d=scale_d,
                 imm_scale_a=imm_scale_a, imm_scale_b=imm_scale_b)
    return pack_accumulator(d, form.dtype_d)


__all__ = ["wgmma_sp_registers"]
