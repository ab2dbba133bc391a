"""Triton's spellings of the special functions (:data:`refmodel.numerics.sfu.spellings.TRITON_EXPRS`)
as elementwise kernels on torch float32 tensors, with the PTX Triton made of each.

``triton_kernel(expr)`` builds ``o = expr`` over ``x`` (and ``y``) in a source file of its own (Triton
reads a kernel's text from its file); ``run(expr, x, y=None)`` launches it and returns
``(out, ptx)``.  ``triton`` and ``torch`` are imported when first used.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import tempfile

_TEMPLATE = '''
import triton
import triton.language as tl


@triton.jit
def spelled(X, Y, O, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(X + offs, mask=m, other=1.0)
    y = tl.load(Y + offs, mask=m, other=1.0)
    o = {expr}
    tl.store(O + offs, o, mask=m)
'''


@functools.lru_cache(maxsize=None)
def triton_kernel(expr: str):
    src = _TEMPLATE.format(expr=expr)
    d = os.path.join(tempfile.gettempdir(), "wgref_triton_sfu")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"k_{hashlib.sha256(expr.encode()).hexdigest()[:16]}.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.spelled


def run(expr: str, x, y=None, block: int = 1024):
    """(out, compiled) of Triton's ``expr`` on torch float32 CUDA tensors ``x`` (and ``y``)."""
    import torch

    k = triton_kernel(expr)
    y = x if y is None else y
    o = torch.empty_like(x)
    n = x.numel()
    compiled = k[((n + block - 1) // block,)](x, y, o, n, BLOCK=block)
    return o, compiled
