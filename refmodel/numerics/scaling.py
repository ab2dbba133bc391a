"""Scaling recipes for FP8 quantization: tensor-wise, row / column-wise, block-wise
(DeepSeek-V3 / DeepGEMM 1x128 and 128x128 tiles, OCP MX 1x32 blocks with E8M0
scales) and delayed scaling (TransformerEngine style).

Formulas (quotable by docs/)
----------------------------
Everything is float32 arithmetic with IEEE round-to-nearest-even (RNE) and no
flush-to-zero, as CUDA's ``/`` and ``*`` compile without ``--use_fast_math``
(``div.rn.f32``, ``mul.rn.f32``).  ``fmax`` is the FP8 format's largest finite
value (448 for e4m3, 57344 for e5m2), ``emax`` its largest exponent (8, 15).

1. Input.  ``x`` is converted to float32 first (exact for float32, float16 and
   bfloat16; one RNE rounding for float64, like ``tensor.float()``).

2. Blocks.  ``"tensor"``: one block.  ``"row"``: one block per row of the last two
   dims (a ``1xN`` tile); ``"col"``: one per column (an ``Mx1`` tile); ``"RxC"``:
   R x C tiles of the last two dims, every leading (batch) index separately.  When
   R or C does not divide the dimension the ragged last tile is a block of its own,
   which equals DeepGEMM's zero-padding (padding with zeros changes no amax).  R and C
   are each at most the tensor's extent along their axis or at most 4096 (limit 'block':
   a standard tile on a smaller tensor is one ragged block); a larger tile is refused.
   Without a tensor (:func:`describe_recipe`) only the 4096 bound applies.
   Scales have shape ``(*batch, ceil(M/R), ceil(N/C))`` (``"row"``: ``(*batch, M, 1)``,
   ``"col"``: ``(*batch, 1, N)``, so they broadcast against x); ``"tensor"``: shape ().

3. amax = max |x| over the block's *finite* elements, in float32 (NaN and +-Inf
   elements are skipped, like CUDA ``fmaxf`` skips NaN), then ``amax = max(amax,
   amax_floor)`` (DeepGEMM uses ``amax_floor=1e-4``).

4. Scale (the *dequantization* scale s, x ~= decode(q) * s), for amax > 0:

   ``pow2=None`` (f32):  s = RNE_f32(amax / (fmax * 2**-margin)), then at least 2**-126
   ``pow2="ceil"``:       s = 2**ceil(log2(RNE_f32(amax / (fmax * 2**-margin))))
   ``pow2="mx"``:         s = 2**(floor(log2(amax)) - emax + margin)   (OCP MX v1.0)

   Power-of-two exponents are clamped below at -126 (f32) or -127 (e8m0).  An all-zero
   (or all-non-finite) block has amax = 0 and gets s = 1.0 (e8m0 code 127).  A scale
   that overflows (only with a large margin) raises InputError.

5. Quantize: q = cvt.rn.<policy>.fp8(t) with t = RNE_f32(x / s) (``quant_op="div"``,
   DeepSeek-V3 ``act_quant``) or t = RNE_f32(x * RNE_f32(1 / s))
   (``quant_op="mul_reciprocal"``, DeepGEMM ``per_token_cast_to_fp8``).  The two
   differ by an ulp of t for some x, which can move q by one code; for power-of-two
   scales they agree.  NaN elements give the FP8 NaN (0x7F); +-Inf elements follow
   the policy (satfinite: +-fmax).

6. Dequantize: RNE_f32(decode(q) * s).  A NaN scale (f32 NaN, e8m0 0xFF) makes its
   whole block NaN, as in the OCP MX spec.

With ``pow2=None`` (margin 0, amax above ``amax_floor`` and fmax * 2**-126) the
element with |x| = amax always encodes to +-fmax (t is fmax within 2 float32 ulps,
which rounds to fmax in FP8; t == fmax exactly when amax / fmax is a float32) and
nothing overflows, not even under policy='nosat'.  With
``pow2="ceil"`` no element exceeds fmax either (t <= fmax exactly).  With ``pow2="mx"``
amax / s lies in [2**emax, 2**(emax+1)), above fmax for the top 1/8 (e4m3: 448..512)
or 1/4 (e5m2): those elements saturate (the known MX clipping; policy='satfinite').

Relation to other implementations
---------------------------------
* DeepGEMM (deep_gemm/utils/math.py): ``sf = clamp(amax, 1e-4) / 448``, codes of
  ``x * (1 / sf)``, UE8M0 by rounding sf up to a power of two with exponent clamped to
  [-126, 127] = ``amax_floor=1e-4, quant_op="mul_reciprocal"`` (+ ``pow2="ceil"``).
* DeepSeek-V3 inference/kernel.py ``act_quant``: ``s = amax / 448``, ``x / s`` =
  ``quant_op="div"`` (it has no zero-block rule; an all-zero block gives NaN there).
* TransformerEngine stores the *quantization* scale ``S = (fmax * 2**-margin) / amax``
  and multiplies, ``q = fp8(x * S)``, keeping ``scale_inv = RNE_f32(1 / S)`` for
  dequantization.  ``scale_inv`` and our s = RNE_f32(amax / (fmax * 2**-margin)) differ
  by at most one ulp.  TE's current scaling gives S = 1 for zero / Inf / NaN amax;
  its MXFP8 kernels round ``amax * RNE_f32(1/fmax)`` up to a power of two
  (``cvt.rp.satfinite.ue8m0x2.f32``, our ``pow2="ceil"`` up to that rounding) and
  give an all-zero block e8m0 code 0, not 127.
* OCP MX v1.0 section 6.3: X = 2**(floor(log2(amax)) - emax_elem), P_i = fp8(V_i / X)
  with overflow clamped to max normal = ``scale_format="e8m0"`` (``pow2="mx"``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from ..errors import DTypeError, InputError
from ..limits import check_block, check_limit, limit
from ..validate import _describe, as_array, as_real, check_codes, check_flag, check_real_scalar
from .formats import FormatSpec, fp8_spec
from .fp8 import POLICIES, _as_float_array, decode, encode

SCALE_FORMATS = ("f32", "e8m0")
POW2_RULES = ("ceil", "mx")
QUANT_OPS = ("div", "mul_reciprocal")
DELAYED_ALGOS = ("max", "most_recent")
MAX_MARGIN = limit("quantize_margin")
MAX_TILE = limit("quantize_tile")

E8M0_BIAS = 127
E8M0_NAN = 0xFF
_F32_MIN_EXP = -126  # smallest normal float32 is 2**-126
_E8M0_MIN_EXP = -127
_E8M0_MAX_EXP = 127

_TILE_RE = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$")

GranularityLike = Union[str, tuple]


# --------------------------------------------------------------------------- granularity

@dataclass(frozen=True)
class Granularity:
    """A parsed granularity: ``kind`` is 'tensor', 'row', 'col' or 'tile' (with ``rows`` x ``cols``)."""

    kind: str
    rows: int = 0
    cols: int = 0

    def __str__(self) -> str:
        return f"{self.rows}x{self.cols}" if self.kind == "tile" else self.kind

    def tile(self, shape: tuple) -> tuple[int, int]:
        """Tile size (R, C) over the last two dims of an array of ``shape``.

        The rule for a block's size against its tensor (every entry point that meets a tensor
        -- quantize, dequantize, amax, scale_shape -- goes through here): each tile dimension is
        at most the tensor's extent along its axis, or at most the limit 'block' (a recipe's
        standard tile, 128x128 say, on a smaller tensor: one ragged block, cut to the tensor, with
        DeepGEMM's zero-padding scales and no padding allocated).  A larger tile (10**9 rows on a
        64-row tensor) is no block of this tensor nor any recipe's tile: one :class:`LimitError`
        naming the axis, its extent and the limit (:func:`refmodel.limits.check_block`)."""
        m, n = shape[-2], shape[-1]
        if self.kind == "row":
            return 1, max(n, 1)
        if self.kind == "col":
            return max(m, 1), 1
        nd = len(shape)
        check_block(f"the rows of tile '{self}'", self.rows, m, f"axis {nd - 2}")
        check_block(f"the columns of tile '{self}'", self.cols, n, f"axis {nd - 1}")
        return min(self.rows, max(m, 1)), min(self.cols, max(n, 1))


def parse_granularity(granularity: GranularityLike) -> Granularity:
    """Parse 'tensor', 'row', 'col', a tile string 'RxC' or a tuple (R, C)."""
    if isinstance(granularity, Granularity):
        return granularity
    if isinstance(granularity, tuple) and len(granularity) == 2 and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in granularity):
        r, c = int(granularity[0]), int(granularity[1])
    elif isinstance(granularity, str) and granularity.strip().lower() in ("tensor", "row", "col"):
        return Granularity(granularity.strip().lower())
    else:
        m = _TILE_RE.match(granularity) if isinstance(granularity, str) else None
        if m is None:
            raise InputError("granularity must be 'tensor', 'row', 'col' or a tile like "
                             f"'1x128', got {_describe(granularity)}")
        if len(m.group(1)) > 12 or len(m.group(2)) > 12:  # more digits than any int32
            raise InputError(f"tile sizes must be at most {MAX_TILE} (limit 'quantize_tile'), got "
                             f"{_describe(granularity)}")
        r, c = int(m.group(1)), int(m.group(2))
    if r < 1 or c < 1:
        raise InputError(f"tile sizes must be positive, got '{_describe(r)}x{_describe(c)}'")
    check_limit("quantize_tile", max(r, c), f"tile sizes (got '{_describe(r)}x{_describe(c)}')")
    return Granularity("tile", r, c)


def _check_ndim(shape: tuple, g: Granularity) -> None:
    if g.kind != "tensor" and len(shape) < 2:
        raise InputError(f"granularity '{g}' needs x with at least 2 dimensions, "
                         f"got shape {tuple(shape)}")


def scale_shape(shape: tuple, granularity: GranularityLike) -> tuple:
    """Shape of the scales for an array of ``shape``: ``(*batch, ceil(M/R), ceil(N/C))``, or ()."""
    g = parse_granularity(granularity)
    shape = tuple(int(d) for d in shape)
    if g.kind == "tensor":
        return ()
    _check_ndim(shape, g)
    r, c = g.tile(shape)
    return shape[:-2] + (-(-shape[-2] // r), -(-shape[-1] // c))


def _block_max(a: np.ndarray, g: Granularity) -> np.ndarray:
    """Max of a non-negative float32 array over each block (0 for an empty block set)."""
    if g.kind == "tensor":
        return np.float32(a.max()) if a.size else np.float32(0.0)
    out_shape = scale_shape(a.shape, g)
    if a.size == 0:
        return np.zeros(out_shape, np.float32)
    r, c = g.tile(a.shape)
    m, n = a.shape[-2], a.shape[-1]
    mb, nb = out_shape[-2], out_shape[-1]
    pad = [(0, 0)] * (a.ndim - 2) + [(0, mb * r - m), (0, nb * c - n)]
    if mb * r != m or nb * c != n:
        a = np.pad(a, pad)  # zeros: neutral for a max of magnitudes
    a = a.reshape(a.shape[:-2] + (mb, r, nb, c))
    return a.max(axis=(-3, -1))


def _expand(per_block: np.ndarray, shape: tuple, g: Granularity) -> np.ndarray:
    """Repeat one value per block to one value per element of ``shape``."""
    if g.kind == "tensor":
        return np.broadcast_to(per_block, shape)
    r, c = g.tile(shape)
    e = np.repeat(np.repeat(per_block, r, axis=-2), c, axis=-1)
    return e[..., :shape[-2], :shape[-1]]


def _to_f32(x) -> np.ndarray:
    arr = _as_float_array(x)
    with np.errstate(over="ignore"):
        return arr.astype(np.float32)


def amax(x, granularity: GranularityLike = "tensor") -> np.ndarray:
    """float32 max |x| per block over the finite elements (NaN and +-Inf skipped; 0 if none)."""
    g = parse_granularity(granularity)
    x32 = _to_f32(x)
    _check_ndim(x32.shape, g)
    a = np.abs(np.asarray(x32))
    a = np.where(np.isfinite(a), a, np.float32(0)).astype(np.float32)  # 0-d safe
    return _block_max(a, g)


# --------------------------------------------------------------------------- scales

def decode_e8m0(codes) -> np.ndarray:
    """float32 value 2**(code - 127) of E8M0 scale codes (uint8); 0xFF is NaN.  Exact
    (2**-127, code 0, is a float32 subnormal)."""
    c = check_codes("E8M0 scale codes", codes, 8, "E8M0").astype(np.int64)
    with np.errstate(over="ignore"):
        out = np.ldexp(np.float32(1.0), (c - E8M0_BIAS).astype(np.int32)).astype(np.float32)
    return np.where(c == E8M0_NAN, np.float32(np.nan), out).astype(np.float32)


def _check_options(scale_format: str, pow2: Optional[str], margin, amax_floor,
                   quant_op: str = "div", policy: str = "satfinite") -> Optional[str]:
    """Validate the recipe options; returns the effective pow2 rule."""
    if not isinstance(scale_format, str) or scale_format not in SCALE_FORMATS:
        raise InputError(f"scale_format must be 'f32' or 'e8m0', got {_describe(scale_format)}")
    if pow2 is not None and (not isinstance(pow2, str) or pow2 not in POW2_RULES):
        raise InputError(f"pow2 must be None, 'ceil' or 'mx', got {_describe(pow2)}")
    if isinstance(margin, bool) or not isinstance(margin, (int, np.integer)) \
            or not 0 <= margin <= MAX_MARGIN:
        raise InputError(f"margin must be an integer from 0 to {MAX_MARGIN}, got {_describe(margin)}")
    try:
        floor_ok = check_real_scalar("amax_floor", amax_floor, finite=True) >= 0
    except InputError:
        floor_ok = False
    if not floor_ok:
        raise InputError(f"amax_floor must be a finite number >= 0, got {_describe(amax_floor)}")
    if not isinstance(quant_op, str) or quant_op not in QUANT_OPS:
        raise InputError(f"quant_op must be 'div' or 'mul_reciprocal', got {_describe(quant_op)}")
    if not isinstance(policy, str) or policy not in POLICIES:
        raise InputError(f"policy must be one of {', '.join(POLICIES)}, got {_describe(policy)}")
    if scale_format == "e8m0" and pow2 is None:
        return "mx"
    return pow2


def _pow2_scales(e: np.ndarray, zero: np.ndarray, scale_format: str, detail: str):
    lo = _E8M0_MIN_EXP if scale_format == "e8m0" else _F32_MIN_EXP
    if np.any(e[~zero] > _E8M0_MAX_EXP):
        raise InputError(f"the scale must be at most 2**127, got 2**{int(e[~zero].max())} ({detail})")
    e = np.where(zero, 0, np.maximum(e, lo))
    if scale_format == "e8m0":
        return (e + E8M0_BIAS).astype(np.uint8)
    return np.ldexp(np.float32(1.0), e.astype(np.int32)).astype(np.float32)


def scale_from_amax(amax_values, fmt: str | FormatSpec, *, scale_format: str = "f32",
                    pow2: Optional[str] = None, margin: int = 0,
                    amax_floor: float = 0.0) -> np.ndarray:
    """Dequantization scales (float32, or uint8 E8M0 codes) from per-block amaxes.

    Rules of the module docstring, step 4.  Non-finite amaxes count as 0 (scale 1.0),
    as for a block with no finite element; negative amaxes are an error.
    """
    spec = fp8_spec(fmt)
    rule = _check_options(scale_format, pow2, margin, amax_floor)
    a = as_real("amax", amax_values)
    with np.errstate(over="ignore"):
        a = a.astype(np.float64).astype(np.float32)
    if np.any(a < 0):
        raise InputError(f"amax must be >= 0, got {float(a[a < 0].flat[0])!r}")
    a = np.where(np.isfinite(a), a, np.float32(0))
    a = np.maximum(a, np.float32(amax_floor)).astype(np.float32)
    zero = a == 0
    safe = np.where(zero, np.float32(1), a).astype(np.float32)
    denom = np.float32(spec.max * 2.0 ** -margin)  # exact: margin <= 64
    detail = f"amax={float(a.max()) if a.size else 0.0!r}, margin={margin}"
    if rule == "mx":
        _, k = np.frexp(safe)  # safe = m * 2**k, m in [0.5, 1): floor(log2) = k - 1
        e = (k.astype(np.int64) - 1) - spec.emax + margin
        return _pow2_scales(e, zero, scale_format, detail)
    with np.errstate(over="ignore"):
        s = (safe / denom).astype(np.float32)
    if np.any(np.isinf(s)):
        raise InputError(f"the scale amax * 2**margin / fmax must be finite in float32 ({detail})")
    if rule == "ceil":
        m, k = np.frexp(s)
        e = np.where(m == 0.5, k - 1, k).astype(np.int64)  # ceil(log2(s)), exact
        return _pow2_scales(e, zero, scale_format, detail)
    s = np.maximum(s, np.float32(2.0 ** _F32_MIN_EXP))
    return np.where(zero, np.float32(1), s).astype(np.float32)


def _history_amax(history: np.ndarray, algo: str = "max") -> np.ndarray:
    """amax of a history (axis 0, most recent first): TE's fmaxf reduction from 0 (NaN skipped)."""
    if algo == "most_recent":
        return history[0]
    return np.fmax.reduce(np.concatenate([np.zeros((1,) + history.shape[1:], np.float32),
                                          history]), axis=0)


# --------------------------------------------------------------------------- quantize

def quantize(x, fmt: str | FormatSpec, granularity: GranularityLike = "tensor", *,
             scale_format: str = "f32", amax_history=None, margin: int = 0,
             policy: str = "satfinite", pow2: Optional[str] = None,
             quant_op: str = "div", amax_floor: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """FP8 codes (uint8, shaped like x) and per-block dequantization scales.

    ``scale_format``: 'f32' (float32 scales) or 'e8m0' (uint8 biased-exponent codes,
    OCP MX).  ``pow2``: None (f32: plain amax/fmax; e8m0: the MX rule), 'ceil' (round
    the float32 scale up to a power of two: nothing saturates) or 'mx'.
    ``amax_history``: delayed scaling without state: an array (H, *scales_shape) of
    earlier amaxes; the scale comes from their max (NaN skipped; a max of 0 or Inf
    gives scale 1.0) instead of from x.  ``margin``: scale multiplied by 2**margin.
    ``quant_op``: 'div' (x / s) or 'mul_reciprocal' (x * (1/s)).  ``amax_floor``:
    amax = max(amax, amax_floor).  Rules: module docstring.

    >>> q, s = quantize(np.array([[1.0, -2.0], [0.5, 4.0]]), "e4m3", "row")
    >>> s.ravel().tolist(), decode(q, "e4m3")[0].tolist()
    ([0.004464285913854837, 0.008928571827709675], [224.0, -448.0])
    """
    spec = fp8_spec(fmt)
    g = parse_granularity(granularity)
    _check_options(scale_format, pow2, margin, amax_floor, quant_op, policy)
    x32 = _to_f32(x)
    _check_ndim(x32.shape, g)
    sshape = scale_shape(x32.shape, g)
    if amax_history is None:
        a = amax(x32, g)
    else:
        h = as_real("amax_history", amax_history).astype(np.float64)
        with np.errstate(over="ignore"):
            h = h.astype(np.float32)
        if h.ndim < 1 or h.shape[1:] != sshape or h.shape[0] < 1:
            want = "(H" + "".join(f", {d}" for d in sshape) + ("," if not sshape else "") + ")"
            raise InputError(f"amax_history must have shape {want} with H >= 1 for granularity "
                             f"'{g}' and x of shape {x32.shape}, got {h.shape}")
        if np.any(h < 0):
            raise InputError(f"amax_history must hold amaxes >= 0, got {float(h[h < 0].flat[0])!r}")
        a = _history_amax(h)
    scales = scale_from_amax(a, spec, scale_format=scale_format, pow2=pow2, margin=margin,
                             amax_floor=amax_floor)
    s32 = decode_e8m0(scales) if scale_format == "e8m0" else scales
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        if quant_op == "div":
            t = x32 / _expand(s32, x32.shape, g)
        else:
            recip = (np.float32(1) / s32).astype(np.float32)
            t = x32 * _expand(recip, x32.shape, g)
    codes = encode(np.asarray(t, dtype=np.float32), spec, policy)
    return codes, np.asarray(scales)


def dequantize(codes, scales, fmt: str | FormatSpec,
               granularity: GranularityLike = "tensor") -> np.ndarray:
    """float32 RNE_f32(decode(q) * s) per element; ``scales`` float32, or uint8 E8M0 codes."""
    spec = fp8_spec(fmt)
    g = parse_granularity(granularity)
    vals = decode(codes, spec)
    _check_ndim(vals.shape, g)
    s = as_array("scales", scales, what="float32 scales or uint8 E8M0 codes")
    if s.dtype == np.uint8:
        s32 = decode_e8m0(s)
    elif s.dtype.kind == "f":
        s32 = s.astype(np.float32)
        with np.errstate(invalid="ignore"):
            exact = (s32.astype(s.dtype) == s) | np.isnan(s)
        if not np.all(exact):
            raise InputError("float scales must be exactly representable in float32")
    else:
        raise DTypeError(f"scales must be float32 or uint8 E8M0 codes, got {s.dtype}")
    expected = scale_shape(vals.shape, g)
    if s32.shape != expected:
        raise InputError(f"scales of shape {s32.shape} do not match granularity '{g}' for codes "
                         f"of shape {vals.shape}; expected {expected}")
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        return (vals * _expand(s32, vals.shape, g)).astype(np.float32)


# --------------------------------------------------------------------------- delayed scaling

class DelayedScaling:
    """Per-tensor delayed scaling (TransformerEngine's ``DelayedScaling`` recipe).

    The scale used at step t comes only from the amaxes of steps before t: call
    :meth:`quantize` (or quantize yourself with :attr:`scale`, then :meth:`update`
    with the step's amax).  After ``update``, with the last ``history_len`` amaxes:

    * amax_h = max of the history (``algo='max'``, NaN skipped, TE's fmaxf from 0) or
      the newest amax (``algo='most_recent'``);
    * if amax_h is finite and > 0: s = RNE_f32(amax_h / (fmax * 2**-margin)), else the
      previous scale is kept (initially 1.0), as TE does.

    TE keeps the reciprocal convention, ``S = (fmax * 2**-margin) / amax_h`` (exposed
    as :attr:`te_scale`) and ``scale_inv = RNE_f32(1 / S)``; :attr:`scale` is within one
    float32 ulp of ``scale_inv``.
    """

    def __init__(self, fmt: str | FormatSpec = "e4m3", history_len: int = 16,
                 algo: str = "max", margin: int = 0):
        self.spec = fp8_spec(fmt)
        if isinstance(history_len, bool) or not isinstance(history_len, (int, np.integer)) \
                or history_len < 1:
            raise InputError(f"history_len must be a positive integer, got {_describe(history_len)}")
        check_limit("delayed_history", int(history_len), "history_len")
        if not isinstance(algo, str) or algo not in DELAYED_ALGOS:
            raise InputError(f"algo must be 'max' or 'most_recent', got {_describe(algo)}")
        _check_options("f32", None, margin, 0.0)
        self.history_len = int(history_len)
        self.algo = algo
        self.margin = int(margin)
        self._history = np.zeros(self.history_len, np.float32)
        self._scale = np.float32(1.0)
        self._te_scale = np.float32(1.0)
        self.steps = 0

    @property
    def scale(self) -> np.float32:
        """Dequantization scale for the next step (x ~= decode(q) * scale)."""
        return self._scale

    @property
    def te_scale(self) -> np.float32:
        """TransformerEngine's ``scale`` (quantization multiplier) for the next step."""
        return self._te_scale

    @property
    def history(self) -> np.ndarray:
        """The last ``history_len`` amaxes, most recent first (zeros before any step)."""
        return self._history.copy()

    def update(self, amax_value) -> np.float32:
        """Record the amax of the step just run and return the scale for the next step."""
        a = np.float32(check_real_scalar("amax", amax_value))
        if a < 0:
            raise InputError(f"amax must be >= 0, got {float(a)!r}")
        self._history = np.concatenate([[a], self._history[:-1]]).astype(np.float32)
        self.steps += 1
        h = _history_amax(self._history, self.algo)
        if np.isfinite(h) and h > 0:
            scaled_max = np.float32(self.spec.max * 2.0 ** -self.margin)
            with np.errstate(over="ignore"):
                s = np.float32(h / scaled_max)
                te = np.float32(scaled_max / h)
            if np.isfinite(s):  # else keep the previous scale, like an Inf amax
                self._scale, self._te_scale = s, te
        return self._scale

    def quantize(self, x, policy: str = "satfinite") -> tuple[np.ndarray, np.float32]:
        """Codes of RNE_f32(x / scale) with the current scale, then :meth:`update` with
        max |x| (NaN skipped, Inf kept, as TE's amax reduction).  Returns (codes, scale used)."""
        x32 = _to_f32(x)
        s = self._scale
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            codes = encode((x32 / s).astype(np.float32), self.spec, policy)
        a = np.abs(x32)
        self.update(np.fmax.reduce(a.ravel(), initial=np.float32(0)) if a.size else 0.0)
        return codes, s


# --------------------------------------------------------------------------- description

def describe_recipe(fmt: str | FormatSpec = "e4m3", granularity: GranularityLike = "tensor", *,
                    scale_format: str = "f32", pow2: Optional[str] = None, margin: int = 0,
                    amax_floor: float = 0.0, quant_op: str = "div",
                    policy: str = "satfinite", delayed: bool = False) -> str:
    """Plain-text formulas of one recipe (the arguments of :func:`quantize`)."""
    spec = fp8_spec(fmt)
    g = parse_granularity(granularity)
    if g.kind == "tile":  # no tensor at hand: a recipe's tile is a standard block
        check_block(f"the rows of tile '{g}'", g.rows)
        check_block(f"the columns of tile '{g}'", g.cols)
    rule = _check_options(scale_format, pow2, margin, amax_floor, quant_op, policy)
    delayed = check_flag("delayed", delayed)
    fmax = f"{spec.max:g}"
    if g.kind == "tensor":
        where = "one scale for the whole tensor"
    elif g.kind == "row":
        where = "one scale per row of the last two dims (scales shape (*batch, M, 1))"
    elif g.kind == "col":
        where = "one scale per column of the last two dims (scales shape (*batch, 1, N))"
    else:
        where = (f"one scale per {g.rows}x{g.cols} tile of the last two dims "
                 "(ragged edge tiles are blocks of their own)")
    denom = fmax if margin == 0 else f"({fmax} * 2**-{margin})"
    src = "max over the amax history (NaN skipped)" if delayed else \
        "max |x| over the block's finite elements (NaN, +-Inf skipped)"
    lines = [f"FP8 {spec.name} (fmax {fmax}), {where}", f"  amax = {src}, float32"]
    if amax_floor:
        lines.append(f"  amax = max(amax, {amax_floor:g})")
    if rule is None:
        lines.append(f"  s    = RNE_f32(amax / {denom}), at least 2**-126")
    elif rule == "ceil":
        lines.append(f"  s    = 2**ceil(log2(RNE_f32(amax / {denom})))")
    else:
        extra = f" + {margin}" if margin else ""
        lines.append(f"  s    = 2**(floor(log2(amax)) - {spec.emax}{extra})   (OCP MX)")
    lines.append("  s is stored as " + ("float32" if scale_format == "f32"
                                        else "an E8M0 code, 127 + log2(s)"))
    op = "x / s" if quant_op == "div" else "x * RNE_f32(1 / s)"
    lines.append(f"  q    = encode_{spec.name}(RNE_f32({op}), RNE, policy {policy})")
    lines.append("  x   ~= decode(q) * s")
    if not amax_floor:
        lines.append("  amax == 0 -> s = 1.0" + (" (code 127)" if scale_format == "e8m0" else ""))
    return "\n".join(lines)
