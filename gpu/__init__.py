"""wgref GPU backend: runs the real sm_90a instructions (and real library calls) through cupy.

Four parts, imported in one direction (``tests/test_layering.py`` enforces it)::

    kernels   <-  libraries  <-  record
                             <-  fuzz        (record and fuzz never import each other)

* :mod:`gpu.kernels`   — what runs on the GPU: CUDA sources and launchers, NVRTC, device discovery;
* :mod:`gpu.libraries` — runners of real library calls (Triton, cuBLAS through torch, CUTLASS DSL, DeepGEMM);
* :mod:`gpu.record`    — recorders that freeze hardware results as fixtures (``python -m gpu.record.<kind>``);
* :mod:`gpu.fuzz`      — fuzz campaigns: CPU and GPU engines, library targets, user kernels, shards, Ray.

cupy is imported lazily; importing this package never needs a GPU.
"""

from gpu.kernels.runtime import compile_module, device_info, gpu_available, require_device

__all__ = ["device_info", "require_device", "compile_module", "gpu_available"]
