"""Input families: the random and adversarial inputs every recorder, fuzz engine and test draws.

One catalogue, as data.  A :class:`Family` is a kind of input and what it stresses (NaN/Inf,
subnormals, cancellation, wide exponent spread, ...); an :class:`Engine` is one way of drawing
inputs — whole wgmma tiles from a numpy Generator, the GPU engine's counter-based hash, whole
library-call matrices, FP8 GEMM operands with block scales, single operand tiles, float32 cvt
inputs — with the families it draws, in its draw order, under the name its journals and fixtures
use.  The generators live in one module per engine beside this one::

    tile.py      the wgmma recorders and the CPU-model fuzz engine     (numpy Generator)
    seeded       refmodel.verify.seeded: the GPU engine's numpy twin  (counter-based hash; the CUDA
                 generator in gpu.kernels.generator is bit-equal to it)
    matrix.py    library calls (wgref fuzz lib:...)                    (numpy Generator)
    gemm.py      a user's FP8 GEMM kernel with block scales            (numpy Generator)
    operand.py   one operand tile of any type (sparse wgmma)           (numpy Generator)
    f32.py       float32 inputs of the cvt forms                       (numpy Generator)

``tests/test_families.py`` checks that every engine's generator draws exactly the families the
catalogue lists for it, and ``docs/verifier.md`` prints :func:`catalogue_table`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import InputError


@dataclass(frozen=True)
class Family:
    """One kind of input: ``name``, what it ``stresses``, the element ``kinds`` it applies to
    (``float``, ``int``, ``f32``: float32 cvt inputs) and whether results are ``exact`` (small
    integers: every partial sum representable, so an exact product checks the layout alone)."""

    name: str
    stresses: str
    kinds: tuple[str, ...] = ("float",)
    exact: bool = False


@dataclass(frozen=True)
class Engine:
    """One way of drawing inputs: ``name``, how it draws (``draws_what``), who uses it (``users``),
    and its families in draw order as ``(spelling, family name)`` pairs (``spelling`` is the name
    that engine's journals, fixtures and options use)."""

    name: str
    draws_what: str
    users: str
    families: tuple[tuple[str, str], ...]

    def names(self) -> tuple[str, ...]:
        return tuple(s for s, _ in self.families)

    def family(self, spelling: str) -> Family:
        for s, f in self.families:
            if s == spelling:
                return FAMILY[f]
        raise InputError(f"the {self.name} engine has no input family {spelling!r}; "
                         f"known are {', '.join(self.names())}")


CATALOGUE: tuple[Family, ...] = (
    Family("random_bits", "every bit pattern of the type: NaNs with all payloads, ±Inf, subnormals, "
           "the largest values", ("float", "int")),
    Family("finite_bits", "every finite bit pattern (the top exponent bit cleared where the pattern was "
           "NaN/Inf): the full exponent range without specials"),
    Family("narrow_band", "ordinary values near 1 (a few binades): the common case, carries and ties "
           "in the final rounding", ("float", "int")),
    Family("wide_spread", "exponents over (nearly) the whole range, subnormals included: alignment to the "
           "largest term drops the small ones", ("float",)),
    Family("special", "mostly ordinary values with a few ±0, ±Inf (e4m3: ±max), NaN, max and min "
           "subnormal elements: how specials propagate", ("float", "int")),
    Family("cancel", "pairs of products that cancel exactly (A[:, 2i+1] = A[:, 2i], B[2i+1] = -B[2i]; "
           "the GPU engine puts one in 16 off by one ulp): catastrophic cancellation", ("float",)),
    Family("zero_rows", "signed zeros: whole rows of A / columns of B, or 31 of 32 elements: the sign of "
           "an exact zero sum", ("float", "int")),
    Family("subnormal_c", "subnormal operands and accumulators: flush or keep, and products of tiny and "
           "large values", ("float",)),
    Family("large_c", "an accumulator C far larger than the products: the products fall off the 13/25-bit "
           "alignment window"),
    Family("overflow", "operands in the top two binades and C at the largest exponent: overflow to Inf, "
           "saturation (.satfinite)"),
    Family("small_int", "small integers that keep every partial sum exact: checked against exact matrix "
           "products, so a failure is a layout bug, not arithmetic", ("float",), exact=True),
    Family("int_random", "uniform s8/u8 operands with moderate C", ("int",), exact=True),
    Family("int_extremes", "s8/u8 extremes (-128, -127, -1, 0, 1, 126, 127; 0, 1, 127, 128, 254, 255)",
           ("int",), exact=True),
    Family("int_c_limits", "extreme operands with C next to the int32 limits: wrap-around or saturation "
           "(.satfinite)", ("int",)),
    Family("int_random_c", "uniform operands with a uniform 32-bit C", ("int",)),
    Family("sparse_a", "an FP8 A that is 90% zeros, with block scales"),
    Family("uniform_scales", "FP8 operands with every block scale 1: the unscaled promotion path"),
    Family("f32_ties", "float32 values exactly half-way between two codes of the target (and one f32 ulp "
           "either side): round-to-nearest-even", ("f32",)),
    Family("f32_boundary", "float32 values around the target's max, overflow threshold, min normal and min "
           "subnormal (64 ulps either side, both signs)", ("f32",)),
    Family("f32_specials", "±0, ±Inf, NaNs with random payloads, float32 subnormals", ("f32",)),
    Family("f32_range", "random float32 spread over an exponent range", ("f32",)),
    Family("f32_adversarial", "a shuffled mix of uniform patterns, ties, boundaries, specials and ranges of "
           "every target format", ("f32",)),
)
FAMILY: dict[str, Family] = {f.name: f for f in CATALOGUE}

ENGINES: tuple[Engine, ...] = (
    Engine("tile", "whole 64 x N wgmma tiles (A, B, C) from a numpy Generator, every family in every job",
           "gpu.record.wgmma, gpu.record.forms, wgref fuzz <form> (CPU-model engine)",
           (("small_int", "small_int"), ("random_bits", "random_bits"), ("finite_bits", "finite_bits"),
            ("narrow_band", "narrow_band"), ("wide_spread", "wide_spread"), ("large_c", "large_c"),
            ("subnormal_c", "subnormal_c"), ("zero_rows", "zero_rows"), ("overflow", "overflow"),
            ("int_random", "int_random"), ("int_extremes", "int_extremes"), ("int_c_limits", "int_c_limits"),
            ("int_random_c", "int_random_c"))),
    Engine("seeded", "every element from a counter-based hash of (seed, batch, operand, tile, row, col), one "
           "family per tile; the same formulas run as CUDA on the GPU",
           "wgref fuzz --engine gpu (gpu.fuzz.gpu_engine), fixtures/device_model",
           (("bits", "random_bits"), ("narrow", "narrow_band"), ("wide", "wide_spread"), ("special", "special"),
            ("cancel", "cancel"), ("zero", "zero_rows"), ("subnormal", "subnormal_c"))),
    Engine("matrix", "whole (M, K) and (K, N) operands of one library call from a numpy Generator",
           "wgref fuzz lib:triton|lib:cublas|lib:scaled-mm (gpu.fuzz.library)",
           (("narrow", "narrow_band"), ("wide", "wide_spread"), ("special", "special"), ("cancel", "cancel"),
            ("zero", "zero_rows"), ("subnormal", "subnormal_c"))),
    Engine("gemm", "FP8 A (M, K) and B (N, K) codes with 1 x 128 / 128 x 128 block scales",
           "gpu.fuzz.userkernel (fuzzing your FP8 GEMM kernel)",
           (("normal", "narrow_band"), ("wide", "wide_spread"), ("specials", "special"), ("sparse", "sparse_a"),
            ("uniform_scales", "uniform_scales"))),
    Engine("operand", "one operand tile of any element type, element by element",
           "gpu.record.sparse, wgref fuzz sparse (sparse wgmma)",
           (("ints", "small_int"), ("wide", "wide_spread"), ("narrow", "narrow_band"), ("bits", "random_bits"))),
    Engine("f32", "float32 bit patterns fed to the f32 -> FP8/f16/bf16 cvt forms",
           "gpu.record.cvt, wgref fuzz cvt, the cvt tests",
           (("ties", "f32_ties"), ("boundary", "f32_boundary"), ("specials", "f32_specials"), ("range", "f32_range"),
            ("adversarial", "f32_adversarial"))),
)
ENGINE: dict[str, Engine] = {e.name: e for e in ENGINES}


def engine(name: str) -> Engine:
    """The :class:`Engine` called ``name``."""
    try:
        return ENGINE[name]
    except KeyError:
        raise InputError(f"no input engine {name!r}; known are {', '.join(ENGINE)}") from None


def names(engine_name: str) -> tuple[str, ...]:
    """The families an engine draws, in its draw order, as that engine spells them."""
    return engine(engine_name).names()


def catalogue_table() -> str:
    """The catalogue as a Markdown table: family, what it stresses, and each engine's name for it."""
    cols = [e.name for e in ENGINES]
    head = "| family | stresses | kinds | " + " | ".join(cols) + " |"
    rule = "|" + "---|" * (3 + len(cols))
    rows = []
    for f in CATALOGUE:
        cells = []
        for e in ENGINES:
            sp = [s for s, n in e.families if n == f.name]
            cells.append(", ".join(f"`{s}`" for s in sp) or "")
        exact = " (exact)" if f.exact else ""
        rows.append(f"| `{f.name}`{exact} | {f.stresses} | {', '.join(f.kinds)} | " + " | ".join(cells) + " |")
    return "\n".join([head, rule, *rows])
