"""Library calls on the CPU: drawing one call of a fuzzed library, and its golden model.

The library fuzzer (``wgref fuzz lib:triton|lib:cublas|lib:scaled-mm``, gpu.fuzz.library) and the
Triton recorder's ``--store-fuzz`` (gpu.record.triton) both rebuild batch ``b`` of a campaign from
``np.random.default_rng([seed, b])`` with :func:`draw_call`: a configuration of the call (one
``draw_<target>``), one input family of the ``matrix`` engine and the inputs it makes
(:func:`refmodel.verify.families.matrix.make_inputs`).  The golden model of each target is
:func:`golden`; :class:`GoldenRunner` stands in for the libraries with it (tests, and a CPU check of
the campaign machinery).

A runner has one method per target (``triton``, ``cublas``, ``scaled_mm``) taking the inputs ``x``
and the configuration ``cfg`` and returning ``(output, kernel names or None)``; the GPU one is
gpu.libraries.torch_cublas.TorchRunner.  Pure numpy + refmodel: no torch, no GPU.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..dtypes import element_dtype
from ..errors import InputError
from .families.matrix import FAMILIES, make_inputs

from ..golden.registry import fuzz_targets

TARGETS = fuzz_targets()            # ("triton", "scaled-mm", "cublas"): one entry each in refmodel.golden.registry
TRITON_BM = TRITON_BN = 64          # the fuzzed Triton kernel's tile (M, N multiples of it)
# the shapes drawn (module constants, so a test can shrink them)
TRITON_MN = (64, 128, 256)          # M and N of a Triton call; K = BLOCK_K * 1..TRITON_K_BLOCKS
TRITON_K_BLOCKS = 16
CUBLAS_MN = (256, 512, 1024)        # cuBLAS runs these without split-K (mostly)
CUBLAS_K = (256, 512, 1024, 2048)
SCALED_MM_M = (64, 128, 256)
SCALED_MM_N = (64, 128, 256, 512)   # N >= 64: small outputs with a long K make cuBLAS split K
SCALED_MM_K_BLOCKS = 16             # K = 128 * 1..SCALED_MM_K_BLOCKS
FP8 = ("e4m3", "e5m2")


def parse_target(target: str) -> str:
    """``'lib:triton'`` or ``'triton'`` -> ``'triton'`` (one of :data:`TARGETS`)."""
    t = str(target).strip()
    name = t[4:] if t.startswith("lib:") else t
    if name not in TARGETS:
        raise InputError(f"library fuzz target {target!r} is not one of "
                         f"{', '.join('lib:' + x for x in TARGETS)}")
    return name


# ----------------------------------------------------------------------------- configurations

def _pick(rng: np.random.Generator, options):
    return options[int(rng.integers(len(options)))]


def draw_triton(rng: np.random.Generator) -> dict:
    """One Triton matmul configuration (K of the instruction always divides BLOCK_K)."""
    dtype = _pick(rng, ("e4m3", "e5m2", "f16", "bf16", "f32"))
    bk = _pick(rng, (32, 64, 128))
    cfg = {"dtype": dtype, "block_k": bk, "num_warps": _pick(rng, (4, 8)), "imp": None, "input_precision": None}
    if dtype in FP8:
        cfg["imp"] = _pick(rng, [None, 0] + list(range(32, bk + 1, 32)))
    if dtype == "f32":
        cfg["input_precision"] = _pick(rng, ("tf32", "tf32x3", "ieee"))
    cfg["out"] = _pick(rng, ("f32", "bf16", "f16"))
    cfg["M"], cfg["N"] = _pick(rng, TRITON_MN), _pick(rng, TRITON_MN)
    cfg["K"] = bk * int(rng.integers(1, TRITON_K_BLOCKS + 1))
    return cfg


def draw_cublas(rng: np.random.Generator) -> dict:
    """One ``torch.matmul`` (bf16/f16 in and out) on shapes where cuBLAS mostly runs no split-K."""
    return {"dtype": _pick(rng, ("bf16", "f16")), "M": _pick(rng, CUBLAS_MN), "N": _pick(rng, CUBLAS_MN),
            "K": _pick(rng, CUBLAS_K)}


def draw_scaled_mm(rng: np.random.Generator) -> dict:
    """One ``torch._scaled_mm`` e4m3 call: per-tensor scales (powers of two or not) or row-wise scales
    (bf16 out, torch's rule), out f32/bf16, use_fast_accum; M % 64, N % 16, K % 128 == 0."""
    scaling = _pick(rng, ("pow2", "tensor", "row"))
    return {"dtype": "e4m3", "scaling": scaling, "out": "bf16" if scaling == "row" else _pick(rng, ("f32", "bf16")),
            "use_fast_accum": bool(rng.integers(2)), "M": _pick(rng, SCALED_MM_M), "N": _pick(rng, SCALED_MM_N),
            "K": 128 * int(rng.integers(1, SCALED_MM_K_BLOCKS + 1))}


def _scales(rng: np.random.Generator, cfg: dict) -> tuple[np.ndarray, np.ndarray]:
    if cfg["scaling"] == "pow2":
        return (np.float32(2.0 ** int(rng.integers(-4, 5))), np.float32(2.0 ** int(rng.integers(-4, 5))))
    if cfg["scaling"] == "tensor":
        return (np.float32(rng.uniform(0.05, 4.0)), np.float32(rng.uniform(0.05, 4.0)))
    return ((rng.random((cfg["M"], 1)) + 0.5).astype(np.float32), (rng.random((1, cfg["N"])) + 0.5).astype(np.float32))


def job_string(target: str, cfg: dict, family: str) -> str:
    """A short description of a drawn call, for the journal."""
    shape = f"{cfg['M']}x{cfg['N']}x{cfg['K']}"
    if target == "triton":
        opt = (f" imp={cfg['imp']}" if cfg["dtype"] in FP8 else "") + \
              (f" {cfg['input_precision']}" if cfg["dtype"] == "f32" else "")
        return f"{cfg['dtype']} {shape} bk{cfg['block_k']} w{cfg['num_warps']}{opt} ->{cfg['out']} {family}"
    if target == "cublas":
        return f"{cfg['dtype']} {shape} {family}"
    return f"e4m3 {shape} {cfg['scaling']} ->{cfg['out']} fast={int(cfg['use_fast_accum'])} {family}"


def draw_call(target: str, seed: int, batch: int) -> tuple[dict, str, dict]:
    """Configuration, input family and inputs of batch ``batch`` (from ``default_rng([seed, batch])``)."""
    rng = np.random.default_rng([seed, batch])
    cfg = {"triton": draw_triton, "cublas": draw_cublas, "scaled-mm": draw_scaled_mm}[target](rng)
    family = _pick(rng, FAMILIES)
    a, b = make_inputs(rng, family, cfg["dtype"], cfg["M"], cfg["N"], cfg["K"])
    if target == "scaled-mm":
        sa, sb = _scales(rng, cfg)
        return cfg, family, {"a": a, "b_nk": np.ascontiguousarray(b.T), "scale_a": sa, "scale_b": sb}
    return cfg, family, {"a": a, "b": b}


# ----------------------------------------------------------------------------- golden models

def golden_triton(x: dict, cfg: dict) -> np.ndarray:
    from ..golden import triton_matmul

    with np.errstate(all="ignore"):       # Inf - Inf in tf32x3's split is data, not a fault
        return triton_matmul(x["a"], x["b"], block_k=cfg["block_k"], block_m=TRITON_BM, block_n=TRITON_BN,
                             num_warps=cfg["num_warps"],
                             input_precision=cfg["input_precision"] or "tf32", max_num_imprecise_acc=cfg["imp"],
                             out_dtype=element_dtype(cfg["out"]))


def golden_cublas(x: dict, cfg: dict, kernels) -> np.ndarray:
    """cuBLAS's output under the schedule its kernels name; InputError when that schedule is unknown."""
    from ..golden import cublas_matmul, cublas_schedule

    sched = cublas_schedule(list(kernels or []), cfg["M"], cfg["N"], cfg["K"])
    return cublas_matmul(x["a"], x["b"], **sched.kwargs(), out_dtype=cfg["dtype"])


def golden_scaled_mm(x: dict, cfg: dict) -> np.ndarray:
    from ..numerics.scaled_mm import scaled_mm

    return scaled_mm(x["a"], x["b_nk"], x["scale_a"], x["scale_b"], out_dtype=cfg["out"],
                     use_fast_accum=cfg["use_fast_accum"])


def golden(target: str, x: dict, cfg: dict, kernels) -> tuple[Optional[np.ndarray], Optional[str]]:
    """(golden output, None), or (None, why the call cannot be modelled)."""
    if target == "triton":
        return golden_triton(x, cfg), None
    if target == "cublas":
        try:
            return golden_cublas(x, cfg, kernels), None
        except InputError as e:
            return None, str(e)
    split = [k for k in (kernels or []) if "splitK" in k]
    if split:
        return None, f"cuBLAS ran a split-K kernel ({shorten(split[0])}); refmodel's scaled_mm is the unsplit schedule"
    return golden_scaled_mm(x, cfg), None


def shorten(name: str) -> str:
    """A kernel name cut to 120 characters (C++ template names run to thousands)."""
    return name if len(name) <= 120 else name[:117] + "..."


class GoldenRunner:
    """The golden models standing in for the libraries (tests, and a CPU check of the campaign
    machinery: it finds nothing by construction).  cuBLAS calls report a no-split nvjet kernel."""

    def triton(self, x: dict, cfg: dict):
        return golden_triton(x, cfg), None

    def cublas(self, x: dict, cfg: dict):
        kern = [f"nvjet_sm90_{'tst' if cfg['dtype'] == 'bf16' else 'hsh'}_64x8_64x16_1x2_h_bz_NNT"]
        return golden_cublas(x, cfg, kern), kern

    def scaled_mm(self, x: dict, cfg: dict):
        return golden_scaled_mm(x, cfg), ["nvjet_sm90_qqsss_64x48_128x15_2x4_h_bz_algo2_TNT"]
