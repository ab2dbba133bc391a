"""Every library wgref has a golden model of, listed once, as data: its golden function, the options the
CLI passes it, its kernel-name parser, its schedule-inference target, its library-fuzz target, its
recorder and the fixtures that prove it.  The CLI (``wgref golden``, ``wgref infer``, ``wgref fuzz lib:…``),
gpu.libraries.gemm_targets and docs/libraries.md iterate over :data:`GOLDEN_MODELS`; adding a library
is one entry here plus its module.

Functions and parsers are named ``"module:attribute"`` strings (imported when used), so the registry
costs nothing to import and names only refmodel modules (gpu recorders by module name, never imported).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..errors import InputError


@dataclass(frozen=True)
class GoldenModel:
    """One library's golden model and everything wired to it (module doc)."""

    name: str                               # the CLI's name: wgref golden <name>
    library: str                            # what the model reproduces, in words
    function: str                           # "module:function" of the golden model
    cli_options: tuple[str, ...] = ()       # the wgref golden options it takes (beyond -o, --dtype, --out-dtype)
    kernel_parser: Optional[str] = None     # "module:function" reading the profiler's kernel names
    infer_target: Optional[str] = None      # wgref infer <target> (gpu.libraries.gemm_targets)
    fuzz_target: Optional[str] = None       # wgref fuzz lib:<target> (refmodel.verify.library_calls)
    recorder: Optional[str] = None          # python -m <recorder> records its fixtures on the GPU
    fixtures: tuple[str, ...] = ()          # fixture features (or feature/file) that prove it
    dtypes: tuple[str, ...] = ()            # the input types it takes
    cli: bool = True                        # has a wgref golden subcommand
    notes: str = ""
    tags: tuple[str, ...] = field(default=())

    def resolve(self, what: str = "function") -> Callable:
        """The golden function (or ``kernel_parser``) itself."""
        ref = getattr(self, what)
        if ref is None:
            raise InputError(f"{self.name} has no {what}")
        mod, attr = ref.split(":")
        return getattr(importlib.import_module(mod), attr)


GOLDEN_MODELS: tuple[GoldenModel, ...] = (
    GoldenModel("triton", "Triton 3.6 tiled matmul (tl.dot)", "refmodel.golden.triton:triton_matmul",
                cli_options=("--block-k", "--input-precision", "--imp", "--acc", "--dtype-b", "--block-m", "--block-n",
                             "--num-warps", "--num-stages", "--pattern"),
                infer_target="triton", fuzz_target="triton", recorder="gpu.record.triton",
                fixtures=("triton", "layers"), dtypes=("e4m3", "e5m2", "f16", "bf16", "f32"),
                notes="wgmma or mma.sync as Triton 3.6 lowers BLOCK_M/N/K and num_warps (FP8 needs them); "
                      "acc += dot; FP8 pairs mixed or not"),
    GoldenModel("inductor", "torch.compile max-autotune Triton templates (torch 2.11): mm, addmm, bmm, _scaled_mm",
                "refmodel.golden.inductor:template_output",
                cli_options=("--code", "--scale-a", "--scale-b", "--bias", "--op", "--epilogue", "--block-m", "--block-n",
                             "--block-k", "--num-warps", "--num-stages", "--pattern", "--input-precision"),
                recorder="gpu.record.inductor", fixtures=("inductor",), dtypes=("e4m3", "bf16", "f16", "f32"),
                notes="from the generated source (run_and_get_code); epilogues line by line (scales, bias, relu); "
                      "unrecorded lines, masked K and persistent TMA templates refused"),
    GoldenModel("cublas", "cuBLAS GEMMs through torch (matmul, F.linear, addmm, baddbmm, bmm)",
                "refmodel.golden.cublas:cublas_matmul", cli_options=("--kernel", "--splits", "--bias", "--c", "--alpha",
                                                                     "--beta"),
                kernel_parser="refmodel.golden.cublas:cublas_schedule", infer_target="cublas", fuzz_target="cublas",
                recorder="gpu.record.layers", fixtures=("cublas", "layers", "kernel_map"),
                dtypes=("bf16", "f16", "tf32", "e4m3", "e5m2"),
                notes="bias / C epilogues (bz, bias, badd, bx, bx split-K), batches; tf32 at recorded shapes; f32 refused"),
    GoldenModel("scaled-mm", "torch._scaled_mm (cuBLASLt FP8 GEMM, torch 2.11)", "refmodel.golden.torch_scaled_mm:scaled_mm",
                cli_options=("--scale-a", "--scale-b", "--fast-accum", "--kernel", "--bias", "--dtype-b"),
                kernel_parser="refmodel.golden.torch_scaled_mm:kernel_mode", infer_target="scaled-mm",
                fuzz_target="scaled-mm", recorder="gpu.record.layers", fixtures=("torch", "cublas/scaled_mm_split.npz",
                                                                                   "layers", "kernel_map"),
                dtypes=("e4m3", "e5m2"),
                notes="per tensor, row-wise, block-wise 1x128/128x128 (all three pairs); bias; f32/bf16/f16 out"),
    GoldenModel("cusparselt", "cuSPARSELt 2:4 sparse GEMM (torch)", "refmodel.golden.cusparselt:cusparselt_matmul",
                cli_options=("--kernel",), kernel_parser="refmodel.golden.cusparselt:cusparselt_schedule",
                infer_target="cusparselt", recorder="gpu.record.cusparselt", fixtures=("cusparselt",),
                dtypes=("f16", "bf16", "e4m3")),
    GoldenModel("cutlass", "CUTLASS (CuTe DSL) dense GEMM examples", "refmodel.golden.cutlass:cutlass_dense_gemm",
                cli_options=("--acc", "--promotion-interval"), recorder="gpu.record.cutlass", fixtures=("cutlass",),
                dtypes=("e4m3", "e5m2", "bf16", "f16")),
    GoldenModel("deepgemm", "DeepGEMM fp8_gemm_nt (1x128 / 128x128 block scales)", "refmodel.golden.deepgemm:fp8_gemm_nt",
                infer_target="deepgemm", recorder="gpu.record.deepgemm", fixtures=("deepgemm",), dtypes=("e4m3",),
                cli=False),
    GoldenModel("xla", "XLA dot (JAX jnp.dot on the GPU)", "refmodel.golden.xla:xla_dot", infer_target="xla",
                fixtures=("schedules",), dtypes=("bf16", "f16"), cli=False),
    GoldenModel("torchao", "torchao 0.18 float8 layers (Float8Linear fwd + bwd; float8 inference)",
                "refmodel.golden.torchao:float8_linear", cli_options=("--recipe", "--granularity", "--grad-y", "--bias"),
                recorder="gpu.record.layers", fixtures=("layers",), dtypes=("bf16",),
                notes="recipes tensorwise, rowwise, rowwise_with_gw_hp; inference per_tensor / per_row"),
    GoldenModel("torchao-inference", "torchao 0.18 float8 inference (Float8DynamicActivationFloat8WeightConfig)",
                "refmodel.golden.torchao:float8_inference", recorder="gpu.record.layers", fixtures=("layers",),
                dtypes=("bf16",), cli=False, notes="wgref golden torchao --granularity; per_tensor / per_row"),
    GoldenModel("gemm-fp8", "wgref's own FP8 GEMM kernel (gpu.kernels.gemm_fp8)", "refmodel.numerics.gemm:gemm",
                infer_target="gemm-fp8", recorder="gpu.record.gemm", fixtures=("gemm",), dtypes=("e4m3",), cli=False),
)


def golden_model(name: str) -> GoldenModel:
    """The registry entry of ``name``, or one sentence listing the names."""
    for m in GOLDEN_MODELS:
        if m.name == name:
            return m
    raise InputError(f"no golden model named {name!r:.40}; the registry has {', '.join(m.name for m in GOLDEN_MODELS)}")


def cli_names() -> tuple[str, ...]:
    """The libraries ``wgref golden`` takes."""
    return tuple(m.name for m in GOLDEN_MODELS if m.cli)


def infer_targets() -> tuple[str, ...]:
    """The targets ``wgref infer`` takes."""
    return tuple(m.infer_target for m in GOLDEN_MODELS if m.infer_target)


def fuzz_targets() -> tuple[str, ...]:
    """The targets ``wgref fuzz lib:…`` takes."""
    return tuple(m.fuzz_target for m in GOLDEN_MODELS if m.fuzz_target)


def option_owners() -> dict[str, tuple[str, ...]]:
    """For each ``wgref golden`` option, the libraries that take it."""
    out: dict[str, list[str]] = {}
    for m in GOLDEN_MODELS:
        if m.cli:
            for o in m.cli_options:
                out.setdefault(o, []).append(m.name)
    return {k: tuple(v) for k, v in out.items()}


__all__ = ["GoldenModel", "GOLDEN_MODELS", "golden_model", "cli_names", "infer_targets", "fuzz_targets",
           "option_owners"]
