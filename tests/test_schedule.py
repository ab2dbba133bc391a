"""Schedules as data (refmodel.golden.Schedule): one executor reproduces every golden model bit for bit,
schedules round-trip through JSON, and the models that pick a schedule by kernel name refuse the
splits they do not know and warn where the library switches kernels."""

from __future__ import annotations

import json
import warnings

import ml_dtypes
import numpy as np
import pytest

from refmodel.dtypes import bits_of
from refmodel.errors import InputError
from refmodel.golden.cusparselt import RECORDED, cusparselt_matmul, cusparselt_schedule
from refmodel.golden.kernel_regions import ScheduleWarning, region
from refmodel.golden.schedule import Schedule, load_schedule
from refmodel.golden.torch_scaled_mm import RECORDED_SPLITS, scaled_mm, scaled_mm_schedule
from refmodel.verify.families.matrix import make_inputs
from refmodel.verify.seeded import library_matrices, sparse_library_matrices

W = "wgmma.mma_async.sync.aligned.m64n8k"


def same(x, y) -> bool:
    return np.array_equal(bits_of(np.asarray(x)), bits_of(np.asarray(y)))


@pytest.fixture(scope="module", params=["narrow", "wide", "special", "cancel", "zero", "subnormal"])
def fp8(request):
    return make_inputs(np.random.default_rng(11), request.param, "e4m3", 128, 64, 512)


def test_one_executor_reproduces_triton(fp8):
    from refmodel.golden import triton_matmul

    a, b = fp8
    with np.errstate(all="ignore"):
        v3 = dict(block_m=128, block_n=128, num_warps=4)          # Triton 3.6 lowers this to wgmma
        assert same(triton_matmul(a, b, block_k=128, **v3), Schedule(W + "32.f32.e4m3.e4m3").run(a, b))
        for imp, g in ((32, 1), (64, 2), (96, 3), (128, 4)):
            assert same(triton_matmul(a, b, block_k=128, max_num_imprecise_acc=imp, **v3),
                        Schedule(W + "32.f32.e4m3.e4m3", promote_every=g, restart_every=128).run(a, b)), imp
        assert same(triton_matmul(a, b, block_k=128, max_num_imprecise_acc=0),
                    Schedule("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", k_order="triton_fp8_mma_sync",
                             operand_cvt="f16").run(a, b))


def test_one_executor_reproduces_cublas_cutlass_and_scaled_mm(fp8):
    from refmodel.golden import cublas_matmul, cutlass_dense_gemm
    from refmodel.numerics.scaled_mm import scaled_mm as unsplit

    a, b = fp8
    with np.errstate(all="ignore"):
        assert same(cublas_matmul(a, b, splits=2), Schedule(W + "32.f32.e4m3.e4m3", promote_every=4, splits=2,
                                                            split_align=128, out_dtype="f32").run(a, b))
        assert same(cutlass_dense_gemm(a, b, mma_promotion_interval=4),
                    Schedule(W + "32.f32.e4m3.e4m3", promote_every=4, promote_op="mul_add").run(a, b))
        bnk = np.ascontiguousarray(b.T)
        for fast in (True, False):
            s = Schedule(W + "32.f32.e4m3.e4m3", promote_every=None if fast else 4, epilogue_scale="tensor",
                         out_dtype="bf16")
            assert same(unsplit(a, bnk, np.float32(0.5), np.float32(3), out_dtype="bf16", use_fast_accum=fast),
                        s.run(a, b, scale_a=np.float32(0.5), scale_b=np.float32(3)))
    ab, bb = library_matrices(3, "bf16", 64, 48, 2048)
    for S in (1, 3, 7):
        assert same(cublas_matmul(ab, bb, splits=S),
                    Schedule(W + "16.f32.bf16.bf16", splits=S, split_align=64, out_dtype="bf16").run(ab, bb))
    assert same(cublas_matmul(ab, bb, splits=5, instr="mma.sync.m16n8k8"),
                Schedule("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32", splits=5, split_align=8,
                         out_dtype="bf16").run(ab, bb))


def test_one_executor_reproduces_triton_f32_paths():
    from refmodel.golden import triton_matmul

    af, bf = library_matrices(2, "f32", 64, 32, 256)
    assert same(triton_matmul(af, bf, block_k=32, input_precision="tf32x3"),
                Schedule(W + "8.f32.tf32.tf32", emulation="tf32x3", restart_every=32).run(af, bf))
    assert same(triton_matmul(af, bf, block_k=32, input_precision="ieee"), Schedule("fma.rn.f32").run(af, bf))


def test_split_reduction_orders_differ_and_tree_is_pairwise():
    a, b = library_matrices(4, "bf16", 64, 64, 4096)
    outs = {r: Schedule(W + "16.f32.bf16.bf16", splits=8, reduce=r).run(a, b) for r in ("sequential", "reverse", "tree")}
    assert not same(outs["sequential"], outs["tree"]) or not same(outs["sequential"], outs["reverse"])
    from refmodel.numerics.accumulate import add_f32

    parts = [Schedule(W + "16.f32.bf16.bf16").run(a[:, k:k + 512], b[k:k + 512]) for k in range(0, 4096, 512)]
    while len(parts) > 1:
        parts = [add_f32(parts[i], parts[i + 1]) for i in range(0, len(parts), 2)]
    assert same(outs["tree"], parts[0])


def test_schedule_json_round_trip_and_words(tmp_path):
    s = Schedule(W + "32.f32.e4m3.e4m3", promote_every=4, splits=3, split_align=128, reduce="tree",
                 epilogue_scale="tensor", out_dtype="bf16", source={"library": "cuBLASLt 13.1", "kernel": "nvjet_x"})
    assert Schedule.from_dict(json.loads(s.to_json())) == s
    p = tmp_path / "s.json"
    p.write_text(s.to_json())
    assert load_schedule(str(p)) == s and load_schedule(s.to_json()) == s
    text = s.describe()
    for word in ("Split-K: 3 chunks", "tree", "Every 4 instruction", "RN(RN(scale_a*scale_b) * acc)", "bf16",
                 "cuBLASLt 13.1"):
        assert word in text, word


@pytest.mark.parametrize("bad, rule", [
    (dict(instr="wgmma.nope"), "instr must be"),
    (dict(instr=W + "32.f32.e4m3.e4m3", splits=0), "splits must be a positive int"),
    (dict(instr=W + "32.f32.e4m3.e4m3", reduce="random"), "reduce must be one of"),
    (dict(instr=W + "32.f32.e4m3.e4m3", block_scales=True), "need promote_every"),
    (dict(instr=W + "32.f32.e4m3.e4m3", block_scales="yes", promote_every=4), "block_scales must be True or False"),
    (dict(instr="fma.rn.f32", promote_every=4), "promote_every applies to wgmma"),
    (dict(instr=W + "32.f32.e4m3.e4m3", k_order="triton_fp8_mma_sync"), "k_order / operand_cvt"),
    (dict(instr=W + "32.f32.e4m3.e4m3", out_dtype="f64"), "out_dtype must be one of"),
])
def test_bad_schedules_are_refused_in_one_sentence(bad, rule):
    with pytest.raises(InputError, match=rule):
        Schedule(**bad)
    with pytest.raises(InputError, match="unknown schedule field"):
        Schedule.from_dict({"instr": W + "32.f32.e4m3.e4m3", "splitz": 2})


# ----------------------------------------------------------------------------- cuSPARSELt

SEG_ON = "sm90_xmma_sparse_gemm_f16f16_f16f32_f32_tt_t_tilesize128x256x64_cgasize1x1x1_warpgroupsize2x1x1_execute_segment_k_on_kernel_5x_cusparselt"
SEG_OFF = SEG_ON.replace("segment_k_on", "segment_k_off")
SPLIT = SEG_ON.replace("execute_segment_k_on_kernel", "execute_split_k_kernel")


def test_cusparselt_picks_its_schedule_from_the_kernel_name():
    assert cusparselt_schedule("f16", 64, 64, 8192, out_dtype="f16", kernel=[SEG_ON]).splits == 8
    assert cusparselt_schedule("f16", 64, 64, 8192, out_dtype="f16", kernel=SEG_OFF).splits == 1
    with pytest.raises(InputError, match="segment count was not recorded for this shape; pass schedule="):
        cusparselt_schedule("f16", 128, 64, 8192, out_dtype="f16", kernel=SEG_ON)
    with pytest.raises(InputError, match="split-K kernel .* pass schedule="):
        cusparselt_schedule("f16", 64, 64, 8192, out_dtype="f16", kernel=[SEG_ON, SPLIT])
    with pytest.raises(InputError, match="no cuSPARSELt kernel"):
        cusparselt_schedule("f16", 64, 64, 8192, out_dtype="f16", kernel="nvjet_sm90_tst_64x8")
    for key, (segs, order, evidence) in RECORDED.items():
        assert segs > 1 and order in ("sequential", "reverse", "tree") and "0 mismatches" in evidence


def test_cusparselt_warns_where_it_switches_and_pads_any_m_n():
    a, b = sparse_library_matrices(1, "f16", 64, 64, 8192)
    with pytest.warns(ScheduleWarning, match="segment-K"):
        cusparselt_matmul(a, b, out_dtype=np.float16)
    a, b = sparse_library_matrices(2, "bf16", 100, 20, 256)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # 64..128 x 20 x 256: no split region near it? then no warning
        try:
            d = cusparselt_matmul(a, b, out_dtype="bf16", kernel=SEG_OFF.replace("f16f16_f16", "bf16bf16_bf16"))
        except ScheduleWarning:  # pragma: no cover - kernel given: never warns
            raise AssertionError("a call with kernel= warned")
    ap = np.concatenate([a, np.zeros((28, 256), a.dtype)])
    bp = np.concatenate([b, np.zeros((256, 4), b.dtype)], axis=1)
    ref = Schedule("wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.bf16.bf16", out_dtype="bf16").run(ap, bp)
    assert d.shape == (100, 20) and same(d, ref[:100, :20])
    dense = a.copy()
    dense[3, 4:8] = ml_dtypes.bfloat16(1.0)
    with pytest.raises(InputError, match="not 2:4 sparse along K: row 3, columns 4..7"):
        cusparselt_matmul(dense, b, out_dtype="bf16", kernel=SEG_OFF)


# ----------------------------------------------------------------------------- torch._scaled_mm

def test_scaled_mm_split_k_known_refused_and_warned():
    kern = ["nvjet_sm90_qqtst_64x32_128x16_1x2_h_bz_splitK_TNT", "void cublasLt::splitKreduce_kernel<...>"]
    s = scaled_mm_schedule(64, 64, 8192, use_fast_accum=True, rowwise=False, out_dtype="bf16", kernel=kern)
    assert s.splits == RECORDED_SPLITS[(64, 64, 8192)] == 3 and "S = 3" in s.source["evidence"]
    with pytest.raises(InputError, match="split count was not recorded for this shape; pass schedule="):
        scaled_mm_schedule(64, 64, 4096 * 3, use_fast_accum=True, rowwise=False, out_dtype="bf16", kernel=kern)
    with pytest.raises(InputError, match="use_fast_accum=False: its split count is not determined"):
        scaled_mm_schedule(64, 64, 8192, use_fast_accum=False, rowwise=False, out_dtype="bf16", kernel=kern)
    a, b = library_matrices(9, "e4m3", 64, 64, 8192, lim=400.0)
    bnk = np.ascontiguousarray(b.T)
    with pytest.warns(ScheduleWarning, match="split-K"):
        unsplit = scaled_mm(a, bnk, np.float32(1), np.float32(1), use_fast_accum=True)
    split = scaled_mm(a, bnk, np.float32(1), np.float32(1), use_fast_accum=True, kernel=kern)
    assert not same(unsplit, split)          # the two schedules differ: the warning is not idle
    assert same(split, scaled_mm(a, bnk, np.float32(1), np.float32(1), use_fast_accum=True, schedule=s.to_json()))
    a, b = library_matrices(9, "e4m3", 256, 256, 2048, lim=400.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaled_mm(a, np.ascontiguousarray(b.T), np.float32(1), np.float32(1), use_fast_accum=True)


def test_kernel_regions_follow_the_recorded_map():
    assert region("scaled_mm_fast", 64, 64, 8192) == (2, True)
    assert region("scaled_mm_fast", 512, 512, 2048) == (0, True)
    assert region("sparse_f16", 64, 64, 8192)[0] >= 1
    assert region("matmul_bf16", 16, 64, 256)[1] is False          # below the grid: not recorded
    worst, inside = region("scaled_mm_fast", 100, 64, 8000)        # between grid points: the worst neighbour
    assert inside and worst == 2


def test_whole_matrix_sparse_helpers_equal_the_tile_by_tile_ones():
    import refmodel

    instr = "wgmma.mma_async.sp.sync.aligned.m64n32k32.f32.bf16.bf16"
    rng = np.random.default_rng(5)
    dense = rng.standard_normal((128, 96)).astype(ml_dtypes.bfloat16)
    a = refmodel.prune_2_4(dense, instr)
    tiles = [refmodel.prune_2_4(np.ascontiguousarray(dense[r:r + 64, k:k + 32]), instr)
             for r in (0, 64) for k in (0, 32, 64)]
    assert same(a, np.block([[tiles[0], tiles[1], tiles[2]], [tiles[3], tiles[4], tiles[5]]]))
    ac, meta = refmodel.compress(a, instr)
    assert ac.shape == (128, 48) and meta.shape == (128, 24)
    t_ac, t_meta = refmodel.compress(np.ascontiguousarray(a[64:, 32:64]), instr)
    assert same(ac[64:, 16:32], t_ac) and np.array_equal(meta[64:, 8:16], t_meta)
    b = rng.standard_normal((96, 32)).astype(ml_dtypes.bfloat16)
    d = refmodel.gemm_sp(instr, ac, meta, b)
    assert same(d, Schedule(instr).run(a, b))
    with pytest.raises(InputError, match=r"or \(M, K\) with M a multiple of 64"):
        refmodel.compress(a[:100], instr)


def test_triton_f16_accumulator_is_one_f16_chain():
    from refmodel.golden import triton_matmul

    a, b = library_matrices(6, "f16", 64, 32, 256, exp_range=(-5, 0), lim=8.0)
    d = triton_matmul(a, b, block_k=64, out_dtype=np.float16, acc_dtype=np.float16)
    from refmodel.numerics.gemm import gemm

    assert same(d, gemm(a, b, instr=W + "16.f16.f16.f16"))
    assert not same(d, triton_matmul(a, b, block_k=64, out_dtype=np.float16))     # f32 accumulation differs
    ab, bb = library_matrices(6, "bf16", 64, 32, 256)
    with pytest.raises(InputError, match="an f16 accumulator takes f16 or FP8 inputs"):
        triton_matmul(ab, bb, block_k=64, acc_dtype=np.float16)
    a8, b8 = library_matrices(6, "e4m3", 64, 32, 256, lim=8.0)
    with pytest.raises(InputError, match="max_num_imprecise_acc applies to an f32 accumulator"):
        triton_matmul(a8, b8, block_k=128, max_num_imprecise_acc=64, acc_dtype=np.float16, block_m=128, block_n=128,
                      num_warps=4)
