"""Golden models of library kernels: the schedule of refmodel instructions that reproduces a
library's output bit for bit (recorded from the library itself on the H200), each stated as a
:class:`Schedule` and run by its one executor."""

from .cublas import cublas_matmul, cublas_schedule, matmul_schedule
from .cusparselt import cusparselt_matmul, cusparselt_schedule
from .cutlass import cutlass_dense_gemm, cutlass_schedule
from .fp8_schedule import fp8_kernel_schedule
from .kernel_regions import ScheduleWarning
from .schedule import Schedule, load_schedule
from .torch_scaled_mm import scaled_mm, scaled_mm_schedule
from .triton import triton_matmul, triton_schedule
from .triton_lowering import TritonLowering, triton_lowering
from .xla import xla_dot, xla_schedule

__all__ = ["xla_dot", "xla_schedule", "Schedule", "load_schedule", "ScheduleWarning", "cublas_matmul", "cublas_schedule", "matmul_schedule",
           "cusparselt_matmul", "cusparselt_schedule", "cutlass_dense_gemm", "cutlass_schedule",
           "fp8_kernel_schedule", "scaled_mm", "scaled_mm_schedule", "triton_matmul", "triton_schedule",
           "triton_lowering", "TritonLowering"]
