"""Inductor's Triton GEMM templates in wgref's bit-exact Triton interpreter (:mod:`wgref.triton`): the kernel
taken out of the source ``torch._inductor.utils.run_and_get_code`` returned, laid out and launched as the
compiled call was, without torch."""

from __future__ import annotations

import numpy as np

from refmodel.errors import InputError

from .interpreter import NotModelled, interpret


#: Inductor's ``triton_helpers.maximum``/``minimum`` (torch/_inductor/runtime/triton_helpers.py) as the
#: interpreter runs them: ``where(a > b (a < b), or a float a that is NaN, a, b)``
_HELPERS = """
@triton.jit
def _wgref_maximum(a, b):
    mask = a > b
    if a.dtype.is_floating():
        mask |= a != a
    return tl.where(mask, a, b)


@triton.jit
def _wgref_minimum(a, b):
    mask = a < b
    if a.dtype.is_floating():
        mask |= a != a
    return tl.where(mask, a, b)


class triton_helpers:
    maximum = _wgref_maximum
    minimum = _wgref_minimum

"""


def template_kernel(code: str):
    """The Triton kernel of an Inductor template, from the source ``run_and_get_code`` returned, as a kernel of
    this (interpreting) process: the ``@triton.jit`` function's text, without Inductor's decorator and runtime
    imports (the template uses ``tl`` and ``triton_helpers.maximum``/``minimum`` only), written to a private
    module and imported."""
    import importlib.util
    import re
    import tempfile
    from pathlib import Path

    if not isinstance(code, str) or "@triton.jit" not in code:
        raise InputError("code must be Inductor's generated source, with its Triton template")
    i = code.index("@triton.jit")
    j = code.find("\'\'\'", i)
    src = code[i:j if j > 0 else None]
    name = re.search(r"def (\w+)\(", src)
    if not name:
        raise InputError("no kernel function after @triton.jit in the source")
    used = set(re.findall(r"triton_helpers\.(\w+)", src)) - {"maximum", "minimum"}
    if used:
        raise NotModelled(f"triton_helpers.{sorted(used)[0]} is not modelled by wgref's Triton interpreter "
                          "(maximum and minimum are)")
    d = Path(tempfile.mkdtemp(prefix="wgref_inductor_"))
    path = d / f"{name.group(1)}.py"
    path.write_text("import triton\nimport triton.language as tl\n\n" + _HELPERS + src)
    spec = importlib.util.spec_from_file_location(name.group(1), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name.group(1))


def _launch(code: str) -> tuple[list[str], tuple[int, int, int], dict[str, tuple]]:
    """The template launch in the generated wrapper: the kernel's positional arguments (wrapper names), its
    grid, and each wrapper argument's (size, stride) from ``assert_size_stride``."""
    import re

    m = re.search(r"triton_tem_\w+\.run\(([^)]*)\)", code)
    if not m:
        raise InputError("the source has no launch of its template (`<kernel>.run(...)`)")
    parts = [p.strip() for p in m.group(1).split(",") if "=" not in p]
    grid = tuple(int(p) for p in parts[-3:])
    strides = {n: (tuple(ast_tuple(a)), tuple(ast_tuple(b)))
               for n, a, b in re.findall(r"assert_size_stride\((\w+), (\([^)]*\)), (\([^)]*\))\)", code)}
    return parts[:-3], grid, strides


def ast_tuple(text: str) -> tuple:
    import ast

    v = ast.literal_eval(text)
    return v if isinstance(v, tuple) else (v,)


def _memory(x: np.ndarray, size: tuple, stride: tuple) -> np.ndarray:
    """The flat buffer a tensor of logical value ``x`` (shape ``size``) occupies with ``stride``."""
    x = np.asarray(x)
    if tuple(x.shape) != tuple(size):
        raise InputError(f"the template was compiled for an input of shape {tuple(size)}, got {x.shape}")
    n = 1 + sum((s - 1) * st for s, st in zip(size, stride)) if x.size else 0
    buf = np.zeros(n, x.dtype)
    idx = sum(np.arange(s).reshape((-1,) + (1,) * (len(size) - k - 1)) * st
              for k, (s, st) in enumerate(zip(size, stride)))
    buf[np.asarray(idx).reshape(-1)] = x.reshape(-1)
    return buf


def interpret_template(code: str, a: np.ndarray, b: np.ndarray, inputs: dict | None = None) -> np.ndarray:
    """Run an Inductor GEMM template (from its generated source) in the patched interpreter on ``a`` (M, K) and
    ``b`` (K, N) — (B, M, K) and (B, K, N) for bmm — and the epilogue's ``in_ptr`` arrays ``inputs`` (by the
    kernel's names, as :func:`refmodel.golden.inductor.template_output` takes them); returns the output.  The
    operands are laid out with the strides the call was compiled for.  Needs TRITON_INTERPRET=1 set before
    Triton was imported."""
    import ml_dtypes

    from refmodel.golden.inductor import parse_template

    t = parse_template(code)
    kernel = template_kernel(code)
    names, grid, strides = _launch(code)
    sig = [n for n, _ in t.signature]
    if len(names) != len(sig):
        raise InputError(f"the launch passes {len(names)} arguments, the kernel takes {len(sig)}")
    given = {"arg_A": np.asarray(a), "arg_B": np.asarray(b), **(inputs or {})}
    out_name = next(n for n in sig if n.startswith("out_ptr"))
    out_t = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp32": np.float32}[t.out]
    size, stride = strides.get(names[sig.index("arg_A")], (a.shape, None))
    out_shape = tuple(np.shape(a)[:-1]) + (np.shape(b)[-1],)
    out = np.zeros(int(np.prod(out_shape)), out_t)
    args = []
    for n, w in zip(sig, names):
        if n == out_name:
            args.append(out)
            continue
        if n not in given:
            raise InputError(f"the template reads {n}, which was not given")
        x = np.asarray(given[n])
        if w in strides:
            x = _memory(x.reshape(strides[w][0]) if x.size == int(np.prod(strides[w][0])) else x, *strides[w])
        args.append(np.ascontiguousarray(x).reshape(-1))
    with interpret():
        kernel[grid](*args, num_warps=t.num_warps, num_stages=t.num_stages)
    return out.reshape(out_shape)


def interpret_scaled_mm(code: str, a: np.ndarray, b_nk: np.ndarray, scale_a: np.ndarray, scale_b: np.ndarray):
    """Run Inductor's ``_scaled_mm`` template (from its generated source) in the patched interpreter: ``a``
    (M, K) and ``b_nk`` (N, K) e4m3, row-wise ``scale_a`` (M, 1) and ``scale_b`` (1, N) or tensor-wise (one
    element each) float32 scales; returns the bf16 output.  Needs TRITON_INTERPRET=1 set before Triton was
    imported."""
    from refmodel.golden.inductor import parse_template

    t = parse_template(code)
    return interpret_template(code, a, np.asarray(b_nk).T, dict(zip(t.inputs, (np.asarray(scale_a, np.float32),
                                                                         np.asarray(scale_b, np.float32)))))
