"""The GPU port of the accumulator (gpu/kernels/device_model.py), built for the host from the very source
NVRTC compiles for the device, against the CPU refmodel: every dense wgmma form, every input
family of the fuzzer (NaN/Inf/subnormal/extreme/cancellation), scale-d and imm-scale."""

import numpy as np
import pytest

from gpu.kernels.device_model import SOURCE, wgmma_host
from refmodel.verify.jobs import families_for
from refmodel.dtypes import bits_of
from refmodel.numerics.wgmma import wgmma
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
    from refmodel.verify.families.operand import random_operand as _random_operand
    from refmodel.numerics.sparse import wgmma_sp
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
