"""refmodel.golden.inductor: torch.compile max-autotune FP8 _scaled_mm templates, from the generated source,
against the H200 recordings (fixtures/inductor)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from refmodel.errors import InputError
from refmodel.golden.inductor import parse_template, scaled_mm
from refmodel.verify.fixtures import load_arrays, load_manifest
from refmodel.verify.replay_golden import inductor_codes, inductor_scaled_mm_args, replay_inductor_calls

ROOT = Path(__file__).resolve().parent.parent


def _entry(file):
    """(manifest entry, arrays, each call's generated source) of one fixtures/inductor file."""
    d = ROOT / "fixtures" / "inductor"
    e = next(e for e in load_manifest(d)["entries"] if e["file"] == file)
    arrays = load_arrays(d, e)
    return e, arrays, inductor_codes(e["meta"], arrays, e["kind"])


@pytest.fixture(scope="module")
def recorded():
    return _entry("scaled_mm.npz")


def test_the_recorded_calls_replay_with_no_mismatch(recorded):
    e, arrays, _ = recorded
    r = replay_inductor_calls(e["meta"], arrays)
    assert r.mismatches == 0 and r.cases == e["cases"] == 147456


def test_the_template_is_read_from_the_source(recorded):
    e, _, codes = recorded
    for c, code in zip(e["meta"]["calls"], codes):
        t = parse_template(code)
        assert {"BLOCK_M": t.block_m, "BLOCK_N": t.block_n, "BLOCK_K": t.block_k, "num_warps": t.num_warps,
                "num_stages": t.num_stages, "pattern": t.pattern} == c["template"]
        assert t.pattern == "add" and not t.use_fast_accum and t.out == "bf16"
        assert t.block_m < 64                            # the autotuner's small tiles: the f16 mma.sync path


def _inputs(e, c, j):
    return inductor_scaled_mm_args(e["meta"], c, j)


def test_the_old_wgmma_assumption_would_be_wrong(recorded):
    from refmodel.golden import triton_matmul
    from refmodel.numerics.gemm import _convert

    e, arrays, codes = recorded
    c, code = e["meta"]["calls"][0], codes[0]
    a, b, sa, sb = _inputs(e, c, 0)
    got = scaled_mm(a, b, sa, sb, code=code)
    pad = np.zeros((64, a.shape[1]), a.dtype)
    pad[:a.shape[0]] = a
    wg = triton_matmul(pad, b, block_k=64, block_m=64, block_n=64, num_warps=4, pattern="add")[:a.shape[0]]
    with np.errstate(all="ignore"):
        as_wgmma = _convert(np.float32(wg * (sa * sb)), np.dtype(got.dtype))
    assert np.mean(as_wgmma.view(np.uint16) != got.view(np.uint16)) > 0.02      # 4% of the bf16 outputs
    assert np.array_equal(got[:16, :16].view(np.uint16), recorded[1]["corner0"][0])   # the H200's


def test_unrecorded_templates_are_refused(recorded):
    e, _, codes = recorded
    a, b, sa, sb = _inputs(e, e["meta"]["calls"][0], 0)
    with pytest.raises(InputError, match="was not recorded"):
        scaled_mm(a, b, sa, sb, code=codes[0].replace("tmp3 = acc * tmp2", "tmp3 = tmp2 * acc + 1.0"))
    with pytest.raises(InputError, match="generated source"):
        parse_template("def f(): pass")
    with pytest.raises(InputError, match="extern kernel"):
        parse_template("@triton.jit\ndef k(): pass")


def test_wgref_golden_inductor(recorded, tmp_path):
    e, arrays, codes = recorded
    c = e["meta"]["calls"][0]
    a, b, sa, sb = _inputs(e, c, 0)
    np.save(tmp_path / "a.npy", a.view(np.uint8))
    np.save(tmp_path / "b.npy", np.ascontiguousarray(b.view(np.uint8).T))
    np.save(tmp_path / "sa.npy", sa)
    np.save(tmp_path / "sb.npy", sb)
    (tmp_path / "gen.py").write_text(codes[0])
    r = subprocess.run([sys.executable, "-m", "wgref.cli", "golden", "inductor", "a.npy", "b.npy", "--dtype", "e4m3",
                        "--out-dtype", "bf16", "--code", "gen.py", "--scale-a", "sa.npy", "--scale-b", "sb.npy",
                        "-o", "d.npy"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = np.load(tmp_path / "d.npy")
    assert np.array_equal(d[:16, :16].view(np.uint16), arrays["corner0"][0])
    r = subprocess.run([sys.executable, "-m", "wgref.cli", "golden", "inductor", "a.npy", "b.npy", "--dtype", "e4m3",
                        "-o", "d.npy"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 2 and "needs --code" in r.stderr


def test_the_doc_page_states_the_fixtures(recorded):
    import json

    text = " ".join((ROOT / "docs" / "inductor.md").read_text().split())
    man = json.loads((ROOT / "fixtures" / "inductor" / "manifest.json").read_text())
    total = sum(e["cases"] for e in man["entries"])
    assert f"{total:,} outputs, 0 mismatches" in text
    for e in man["entries"]:
        for c in e["meta"]["calls"]:
            t = c["template"]
            assert f"| {c['name']} |" in text and f"{t['BLOCK_M']}/{t['BLOCK_N']}/{t['BLOCK_K']} | {t['num_warps']} |" in text


# ----------------------------------------------------------------------------- every recorded template

def test_the_tensor_wise_calls_and_the_templates_replay_with_no_mismatch():
    from refmodel.verify.replay_golden import replay_inductor_templates

    e, arrays, codes = _entry("scaled_mm_tensor.npz")
    r = replay_inductor_calls(e["meta"], arrays)
    assert r.mismatches == 0 and r.cases == e["cases"] == 688128
    assert {c["name"] for c in e["meta"]["calls"]} == {"tensor_fast_m32", "tensor_precise_m32", "tensor_fast_m256",
                                                      "tensor_precise_m256", "tensor_precise_m256_rep1",
                                                      "tensor_precise_m256_rep2", "tensor_precise_m256_rep3"}
    e, arrays, codes = _entry("templates.npz")
    r = replay_inductor_templates(e["meta"], arrays)
    assert r.mismatches == 0 and r.cases == e["cases"] == 1277952
    assert {c["op"] for c in e["meta"]["calls"]} == {"mm", "addmm", "bmm", "mm_relu"}
    for c, code in zip(e["meta"]["calls"], codes):
        t = parse_template(code)
        assert {"BLOCK_M": t.block_m, "BLOCK_N": t.block_n, "BLOCK_K": t.block_k, "num_warps": t.num_warps,
                "num_stages": t.num_stages, "pattern": t.pattern} == c["template"]


def test_one_call_three_processes_three_kernels():
    """The same mm call compiled in three fresh processes: the autotuner picked three configurations; for
    bf16 (one wgmma chain per output, whatever the tile) the bits agree."""
    e, arrays, codes = _entry("templates.npz")
    reps = [i for i, c in enumerate(e["meta"]["calls"]) if c["name"].startswith("mm_bf16_m128_rep")]
    assert len(reps) == 3
    picks = {tuple(sorted(e["meta"]["calls"][i]["template"].items())) for i in reps}
    assert len(picks) == 3
    assert all(np.array_equal(arrays["hw_sha256"][reps[0]], arrays["hw_sha256"][i]) for i in reps)


def test_one_fp8_call_four_processes_the_pick_decides_the_bits():
    """tensor_precise_m256 (torch._scaled_mm, per-tensor scales) compiled in four fresh processes: the autotuner
    picked three configurations, and on the H100 the FP8 bits differ between them (unlike bf16); the model,
    given each process's source, gives each process's bits and groups the processes as the hardware does."""
    import hashlib

    e, arrays, codes = _entry("scaled_mm_tensor.npz")
    reps = [i for i, c in enumerate(e["meta"]["calls"]) if c["name"].startswith("tensor_precise_m256")]
    assert len(reps) == 4
    picks = {tuple(sorted(e["meta"]["calls"][i]["template"].items())) for i in reps}
    assert len(picks) == 3
    hw = [arrays["hw_sha256"][i].tobytes() for i in reps]   # every family's digest
    assert len(set(hw)) == 2
    got = []
    for i in reps:
        a, b, sa, sb = _inputs(e, e["meta"]["calls"][i], 0)
        out = scaled_mm(a, b, sa, sb, code=codes[i])
        assert np.array_equal(out[:16, :16].view(np.uint16), arrays[f"corner{i}"][0])
        got.append(hashlib.sha256(np.ascontiguousarray(out).tobytes()).digest())
    assert [[x == y for y in got] for x in got] == [[x == y for y in hw] for x in hw]


def test_the_configuration_decides_the_fp8_bits():
    """tensor_fast_m32 ran BLOCK_M 16 (f16 mma.sync); the same source claiming BLOCK_M 64 (wgmma) differs."""
    e, arrays, codes = _entry("scaled_mm_tensor.npz")
    i = next(i for i, c in enumerate(e["meta"]["calls"]) if c["name"] == "tensor_fast_m32")
    c, code = e["meta"]["calls"][i], codes[i]
    a, b, sa, sb = _inputs(e, c, 0)                        # family 0: narrow
    got = scaled_mm(a, b, sa, sb, code=code)
    assert np.array_equal(got[:16, :16].view(np.uint16), arrays[f"corner{i}"][0])
    wg = code.replace("'BLOCK_M': 16", "'BLOCK_M': 64").replace("num_warps=2", "num_warps=4")
    assert parse_template(wg).block_m == 64
    assert np.mean(scaled_mm(a, b, sa, sb, code=wg).view(np.uint16) != got.view(np.uint16)) > 0.01


def test_what_was_not_recorded_is_refused():
    from refmodel.golden import inductor as ind

    e, arrays, codes = _entry("templates.npz")
    name = {c["name"]: code for c, code in zip(e["meta"]["calls"], codes)}
    a = np.zeros((64, 512), ml_bf16())
    b = np.zeros((512, 256), ml_bf16())
    relu = name["mm_relu_bf16_m64"]
    with pytest.raises(InputError, match="was not recorded"):
        ind.mm(a, b, code=relu.replace("tmp1 = triton_helpers.maximum(tmp0, acc)", "tmp1 = tl.sigmoid(acc)"))
    with pytest.raises(InputError, match="contracts to fma"):
        ind.mm(a, b, code=relu.replace("tmp1 = triton_helpers.maximum(tmp0, acc)", "tmp2 = acc * acc\n    tmp1 = tmp2 + acc"))
    with pytest.raises(InputError, match="EVEN_K"):
        ind.mm(a, b, code=relu.replace("'EVEN_K': True", "'EVEN_K': False"))
    with pytest.raises(InputError, match="persistent TMA"):
        parse_template(relu + "\n# tl.make_tensor_descriptor(\n")
    with pytest.raises(InputError, match="not a addmm template"):
        ind.addmm(np.zeros(256, ml_bf16()), a, b, code=relu)
    with pytest.raises(InputError, match="must be bfloat16"):
        ind.mm(a.astype(np.float32), b, code=relu)


def ml_bf16():
    import ml_dtypes

    return ml_dtypes.bfloat16


def test_wgref_golden_inductor_addmm_and_bmm(tmp_path):
    from refmodel.verify.replay_golden import inductor_template_args

    e, arrays, codes = _entry("templates.npz")
    for op in ("addmm", "bmm"):
        i = next(i for i, c in enumerate(e["meta"]["calls"]) if c["op"] == op)
        c = e["meta"]["calls"][i]
        x = inductor_template_args(e["meta"], c, 0)
        a, b = (x["a"], x["b"]) if op == "bmm" else (x["a"][0], x["b"][0])
        np.save(tmp_path / "a.npy", a.view(np.uint16))
        np.save(tmp_path / "b.npy", b.view(np.uint16))
        (tmp_path / "gen.py").write_text(codes[i])
        extra = []
        if op == "addmm":
            np.save(tmp_path / "bias.npy", x["bias"].view(np.uint16))
            extra = ["--bias", "bias.npy"]
        r = subprocess.run([sys.executable, "-m", "wgref.cli", "golden", "inductor", "a.npy", "b.npy", "--dtype", "bf16",
                            "--out-dtype", "bf16", "--code", "gen.py", "-o", "d.npy", *extra], cwd=tmp_path,
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        d = np.load(tmp_path / "d.npy")
        first = d.reshape(-1, d.shape[-2], d.shape[-1])[0]
        assert np.array_equal(first[:16, :16].view(np.uint16), arrays[f"corner{i}"][0]), op


def test_a_template_from_its_configuration_equals_the_generated_source():
    """make_template (op, dtype, blocks, warps, stages, pattern, recorded epilogue) computes what the recorded
    source does, on every recorded call (first family)."""
    from refmodel.golden import inductor as ind
    from refmodel.verify.replay_golden import inductor_template_args

    for file in ("scaled_mm.npz", "scaled_mm_tensor.npz", "templates.npz"):
        e, arrays, codes = _entry(file)
        for i, (c, code) in enumerate(zip(e["meta"]["calls"], codes)):
            t = c["template"]
            cfg = dict(block_m=t["BLOCK_M"], block_n=t["BLOCK_N"], block_k=t["BLOCK_K"], num_warps=t["num_warps"],
                       num_stages=t["num_stages"], pattern=t["pattern"])
            if file == "templates.npz":
                x = inductor_template_args(e["meta"], c, 0)
                op = {"mm_relu": "mm"}.get(c["op"], c["op"])
                epi = {"addmm": "bias", "mm_relu": "relu"}.get(c["op"], "none")
                out = {"bf16": "bf16", "f16": "fp16", "f32": "fp32"}[c["dtype"]]
                tm = ind.make_template(op, dtype=c["dtype"], epilogue=epi, out=out,
                                       allow_tf32=bool(c["options"].get("allow_tf32")), **cfg)
                a, b = (x["a"], x["b"]) if op == "bmm" else (x["a"][0], x["b"][0])
                inputs = {"in_ptr0": x["bias"]} if "bias" in x else None
                got, want = ind.template_output(a, b, inputs, template=tm), ind.template_output(a, b, inputs, code=code)
            else:
                a, b, sa, sb = _inputs(e, c, 0)
                tensor = c.get("scaling", "row") == "tensor"
                tm = ind.make_template("scaled_mm", dtype="e4m3", epilogue="tensor_scales" if tensor else "row_scales",
                                       **cfg)
                got, want = ind.scaled_mm(a, b, sa, sb, template=tm), ind.scaled_mm(a, b, sa, sb, code=code)
            assert np.array_equal(np.asarray(got).view(np.uint8), np.asarray(want).view(np.uint8)), c["name"]
