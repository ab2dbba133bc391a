"""ldmatrix / stmatrix ``.m8n8 .x1/.x2/.x4 {.trans} .b16``: who gives the address, who holds what.

Both instructions move ``num`` (1, 2, 4) 8x8 matrices of 16-bit elements between the
registers of a warp and shared memory, cooperatively (seed §4-5):

* **Address givers**: lane ``L`` in ``0 .. 8*num-1`` gives the address of row ``L % 8`` of
  matrix ``L // 8`` (16 contiguous bytes, 16-byte aligned).  Other lanes' addresses are
  ignored.
* **Data holders**: every lane ``l`` holds register ``j`` (one per matrix) with two
  elements: bits 15:0 (half 0) and 31:16 (half 1) hold, of matrix ``j``::

      without .trans:  row l // 4,          column 2*(l % 4) + half
      with    .trans:  row 2*(l % 4) + half, column l // 4

  so thread 0's ``.x4`` registers hold row 0 / columns 0-1 of each matrix (the striped
  layout of seed §5.3); ``.trans`` writes each thread's pair down a column instead.

The same map serves ldmatrix (memory -> registers) and stmatrix (registers -> memory).
Instruction forms are data (:data:`MATRIX_FORMS`); ``.m16n8``/``.b8`` (sm_100+) and f32
(stmatrix has none: seed §6) are refused with the rule.
Sources: PTX ISA "ldmatrix"/"stmatrix"; CuTe ``copy_traits_sm75.hpp``/``sm90.hpp``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..validate import _describe, check_flag, check_int
from ..errors import FormError, InputError

LANES = 32


@dataclass(frozen=True)
class MatrixForm:
    """One ldmatrix/stmatrix form."""

    instr: str
    op: str          # 'ldmatrix' or 'stmatrix'
    num: int         # 1, 2, 4 matrices
    trans: bool

    @property
    def regs(self) -> int:
        return self.num

    @property
    def address_lanes(self) -> int:
        """Lanes 0 .. address_lanes-1 give row addresses."""
        return 8 * self.num


def _forms() -> dict[str, MatrixForm]:
    out = {}
    for op in ("ldmatrix", "stmatrix"):
        for num in (1, 2, 4):
            for trans in (False, True):
                for ss in ("", ".shared", ".shared::cta"):
                    instr = f"{op}.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}{ss}.b16"
                    out[instr] = MatrixForm(instr, op, num, trans)
    return out


#: every valid sm_90a ldmatrix / stmatrix form, keyed by its full opcode
MATRIX_FORMS: dict[str, MatrixForm] = _forms()


def parse_matrix_instr(instr: str, op: str | None = None) -> MatrixForm:
    """Parse an ldmatrix/stmatrix opcode; errors name the rule broken."""
    if not isinstance(instr, str):
        raise FormError(f"an ldmatrix/stmatrix opcode must be a string, got {type(instr).__name__}")
    s = instr.strip().rstrip(";")
    if s in MATRIX_FORMS:
        f = MATRIX_FORMS[s]
        if op is not None and f.op != op:
            raise FormError(f"expected a {op} opcode, got {_describe(instr)}")
        return f
    parts = s.split(".")
    head = parts[0] if parts else ""
    if head not in ("ldmatrix", "stmatrix"):
        raise FormError(f"{_describe(instr)} is not an ldmatrix/stmatrix opcode")
    if "m16n8" in parts or "b8" in parts or "m16n16" in parts:
        raise FormError(f"{_describe(instr)}: .m16n8/.m16n16 shapes and .b8 elements are sm_100+ only; "
                        f"sm_90a has .m8n8 .b16")
    if any(p in ("f32", "b32", "f16", "bf16") for p in parts):
        raise FormError(f"{_describe(instr)}: the element type must be .b16 (stmatrix has no f32 form: "
                        f"convert and pack the accumulator to f16x2/bf16x2 first)")
    if not any(p in ("x1", "x2", "x4") for p in parts):
        raise FormError(f"{_describe(instr)}: the matrix count must be .x1, .x2 or .x4")
    if parts[1:3] != ["sync", "aligned"]:
        raise FormError(f"{_describe(instr)}: the opcode must start with {head}.sync.aligned")
    raise FormError(f"{_describe(instr)} is not a valid sm_90a form; expected "
                    f"{head}.sync.aligned.m8n8.x{{1,2,4}}[.trans][.shared[::cta]].b16")


def _num(num) -> int:
    num = check_int("num", num, 1, 4, rule="the matrix count .x1, .x2 or .x4")
    if num == 3:
        raise InputError("num must be 1, 2 or 4 (.x1/.x2/.x4), got 3")
    return num


def fragment_map(num: int, trans: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(matrix, row, col), each (32, num, 2): the element lane ``l`` holds in half ``h`` of
    register ``j``."""
    num, trans = _num(num), check_flag("trans", trans)
    lane = np.arange(LANES)[:, None, None]
    j = np.arange(num)[None, :, None]
    h = np.arange(2)[None, None, :]
    matrix = np.broadcast_to(j, (LANES, num, 2))
    if trans:
        row, col = 2 * (lane % 4) + h, lane // 4
    else:
        row, col = lane // 4, 2 * (lane % 4) + h
    return matrix.copy(), np.broadcast_to(row, (LANES, num, 2)).copy(), np.broadcast_to(col, (LANES, num, 2)).copy()


def address_givers(num: int) -> tuple[np.ndarray, np.ndarray]:
    """(matrix, row) each (32,): the row whose address lane ``L`` gives (-1 for lanes ignored)."""
    num = _num(num)
    lane = np.arange(LANES)
    given = lane < 8 * num
    return np.where(given, lane // 8, -1), np.where(given, lane % 8, -1)


__all__ = ["MatrixForm", "MATRIX_FORMS", "parse_matrix_instr", "fragment_map", "address_givers", "LANES"]
