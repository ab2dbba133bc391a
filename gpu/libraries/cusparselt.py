"""cuSPARSELt on the GPU through PyTorch: 2:4 semi-structured sparse times dense.

Two entry points, as PyTorch exposes them:

* :func:`semi_structured_mm` — ``torch.sparse.to_sparse_semi_structured(a)`` then ``torch.mm(a_s, b)``
  (f16 / bf16; PyTorch picks cuSPARSELt when it is available, CUTLASS otherwise: the kernel names
  say which ran);
* :func:`cslt_sparse_mm` — ``torch._cslt_compress(a)`` then ``torch._cslt_sparse_mm(a_c, b, ...)``
  (FP8 e4m3 with an f32/bf16 output, and f16/bf16), with the optional ``alg_id`` / ``split_k``
  arguments of the cuSPARSELt matmul plan passed through where this torch accepts them.

``a`` is the (M, K) dense matrix, already 2:4 pruned along K (PyTorch's convention), ``b`` is (K, N).
Both return ``(output tensor, CUDA kernel names from torch's profiler)``.
"""

from __future__ import annotations

from gpu.libraries.torch_cublas import _torch, profiled


def version() -> str:
    """cuSPARSELt's version as torch reports it (an int like 600 for 0.6.0), or 'unavailable'."""
    torch = _torch()
    try:
        return str(torch.backends.cusparselt.version())
    except Exception as e:  # torch built without cuSPARSELt
        return f"unavailable ({type(e).__name__})"


def semi_structured_mm(a, b, *, force_cutlass: bool = False):
    """``torch.mm(to_sparse_semi_structured(a), b)`` under the profiler: (d, kernel names)."""
    torch = _torch()
    from torch.sparse import SparseSemiStructuredTensor, to_sparse_semi_structured

    old = SparseSemiStructuredTensor._FORCE_CUTLASS
    SparseSemiStructuredTensor._FORCE_CUTLASS = bool(force_cutlass)
    try:
        a_s = to_sparse_semi_structured(a)
        return profiled(lambda: torch.mm(a_s, b))
    finally:
        SparseSemiStructuredTensor._FORCE_CUTLASS = old


def cslt_sparse_mm(a, b, *, out_dtype=None, alg_id: int | None = None, split_k: int | None = None):
    """``torch._cslt_sparse_mm(torch._cslt_compress(a), b, out_dtype=..., alg_id=..., split_k=...)``
    under the profiler: (d, kernel names).  ``alg_id`` / ``split_k`` None: not passed."""
    torch = _torch()
    a_c = torch._cslt_compress(a)
    kw = {}
    if out_dtype is not None:
        kw["out_dtype"] = out_dtype
    if alg_id is not None:
        kw["alg_id"] = int(alg_id)
    if split_k is not None:
        kw["split_k"] = int(split_k)
    return profiled(lambda: torch._cslt_sparse_mm(a_c, b, **kw))
