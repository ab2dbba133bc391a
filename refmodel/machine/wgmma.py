"""wgmma from what a kernel really has: a shared-memory image, descriptors, registers.

:func:`wgmma_smem` reads A and B through their 64-bit descriptors exactly as the
hardware reads them (canonical layout, LBO/SBO, swizzle on the absolute shared address,
base offset: :func:`refmodel.layouts.descriptor.operand_addresses`), so a wrong field
gives the same wrong answer as the GPU; then the accumulator is the numerics layer's
:func:`refmodel.numerics.wgmma.wgmma`.  :func:`wgmma_registers` is the per-thread view:
accumulator registers (128, regs) in and out, A from a descriptor or from registers (RS).

Worked example: f16 m64n8k16, A K-major with no swizzle at shared address 0x400 (LBO 128,
SBO 256): A[9, 3] is byte pair ``0x400 + 1*256 + 1*16 + 6`` = 0x516..0x517.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import element_dtype
from ..limits import SMEM_ADDRESS
from ..validate import _describe, as_array, check_flag, check_instr, check_int, check_registers
from ..errors import DTypeError, InputError
from ..layouts.descriptor import MatrixDescriptor, operand_addresses
from ..layouts.fragment import (accumulator_layout, pack_accumulator, unpack_a_fragment,
                                unpack_accumulator)
from ..numerics.wgmma import wgmma as _wgmma_math
from ..wgmma_forms import M, WgmmaForm, parse_wgmma

EXAMPLE_INSTR = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"


def _image(smem) -> np.ndarray:
    s = as_array("the shared-memory image", smem)
    if s.dtype != np.uint8 or s.ndim != 1:
        raise DTypeError(f"the shared-memory image must be a 1-D uint8 array, got {s.dtype.name} "
                         f"with shape {s.shape}")
    return s


def _flag(name: str, v) -> int:
    """An imm-trans immediate: 0 or 1 (True/False), through the one boolean checker."""
    try:
        return int(check_flag(name, v))
    except InputError:
        raise InputError(f"{name} must be 0 or 1 (or True/False), got {_describe(v)}") from None


def _desc(name: str, d) -> MatrixDescriptor:
    if isinstance(d, MatrixDescriptor):
        return d
    if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
        raise InputError(f"{name} must be a 64-bit descriptor (int), got {_describe(d)}")
    return MatrixDescriptor.decode(int(d))


def read_operand(smem, desc, rows: int, k: int, dtype_name: str, *, major: str = "K",
                 smem_base: int = 0, name: str = "operand") -> np.ndarray:
    """The (rows, k) typed operand the hardware reads through ``desc`` from ``smem``
    (whose first byte is at shared address ``smem_base``)."""
    img = _image(smem)
    d = _desc(f"{name} descriptor", desc)
    dt = element_dtype(dtype_name)
    smem_base = check_int("smem_base", smem_base, 0, SMEM_ADDRESS, multiple=16,
                          rule="the shared address of the image's first byte, 16-byte aligned")
    addr = operand_addresses(d, rows, k, dt.itemsize, major=major)
    rel = addr - smem_base
    lo, hi = int(rel.min()), int(rel.max())
    if lo < 0 or hi >= img.size:
        field = "start address" if lo < 0 or d.sbo == 0 else "start address / SBO / LBO"
        raise InputError(f"the {name} descriptor ({field}: start {d.start_address:#x}, LBO {d.lbo}, "
                         f"SBO {d.sbo}) reads shared addresses {int(addr.min()):#x}..{int(addr.max()):#x}, "
                         f"outside the image {smem_base:#x}..{smem_base + img.size - 1:#x}")
    return np.ascontiguousarray(img[rel]).view(dt).reshape(rows, k)


def _operands(form: WgmmaForm, smem, a_desc, b_desc, smem_base, trans_a, trans_b):
    if (trans_a or trans_b) and not form.has_transpose:
        raise InputError(f"{form.instr}: imm-trans is only for f16/bf16; {form.dtype_a} operands "
                         f"must be K-major (imm-trans 0)")
    a = None
    if a_desc is not None:
        a = read_operand(smem, a_desc, M, form.k, form.dtype_a, major="MN" if trans_a else "K",
                         smem_base=smem_base, name="A")
    bt = read_operand(smem, b_desc, form.n, form.k, form.dtype_b, major="MN" if trans_b else "K",
                      smem_base=smem_base, name="B")
    return a, np.ascontiguousarray(bt.T)


def wgmma_smem(instr: str, smem, a_desc, b_desc, c=None, *, smem_base: int = 0, scale_d=True,
               imm_scale_a: int = 1, imm_scale_b: int = 1, imm_trans_a: int = 0,
               imm_trans_b: int = 0) -> np.ndarray:
    """D (64, N) of one SS wgmma whose operands are read from ``smem`` through the descriptors.

    ``smem`` is a uint8 image whose first byte sits at shared address ``smem_base``;
    ``a_desc``/``b_desc`` 64-bit descriptors (ints or :class:`MatrixDescriptor`);
    ``c`` (64, N) in the accumulator's dtype (None: zeros).
    """
    form = parse_wgmma(check_instr("instr", instr, EXAMPLE_INSTR))
    ta, tb = _flag("imm_trans_a", imm_trans_a), _flag("imm_trans_b", imm_trans_b)
    a, b = _operands(form, smem, a_desc, b_desc, smem_base, ta, tb)
    return _wgmma_math(form.instr, a, b, c, scale_d=scale_d, imm_scale_a=imm_scale_a,
                       imm_scale_b=imm_scale_b)


def wgmma_registers(instr: str, smem, a, b_desc, c_regs=None, *, smem_base: int = 0, scale_d=True,
                    imm_scale_a: int = 1, imm_scale_b: int = 1, imm_trans_a: int = 0,
                    imm_trans_b: int = 0) -> np.ndarray:
    """Per-thread wgmma: accumulator registers (128, regs) uint32 in and out.

    ``a`` is a descriptor (SS form) or the A registers, uint32 (128, 4) (RS form: the
    register fragment of :mod:`refmodel.layouts.fragment`).  ``c_regs`` None means zeros.
    """
    form = parse_wgmma(check_instr("instr", instr, EXAMPLE_INSTR))
    ta, tb = _flag("imm_trans_a", imm_trans_a), _flag("imm_trans_b", imm_trans_b)
    regs_a = not isinstance(a, (int, np.integer, MatrixDescriptor))
    if regs_a and ta:
        raise InputError("imm_trans_a applies only when A is in shared memory; A from registers has no transpose")
    a_mat, b = _operands(form, smem, None if regs_a else a, b_desc, smem_base, ta, tb)
    if regs_a:
        ar = as_array("A registers", a)
        if ar.shape != (128, 4) or ar.dtype.kind not in "iu":
            raise InputError(f"A registers must be uint32 of shape (128, 4), got {ar.dtype.name} {ar.shape}")
        a_mat = unpack_a_fragment(check_registers("A registers", ar), form.dtype_a)
    c = None if c_regs is None else unpack_accumulator(as_array("c_regs", c_regs), form.n, form.dtype_d)
    d = _wgmma_math(form.instr, a_mat, b, c, scale_d=scale_d, imm_scale_a=imm_scale_a,
                    imm_scale_b=imm_scale_b)
    return pack_accumulator(d, form.dtype_d)


def wgmma_registers_batch(instr: str, images, a, b_descs, c_regs=None, *, smem_bases, scale_d=True,
                          imm_scale_a: int = 1, imm_scale_b: int = 1, imm_trans_a: int = 0,
                          imm_trans_b: int = 0) -> tuple[np.ndarray, dict[int, InputError]]:
    """:func:`wgmma_registers` for C cases of one form at once (one numerics call for all of them).

    ``images`` (C, S) uint8 shared-memory images, ``smem_bases`` (C,) their shared addresses; ``a``
    (C,) descriptors (SS) or (C, 128, 4) A registers (RS); ``b_descs`` (C,); ``c_regs`` (C, 128, regs)
    or None (zeros); ``scale_d`` one flag or (C,) flags.  Returns (D registers (C, 128, regs),
    refused): a case that :func:`wgmma_registers` refuses (a descriptor reading outside its image, a
    misaligned base) is refused alone, its error under its index in ``refused`` and its rows zero;
    every other case's registers are :func:`wgmma_registers`'s (tests hold the two equal)."""
    form = parse_wgmma(check_instr("instr", instr, EXAMPLE_INSTR))
    ta, tb = _flag("imm_trans_a", imm_trans_a), _flag("imm_trans_b", imm_trans_b)
    imgs = as_array("images", images)
    bd = list(b_descs)                       # 64-bit descriptors: Python ints (or MatrixDescriptor)
    C = len(bd)
    if imgs.ndim != 2 or imgs.dtype != np.uint8 or imgs.shape[0] != C:
        raise DTypeError(f"images must be a uint8 array of shape (C, bytes) with C = {C} cases, got "
                         f"{imgs.dtype.name} {imgs.shape}")
    regs_a = isinstance(a, np.ndarray) and a.ndim == 3
    if regs_a and ta:
        raise InputError("imm_trans_a applies only when A is in shared memory; A from registers has no transpose")
    descs_a = None if regs_a else list(a)
    if (regs_a and a.shape != (C, 128, 4)) or (not regs_a and len(descs_a) != C):
        raise InputError(f"a must be {C} descriptors or A registers of shape ({C}, 128, 4)")
    bases = np.asarray(smem_bases).reshape(-1)
    if bases.size != C:
        raise InputError(f"smem_bases must hold one shared address a case ({C}), got {bases.size}")
    sd = np.broadcast_to(np.asarray(scale_d, dtype=bool), (C,))
    keep, mats_a, mats_b, refused = [], [], [], {}
    for i in range(C):
        try:
            am, bm = _operands(form, imgs[i], None if regs_a else _desc("A descriptor", descs_a[i]),
                               _desc("B descriptor", bd[i]), int(bases[i]), ta, tb)
        except InputError as e:
            refused[i] = e
            continue
        keep.append(i)
        mats_a.append(am)
        mats_b.append(bm)
    d_regs = np.zeros((C,) + accumulator_layout(form.n, form.dtype_d)[0].shape[:2], np.uint32)
    if not keep:
        return d_regs, refused
    idx = np.array(keep)
    if regs_a:
        a_all = unpack_a_fragment(check_registers("A registers", a[idx]), form.dtype_a)
    else:
        a_all = np.stack(mats_a)
    if c_regs is None:
        c = np.zeros((idx.size, M, form.n), element_dtype(form.dtype_d))
    else:
        c = np.array(unpack_accumulator(as_array("c_regs", c_regs)[idx], form.n, form.dtype_d))
    c[~sd[idx]] = 0                          # scale-d = 0: C is +0
    d = _wgmma_math(form.instr, a_all, np.stack(mats_b), c, imm_scale_a=imm_scale_a, imm_scale_b=imm_scale_b)
    d_regs[idx] = pack_accumulator(d, form.dtype_d)
    return d_regs, refused


__all__ = ["wgmma_smem", "wgmma_registers", "wgmma_registers_batch", "read_operand"]
