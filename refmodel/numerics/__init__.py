"""Numerics layer: FP8 formats, cvt, scaling recipes, the wgmma accumulator, GEMM chains.

Independent of the layouts layer (a test enforces it).
"""

from . import fdpa_fast as _fdpa_fast  # noqa: E402,F401 - registers the float kernel with accumulate
