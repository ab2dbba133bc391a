"""Hardware side of the warp-level ``mma.sync`` forms: one inline-PTX kernel per form of
:data:`refmodel.mma_sync_forms.MMA_SYNC_FORMS`.

Each warp runs one instruction: it loads its A, B and C registers (packed on the host by
:mod:`refmodel.layouts.mma_fragment`), runs the ``mma.sync`` and stores D's registers; nothing else
touches the values.  ``run_mma_sync(instr, a, b, c)`` takes typed matrices of refmodel's shapes
(leading batch axis; quad-pair forms (..., 4, 8, 4) and so on) and returns D in the same shape.
"""

from __future__ import annotations

import functools

import numpy as np

from refmodel.layouts.mma_fragment import matrix_shape, pack, unpack
from refmodel.mma_sync_forms import TYPE_BITS, MmaSyncForm, parse_mma_sync

from gpu.kernels.runtime import compile_module, require_device

WARPS_PER_BLOCK = 4


def _kind(t: str) -> tuple[str, str, str, str]:
    """(word C type, asm constraint, word -> register, register -> word) of a register of type ``t``."""
    if t == "f64":
        return "u64", "d", "__longlong_as_double((long long)({}))", "(u64)__double_as_longlong({})"
    if t == "f32":
        return "u32", "f", "__uint_as_float({})", "__float_as_uint({})"
    return "u32", "r", "({})", "({})"


def kernel_source(form: MmaSyncForm, kname: str = "mma_sync_kernel") -> str:
    """CUDA C++ of the kernel running ``form`` once per warp on tiles 0 .. T-1."""
    counts = {"a": form.a_regs, "b": form.b_regs, "c": form.c_regs, "d": form.d_regs}
    types = {"a": form.dtype_a, "b": form.dtype_b, "c": form.dtype_c, "d": form.dtype_d}
    words = {o: _kind(types[o])[0] for o in "abcd"}
    loads, ins, outs, stores = [], [], [], []
    idx = 0
    for o in "d":
        word, con, to_reg, to_word = _kind(types[o])
        reg_t = {"d": "double", "f": "float", "r": "u32"}[con]
        for j in range(counts[o]):
            loads.append(f"{reg_t} d{j};")
            outs.append(f'"={con}"(d{j})')
            stores.append(f"D[(w * 32 + lane) * {counts[o]} + {j}] = {to_word.format(f'd{j}')};")
        idx += counts[o]
    groups = []
    for o in "abc":
        word, con, to_reg, _ = _kind(types[o])
        names = []
        for j in range(counts[o]):
            src = f"{o.upper()}[(w * 32 + lane) * {counts[o]} + {j}]"
            ins.append(f'"{con}"({to_reg.format(src)})')
            names.append(f"%{idx}")
            idx += 1
        groups.append("{" + ", ".join(names) + "}")
    dnames = "{" + ", ".join(f"%{j}" for j in range(counts["d"])) + "}"
    asm = f'"{form.instr} {dnames}, {groups[0]}, {groups[1]}, {groups[2]};"'
    return f"""
extern "C" __global__ void {kname}(const {words['a']}* __restrict__ A, const {words['b']}* __restrict__ B,
                                   const {words['c']}* __restrict__ C, {words['d']}* __restrict__ D, int T) {{
    int w = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    int lane = threadIdx.x & 31;
    if (w >= T) return;          // a whole warp leaves together: mma.sync needs all 32 lanes
    {' '.join(loads)}
    asm volatile({asm}
                 : {', '.join(outs)}
                 : {', '.join(ins)});
    {' '.join(stores)}
}}"""


@functools.lru_cache(maxsize=None)
def _module(instr: str):
    return compile_module(kernel_source(parse_mma_sync(instr)))


def run_registers(instr: str, a_regs: np.ndarray, b_regs: np.ndarray, c_regs: np.ndarray) -> np.ndarray:
    """D register words (T, 32, d_regs) of T warps' instructions from their A, B, C register words."""
    cp = require_device()
    f = parse_mma_sync(instr)
    T = a_regs.shape[0]
    fn = _module(f.instr).get_function("mma_sync_kernel")
    dword = np.uint64 if f.dtype_d == "f64" else np.uint32
    word = lambda t: np.uint64 if t == "f64" else np.uint32  # noqa: E731
    A = cp.asarray(np.ascontiguousarray(a_regs, dtype=word(f.dtype_a)))
    B = cp.asarray(np.ascontiguousarray(b_regs, dtype=word(f.dtype_b)))
    C = cp.asarray(np.ascontiguousarray(c_regs, dtype=word(f.dtype_c)))
    D = cp.zeros((T, 32, f.d_regs), dtype=dword)
    threads = 32 * WARPS_PER_BLOCK
    fn(((T + WARPS_PER_BLOCK - 1) // WARPS_PER_BLOCK,), (threads,), (A, B, C, D, np.int32(T)))
    return cp.asnumpy(D)


def run_mma_sync(instr: str, a, b, c) -> np.ndarray:
    """D of ``instr`` on the H200 for typed matrices of :func:`refmodel.layouts.mma_fragment.matrix_shape`
    with one leading tile axis: a (T, M, K), b (T, K, 8), c (T, M, 8) (quad-pair forms (T, 4, ...))."""
    f = parse_mma_sync(instr)
    regs = [pack(f, o, x) for o, x in zip("abc", (a, b, c))]
    return unpack(f, "d", run_registers(f.instr, *regs))


def tile_shape(instr: str, operand: str) -> tuple[int, ...]:
    """Shape of one warp's ``operand``."""
    return matrix_shape(parse_mma_sync(instr), operand)


__all__ = ["kernel_source", "run_mma_sync", "run_registers", "tile_shape", "TYPE_BITS"]
