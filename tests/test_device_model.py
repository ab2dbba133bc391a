"""The GPU port of the accumulator (gpu/kernels/device_model.py), built for the host from the very source
NVRTC compiles for the device, against the CPU refmodel: every dense wgmma form, every input
family of the fuzzer (NaN/Inf/subnormal/extreme/cancellation), scale-d and imm-scale."""

import numpy as np
import pytest

from gpu.kernels.device_model import SOURCE, wgmma_host
from refmodel.dtypes import bits_of
from refmodel.numerics.wgmma import wgmma
from refmodel.verify.jobs import families_for
from refmodel.wgmma_forms import WGMMA_FORMS

pytestmark = pytest.mark.skipif(
    not any(__import__("shutil").which(c) for c in ("g++", "c++", "clang++")), reason="no C++ compiler")


def _cases(form, seed):
    rng = np.random.default_rng(seed)
    for fam in families_for(form):
        a, b, c = fam.make(form, rng, 2, 1)
        yield fam.name, a[..., :form.k], b[..., :form.k, :], c


def test_every_dense_form_and_family_matches_refmodel():
    checked = 0
    for i, form in enumerate(WGMMA_FORMS):
        rng = np.random.default_rng(i)
        for name, a, b, c in _cases(form, i):
            kw = {"scale_d": bool(rng.integers(2))}
            if form.has_imm_scale:
                kw.update(imm_scale_a=int(rng.choice([-1, 1])), imm_scale_b=int(rng.choice([-1, 1])))
            got = wgmma_host(form.instr, a, b, c, **kw)
            want = wgmma(form.instr, a, b, c, **kw)
            bad = np.count_nonzero(bits_of(got) != bits_of(want))
            assert bad == 0, f"{form.instr} family {name} {kw}: {bad} of {want.size} outputs differ"
            checked += want.size
    print(f"GPU port on the host: {len(WGMMA_FORMS)} forms, {checked} outputs, 0 mismatches")
    assert checked > 10_000_000


def test_the_source_is_one_text_for_host_and_device(tmp_path):
    # the device kernel and the host loop expand the same per-output body, and the device half
    # parses (the host compiler with CUDA's qualifiers stubbed out; NVRTC compiles it on the GPU)
    import shutil
    import subprocess

    assert SOURCE.count("WGREF_TILE_BODY") == 3 and "__global__ void wgref_wgmma_model" in SOURCE
    stub = ("#define __CUDACC_RTC__ 1\n#define __global__\n#define __host__\n#define __device__\n"
            "#define __shared__\n#define __align__(n)\n#define __launch_bounds__(...)\n"
            "static void __syncthreads() {}\n"
            "struct wg_dim3 { int x; }; static wg_dim3 blockIdx, blockDim, threadIdx;\n")
    (tmp_path / "dev.cpp").write_text(stub + SOURCE)
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    r = subprocess.run([cxx, "-fsyntax-only", str(tmp_path / "dev.cpp")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.gpu
def test_the_device_build_matches_the_host_build_on_every_form():
    # the same source through NVRTC on the H200's CUDA cores: bit for bit what the host build gives
    import cupy as cp

    from gpu.kernels.device_model import wgmma_device

    for i, form in enumerate(WGMMA_FORMS):
        for name, a, b, c in _cases(form, 1000 + i):
            got = cp.asnumpy(wgmma_device(form.instr, a, b, c))
            want = bits_of(wgmma_host(form.instr, a, b, c))
            assert np.array_equal(got.view(np.uint32).astype(np.uint64), want.astype(np.uint64)), \
                f"{form.instr} family {name}"


def test_every_sparse_form_matches_refmodel():
    # the kept products gathered by the metadata (any nibble where the hardware is deterministic,
    # the two legal ones for tf32), then the same fused sum with one row of A per tile
    from gpu.kernels.device_model import wgmma_sp_host
    from gpu.record.sparse import LEGAL_TF32
    from refmodel.numerics.sparse import wgmma_sp
    from refmodel.verify.families.operand import random_operand as _random_operand
    from refmodel.wgmma_sp_forms import WGMMA_SP_FORMS

    checked = 0
    for i, f in enumerate(WGMMA_SP_FORMS):
        rng = np.random.default_rng(i)
        fams = ("bits", "wide") if i % 2 else ("ints", "narrow")
        a = np.stack([_random_operand(rng, f.dtype_a, (64, f.k_compressed), fam) for fam in fams])
        b = np.stack([_random_operand(rng, f.dtype_b, (f.k, f.n), fam) for fam in fams])
        c = (rng.integers(-(1 << 31), (1 << 31) - 1, (2, 64, f.n), dtype=np.int64).astype(np.int32)
             if f.dtype_d == "s32" else np.stack([_random_operand(rng, f.dtype_d, (64, f.n), fam) for fam in fams]))
        pool = LEGAL_TF32 if f.dtype_a == "tf32" else np.arange(16, dtype=np.uint32)
        meta = rng.choice(pool, (2, 64, f.meta_cols)).astype(np.uint8)
        kw = {"scale_d": bool(i % 3), "sp_sel": f.sp_sels[i % len(f.sp_sels)]}
        if f.has_imm_scale:
            kw.update(imm_scale_a=int(rng.choice([-1, 1])), imm_scale_b=int(rng.choice([-1, 1])))
        got = wgmma_sp_host(f.instr, a, meta, b, c, **kw)
        want = wgmma_sp(f.instr, a, meta, b, c, **kw)
        bad = np.count_nonzero(bits_of(got) != bits_of(want))
        assert bad == 0, f"{f.instr} {kw}: {bad} of {want.size} outputs differ"
        checked += want.size
    print(f"GPU port on the host, sparse: {len(WGMMA_SP_FORMS)} forms, {checked} outputs, 0 mismatches")
    assert checked > 5_000_000


# ----------------------------------------------------------------------------- the tiled chain kernel

def test_chain_kernel_matches_refmodel_on_every_dense_form_and_family():
    # wgref_model_chain_host (one CTA per tile and column block, operands staged once per step)
    # on every dense form and input family, chain 1
    from gpu.kernels.device_model import wgmma_chain_host

    checked = 0
    for i, form in enumerate(WGMMA_FORMS):
        rng = np.random.default_rng(7000 + i)
        for name, a, b, c in _cases(form, 7000 + i):
            kw = {"scale_d": bool(rng.integers(2))}
            if form.has_imm_scale:
                kw.update(imm_scale_a=int(rng.choice([-1, 1])), imm_scale_b=int(rng.choice([-1, 1])))
            got = wgmma_chain_host(form.instr, a, b, c, chain=1, **kw)
            want = wgmma(form.instr, a, b, c, **kw)
            bad = np.count_nonzero(bits_of(got) != bits_of(want))
            assert bad == 0, f"{form.instr} family {name} {kw}: {bad} of {want.size} outputs differ"
            checked += want.size
    print(f"chain kernel on the host: {len(WGMMA_FORMS)} forms, {checked} outputs, 0 mismatches")
    assert checked > 10_000_000


def _chain_sample():
    # every family and accumulator, satfinite int8, small / tail / full N
    picks = {}
    for f in WGMMA_FORMS:
        key = (f.family, f.dtype_a, f.dtype_b, f.dtype_d, f.satfinite)
        if f.n in (8, 72, 256) and (key, f.n) not in picks:
            picks[(key, f.n)] = f
    return list(picks.values())


@pytest.mark.parametrize("chain", [2, 3, 5])
def test_chain_kernel_matches_refmodel_chain(chain):
    from gpu.kernels.device_model import wgmma_chain_host
    from refmodel.verify.jobs import Job, model_chain

    forms = _chain_sample()
    assert {f.family for f in forms} == {"tf32", "f16", "bf16", "fp8", "int8"}
    assert {f.dtype_d for f in forms} >= {"f16", "f32", "s32"} and any(f.satfinite for f in forms)
    checked = 0
    for i, form in enumerate(forms):
        rng = np.random.default_rng(100 * chain + i)
        fams = families_for(form)
        for fi, fam in enumerate(fams):
            if (fi + i) % 2:
                continue
            a, b, c = fam.make(form, rng, 2, chain)
            a, b = a[..., :chain * form.k], b[..., :chain * form.k, :]
            scale_d = bool((fi + i + chain) % 3)
            imm = (int(rng.choice([-1, 1])), int(rng.choice([-1, 1]))) if form.has_imm_scale else (1, 1)
            job = Job(instr=form.instr, rs=False, chain=chain, scale_d=scale_d, imm_scale_a=imm[0], imm_scale_b=imm[1])
            want = model_chain(wgmma, job, a, b, c)
            got = wgmma_chain_host(form.instr, a, b, c, chain=chain, scale_d=scale_d, imm_scale_a=imm[0],
                                   imm_scale_b=imm[1])
            bad = np.count_nonzero(bits_of(got) != bits_of(want))
            assert bad == 0, f"{form.instr} chain {chain} family {fam.name} scale_d {scale_d} imm {imm}: {bad} differ"
            checked += want.size
    assert checked > 100_000


def test_chain_kernel_rejects_bad_shapes():
    from gpu.kernels.device_model import wgmma_chain_host
    from refmodel.errors import InputError

    f = WGMMA_FORMS[0]
    a = np.zeros((1, 64, 2 * f.k), np.float32)
    b = np.zeros((1, f.k, f.n), np.float32)
    with pytest.raises(InputError):
        wgmma_chain_host(f.instr, a, b, chain=2)
    with pytest.raises(InputError):
        wgmma_chain_host(f.instr, a, b, chain=0)


def test_sparse_chain_kernel_matches_the_row_gather_path():
    # the new wgmma_sp_host (pos on the tiled kernel) and the former R = 1 gather path agree
    from gpu.kernels.device_model import wgmma_sp_host, wgmma_sp_host_rows
    from gpu.record.sparse import LEGAL_TF32
    from refmodel.verify.families.operand import random_operand as _random_operand
    from refmodel.wgmma_sp_forms import WGMMA_SP_FORMS

    for i, f in enumerate(WGMMA_SP_FORMS[::37]):
        rng = np.random.default_rng(50 + i)
        a = _random_operand(rng, f.dtype_a, (2, 64, f.k_compressed), "bits")
        b = _random_operand(rng, f.dtype_b, (2, f.k, f.n), "bits")
        pool = LEGAL_TF32 if f.dtype_a == "tf32" else np.arange(16, dtype=np.uint32)
        meta = rng.choice(pool, (2, 64, f.meta_cols)).astype(np.uint8)
        got = wgmma_sp_host(f.instr, a, meta, b, None, sp_sel=f.sp_sels[0])
        want = wgmma_sp_host_rows(f.instr, a, meta, b, None, sp_sel=f.sp_sels[0])
        assert np.array_equal(bits_of(got), bits_of(want)), f.instr


def _device_sample_forms():
    return _chain_sample()


@pytest.mark.gpu
def test_chain_device_kernel_matches_the_host_kernel():
    # NVRTC build of the tiled chain kernels on the H200 vs their host build: every dense form
    # (chain 1), a chain 2/3/5 sample, and a sparse sample with legal and illegal metadata
    import cupy as cp

    from gpu.kernels.device_model import (
        wgmma_chain_device,
        wgmma_chain_host,
        wgmma_sp_device,
        wgmma_sp_host,
    )
    from gpu.record.sparse import LEGAL_TF32
    from refmodel.verify.families.operand import random_operand as _random_operand
    from refmodel.wgmma_sp_forms import WGMMA_SP_FORMS

    for i, form in enumerate(WGMMA_FORMS):
        for name, a, b, c in _cases(form, 3000 + i):
            got = cp.asnumpy(wgmma_chain_device(form.instr, a, b, c, chain=1)).view(np.uint32)
            want = bits_of(wgmma_chain_host(form.instr, a, b, c, chain=1)).astype(np.uint32)
            assert np.array_equal(got.astype(np.uint64), want.astype(np.uint64)), f"{form.instr} family {name}"
    for chain in (2, 3, 5):
        for i, form in enumerate(_device_sample_forms()):
            rng = np.random.default_rng(chain * 31 + i)
            for fam in families_for(form)[::2]:
                a, b, c = fam.make(form, rng, 2, chain)
                a, b = a[..., :chain * form.k], b[..., :chain * form.k, :]
                kw = {"scale_d": bool(i % 2)}
                if form.has_imm_scale:
                    kw.update(imm_scale_a=-1, imm_scale_b=1 - 2 * (i % 2))
                got = cp.asnumpy(wgmma_chain_device(form.instr, a, b, c, chain=chain, **kw)).view(np.uint32)
                want = bits_of(wgmma_chain_host(form.instr, a, b, c, chain=chain, **kw)).astype(np.uint32)
                assert np.array_equal(got.astype(np.uint64), want.astype(np.uint64)), \
                    f"{form.instr} chain {chain} family {fam.name}"
    for i, f in enumerate(WGMMA_SP_FORMS[::5]):
        rng = np.random.default_rng(900 + i)
        fam = ("bits", "wide", "ints", "narrow")[i % 4]
        a = _random_operand(rng, f.dtype_a, (2, 64, f.k_compressed), fam)
        b = _random_operand(rng, f.dtype_b, (2, f.k, f.n), fam)
        pool = LEGAL_TF32 if f.dtype_a == "tf32" else np.arange(16, dtype=np.uint32)
        meta = rng.choice(pool, (2, 64, f.meta_cols)).astype(np.uint8)
        kw = {"sp_sel": f.sp_sels[i % len(f.sp_sels)]}
        got = cp.asnumpy(wgmma_sp_device(f.instr, a, meta, b, None, **kw)).view(np.uint32)
        want = bits_of(wgmma_sp_host(f.instr, a, meta, b, None, **kw)).astype(np.uint32)
        assert np.array_equal(got.astype(np.uint64), want.astype(np.uint64)), f.instr
