"""Golden models of library kernels: the schedule of refmodel instructions that reproduces a
library's output bit for bit (recorded from the library itself on the H200)."""

from .cublas import cublas_matmul, cublas_schedule
from .cutlass import cutlass_dense_gemm
from .triton import triton_matmul

__all__ = ["cublas_matmul", "cublas_schedule", "cutlass_dense_gemm", "triton_matmul"]
