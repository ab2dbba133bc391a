"""Binary floating-point formats as data.

One :class:`FormatSpec` per format drives encoding, decoding, the docs tables and
the tests.  Values mirror the OCP FP8 specification (e4m3 "fn", e5m2) and IEEE 754
(binary16, binary32, binary64), plus bfloat16 and tf32.

Worked example (e4m3): code 0x5C = 0b0.1011.100 -> sign 0, exponent field 11,
mantissa 4 -> (1 + 4/8) * 2**(11 - 7) = 24.0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import ml_dtypes
import numpy as np

from ..errors import InputError
from ..validate import _describe


@dataclass(frozen=True)
class FormatSpec:
    """Bit-level description of a binary floating-point format.

    ``ieee_specials``: True when the all-ones exponent field holds Inf (mantissa 0)
    and NaN (mantissa != 0), as in IEEE 754 and e5m2.  False for e4m3 "fn", whose
    only NaN is S.1111.111 and which has no infinity.
    ``nan_code``: the canonical NaN (positive) this project writes.
    """

    name: str
    ebits: int
    mbits: int
    ieee_specials: bool
    nan_code: int
    dtype: Optional[object] = None  # numpy / ml_dtypes scalar type, if any

    @property
    def bits(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def bias(self) -> int:
        return (1 << (self.ebits - 1)) - 1

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal number."""
        return 1 - self.bias

    @property
    def sign_mask(self) -> int:
        return 1 << (self.bits - 1)

    @property
    def mag_mask(self) -> int:
        return self.sign_mask - 1

    @property
    def max_code(self) -> int:
        """Magnitude code of the largest finite value."""
        if self.ieee_specials:
            return (((1 << self.ebits) - 2) << self.mbits) | ((1 << self.mbits) - 1)
        return self.mag_mask - 1  # e4m3fn: S.1111.110

    @property
    def inf_code(self) -> Optional[int]:
        return ((1 << self.ebits) - 1) << self.mbits if self.ieee_specials else None

    @property
    def emax(self) -> int:
        return (self.max_code >> self.mbits) - self.bias

    @property
    def max(self) -> float:
        return float(decode_scalar(self.max_code, self))

    @property
    def smallest_normal(self) -> float:
        return 2.0 ** self.emin

    @property
    def smallest_subnormal(self) -> float:
        return 2.0 ** (self.emin - self.mbits)

    def is_nan_code(self, code: int) -> bool:
        mag = code & self.mag_mask
        if self.ieee_specials:
            return mag > self.inf_code
        return mag == self.mag_mask


def decode_scalar(code: int, spec: FormatSpec) -> float:
    """Value of one code as a Python float (exact: every format here fits in binary64)."""
    sign = -1.0 if code & spec.sign_mask else 1.0
    mag = code & spec.mag_mask
    e = mag >> spec.mbits
    m = mag & ((1 << spec.mbits) - 1)
    if spec.is_nan_code(code):
        return float("nan")
    if spec.ieee_specials and mag == spec.inf_code:
        return sign * float("inf")
    if e == 0:
        return sign * m * 2.0 ** (spec.emin - spec.mbits)
    return sign * (1 + m / (1 << spec.mbits)) * 2.0 ** (e - spec.bias)


E4M3 = FormatSpec("e4m3", 4, 3, False, 0x7F, ml_dtypes.float8_e4m3fn)
E5M2 = FormatSpec("e5m2", 5, 2, True, 0x7F, ml_dtypes.float8_e5m2)
F16 = FormatSpec("f16", 5, 10, True, 0x7FFF, np.float16)
BF16 = FormatSpec("bf16", 8, 7, True, 0x7FFF, ml_dtypes.bfloat16)
TF32 = FormatSpec("tf32", 8, 10, True, 0x7FFFF, None)  # 19 bits, held in the top of an f32
F32 = FormatSpec("f32", 8, 23, True, 0x7FFFFFFF, np.float32)
F64 = FormatSpec("f64", 11, 52, True, 0x7FFFFFFFFFFFFFFF, np.float64)

FORMATS = {f.name: f for f in (E4M3, E5M2, F16, BF16, TF32, F32, F64)}
FP8_FORMATS = {"e4m3": E4M3, "e5m2": E5M2}

_ALIASES = {
    "float8_e4m3fn": "e4m3", "e4m3fn": "e4m3", "fp8e4m3": "e4m3",
    "float8_e5m2": "e5m2", "fp8e5m2": "e5m2",
    "float16": "f16", "half": "f16", "fp16": "f16",
    "bfloat16": "bf16", "float32": "f32", "fp32": "f32", "float64": "f64",
}


def format_spec(name: str | FormatSpec) -> FormatSpec:
    """Look a format up by name (``e4m3``, ``e5m2``, ``f16``, ``bf16``, ``tf32``, ``f32``, ``f64``)."""
    if isinstance(name, FormatSpec):
        return name
    if isinstance(name, np.dtype):
        name = name.name
    key = _ALIASES.get(name.lower(), name.lower()) if isinstance(name, str) else None
    if key not in FORMATS:
        raise InputError(f"unknown format {_describe(name)}; known formats are {', '.join(FORMATS)}")
    return FORMATS[key]


def fp8_spec(name: str | FormatSpec) -> FormatSpec:
    """Like :func:`format_spec` but only accepts the FP8 formats e4m3 and e5m2."""
    spec = format_spec(name)
    if spec.name not in FP8_FORMATS:
        raise InputError(f"FP8 format must be e4m3 or e5m2, got {spec.name!r}")
    return spec
