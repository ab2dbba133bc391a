"""Triton on the GPU: the textbook tiled matmul, its launch on torch tensors, the errors of a refusal.

:func:`tiled_matmul_kernel` is the kernel whose recordings fixtures/triton holds (gpu.record.triton
records it, gpu.fuzz.library fuzzes it through gpu.libraries.torch_cublas.TorchRunner); its text is
what Triton compiled for those fixtures, so it changes only with a re-recording.
:func:`tiled_matmul` launches it; :func:`triton_refusals` are the exceptions Triton raises for a
configuration it will not build.  ``triton`` and ``torch`` are imported when first used.
"""

from __future__ import annotations

_KERNEL = None
_KERNEL_F16ACC = None


def tiled_matmul_kernel():
    """The textbook Triton tiled matmul (built once): ``acc = tl.zeros``; per BLOCK_K slice
    ``acc = tl.dot(a, b, acc, ...)`` (``IMP == -1``: no ``max_num_imprecise_acc`` argument; ``PREC ==
    "none"``: no ``input_precision``); store ``acc.to(OUT)``.  Recorded by gpu.record.triton and
    fuzzed by gpu.fuzz.library."""
    global _KERNEL
    if _KERNEL is None:
        import triton
        import triton.language as tl

        @triton.jit
        def mm(a_ptr, b_ptr, c_ptr, Mx, Nx, Kx, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr,
               BK: tl.constexpr, PREC: tl.constexpr, IMP: tl.constexpr, OUT: tl.constexpr):
            pid_m = tl.program_id(0)
            pid_n = tl.program_id(1)
            rm = pid_m * BM + tl.arange(0, BM)
            rn = pid_n * BN + tl.arange(0, BN)
            rk = tl.arange(0, BK)
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for k in range(0, Kx, BK):
                a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak)
                b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
                if IMP == -1:
                    acc = tl.dot(a, b, acc)
                elif PREC == "none":
                    acc = tl.dot(a, b, acc, max_num_imprecise_acc=IMP)
                else:
                    acc = tl.dot(a, b, acc, input_precision=PREC, max_num_imprecise_acc=IMP)
            tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(OUT))

        _KERNEL = mm
    return _KERNEL


def tiled_matmul_f16acc_kernel():
    """The tiled matmul with an f16 accumulator (built once): ``acc = tl.zeros(..., tl.float16)``; per
    BLOCK_K slice ``acc = tl.dot(a, b, acc, out_dtype=tl.float16)``; store ``acc.to(OUT)``."""
    global _KERNEL_F16ACC
    if _KERNEL_F16ACC is None:
        import triton
        import triton.language as tl

        @triton.jit
        def mm16(a_ptr, b_ptr, c_ptr, Mx, Nx, Kx, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr,
                 BN: tl.constexpr, BK: tl.constexpr, OUT: tl.constexpr):
            pid_m = tl.program_id(0)
            pid_n = tl.program_id(1)
            rm = pid_m * BM + tl.arange(0, BM)
            rn = pid_n * BN + tl.arange(0, BN)
            rk = tl.arange(0, BK)
            acc = tl.zeros((BM, BN), dtype=tl.float16)
            for k in range(0, Kx, BK):
                a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak)
                b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
                acc = tl.dot(a, b, acc, out_dtype=tl.float16)
            tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(OUT))

        _KERNEL_F16ACC = mm16
    return _KERNEL_F16ACC


def tiled_matmul_f16acc(a, b, *, out: str, block_m: int, block_n: int, block_k: int, num_warps: int):
    """Launch :func:`tiled_matmul_f16acc_kernel` as :func:`tiled_matmul` does: ``(c, compiled kernel)``."""
    return _launch(tiled_matmul_f16acc_kernel(), a, b, out, block_m, block_n, num_warps, BK=block_k)


def tiled_matmul(a, b, *, out: str, block_m: int, block_n: int, block_k: int, prec: str, imp: int,
                 num_warps: int):
    """Launch :func:`tiled_matmul_kernel` on CUDA torch tensors ``a`` (M, K) and ``b`` (K, N), grid
    (M / block_m, N / block_n), into a new (M, N) tensor of ``out`` ("f32", "bf16", "f16"):
    ``(c, the compiled kernel)`` (its ``.asm`` holds the PTX).  ``prec`` and ``imp`` are the kernel's
    PREC and IMP ("none" / -1: the argument is left out of ``tl.dot``).  Does not synchronize."""
    return _launch(tiled_matmul_kernel(), a, b, out, block_m, block_n, num_warps, BK=block_k, PREC=prec, IMP=imp)


def _launch(kern, a, b, out: str, block_m: int, block_n: int, num_warps: int, **constexprs):
    """One launch of a tiled-matmul kernel over an (M / block_m, N / block_n) grid into a new output."""
    import torch
    import triton.language as tl

    M, K = a.shape
    N = b.shape[1]
    t_out, tl_out = {"f32": (torch.float32, tl.float32), "bf16": (torch.bfloat16, tl.bfloat16),
                     "f16": (torch.float16, tl.float16)}[out]
    c = torch.empty(M, N, device="cuda", dtype=t_out)
    compiled = kern[(M // block_m, N // block_n)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                                                  b.stride(1), c.stride(0), c.stride(1), BM=block_m, BN=block_n,
                                                  OUT=tl_out, num_warps=num_warps, **constexprs)
    return c, compiled


def triton_refusals() -> tuple:
    """Triton's exception types for a configuration it will not build (compile error, out of resources)."""
    found = []
    for mod, cls in (("triton.compiler.errors", "CompilationError"), ("triton.runtime.errors", "OutOfResources")):
        try:
            found.append(getattr(__import__(mod, fromlist=[cls]), cls))
        except (ImportError, AttributeError):
            pass
    return tuple(found)


def version() -> str:
    """Triton's version string."""
    import triton

    return triton.__version__


_KERNEL_LOWERING = None


def lowering_matmul_kernel():
    """The tiled matmul of the lowering survey (gpu.record.triton_lowering), built once: like
    :func:`tiled_matmul_kernel` with the accumulation pattern and accumulator type as constexprs:
    ``PATTERN == "dot_acc"``: ``acc = tl.dot(a, b, acc, ...)``; ``"add"``: ``acc += tl.dot(a, b, ...)``
    (Inductor's scaled-mm template without fast accumulation); ``ACC``: "f32" or "f16" (``out_dtype`` of
    ``tl.dot``).  ``IMP == -1``: no ``max_num_imprecise_acc``; ``PREC == "none"``: no ``input_precision``."""
    global _KERNEL_LOWERING
    if _KERNEL_LOWERING is None:
        import triton
        import triton.language as tl

        @triton.jit
        def mm_lowering(a_ptr, b_ptr, c_ptr, Mx, Nx, Kx, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr,
                        BN: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr, IMP: tl.constexpr, OUT: tl.constexpr,
                        ACC: tl.constexpr, PATTERN: tl.constexpr):
            pid_m = tl.program_id(0)
            pid_n = tl.program_id(1)
            rm = pid_m * BM + tl.arange(0, BM)
            rn = pid_n * BN + tl.arange(0, BN)
            rk = tl.arange(0, BK)
            acc_t = tl.float16 if ACC == "f16" else tl.float32
            acc = tl.zeros((BM, BN), dtype=acc_t)
            for k in range(0, Kx, BK):
                a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak)
                b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
                if PATTERN == "dot_acc":
                    if IMP == -1:
                        if PREC == "none":
                            acc = tl.dot(a, b, acc, out_dtype=acc_t)
                        else:
                            acc = tl.dot(a, b, acc, input_precision=PREC, out_dtype=acc_t)
                    elif PREC == "none":
                        acc = tl.dot(a, b, acc, max_num_imprecise_acc=IMP, out_dtype=acc_t)
                    else:
                        acc = tl.dot(a, b, acc, input_precision=PREC, max_num_imprecise_acc=IMP, out_dtype=acc_t)
                else:
                    if IMP == -1:
                        if PREC == "none":
                            acc += tl.dot(a, b, out_dtype=acc_t)
                        else:
                            acc += tl.dot(a, b, input_precision=PREC, out_dtype=acc_t)
                    elif PREC == "none":
                        acc += tl.dot(a, b, max_num_imprecise_acc=IMP, out_dtype=acc_t)
                    else:
                        acc += tl.dot(a, b, input_precision=PREC, max_num_imprecise_acc=IMP, out_dtype=acc_t)
            tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(OUT))

        _KERNEL_LOWERING = mm_lowering
    return _KERNEL_LOWERING
