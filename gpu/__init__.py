"""wgref GPU backend: runs the real sm_90a instructions through cupy + NVRTC.

cupy is imported lazily; importing this package never needs a GPU.
"""

from .runtime import device_info, require_device, compile_module, gpu_available

__all__ = ["device_info", "require_device", "compile_module", "gpu_available"]
