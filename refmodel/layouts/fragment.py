"""Register fragments of sm_90a wgmma: which thread/register holds which matrix element.

A warpgroup is 128 threads.  Notation: thread ``t`` in 0..127, warp ``w = t // 32``,
lane ``l = t % 32``, group ``g = l // 4``, quad lane ``q = l % 4``.

Accumulator (C/D, 64 x N), element ``i`` (0 .. N/2-1) of thread ``t``::

    row = 16*w + g + 8*((i >> 1) & 1)
    col = 2*q + (i & 1) + 8*(i >> 2)

f32/s32 accumulators keep one element per 32-bit register (register ``i``); f16
accumulators pack two: register ``j`` holds element ``2j`` in bits 15:0 and
``2j+1`` in bits 31:16.

A from registers (the RS form, 64 x K, always 4 registers per thread):

* 16-bit (f16/bf16, K=16): the accumulator map with N = 16, two elements a register.
* tf32 (K=8): element ``i`` (register ``i``): ``row = 16w + g + 8*(i & 1)``,
  ``col = q + 4*(i >> 1)``.
* 8-bit (e4m3/e5m2/s8/u8, K=32): element ``i`` is byte ``i & 3`` of register ``i >> 2``:
  ``row = 16w + g + 8*((i >> 2) & 1)``, ``col = 4q + (i & 3) + 16*(i >> 3)``.

These agree with CUTLASS's ``CLayout_64xN``, ``ALayout_64x8`` (32-bit),
``ALayout_64x16`` (16-bit) and ``ALayout_64x32`` (8-bit) thread-value layouts in
``cute/atom/mma_traits_sm90_gmma.hpp``, where values fill 32-bit registers from the
low bits up.

Worked example: thread 0 register 0 of an f16 accumulator holds D[0,0] (low half)
and D[0,1] (high half); thread 37 (w=1, g=1, q=1) element 0 is D[17,2].
"""

from __future__ import annotations

import numpy as np

from ..dtypes import (ELEMENT_DTYPES, _UINT_OF_SIZE, bits_of, element_bytes,  # noqa: F401
                      element_dtype, from_bits, raw_bits)
from ..validate import _describe, as_array, check_int, check_registers
from ..wgmma_forms import WGMMA_FORMS
from ..errors import DTypeError, InputError

THREADS = 128
M = 64

# K of the single wgmma for each A type (every dense form reads 32 bytes of K)
_K_OF = {"tf32": 8, "f16": 16, "bf16": 16, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32}


def _thread_parts() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = np.arange(THREADS)
    w, lane = t // 32, t % 32
    return w, lane // 4, lane % 4


def _acc_elements(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols), each (128, n/2): position of accumulator element i of thread t."""
    w, g, q = _thread_parts()
    i = np.arange(n // 2)
    rows = 16 * w[:, None] + g[:, None] + 8 * ((i[None, :] >> 1) & 1)
    cols = 2 * q[:, None] + (i[None, :] & 1) + 8 * (i[None, :] >> 2)
    return rows, cols


#: accumulator type -> the N of the wgmma forms that accumulate into it (the form table's sets)
ACC_NS: dict[str, tuple[int, ...]] = {d: tuple(sorted({f.n for f in WGMMA_FORMS if f.dtype_d == d}))
                                      for d in ("f32", "s32", "f16")}


def _check_n(n: int, dtype_d: str | None = None) -> None:
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 8 or n > 256 or n % 8:
        raise InputError(f"N must be a multiple of 8 in 8..256, got {_describe(n)}")
    if dtype_d is not None and int(n) not in ACC_NS[dtype_d]:
        raise InputError(f"no wgmma form accumulates m64n{int(n)} into .{dtype_d}: an {dtype_d} accumulator has "
                         f"N = 8, 16, 24, 32 or a multiple of 16 up to 256 (integer wgmma), got {int(n)}")


def check_acc_form(n: int, dtype_d: str) -> int:
    """N, if some wgmma form accumulates m64nN into ``dtype_d`` (the form table's N sets)."""
    if not isinstance(dtype_d, str) or dtype_d not in ("f32", "s32", "f16"):
        raise InputError(f"accumulator type must be f32, s32 or f16, got {_describe(dtype_d)}")
    _check_n(n, dtype_d)
    return int(n)


def accumulator_layout(n: int, dtype_d: str) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols), each of shape (128, d_regs, elems_per_reg): the D element in each register slot.

    ``dtype_d`` is 'f32', 's32' (one element a register) or 'f16' (two; slot 0 is bits 15:0).
    The map is defined for every N multiple of 8; :func:`check_acc_form` (used by
    :func:`pack_accumulator`, :func:`unpack_accumulator` and the diagrams) also requires a wgmma
    form with that N and accumulator to exist (no m64n40 .s32).
    """
    if not isinstance(dtype_d, str) or dtype_d not in ("f32", "s32", "f16"):
        raise InputError(f"accumulator type must be f32, s32 or f16, got {_describe(dtype_d)}")
    _check_n(n)
    n = int(n)
    rows, cols = _acc_elements(n)
    per = 2 if dtype_d == "f16" else 1
    return rows.reshape(THREADS, -1, per), cols.reshape(THREADS, -1, per)


def a_fragment_layout(dtype_a: str) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols), each (128, 4, elems_per_reg): the A element (64 x K) in each register slot.

    Slot ``e`` of a register is bits ``[e*w, (e+1)*w)`` for element width ``w``.
    """
    if not isinstance(dtype_a, str) or dtype_a not in _K_OF:
        raise InputError(f"A type must be one of {', '.join(_K_OF)}, got {_describe(dtype_a)}")
    w, g, q = _thread_parts()
    if dtype_a in ("f16", "bf16"):
        rows, cols = _acc_elements(16)
        return rows.reshape(THREADS, 4, 2), cols.reshape(THREADS, 4, 2)
    if dtype_a == "tf32":
        i = np.arange(4)
        rows = 16 * w[:, None] + g[:, None] + 8 * (i[None, :] & 1)
        cols = q[:, None] + 4 * (i[None, :] >> 1)
        return rows.reshape(THREADS, 4, 1), cols.reshape(THREADS, 4, 1)
    i = np.arange(16)
    rows = 16 * w[:, None] + g[:, None] + 8 * ((i[None, :] >> 2) & 1)
    cols = 4 * q[:, None] + (i[None, :] & 3) + 16 * (i[None, :] >> 3)
    return rows.reshape(THREADS, 4, 4), cols.reshape(THREADS, 4, 4)


def _pack(bits: np.ndarray, rows: np.ndarray, cols: np.ndarray, width: int) -> np.ndarray:
    """Gather bits[..., rows, cols] and pack the slots of each register, low slot first."""
    g = bits[..., rows, cols].astype(np.uint32)  # (..., 128, regs, per)
    shifts = (np.arange(rows.shape[-1], dtype=np.uint32) * width).astype(np.uint32)
    return np.bitwise_or.reduce(g << shifts, axis=-1).astype(np.uint32)


def _unpack(regs: np.ndarray, rows: np.ndarray, cols: np.ndarray, width: int,
            shape: tuple[int, int], utype, name: str = "registers") -> np.ndarray:
    regs = check_registers(name, regs)
    per = rows.shape[-1]
    shifts = (np.arange(per, dtype=np.uint32) * width).astype(np.uint32)
    mask = np.uint32((1 << width) - 1) if width < 32 else np.uint32(0xFFFFFFFF)
    slots = (regs[..., None] >> shifts) & mask  # (..., 128, regs, per)
    out = np.zeros(regs.shape[:-2] + shape, dtype=utype)
    out[..., rows, cols] = slots.astype(utype)
    return out


def _check_tail(x: np.ndarray, shape: tuple[int, int], what: str) -> None:
    if x.ndim < 2 or tuple(x.shape[-2:]) != shape:
        raise InputError(f"{what} must have shape (..., {shape[0]}, {shape[1]}), got {x.shape}")


def pack_accumulator(matrix: np.ndarray, dtype_d: str) -> np.ndarray:
    """(..., 64, N) typed accumulator -> (..., 128, d_regs) uint32 register images."""
    if not isinstance(dtype_d, str) or dtype_d not in ("f32", "s32", "f16"):
        raise InputError(f"accumulator type must be f32, s32 or f16, got {_describe(dtype_d)}")
    bits = raw_bits(matrix, dtype_d)
    if bits.ndim < 2 or bits.shape[-2] != M:
        raise InputError(f"accumulator must have shape (..., 64, N), got {bits.shape}")
    n = check_acc_form(bits.shape[-1], dtype_d)
    rows, cols = accumulator_layout(n, dtype_d)
    return _pack(bits, rows, cols, 8 * element_bytes(dtype_d))


def unpack_accumulator(regs: np.ndarray, n: int, dtype_d: str) -> np.ndarray:
    """(..., 128, d_regs) uint32 register images -> (..., 64, N) typed accumulator."""
    n = check_acc_form(n, dtype_d)
    rows, cols = accumulator_layout(n, dtype_d)
    regs = as_array("accumulator registers", regs)
    if regs.ndim < 2 or regs.shape[-2:] != rows.shape[:2]:
        raise InputError(f"accumulator registers for N={n} {dtype_d} must have shape "
                         f"(..., 128, {rows.shape[1]}), got {regs.shape}")
    width = 8 * element_bytes(dtype_d)
    bits = _unpack(regs, rows, cols, width, (M, int(n)), _UINT_OF_SIZE[width // 8], "accumulator registers")
    return from_bits(bits, dtype_d)


def pack_a_fragment(a: np.ndarray, dtype_a: str) -> np.ndarray:
    """(..., 64, K) typed A tile -> (..., 128, 4) uint32 registers of the RS form."""
    if not isinstance(dtype_a, str) or dtype_a not in _K_OF:
        raise InputError(f"A type must be one of {', '.join(_K_OF)}, got {_describe(dtype_a)}")
    bits = raw_bits(a, dtype_a)
    _check_tail(bits, (M, _K_OF.get(dtype_a, -1)), f"A ({dtype_a})")
    rows, cols = a_fragment_layout(dtype_a)
    return _pack(bits, rows, cols, 8 * element_bytes(dtype_a))


def unpack_a_fragment(regs: np.ndarray, dtype_a: str) -> np.ndarray:
    """(..., 128, 4) uint32 registers of the RS form -> (..., 64, K) typed A tile."""
    rows, cols = a_fragment_layout(dtype_a)
    regs = as_array("A registers", regs)
    if regs.ndim < 2 or regs.shape[-2:] != (THREADS, 4):
        raise InputError(f"A registers must have shape (..., 128, 4), got {regs.shape}")
    width = 8 * element_bytes(dtype_a)
    bits = _unpack(regs, rows, cols, width, (M, _K_OF[dtype_a]), _UINT_OF_SIZE[width // 8], "A registers")
    return from_bits(bits, dtype_a)


def render_accumulator_layout(n: int = 8, dtype_d: str = "f32", *, rows: int = 16) -> str:
    """Text table: ``T<t>:r<reg>[.<half>]`` holding each D element (first ``rows`` rows)."""
    r, c = accumulator_layout(n, dtype_d)
    n = int(n)
    rows = check_int("rows", rows, 1, limit="diagram_rows")
    per = r.shape[-1]
    cell = np.empty((M, n), dtype=object)
    for t in range(THREADS):
        for j in range(r.shape[1]):
            for e in range(per):
                cell[r[t, j, e], c[t, j, e]] = f"T{t}:r{j}" + (f".{e}" if per > 1 else "")
    width = max(len(s) for s in cell.ravel())
    head = "     " + " ".join(f"{j:>{width}}" for j in range(n))
    lines = [head] + [f"{i:>3}: " + " ".join(f"{cell[i, j]:>{width}}" for j in range(n))
                      for i in range(min(rows, M))]
    return "\n".join(lines)
