"""``golden``: the bit-exact output of a library kernel (triton matmul, torch._scaled_mm,
CUTLASS DSL GEMM, cuBLAS matmul) from its golden model."""

from __future__ import annotations

import numpy as np

from wgref.commands.common import UsageError, command, load_array

_GOLDEN_DT = ("e4m3", "e5m2", "f16", "bf16", "f32")


def _as_dtype(x: np.ndarray, name: str, dt: str) -> np.ndarray:
    """An array loaded from .npy as ``dt``: raw codes (unsigned ints), or the saved dtype itself
    (ml_dtypes arrays come back from np.save as void of the same width)."""
    from refmodel.dtypes import element_dtype

    want = np.dtype(element_dtype(dt))
    if x.dtype == want:
        return x
    if x.dtype.kind in "uV" and x.dtype.itemsize == want.itemsize:
        return x.view(want)
    raise UsageError(f"{name} must hold {dt} values or {8 * want.itemsize}-bit codes, got {x.dtype}")


@command("golden")
def cmd_golden(args) -> int:
    from refmodel.dtypes import bits_of, element_dtype
    from refmodel.fileio import atomic_write

    a, b = load_array(args.a), load_array(args.b)
    if args.library == "triton":
        from refmodel.golden import triton_matmul

        if args.block_k is None:
            raise UsageError("wgref golden triton needs --block-k (the kernel's BLOCK_K)")
        d = triton_matmul(_as_dtype(a, "a", args.dtype), _as_dtype(b, "b", args.dtype), block_k=args.block_k,
                          input_precision=args.input_precision, max_num_imprecise_acc=args.imp,
                          out_dtype=np.dtype(element_dtype(args.out_dtype)))
    elif args.library == "cutlass":
        from refmodel.golden import cutlass_dense_gemm

        if args.dtype not in ("e4m3", "e5m2", "bf16", "f16"):
            raise UsageError(f"cutlass inputs are e4m3, e5m2, bf16 or f16, got --dtype {args.dtype}")
        d = cutlass_dense_gemm(_as_dtype(a, "a", args.dtype), _as_dtype(b, "b", args.dtype), acc_dtype=args.acc,
                               out_dtype=np.dtype(element_dtype(args.out_dtype)),
                               mma_promotion_interval=args.promotion_interval)
    elif args.library == "cublas":
        from refmodel.golden import cublas_matmul, cublas_schedule

        if args.dtype not in ("e4m3", "e5m2", "bf16", "f16"):
            raise UsageError(f"cublas inputs are e4m3, e5m2, bf16 or f16, got --dtype {args.dtype}")
        aa, bb = _as_dtype(a, "a", args.dtype), _as_dtype(b, "b", args.dtype)
        if args.kernel:
            kw = cublas_schedule(args.kernel.split(","), aa.shape[0], bb.shape[1], aa.shape[1]).kwargs()
        else:
            kw = {"splits": args.splits}
        d = cublas_matmul(aa, bb, **kw, out_dtype=args.out_dtype)
    else:  # torch._scaled_mm
        from refmodel.numerics.scaled_mm import scaled_mm

        if args.dtype not in ("e4m3", "e5m2"):
            raise UsageError(f"scaled-mm inputs are e4m3 or e5m2, got --dtype {args.dtype}")
        sa = load_array(args.scale_a) if args.scale_a and args.scale_a.endswith(".npy") else np.float32(args.scale_a or 1)
        sb = load_array(args.scale_b) if args.scale_b and args.scale_b.endswith(".npy") else np.float32(args.scale_b or 1)
        d = scaled_mm(_as_dtype(a, "a", args.dtype), _as_dtype(b, "b_nk", args.dtype), sa, sb,
                      out_dtype=args.out_dtype, use_fast_accum=args.fast_accum)
    bits = bits_of(d)
    atomic_write(args.output, lambda fh: np.save(fh, bits))
    print(f"wrote {args.output}: {d.shape[0]}x{d.shape[1]} {args.out_dtype} as raw bits ({bits.dtype}); "
          f"compare with: wgref diff {args.output} YOURS.npy --fmt {args.out_dtype}")
    return 0


def add_golden_parser(sub) -> None:
    """``wgref golden``: a library kernel's bit-exact output."""
    g = sub.add_parser("golden", help="the bit-exact output of a library kernel (triton matmul, torch._scaled_mm, CUTLASS DSL GEMM, cuBLAS matmul)")
    g.add_argument("library", choices=["triton", "scaled-mm", "cutlass", "cublas"])
    g.add_argument("a", help="A (M, K) as .npy (values, or raw codes with --dtype)")
    g.add_argument("b", help="B (K, N) for triton; B as (N, K) for scaled-mm (torch's b.T)")
    g.add_argument("--dtype", required=True, choices=list(_GOLDEN_DT), help="the inputs' format")
    g.add_argument("--out-dtype", default="f32", choices=["f32", "bf16", "f16"])
    g.add_argument("-o", "--output", required=True, help="D as raw bits (.npy)")
    g.add_argument("--block-k", type=int, default=None, help="triton: BLOCK_K")
    g.add_argument("--input-precision", default="tf32", help="triton, f32 inputs: tf32, tf32x3 or ieee")
    g.add_argument("--imp", type=int, default=None, help="triton, FP8: max_num_imprecise_acc (0, 32, 64, ...)")
    g.add_argument("--scale-a", default=None, help="scaled-mm: a number, or (M, 1) .npy")
    g.add_argument("--scale-b", default=None, help="scaled-mm: a number, or (1, N) .npy")
    g.add_argument("--fast-accum", action="store_true", help="scaled-mm: use_fast_accum=True")
    g.add_argument("--acc", default="f32", choices=["f32", "f16"], help="cutlass: the accumulator")
    g.add_argument("--promotion-interval", type=int, default=None,
                   help="cutlass: the FP8 2xacc example's mma_promotion_interval")
    g.add_argument("--kernel", default=None,
                   help="cublas: the kernel name(s) torch's profiler showed (comma-separated); gives the schedule")
    g.add_argument("--splits", type=int, default=1, help="cublas without --kernel: the split-K count")

