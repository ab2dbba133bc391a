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


def main(argv=None) -> int:
    import cupy as cp
    import numpy as np

    from gpu.kernels import float_probe as fp
    from gpu.kernels import runtime
    from gpu.kernels.runtime import device_info

    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    n = 4096
    x, y, z, w = fp.inputs(n)
    want = fp.ieee(x, y, z, w)
    builds = {"cupy RawModule(code=...)": cp.RawModule(code=runtime.PRELUDE + fp.SOURCE, options=("-arch=sm_90a",)),
              "wgref compile_module": runtime.compile_module(fp.SOURCE)}
    res = {"device": device_info(), "outputs_per_op": n, "ieee_subnormal_results": {}, "builds": {}}
    wf = want.view(np.float32)
    for j, op in enumerate(fp.OPS):
        res["ieee_subnormal_results"][op] = int(np.count_nonzero((np.abs(wf[:, j]) < 2.0 ** -126) & (wf[:, j] != 0)))
    for name, mod in builds.items():
        got = fp.run(mod, x, y, z, w)
        diff = {op: int(np.count_nonzero(got[:, j] != want[:, j])) for j, op in enumerate(fp.OPS)}
        flushed = {op: int(np.count_nonzero((got[:, j] & 0x7FFFFFFF == 0) & (want[:, j] & 0x7FFFFFFF != 0)))
                   for j, op in enumerate(fp.OPS)}
        res["builds"][name] = {"differ_from_ieee": diff, "flushed_to_zero": flushed}
        print(f"{name:<26} differ from IEEE: {diff}   flushed to zero: {flushed}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
