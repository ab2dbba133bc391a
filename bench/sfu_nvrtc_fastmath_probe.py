"""Probe: does NVRTC's cubin follow --use_fast_math?  The first H200 recording of the fast-math CUDA
spellings (built with NVRTC through gpu.kernels.runtime) gave outputs identical to the default build's,
while NVRTC's PTX of the same source and options was the fast-math PTX.  This prints, for sinf, the
cubins NVRTC and nvcc make with and without --use_fast_math and what each computes.

    python bench/sfu_nvrtc_fastmath_probe.py        # on an H200
"""

import hashlib

import numpy as np


def main() -> int:
    import cupy as cp

    from gpu.kernels import sfu as hw
    from gpu.kernels.runtime import PRELUDE, nvrtc_cubin

    x = np.array([1e6, 0.5, 1e-40, 100.0], np.float32).view(np.uint32)
    for name in ("cuda:sinf(x)", "cuda-fast:sinf(x)"):
        sp = hw._cuda_spelling(name)
        code = PRELUDE + hw.spelling_source(sp)
        opts = hw.CUDA_OPTIONS[sp.compiler]
        for how, blob in (("nvrtc", nvrtc_cubin(code, opts)), ("nvcc", hw.nvcc_cubin(code, opts))):
            path = f"/tmp/probe_{how}_{sp.compiler}.cubin"
            open(path, "wb").write(blob)
            k = cp.RawModule(path=path).get_function("sfu_k")
            d = cp.empty(x.size, cp.uint32)
            xa = cp.asarray(x)
            k((1,), (32,), (xa, xa, d, np.uint64(x.size)))
            print(f"{name:<22} {how:<6} options {' '.join(opts):<40} cubin {len(blob):6d} B "
                  f"sha {hashlib.sha256(blob).hexdigest()[:12]}  out {[hex(v) for v in d.get()]}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
