"""The whole-GEMM golden kernels of gpu/kernels/golden_gemm.py, built for the host from the very text NVRTC
compiles for the H200, against the CPU refmodel (refmodel.golden.Schedule.run, the arbiter) bit for bit:
every dense floating-point wgmma family (e4m3, e5m2, mixed FP8, f16, bf16, tf32, f16 accumulators), the
matrix input families (narrow, wide, special NaN/Inf/max/subnormal, cancel, zero, subnormal, raw bits),
promotion every P instructions with 1 x 128 / 128 x 128 block scales under the three promote ops, split-K
with every reduction order and partial dtype, padded shapes, epilogue scales and output formats; both the
tiled kernel and the one-thread-per-output reference kernel."""

import shutil

import ml_dtypes
import numpy as np
import pytest
from host_cxx import CXX, needs_cxx

from gpu.kernels.golden_gemm import SOURCE, host_golden_gemm, plan
from refmodel.dtypes import bits_of, from_bits
from refmodel.errors import InputError
from refmodel.golden import Schedule
from refmodel.verify.families.matrix import FAMILIES, make_inputs

pytestmark = needs_cxx

I = "wgmma.mma_async.sync.aligned.m64n8k{k}.{acc}.{a}.{b}"
FORMS = [(32, "f32", "e4m3", "e4m3"), (32, "f32", "e5m2", "e5m2"), (32, "f32", "e4m3", "e5m2"),
         (32, "f32", "e5m2", "e4m3"), (16, "f32", "f16", "f16"), (16, "f32", "bf16", "bf16"),
         (8, "f32", "tf32", "tf32"), (16, "f16", "f16", "f16"), (32, "f16", "e4m3", "e4m3")]
_NP_DT = {"tf32": "f32"}


def _inputs(rng, family, da, db, M, N, K):
    if family == "bits":                      # every code, NaN and Inf included, uniformly
        def bits(dt, shape):
            w = {"e4m3": 8, "e5m2": 8, "f16": 16, "bf16": 16, "tf32": 32}[dt]
            u = rng.integers(0, 1 << w, shape, dtype=np.uint64).astype({8: np.uint8, 16: np.uint16, 32: np.uint32}[w])
            return from_bits(u, _NP_DT.get(dt, dt))
        return bits(da, (M, K)), bits(db, (K, N))
    a, _ = make_inputs(rng, family, _NP_DT.get(da, da), M, N, K)
    _, b = make_inputs(rng, family, _NP_DT.get(db, db), M, N, K)
    if family == "cancel" and da == db:
        a, b = make_inputs(rng, family, _NP_DT.get(da, da), M, N, K)
    return a, b


def _same(got, want):
    g, w = bits_of(np.asarray(got)), bits_of(np.asarray(want))
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
    return int(np.count_nonzero(g != w))


def _check(sched, a, b, what, scale_a=None, scale_b=None, kernels=("tiled",)):
    want = sched.run(a, b, scale_a=scale_a, scale_b=scale_b)
    for kern in kernels:
        got = host_golden_gemm(a, b, schedule=sched, scale_a=scale_a, scale_b=scale_b, kernel=kern)
        bad = _same(got, want)
        assert bad == 0, f"{what} ({kern}): {bad} of {want.size} outputs differ from Schedule.run"
    return want


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f"{f[1]}.{f[2]}.{f[3]}")
def test_every_form_and_family_matches_refmodel(form):
    k, acc, da, db = form
    instr = I.format(k=k, acc=acc, a=da, b=db)
    rng = np.random.default_rng(sum(map(ord, instr)))
    M, N, K = 64, 64, 16 * k
    seen_special = 0
    for family in (*FAMILIES, "bits"):
        a, b = _inputs(rng, family, da, db, M, N, K)
        for pe in (None, 4):
            for out in (None, "bf16"):
                s = Schedule(instr, promote_every=pe, out_dtype=out)
                want = _check(s, a, b, f"{instr} {family} promote {pe} out {out}",
                              kernels=("tiled", "reference") if out is None else ("tiled",))
                seen_special += int(np.count_nonzero(~np.isfinite(np.asarray(want, np.float32))))
    assert seen_special > 0          # the special / bits families reach the NaN / Inf rules


def test_the_fdpa_fast_path_covers_every_e4m3_code_pair():
    # all 256 x 256 code pairs as single products (one non-zero term per group), e4m3 and e5m2
    for dt in ("e4m3", "e5m2"):
        instr = I.format(k=32, acc="f32", a=dt, b=dt)
        codes = np.arange(256, dtype=np.uint8)
        a = np.zeros((256, 32), np.uint8)
        a[:, 0] = codes
        b = np.zeros((32, 256), np.uint8)
        b[0, :] = codes
        b[1, :] = 0x38                       # a second term in every group: 1.0 * 0 (a zero A element)
        av, bv = from_bits(a, dt), from_bits(b, dt)
        for pe in (None, 1):
            _check(Schedule(instr, promote_every=pe), av, bv, f"{dt} code pairs promote {pe}")


def test_long_chains_and_cancellation_match():
    # K = 4096: a 128-instruction chain, accumulator growth and exact cancellation across groups
    rng = np.random.default_rng(7)
    instr = I.format(k=32, acc="f32", a="e4m3", b="e4m3")
    a, b = make_inputs(rng, "narrow", "e4m3", 64, 64, 4096)
    b[2048:] = from_bits(bits_of(b[:2048]) ^ np.uint8(0x80), "e4m3")     # second half cancels the first
    a[:, 2048:] = a[:, :2048]
    for pe in (None, 4, 128):
        _check(Schedule(instr, promote_every=pe), a, b, f"cancelling chain promote {pe}")


@pytest.mark.parametrize("op", ["fma", "mul_add", "fma_exact"])
def test_block_scales_and_promote_ops(op):
    # DeepGEMM's 1 x 128 (A) and 128 x 128 (B) scales, wide exponents so the scale products round
    rng = np.random.default_rng(11)
    instr = I.format(k=32, acc="f32", a="e4m3", b="e4m3")
    M, N, K = 128, 256, 512
    for family in ("narrow", "wide", "special"):
        a, b = make_inputs(rng, family, "e4m3", M, N, K)
        sa = (rng.uniform(0.5, 2, (M, K // 128)) * 2.0 ** rng.integers(-20, 20, (M, K // 128))).astype(np.float32)
        sb = (rng.uniform(0.5, 2, (K // 128, N // 128)) * 2.0 ** rng.integers(-20, 20, (K // 128, N // 128))).astype(np.float32)
        sa[0, 0] = np.float32(2.0 ** -140)            # subnormal scale products
        for pe in (1, 4):
            s = Schedule(instr, promote_every=pe, promote_op=op, block_scales=True, out_dtype="bf16")
            _check(s, a, b, f"{family} promote {pe} {op}", scale_a=sa, scale_b=sb, kernels=("tiled", "reference"))
        s = Schedule(instr, promote_every=4, promote_op=op, block_scales=True)
        _check(s, a, b, f"{family} scalar scales {op}", scale_a=np.float32(3.0), scale_b=np.float32(2.0 ** -7))


@pytest.mark.parametrize("reduce", ["sequential", "reverse", "tree"])
def test_split_k_reduction_orders_and_partials(reduce):
    rng = np.random.default_rng({"sequential": 1, "reverse": 2, "tree": 3}[reduce])
    for instr, dt, align in ((I.format(k=32, acc="f32", a="e4m3", b="e4m3"), "e4m3", 128),
                             (I.format(k=16, acc="f32", a="bf16", b="bf16"), "bf16", 64)):
        for family in ("wide", "special"):
            a, b = make_inputs(rng, family, dt, 64, 64, 1536)
            for splits in (3, 4):
                for pd in ("f32", "bf16", "f16"):
                    for pe in (None, 2):
                        s = Schedule(instr, splits=splits, split_align=align, reduce=reduce, partial_dtype=pd,
                                     promote_every=pe, out_dtype="bf16")
                        _check(s, a, b, f"{dt} {family} S={splits} {reduce} partials {pd} promote {pe}")
    # partials of very different magnitudes (K blocks scaled by 2**(9i), alternating signs): the order matters
    instr = I.format(k=16, acc="f32", a="bf16", b="bf16")
    a, b = make_inputs(rng, "narrow", "bf16", 64, 64, 1536)
    scale = (2.0 ** (9 * (np.arange(1536) // 384)) * (-1.0) ** (np.arange(1536) // 384)).astype(np.float32)
    a = (a.astype(np.float32) * scale).astype(ml_dtypes.bfloat16)
    got = {}
    for order in ("sequential", reduce):
        s = Schedule(instr, splits=4, split_align=64, reduce=order)
        got[order] = bits_of(_check(s, a, b, f"spread partials {order}", kernels=("tiled", "reference")))
    if reduce != "sequential":
        assert np.count_nonzero(got[reduce] != got["sequential"]) > 0   # the test can tell the orders apart


def test_padded_shapes_and_unaligned_chunks():
    # M, N, K off every tile: rows and columns padded, every chunk zero-padded inside the last group
    rng = np.random.default_rng(5)
    instr = I.format(k=32, acc="f32", a="e4m3", b="e5m2")
    for (M, N, K) in ((1, 8, 320), (70, 40, 1000), (130, 72, 200)):
        a, _ = make_inputs(rng, "wide", "e4m3", M, N, K)
        _, b = make_inputs(rng, "wide", "e5m2", M, N, K)
        for kw in ({}, {"promote_every": 4}, {"splits": 3, "split_align": 32}, {"splits": 2, "promote_every": 2}):
            _check(Schedule(instr, **kw), a, b, f"{M}x{N}x{K} {kw}", kernels=("tiled", "reference"))


def test_epilogue_scales_and_output_formats():
    from refmodel.golden.torch_scaled_mm import scaled_mm_schedule

    rng = np.random.default_rng(9)
    M, N, K = 64, 128, 512
    for family in ("narrow", "wide", "special", "zero"):
        a, b = make_inputs(rng, family, "e4m3", M, N, K)
        for fast in (False, True):
            for out in ("f32", "bf16", "f16"):
                s = scaled_mm_schedule(M, N, K, use_fast_accum=fast, rowwise=False, out_dtype=out)
                _check(s, a, b, f"tensor {family} fast {fast} {out}", scale_a=np.float32(0.75), scale_b=np.float32(3.0e5))
                # the scale product overflows: Inf * 0 is x86's default NaN in numpy, as here
                _check(s, a, b, f"tensor overflow {family}", scale_a=np.float32(3e38), scale_b=np.float32(1e10))
                s = scaled_mm_schedule(M, N, K, use_fast_accum=fast, rowwise=True, out_dtype=out)
                sa = (rng.uniform(0.5, 2, (M, 1)) * 2.0 ** rng.integers(-30, 30, (M, 1))).astype(np.float32)
                sb = (rng.uniform(0.5, 2, (1, N)) * 2.0 ** rng.integers(-30, 30, (1, N))).astype(np.float32)
                _check(s, a, b, f"rowwise {family} fast {fast} {out}", scale_a=sa, scale_b=sb)


def test_the_library_front_ends_agree():
    # refmodel.golden.scaled_mm (torch._scaled_mm's model) and fp8_kernel_schedule (DeepGEMM's) through the port
    from refmodel.golden import scaled_mm
    from refmodel.golden.fp8_schedule import fp8_kernel_schedule
    from refmodel.verify.families.gemm import make_case

    rng = np.random.default_rng(3)
    a, b = make_inputs(rng, "wide", "e4m3", 64, 64, 1024)
    for fast in (False, True):
        want = scaled_mm(a, np.ascontiguousarray(b.T), np.float32(2), np.float32(0.5), out_dtype="bf16",
                         use_fast_accum=fast)
        got = host_golden_gemm(a, np.ascontiguousarray(b.T), b_layout="nk", scale_a=np.float32(2),
                               scale_b=np.float32(0.5), schedule=Schedule(
                                   "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3",
                                   promote_every=None if fast else 4, epilogue_scale="tensor", out_dtype="bf16"))
        assert _same(got, want) == 0
    sched = fp8_kernel_schedule("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3", out_dtype="bf16")
    ac, bc, sa, sb = make_case(rng, "wide", 128, 256, 1024, sched)
    want = sched.expected(ac, bc, sa, sb)
    got = host_golden_gemm(ac, bc, schedule=sched, scale_a=sa, scale_b=sb, b_layout="nk")
    assert _same(got, want) == 0
    # the dtype / promote_every shortcut is the same schedule
    got2 = host_golden_gemm(ac.view(ml_dtypes.float8_e4m3fn), bc, dtype="e4m3", promote_every=4, b_layout="nk",
                            scale_a=sa, scale_b=sb, out_dtype="bf16")
    assert _same(got2, want) == 0


def test_unsupported_schedules_are_refused_in_one_sentence():
    a = np.zeros((64, 64), np.float16)
    for s in (Schedule("fma.rn.f32"), Schedule("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32"),
              Schedule("wgmma.mma_async.sp.sync.aligned.m64n8k64.f32.e4m3.e4m3", promote_every=2),
              Schedule("wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8"),
              Schedule("wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32", emulation="tf32x3", restart_every=32)):
        with pytest.raises(InputError) as e:
            plan(s, 64, 64, 64)
        assert "\n" not in str(e.value) and len(str(e.value)) < 200
    f16 = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"
    # schedule fields the kernels do not model are refused, never ignored (XLA's lane-shaped reduce, canonical NaNs)
    with pytest.raises(InputError, match="not lanes32-strided-down"):
        plan(Schedule(f16, splits=4, reduce="lanes32-strided-down"), 64, 64, 64)
    with pytest.raises(InputError, match="out_nan='canonical' is not modelled"):
        host_golden_gemm(a, a, schedule=Schedule(f16, out_dtype="bf16", out_nan="canonical"))
    with pytest.raises(InputError, match="no scales"):
        host_golden_gemm(a, a, dtype="f16", scale_a=np.float32(2))
    with pytest.raises(InputError, match="finite"):
        host_golden_gemm(a, a, schedule=Schedule("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16",
                                                 epilogue_scale="tensor"), scale_a=np.float32(np.inf))


def test_the_device_text_parses_with_cuda_qualifiers():
    # the NVRTC half (kernels, __shared__, inline PTX) parses with the host compiler, CUDA's names stubbed
    import subprocess
    import tempfile
    from pathlib import Path

    stub = ("#define __CUDACC_RTC__ 1\n#define __global__\n#define __host__\n#define __device__\n#define __shared__\n"
            "#define __launch_bounds__(...)\n#define __align__(n)\nstruct wg_dim3 { int x, y, z; }; static wg_dim3 blockIdx, blockDim, threadIdx;\n"
            "static void __syncthreads() {}\n")
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "dev.cpp"
        p.write_text(stub + SOURCE)
        r = subprocess.run([CXX, "-std=c++17", "-fsyntax-only", str(p)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr[:2000]


def test_cli_device_flag_without_a_gpu_is_one_line_exit_2(tmp_path):
    from gpu.kernels.runtime import gpu_available
    from tests.cli_harness import run_cli

    if gpu_available():
        pytest.skip("a GPU is present: tests/test_gpu_golden_gemm.py runs the flag")
    np.save(tmp_path / "a.npy", np.zeros((64, 128), np.uint8))
    np.save(tmp_path / "b.npy", np.zeros((64, 128), np.uint8))
    rc, out, err = run_cli(["golden", "scaled-mm", tmp_path / "a.npy", tmp_path / "b.npy", "--dtype", "e4m3",
                            "-o", tmp_path / "d.npy", "--device"])
    assert rc == 2 and "needs a CUDA device with cupy" in err and err.strip().count("\n") == 0
    assert not (tmp_path / "d.npy").exists()


def test_cli_device_path_with_the_host_build_standing_in(tmp_path, monkeypatch):
    # wgref golden --device's argument handling (schedule, B layout, scales, output bits) against the CPU path,
    # with the host build of the same kernels in place of the GPU (the gpu-marked test runs the real one)
    import sys
    import types

    import gpu.kernels.golden_gemm as gg
    import gpu.kernels.runtime as rt
    from tests.cli_harness import run_cli

    fake = types.SimpleNamespace(asarray=np.asarray, asnumpy=np.asarray)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(rt, "gpu_available", lambda: True)
    monkeypatch.setattr(gg, "golden_gemm_device", lambda a, b, **kw: host_golden_gemm(a, b, **kw))
    rng = np.random.default_rng(5)
    a, b = make_inputs(rng, "wide", "e4m3", 128, 64, 1024)
    np.save(tmp_path / "a.npy", bits_of(a))
    np.save(tmp_path / "b.npy", np.ascontiguousarray(bits_of(b).T))          # scaled-mm takes B as (N, K)
    np.save(tmp_path / "bkn.npy", bits_of(b))
    common = ["golden", "scaled-mm", tmp_path / "a.npy", tmp_path / "b.npy", "--dtype", "e4m3"]
    for extra in ([], ["--fast-accum"], ["--out-dtype", "bf16", "--scale-a", "0.5", "--scale-b", "3"]):
        rc, _, err = run_cli(common + extra + ["-o", tmp_path / "cpu.npy"])
        assert rc == 0, err
        rc, out, err = run_cli(common + extra + ["-o", tmp_path / "dev.npy", "--device"])
        assert rc == 0 and "GPU" in out, err
        assert np.array_equal(np.load(tmp_path / "cpu.npy"), np.load(tmp_path / "dev.npy")), extra
    import json

    (tmp_path / "s.json").write_text(json.dumps(Schedule(
        "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3", splits=2, split_align=128, reduce="reverse").to_dict()))
    for lib, bfile in (("cublas", "bkn.npy"), ("scaled-mm", "b.npy")):
        args = ["golden", lib, tmp_path / "a.npy", tmp_path / bfile, "--dtype", "e4m3", "--schedule", tmp_path / "s.json"]
        rc, _, err = run_cli(args + ["-o", tmp_path / "cpu.npy"])
        assert rc == 0, err
        rc, _, err = run_cli(args + ["-o", tmp_path / "dev.npy", "--device"])
        assert rc == 0, err
        assert np.array_equal(np.load(tmp_path / "cpu.npy"), np.load(tmp_path / "dev.npy")), lib
    rc, _, err = run_cli(["golden", "triton", tmp_path / "a.npy", tmp_path / "bkn.npy", "--dtype", "e4m3",
                          "--block-k", "64", "-o", tmp_path / "x.npy", "--device"])
    assert rc == 2 and "--device runs scaled-mm or a --schedule" in err


@pytest.mark.skipif(not shutil.which("nvcc"), reason="no nvcc (NVRTC compiles the text on the GPU machine)")
def test_the_device_text_compiles_for_sm_90a_without_spills(tmp_path):
    # the NVRTC text through nvcc (__CUDACC_RTC__ defined as NVRTC does, --fmad=false as device_module passes):
    # every kernel builds for sm_90a and the fast e4m3 kernel keeps its register tile without spilling
    import re
    import subprocess

    from gpu.kernels.runtime import PRELUDE

    (tmp_path / "gg.cu").write_text("#define __CUDACC_RTC__ 1\n" + PRELUDE + SOURCE)
    r = subprocess.run(["nvcc", "-arch=sm_90a", "-std=c++17", "--fmad=false", "-cubin", "-Xptxas", "-v",
                        "-o", str(tmp_path / "gg.cubin"), str(tmp_path / "gg.cu")], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    for k in ("gg_decode", "gg_tiled_i32", "gg_tiled_i64", "gg_ref", "gg_epilogue"):
        assert f"entry function '{k}'" in r.stderr, k
    info = r.stderr.split("entry function 'gg_tiled_i32'")[1].split("Compiling entry")[0]
    assert re.search(r"\b0 bytes spill stores", info), info
