"""The inline PTX of one wgmma (dense or sparse) and its accumulator registers, shared by the
kernel generators of gpu.kernels.wgmma, gpu.kernels.layouts and gpu.kernels.sparse."""

from __future__ import annotations

from typing import Optional


def accumulator_io(dtype_d: str, cvar: str) -> tuple[str, str, str, str]:
    """(C++ register type, its read-write asm constraint, load of ``d[i]`` from ``cin[cvar + i]``,
    value stored to ``dout``)."""
    if dtype_d == "f32":
        return "float", "+f", f"__uint_as_float(cin[{cvar} + i])", "__float_as_uint(d[i])"
    return "u32", "+r", f"cin[{cvar} + i]", "d[i]"


def imm_tail(form, rs: bool, imm_scale_a: int, imm_scale_b: int, trans_a: int = 0, trans_b: int = 0) -> str:
    """The trailing immediates: imm-scale-a/b where the form has them, then imm-trans (RS f16/bf16
    has only imm-trans-b)."""
    tail = ""
    if form.has_imm_scale:
        tail += f", {imm_scale_a}, {imm_scale_b}"
    if form.has_transpose:
        tail += f", {trans_b}" if rs else f", {trans_a}, {trans_b}"
    return tail


def wgmma_asm(instr: str, nregs: int, dtype_d: str, *, rs: bool, tail: str, sp_sel: Optional[int] = None) -> str:
    """``asm volatile`` of one wgmma on ``d[0..nregs)``: A from descriptor ``da`` (SS) or registers
    ``a0..a3`` (RS), B from ``db``, sparse metadata ``mt`` with ``sp_sel`` when given, scale-d from
    ``sd``."""
    con = accumulator_io(dtype_d, "")[1]
    dlist = ", ".join(f"%{i}" for i in range(nregs))
    outs = ", ".join(f'"{con}"(d[{i}])' for i in range(nregs))
    ins = ['"r"(a0)', '"r"(a1)', '"r"(a2)', '"r"(a3)'] if rs else ['"l"(da)']
    a_op = "{" + ", ".join(f"%{nregs + j}" for j in range(4)) + "}" if rs else f"%{nregs}"
    nxt = nregs + len(ins)
    ops = [a_op, f"%{nxt}"]  # A, B
    ins.append('"l"(db)')
    if sp_sel is not None:
        ops += [f"%{nxt + 1}", str(sp_sel)]
        ins.append('"r"(mt)')
    p_op = f"%{nregs + len(ins)}"
    ins.append('"r"(sd)')
    return (f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, {p_op}, 0;\\n'
            f'{instr} {{{dlist}}}, {", ".join(ops)}, p{tail};\\n}}\\n"\n'
            f'      : {outs}\n      : {", ".join(ins)});')
