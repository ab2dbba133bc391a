"""Golden models of library kernels: the schedule of refmodel instructions that reproduces a
library's output bit for bit (recorded from the library itself on the H200)."""

from .triton import triton_matmul

__all__ = ["triton_matmul"]
