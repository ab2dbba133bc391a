"""Golden model of torch.compile's (Inductor's) Triton GEMM templates on sm_90, read from the generated source.

``torch.compile(mode="max-autotune")`` replaces ``mm``, ``addmm``, ``bmm`` and ``torch._scaled_mm`` by Triton
templates whose configuration the autotuner picks by timing (two processes can pick differently).  The
configuration and the epilogue are in the generated source (``torch._inductor.utils.run_and_get_code``):
:func:`parse_template` reads them; :func:`template_output` (and :func:`mm`, :func:`addmm`, :func:`bmm`,
:func:`scaled_mm`) computes the template's output bit for bit:

* the main loop: ``acc += tl.dot(a, b)`` or ``acc = tl.dot(a, b, acc)``, lowered as Triton 3.6 does for the
  template's BLOCK_M/N/K and num_warps (:mod:`refmodel.golden.triton_lowering`: small FP8 tiles run as f16
  ``mma.sync``); float32 inputs by ``ALLOW_TF32`` (tf32 or FMA);
* the epilogue exactly as generated, line by line (:data:`EPILOGUE_LINES`: scalar, per-row and per-column
  loads, ``*`` and ``+`` as ``mul.f32``/``add.f32`` with the GPU's NaN, Inductor's ``maximum``/``minimum``);
* the store's ``cvt.rn`` to the output pointer's type.

Only what was recorded is accepted (fixtures/inductor); any other line, a K that is not a multiple of BLOCK_K,
a multiply feeding an add (Triton would contract it) or a persistent TMA template is refused in one sentence.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any, Optional

import ml_dtypes
import numpy as np

from ..errors import InputError

_TYPES = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp32": np.float32, "fp8e4nv": ml_dtypes.float8_e4m3fn,
          "fp8e5": ml_dtypes.float8_e5m2}
_OUT = ("bf16", "fp16", "fp32")


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
    epilogue: tuple[str, ...]  # the lines after "# inductor generates a suffix", through the store
    out: str                  # the stored pointer's type: bf16, fp16, fp32
    allow_tf32: bool = False
    even_k: bool = True
    signature: tuple[tuple[str, str], ...] = ()   # (argument, Triton type) in the kernel's order
    batched: bool = False     # a bmm template (idx_q: the batch)

    @property
    def inputs(self) -> tuple[str, ...]:
        """The kernel's ``in_ptr`` arguments (epilogue inputs: bias, scales) in signature order."""
        return tuple(n for n, _ in self.signature if n.startswith("in_ptr"))


def parse_template(code: str) -> Template:
    """The configuration, main-loop pattern and epilogue of the Triton GEMM template in ``code`` (the source
    ``run_and_get_code`` returns)."""
    if not isinstance(code, str) or "@triton.jit" not in code:
        raise InputError("code must be Inductor's generated source (torch._inductor.utils.run_and_get_code), "
                         "with its Triton template")
    if "tensor_descriptor" in code or "make_tensor_descriptor" in code or "TMA_SIZE" in code:
        raise InputError("a persistent TMA template was not recorded (torch 2.11 picked the plain template on the "
                         "recorded calls, even with enable_persistent_tma_matmul): not modelled")
    m = re.search(r"'config_args': (\{[^}]*\})", code)
    ns, nw = re.search(r"num_stages=(\d+)", code), re.search(r"num_warps=(\d+)", code)
    kname = re.search(r"'kernel_name': '([\w]+)'", code)
    if not (m and ns and nw and kname):
        raise InputError("no Triton GEMM template in this source (no config_args / num_stages / num_warps): "
                         "the call may run an extern kernel (cuBLAS), which refmodel.golden.scaled_mm models")
    if code.count("@triton.jit") != 1:
        raise InputError(f"expected one Triton kernel (the template) in the source, found {code.count('@triton.jit')}: "
                         "a call with separate pointwise kernels is not modelled")
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
        if not s:
            continue
        epi.append(s)
        if s.startswith("tl.store("):
            break
    sig_m = re.search(r"'signature': (\{[^}]*\})", code)
    sig = tuple(ast.literal_eval(sig_m.group(1)).items()) if sig_m else ()
    store = re.match(r"tl\.store\((out_ptr\d+)", epi[-1]) if epi else None
    out = dict(sig).get(store.group(1), "?").lstrip("*") if store else "?"
    return Template(kname.group(1), int(cfg["BLOCK_M"]), int(cfg["BLOCK_N"]), int(cfg["BLOCK_K"]), int(nw.group(1)),
                    int(ns.group(1)), bool(cfg.get("USE_FAST_ACCUM", False)), pattern, tuple(epi), out,
                    bool(cfg.get("ALLOW_TF32", False)), bool(cfg.get("EVEN_K", True)), sig, "idx_q" in code)


# ----------------------------------------------------------------------------- the epilogue

_NAME = r"(acc|tmp\d+)"
#: every epilogue line shape that was recorded, with what it computes (fixtures/inductor)
EPILOGUE_LINES = {
    "index": r"xindex = .*",
    "scalar": r"(tmp\d+) = tl\.load\((in_ptr\d+) \+ \(0\)\)",
    "vector": r"(tmp\d+) = tl\.load\((in_ptr\d+) \+ \(tl\.broadcast_to\((idx_m|idx_n), \[BLOCK_M, BLOCK_N\]\)\), mask, "
              r"eviction_policy='evict_last'\)(\.to\(tl\.float32\))?",
    "broadcast": r"(tmp\d+) = tl\.broadcast_to\((tmp\d+), \[BLOCK_M, BLOCK_N\]\)",
    "binary": rf"(tmp\d+) = {_NAME} ([*+]) {_NAME}",
    "zero": r"(tmp\d+) = tl\.full\(\[1\], 0, tl\.int32\)",
    "extremum": rf"(tmp\d+) = triton_helpers\.(maximum|minimum)\({_NAME}, {_NAME}\)",
    "store": rf"tl\.store\((out_ptr\d+) \+ \(tl\.broadcast_to\(xindex, \[BLOCK_M, BLOCK_N\]\)\), {_NAME}, mask\)",
}


def _f32(x) -> np.ndarray:
    return np.asarray(x, np.float32)


def epilogue(t: Template, acc: np.ndarray, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The template's epilogue lines on the float32 accumulator ``acc`` (M, N), with the kernel's ``in_ptr``
    arrays ``inputs`` (flat, typed), as the GPU computes them; returns the stored float32 value (before the
    store's conversion).  A line outside :data:`EPILOGUE_LINES` is refused, naming it."""
    from ..numerics.promotion import add_f32, mul_f32

    env: dict[str, Any] = {"acc": acc}
    products: set[str] = set()
    M, N = acc.shape
    for line in t.epilogue:
        kind, m = next(((k, re.fullmatch(p, line)) for k, p in EPILOGUE_LINES.items() if re.fullmatch(p, line)),
                       (None, None))
        if kind is None:
            raise InputError(f"the epilogue line {line!r} was not recorded: not modelled")
        if kind == "index":
            continue
        if kind == "scalar":
            env[m.group(1)] = _load(inputs, m.group(2), line).reshape(-1)[:1].reshape(1, 1).astype(np.float32)
        elif kind == "vector":
            v = _load(inputs, m.group(2), line).reshape(-1)
            n = M if m.group(3) == "idx_m" else N
            if v.size < n or (v.dtype != np.float32 and not m.group(4)):
                raise InputError(f"{m.group(2)} must hold float32 (or be cast by .to(tl.float32)) with at least {n} "
                                 f"elements for line {line!r}, got {v.dtype} of {v.size}")
            v = v[:n].astype(np.float32)
            env[m.group(1)] = v.reshape(M, 1) if m.group(3) == "idx_m" else v.reshape(1, N)
        elif kind == "broadcast":
            env[m.group(1)] = env[m.group(2)]
        elif kind == "zero":
            env[m.group(1)] = 0              # an int32 zero
        elif kind == "binary":
            x, op, y = env[m.group(2)], m.group(3), env[m.group(4)]
            if op == "+" and (m.group(2) in products or m.group(4) in products):
                raise InputError(f"{line!r} adds a product, which Triton contracts to fma.rn.f32: not recorded "
                                 "in a template epilogue")
            r = mul_f32(x, y) if op == "*" else add_f32(x, y)
            env[m.group(1)] = np.broadcast_to(r, (M, N)).astype(np.float32)
            if op == "*":
                products.add(m.group(1))
        elif kind == "extremum":
            a, b = env[m.group(3)], env[m.group(4)]
            # Inductor's triton_helpers: where(a > b (a < b), or a is a float NaN, a, b), in float32
            fa, fb = np.broadcast_to(_f32(a), (M, N)), np.broadcast_to(_f32(b), (M, N))
            with np.errstate(invalid="ignore"):
                mask = fa > fb if m.group(2) == "maximum" else fa < fb
            if not isinstance(a, int):
                mask = mask | np.isnan(fa)
            env[m.group(1)] = np.where(mask, fa, fb).astype(np.float32)
        else:   # store
            return np.broadcast_to(_f32(env[m.group(2)]), (M, N))
    raise InputError("the template's epilogue has no tl.store of the output")


def _load(inputs: dict[str, np.ndarray], name: str, line: str) -> np.ndarray:
    if name not in inputs:
        raise InputError(f"the epilogue line {line!r} loads {name}, which was not given (the template's inputs are "
                         f"{sorted(inputs) or 'none'})")
    return np.asarray(inputs[name])


# ----------------------------------------------------------------------------- the template


def _operand(x, name: str, t: Template, arg: str) -> np.ndarray:
    x = np.asarray(x)
    want = dict(t.signature).get(arg, "").lstrip("*")
    if want in _TYPES and x.dtype != np.dtype(_TYPES[want]):
        raise InputError(f"{name} must be {np.dtype(_TYPES[want]).name} (the template's {arg} is *{want}), "
                         f"got {x.dtype}")
    return x


def template_output(a, b, inputs: Optional[dict[str, np.ndarray]] = None, *, code: Optional[str] = None,
                    template: Optional[Template] = None) -> np.ndarray:
    """The output of the Inductor GEMM template in ``code`` (or an already parsed ``template``) for ``a``
    (M, K) and ``b`` (K, N) — (B, M, K) and (B, K, N) for bmm — and the kernel's ``in_ptr`` arrays ``inputs``
    (by name: ``{'in_ptr0': bias}``, ``{'in_ptr2': scale_a, 'in_ptr3': scale_b}``), bit for bit."""
    from ..numerics.gemm import _convert
    from .triton import triton_matmul

    t = _template(code, template)
    if t.out not in _OUT:
        raise InputError(f"output type {t.out} is not modelled ({', '.join(_OUT)} are)")
    if not t.even_k:
        raise InputError("a template with EVEN_K=False (K not a multiple of BLOCK_K: masked last slice) was not "
                         "recorded")
    a, b = _operand(a, "a", t, "arg_A"), _operand(b, "b", t, "arg_B")
    if t.batched != (a.ndim == 3):
        raise InputError(f"this template takes a of {'(B, M, K)' if t.batched else '(M, K)'}, got shape {a.shape}")
    if a.ndim != b.ndim or a.shape[-1] != b.shape[-2] or (a.ndim == 3 and a.shape[0] != b.shape[0]):
        raise InputError(f"a and b do not multiply: {a.shape} and {b.shape}")
    M, K = a.shape[-2:]
    N = b.shape[-1]
    if K % t.block_k:
        raise InputError(f"K={K} must be a multiple of the template's BLOCK_K={t.block_k} (EVEN_K)")
    kw = {"input_precision": "tf32" if t.allow_tf32 else "ieee"} if a.dtype == np.float32 else {}
    inputs = dict(inputs or {})
    outs = []
    for A, B in (zip(a, b) if a.ndim == 3 else [(a, b)]):
        Mp, Np = -(-M // 64) * 64, -(-N // 8) * 8
        Ap = np.zeros((Mp, K), A.dtype)
        Ap[:M] = A
        Bp = np.zeros((K, Np), B.dtype)
        Bp[:, :N] = B
        acc = triton_matmul(Ap, Bp, block_k=t.block_k, block_m=t.block_m, block_n=t.block_n, num_warps=t.num_warps,
                            num_stages=t.num_stages, pattern=t.pattern, **kw)[:M, :N]
        outs.append(_convert(np.ascontiguousarray(epilogue(t, acc, inputs)), np.dtype(_TYPES[t.out])))
    return np.stack(outs) if a.ndim == 3 else outs[0]


def _template(code: Optional[str], template: Optional[Template], op: Optional[str] = None) -> Template:
    """The template of a call given ``code`` (Inductor's generated source) or an already parsed ``template``,
    one of them; with ``op``, refused unless it is that op's template."""
    if (code is None) == (template is None):
        raise InputError("give code= (Inductor's generated source) or template= (parse_template's result), one of them")
    t = template if template is not None else parse_template(code)
    ops = re.fullmatch(r"triton_tem_fused_(\w+?)_\d+", t.kernel)
    if op is not None and (not ops or not ops.group(1).startswith(op)):
        raise InputError(f"the template in code is {t.kernel!r}, not a {op} template")
    return t


def mm(a, b, *, code: Optional[str] = None, template: Optional[Template] = None) -> np.ndarray:
    """``torch.mm(a, b)`` (and pointwise epilogues fused into it, such as ``relu``) as Inductor's template in
    ``code`` computes it: ``a`` (M, K), ``b`` (K, N) bf16, f16 or float32."""
    t = _template(code, template, "mm")
    return template_output(a, b, template=t)


def addmm(bias, a, b, *, code: Optional[str] = None, template: Optional[Template] = None) -> np.ndarray:
    """``torch.addmm(bias, a, b)`` as Inductor's template in ``code`` computes it (``bias`` (N,))."""
    t = _template(code, template, "addmm")
    if len(t.inputs) != 1:
        raise InputError(f"the addmm template loads {len(t.inputs)} inputs besides a and b, expected 1 (the bias)")
    return template_output(a, b, {t.inputs[0]: np.asarray(bias)}, template=t)


def bmm(a, b, *, code: Optional[str] = None, template: Optional[Template] = None) -> np.ndarray:
    """``torch.bmm(a, b)`` as Inductor's template in ``code`` computes it: ``a`` (B, M, K), ``b`` (B, K, N)."""
    t = _template(code, template, "bmm")
    return template_output(a, b, template=t)


def scaled_mm(a, b, scale_a, scale_b, *, code: Optional[str] = None, template: Optional[Template] = None) -> np.ndarray:
    """The output of Inductor's ``_scaled_mm`` template on ``a`` (M, K) and ``b`` (K, N) e4m3 (b as the matrix
    torch multiplies: ``b_nk.T``), with tensor-wise (0-d or one-element) or row-wise (``scale_a`` (M, 1),
    ``scale_b`` (1, N)) float32 scales, for the template in ``code`` (Inductor's generated source) or an
    already parsed ``template``."""
    t = _template(code, template, "_scaled_mm")
    sa, sb = _f32(scale_a), _f32(scale_b)
    M, N = np.shape(a)[0], np.shape(b)[1]
    row = any("tl.load" in ln and "idx_m" in ln for ln in t.epilogue)
    if row and (sa.shape != (M, 1) or sb.shape != (1, N)):
        raise InputError(f"this template has row-wise scales: scale_a (M, 1) and scale_b (1, N), got {sa.shape} and "
                         f"{sb.shape}")
    if not row and (sa.size != 1 or sb.size != 1):
        raise InputError(f"this template has tensor-wise scales: one float32 each, got {sa.shape} and {sb.shape}")
    if len(t.inputs) != 2:
        raise InputError(f"the _scaled_mm template loads {len(t.inputs)} inputs besides a and b, expected 2 (scales)")
    return template_output(a, b, dict(zip(t.inputs, (sa, sb))), template=t)


#: the recorded epilogues (torch 2.11), as the lines Inductor generated them (fixtures/inductor)
EPILOGUES = {
    "none": ("tl.store(out_ptr0 + (tl.broadcast_to(xindex, [BLOCK_M, BLOCK_N])), acc, mask)",),
    "bias": ("tmp0 = tl.load(in_ptr0 + (tl.broadcast_to(idx_n, [BLOCK_M, BLOCK_N])), mask, "
             "eviction_policy='evict_last').to(tl.float32)", "tmp1 = acc + tmp0",
             "tl.store(out_ptr0 + (tl.broadcast_to(xindex, [BLOCK_M, BLOCK_N])), tmp1, mask)"),
    "relu": ("tmp0 = tl.full([1], 0, tl.int32)", "tmp1 = triton_helpers.maximum(tmp0, acc)",
             "tl.store(out_ptr0 + (tl.broadcast_to(xindex, [BLOCK_M, BLOCK_N])), tmp1, mask)"),
    "row_scales": ("tmp0 = tl.load(in_ptr2 + (tl.broadcast_to(idx_m, [BLOCK_M, BLOCK_N])), mask, "
                   "eviction_policy='evict_last')",
                   "tmp1 = tl.load(in_ptr3 + (tl.broadcast_to(idx_n, [BLOCK_M, BLOCK_N])), mask, "
                   "eviction_policy='evict_last')", "tmp2 = tmp0 * tmp1", "tmp3 = acc * tmp2",
                   "tl.store(out_ptr0 + (tl.broadcast_to(xindex, [BLOCK_M, BLOCK_N])), tmp3, mask)"),
    "tensor_scales": ("tmp0 = tl.load(in_ptr2 + (0))", "tmp1 = tl.broadcast_to(tmp0, [BLOCK_M, BLOCK_N])",
                      "tmp2 = tl.load(in_ptr3 + (0))", "tmp3 = tl.broadcast_to(tmp2, [BLOCK_M, BLOCK_N])",
                      "tmp4 = tmp1 * tmp3", "tmp5 = acc * tmp4",
                      "tl.store(out_ptr0 + (tl.broadcast_to(xindex, [BLOCK_M, BLOCK_N])), tmp5, mask)"),
}
_KERNELS = {"mm": "triton_tem_fused_mm_0", "addmm": "triton_tem_fused_addmm_0", "bmm": "triton_tem_fused_bmm_0",
            "scaled_mm": "triton_tem_fused__scaled_mm_0"}
_IN_TYPES = {"bf16": "bf16", "f16": "fp16", "f32": "fp32", "e4m3": "fp8e4nv"}


def make_template(op: str, *, dtype: str, block_m: int, block_n: int, block_k: int, num_warps: int,
                  num_stages: int, pattern: str = "add", epilogue: str = "none", out: str = "bf16",
                  allow_tf32: bool = False) -> Template:
    """A :class:`Template` from a configuration instead of a generated source: ``op`` (mm, addmm, bmm,
    scaled_mm), the inputs' ``dtype`` (bf16, f16, f32, e4m3), the block shapes, warps and stages the autotuner
    picked, the main loop ``pattern`` and one of the recorded :data:`EPILOGUES` (none, bias, relu, row_scales,
    tensor_scales)."""
    if op not in _KERNELS:
        raise InputError(f"op must be one of {', '.join(_KERNELS)}, got {op!r}")
    if dtype not in _IN_TYPES:
        raise InputError(f"dtype must be one of {', '.join(_IN_TYPES)}, got {dtype!r}")
    if epilogue not in EPILOGUES:
        raise InputError(f"epilogue must be one of the recorded {', '.join(EPILOGUES)}, got {epilogue!r}")
    if out not in _OUT:
        raise InputError(f"out must be one of {', '.join(_OUT)}, got {out!r}")
    if pattern not in ("add", "dot_acc"):
        raise InputError(f"pattern must be 'add' (acc += tl.dot(a, b)) or 'dot_acc', got {pattern!r}")
    inputs = {"bias": ("in_ptr0",), "row_scales": ("in_ptr2", "in_ptr3"), "tensor_scales": ("in_ptr2", "in_ptr3")}
    itype = _IN_TYPES[dtype]
    sig = [("arg_A", "*" + itype), ("arg_B", "*" + itype)]
    sig += [(n, "*" + (itype if epilogue == "bias" else "fp32")) for n in inputs.get(epilogue, ())]
    sig.append(("out_ptr0", "*" + out))
    return Template(_KERNELS[op], int(block_m), int(block_n), int(block_k), int(num_warps), int(num_stages),
                    pattern == "dot_acc", pattern, EPILOGUES[epilogue], out, bool(allow_tf32), True, tuple(sig),
                    op == "bmm")
