"""Whole-layer library calls as data: the FP8 ``torch._scaled_mm`` modes, cuBLAS epilogues and batches,
and torchao's float8 layers — each call a small JSON-able spec whose inputs are rebuilt bit for bit
from its seed with numpy, so a fixture needs only the spec, the kernels that ran and a digest of
the outputs (gpu.record.layers records them on the H200; refmodel.verify.replay_layers replays them).

A spec is a dict with ``op`` (a key of :data:`OPS`), a ``seed`` and the op's options.  Inputs come
from ``np.random.default_rng([seed, OP_SALT[op]])``; operand values from one input family of the
``matrix`` engine (:func:`refmodel.verify.families.matrix.make_inputs`), scales and biases from the
classes below.  Pure numpy + refmodel: no torch.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

import ml_dtypes
import numpy as np

from ..dtypes import bits_of, element_dtype, from_bits
from ..errors import InputError
from ..numerics.scaled_mm import scale_shapes
from .families.matrix import FAMILIES, make_inputs, special_values

# ----------------------------------------------------------------------------- the modes torch 2.11 has

#: torch._scaled_mm's scaling modes on sm_90, in the order the recorder walks them
SCALINGS = ("tensor", "row", "block_1x128_128x128", "block_128x128_1x128", "block_1x128_1x128")
FMT_PAIRS = (("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3"), ("e5m2", "e5m2"))
OUT_DTYPES = ("f32", "bf16", "f16")
BIAS_DTYPES = (None, "bf16", "f16")
SCALE_CLASSES = ("unit", "pow2", "random", "wide", "special")
BIAS_CLASSES = ("normal", "special")
OP_SALT = {"scaled_mm": 1, "linear": 2, "addmm": 3, "baddbmm": 4, "bmm": 5, "matmul": 6, "float8_linear": 7,
           "float8_inference": 8, "triton": 9}
OPS = tuple(OP_SALT)


def _rng(spec: dict) -> np.random.Generator:
    return np.random.default_rng([int(spec["seed"]), OP_SALT[spec["op"]]])


def digest(*arrays: np.ndarray) -> str:
    """sha256 of the arrays' bits (C order), in order: what a fixture stores of an output."""
    h = hashlib.sha256()
    for x in arrays:
        h.update(np.ascontiguousarray(bits_of(np.asarray(x))).tobytes())
    return h.hexdigest()


# ----------------------------------------------------------------------------- value classes

def scale_values(rng: np.random.Generator, cls: str, shape) -> np.ndarray:
    """float32 scales of one class: unit, pow2 (2^-6..2^6), random (0.05..4, full mantissa), wide
    (2^-40..2^40 with a random mantissa), special (random with 1/8 of them 0, -0, NaN, +-Inf, a
    negative, a float32 subnormal or 2^100; a scalar is one of those)."""
    shape = tuple(shape)
    if cls == "unit":
        return np.ones(shape, np.float32)
    if cls == "pow2":
        return np.exp2(rng.integers(-6, 7, shape)).astype(np.float32)
    if cls == "random":
        return rng.uniform(0.05, 4.0, shape).astype(np.float32)
    if cls == "wide":
        return (np.exp2(rng.integers(-40, 41, shape)) * rng.uniform(1, 2, shape)).astype(np.float32)
    if cls == "special":
        base = rng.uniform(0.05, 4.0, shape).astype(np.float32)
        sp = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, -1.5, 1e-40, 2.0 ** 100], np.float32)
        pick = sp[rng.integers(0, sp.size, shape)]
        if shape == ():
            return np.float32(pick)
        return np.where(rng.random(shape) < 1 / 8, pick, base).astype(np.float32)
    raise InputError(f"scale class must be one of {', '.join(SCALE_CLASSES)}, got {cls!r}")


def bias_values(rng: np.random.Generator, cls: str, dtype: str, shape, top: int = 12) -> np.ndarray:
    """A bias of ``dtype`` (bf16/f16/f32): normals times 2^randint(-4, top) (f16: top 10); special:
    1/8 of them +-0, +-Inf, NaN, +-max or the smallest subnormal."""
    top = min(top, 10) if dtype == "f16" else top
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-4, top + 1, shape))
    out = x.astype(np.float32).astype(element_dtype(dtype))
    if cls == "special":
        bits = bits_of(out).copy()
        sv = special_values(dtype)
        sign = np.uint64(1 << (8 * out.dtype.itemsize - 1))
        vals = np.array([sv["zero"], sv["inf"], sv["nan"], sv["max"], sv["min_subnormal"]], np.uint64)
        pick = vals[rng.integers(0, vals.size, shape)] | (rng.integers(0, 2, shape).astype(np.uint64) * sign)
        bits = np.where(rng.random(shape) < 1 / 8, pick.astype(bits.dtype), bits)
        out = from_bits(bits.astype(bits_of(out).dtype), dtype)
    elif cls != "normal":
        raise InputError(f"bias class must be one of {', '.join(BIAS_CLASSES)}, got {cls!r}")
    return out


def operands(rng: np.random.Generator, family: str, fmt_a: str, fmt_b: str, M: int, N: int, K: int):
    """A (M, K) of ``fmt_a`` and B (K, N) of ``fmt_b`` in one input family (each from its own draw of
    :func:`make_inputs`; ``allzero``: every element +0)."""
    if family == "allzero":
        return (np.zeros((M, K), element_dtype(fmt_a)), np.zeros((K, N), element_dtype(fmt_b)))
    a, _ = make_inputs(rng, family, fmt_a, M, 8, K)
    _, b = make_inputs(rng, family, fmt_b, 64, N, K)
    return a, b


# ----------------------------------------------------------------------------- torch._scaled_mm

def scaled_mm_inputs(spec: dict) -> dict[str, Any]:
    """a (M, K), b_nk (N, K), scale_a, scale_b (logical shapes, float32) and bias (N,) or None."""
    rng = _rng(spec)
    M, N, K = spec["M"], spec["N"], spec["K"]
    a, b = operands(rng, spec["family"], spec["fmt_a"], spec["fmt_b"], M, N, K)
    sha, shb = scale_shapes(spec["scaling"], M, N, K)
    sa = scale_values(rng, spec["scale_class"], sha)
    sb = scale_values(rng, spec["scale_class"], shb)
    bias = None
    if spec.get("bias"):
        bias = bias_values(rng, spec.get("bias_class", "normal"), spec["bias"], (N,))
    return {"a": a, "b_nk": np.ascontiguousarray(b.T), "scale_a": sa, "scale_b": sb, "bias": bias}


def scaled_mm_specs() -> list[dict]:
    """Every mode x FP8 pair x out dtype x fast-accum x bias torch 2.11 might run (torch's refusals
    included: the recorder stores them), one drawn shape, input family and scale class each; then
    each mode on every input family and scale class at a fixed shape; then long-K shapes where
    cuBLASLt may split K."""
    rng = np.random.default_rng(20261202)
    out = []
    seed = 0
    for scaling, (fa, fb), od, fast, bias in itertools.product(SCALINGS, FMT_PAIRS, OUT_DTYPES, (False, True),
                                                               BIAS_DTYPES):
        seed += 1
        out.append({"op": "scaled_mm", "seed": seed, "scaling": scaling, "fmt_a": fa, "fmt_b": fb, "out": od,
                    "fast": fast, "bias": bias, "bias_class": BIAS_CLASSES[int(rng.integers(2))],
                    "M": int(rng.choice((64, 128, 256))), "N": int(rng.choice((64, 128, 192, 256))),
                    "K": int(rng.choice((128, 256, 384, 512, 1024, 2048))),
                    "family": str(rng.choice(FAMILIES)), "scale_class": str(rng.choice(SCALE_CLASSES))})
    for scaling in SCALINGS:
        for fam in (*FAMILIES, "allzero"):
            for cls in SCALE_CLASSES:
                seed += 1
                out.append({"op": "scaled_mm", "seed": seed, "scaling": scaling, "fmt_a": "e4m3", "fmt_b": "e4m3",
                            "out": "bf16", "fast": bool(seed % 2), "bias": "bf16" if seed % 3 == 0 else None,
                            "bias_class": "normal", "M": 128, "N": 256, "K": 512, "family": fam,
                            "scale_class": cls})
    for scaling in SCALINGS:
        for (M, N, K) in ((64, 64, 8192), (128, 128, 16384), (256, 512, 4096)):
            for fast in (False, True):
                seed += 1
                out.append({"op": "scaled_mm", "seed": seed, "scaling": scaling, "fmt_a": "e4m3", "fmt_b": "e4m3",
                            "out": "bf16", "fast": fast, "bias": None, "bias_class": "normal", "M": M, "N": N,
                            "K": K, "family": "narrow", "scale_class": "random"})
    return out


# ----------------------------------------------------------------------------- cuBLAS epilogues and batches

CUBLAS_DTYPES = ("bf16", "f16", "tf32", "f32")
ALPHA_BETA = ((1.0, 1.0), (2.0, 0.5), (0.3, 1.7), (1.0, 0.0), (-1.25, 0.1))


def _hp(rng, family, dtype, shape_a, shape_b):
    """High-precision operands: tf32 runs take float32 data."""
    dt = "f32" if dtype == "tf32" else dtype
    M, K = shape_a
    N = shape_b[1]
    if family == "allzero":
        return np.zeros((M, K), element_dtype(dt)), np.zeros((K, N), element_dtype(dt))
    return make_inputs(rng, family, dt, M, N, K)


def cublas_inputs(spec: dict) -> dict[str, Any]:
    """Operands of a cuBLAS call: ``linear`` x (M, K), w (N, K), bias (N,); ``addmm`` a, b, c (c: (M, N),
    (N,) or (M, 1)); ``baddbmm`` a (B, M, K), b (B, K, N), c (B, M, N); ``bmm`` a, b; ``matmul``
    a (B, M, K) with b (K, N) or (B, K, N)."""
    rng = _rng(spec)
    op, dt, fam = spec["op"], spec["dtype"], spec["family"]
    M, N, K = spec["M"], spec["N"], spec["K"]
    ed = "f32" if dt == "tf32" else dt
    if op == "linear":
        x, b = _hp(rng, fam, dt, (M, K), (K, N))
        bias = bias_values(rng, spec.get("bias_class", "normal"), ed, (N,)) if spec.get("bias") else None
        return {"x": x, "w": np.ascontiguousarray(b.T), "bias": bias}
    if op == "addmm":
        a, b = _hp(rng, fam, dt, (M, K), (K, N))
        cshape = {"full": (M, N), "row": (N,), "col": (M, 1)}[spec["c"]]
        return {"a": a, "b": b, "c": bias_values(rng, spec.get("bias_class", "normal"), ed, cshape)}
    B = spec["B"]
    pairs = [_hp(rng, fam, dt, (M, K), (K, N)) for _ in range(B)]
    a = np.stack([p[0] for p in pairs])
    if op == "matmul" and not spec.get("batched_b", True):
        b = pairs[0][1]
    else:
        b = np.stack([p[1] for p in pairs])
    x = {"a": a, "b": b}
    if op == "baddbmm":
        x["c"] = bias_values(rng, spec.get("bias_class", "normal"), ed, (B, M, N))
    return x


def cublas_specs() -> list[dict]:
    """F.linear with and without bias (bf16, f16, tf32, f32) on shapes with and without split-K;
    addmm with every C broadcast and alpha/beta pair; baddbmm; bmm; batched matmul."""
    out = []
    seed = 0
    fams = FAMILIES
    for dt in CUBLAS_DTYPES:
        for i, (M, N, K) in enumerate(((128, 256, 4096), (256, 128, 512), (64, 192, 1024), (512, 256, 256),
                                       (64, 64, 8192), (16, 256, 2048))):
            for bias in (False, True):
                seed += 1
                out.append({"op": "linear", "seed": seed, "dtype": dt, "M": M, "N": N, "K": K, "bias": bias,
                            "bias_class": "special" if seed % 5 == 0 else "normal", "family": fams[seed % len(fams)]})
    for dt in ("bf16", "f16", "tf32"):
        for c in ("full", "row", "col"):
            for alpha, beta in ALPHA_BETA:
                for (M, N, K) in ((128, 128, 512), (64, 64, 8192)):
                    seed += 1
                    out.append({"op": "addmm", "seed": seed, "dtype": dt, "M": M, "N": N, "K": K, "c": c,
                                "alpha": alpha, "beta": beta, "bias_class": "special" if seed % 7 == 0 else "normal",
                                "family": fams[seed % len(fams)]})
    for dt in ("bf16", "f16", "tf32"):
        for (B, M, N, K) in ((3, 64, 128, 256), (4, 128, 64, 1024), (2, 64, 64, 4096)):
            for alpha, beta in ALPHA_BETA[:3]:
                seed += 1
                out.append({"op": "baddbmm", "seed": seed, "dtype": dt, "B": B, "M": M, "N": N, "K": K,
                            "alpha": alpha, "beta": beta, "bias_class": "normal", "family": fams[seed % len(fams)]})
            seed += 1
            out.append({"op": "bmm", "seed": seed, "dtype": dt, "B": B, "M": M, "N": N, "K": K,
                        "family": fams[seed % len(fams)]})
            for batched_b in (False, True):
                seed += 1
                out.append({"op": "matmul", "seed": seed, "dtype": dt, "B": B, "M": M, "N": N, "K": K,
                            "batched_b": batched_b, "family": fams[seed % len(fams)]})
    return out


# ----------------------------------------------------------------------------- torchao float8

FLOAT8_RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")
INFERENCE_GRANULARITIES = ("per_tensor", "per_row")


def float8_inputs(spec: dict) -> dict[str, np.ndarray]:
    """bf16 x (M, K), w (N, K), grad_y (M, N) (and bias (N,) for inference specs with one)."""
    rng = _rng(spec)
    M, N, K = spec["M"], spec["N"], spec["K"]
    fam = spec["family"]
    if fam == "allzero":
        x, w, g = (np.zeros(s, ml_dtypes.bfloat16) for s in ((M, K), (N, K), (M, N)))
    else:
        x, wt = make_inputs(rng, fam, "bf16", M, N, K)
        g, _ = make_inputs(rng, fam if fam != "cancel" else "narrow", "bf16", M, 8, N)
        w = np.ascontiguousarray(wt.T)
    out = {"x": x, "w": w, "grad_y": g}
    if spec.get("bias"):
        out["bias"] = bias_values(rng, "normal", "bf16", (N,), top=4)
    return out


def float8_specs() -> list[dict]:
    out = []
    seed = 0
    for recipe in FLOAT8_RECIPES:
        for (M, K, N) in ((128, 256, 192), (64, 512, 128)):
            for fam in ("narrow", "wide", "special", "allzero", "subnormal"):
                seed += 1
                out.append({"op": "float8_linear", "seed": seed, "recipe": recipe, "M": M, "K": K, "N": N,
                            "family": fam})
    for gran in INFERENCE_GRANULARITIES:
        for bias in (False, True):
            for fam in ("narrow", "wide"):
                seed += 1
                out.append({"op": "float8_inference", "seed": seed, "granularity": gran, "M": 128, "K": 512,
                            "N": 256, "bias": bias, "family": fam})
    return out


# ----------------------------------------------------------------------------- Triton, every FP8 pair

def triton_specs() -> list[dict]:
    """The textbook Triton matmul (gpu.libraries.triton) on every FP8 operand pair — the mixed ones
    (e4m3 x e5m2, e5m2 x e4m3) included — with max_num_imprecise_acc None / 0 / 32, BLOCK_K 64 and 128,
    f32 and bf16 outputs."""
    out, seed = [], 0
    for (fa, fb), imp, bk, od in itertools.product(FMT_PAIRS, (None, 0, 32), (64, 128), ("f32", "bf16")):
        seed += 1
        out.append({"op": "triton", "seed": seed, "fmt_a": fa, "fmt_b": fb, "imp": imp, "block_k": bk, "out": od,
                    "M": 128, "N": 128, "K": 512, "family": FAMILIES[seed % len(FAMILIES)]})
    return out


def triton_inputs(spec: dict) -> dict[str, np.ndarray]:
    """a (M, K) of fmt_a and b (K, N) of fmt_b."""
    a, b = operands(_rng(spec), spec["family"], spec["fmt_a"], spec["fmt_b"], spec["M"], spec["N"], spec["K"])
    return {"a": a, "b": b}


def all_specs() -> list[dict]:
    """Every recorded whole-layer call, in recording order."""
    return scaled_mm_specs() + cublas_specs() + float8_specs() + triton_specs()


def label(spec: dict) -> str:
    """A short one-line description of a call."""
    op = spec["op"]
    if op == "scaled_mm":
        return (f"_scaled_mm {spec['scaling']} {spec['fmt_a']}x{spec['fmt_b']} {spec['M']}x{spec['N']}x{spec['K']} "
                f"->{spec['out']} fast={int(spec['fast'])} bias={spec['bias']} {spec['family']}/{spec['scale_class']}")
    if op == "triton":
        return (f"triton {spec['fmt_a']}x{spec['fmt_b']} {spec['M']}x{spec['N']}x{spec['K']} bk{spec['block_k']} "
                f"imp={spec['imp']} ->{spec['out']} {spec['family']}")
    if op in ("float8_linear", "float8_inference"):
        what = spec.get("recipe") or spec.get("granularity")
        return f"torchao {op} {what} {spec['M']}x{spec['K']}x{spec['N']} {spec['family']}"
    shape = f"{spec.get('B', '')}{'x' if 'B' in spec else ''}{spec['M']}x{spec['N']}x{spec['K']}"
    extra = "".join(f" {k}={spec[k]}" for k in ("bias", "c", "alpha", "beta", "batched_b") if k in spec)
    return f"{op} {spec['dtype']} {shape}{extra} {spec['family']}"


# ----------------------------------------------------------------------------- the fixture's records

def records_array(records: list[dict]) -> np.ndarray:
    """The call records (spec, status, kernels or torch's error) as JSON bytes in a uint8 array: the
    fixture keeps them inside its compressed npz, the manifest only a summary."""
    import json

    return np.frombuffer(json.dumps(records, separators=(",", ":")).encode(), np.uint8).copy()


def records_of(arrays: dict) -> list[dict]:
    """The call records stored by :func:`records_array`."""
    import json

    return json.loads(bytes(np.asarray(arrays["records"], np.uint8)).decode())


def records_summary(records: list[dict]) -> dict:
    """The manifest's summary of the records: calls per op, how many ran."""
    import collections

    ops = collections.Counter(r["spec"]["op"] for r in records)
    ran = collections.Counter(r["spec"]["op"] for r in records if r["status"] == "ok")
    return {"what": "whole-layer library calls (refmodel.verify.layer_calls) on the GPU; the records (spec, "
                    "status, kernels or torch's refusal) are the npz's 'records' array",
            "calls": {op: {"recorded": n, "ran": ran[op]} for op, n in sorted(ops.items())}}


# ----------------------------------------------------------------------------- golden models of the calls

def output_size(spec: dict) -> int:
    """How many output elements the call writes (the torchao layers: y, grad_x and grad_w)."""
    M, N, K = spec["M"], spec["N"], spec["K"]
    if spec["op"] == "float8_linear":
        return M * N + M * K + N * K
    return spec.get("B", 1) * M * N


def golden(spec: dict, kernels) -> list[np.ndarray]:
    """The golden model's outputs of one recorded call (in the order of their sorted names), given the kernel names torch's profiler showed;
    raises the model's one-sentence refusal (a :class:`~refmodel.errors.WgrefError`) where it does not know."""
    from ..golden import cublas_matmul
    from ..golden.torch_scaled_mm import scaled_mm

    op = spec["op"]
    if op == "scaled_mm":
        x = scaled_mm_inputs(spec)
        return [scaled_mm(x["a"], x["b_nk"], x["scale_a"], x["scale_b"], bias=x["bias"], out_dtype=spec["out"],
                          use_fast_accum=spec["fast"], fmt_a=spec["fmt_a"], fmt_b=spec["fmt_b"],
                          kernel=kernels)]
    if op == "triton":
        from ..dtypes import element_dtype as _ed
        from ..golden import triton_matmul

        x = triton_inputs(spec)
        with np.errstate(all="ignore"):
            # recorded by gpu.record.layers.run_triton: BLOCK_M = BLOCK_N = 64, 4 warps
            return [triton_matmul(x["a"], x["b"], block_k=spec["block_k"], max_num_imprecise_acc=spec["imp"],
                                  block_m=64, block_n=64, num_warps=4,
                                  out_dtype=_ed(spec["out"]))]
    if op in ("float8_linear", "float8_inference"):
        from ..golden.torchao import float8_inference, float8_linear

        x = float8_inputs(spec)
        if op == "float8_linear":                  # the recorder's order: sorted names grad_w, grad_x, y
            y, gx, gw = float8_linear(x["x"], x["w"], x["grad_y"], recipe=spec["recipe"])
            return [gw, gx, y]
        return [float8_inference(x["x"], x["w"], x.get("bias"), granularity=spec["granularity"])]
    x = cublas_inputs(spec)
    if spec["dtype"] == "f32":
        from ..errors import UnmodelledError

        raise UnmodelledError("cuBLAS's full-precision float32 GEMMs (SIMT sgemm kernels) are not modelled")
    kw = {"kernel": kernels}
    if spec["dtype"] == "tf32":
        kw["input_precision"] = "tf32"
    if op == "linear":
        return [cublas_matmul(x["x"], np.ascontiguousarray(x["w"].T), bias=x["bias"], **kw)]
    if op in ("addmm", "baddbmm"):
        return [cublas_matmul(x["a"], x["b"], c=x["c"], alpha=spec["alpha"], beta=spec["beta"], **kw)]
    return [cublas_matmul(x["a"], x["b"], **kw)]
