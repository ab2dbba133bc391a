"""The FP8 GEMM kernel (gpu/kernels/gemm_fp8.py): every config's source assembles for sm_90a (no spills,
no serialised wgmma, the register budget setmaxnreg needs), its event trace passes the pipeline checker (and
its broken variants are flagged), and on an H200 it equals refmodel.gemm with the same schedule bit for bit
(gpu marker; fixtures/gemm replays in CI)."""

import re

import numpy as np
import pytest
from host_cxx import assemble_sm90a, needs_nvcc

from gpu.kernels.gemm_fp8 import GemmConfig, kernel_source, parse_config, trace
from refmodel.errors import InputError
from refmodel.machine.pipeline import BROKEN, check

CONFIGS = {
    "persistent-promote-bf16": GemmConfig(),
    "persistent-fast-bn256-bf16": GemmConfig(promote=False),
    "persistent-fast-bn128-bf16": GemmConfig(promote=False, bn=128),
    "persistent-promote-f32": GemmConfig(out="f32"),
    "persistent-fast-bn256-f32": GemmConfig(promote=False, out="f32"),
    "persistent-promote-bf16-2stages": GemmConfig(stages=2),
    "persistent-promote-bf16-xtile": GemmConfig(xtile=True),
    "persistent-promote-f32-xtile": GemmConfig(out="f32", xtile=True),
    "persistent-promote-bf16-gscales": GemmConfig(scales="global"),
    "persistent-promote-bf16-gscales-xtile": GemmConfig(scales="global", xtile=True),
    "persistent-promote-f32-gscales": GemmConfig(out="f32", scales="global"),
    "persistent-promote-bf16-xtile-cluster2-gscales": GemmConfig(xtile=True, cluster=2, scales="global"),
    "persistent-promote-bf16-xtile-cluster2": GemmConfig(xtile=True, cluster=2),
    "persistent-promote-bf16-cluster2": GemmConfig(cluster=2),
    "persistent-fast-bn256-bf16-cluster2": GemmConfig(promote=False, cluster=2),
    "persistent-promote-f32-cluster2": GemmConfig(out="f32", cluster=2),
    "persistent-promote-bf16-bn192": GemmConfig(bn=192),
    "persistent-promote-bf16-bn192-gscales": GemmConfig(bn=192, scales="global"),
    "persistent-promote-f32-bn192": GemmConfig(bn=192, out="f32"),
    "persistent-promote-bf16-1partial": GemmConfig(partials=1),
    "persistent-promote-bf16-1partial-gscales": GemmConfig(partials=1, scales="global"),
    "persistent-promote-bf16-1partial-xtile-gscales": GemmConfig(partials=1, xtile=True, scales="global"),
    "persistent-promote-bf16-bn192-xtile": GemmConfig(bn=192, xtile=True),
    "persistent-promote-bf16-bn192-xtile-gscales": GemmConfig(bn=192, xtile=True, scales="global"),
    "persistent-promote-f32-bn192-xtile-gscales": GemmConfig(bn=192, xtile=True, out="f32", scales="global"),
    "persistent-tensor-bf16": GemmConfig(scales="tensor"),
    "persistent-tensor-f32": GemmConfig(scales="tensor", out="f32"),
    "persistent-tensor-bf16-xtile": GemmConfig(scales="tensor", xtile=True),
    "persistent-tensor-bf16-1partial": GemmConfig(scales="tensor", partials=1),
    "persistent-tensor-bf16-bn192": GemmConfig(scales="tensor", bn=192),
    "persistent-tensor-bf16-cluster2": GemmConfig(scales="tensor", cluster=2),
    "persistent-tensor-bf16-bn144": GemmConfig(scales="tensor", bn=144),
    "persistent-tensor-f32-bn144": GemmConfig(scales="tensor", bn=144, out="f32"),
    "persistent-promote-bf16-yield9": GemmConfig(ffma_yield=9),
    "simple-promote-bf16": GemmConfig(schedule="simple"),
    "simple-nopromote-bf16": GemmConfig(schedule="simple", promote=False),
    "simple-promote-f32-3stages": GemmConfig(schedule="simple", out="f32", stages=3),
    "simple-plain-f32": GemmConfig(schedule="simple", promote=False, out="f32"),
    **{f"broken-{b}": GemmConfig(broken=b) for b in ("lax_wait", "no_proxy_fence", "early_reuse")},
}


def test_config_defaults_and_errors():
    # the default keeps the scale path verified on the H200 (global loads); scales in shared memory take
    # 5 x 528 bytes: 5 ring slots fit, not 6
    assert GemmConfig() == GemmConfig(schedule="persistent", bn=128, stages=5, promote=True, scales="smem", xtile=False)
    assert GemmConfig(scales="global").stages == 6
    assert GemmConfig(scales="smem").stages == 5 and GemmConfig(promote=False).scales == "global"
    assert GemmConfig(schedule="simple").scales == "global"
    assert GemmConfig(promote=False).bn == 256 and GemmConfig(promote=False).stages == 4
    assert GemmConfig(broken="lax_wait").schedule == "simple" and GemmConfig(schedule="simple").stages == 5
    assert not GemmConfig().xtile and not GemmConfig(promote=False).xtile and not GemmConfig(schedule="simple").xtile
    # bn=192 (m64n192 partial + f32 sums: 192 registers) has one partial set, and 4 ring slots of 40 KiB fit
    assert GemmConfig(bn=192).partials == 1 and GemmConfig(bn=192).stages == 4 and GemmConfig().partials == 2
    assert GemmConfig(promote=False).partials is None
    import dataclasses
    for cfg in (GemmConfig(promote=False), GemmConfig(bn=192), GemmConfig(schedule="simple")):   # fields round-trip
        assert GemmConfig(**dataclasses.asdict(cfg)) == cfg and dataclasses.replace(cfg, stages=3).stages == 3
    for cfg in CONFIGS.values():
        assert cfg.smem_bytes <= 232448, cfg
    for kw in ({"bn": 256}, {"bn": 192, "promote": False}, {"schedule": "persistent", "broken": "lax_wait"},
               {"stages": 7}, {"schedule": "simple", "bn": 256}, {"schedule": "pingpong"}, {"out": "f16"},
               {"cluster": 3}, {"cluster": 2, "schedule": "simple"}, {"xtile": True, "promote": False},
               {"xtile": True, "schedule": "simple"}, {"scales": "smem", "promote": False},
               {"scales": "smem", "schedule": "simple"}, {"scales": "tmem"}, {"bn": 192, "partials": 2},
               {"bn": 192, "cluster": 2}, {"partials": 3}, {"partials": 1, "promote": False},
               {"partials": 1, "schedule": "simple"}, {"bn": 160}, {"partials": 1, "cluster": 2},
               {"scales": "tensor", "promote": False}, {"scales": "tensor", "schedule": "simple"},
               {"bn": 144}, {"bn": 144, "scales": "global"}, {"bn": 144, "scales": "tensor", "cluster": 2},
               {"bn": 144, "scales": "tensor", "xtile": True}, {"bn": 144, "promote": False}):
        with pytest.raises(InputError):
            GemmConfig(**kw)
    assert parse_config("promote=0,bn=128,stages=5") == GemmConfig(promote=False, bn=128, stages=5)
    assert parse_config("") == GemmConfig()
    assert parse_config("cluster=2,xtile=1,scales=smem").name == "persistent-p1-bn128-s5-c2-x-bf16"
    assert parse_config("").name == "persistent-p1-bn128-s5-bf16"
    assert parse_config("scales=global").name == "persistent-p1-bn128-s6-sg-bf16"
    assert parse_config("scales=global,xtile=1").name == "persistent-p1-bn128-s6-x-sg-bf16"
    assert parse_config("bn=192,scales=smem").name == "persistent-p1-bn192-s4-q1-bf16"
    assert parse_config("partials=1") == GemmConfig(partials=1)
    with pytest.raises(InputError):
        trace(GemmConfig(cluster=2))
    assert parse_config("ffma_yield=9").name == "persistent-p1-bn128-s5-y9-bf16" and GemmConfig().ffma_yield == 0
    # per-tensor scales: no scale area in shared memory (6 ring slots), no scale-layout kernel
    assert parse_config("scales=tensor").name == "persistent-p1-bn128-s6-st-bf16" and GemmConfig(scales="tensor").stages == 6
    for bad in ("bn", "bn=x", "colour=red", "promote=2", "scales=x", "partials=x", "ffma_yield=17", "ffma_yield=-1",
                "promote=0,ffma_yield=9"):
        with pytest.raises(InputError):
            parse_config(bad)


@pytest.mark.parametrize("name", [n for n in CONFIGS if not n.startswith("broken") and CONFIGS[n].cluster == 1])
def test_kernel_trace_passes_the_checker(name):
    cfg = CONFIGS[name]
    rep = check(trace(cfg, K=1024) if cfg.schedule == "simple" else trace(cfg, K=384, tiles=3))
    assert not rep.errors and not rep.warnings, [h.message for h in rep.hazards][:3]
    flight = max(rep.in_flight(i) for i in range(len(rep.events)))
    # simple and one partial set: wait_group 0 after every k-block; persistent with two partial sets (or
    # no promotion): the next k-block is issued before the wait
    assert flight == (1 if cfg.schedule == "simple" or (cfg.promote and cfg.partials == 1) else 2)


def test_trace_catches_staging_buffers_alternating_per_tile():
    """bn=192 has 3 epilogue chunks per tile: buffers picked by chunk index within the tile (the old
    ch % 2) would rewrite the buffer of the store issued just before (the previous tile's last chunk);
    the kernel alternates by a running count, and the checker tells the two apart."""
    import json
    import re as re_

    from gpu.kernels.gemm_fp8 import _src
    from refmodel.machine.pipeline import parse_trace

    cfg = GemmConfig(bn=192)
    evs = trace(cfg, K=384, tiles=3)
    assert not check(evs).errors
    stage_out = cfg.stages * (16384 + cfg.bn * 128)
    lines = []
    for e in evs:
        d = json.loads(e.to_json())
        m = re_.search(r"(consumer(\d)) tile=\d+ epilogue.* chunk (\d+)", d.get("line", ""))
        if m and d["op"] in ("stmatrix", "tma_store"):
            buf = stage_out + int(m.group(2)) * 16384 + (int(m.group(3)) % 2) * 8192
            d["smem"] = [[buf, buf + 8192]]
        lines.append(json.dumps(d))
    kinds = {h.kind for h in check(parse_trace("\n".join(lines) + "\n")).errors}
    assert kinds == {"smem_overwrite_store_in_flight"}, kinds
    assert _src.STAGE_OUT == 2 * 16384


@pytest.mark.parametrize("broken,kind", [("lax_wait", "acc_in_flight"), ("no_proxy_fence", "generic_write_async_read"),
                                         ("early_reuse", "smem_overwrite_in_flight")])
def test_broken_kernel_variants_are_flagged(broken, kind):
    assert broken in BROKEN
    kinds = {h.kind for h in check(trace(GemmConfig(), K=1024, broken=broken)).errors}
    assert kind in kinds, kinds
    assert kind in {h.kind for h in check(trace(GemmConfig(broken=broken), K=1024)).errors}


def test_wide_instruction_has_the_same_numerics():
    """bn=256 uses m64n256k32: refmodel.gemm computes each column as with m64n128k32, so reference() holds."""
    import ml_dtypes

    from gpu.record.gemm import inputs, scales_for
    from refmodel.dtypes import bits_of
    from refmodel.numerics.gemm import gemm

    a, b, _, _ = inputs(64, 256, 512, "bits", 1)
    A = a.view(ml_dtypes.float8_e4m3fn)
    B = np.ascontiguousarray(b.T).view(ml_dtypes.float8_e4m3fn)
    r = [bits_of(gemm(A, B, instr=f"wgmma.mma_async.sync.aligned.m64n{n}k32.f32.e4m3.e4m3")) for n in (128, 256)]
    assert np.array_equal(r[0], r[1])


@needs_nvcc
@pytest.mark.parametrize("name", list(CONFIGS))
def test_kernel_assembles_for_sm90a(name, tmp_path):
    cfg = CONFIGS[name]
    r = assemble_sm90a(kernel_source(cfg), tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "0 bytes spill stores" in r.stderr and "0 bytes spill loads" in r.stderr, r.stderr[-2000:]
    regs = int(re.search(r"Used (\d+) registers", r.stderr).group(1))
    if cfg.schedule == "persistent":
        # setmaxnreg: 128 producer threads at 24 + 256 consumer threads at 240 = 384 threads at 168
        assert regs == 168, r.stderr[-2000:]
        # ptxas would otherwise serialise the wgmmas (C7514/C7515) or inject waits (C7517)
        assert not re.search(r"C751[0-9]", r.stderr), r.stderr[-2000:]
    else:
        assert regs <= 168


@pytest.mark.gpu
@pytest.mark.parametrize("case", [(256, 384, 512, "normal", True, "bf16", ""),
                                  (208, 400, 1024, "bits", False, "f32", ""),
                                  (1008, 1040, 512, "wide", True, "f32", ""),
                                  (1040, 2064, 384, "normal", True, "bf16", ""),       # > 132 tiles, odd K blocks
                                  (1040, 2064, 256, "wide", True, "f32", ""),          # even K blocks
                                  (1040, 2064, 384, "normal", True, "bf16", "xtile=1"),
                                  (1040, 2064, 128, "bits", True, "f32", "xtile=1"),
                                  (1040, 2064, 384, "normal", True, "bf16", "scales=global"),
                                  (1040, 2064, 256, "wide", True, "f32", "scales=global,xtile=1"),
                                  (1040, 2320, 640, "bits", False, "bf16", ""),        # bn=256, > 132 tiles
                                  (1040, 2064, 384, "wide", False, "bf16", "bn=128"),
                                  (1040, 2064, 384, "normal", True, "bf16", "cluster=2"),    # odd row blocks: a
                                  (1040, 2320, 640, "bits", False, "bf16", "cluster=2"),     # CTA pair half outside
                                  (208, 400, 512, "wide", True, "f32", "cluster=2"),
                                  (1040, 2064, 384, "normal", True, "bf16", "cluster=2,xtile=1"),
                                  (1040, 2064, 384, "normal", True, "bf16", "scales=smem"),
                                  (1040, 2064, 256, "wide", True, "f32", "scales=smem,xtile=1"),
                                  (1040, 2064, 384, "normal", True, "bf16", "bn=192,scales=global"),     # odd and even tile columns
                                  (1040, 2064, 256, "wide", True, "f32", "bn=192,scales=smem"),
                                  (1008, 1040, 512, "bits", True, "bf16", "bn=192,scales=smem"),
                                  (208, 400, 512, "wide", True, "f32", "bn=192,scales=global"),   # second scale block clamped
                                  (208, 160, 512, "wide", True, "f32", "bn=192"),       # N < 192: one partial tile
                                  (192, 272, 512, "normal", True, "bf16", "bn=192,xtile=1,scales=smem"),
                                  (1040, 2064, 384, "bits", True, "bf16", "partials=1,xtile=1,scales=global"),
                                  (1040, 2064, 384, "normal", True, "bf16", "partials=1,scales=smem"),
                                  (1040, 2064, 384, "normal", True, "bf16", "bn=192,xtile=1,scales=global"),
                                  (1040, 2064, 256, "wide", True, "f32", "bn=192,xtile=1,scales=smem"),
                                  (1008, 1040, 128, "bits", True, "bf16", "bn=192,xtile=1,scales=smem"),   # one k-block
                                  (256, 384, 512, "normal", True, "bf16", "schedule=simple"),
                                  # per-tensor scales (torch._scaled_mm's precise recipe), every path
                                  (1040, 2064, 384, "normal", True, "bf16", "scales=tensor"),
                                  (1040, 2064, 256, "bits", True, "f32", "scales=tensor"),
                                  (208, 400, 512, "wide", True, "bf16", "scales=tensor,xtile=1"),
                                  (1040, 2064, 384, "normal", True, "bf16", "scales=tensor,partials=1"),
                                  (1040, 2064, 384, "wide", True, "f32", "scales=tensor,bn=192"),
                                  (1040, 2064, 384, "normal", True, "bf16", "scales=tensor,cluster=2"),
                                  (1040, 2064, 384, "tiny", True, "f32", "scales=tensor"),
                                  # bn=144: 16-column tail of each tile stored directly; N = 2064 = 14 x 144 + 48
                                  (1040, 2064, 384, "normal", True, "bf16", "scales=tensor,bn=144"),
                                  (1008, 2320, 256, "bits", True, "bf16", "scales=tensor,bn=144"),
                                  (208, 400, 512, "wide", True, "f32", "scales=tensor,bn=144"),
                                  (1040, 1152, 384, "tiny", True, "bf16", "scales=tensor,bn=144"),   # 8 whole tiles
                                  (208, 144, 256, "normal", True, "bf16", "scales=tensor,bn=144,partials=1"),
                                  # the FFMA-yield rewrite of the cubin (gpu.kernels.sass): scheduling bits only
                                  (1040, 2064, 384, "normal", True, "bf16", "ffma_yield=9"),
                                  (1040, 2064, 256, "bits", True, "f32", "ffma_yield=16"),
                                  (1040, 2064, 384, "wide", True, "bf16", "partials=1,ffma_yield=16"),
                                  (1040, 2064, 256, "wide", True, "f32", "bn=192,ffma_yield=9"),
                                  # float32-subnormal scale products and sums: a flush-to-zero build differs
                                  (1040, 2064, 384, "tiny", True, "f32", ""),
                                  (208, 400, 512, "tiny", True, "bf16", "scales=global"),
                                  (1040, 2064, 256, "tiny", True, "f32", "bn=192,xtile=1,scales=global"),
                                  (1040, 2064, 384, "tiny", True, "f32", "ffma_yield=16"),
                                  (256, 384, 512, "tiny", True, "bf16", "schedule=simple")], ids=str)
def test_kernel_equals_refmodel_gemm(case):
    import cupy as cp

    from gpu.kernels.gemm_fp8 import gemm_fp8, reference
    from gpu.record.gemm import inputs, scales_for
    from refmodel.dtypes import bits_of

    M, N, K, fam, promote, out, extra = case
    cfg = parse_config(",".join(x for x in (extra, f"promote={int(promote)}", f"out={out}") if x))
    a, b, sa, sb = inputs(M, N, K, fam, 99)
    sa, sb = scales_for(cfg, sa, sb)
    d, _ = gemm_fp8(a, b, sa if promote else None, sb if promote else None, cfg=cfg)
    ref = bits_of(reference(a, b, sa if promote else None, sb if promote else None, cfg=cfg))
    hw = cp.asnumpy(d).view(ref.dtype)
    assert np.array_equal(hw, ref), f"{int(np.count_nonzero(hw != ref))} mismatches"


@needs_nvcc
def test_scale_prep_kernel_assembles(tmp_path):
    """scales="smem": the launcher's device transpose of scale_a (and padding of scale_b)."""
    from gpu.kernels.gemm_fp8 import _PREP_SRC

    r = assemble_sm90a(_PREP_SRC, tmp_path)
    assert r.returncode == 0 and "0 bytes spill stores" in r.stderr, r.stderr[-2000:]


@pytest.mark.gpu
@pytest.mark.parametrize("fam", ["normal", "wide"])
def test_tensor_recipe_equals_torch_scaled_mm(fam):
    """scales="tensor" against the library itself: torch._scaled_mm (cuBLASLt, use_fast_accum=False) with
    the same two per-tensor scales gives the same bf16 bits (docs/torch-scaled-mm.md: the recipe)."""
    torch = pytest.importorskip("torch")
    import cupy as cp

    from gpu.kernels.gemm_fp8 import gemm_fp8
    from gpu.record.gemm import inputs

    M, N, K = 2048, 2048, 1024
    a, b, _, _ = inputs(M, N, K, fam, 7)
    sa, sb = np.float32(0.3), np.float32(0.7)
    d, _ = gemm_fp8(a, b, sa, sb, cfg=parse_config("scales=tensor"))
    ta = torch.as_tensor(a, device="cuda").view(torch.float8_e4m3fn)
    tb = torch.as_tensor(b, device="cuda").view(torch.float8_e4m3fn)
    one = lambda v: torch.tensor(float(v), device="cuda")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        ref = torch._scaled_mm(ta, tb.t(), one(sa), one(sb), out_dtype=torch.bfloat16, use_fast_accum=False)
        torch.cuda.synchronize()
    names = " ".join(e.key for e in prof.key_averages())
    if "splitK" in names:
        pytest.skip(f"cuBLASLt chose a split-K kernel here ({names[:120]}): another reduction order")
    hw = cp.asnumpy(d)
    lib = ref.view(torch.int16).cpu().numpy().view(np.uint16)
    assert np.array_equal(hw, lib), f"{int(np.count_nonzero(hw != lib))} of {hw.size} outputs differ from torch._scaled_mm"


def test_choose_bn_picks_the_tile_the_h200_ran_faster():
    """tensor_config's tile width against the recorded bench runs (bn 128 and 144, per-tensor scales)."""
    import json
    from pathlib import Path

    from gpu.kernels.gemm_fp8 import choose_bn, tensor_config, tile_rounds

    res = Path(__file__).resolve().parents[1] / "bench" / "results"
    seen = 0
    for f in (res / "gemm_kernel_h200.json", res / "gemm_kernel_h200_session6" / "call6_gemm_kernel_b.json"):
        rows = {(r["n"], r["config"]): r["ours_tflops"] for r in json.loads(f.read_text())}
        for n in sorted({n for n, _ in rows}):
            t = {bn: rows.get((n, GemmConfig(scales="tensor", bn=bn).name)) for bn in (128, 144)}
            if None in t.values():
                continue
            assert choose_bn(n, n) == max(t, key=t.get), (f.name, n, t)
            assert tensor_config(n, n).bn == choose_bn(n, n)
            seen += 1
    assert seen >= 4
    assert tile_rounds(8192, 8192, 128) == 32 and tile_rounds(8192, 8192, 144) == 28 and tile_rounds(100, 100, 128) == 1
