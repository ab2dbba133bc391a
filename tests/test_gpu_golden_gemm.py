"""On an H200: the golden GEMM kernels (gpu/kernels/golden_gemm.py) through NVRTC equal the CPU refmodel
(refmodel.golden.Schedule.run, the arbiter) on full small GEMMs of every family and on a sample of the
outputs of a 1024 x 1024 x 4096 GEMM; torch and cupy inputs give the same bits (gpu marker)."""

import numpy as np
import pytest

from refmodel.dtypes import bits_of
from refmodel.golden import Schedule
from refmodel.verify.families.matrix import make_inputs

pytestmark = pytest.mark.gpu

E4 = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"


def _dev_bits(x):
    import cupy as cp

    return cp.asnumpy(x).view(np.uint16 if x.dtype.itemsize == 2 else np.uint32)


def _want_bits(w):
    return bits_of(np.asarray(w))


@pytest.mark.parametrize("kernel", ["tiled", "reference"])
def test_full_small_gemms_match_refmodel(kernel):
    import cupy as cp

    from gpu.kernels.golden_gemm import golden_gemm_device

    rng = np.random.default_rng(1)
    cases = [(E4, "e4m3", {}), (E4, "e4m3", {"promote_every": 4}),
             ("wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2", "e5m2", {"promote_every": 2}),
             ("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16", "bf16", {"splits": 3, "reduce": "tree"}),
             ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", "f16", {"out_dtype": "f16"}),
             ("wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16", "f16", {})]
    for instr, dt, kw in cases:
        for family in ("narrow", "wide", "special", "cancel", "zero", "subnormal"):
            a, b = make_inputs(rng, family, dt, 128, 192, 1024)
            s = Schedule(instr, **kw)
            want = _want_bits(s.run(a, b))
            got = _dev_bits(golden_gemm_device(cp.asarray(bits_of(a)), cp.asarray(bits_of(b)), schedule=s,
                                               kernel=kernel))
            bad = int(np.count_nonzero(got != want))
            assert bad == 0, f"{instr} {kw} {family} ({kernel}): {bad} of {want.size} outputs differ"


def test_block_scales_and_epilogue_on_the_device():
    import cupy as cp

    from gpu.kernels.golden_gemm import golden_gemm_device
    from refmodel.golden.fp8_schedule import fp8_kernel_schedule
    from refmodel.verify.families.gemm import make_case

    rng = np.random.default_rng(2)
    sched = fp8_kernel_schedule(E4, out_dtype="bf16")
    for family in ("normal", "wide", "specials"):
        ac, bc, sa, sb = make_case(rng, family, 256, 256, 2048, sched)
        want = _want_bits(sched.expected(ac, bc, sa, sb))
        got = _dev_bits(golden_gemm_device(cp.asarray(ac), cp.asarray(bc), schedule=sched, scale_a=sa, scale_b=sb,
                                           b_layout="nk"))
        assert np.array_equal(got, want), family
    # scales near 2^-70 each: the promotion's sa * sb and many sums are float32 subnormals, which the
    # device keeps (a flush-to-zero build of the kernel differs here)
    ac, bc, sa, sb = make_case(rng, "wide", 256, 256, 2048, sched)
    sa, sb = (np.asarray(v, np.float32) * np.float32(2.0 ** -70) for v in (sa, sb))
    want = _want_bits(sched.expected(ac, bc, sa, sb))
    wf = want.view(np.uint16).astype(np.uint32) << 16 if want.dtype.itemsize == 2 else want.view(np.uint32)
    assert np.count_nonzero(((wf & 0x7F800000) == 0) & ((wf & 0x7FFFFF) != 0)) > 1000   # subnormal outputs
    got = _dev_bits(golden_gemm_device(cp.asarray(ac), cp.asarray(bc), schedule=sched, scale_a=sa, scale_b=sb,
                                       b_layout="nk"))
    assert np.array_equal(got, want), "tiny scales"
    s = Schedule(E4, promote_every=4, epilogue_scale="tensor", out_dtype="bf16")
    a, b = make_inputs(rng, "wide", "e4m3", 128, 128, 1024)
    want = _want_bits(s.run(a, b, scale_a=np.float32(0.5), scale_b=np.float32(3)))
    got = _dev_bits(golden_gemm_device(cp.asarray(bits_of(a)), cp.asarray(bits_of(b)), schedule=s,
                                       scale_a=np.float32(0.5), scale_b=np.float32(3)))
    assert np.array_equal(got, want)


@pytest.mark.parametrize("promote_every", [None, 4])
def test_a_sample_of_a_1024x1024x4096_gemm_matches_refmodel(promote_every):
    import cupy as cp

    from gpu.kernels.golden_gemm import golden_gemm_device

    rng = np.random.default_rng(3)
    M, N, K = 1024, 1024, 4096
    a, b = make_inputs(rng, "wide", "e4m3", M, N, K)
    s = Schedule(E4, promote_every=promote_every)
    got = _dev_bits(golden_gemm_device(cp.asarray(bits_of(a)), cp.asarray(bits_of(b)), schedule=s))
    # the CPU model on 64-row x 64-column blocks at random places (refmodel needs M % 64 == 0)
    checked = 0
    for _ in range(6):
        r0, c0 = int(rng.integers(0, M // 64)) * 64, int(rng.integers(0, N // 64)) * 64
        want = _want_bits(s.run(a[r0:r0 + 64], b[:, c0:c0 + 64]))
        bad = int(np.count_nonzero(got[r0:r0 + 64, c0:c0 + 64] != want))
        assert bad == 0, f"block ({r0}, {c0}): {bad} of 4096 outputs differ"
        checked += want.size
    assert checked == 6 * 4096


def test_torch_inputs_give_the_same_bits():
    torch = pytest.importorskip("torch")
    import cupy as cp

    from gpu.kernels.golden_gemm import golden_gemm_device

    rng = np.random.default_rng(4)
    a, b = make_inputs(rng, "narrow", "e4m3", 128, 128, 512)
    ta = torch.from_numpy(bits_of(a).copy()).cuda().view(torch.float8_e4m3fn)
    tb = torch.from_numpy(np.ascontiguousarray(bits_of(b).T)).cuda().view(torch.float8_e4m3fn)   # (N, K)
    got = _dev_bits(golden_gemm_device(ta, tb, dtype="e4m3", promote_every=4, b_layout="nk"))
    want = _dev_bits(golden_gemm_device(cp.asarray(bits_of(a)), cp.asarray(bits_of(b)), dtype="e4m3",
                                        promote_every=4))
    assert np.array_equal(got, want)
    assert np.array_equal(want, _want_bits(Schedule(E4, promote_every=4, out_dtype="f32").run(a, b)))


def test_cli_device_flag_writes_the_cpu_models_bits(tmp_path):
    import json

    from tests.cli_harness import run_cli

    rng = np.random.default_rng(5)
    a, b = make_inputs(rng, "wide", "e4m3", 128, 64, 1024)
    np.save(tmp_path / "a.npy", bits_of(a))
    np.save(tmp_path / "b.npy", np.ascontiguousarray(bits_of(b).T))          # scaled-mm takes B as (N, K)
    common = ["golden", "scaled-mm", tmp_path / "a.npy", tmp_path / "b.npy", "--dtype", "e4m3", "--out-dtype", "bf16",
              "--scale-a", "0.5", "--scale-b", "2"]
    for extra in ([], ["--fast-accum"]):
        rc, _, err = run_cli(common + extra + ["-o", tmp_path / "cpu.npy"])
        assert rc == 0, err
        rc, _, err = run_cli(common + extra + ["-o", tmp_path / "gpu.npy", "--device"])
        assert rc == 0, err
        assert np.array_equal(np.load(tmp_path / "cpu.npy"), np.load(tmp_path / "gpu.npy")), extra
    np.save(tmp_path / "bkn.npy", bits_of(b))                                 # the others take B as (K, N)
    (tmp_path / "s.json").write_text(json.dumps(Schedule(E4, splits=2, split_align=128, reduce="reverse").to_dict()))
    rc, _, err = run_cli(["golden", "cublas", tmp_path / "a.npy", tmp_path / "bkn.npy", "--dtype", "e4m3", "--schedule",
                          tmp_path / "s.json", "-o", tmp_path / "cpu.npy"])
    assert rc == 0, err
    rc, _, err = run_cli(["golden", "cublas", tmp_path / "a.npy", tmp_path / "bkn.npy", "--dtype", "e4m3", "--schedule",
                          tmp_path / "s.json", "-o", tmp_path / "gpu.npy", "--device"])
    assert rc == 0, err
    assert np.array_equal(np.load(tmp_path / "cpu.npy"), np.load(tmp_path / "gpu.npy"))
