"""Golden models of CUTLASS's CuTe-DSL Hopper GEMM examples and of cuBLAS (refmodel.golden.cutlass /
cublas): schedule identities, refusals, and the CLI reproducing the H200 recordings (fixtures/cutlass and
fixtures/cublas are replayed in full by test_fixtures.py)."""

import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import refmodel
from refmodel.dtypes import bits_of
from refmodel.errors import DTypeError, InputError
from refmodel.golden import cublas_matmul, cublas_schedule, cutlass_dense_gemm
from refmodel.golden.cublas import split_bounds
from refmodel.verify.seeded import library_matrices

FIX = Path(refmodel.__file__).parent.parent / "fixtures"
E4M3 = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"


def test_cutlass_dense_is_one_chain_and_2xacc_promotes():
    a, b = library_matrices(1, "e4m3", 64, 16, 512, lim=400.0)
    chain = refmodel.gemm(a, b, instr=E4M3)
    assert np.array_equal(bits_of(cutlass_dense_gemm(a, b)), bits_of(chain))
    p4 = refmodel.gemm(a, b, instr=E4M3, promote_every=4)
    got = cutlass_dense_gemm(a, b, mma_promotion_interval=4)
    assert np.array_equal(bits_of(got), bits_of(p4)) and not np.array_equal(bits_of(got), bits_of(chain))
    h = cutlass_dense_gemm(a, b, acc_dtype="f16", out_dtype=np.float32)     # f16 accumulator widened exactly
    f16 = refmodel.gemm(a, b, instr="wgmma.mma_async.sync.aligned.m64n8k32.f16.e4m3.e4m3")
    assert np.array_equal(h, f16.astype(np.float32))


def test_cutlass_refusals_name_the_rule():
    a, b = library_matrices(2, "bf16", 64, 8, 64)
    with pytest.raises(InputError, match="acc_dtype"):
        cutlass_dense_gemm(a, b, acc_dtype="f16")
    with pytest.raises(InputError, match="2xacc"):
        cutlass_dense_gemm(a, b, mma_promotion_interval=2)
    f8a, f8b = library_matrices(2, "e4m3", 64, 8, 128, lim=400.0)
    with pytest.raises(InputError, match="dividing K/32 = 4"):
        cutlass_dense_gemm(f8a, f8b, mma_promotion_interval=3)
    with pytest.raises(DTypeError):
        cutlass_dense_gemm(a, b.astype(np.float16))


def test_cublas_split_bounds_follow_the_gemm_k_size_rule():
    assert split_bounds(8192, 6, 64) == [0, 1408, 2816, 4224, 5632, 7040, 8192]
    assert split_bounds(1000, 14, 8) == [72 * i for i in range(14)] + [1000]
    with pytest.raises(InputError, match="empty chunk"):
        split_bounds(256, 5, 64)


def test_cublas_without_split_is_one_chain_and_splits_add_f32_partials_in_order():
    a, b = library_matrices(3, "bf16", 64, 16, 1024)
    instr = "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"
    chain = refmodel.gemm(a, b, instr=instr, out_dtype="bf16")
    assert np.array_equal(bits_of(cublas_matmul(a, b)), bits_of(chain))
    p = [refmodel.gemm(a[:, k0:k1], b[k0:k1], instr=instr) for k0, k1 in ((0, 384), (384, 768), (768, 1024))]
    want = refmodel.numerics.gemm._convert(((p[0] + p[1]).astype(np.float32) + p[2]).astype(np.float32),
                                           np.dtype(ml_dtypes.bfloat16))
    assert np.array_equal(bits_of(cublas_matmul(a, b, splits=3)), bits_of(want))


def test_cublas_schedule_reads_the_kernel_and_refuses_unrecorded_split_counts():
    s = cublas_schedule("nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT", 1024, 1024, 1024)
    assert (s.splits, s.instr, s.determined) == (1, "wgmma", True)
    s = cublas_schedule(["nvjet_sm90_tst_64x32_64x16_2x4_h_bz_splitK_NNT", "cublasLt::splitKreduce_kernel"],
                        128, 128, 16384)
    assert s.splits == 11 and s.determined
    assert not cublas_schedule("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_NNT", 1, 1024, 4096).determined
    with pytest.raises(InputError, match="not recorded"):
        cublas_schedule("nvjet_sm90_tst_64x32_64x16_2x4_h_bz_splitK_NNT", 128, 128, 32768)


def _fixture(feature, file):
    man = json.loads((FIX / feature / "manifest.json").read_text())
    entry = next(e for e in man["entries"] if e["file"] == file)
    return entry["meta"], dict(np.load(FIX / feature / file))


def test_wgref_golden_cutlass_and_cublas_reproduce_the_h200(tmp_path):
    meta, z = _fixture("cutlass", "examples.npz")
    k, c = next((k, c) for k, c in enumerate(meta["configs"]) if c["mma_promotion_interval"])
    a, b = library_matrices(c["seed"], c["dtype"], c["M"], c["N"], c["K"], exp_range=tuple(c["exp_range"]), lim=c["lim"])
    np.save(tmp_path / "a.npy", bits_of(a[z[f"rows{k}"]]))
    np.save(tmp_path / "b.npy", bits_of(b[:, z[f"cols{k}"]]))
    r = subprocess.run([sys.executable, "-m", "wgref.cli", "golden", "cutlass", "a.npy", "b.npy", "--dtype", c["dtype"],
                        "--promotion-interval", str(c["mma_promotion_interval"]), "--out-dtype", c["out"], "-o", "d.npy"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "d.npy"), z[c["array"]])

    meta, z = _fixture("cublas", "calls.npz")
    k, c = next((k, c) for k, c in enumerate(meta["calls"]) if c["name"] == "mm_bf16_128x128x16384")
    a, b = library_matrices(c["seed"], c["dtype"], c["M"], c["N"], c["K"], exp_range=tuple(c["exp_range"]), lim=c["lim"])
    np.save(tmp_path / "a.npy", bits_of(a))
    np.save(tmp_path / "b.npy", bits_of(b))
    gemm_kernel = next(x for x in c["kernels"] if x.startswith("nvjet"))
    r = subprocess.run([sys.executable, "-m", "wgref.cli", "golden", "cublas", "a.npy", "b.npy", "--dtype", "bf16",
                        "--kernel", gemm_kernel, "--out-dtype", "bf16", "-o", "d.npy"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "d.npy")[np.ix_(z[f"rows{k}"], z[f"cols{k}"])], z[c["array"]])
    r = subprocess.run([sys.executable, "-m", "wgref.cli", "golden", "cublas", "a.npy", "b.npy", "--dtype", "bf16",
                        "--out-dtype", "bf16", "-o", "d1.npy"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0                                                  # no split: one chain, visibly different
    assert not np.array_equal(np.load(tmp_path / "d1.npy"), np.load(tmp_path / "d.npy"))


def test_cublas_split_reduction_writes_the_canonical_nan():
    a = np.zeros((64, 256), ml_dtypes.bfloat16)
    b = np.zeros((256, 8), ml_dtypes.bfloat16)
    a[0, 0], a[0, 128], b[0, :], b[128, :] = np.inf, np.inf, 1.0, -1.0    # +Inf in split 0, -Inf in split 1
    d = bits_of(cublas_matmul(a, b, splits=2, out_dtype="f32"))
    assert np.all(d[0] == 0x7FFFFFFF) and np.all(d[1:] == 0)
