"""torchao's float8 layers (``Float8Linear`` training recipes, ``Float8DynamicActivationFloat8WeightConfig``
inference) — recorded on the H200 (fixtures/layers, with every ``torch._scaled_mm`` call each layer made)
but not modelled yet: both functions refuse in one sentence rather than return unverified bits.

What is established so far (docs/layers.md): torchao 0.18.0 builds each layer from ``torch._scaled_mm``
calls whose every mode :func:`refmodel.golden.scaled_mm` reproduces; the casts (amax, scale, power-of-2
rounding, saturation) and the backward GEMMs' K tails (K not a multiple of 128) are what is missing.
"""

from __future__ import annotations

from ..errors import UnmodelledError

RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")


def float8_linear(x, w, grad_y=None, *, recipe: str):
    """torchao ``Float8Linear`` (recipe ``tensorwise`` / ``rowwise`` / ``rowwise_with_gw_hp``): not modelled yet."""
    raise UnmodelledError(f"torchao's Float8Linear ({recipe!r}) is recorded on the H200 (fixtures/layers) but not "
                          f"modelled yet: its casts and backward GEMMs are not established; model each "
                          f"torch._scaled_mm call with refmodel.golden.scaled_mm instead")


def float8_inference(x, w, bias=None, *, granularity: str):
    """torchao ``Float8DynamicActivationFloat8WeightConfig`` (per_tensor / per_row): not modelled yet."""
    raise UnmodelledError(f"torchao's float8 inference path ({granularity!r}) is recorded on the H200 "
                          f"(fixtures/layers) but not modelled yet")
