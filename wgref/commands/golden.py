"""``golden``: the bit-exact output of a library kernel (triton matmul, torch._scaled_mm,
CUTLASS DSL GEMM, cuBLAS matmul, cuSPARSELt) from its golden model, or from a stored schedule
(``--schedule s.json``); with ``--device`` the GEMM runs on the GPU's CUDA cores (gpu.kernels.golden_gemm, the same
bits) for scaled-mm and for stored schedules of dense wgmma chains.  Where the library is known to switch kernels near the shape and neither
``--kernel`` nor ``--schedule`` says which ran, a warning line goes to stderr."""

from __future__ import annotations

import numpy as np

from wgref.commands.common import UsageError, command, load_array, number_text

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


def _takes() -> dict:
    """Which options each library takes (-o, --dtype and --out-dtype apply to all): refmodel.golden.registry."""
    from refmodel.golden.registry import option_owners

    return option_owners()
# options a stored schedule replaces (the schedule says what the kernel does)
_MODEL_OPTIONS = ("--block-k", "--input-precision", "--imp", "--fast-accum", "--acc", "--promotion-interval",
                  "--kernel", "--splits")


def _check_options(args) -> None:
    """Refuse options that do not apply to ``args.library`` (they would be ignored silently)."""
    given = {"--block-k": args.block_k, "--input-precision": args.input_precision, "--imp": args.imp,
             "--scale-a": args.scale_a, "--scale-b": args.scale_b, "--fast-accum": args.fast_accum or None,
             "--acc": args.acc, "--promotion-interval": args.promotion_interval, "--kernel": args.kernel,
             "--splits": args.splits, "--bias": args.bias, "--dtype-b": args.dtype_b, "--c": args.c,
             "--alpha": args.alpha, "--beta": args.beta, "--recipe": args.recipe, "--granularity": args.granularity,
             "--grad-y": args.grad_y, "--block-m": args.block_m, "--block-n": args.block_n,
             "--num-warps": args.num_warps, "--num-stages": args.num_stages,
             "--pattern": None if args.pattern == "dot_acc" else args.pattern, "--code": args.code,
             "--op": args.op, "--epilogue": args.epilogue}
    _TAKES = _takes()
    if getattr(args, "schedule", None) is not None:
        clash = [o for o in _MODEL_OPTIONS if given[o] is not None]
        if clash:
            raise UsageError(f"wgref golden --schedule replaces {', '.join(clash)}: the stored schedule says what "
                             f"the kernel does")
    bad = [o for o, v in given.items() if v is not None and args.library not in _TAKES[o]]
    if bad:
        rule = "; ".join(f"{o} is for {', '.join(_TAKES[o])}" for o in bad)
        raise UsageError(f"wgref golden {args.library} does not take {', '.join(bad)} ({rule})")
    if args.code is not None and args.op is not None:
        raise UsageError("wgref golden inductor: give --code (the generated source) or --op (a configuration), "
                         "not both")
    if args.kernel is not None and args.splits is not None:
        raise UsageError("wgref golden cublas: give --kernel (the schedule from the kernel names) or --splits, "
                         "not both")
    for flag, v, lo in (("--block-k", args.block_k, 1), ("--imp", args.imp, 0), ("--splits", args.splits, 1),
                        ("--promotion-interval", args.promotion_interval, 1)):
        if v is not None and v < lo:
            raise UsageError(f"{flag} must be an integer >= {lo}, got {v}")
    if args.kernel is not None and not all(k.strip() for k in args.kernel.split(",")):
        raise UsageError(f"--kernel must be comma-separated kernel names without empty entries, "
                         f"got {args.kernel!r:.60}")


def _file_of(spec: str) -> str:
    """The file an input argument names (``FILE.npz:key`` -> ``FILE.npz``)."""
    return spec.split(".npz:", 1)[0] + ".npz" if ".npz:" in spec else spec


def _is_file_arg(spec: str) -> bool:
    return spec.endswith(".npy") or ".npz:" in spec


def _scale(spec: str | None, flag: str):
    """A scaled-mm scale: a .npy / FILE.npz:key array, or a finite number (default 1)."""
    import math

    if spec is None:
        return np.float32(1)
    if _is_file_arg(spec):
        return load_array(spec)
    try:
        v = float(number_text(spec, flag))
    except ValueError:
        raise UsageError(f"{flag} must be a number or a .npy file, got {spec!r:.60}") from None
    if not math.isfinite(v) or not math.isfinite(float(np.float32(v))):
        raise UsageError(f"{flag} must be a finite float32 number, got {spec!r:.60}")
    return np.float32(v)


def _kernels(spec: str | None):
    return None if spec is None else [k.strip() for k in spec.split(",")]


@command("golden")
def cmd_golden(args) -> int:
    import sys
    import warnings

    from refmodel.golden import ScheduleWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ScheduleWarning)
        rc = _golden(args)
    for w in caught:
        if issubclass(w.category, ScheduleWarning):
            print(f"wgref golden {args.library}: warning: {str(w.message)[:400]}", file=sys.stderr)
    return rc


def _golden(args) -> int:
    from refmodel.dtypes import bits_of, element_dtype
    from refmodel.fileio import atomic_write, check_output

    _check_options(args)
    inputs = [_file_of(args.a), _file_of(args.b)] + [_file_of(x) for x in (args.scale_a, args.scale_b, args.bias,
                                                                             args.c, args.grad_y, args.code)
                                                      if x is not None and _is_file_arg(x)]
    check_output(args.output, inputs=inputs)   # not a device, a folder, a symlink or one of the inputs
    if args.schedule is not None:
        inputs.append(args.schedule)
        check_output(args.output, inputs=inputs)
    if getattr(args, "device", False):
        _require_device()
    a, b = load_array(args.a), load_array(args.b)
    if getattr(args, "device", False):
        bits = _on_device(args, a, b)
        atomic_write(args.output, lambda fh: np.save(fh, bits))
        print(f"wrote {args.output}: {bits.shape[0]}x{bits.shape[1]} {args.out_dtype} as raw bits ({bits.dtype}), "
              f"computed on the GPU; compare with: wgref diff {args.output} YOURS.npy --fmt {args.out_dtype}")
        return 0
    if args.schedule is not None:
        d = _run_schedule(args, a, b)
    elif args.library == "torchao":
        return _torchao(args, a, b)
    elif args.library == "triton":
        from refmodel.golden import triton_matmul

        if args.block_k is None:
            raise UsageError("wgref golden triton needs --block-k (the kernel's BLOCK_K)")
        d = triton_matmul(_as_dtype(a, "a", args.dtype), _as_dtype(b, "b", args.dtype_b or args.dtype), block_k=args.block_k,
                          input_precision=args.input_precision or "tf32", max_num_imprecise_acc=args.imp,
                          out_dtype=np.dtype(element_dtype(args.out_dtype)),
                          acc_dtype=np.float16 if args.acc == "f16" else np.float32,
                          block_m=args.block_m, block_n=args.block_n, num_warps=args.num_warps,
                          num_stages=args.num_stages, pattern=args.pattern)
    elif args.library == "inductor":
        from refmodel.golden import inductor as ind

        if args.code is not None:
            try:
                code = open(args.code, encoding="utf-8").read()
            except OSError as e:
                raise UsageError(f"cannot read --code {args.code!r:.80}: {e.strerror}") from None
            t = ind.parse_template(code)
        elif args.op is not None:
            need = {"--block-m": args.block_m, "--block-n": args.block_n, "--block-k": args.block_k,
                    "--num-warps": args.num_warps, "--num-stages": args.num_stages}
            missing = [k for k, v in need.items() if v is None]
            if missing:
                raise UsageError(f"wgref golden inductor --op needs {', '.join(missing)} (the picked template)")
            t = ind.make_template(args.op, dtype=args.dtype, block_m=args.block_m, block_n=args.block_n,
                                  block_k=args.block_k, num_warps=args.num_warps, num_stages=args.num_stages,
                                  pattern=args.pattern, epilogue=args.epilogue or "none",
                                  out={"f32": "fp32", "f16": "fp16", "bf16": "bf16"}[args.out_dtype],
                                  allow_tf32=args.input_precision == "tf32")
            code = None
        else:
            raise UsageError("wgref golden inductor needs --code (Inductor's generated source, from "
                             "torch._inductor.utils.run_and_get_code) or --op with the template's configuration")
        kw = {"code": code} if code is not None else {"template": t}
        aa, bb = _as_dtype(a, "a", args.dtype), _as_dtype(b, "b", args.dtype)
        if t.kernel.startswith("triton_tem_fused__scaled_mm"):      # B given as (N, K), like golden scaled-mm
            d = ind.scaled_mm(aa, np.ascontiguousarray(bb.T), _scale(args.scale_a, "--scale-a"),
                              _scale(args.scale_b, "--scale-b"), **kw)
        elif t.kernel.startswith("triton_tem_fused_addmm"):
            if args.bias is None:
                raise UsageError("this addmm template needs --bias (the (N,) bias, of the inputs' type)")
            d = ind.addmm(_as_dtype(load_array(args.bias), "bias", args.dtype), aa, bb, **kw)
        elif t.kernel.startswith("triton_tem_fused_bmm"):
            d = ind.bmm(aa, bb, **kw)
        else:
            d = ind.mm(aa, bb, **kw)
    elif args.library == "cutlass":
        from refmodel.golden import cutlass_dense_gemm

        if args.dtype not in ("e4m3", "e5m2", "bf16", "f16"):
            raise UsageError(f"cutlass inputs are e4m3, e5m2, bf16 or f16, got --dtype {args.dtype}")
        d = cutlass_dense_gemm(_as_dtype(a, "a", args.dtype), _as_dtype(b, "b", args.dtype), acc_dtype=args.acc or "f32",
                               out_dtype=np.dtype(element_dtype(args.out_dtype)),
                               mma_promotion_interval=args.promotion_interval)
    elif args.library == "cublas":
        from refmodel.golden import cublas_matmul

        if args.dtype not in ("e4m3", "e5m2", "bf16", "f16"):
            raise UsageError(f"cublas inputs are e4m3, e5m2, bf16 or f16, got --dtype {args.dtype}")
        aa, bb = _as_dtype(a, "a", args.dtype), _as_dtype(b, "b", args.dtype)
        if aa.ndim not in (2, 3) or bb.ndim not in (2, 3):
            raise UsageError(f"cublas: a must be (M, K) or (B, M, K) and b (K, N) or (B, K, N), got {aa.shape} and "
                             f"{bb.shape}")
        epi = {}
        if args.bias is not None:
            epi["bias"] = _as_dtype(load_array(args.bias), "bias", args.out_dtype)
        if args.c is not None:
            epi["c"] = _as_dtype(load_array(args.c), "c", args.out_dtype)
        epi.update({k: v for k, v in (("alpha", args.alpha), ("beta", args.beta)) if v is not None})
        d = cublas_matmul(aa, bb, splits=args.splits, kernel=_kernels(args.kernel), out_dtype=args.out_dtype, **epi)
    elif args.library == "cusparselt":
        from refmodel.golden import cusparselt_matmul

        if args.dtype not in ("f16", "bf16", "e4m3"):
            raise UsageError(f"cusparselt inputs are f16, bf16 or e4m3, got --dtype {args.dtype}")
        d = cusparselt_matmul(_as_dtype(a, "a", args.dtype), _as_dtype(b, "b", args.dtype), out_dtype=args.out_dtype,
                              kernel=_kernels(args.kernel))
    else:  # torch._scaled_mm
        from refmodel.golden import scaled_mm

        fb = _fmt_b(args)
        sa, sb = _scale(args.scale_a, "--scale-a"), _scale(args.scale_b, "--scale-b")
        d = scaled_mm(_as_dtype(a, "a", args.dtype), _as_dtype(b, "b_nk", fb), sa, sb, bias=_bias(args),
                      out_dtype=args.out_dtype, use_fast_accum=args.fast_accum, fmt_a=args.dtype, fmt_b=fb,
                      kernel=_kernels(args.kernel))
    bits = bits_of(d)
    atomic_write(args.output, lambda fh: np.save(fh, bits))
    print(f"wrote {args.output}: {'x'.join(map(str, d.shape))} {args.out_dtype} as raw bits ({bits.dtype}); "
          f"compare with: wgref diff {args.output} YOURS.npy --fmt {args.out_dtype}")
    return 0


def _torchao(args, x, w) -> int:
    """torchao's float8 layer: y (and with --grad-y, grad_x and grad_w in one .npz) as raw bf16 bits."""
    from refmodel.dtypes import bits_of
    from refmodel.fileio import atomic_write
    from refmodel.golden.torchao import float8_inference, float8_linear

    if args.dtype != "bf16" or args.out_dtype != "bf16":
        raise UsageError("wgref golden torchao takes --dtype bf16 --out-dtype bf16 (the recorded layers are bf16)")
    if (args.recipe is None) == (args.granularity is None):
        raise UsageError("wgref golden torchao needs --recipe (Float8Linear training) or --granularity "
                         "(float8 inference), one of them")
    xx, ww = _as_dtype(x, "x", "bf16"), _as_dtype(w, "w (N, K)", "bf16")
    if args.granularity is not None:
        if args.grad_y is not None:
            raise UsageError("--grad-y is for Float8Linear (--recipe); the inference path has no backward")
        bias = None if args.bias is None else _as_dtype(load_array(args.bias), "bias", "bf16")
        outs = {"y": float8_inference(xx, ww, bias, granularity=args.granularity)}
    else:
        if args.bias is not None:
            raise UsageError("--bias is for the inference path (--granularity); Float8Linear adds its bias outside "
                             "the float8 GEMMs (add it yourself, in bf16)")
        if args.grad_y is None:
            outs = {"y": float8_linear(xx, ww, recipe=args.recipe)}
        else:
            g = _as_dtype(load_array(args.grad_y), "grad_y", "bf16")
            y, gx, gw = float8_linear(xx, ww, g, recipe=args.recipe)
            outs = {"y": y, "grad_x": gx, "grad_w": gw}
    if len(outs) == 1:
        atomic_write(args.output, lambda fh: np.save(fh, bits_of(outs["y"])))
    else:
        if not str(args.output).endswith(".npz"):
            raise UsageError(f"with --grad-y the output holds y, grad_x and grad_w: name it .npz, got {args.output}")
        atomic_write(args.output, lambda fh: np.savez(fh, **{k: bits_of(v) for k, v in outs.items()}))
    print(f"wrote {args.output}: {', '.join(f'{k} {v.shape[0]}x{v.shape[1]}' for k, v in outs.items())} bf16 as raw "
          f"bits (uint16); compare with: wgref diff")
    return 0


def _fmt_b(args) -> str:
    """scaled-mm: B's format (--dtype-b, default --dtype); both FP8."""
    fb = args.dtype_b or args.dtype
    if args.dtype not in ("e4m3", "e5m2") or fb not in ("e4m3", "e5m2"):
        raise UsageError(f"scaled-mm inputs are e4m3 or e5m2, got --dtype {args.dtype} and --dtype-b {fb}")
    return fb


def _bias(args):
    """scaled-mm --bias: an (N,) .npy of the output's type (bf16 or f16 values, or their raw bits)."""
    if args.bias is None:
        return None
    if args.out_dtype not in ("bf16", "f16"):
        raise UsageError(f"--bias needs --out-dtype bf16 or f16 (torch refuses a bias with f32 out), got {args.out_dtype}")
    return _as_dtype(load_array(args.bias), "bias", args.out_dtype)


def _run_schedule(args, a, b):
    """D of a stored schedule: scaled-mm takes B as (N, K) and the scales; the others B as (K, N)."""
    from refmodel.golden import load_schedule

    sched = load_schedule(args.schedule)
    if sched.out_dtype not in (None, args.out_dtype):
        raise UsageError(f"the schedule writes {sched.out_dtype}, --out-dtype asks for {args.out_dtype}")
    sched = sched.replace(out_dtype=args.out_dtype)
    aa, bb = _as_dtype(a, "a", args.dtype), _as_dtype(b, "b", args.dtype)
    if args.library == "scaled-mm":
        if sched.epilogue_scale == "none" and args.scale_a is None and args.scale_b is None:
            return sched.expected(aa, bb)
        sa, sb = _scale(args.scale_a, "--scale-a"), _scale(args.scale_b, "--scale-b")
        return sched.expected(aa, bb, scale_a=sa, scale_b=sb)
    return sched.run(aa, bb)


def _require_device() -> None:
    """One line and exit 2 without cupy or a usable sm_90 GPU."""
    from gpu.kernels.runtime import (
        gpu_available,  # never raises: it says False without cupy or a GPU
    )

    if not gpu_available():
        raise UsageError("wgref golden --device needs a CUDA device with cupy (an H100/H200 and cupy installed)")


def _on_device(args, a, b) -> np.ndarray:
    """D's raw bits from the GPU golden GEMM: scaled-mm's schedule (B as (N, K), its scales) or a stored
    schedule (B as (N, K) for scaled-mm, (K, N) otherwise)."""
    import cupy as cp

    from gpu.kernels.golden_gemm import golden_gemm_device
    from refmodel.golden import load_schedule

    aa, bb = _as_dtype(a, "a", args.dtype), _as_dtype(b, "b", args.dtype)
    sa = sb = None
    if args.schedule is not None:
        sched = load_schedule(args.schedule)
        if sched.out_dtype not in (None, args.out_dtype):
            raise UsageError(f"the schedule writes {sched.out_dtype}, --out-dtype asks for {args.out_dtype}")
        sched = sched.replace(out_dtype=args.out_dtype)
        if args.library == "scaled-mm" and not (sched.epilogue_scale == "none" and args.scale_a is None
                                                and args.scale_b is None):
            sa, sb = _scale(args.scale_a, "--scale-a"), _scale(args.scale_b, "--scale-b")
    elif args.library == "scaled-mm":
        from refmodel.golden.kernel_regions import warn_if_switching
        from refmodel.golden.torch_scaled_mm import scaled_mm_schedule
        from refmodel.numerics.scaled_mm import check_scaled_mm

        fb = _fmt_b(args)
        bb = _as_dtype(b, "b", fb)
        _, _, sa, sb, bias, mode = check_scaled_mm(aa, bb, _scale(args.scale_a, "--scale-a"),
                                                   _scale(args.scale_b, "--scale-b"), _bias(args), args.out_dtype,
                                                   args.fast_accum, args.dtype, fb)
        if bias is not None or mode not in ("tensor", "row"):
            raise UsageError(f"wgref golden --device runs scaled-mm with per-tensor or row-wise scales and no bias; "
                             f"this call ({mode} scales{', a bias' if bias is not None else ''}) runs without --device")
        M, K = aa.shape
        N = bb.shape[0]
        if args.kernel is None:
            warn_if_switching("scaled_mm_fast" if args.fast_accum else "scaled_mm_precise", M, N, K,
                              "cuBLASLt (torch._scaled_mm)", stacklevel=2)
        sched = scaled_mm_schedule(M, N, K, use_fast_accum=args.fast_accum, rowwise=sa.ndim > 0,
                                   out_dtype=args.out_dtype, fmt_a=args.dtype, fmt_b=fb,
                                   kernel=_kernels(args.kernel))
    else:
        raise UsageError(f"wgref golden --device runs scaled-mm or a --schedule; the {args.library} model is not "
                         f"a stored schedule of dense wgmma chains (run it without --device)")
    if aa.ndim != 2 or bb.ndim != 2:
        raise UsageError(f"a and b must be 2-D, got {aa.shape} and {bb.shape}")
    layout = "nk" if args.library == "scaled-mm" else "kn"
    from refmodel.dtypes import bits_of

    d = golden_gemm_device(cp.asarray(bits_of(aa)), cp.asarray(bits_of(bb)), schedule=sched, scale_a=sa,
                           scale_b=sb, b_layout=layout)
    return cp.asnumpy(d).view(np.uint32 if d.dtype.itemsize == 4 else np.uint16)


def add_golden_parser(sub) -> None:
    """``wgref golden``: a library kernel's bit-exact output."""
    g = sub.add_parser("golden", help="the bit-exact output of a library kernel (triton matmul, torch._scaled_mm, CUTLASS DSL GEMM, cuBLAS matmul, cuSPARSELt)")
    from refmodel.golden.registry import cli_names

    g.add_argument("library", choices=list(cli_names()))
    g.add_argument("a", help="A (M, K) as .npy (values, or raw codes with --dtype)")
    g.add_argument("b", help="B (K, N) for triton and inductor mm/addmm/bmm ((B, K, N)); B as (N, K) for scaled-mm "
                   "and inductor _scaled_mm (torch's b.T)")
    g.add_argument("--dtype", required=True, choices=list(_GOLDEN_DT), help="the inputs' format")
    g.add_argument("--out-dtype", default="f32", choices=["f32", "bf16", "f16"])
    g.add_argument("-o", "--output", required=True, help="D as raw bits (.npy)")
    g.add_argument("--block-k", type=int, default=None, help="triton: BLOCK_K")
    g.add_argument("--block-m", type=int, default=None, help="triton: BLOCK_M (with --block-n, --num-warps: picks "
                   "wgmma or mma.sync as Triton 3.6 does; needed for FP8)")
    g.add_argument("--block-n", type=int, default=None, help="triton: BLOCK_N")
    g.add_argument("--num-warps", type=int, default=None, help="triton: num_warps")
    g.add_argument("--num-stages", type=int, default=None, help="triton: num_stages (default: Triton's)")
    g.add_argument("--code", default=None, metavar="PY",
                   help="inductor: the generated source (torch._inductor.utils.run_and_get_code); its template "
                   "(mm, addmm with --bias, bmm, _scaled_mm with --scale-a/--scale-b) decides the call")
    g.add_argument("--op", default=None, choices=["mm", "addmm", "bmm", "scaled_mm"],
                   help="inductor without --code: the template (with --block-m/n/k, --num-warps, --num-stages, "
                   "--pattern, --epilogue)")
    g.add_argument("--epilogue", default=None, choices=["none", "bias", "relu", "row_scales", "tensor_scales"],
                   help="inductor --op: one of the recorded epilogues")
    g.add_argument("--pattern", default="dot_acc", choices=["dot_acc", "add"],
                   help="triton: acc = tl.dot(a, b, acc) (dot_acc, default) or acc += tl.dot(a, b) (add)")
    g.add_argument("--input-precision", default=None, choices=["tf32", "tf32x3", "ieee"],
                   help="triton, f32 inputs: tf32 (default), tf32x3 or ieee")
    g.add_argument("--imp", type=int, default=None, help="triton, FP8: max_num_imprecise_acc (0, 32, 64, ...)")
    g.add_argument("--scale-a", default=None,
                   help="scaled-mm: a number, or .npy: (M, 1) row-wise, (M, K/128) 1x128 or (M/128, K/128) 128x128 blocks")
    g.add_argument("--scale-b", default=None,
                   help="scaled-mm: a number, or .npy: (1, N) row-wise, (K/128, N) 1x128 or (K/128, N/128) 128x128 blocks")
    g.add_argument("--bias", default=None, metavar="NPY", help="scaled-mm, cublas, torchao --granularity: the (N,) bias, of the output's type; inductor addmm: of the inputs' type")
    g.add_argument("--dtype-b", default=None, choices=["e4m3", "e5m2"],
                   help="scaled-mm, triton: B's FP8 format when it differs from A's (default --dtype)")
    g.add_argument("--c", default=None, metavar="NPY", help="cublas: addmm's C (broadcastable to the output)")
    g.add_argument("--alpha", type=float, default=None, help="cublas: addmm's alpha (default 1)")
    g.add_argument("--beta", type=float, default=None, help="cublas: addmm's beta (default 1)")
    g.add_argument("--recipe", default=None, choices=["tensorwise", "rowwise", "rowwise_with_gw_hp"],
                   help="torchao: Float8Linear's recipe (a = x (M, K), b = the weight (N, K))")
    g.add_argument("--granularity", default=None, choices=["per_tensor", "per_row"],
                   help="torchao: the float8 inference path (Float8DynamicActivationFloat8WeightConfig)")
    g.add_argument("--grad-y", default=None, metavar="NPY",
                   help="torchao --recipe: grad_y (M, N); the output .npz then holds y, grad_x and grad_w")
    g.add_argument("--fast-accum", action="store_true", help="scaled-mm: use_fast_accum=True")
    g.add_argument("--acc", default=None, choices=["f32", "f16"], help="cutlass, triton: the accumulator (default f32)")
    g.add_argument("--promotion-interval", type=int, default=None,
                   help="cutlass: the FP8 2xacc example's mma_promotion_interval")
    g.add_argument("--kernel", default=None,
                   help="cublas, scaled-mm, cusparselt: the kernel name(s) torch's profiler showed (comma-separated); "
                        "gives the schedule (an unrecorded split is refused)")
    g.add_argument("--schedule", default=None, metavar="JSON",
                   help="run a stored schedule (refmodel.golden.Schedule JSON) instead of the library's model")
    g.add_argument("--splits", type=int, default=None, help="cublas without --kernel: the split-K count (default 1)")
    g.add_argument("--device", action="store_true",
                   help="compute on the GPU's CUDA cores (scaled-mm, or --schedule of a dense wgmma chain): the same "
                        "bits, for large GEMMs; needs a CUDA device with cupy")

