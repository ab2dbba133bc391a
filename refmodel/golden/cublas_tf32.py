"""cuBLAS's TF32 GEMMs (float32 inputs with ``torch.backends.cuda.matmul.allow_tf32 = True``) on Hopper,
as recorded on the H200 (fixtures/layers; the table below is fitted by ``python tools/cublas_tf32_fit.py``).

Every kernel first rounds both operands to tf32 with RNE (``cvt.rn.tf32.f32``: the low 13 bits of the
mantissa, ties to even — not truncated, not rounded away), then sums in tf32 tensor-core chains of 8-term
fused products (``wgmma ... k8 .tf32`` numerics; the ``cutlass_80_tensorop_s1688gemm`` kernels run
``mma.sync.m16n8k8`` with the same sums).  How K is cut and where C (or the bias) enters depends on the
kernel:

* ``sm90_xmma_gemm_f32f32_tf32f32_…_segment_k_off`` — one chain over all of K, then
  ``D = fma(alpha, acc, RN(beta * C))``;
* ``cutlass_80_tensorop_s1688gemm_…`` alone — *serial* split-K inside the kernel: S chunks of
  ``round_up(ceil(K/S), align)``, ``D = RN(beta * C)`` (or nothing), then ``D = fma(alpha, P_i, D)`` chunk
  by chunk (S = 1: one chain);
* ``cutlass_80_tensorop_s1688gemm_…`` + ``splitKreduce_kernel`` — the partials summed in split order, then
  ``D = fma(beta, C, RN(alpha * acc))``.

S is not in the kernel names: a call is modelled only at a recorded (kernel, M, N, K, epilogue) —
:data:`RECORDED` — and refused elsewhere.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..errors import InputError
from ..numerics.gemm import gemm
from ..numerics.promotion import canonical_nan_f32, fma_f32_array

INSTR = "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32"

#: (kernel, M, N, K, epilogue) -> (mode, S, align, consistent split counts when S is a guess) — fitted from
#: fixtures/layers by tools/cublas_tf32_fit.py.  epilogue: "bz" (no C), "bias" (F.linear's bias, addmm
#: with a 1-D C and alpha = beta = 1), "c" (a C with alpha, beta).
RECORDED: dict = {
    ('cutlass_80_tensorop_s1688gemm_64x128_32x6_tn_align4', 128, 256, 4096, 'bz'): ('splitKreduce', 32, 8, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4', 64, 128, 256, 'bz'): ('splitKreduce', 4, 8, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4', 128, 128, 512, 'bz'): ('splitKreduce', 8, 8, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4', 128, 128, 512, 'c'): ('splitKreduce', 8, 8, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4', 64, 192, 1024, 'bz'): ('splitKreduce', 16, 8, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4', 256, 128, 512, 'bz'): ('splitKreduce', 32, 8, (1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 13, 16, 22, 32, 64)),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4', 64, 64, 4096, 'bz'): ('splitKreduce', 22, 8, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4', 64, 64, 8192, 'bias'): ('splitKreduce', 5, 32, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4', 64, 64, 8192, 'bz'): ('splitKreduce', 52, 8, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4', 64, 64, 8192, 'c'): ('splitKreduce', 52, 8, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4', 64, 128, 256, 'bz'): ('serial', 1, 8, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4', 64, 128, 256, 'c'): ('serial', 1, 8, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4', 128, 64, 1024, 'bz'): ('splitKreduce', 16, 8, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4', 128, 128, 512, 'bias'): ('serial', 1, 8, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4', 16, 256, 2048, 'bias'): ('splitKreduce', 7, 32, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4', 16, 256, 2048, 'bz'): ('splitKreduce', 16, 8, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4', 64, 64, 8192, 'bias'): ('splitKreduce', 10, 16, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4', 64, 64, 8192, 'bz'): ('splitKreduce', 32, 8, (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 34, 35, 36, 37, 38, 40, 41, 43, 45, 47, 49, 52, 54, 57, 61, 64)),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4', 64, 192, 1024, 'bias'): ('splitKreduce', 7, 16, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4', 128, 256, 4096, 'bias'): ('serial', 10, 8, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4', 256, 128, 512, 'bias'): ('splitKreduce', 6, 16, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4', 512, 256, 256, 'bias'): ('serial', 1, 8, ()),
    ('cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4', 512, 256, 256, 'bz'): ('serial', 1, 8, ()),
}


def rn_tf32(x: np.ndarray) -> np.ndarray:
    """``cvt.rn.tf32.f32``: float32 to tf32 (10 mantissa bits) to nearest, ties to even, in a float32 whose
    low 13 bits are zero; a NaN is kept as it is."""
    x = np.ascontiguousarray(x, np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, r)


def kernel_of(names) -> tuple[str, str]:
    """(the GEMM kernel's name, mode 'xmma' / 'serial' / 'splitKreduce') from the profiler's kernel names."""
    names = [names] if isinstance(names, str) else list(names)
    skr = any("splitKreduce" in k for k in names)
    for k in names:
        if "sm90_xmma_gemm_f32f32_tf32f32" in k:
            if "segment_k_off" not in k and "segment_k" in k:
                raise InputError(f"the segment-K TF32 kernel {k[:80]} is not modelled")
            return k.split("(")[0], "xmma"
        if "cutlass_80_tensorop_s1688gemm" in k:
            name = k[k.index("cutlass_80_tensorop_s1688gemm"):].split(">")[0].split("(")[0]
            return name, "splitKreduce" if skr else "serial"
    raise InputError(f"no cuBLAS TF32 GEMM kernel (sm90_xmma tf32 or cutlass_80_tensorop_s1688gemm) among "
                     f"{', '.join(n[:50] for n in names)[:200]}")


def epilogue_key(bias: bool, c: bool, beta: float) -> str:
    return "bias" if bias else ("c" if c and beta != 0 else "bz")


def _chain(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    M = a.shape[0]
    A = np.pad(a, ((0, (-M) % 64), (0, 0)))
    N = b.shape[1]
    B = np.pad(b, ((0, 0), (0, (-N) % 8)))
    return np.asarray(gemm(A, B, instr=INSTR), np.float32)[:M, :N]


def run(a: np.ndarray, b: np.ndarray, *, mode: str, splits: int, align: int, c: Optional[np.ndarray],
        alpha: float, beta: float) -> np.ndarray:
    """D (float32) of one TF32 GEMM under ``mode`` with ``splits`` chunks (module doc); ``c`` already
    broadcast to (M, N) (the bias, or addmm's C), or None."""
    from .schedule import split_bounds

    a, b = rn_tf32(a), rn_tf32(b)
    K = a.shape[1]
    bnd = split_bounds(K, splits, align) if splits > 1 else [0, K]
    parts = [_chain(np.ascontiguousarray(a[:, k0:k1]), np.ascontiguousarray(b[k0:k1]))
             for k0, k1 in zip(bnd[:-1], bnd[1:])]
    al, be = np.float32(alpha), np.float32(beta)
    with np.errstate(all="ignore"):
        if c is not None and beta == 0:
            c = None
        if mode == "splitKreduce":
            acc = parts[0]
            for p in parts[1:]:
                acc = canonical_nan_f32(acc + p)
            d = canonical_nan_f32(al * acc) if c is None else fma_f32_array(be, c, canonical_nan_f32(al * acc))
            return canonical_nan_f32(d)
        d = None if c is None else canonical_nan_f32(be * np.asarray(c, np.float32))
        for p in parts:
            d = canonical_nan_f32(al * p) if d is None else fma_f32_array(al, p, d)
        return canonical_nan_f32(d)


def tf32_matmul(a, b, *, kernel, bias=None, c=None, alpha: float = 1.0, beta: float = 1.0) -> np.ndarray:
    """cuBLAS's TF32 GEMM of float32 ``a`` (M, K) and ``b`` (K, N) for the kernel(s) torch's profiler
    showed, with F.linear's ``bias`` or addmm's ``c``/``alpha``/``beta``: float32 D, bit for bit at the
    recorded shapes (:data:`RECORDED`), refused elsewhere."""
    import warnings

    name, mode = kernel_of(kernel)
    M, K = a.shape
    N = b.shape[1]
    epi = epilogue_key(bias is not None, c is not None, beta)
    cc = None
    if bias is not None:
        cc, alpha, beta = np.broadcast_to(np.asarray(bias, np.float32), (M, N)), 1.0, 1.0
    elif c is not None:
        cc = np.broadcast_to(np.asarray(c, np.float32), (M, N))
    if mode == "xmma":
        return run(a, b, mode="serial", splits=1, align=8, c=cc, alpha=alpha, beta=beta)
    key = (name, int(M), int(N), int(K), epi)
    if key not in RECORDED:
        raise InputError(f"cuBLAS's TF32 kernel {name[:60]} at {M}x{N}x{K} ({epi} epilogue) was not recorded: its "
                         f"split-K count (not in the kernel name) is not known")
    rec_mode, S, align, consistent = RECORDED[key]
    if rec_mode != mode:
        raise InputError(f"the recording of {name[:60]} at {M}x{N}x{K} ran {rec_mode}, these kernel names say {mode}")
    if consistent:
        from .kernel_regions import ScheduleWarning

        warnings.warn(f"the split count of this TF32 call was not determined by its recording (consistent: "
                      f"{', '.join(map(str, consistent[:8]))}{'...' if len(consistent) > 8 else ''}): S = {S} is "
                      f"assumed", ScheduleWarning, stacklevel=3)
    return run(a, b, mode=mode, splits=S, align=align, c=cc, alpha=alpha, beta=beta)
