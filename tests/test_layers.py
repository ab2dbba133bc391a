"""The whole-layer golden models on the CPU: torch._scaled_mm's scaling modes and refusals, cuBLAS's
epilogues, the Triton mixed-FP8 regression — properties and identities (the H200 recordings are
replayed in tests/test_fixtures.py through refmodel.verify.replay_layers)."""

import ml_dtypes
import numpy as np
import pytest

from refmodel.dtypes import bits_of
from refmodel.errors import DTypeError, InputError, WgrefError
from refmodel.golden import cublas_matmul, scaled_mm, triton_matmul
from refmodel.golden.cublas import EPILOGUES, epilogue_kind
from refmodel.golden.torch_scaled_mm import kernel_mode
from refmodel.numerics import scaled_mm as smm
from refmodel.numerics.gemm import gemm
from refmodel.verify import layer_calls as L

E4, E5, BF = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.bfloat16


def _ab(M=64, N=32, K=256, fa=E4, fb=E4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((M, K)).astype(fa), rng.standard_normal((N, K)).astype(fb)


@pytest.mark.parametrize("mode", list(smm.SCALINGS))
def test_scale_shapes_pick_the_mode_torch_picks(mode):
    M, N, K = 256, 256, 512
    sa, sb = smm.scale_shapes(mode, M, N, K)
    assert smm.scaling_mode(sa, sb, M, N, K) == mode


def test_unknown_scale_shapes_are_refused_naming_every_mode():
    a, b = _ab()
    with pytest.raises(InputError, match="match no scaling mode.*block_1x128_1x128"):
        scaled_mm(a, b, np.ones((64, 3), np.float32), np.ones((1, 32), np.float32))


def test_block_scales_of_one_equal_the_unscaled_promoted_chain():
    a, b = _ab(M=128, N=128, K=512)
    ref = scaled_mm(a, b, np.float32(1), np.float32(1), out_dtype="f32")
    for mode in ("block_1x128_128x128", "block_128x128_1x128", "block_1x128_1x128"):
        sa, sb = smm.scale_shapes(mode, 128, 128, 512)
        d = scaled_mm(a, b, np.ones(sa, np.float32), np.ones(sb, np.float32), out_dtype="f32")
        assert np.array_equal(bits_of(d), bits_of(ref)), mode


def test_block_1x128_1x128_rounds_the_a_scale_product_first():
    """acc = fma(sb, RN(sa * P), acc): with the second stage's scales 0, the output is RN(sb * RN(sa * P0)) + 0.
    (With K = 128 the 1x128 shapes (M, 1), (1, N) are row-wise ones, torch's first choice.)"""
    a, b = _ab(M=64, N=16, K=256, seed=3)
    sa = np.zeros((64, 2), np.float32)
    sa[:, 0] = np.float32(1.1)
    sb = np.full((2, 16), np.float32(0.7), np.float32)
    p = np.asarray(gemm(a[:, :128], np.ascontiguousarray(b[:, :128].T),
                        instr="wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"), np.float32)
    want = (np.float32(0.7) * (np.float32(1.1) * p).astype(np.float32)).astype(np.float32) + np.float32(0)
    got = scaled_mm(a, b, sa, sb, out_dtype="f32")
    assert np.array_equal(bits_of(got), bits_of(want))
    with pytest.raises(AssertionError):                      # RN(sa*sb) first would differ on this data
        assert np.array_equal(bits_of(got), bits_of((np.float32(1.1 * np.float32(0.7)) * p).astype(np.float32)))


def test_per_tensor_epilogue_adds_zero_and_nans_are_canonical():
    acc = np.array([[-1.0, 2.0, np.inf]], np.float32)
    d = smm.epilogue(acc, "tensor", np.float32(0), np.float32(3))
    assert bits_of(d).tolist() == [[0, 0, 0x7FFFFFFF]]            # -0 -> +0; 0 * inf -> canonical NaN
    r = smm.epilogue(acc, "row", np.zeros((1, 1), np.float32), np.ones((1, 3), np.float32))
    assert bits_of(r).tolist()[0][:1] == [0x80000000]              # row-wise keeps the -0


def test_bias_is_added_in_float32_after_the_scales():
    a, b = _ab(M=64, N=32, K=128, seed=5)
    bias = np.linspace(-300, 300, 32).astype(BF)
    d0 = scaled_mm(a, b, np.float32(0.5), np.float32(3), out_dtype="f32")
    d = scaled_mm(a, b, np.float32(0.5), np.float32(3), bias=bias, out_dtype="bf16")
    want = (d0 + bias.astype(np.float32)).astype(np.float32).astype(BF)
    assert np.array_equal(bits_of(d), bits_of(want))


@pytest.mark.parametrize("call, match", [
    (dict(fmt_a="e5m2", fmt_b="e5m2"), "two e5m2"),
    (dict(bias=np.zeros(32, BF), out_dtype="f32"), "bias with out_dtype f32"),
    (dict(bias=np.zeros(32, np.float16), out_dtype="bf16"), "bias must be bfloat16"),
    (dict(bias=np.zeros(31, BF), out_dtype="bf16"), r"bias must have shape \(N,\)"),
])
def test_torchs_own_refusals_are_the_models(call, match):
    a, b = _ab(fa=E5 if call.get("fmt_a") == "e5m2" else E4, fb=E5 if call.get("fmt_b") == "e5m2" else E4)
    with pytest.raises(WgrefError, match=match):
        scaled_mm(a, b, np.float32(1), np.float32(1), **call)


def test_fast_accum_with_block_scales_is_refused():
    a, b = _ab(M=64, N=32, K=256)
    sa, sb = smm.scale_shapes("block_1x128_1x128", 64, 32, 256)
    with pytest.raises(InputError, match="use_fast_accum=True with block-wise"):
        scaled_mm(a, b, np.ones(sa, np.float32), np.ones(sb, np.float32), use_fast_accum=True)


def test_128x128_scales_read_past_the_tensor_are_refused():
    a, b = _ab(M=256, N=32, K=256)
    sa, sb = smm.scale_shapes("block_128x128_1x128", 256, 32, 256)
    with pytest.raises(InputError, match="leading dimension rounded up to 4"):
        scaled_mm(a, b, np.ones(sa, np.float32), np.ones(sb, np.float32))
    sa, sb = smm.scale_shapes("block_128x128_1x128", 128, 32, 256)       # one 128-block: defined
    scaled_mm(a[:128], b, np.ones(sa, np.float32), np.ones(sb, np.float32))


def test_1x128_a_scales_need_m_a_multiple_of_4():
    a, b = _ab(M=64, N=32, K=256)
    sa, sb = smm.scale_shapes("block_1x128_1x128", 39, 32, 256)
    with pytest.raises(InputError, match="M = 39 not a multiple of 4"):
        scaled_mm(a[:39], b, np.ones(sa, np.float32), np.ones(sb, np.float32))
    sa, sb = smm.scale_shapes("block_1x128_1x128", 40, 32, 200)            # M % 4 == 0, a K tail: modelled
    d = scaled_mm(a[:40, :208], b[:, :208], np.ones((40, 2), np.float32), np.ones((2, 32), np.float32))
    assert d.shape == (40, 32)


def test_kernel_names_say_the_mode_and_contradictions_are_refused():
    assert kernel_mode("nvjet_sm90_qqtst_128x128_128x6_1x1_v_bz_coopA_algo2_Ablk128_Bvec128_TNN") == "block_1x128_128x128"
    assert kernel_mode("nvjet_sm90_qqtst_64x8_h_bz_ovscale_TNT") == "row"
    a, b = _ab()
    with pytest.raises(InputError, match="runs row scaling"):
        scaled_mm(a, b, np.float32(1), np.float32(1), kernel="nvjet_sm90_qqtst_64x8_h_bz_ovscale_TNT")


def test_cublas_epilogue_kinds_follow_the_recorded_rules():
    assert epilogue_kind(split=False, bias=True, c=False, alpha=1, beta=1) == "bias"
    assert epilogue_kind(split=False, bias=False, c=True, alpha=1, beta=1) == "badd"
    assert epilogue_kind(split=True, bias=False, c=True, alpha=1, beta=1) == "bx_splitK"
    assert epilogue_kind(split=False, bias=False, c=True, alpha=2, beta=0.5) == "bx"
    assert epilogue_kind(split=False, bias=False, c=True, alpha=1, beta=0) == "bz"
    with pytest.raises(InputError, match="not recorded"):
        epilogue_kind(split=False, bias=False, c=False, alpha=2, beta=0)
    with pytest.raises(InputError, match="runs the 'bx' epilogue"):
        epilogue_kind(split=False, bias=False, c=True, alpha=1, beta=1, kernel="nvjet_sm90_tst_64x8_h_bx_NNT")
    assert set(EPILOGUES) == {"bz", "bias", "badd", "bx", "bx_splitK"}


def test_badd_adds_c_to_the_rounded_output_and_bx_fuses():
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((64, 64)) * 8).astype(BF)
    b = (rng.standard_normal((64, 16)) * 8).astype(BF)
    c = (rng.standard_normal((64, 16)) * 100).astype(BF)
    acc = cublas_matmul(a, b, out_dtype="f32")
    badd = cublas_matmul(a, b, c=c)
    want = (acc.astype(BF).astype(np.float32) + c.astype(np.float32)).astype(BF)
    assert np.array_equal(bits_of(badd), bits_of(want))
    one_chain = (acc + c.astype(np.float32)).astype(BF)
    assert not np.array_equal(bits_of(badd), bits_of(one_chain))      # the data tells the two apart


def test_bx_epilogue_is_one_fma_per_output_and_keeps_the_shape():
    rng = np.random.default_rng(8)
    a = rng.standard_normal((64, 64)).astype(BF)
    b = rng.standard_normal((64, 16)).astype(BF)
    c = rng.standard_normal((16,)).astype(BF)
    d = cublas_matmul(a, b, c=c, alpha=2.0, beta=0.5)
    assert d.shape == (64, 16) and d.dtype == BF
    acc = cublas_matmul(a, b, out_dtype="f32").astype(np.float64)
    want = (2.0 * acc + np.float32(0.5 * c.astype(np.float32)).astype(np.float64)).astype(np.float32).astype(BF)
    assert np.array_equal(bits_of(d), bits_of(want))          # 2*acc exact in f64: fma's one rounding


def test_batched_matmul_is_each_batch_alone():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 64, 128)).astype(BF)
    b = rng.standard_normal((3, 128, 16)).astype(BF)
    d = cublas_matmul(a, b)
    for i in range(3):
        assert np.array_equal(bits_of(d[i]), bits_of(cublas_matmul(a[i], b[i])))
    with pytest.raises(InputError, match="batched inputs"):
        cublas_matmul(a, b[:2])


def test_triton_mixed_fp8_is_the_mixed_wgmma_chain():
    """The regression of issue 31: e4m3 A x e5m2 B raised DTypeError."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((64, 128)).astype(E4)
    b = rng.standard_normal((128, 64)).astype(E5)
    d = triton_matmul(a, b, block_k=64, block_m=64, block_n=64, num_warps=4)     # MMAv3
    g = gemm(a, b, instr="wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e5m2")
    assert np.array_equal(bits_of(d), bits_of(np.asarray(g, np.float32)))
    with pytest.raises(DTypeError):
        triton_matmul(a, b.astype(np.float16), block_k=64)


def test_specs_rebuild_their_inputs_bit_for_bit():
    spec = L.scaled_mm_specs()[7]
    x1, x2 = L.scaled_mm_inputs(spec), L.scaled_mm_inputs(spec)
    assert L.digest(x1["a"], x1["b_nk"]) == L.digest(x2["a"], x2["b_nk"])
    assert L.output_size({"op": "float8_linear", "M": 2, "N": 3, "K": 5}) == 6 + 10 + 15


def test_torchao_scales_follow_torchaos_formula():
    from refmodel.golden.torchao import amax_to_scale, cast_to_float8, round_down_to_power_of_2

    s = amax_to_scale(np.array([1.0, 3.0, 0.0, np.nan, np.inf], np.float32), "e4m3", pow2=False)
    assert s[0] == np.float32(448) and s[1] == np.float32((1.0 / 3.0) * 448.0)
    assert s[2] == np.float32(448e12) and np.isnan(s[3]) and s[4] == 0          # EPS clamp, NaN, 1/inf
    p = round_down_to_power_of_2(np.array([448.0, 3.0, 1.0, 0.75, 0.0], np.float32))
    assert p.tolist() == [256.0, 2.0, 1.0, 0.5, 0.0]
    x = np.array([[1.0, -2.0, 1000.0], [np.nan, 1.0, 0.0]], np.float32).astype(BF)
    codes, scale = cast_to_float8(x, "e4m3", axis=1, pow2=True)
    assert scale[0, 0] == np.float32(0.25)                                    # 448 / 1000 -> 0.448 -> 2^-2
    assert np.isnan(scale[1, 0]) and np.isnan(codes[1].astype(np.float32)).all()   # a NaN row is lost whole
    assert codes[0].astype(np.float32).tolist() == [0.25, -0.5, 256.0]         # 1000 * 0.25 = 250 -> e4m3 256


def test_torchao_tensorwise_forward_is_one_scaled_mm_of_its_casts():
    from refmodel.golden.torchao import cast_to_float8, float8_linear

    rng = np.random.default_rng(9)
    x = rng.standard_normal((64, 128)).astype(BF)
    w = rng.standard_normal((64, 128)).astype(BF)
    x8, sx = cast_to_float8(x, "e4m3", axis=None, pow2=False)
    w8, sw = cast_to_float8(w, "e4m3", axis=None, pow2=False)
    want = scaled_mm(x8, w8, np.float32(1) / sx, np.float32(1) / sw, out_dtype="bf16", use_fast_accum=True)
    assert np.array_equal(bits_of(float8_linear(x, w, recipe="tensorwise")), bits_of(want))
    y, gx, gw = float8_linear(x, w, rng.standard_normal((64, 64)).astype(BF), recipe="rowwise")
    assert gx.shape == (64, 128) and gw.shape == (64, 128) and y.dtype == BF
    with pytest.raises(InputError, match="recipe must be one of"):
        float8_linear(x, w, recipe="delayed")
    with pytest.raises(DTypeError, match="bfloat16"):
        float8_linear(x.astype(np.float32), w, recipe="rowwise")


def test_tf32_rounding_is_rne_on_13_bits():
    from refmodel.golden.cublas_tf32 import rn_tf32

    one = np.float32(1.0)
    ulp = np.float32(2.0 ** -10)
    x = np.array([one + ulp / 2, one + 3 * ulp / 2, one + ulp / 2 + np.float32(2 ** -23), np.nan, -0.0], np.float32)
    r = rn_tf32(x)
    assert r[0] == one and r[1] == one + 2 * ulp and r[2] == one + ulp           # ties to even, above rounds up
    assert np.isnan(r[3]) and np.signbit(r[4])
    assert not (r[:3].view(np.uint32) & 0x1FFF).any()


def test_tf32_needs_its_kernel_and_a_recorded_shape():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 256)).astype(np.float32)
    b = rng.standard_normal((256, 128)).astype(np.float32)
    with pytest.raises(InputError, match="input_precision='tf32'"):
        cublas_matmul(a, b)
    with pytest.raises(InputError, match="pass kernel="):
        cublas_matmul(a, b, input_precision="tf32")
    with pytest.raises(InputError, match="was not recorded"):
        cublas_matmul(a, b[:, :96], input_precision="tf32",
                      kernel=["void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>(x)"])
    xmma = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x64x32_warpgroupsize1x1x1_execute_segment_k_off_kernel"
    d = cublas_matmul(a, b, input_precision="tf32", kernel=[xmma])
    from refmodel.golden.cublas_tf32 import INSTR, rn_tf32

    want = np.asarray(gemm(rn_tf32(a), rn_tf32(b), instr=INSTR), np.float32)
    assert np.array_equal(bits_of(d), bits_of(want))
