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
    except (RuntimeError, ValueError, NotImplementedError):            # torch refused: the model must too
        with pytest.raises(WgrefError):
            L.golden(spec, None)
        return
    kernels = [k for k in kernels if not k.startswith(("Memset", "Memcpy"))]
    try:
        got = L.golden(spec, kernels)
    except WgrefError:
        return                                                          # refused in one sentence: allowed
    _assert_bits(got[0], outs["d"], f"{L.label(spec)} ({kernels[:2]})")


def _assert_bits(got, want, label):
    """got (the model's typed array) has want's bits (the recorder's raw view), every one."""
    g = np.ascontiguousarray(got).view(want.dtype).reshape(want.shape)
    bad = int(np.count_nonzero(g != want))
    assert bad == 0, f"{label}: {bad} of {want.size} outputs differ"


def _random_specs(n=60, seed=77):
    """Shapes, modes and options drawn outside the recorded grid (independent of the fixtures)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        scaling = ("tensor", "row", "block_1x128_128x128", "block_128x128_1x128", "block_1x128_1x128")[i % 5]
        fa, fb = (("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3"))[int(rng.integers(3))]
        od = ("f32", "bf16", "f16")[int(rng.integers(3))]
        bias = None if od == "f32" or rng.random() < 0.4 else od
        out.append({"op": "scaled_mm", "seed": 5000 + i, "scaling": scaling, "fmt_a": fa, "fmt_b": fb, "out": od,
                    "fast": bool(rng.integers(2)) and not scaling.startswith("block"), "bias": bias,
                    "bias_class": ("normal", "special")[int(rng.integers(2))],
                    "M": 64 * int(rng.integers(1, 9)), "N": 16 * int(rng.integers(1, 33)),
                    "K": 128 * int(rng.integers(1, 33)), "family": L.FAMILIES[int(rng.integers(len(L.FAMILIES)))],
                    "scale_class": L.SCALE_CLASSES[int(rng.integers(len(L.SCALE_CLASSES)))]})
    for i in range(n // 2):
        op = ("linear", "addmm", "baddbmm")[i % 3]
        dt = ("bf16", "f16")[int(rng.integers(2))]
        M, N, K = 16 * int(rng.integers(1, 33)), 16 * int(rng.integers(1, 33)), 64 * int(rng.integers(1, 65))
        s = {"op": op, "seed": 6000 + i, "dtype": dt, "M": M, "N": N, "K": K, "family": "narrow",
             "bias_class": "normal"}
        if op == "linear":
            s["bias"] = bool(rng.integers(2))
        else:
            s["alpha"], s["beta"] = L.ALPHA_BETA[int(rng.integers(len(L.ALPHA_BETA)))]
            if op == "addmm":
                s["c"] = ("full", "row", "col")[int(rng.integers(3))]
            else:
                s["B"] = int(rng.integers(2, 5))
        out.append(s)
    return out


RANDOM = _random_specs()


@pytest.mark.parametrize("spec", RANDOM, ids=[L.label(s) for s in RANDOM])
def test_random_shapes_match_or_are_refused(spec):
    test_layer_call_matches_or_is_refused(spec)


TORCHAO = [{"op": "float8_linear", "seed": 900 + i, "recipe": r, "M": M, "K": K, "N": N, "family": f}
           for i, (r, (M, K, N), f) in enumerate([(r, s, f) for r in ("tensorwise", "rowwise", "rowwise_with_gw_hp")
                                                  for s in ((256, 384, 320), (192, 640, 448))
                                                  for f in ("narrow", "wide")])]
TORCHAO += [{"op": "float8_inference", "seed": 950 + i, "granularity": g, "M": 192, "K": 384, "N": 320, "bias": b,
             "family": "narrow"} for i, (g, b) in enumerate([(g, b) for g in ("per_tensor", "per_row")
                                                             for b in (False, True)])]


@pytest.mark.parametrize("spec", TORCHAO, ids=[L.label(s) for s in TORCHAO])
def test_torchao_layers_at_new_shapes(spec):
    pytest.importorskip("torchao")
    from gpu.record import layers as R

    outs, kernels, _ = R.run_float8(torch, spec)
    try:
        got = L.golden(spec, kernels)
    except WgrefError:
        return
    for name, g in zip(sorted(outs), got):
        _assert_bits(g, outs[name], f"{L.label(spec)} {name}")


def _odd_specs(n=40, seed=91):
    """torch's whole shape domain: any M, N and K multiples of 16 (zero-padded by the model)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        scaling = ("tensor", "row", "block_1x128_128x128", "block_128x128_1x128", "block_1x128_1x128")[i % 5]
        out.append({"op": "scaled_mm", "seed": 7000 + i, "scaling": scaling, "fmt_a": "e4m3",
                    "fmt_b": ("e4m3", "e5m2")[i % 2], "out": ("bf16", "f16", "f32")[i % 3],
                    "fast": bool(i % 2) and not scaling.startswith("block"), "bias": None, "bias_class": "normal",
                    "M": int(rng.integers(1, 300)), "N": 16 * int(rng.integers(1, 20)),
                    "K": 16 * int(rng.integers(1, 80)), "family": "narrow", "scale_class": "random"})
    return out


ODD = _odd_specs()
TORCHAO_ODD = [{"op": "float8_linear", "seed": 990 + i, "recipe": r, "M": 16 * m, "K": 16 * k, "N": 16 * n,
                "family": "narrow"} for i, (r, (m, k, n)) in
               enumerate([(r, s) for r in ("tensorwise", "rowwise", "rowwise_with_gw_hp")
                          for s in ((5, 7, 3), (11, 9, 13))])]


@pytest.mark.parametrize("spec", ODD, ids=[L.label(s) for s in ODD])
def test_odd_shapes_match_or_are_refused(spec):
    test_layer_call_matches_or_is_refused(spec)


@pytest.mark.parametrize("spec", TORCHAO_ODD, ids=[L.label(s) for s in TORCHAO_ODD])
def test_torchao_layers_at_odd_shapes(spec):
    test_torchao_layers_at_new_shapes(spec)
