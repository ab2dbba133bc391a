"""Whole FP8 layers on the H200 against the golden models, live: fresh calls of every torch._scaled_mm
mode (bias, out dtypes, FP8 pairs), cuBLAS epilogues and batches, and the Triton matmul on every FP8 pair
(refmodel.verify.layer_calls specs with new seeds), each bit for bit — or refused by the model, never
silently wrong."""

import numpy as np
import pytest

from refmodel.errors import WgrefError
from refmodel.verify import layer_calls as L

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)


def _fresh(specs, stride, salt=1000):
    return [{**s, "seed": s["seed"] + salt} for s in specs[::stride]]


SPECS = (_fresh(L.scaled_mm_specs()[:360], 3) + _fresh(L.cublas_specs(), 2) + _fresh(L.triton_specs(), 1))


@pytest.mark.parametrize("spec", SPECS, ids=[L.label(s) for s in SPECS])
def test_layer_call_matches_or_is_refused(spec):
    from gpu.record import layers as R

    try:
        if spec["op"] == "scaled_mm":
            outs, kernels = R.run_scaled_mm(torch, spec)
        elif spec["op"] == "triton":
            outs, kernels = R.run_triton(torch, spec)
        else:
            outs, kernels = R.run_cublas(torch, spec)
    except (RuntimeError, ValueError, NotImplementedError) as e:       # torch refused: the model must too
        with pytest.raises(WgrefError):
            L.golden(spec, None)
        return
    kernels = [k for k in kernels if not k.startswith(("Memset", "Memcpy"))]
    try:
        got = L.golden(spec, kernels)
    except WgrefError:
        return                                                          # refused in one sentence: allowed
    want = outs["d"]
    g = np.ascontiguousarray(got[0]).view(want.dtype).reshape(want.shape)
    bad = int(np.count_nonzero(g != want))
    assert bad == 0, f"{L.label(spec)}: {bad} of {want.size} outputs differ ({kernels[:2]})"
