"""The special-function-unit forms of sm_90a, as data.

One :class:`SfuForm` per PTX instruction spelling that ``ptxas -arch=sm_90a`` accepts (the
recorder compiles each, and the near misses in :data:`NEAR_MISSES` must fail).  Each form
carries its operand type, how many operands it takes, and the error bound the PTX ISA
documents for it (``bound``: a sentence, as the manual states it) — what the H200 does
instead is what the model and the fixtures say.

Operands: ``f32`` and ``f64`` are plain floats; ``f16``/``bf16`` are one 16-bit value;
``f16x2``/``bf16x2`` are two values packed in a 32-bit word, low half first, each half
computed independently.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import FormError

#: element type -> (bits of one operand word, numpy name of the element, lanes per word)
TYPES = {
    "f32": (32, "float32", 1),
    "f64": (64, "float64", 1),
    "f16": (16, "float16", 1),
    "bf16": (16, "bfloat16", 1),
    "f16x2": (32, "float16", 2),
    "bf16x2": (32, "bfloat16", 2),
}


@dataclass(frozen=True)
class SfuForm:
    """One sm_90a special-function instruction form.

    ``op``: 'ex2', 'lg2', 'rcp', 'rsqrt', 'sqrt', 'sin', 'cos', 'tanh' or 'div';
    ``mode``: 'approx' or 'full'; ``ftz``: the form flushes subnormal inputs and outputs;
    ``type``: the PTX operand type; ``bound``: the PTX ISA's stated accuracy.
    """

    op: str
    mode: str
    ftz: bool
    type: str
    bound: str

    @property
    def instr(self) -> str:
        return ".".join([self.op, self.mode] + ["ftz"] * self.ftz + [self.type])

    @property
    def n_operands(self) -> int:
        return 2 if self.op == "div" else 1

    @property
    def word_bits(self) -> int:
        return TYPES[self.type][0]

    @property
    def element(self) -> str:
        return TYPES[self.type][1]

    @property
    def lanes(self) -> int:
        return TYPES[self.type][2]

    @property
    def scalar(self) -> "SfuForm":
        """The one-lane form an ``x2`` form applies to each half."""
        return SfuForm(self.op, self.mode, self.ftz, self.type[:-2], self.bound) if self.lanes == 2 else self

    @property
    def exhaustive(self) -> bool:
        """Unary forms of at most 32-bit words: every input can be swept."""
        return self.n_operands == 1 and self.word_bits <= 32


_F32 = [
    # op, modes/ftz, bound
    ("ex2", "approx", (False, True), "max 2 ulp from the correctly rounded result across the full range"),
    ("lg2", "approx", (False, True), "max absolute error 2^-22 for x in 0.5..2, max relative error 2^-22 elsewhere"),
    ("rcp", "approx", (False, True), "max 1 ulp"),
    ("rsqrt", "approx", (False, True), "max relative error 2^-22.9"),
    ("sqrt", "approx", (False, True), "max relative error 2^-23"),
    ("sin", "approx", (False, True), "max absolute error 2^-20.5 in [-2pi, 2pi], 2^-14.7 in [-100pi, 100pi]"),
    ("cos", "approx", (False, True), "max absolute error 2^-20.5 in [-2pi, 2pi], 2^-14.7 in [-100pi, 100pi]"),
    ("tanh", "approx", (False,), "max relative error 2^-11; subnormals supported"),
    ("div", "approx", (False, True), "max 2 ulp for |b| in [2^-126, 2^126]; beyond 2^126: a signed zero (NaN if a is Inf)"),
    ("div", "full", (False, True), "max 2 ulp"),
]


def _generate() -> tuple[SfuForm, ...]:
    forms = [SfuForm(op, mode, ftz, "f32", bound) for op, mode, ftzs, bound in _F32 for ftz in ftzs]
    forms += [
        SfuForm("rcp", "approx", True, "f64", "a gross approximation from the top 20 fraction bits; low word 0"),
        SfuForm("rsqrt", "approx", False, "f64", "approximate, emulated in software"),
        SfuForm("rsqrt", "approx", True, "f64", "a gross approximation from the top 20 fraction bits; low word 0"),
    ]
    for t in ("f16", "f16x2"):
        forms.append(SfuForm("ex2", "approx", False, t, "max relative error 2^-9.9"))
    for t in ("bf16", "bf16x2"):
        forms.append(SfuForm("ex2", "approx", True, t, "max relative error 2^-7"))
    for t in ("f16", "f16x2"):
        forms.append(SfuForm("tanh", "approx", False, t, "max absolute error 2^-10.987"))
    for t in ("bf16", "bf16x2"):
        forms.append(SfuForm("tanh", "approx", False, t, "max absolute error 2^-8"))
    return tuple(forms)


SFU_FORMS: tuple[SfuForm, ...] = _generate()
_BY_INSTR = {f.instr: f for f in SFU_FORMS}

#: spellings that look plausible and that sm_90a must refuse (checked by the recorder's ptxas run)
NEAR_MISSES = (
    "rcp.approx.f64", "ex2.approx.bf16", "ex2.approx.ftz.f16", "tanh.approx.ftz.f32", "lg2.approx.f16",
    "sin.approx.f16", "div.full.f64", "sqrt.approx.f64", "rcp.approx.f16", "tanh.approx.f64",
)


def parse_sfu(instr: str) -> SfuForm:
    """The :class:`SfuForm` of a PTX spelling such as ``'ex2.approx.ftz.f32'``; one
    :class:`FormError` sentence for anything sm_90a does not accept."""
    if not isinstance(instr, str):
        raise FormError(f"an SFU instruction is a string such as 'ex2.approx.f32', got {type(instr).__name__}")
    s = instr.strip()
    if s in _BY_INSTR:
        return _BY_INSTR[s]
    parts = s.split(".")
    ops = sorted({f.op for f in SFU_FORMS})
    if not parts or parts[0] not in ops:
        raise FormError(f"unknown SFU instruction {s!r}: the opcode must be one of {', '.join(ops)}")
    same = sorted(f.instr for f in SFU_FORMS if f.op == parts[0])
    raise FormError(f"{s!r} is not an sm_90a form of {parts[0]}; the forms are {', '.join(same)}")
