"""Golden model of torch.compile's (Inductor's) Triton GEMM templates on sm_90, read from the generated source.

``torch.compile(mode="max-autotune")`` replaces ``torch._scaled_mm`` by a Triton template whose configuration
the autotuner picks by timing (two processes can pick differently, and so compute different bits).  The
configuration and the epilogue are in the generated source (``torch._inductor.utils.run_and_get_code``):
:func:`parse_template` reads them; :func:`scaled_mm` computes the template's output bit for bit:

* the main loop: ``acc += tl.dot(a, b)`` (``USE_FAST_ACCUM=False``) or ``acc = tl.dot(a, b, acc)``, lowered as
  Triton 3.6 does for the template's BLOCK_M/N/K and num_warps (:mod:`refmodel.golden.triton_lowering`: small
  tiles run FP8 as f16 ``mma.sync``);
* the epilogue exactly as generated, in float32 with the GPU's rounding (row-wise, torch 2.11:
  ``tmp2 = scale_a[m] * scale_b[n]``, ``acc * tmp2``), then the store's ``cvt.rn`` to the output type.

Only the template shapes that were recorded are accepted (fixtures/inductor); another epilogue is refused in
one sentence naming the line that is not modelled.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Optional

import ml_dtypes
import numpy as np

from ..errors import InputError

_OUT = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp32": np.float32}


@dataclass(frozen=True)
class Template:
    """What :func:`parse_template` reads from one generated Inductor GEMM template."""

    kernel: str
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    use_fast_accum: bool
    pattern: str              # "add" (acc += tl.dot(a, b)) or "dot_acc" (acc = tl.dot(a, b, acc))
    epilogue: tuple[str, ...]  # the tmp lines after "# inductor generates a suffix"
    out: str                  # the output pointer's type: bf16, fp16, fp32


def parse_template(code: str) -> Template:
    """The configuration, main-loop pattern and epilogue of the first Triton GEMM template in ``code`` (the
    source ``run_and_get_code`` returns)."""
    if not isinstance(code, str) or "@triton.jit" not in code:
        raise InputError("code must be Inductor's generated source (torch._inductor.utils.run_and_get_code), "
                         "with its Triton template")
    m = re.search(r"'config_args': (\{[^}]*\})", code)
    ns, nw = re.search(r"num_stages=(\d+)", code), re.search(r"num_warps=(\d+)", code)
    kname = re.search(r"'kernel_name': '([\w]+)'", code)
    if not (m and ns and nw and kname):
        raise InputError("no Triton GEMM template in this source (no config_args / num_stages / num_warps): "
                         "the call may run an extern kernel (cuBLAS), which refmodel.golden.scaled_mm models")
    cfg = ast.literal_eval(m.group(1))
    dots = [ln.strip() for ln in code.splitlines() if "tl.dot(" in ln]
    if len(dots) != 1:
        raise InputError(f"expected one tl.dot in the template, found {len(dots)}")
    if dots[0].startswith("acc += tl.dot(a, b"):
        pattern = "add"
    elif re.match(r"acc = tl\.dot\(a, b, acc", dots[0]):
        pattern = "dot_acc"
    else:
        raise InputError(f"the template's dot line {dots[0]!r} is not modelled")
    body = code.split("# inductor generates a suffix", 1)
    if len(body) != 2:
        raise InputError("the template has no epilogue marker ('# inductor generates a suffix')")
    epi = []
    for ln in body[1].splitlines():
        s = ln.strip()
        if s.startswith("tl.store("):
            epi.append(s)
            break
        if s.startswith("tmp") or s.startswith("xindex"):
            epi.append(s)
    sig = re.search(r"'out_ptr0': '\*(\w+)'", code)
    return Template(kname.group(1), int(cfg["BLOCK_M"]), int(cfg["BLOCK_N"]), int(cfg["BLOCK_K"]), int(nw.group(1)),
                    int(ns.group(1)), bool(cfg.get("USE_FAST_ACCUM", False)), pattern, tuple(epi),
                    sig.group(1) if sig else "?")


#: the epilogues recorded on the H200 (the lines between the marker and the store, loads left out)
ROWWISE_EPILOGUE = ("tmp2 = tmp0 * tmp1", "tmp3 = acc * tmp2")


def _f32(x) -> np.ndarray:
    return np.asarray(x, np.float32)


def scaled_mm(a, b, scale_a, scale_b, *, code: Optional[str] = None, template: Optional[Template] = None) -> np.ndarray:
    """The output of Inductor's ``_scaled_mm`` template on ``a`` (M, K) and ``b`` (K, N) e4m3 (b as the matrix
    torch multiplies: ``b_nk.T``), ``scale_a`` (M, 1) and ``scale_b`` (1, N) float32 (row-wise), for the
    template in ``code`` (Inductor's generated source) or an already parsed ``template``."""
    from .triton import triton_matmul
    from ..numerics.promotion import canonical_nan_f32

    if (code is None) == (template is None):
        raise InputError("give code= (Inductor's generated source) or template= (parse_template's result), one of them")
    t = template if template is not None else parse_template(code)
    lines = tuple(s for s in t.epilogue if not ("tl.load" in s or s.startswith("xindex") or s.startswith("tl.store")))
    if lines != ROWWISE_EPILOGUE:
        raise InputError(f"the epilogue {' ; '.join(lines)!r} was not recorded: only the row-wise one "
                         f"({' ; '.join(ROWWISE_EPILOGUE)}) is modelled")
    if t.out not in _OUT:
        raise InputError(f"output type {t.out} is not modelled (bf16, fp16, fp32 are)")
    sa, sb = _f32(scale_a), _f32(scale_b)
    M, N = np.shape(a)[0], np.shape(b)[1]
    if sa.shape != (M, 1) or sb.shape != (1, N):
        raise InputError(f"row-wise scales are scale_a (M, 1) and scale_b (1, N), got {sa.shape} and {sb.shape}")
    Mp = -(-M // 64) * 64
    A = np.zeros((Mp, a.shape[1]), a.dtype)
    A[:M] = a
    acc = triton_matmul(A, b, block_k=t.block_k, block_m=t.block_m, block_n=t.block_n, num_warps=t.num_warps,
                        num_stages=t.num_stages, pattern=t.pattern)[:M]
    with np.errstate(all="ignore"):
        tmp2 = canonical_nan_f32(sa * sb)              # tmp0 * tmp1: mul.f32
        tmp3 = canonical_nan_f32(acc * tmp2)           # acc * tmp2: mul.f32
    from ..numerics.gemm import _convert

    return _convert(tmp3, np.dtype(_OUT[t.out]))
