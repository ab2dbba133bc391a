"""refmodel.golden.triton_matmul: the schedules that reproduce Triton's tiled matmul (fixtures/triton
replays the H200 recordings in test_fixtures.py); here the schedule identities and the refusals."""

import ml_dtypes
import numpy as np
import pytest

import refmodel
from refmodel.dtypes import bits_of
from refmodel.errors import DTypeError, InputError
from refmodel.golden import triton_matmul
from refmodel.golden.triton import mma_sync_fp8_k_order, rna_tf32

RNG = np.random.default_rng(11)


#: a configuration Triton 3.6 lowers to wgmma (MMAv3): what these FP8 tests model
V3 = dict(block_m=128, block_n=128, num_warps=4)


def _fp8(shape):
    return (RNG.standard_normal(shape) * 2.0 ** RNG.integers(-4, 5, shape)).clip(-400, 400).astype(ml_dtypes.float8_e4m3fn)


@pytest.mark.parametrize("imp,block_k,every", [(32, 128, 1), (64, 128, 2), (128, 128, 4), (64, 64, 2), (33, 64, 2),
                                               (32, 32, 1)])
def test_fp8_promotes_every_ceil_imprecise_over_32_instructions(imp, block_k, every):
    a, b = _fp8((64, 512)), _fp8((512, 16))
    want = refmodel.gemm(a, b, instr="wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", promote_every=every)
    got = triton_matmul(a, b, block_k=block_k, max_num_imprecise_acc=imp, **V3)
    assert np.array_equal(bits_of(got), bits_of(want))
    chain = refmodel.gemm(a, b, instr="wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3")
    assert not np.array_equal(bits_of(got), bits_of(chain))  # the promotion is visible on these inputs


def test_f16_bf16_tf32_are_plain_chains_and_block_k_does_not_matter():
    for dt, instr in ((np.float16, "m64n8k16.f32.f16.f16"), (ml_dtypes.bfloat16, "m64n8k16.f32.bf16.bf16"),
                      (np.float32, "m64n8k8.f32.tf32.tf32")):
        a = RNG.standard_normal((64, 256)).astype(dt)
        b = RNG.standard_normal((256, 8)).astype(dt)
        want = refmodel.gemm(a, b, instr="wgmma.mma_async.sync.aligned." + instr)
        for bk in (32, 64, 128):
            assert np.array_equal(bits_of(triton_matmul(a, b, block_k=bk)), bits_of(want))
    out = triton_matmul(a, b, block_k=32, out_dtype=ml_dtypes.bfloat16)
    assert out.dtype == ml_dtypes.bfloat16


@pytest.mark.parametrize("block_k", [64, 128])
def test_fp8_default_is_one_chain(block_k):
    # Triton keeps a partial accumulator only when max_num_imprecise_acc <= BLOCK_K (its sm_90 default
    # is 2**30); the H200 recordings fixtures/triton/fp8_*none* replay this in test_fixtures.py
    a, b = _fp8((64, 512)), _fp8((512, 16))
    chain = refmodel.gemm(a, b, instr="wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3")
    got = triton_matmul(a, b, block_k=block_k, **V3)
    assert np.array_equal(bits_of(got), bits_of(chain))


def test_fp8_imprecise_above_block_k_is_refused_as_triton_does():
    a, b = _fp8((64, 256)), _fp8((256, 8))
    with pytest.raises(InputError, match="<= block_k = 128"):
        triton_matmul(a, b, block_k=128, max_num_imprecise_acc=256, **V3)


def test_fp8_groups_restart_at_every_block_k_slice():
    # m = 96 with BLOCK_K = 128: groups of 3 instructions, cut short to 1 at each slice end (3, 1, 3, 1)
    a, b = _fp8((64, 256)), _fp8((256, 16))
    instr = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"
    want = np.zeros((64, 16), np.float32)
    for lo, hi in ((0, 96), (96, 128), (128, 224), (224, 256)):
        want = (want + refmodel.gemm(a[:, lo:hi], b[lo:hi], instr=instr)).astype(np.float32)
    got = triton_matmul(a, b, block_k=128, max_num_imprecise_acc=96, **V3)
    assert np.array_equal(bits_of(got), bits_of(want))
    every4 = triton_matmul(a, b, block_k=128, max_num_imprecise_acc=128, **V3)
    assert not np.array_equal(bits_of(got), bits_of(every4))


def test_unmodelled_paths_are_refused_with_the_reason():
    a, b = _fp8((64, 128)), _fp8((128, 8))
    with pytest.raises(InputError, match="max_num_imprecise_acc"):
        triton_matmul(a, b, block_k=64, max_num_imprecise_acc=-32)
    x = np.zeros((64, 64), np.float32)
    with pytest.raises(InputError, match="input_precision"):
        triton_matmul(x, x, block_k=32, input_precision="tf32x4")
    with pytest.raises(InputError, match="block_k"):
        triton_matmul(x, x, block_k=48)
    with pytest.raises(DTypeError):
        triton_matmul(x, x.astype(np.float16), block_k=32)


def test_ieee_is_one_fma_per_k_in_k_order():
    # fma(a1, b1, round(a0*b0)) with a0*b0 = -(1+2^-11) and a1*b1 = 1 + 2^-11 + 2^-24 exactly: a fused
    # multiply-add keeps the 2^-24; a separate multiply rounds it away (tie to even); the reverse K
    # order rounds a1*b1 first and gives 0.
    a = np.zeros((64, 64), np.float32)
    b = np.zeros((64, 8), np.float32)
    a[:, 0], b[0, :] = -(1 + 2.0 ** -11), 1.0
    a[:, 1], b[1, :] = 1 + 2.0 ** -12, 1 + 2.0 ** -12
    d = triton_matmul(a, b, block_k=32, input_precision="ieee")
    assert np.all(d == np.float32(2.0 ** -24))
    rev = triton_matmul(a[:, ::-1], b[::-1], block_k=32, input_precision="ieee")
    assert np.all(rev == 0)
    # integer inputs small enough to be exact: the FMA chain is the exact product
    ai = RNG.integers(-64, 65, (64, 96)).astype(np.float32)
    bi = RNG.integers(-64, 65, (96, 16)).astype(np.float32)
    assert np.array_equal(triton_matmul(ai, bi, block_k=32, input_precision="ieee"),
                          (ai.astype(np.int64) @ bi.astype(np.int64)).astype(np.float32))


def test_rna_tf32_rounds_ties_away_keeps_nan_and_overflows_to_inf():
    u = np.array([0x3F801000, 0xBF801000, 0x3F800FFF, 0x3F803000, 0x7F7FF000, 0x7FC00001, 0x7F800000,
                  0x00001000], np.uint32)
    got = rna_tf32(u.view(np.float32))
    assert got[:4].view(np.uint32).tolist() == [0x3F802000, 0xBF802000, 0x3F800000, 0x3F804000]
    assert np.isposinf(got[4]) and np.isnan(got[5]) and np.isposinf(got[6])
    assert got[7].view(np.uint32) == 0x00002000  # subnormals round the same way


def test_tf32x3_splits_each_block_and_is_closer_to_f64_than_tf32():
    a = RNG.standard_normal((64, 256)).astype(np.float32)
    b = RNG.standard_normal((256, 8)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    x3 = triton_matmul(a, b, block_k=64, input_precision="tf32x3")
    t = triton_matmul(a, b, block_k=64, input_precision="tf32")
    assert np.abs(x3 - exact).max() * 100 < np.abs(t - exact).max()
    # tf32-exact inputs make the small halves zero: each BLOCK_K slice is then a fresh tf32 chain
    # added into the f32 accumulator, which differs from tf32's one chain over all of K
    ta, tb = rna_tf32(a), rna_tf32(b)
    instr = "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32"
    acc = np.zeros((64, 8), np.float32)
    for k0 in range(0, 256, 64):
        acc = (acc + refmodel.gemm(ta[:, k0:k0 + 64], tb[k0:k0 + 64], instr=instr)).astype(np.float32)
    assert np.array_equal(bits_of(triton_matmul(ta, tb, block_k=64, input_precision="tf32x3")), bits_of(acc))


def test_fp8_imprecise_0_is_f16_mma_sync_in_the_fp8_k_order():
    # one 32-wide K window: instruction 0 takes k = 0, 1, 4, 5, ..., instruction 1 takes k = 2, 3, 6, 7, ...
    assert mma_sync_fp8_k_order(64)[:16].tolist() == [0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29]
    assert sorted(mma_sync_fp8_k_order(96).tolist()) == list(range(96))
    f8 = ml_dtypes.float8_e4m3fn

    def run(big, neg, tiny):
        a = np.zeros((64, 64), np.float32)
        a[:, big], a[:, neg], a[:, tiny] = 256.0, -256.0, 2.0 ** -9
        b = np.ones((64, 8), np.float32)
        b[tiny] = 2.0 ** -9
        return triton_matmul(a.astype(f8), b.astype(f8), block_k=64, max_num_imprecise_acc=0)

    # the fused sum aligns its terms to the largest before adding: next to 256 the 2^-18 is truncated
    # away, alone in an instruction (or with terms that cancel to 0 before it) it survives.  The
    # natural k order (k 0..15, then 16..31) would give the opposite answer in both cases.
    assert np.all(run(0, 16, 2) == 2.0 ** -18)   # 256, -256 in instruction 0 -> 0; then + 2^-18
    assert np.all(run(0, 8, 16) == 0)            # 256, -256, 2^-18 all in instruction 0
    # small integers: every order is exact
    a, b = RNG.integers(-8, 9, (64, 128)), RNG.integers(-8, 9, (128, 16))
    d = triton_matmul(a.astype(f8), b.astype(f8), block_k=128, max_num_imprecise_acc=0)
    assert np.array_equal(d, (a @ b).astype(np.float32))


@pytest.mark.parametrize("name,misses", [("fp8_default_bk128_w4", True), ("fp8_default_bk64_w8", True),
                                          ("fp8_e5m2_default_bk64_w4", False)])
def test_the_fp8_k_order_is_what_the_h200_recordings_need(name, misses):
    # the recorded outputs (fixtures/triton, max_num_imprecise_acc=0) match in the FP8 K order; the two
    # with a float32 output miss in a large share of outputs in the natural K order (the order is
    # evidence, not a free choice); the bf16 output's rounding hides the difference
    from pathlib import Path

    with np.load(Path(refmodel.__file__).parent.parent / f"fixtures/triton/{name}.npz") as z:
        arr = {k: z[k] for k in z.files}
    fp = ml_dtypes.float8_e5m2 if "e5m2" in name else ml_dtypes.float8_e4m3fn
    a16, b16 = arr["a"].view(fp).astype(np.float16), arr["b"].view(fp).astype(np.float16)
    out = "bf16" if "e5m2" in name else None
    instr = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"
    perm = mma_sync_fp8_k_order(a16.shape[1])
    good = refmodel.gemm(a16[:, perm], b16[perm], instr=instr, out_dtype=out)
    natural = refmodel.gemm(a16, b16, instr=instr, out_dtype=out)
    assert np.array_equal(bits_of(good), arr["d"])
    share = np.mean(bits_of(natural) != arr["d"])
    assert share > 0.3 if misses else share == 0


def test_wgref_golden_cli_reproduces_a_recorded_triton_fixture(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    fx = Path(refmodel.__file__).parent.parent / "fixtures/triton/fp8_imp64_bk128_w4.npz"
    with np.load(fx) as z:
        np.save(tmp_path / "a.npy", z["a"])
        np.save(tmp_path / "b.npy", z["b"])
        want = z["d"]
    r = subprocess.run([sys.executable, "-m", "wgref.cli", "golden", "triton", "a.npy", "b.npy", "--dtype", "e4m3",
                        "--block-k", "128", "--imp", "64", "--block-m", "128", "--block-n", "128", "--num-warps", "4",
                        "-o", "d.npy"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "d.npy"), want)   # the H200's bits
    r = subprocess.run([sys.executable, "-m", "wgref.cli", "golden", "triton", "a.npy", "b.npy", "--dtype", "f16",
                        "--block-k", "128", "-o", "d.npy"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 2 and "16-bit codes" in r.stderr


def test_wgref_golden_cli_reproduces_recorded_torch_scaled_mm(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    with np.load(Path(refmodel.__file__).parent.parent / "fixtures/torch/scaled_mm_128x256x1024.npz") as z:
        for k in ("a", "b_nk", "ra", "rb"):
            np.save(tmp_path / f"{k}.npy", z[k])
        d3, d8 = z["d3"], z["d8"]                             # bf16, fast accum, tensor scales; row/col scales
    for args, want in (([ "--scale-a", "0.5", "--scale-b", "0.25", "--fast-accum"], d3),
                       (["--scale-a", "ra.npy", "--scale-b", "rb.npy"], d8)):
        r = subprocess.run([sys.executable, "-m", "wgref.cli", "golden", "scaled-mm", "a.npy", "b_nk.npy", "--dtype",
                            "e4m3", "--out-dtype", "bf16", *args, "-o", "d.npy"], cwd=tmp_path, capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        assert np.array_equal(np.load(tmp_path / "d.npy").view(np.int16), want)


def test_every_path_stores_with_the_same_cvt_rn_rule_overflow_to_inf():
    # acc.to(f16): an f32 sum past 65504 becomes Inf on every schedule (one shared output rule)
    big = np.full((64, 32), 300.0, np.float32), np.full((32, 8), 300.0, np.float32)
    for prec in ("tf32", "tf32x3", "ieee"):
        assert np.all(np.isposinf(triton_matmul(*big, block_k=32, input_precision=prec, out_dtype=np.float16)))
    f8 = ml_dtypes.float8_e4m3fn
    a8, b8 = (x.clip(-448, 448).astype(f8) for x in big)
    for imp in (0, 32):
        assert np.all(np.isposinf(triton_matmul(a8, b8, block_k=32, max_num_imprecise_acc=imp, out_dtype=np.float16,
                                                **V3)))


def test_f32_arithmetic_of_the_schedules_writes_the_canonical_nan():
    # the GPU's fma.rn.f32 / add.f32 write NaN as 0x7FFFFFFF (numpy would keep a payload, and x86
    # writes 0xFFC00000 for Inf - Inf)
    a = np.zeros((64, 32), np.float32)
    b = np.zeros((32, 8), np.float32)
    a[0, 0] = np.array([0x7FC01234], np.uint32).view(np.float32)[0]     # a NaN with a payload
    a[1, 0], a[1, 1], b[0, :], b[1, :] = np.inf, np.inf, 1.0, -1.0        # Inf - Inf
    for prec in ("ieee", "tf32x3"):
        d = bits_of(triton_matmul(a, b, block_k=32, input_precision=prec))
        assert np.all(d[:2] == 0x7FFFFFFF) and np.all(d[2:] == 0), prec


def test_ieee_products_that_overflow_float32_give_inf_not_nan():
    # one FMA per K with the product exact (float64): max * 3 overflows to -Inf and stays -Inf; a
    # float32 product inside the FMA emulation made Inf - Inf = NaN (found by wgref fuzz lib:triton
    # on the H200, seed 11 batch 171: the library wrote Inf)
    a = np.ones((64, 32), np.float32)
    b = np.ones((32, 8), np.float32)
    a[0, 5] = -np.finfo(np.float32).max
    b[5, :] = 3.0
    d = triton_matmul(a, b, block_k=32, input_precision="ieee")
    assert np.all(bits_of(d[0]) == 0xFF800000) and np.all(d[1:] == 34.0)


def test_tf32x3_masks_nans_of_the_small_products():
    # Triton's tf32x3 replaces NaNs of small_a*big_b + big_a*small_b by 0 before adding big_a*big_b:
    # an Inf input (small = Inf - Inf = NaN) gives Inf, as the H200 wrote (wgref fuzz lib:triton)
    a = np.ones((64, 8), np.float32)
    b = np.ones((8, 8), np.float32)
    a[0, 0] = np.inf
    d = triton_matmul(a, b, block_k=8, input_precision="tf32x3")
    assert np.all(np.isposinf(d[0])) and np.all(d[1:] == 8.0)
