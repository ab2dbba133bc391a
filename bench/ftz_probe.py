"""Why gpu.kernels.runtime compiles with NVRTC itself: the same float32 kernel (fma, mul, add and a
double -> float conversion with subnormal results) built through cupy's ``RawModule(code=...)`` path,
which appends ``-ftz=true``, and through ``runtime.compile_module`` (``-ftz=false``); each result compared
with IEEE float32 (numpy; refmodel.fma_f32 for the fused multiply-add).

    python bench/ftz_probe.py [--json F]      (on the H200)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

OPS = ("__fmaf_rn", "__fmul_rn", "x * y", "__fadd_rn", "(float)double")


def main(argv=None) -> int:
    import cupy as cp
    import numpy as np

    import refmodel
    from gpu.kernels import runtime
    from gpu.kernels.runtime import device_info

    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    rng = np.random.default_rng(7)
    n = 4096
    x = (rng.uniform(1, 2, n) * 2.0 ** rng.integers(-80, -60, n)).astype(np.float32)
    y = (rng.uniform(1, 2, n) * 2.0 ** rng.integers(-80, -60, n)).astype(np.float32)
    z = (rng.uniform(-1, 1, n) * 2.0 ** -128).astype(np.float32)
    w = rng.uniform(1, 2, n) * 2.0 ** rng.integers(-152, -120, n)
    fma = np.array([refmodel.fma_f32(u, v, t) for u, v, t in zip(x, y, z)], np.float32)
    want = np.stack([fma, x * y, x * y, z + np.float32(-0.75) * z, w.astype(np.float32)], 1).view(np.uint32)
    builds = {"cupy RawModule(code=...)": cp.RawModule(code=runtime.PRELUDE + runtime.FLOAT_PROBE_SOURCE, options=("-arch=sm_90a",)),
              "wgref compile_module": runtime.compile_module(runtime.FLOAT_PROBE_SOURCE)}
    res = {"device": device_info(), "outputs_per_op": n, "ieee_subnormal_results": {}, "builds": {}}
    wf = want.view(np.float32)
    for j, op in enumerate(OPS):
        res["ieee_subnormal_results"][op] = int(np.count_nonzero((np.abs(wf[:, j]) < 2.0 ** -126) & (wf[:, j] != 0)))
    for name, mod in builds.items():
        out = cp.zeros(5 * n, cp.float32)
        mod.get_function("wgref_float_ops")(((n + 127) // 128,), (128,),
                                             (cp.asarray(x), cp.asarray(y), cp.asarray(z), cp.asarray(w), out, np.int32(n)))
        got = cp.asnumpy(out).reshape(n, 5).view(np.uint32)
        diff = {op: int(np.count_nonzero(got[:, j] != want[:, j])) for j, op in enumerate(OPS)}
        flushed = {op: int(np.count_nonzero((got[:, j] & 0x7FFFFFFF == 0) & (want[:, j] & 0x7FFFFFFF != 0)))
                   for j, op in enumerate(OPS)}
        res["builds"][name] = {"differ_from_ieee": diff, "flushed_to_zero": flushed}
        print(f"{name:<26} differ from IEEE: {diff}   flushed to zero: {flushed}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
