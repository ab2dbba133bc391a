"""gpu.record.deepgemm's CPU side: the --explore file format read back by --compare, and the quick check."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np

from gpu.record import deepgemm as rd
from refmodel.numerics.gemm import gemm

F8 = ml_dtypes.float8_e4m3fn
INSTR = "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"


def _cast(a_bf16, b_bf16):
    """numpy stand-in of DeepGEMM's per_token / per_block casts (codes + logical scales)."""
    m, k = a_bf16.shape
    n = b_bf16.shape[1]
    af = a_bf16.astype(np.float32).reshape(m, k // 128, 128)
    sfa = np.maximum(np.abs(af).max(2), 1e-4).astype(np.float32) / np.float32(448)
    a8 = (af / sfa[:, :, None]).reshape(m, k).astype(F8)
    nb = -(-n // 128)
    bp = np.zeros((nb * 128, k), np.float32)
    bp[:n] = b_bf16.astype(np.float32).T
    bv = bp.reshape(nb, 128, k // 128, 128)
    sfb = np.maximum(np.abs(bv).max((1, 3)), 1e-4).astype(np.float32) / np.float32(448)
    b8 = (bv / sfb[:, None, :, None]).reshape(nb * 128, k)[:n].astype(F8)
    return a8.view(np.uint8), sfa, b8.view(np.uint8), sfb


def test_compare_reads_what_explore_writes(tmp_path):
    m, n, k, seed, er = 96, 192, 512, 1234, (0, 1)   # M % 64 != 0 and N % 128 != 0 on purpose
    a, b = rd.inputs(seed, m, n, k, er)
    a8, sfa, b8, sfb = _cast(a, b)
    mp = 128
    ap = np.zeros((mp, k), np.uint8)
    ap[:m] = a8
    sap = np.ones((mp, k // 128), np.float32)
    sap[:m] = sfa
    d = gemm(ap.view(F8), np.ascontiguousarray(b8.T).view(F8), instr=INSTR, promote_every=4, scale_a=sap,
             scale_b=np.repeat(sfb, 128, axis=0)[:n].T.copy(), out_dtype="bf16")[:m]
    bits = d.view(np.uint16)
    q = rd.quick_check(a8, sfa, b8, sfb, bits)
    assert set(q) == {"fma", "mul_add", "exact"}
    assert q["fma"]["of"] == m * n and q["fma"]["match"] > 0.8 * m * n
    name = "t"
    rd._save(tmp_path, {"shapes": [{"name": name, "M": m, "N": n, "K": k, "seed": seed, "exp_range": list(er),
                                    "ok": True, "a_bf16_sha256": rd._sha(a), "b_bf16_sha256": rd._sha(b)}]},
             {f"{name}.a": a8, f"{name}.b": b8, f"{name}.sfa": sfa, f"{name}.sfb": sfb, f"{name}.d": bits})
    assert json.loads((tmp_path / "deepgemm.json").read_text())["shapes"][0]["name"] == name
    lines = []
    assert rd.compare(tmp_path, log=lines.append) == 0
    assert "fma=0" in lines[0]
    bits2 = bits.copy()
    bits2[3, 5] ^= 1
    rd._save(tmp_path, json.loads((tmp_path / "deepgemm.json").read_text()),
             {f"{name}.a": a8, f"{name}.b": b8, f"{name}.sfa": sfa, f"{name}.sfb": sfb, f"{name}.d": bits2})
    assert rd.compare(tmp_path, log=lines.append) == 1


def test_sass_and_ptx_summaries():
    sass = ("        /*0a30*/                   HGMMA.64x128x32.F32.E4M3.E4M3 gdesc[UR4], RZ, !UPT ;\n"
            "        /*0a40*/              @P0 FFMA R3, R4, R5, R3 ;\n"
            "        /*0a50*/                   F2FP.BF16.F32.PACK_AB R0, R1, R2 ;\n")
    s = rd._sass_summary(sass)
    assert s["ops"] == {"HGMMA": 1, "FFMA": 1, "F2FP": 1}
    assert s["hgmma"] == {"HGMMA.64x128x32.F32.E4M3.E4M3": 1}
    ptx = ("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {...};\n mul.f32 %f1, %f2, %f3;\n"
           " fma.rn.f32 %f4, %f1, %f5, %f4;\n cvt.rn.bf16x2.f32 %r1, %f6, %f7;\n")
    assert rd._ptx_summary(ptx) == {"wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3": 1, "mul.f32": 1,
                                    "fma.rn.f32": 1, "cvt.rn.bf16x2.f32": 1}
