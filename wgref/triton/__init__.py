"""wgref's bit-exact Triton interpreter: :mod:`.interpreter` (``interpret()``, Triton's CPU interpreter patched
with the H200's numerics), :mod:`.inductor` (Inductor's GEMM templates run from their generated source) and
:mod:`.replay` (the recorded kernels against the H200's bits; ``python -m wgref.triton replay``).  Importing it
does not import Triton."""

from .inductor import interpret_scaled_mm, interpret_template, template_kernel
from .interpreter import (ELEMENTWISE_PTX, SPELLINGS, HostArray, NotModelled, elementwise_ptx, interpret,
                          run_spelling)
from .replay import replay_elementwise, replay_fixtures, replay_inductor, replay_spellings

__all__ = ["interpret", "HostArray", "NotModelled", "ELEMENTWISE_PTX", "SPELLINGS", "elementwise_ptx",
           "run_spelling", "template_kernel", "interpret_template", "interpret_scaled_mm", "replay_fixtures",
           "replay_inductor", "replay_spellings", "replay_elementwise"]
