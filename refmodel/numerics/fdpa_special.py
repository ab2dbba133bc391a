"""The scalar pieces of the fused dot product that both of its kernels use — the integer kernel of
:mod:`refmodel.numerics.accumulate` and the float kernel of :mod:`refmodel.numerics.fdpa_fast` — on their
own so that neither kernel module imports the other: the exponent placeholder of zero and special
operands, an accumulator's value from its bits, and the NaN / Inf a block with a special operand gives."""

from __future__ import annotations

import math

import numba
import numpy as np

BIG = 1 << 14  # exponent placeholder of zero / special operands: never the maximum


@numba.njit(cache=True)
def _acc_value(bits, acc_e, acc_m):
    """float64 value of accumulator bits (f32 or f16 layout)."""
    emask = (1 << acc_e) - 1
    bias = (1 << (acc_e - 1)) - 1
    E = (bits >> acc_m) & emask
    M = bits & ((np.int64(1) << acc_m) - 1)
    if E == emask:
        v = np.nan if M != 0 else np.inf
    elif E == 0:
        v = math.ldexp(float(M), 1 - bias - acc_m)
    else:
        v = math.ldexp(float(M | (np.int64(1) << acc_m)), int(E) - bias - acc_m)
    return -v if (bits >> (acc_e + acc_m)) & 1 else v


@numba.njit(cache=True)
def _special_term(ca, cb, a_neg, b_neg, nan, pinf, ninf):
    """(nan, +Inf, -Inf) seen so far, after one product of operand classes ``ca``, ``cb`` (signs
    ``a_neg``, ``b_neg`` of finite operands' significands)."""
    if ca == 4 or cb == 4:
        nan = True
    elif ca >= 2 or cb >= 2:
        if ca == 1 or cb == 1:
            nan = True  # Inf * 0
        else:
            na = ca == 3 or (ca == 0 and a_neg)
            nbn = cb == 3 or (cb == 0 and b_neg)
            if na != nbn:
                ninf = True
            else:
                pinf = True
    return nan, pinf, ninf


@numba.njit(cache=True)
def _special_result(nan, pinf, ninf, c_bits, acc_e, acc_m, nan_bits):
    """The block's NaN / signed Inf bits from its products' (nan, +Inf, -Inf) and C's bits."""
    emask = (1 << acc_e) - 1
    if (c_bits >> acc_m) & emask == emask:  # C is Inf or NaN
        if c_bits & ((1 << acc_m) - 1):
            nan = True
        elif (c_bits >> (acc_e + acc_m)) & 1:
            ninf = True
        else:
            pinf = True
    if nan or (pinf and ninf):
        return nan_bits
    inf_bits = emask << acc_m
    if ninf:
        return inf_bits | (1 << (acc_e + acc_m))
    return inf_bits


@numba.njit(cache=True)
def _special_bits(r, nb, k0, k1, j, SA, CA, SB, CB, c_bits, acc_e, acc_m, nan_bits):
    """NaN / signed Inf of element (r, j) for one block that holds a special value."""
    nan = False
    pinf = False
    ninf = False
    for k in range(k0, k1):
        nan, pinf, ninf = _special_term(CA[r, k, 0], CB[nb, k, j], SA[r, k, 0] < 0, SB[nb, k, j] < 0,
                                        nan, pinf, ninf)
    return _special_result(nan, pinf, ninf, c_bits, acc_e, acc_m, nan_bits)


@numba.njit(cache=True)
def _special_bits_rows(r, k0, k1, j, SA, CA, SB, CB, BR, c_bits, acc_e, acc_m, nan_bits):
    """:func:`_special_bits` of a row-gathered B: term k of row r multiplies B's row ``BR[r, k]``
    (SB, CB of shape (1, rows, N))."""
    nan = False
    pinf = False
    ninf = False
    for k in range(k0, k1):
        kb = BR[r, k]
        nan, pinf, ninf = _special_term(CA[r, k, 0], CB[0, kb, j], SA[r, k, 0] < 0, SB[0, kb, j] < 0,
                                        nan, pinf, ninf)
    return _special_result(nan, pinf, ninf, c_bits, acc_e, acc_m, nan_bits)
