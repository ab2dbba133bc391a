"""The GPU-resident fuzzer (gpu/fuzz/gpu_engine.py): its input generator, built for the host from the
source the GPU runs, and the GPU port of the model on those inputs against the CPU refmodel on every
dense form and every family; on the H200 (gpu marker) the device generator against the host one,
campaigns with 0 mismatches, and a planted wrong output that must be found."""

import json

import numpy as np
import pytest
from host_cxx import device_source_syntax, needs_cxx

from gpu.fuzz.gpu_engine import FAMILIES, GEN_SOURCE, generate_host, tile_families, typed
from refmodel.dtypes import bits_of
from refmodel.wgmma_forms import WGMMA_FORMS

E4M3 = next(f for f in WGMMA_FORMS if f.instr.endswith("m64n64k32.f32.e4m3.e4m3"))


@needs_cxx
def test_the_gpu_port_matches_refmodel_on_every_form_and_generated_family():
    from gpu.kernels.device_model import wgmma_host
    from refmodel.numerics.wgmma import wgmma

    checked = 0
    for i, form in enumerate(WGMMA_FORMS):
        x = generate_host(form, 7, i, len(FAMILIES))          # one tile of every family
        a, b, c = typed(form, x)
        kw = {"scale_d": bool(i % 4)}
        if form.has_imm_scale:
            kw.update(imm_scale_a=(-1, 1)[i % 2], imm_scale_b=(-1, 1)[(i // 2) % 2])
        want = wgmma(form.instr, a, b, c, **kw)
        got = wgmma_host(form.instr, a, b, c, **kw)
        bad = np.count_nonzero(bits_of(got) != bits_of(want))
        assert bad == 0, f"{form.instr} {kw}: {bad} of {want.size} outputs differ"
        checked += want.size
    assert checked > 20_000_000


@needs_cxx
def test_families_have_the_properties_they_are_named_for():
    x = generate_host(E4M3, 1, 2, len(FAMILIES))
    fams = tile_families(1, 2, len(FAMILIES))
    assert sorted(fams) == list(range(len(FAMILIES)))        # every family in every batch
    a, b, _ = typed(E4M3, x)
    by = {FAMILIES[f]: t for t, f in enumerate(fams)}
    ca, cb = x["a"][by["cancel"]], x["b"][by["cancel"]]
    assert np.array_equal(ca[:, 0::2], ca[:, 1::2])            # A[r, k^1] == A[r, k]
    flipped = (cb[0::2] ^ cb[1::2]) == 0x80                    # B[k^1, j] == -B[k, j], mostly exactly
    assert 0.8 < flipped.mean() < 1.0
    va = a.astype(np.float32)
    assert np.isnan(va[by["special"]]).any() and np.isnan(va[by["bits"]]).any()
    assert not np.isnan(va[by["narrow"]]).any() and np.nanmax(np.abs(va[by["narrow"]])) <= 8
    assert (va[by["zero"]] == 0).mean() > 0.9
    sub = np.abs(va[by["subnormal"]])
    assert ((sub > 0) & (sub < 2.0 ** -6)).mean() > 0.3        # e4m3 subnormals
    wide = np.abs(va[by["wide"]])
    assert wide.max() / wide[wide > 0].min() > 2.0 ** 12        # exponent spread


@needs_cxx
def test_a_batch_is_a_function_of_seed_and_batch():
    one = generate_host(E4M3, 3, 9, 7)
    assert all(np.array_equal(one[k], v) for k, v in generate_host(E4M3, 3, 9, 7).items())
    other = generate_host(E4M3, 3, 10, 7)
    assert not np.array_equal(one["a"], other["a"])


def test_the_generator_source_parses_for_the_device():
    r = device_source_syntax(GEN_SOURCE)
    assert r.returncode == 0, r.stderr


@pytest.mark.gpu
def test_the_device_generator_is_the_host_generator():
    import cupy as cp

    from gpu.kernels.form_runner import FormRunner

    for form in (E4M3, next(f for f in WGMMA_FORMS if f.instr.endswith("m64n256k16.f32.bf16.bf16")),
                 next(f for f in WGMMA_FORMS if f.instr.endswith("m64n32k8.f32.tf32.tf32")),
                 next(f for f in WGMMA_FORMS if f.family == "int8")):
        run = FormRunner(form, 1, 1)
        dev = run.generate(5, 11, cp.asarray(tile_families(5, 11, 9)))
        host = generate_host(form, 5, 11, 9)
        for k in host:
            assert np.array_equal(cp.asnumpy(dev[k]), host[k]), (form.instr, k)


@pytest.mark.gpu
def test_device_campaign_agrees_with_the_hardware_and_finds_a_planted_error(tmp_path):
    from gpu.fuzz.gpu_engine import fuzz_device
    from refmodel.verify.journal import merge_journals

    target = "n256k32.f32.e4m3.e4m3,n64k16.f32.bf16,n24k32.s32.s8.u8,n32k8.f32.tf32,n128k16.f16.f16"
    rep = fuzz_device(target, cases=12 * 512, batch_tiles=512, seed=4, out=tmp_path / "ok")
    assert rep.outputs > 0 and rep.mismatches == 0 and rep.port_disagreements == 0, rep.first
    planted = fuzz_device("n64k32.f32.e4m3.e5m2", cases=3 * 1024, batch_tiles=256, seed=4, out=tmp_path / "plant",
                          plant=1)
    assert planted.mismatches == 1 and planted.port_disagreements == 0 and planted.tiles_copied_back == 1
    assert planted.first["batch"] == 1 and planted.first["real_mismatch"]
    assert (tmp_path / "plant" / "mismatch_batch1.npz").exists()
    merged = merge_journals([tmp_path / "ok" / "journal.jsonl"])
    assert merged.outputs == rep.outputs
    recs = [json.loads(x) for x in (tmp_path / "ok" / "journal.jsonl").read_text().splitlines()[1:]]
    assert sum(r["outputs"] for r in recs) == rep.outputs


@pytest.mark.gpu
def test_device_campaign_on_rs_operands_and_chains_up_to_128(tmp_path):
    from gpu.fuzz.gpu_engine import fuzz_device

    target = "n256k32.f32.e4m3.e4m3,n64k16.f16.f16.f16,n24k32.s32.s8.u8,n32k8.f32.tf32"
    drawn = fuzz_device(target, cases=4000, batch_tiles=256, seed=6, out=tmp_path / "drawn")
    assert drawn.mismatches == 0 and drawn.port_disagreements == 0, drawn.first
    assert len(drawn.chains) >= 3 and drawn.instr_outputs > drawn.outputs
    for rs, chain in ((True, 1), (True, 128), (False, 128), (False, 37)):
        rep = fuzz_device(target, cases=300, batch_tiles=512, seed=7, out=tmp_path / f"{rs}{chain}", rs=rs, chain=chain)
        assert rep.outputs > 0 and rep.mismatches == 0 and rep.port_disagreements == 0, (rs, chain, rep.first)
        assert list(rep.chains) == [str(chain)]
    planted = fuzz_device("n64k16.f32.bf16.bf16", cases=400, batch_tiles=256, seed=8, out=tmp_path / "plant",
                          plant=2, rs=True, chain=16)
    assert planted.mismatches == 1 and planted.port_disagreements == 0 and planted.first["batch"] == 2
    assert planted.first["chain"] == 16 and planted.first["rs"] is True


@pytest.mark.gpu
def test_the_gathering_hardware_kernel_equals_the_host_launchers_kernel():
    """FormRunner.hardware (images and registers built inside the kernel from the element arrays, D
    written per element) against FormRunner.hardware_staged (the launcher's kernel, cupy gathers) on
    every accumulator type and operand source, with chains."""
    import cupy as cp

    from gpu.kernels.form_runner import FormRunner

    picks = [f for f in WGMMA_FORMS if f.n in (8, 24, 64, 256)][::6]
    assert {f.dtype_d for f in picks} >= {"f16", "f32", "s32"}
    for i, f in enumerate(picks):
        for rs, chain in ((False, 1), (True, 1), (i % 2 == 0, 5)):
            run = FormRunner(f, 1, 1, rs=rs, chain=chain)
            x = run.generate(9, i, cp.asarray(tile_families(9, i, 7)))
            for sd in (True, False):
                got = cp.asnumpy(run.hardware(x, sd))
                want = cp.asnumpy(run.hardware_staged(x, sd)).astype(np.uint32)
                assert np.array_equal(got, want), (f.instr, rs, chain, sd)


@pytest.mark.gpu
def test_the_tiled_chain_port_equals_the_per_output_port_on_engine_batches():
    """FormRunner.model (the tiled chain kernel) against FormRunner.model_per_output (the first port,
    one thread per output, one launch per step) and the hardware, on every family, SS/RS, chains."""
    import cupy as cp

    from gpu.kernels.form_runner import FormRunner

    picks = [f for f in WGMMA_FORMS if f.n in (8, 40, 128, 256)][::5]
    for i, f in enumerate(picks):
        for rs, chain in ((False, 1), (True, 3), (False, 17)):
            imm = ((-1, 1) if i % 2 else (1, -1)) if f.has_imm_scale else (1, 1)
            run = FormRunner(f, *imm, rs=rs, chain=chain)
            x = run.generate(12, i, cp.asarray(tile_families(12, i, 7)))
            for sd in (True, False):
                fast, slow = cp.asnumpy(run.model(x, sd)), cp.asnumpy(run.model_per_output(x, sd))
                assert np.array_equal(fast, slow), (f.instr, rs, chain, sd)
                assert np.array_equal(fast, cp.asnumpy(run.hardware(x, sd))), (f.instr, rs, chain, sd)


def test_the_kernels_accumulator_formula_is_the_fragment_layout():
    """gpu.kernels.wgmma.gather_kernel_source computes each register's (row, col) instead of reading a
    table: the formula it writes is refmodel.layouts.fragment.accumulator_layout's."""
    from refmodel.layouts.fragment import accumulator_layout

    for n in range(8, 257, 8):
        for dt in ("f32", "f16", "s32"):
            r, c = accumulator_layout(n, dt)
            r, c = r.reshape(128, -1), c.reshape(128, -1)
            t, j = np.arange(128)[:, None], np.arange(r.shape[1])[None]
            assert np.array_equal(16 * (t // 32) + (t % 32) // 4 + 8 * ((j >> 1) & 1), r)
            assert np.array_equal(8 * (j >> 2) + 2 * (t % 4) + (j & 1), c)


def test_job_tables_build_the_images_the_host_launcher_builds():
    """The GPU engine's gathers (gpu.kernels.form_runner.hardware_inputs, run here with numpy) give the
    shared-memory images, RS A registers and C registers of gpu.kernels.wgmma.prepare_launch (the
    launcher every recorded dense fixture went through) for SS/RS and chains."""
    from gpu.kernels.form_runner import hardware_inputs, job_tables
    from gpu.kernels.wgmma import prepare_launch

    checked = 0
    for i, f in enumerate(WGMMA_FORMS[::5]):
        for rs, chain in ((False, 1), (True, 1), (False, 3), (True, 2)):
            x = generate_host(f, 3, i, 2, chain=chain)
            la = prepare_launch(f, *typed(f, x), chain=chain, rs=rs)
            img, afrag, cin = hardware_inputs(np, job_tables(f, rs, chain), x)
            assert np.array_equal(img.view(np.uint8).reshape(la.img.shape), la.img), (f.instr, rs, chain)
            assert np.array_equal(cin.reshape(la.cin.shape), la.cin), (f.instr, rs, chain)
            if rs:
                assert np.array_equal(afrag.reshape(la.afrag.shape), la.afrag), (f.instr, rs, chain)
            checked += 1
    assert checked == 4 * len(WGMMA_FORMS[::5])


@needs_cxx
def test_the_engines_model_inputs_give_refmodels_chain_on_the_host():
    """FormRunner.model's operand preparation (gpu.kernels.form_runner.port_operands, run with numpy)
    fed to the host build of the chain kernel gives refmodel's chain (refmodel.verify.jobs.model_chain)
    bit for bit, for every family, imm scales, scale-d 0/1 and chains; and equals the inputs the host
    wrapper builds from typed values (device_model._chain_inputs)."""
    from gpu.kernels.device_model import _chain_host_run, _chain_inputs
    from gpu.kernels.form_runner import port_operands
    from refmodel.numerics.accumulate import params_for
    from refmodel.numerics.wgmma import wgmma
    from refmodel.verify.jobs import Job, model_chain

    picks = [f for f in WGMMA_FORMS if f.n in (8, 48, 256)][::3]
    assert {f.family for f in picks} == {"tf32", "f16", "bf16", "fp8", "int8"}
    for i, f in enumerate(picks):
        imm = ((-1, 1), (1, -1), (-1, -1))[i % 3] if f.has_imm_scale else (1, 1)
        chain, sd = (1, 2, 5)[i % 3], bool(i % 2)
        x = generate_host(f, 21, i, 7, chain=chain)
        a4, b4, c = port_operands(np, f, imm, chain, x, sd)
        ta, tb, tc = typed(f, x)
        K = f.k
        ref = _chain_inputs(f, params_for(f), [ta[..., s * K:(s + 1) * K] for s in range(chain)],
                            [tb[..., s * K:(s + 1) * K, :] for s in range(chain)], tc, *imm, 7, f.n)
        assert np.array_equal(a4, ref["arrays"][0]) and np.array_equal(b4, ref["arrays"][1]), f.instr
        prepared = dict(ref, arrays=[a4, b4, np.ascontiguousarray(c).view(np.int32 if ref["int"] else np.uint32)])
        got = _chain_host_run(prepared, None, 7, chain, K, K, f.n)
        job = Job(f.instr, scale_d=sd, imm_scale_a=imm[0], imm_scale_b=imm[1], chain=chain)
        want = bits_of(model_chain(wgmma, job, ta, tb, tc))
        assert np.array_equal(got.view(np.uint32), want.astype(np.uint32).reshape(got.shape)), (f.instr, imm, chain, sd)


def test_chains_longer_than_the_generator_keys_are_refused():
    from gpu.kernels.generator import _shapes

    f = next(f for f in WGMMA_FORMS if f.instr.endswith("m64n8k32.f32.e4m3.e4m3"))
    assert _shapes(f, 128)[0][3] == 4096
    with pytest.raises(ValueError, match="at most 4096"):
        _shapes(f, 129)


@needs_cxx
def test_the_numpy_generator_is_the_c_generator_for_every_operand_format():
    from refmodel.verify.seeded import generate

    seen = set()
    for i, f in enumerate(WGMMA_FORMS):
        dts = (f.dtype_a, f.dtype_b, f.dtype_d)
        if dts in seen:
            continue
        seen.add(dts)
        host, ref = generate_host(f, 3, i, 9), generate(dts, f.k, f.n, 3, i, 9)
        for k in host:
            assert np.array_equal(host[k], ref[k]), (f.instr, k)
    assert len(seen) >= 16


def test_the_device_model_replayer_recomputes_digests_and_flags_a_wrong_one():
    import hashlib

    from refmodel.numerics.wgmma import wgmma
    from refmodel.verify.replay_golden import replay_device_model
    from refmodel.verify.seeded import generate, typed, variant

    forms = [E4M3, next(f for f in WGMMA_FORMS if f.instr.endswith("m64n16k16.f16.bf16.bf16") or
                        f.instr.endswith("m64n16k16.f32.bf16.bf16"))]
    digests = []
    for i, f in enumerate(forms):
        sd, imm = variant(i, f.has_imm_scale)
        dts = (f.dtype_a, f.dtype_b, f.dtype_d)
        d = wgmma(f.instr, *typed(dts, generate(dts, f.k, f.n, 9, i, 7)), scale_d=sd, imm_scale_a=imm[0],
                  imm_scale_b=imm[1])
        raw = np.ascontiguousarray(bits_of(d).reshape(7, -1).astype(np.uint32), dtype="<u4")
        digests.append(np.frombuffer(hashlib.sha256(raw.tobytes()).digest(), np.uint8))
    meta = {"seed": 9, "tiles": 7, "instrs": [f.instr for f in forms]}
    port = np.stack(digests)
    ok = replay_device_model(meta, {"port_sha256": port, "hw_sha256": port.copy()})
    assert ok.mismatches == 0 and ok.cases == 2 * 7 * 64 * (64 + 16)
    bad = port.copy()
    bad[1, 0] ^= 1
    res = replay_device_model(meta, {"port_sha256": port, "hw_sha256": bad})
    assert res.mismatches == 7 * 64 * 16 and "hardware" in res.details[0]
