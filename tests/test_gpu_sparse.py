"""Sparse wgmma.  On an H200 (gpu marker): every family, SS and RS, both sp-sel values, any-nibble
metadata, garbage in the metadata lanes not read, against refmodel.wgmma_sp, the tagged probes of
the metadata layout, `wgref fuzz sparse` end to end, and the GPU-resident engine
(gpu/kernels/sparse_runner.py, gpu/fuzz/gpu_sparse.py).  On the host: that engine's generator, kept
positions, hardware inputs and model (the same C++ and Python, host builds) against refmodel."""

import numpy as np
import pytest
from host_cxx import device_source_syntax

from gpu.record import sparse as R
from refmodel.dtypes import bits_of
from refmodel.layouts.fragment import unpack_accumulator
from refmodel.numerics.sparse import wgmma_sp
from refmodel.verify.replay_sparse import probe_model
from refmodel.wgmma_sp_forms import parse_wgmma_sp

JOBS = [j for j in R.plan_jobs() if j["instr"].split("aligned.")[1].startswith(("m64n8k", "m64n136k", "m64n256k"))]


@pytest.mark.gpu
@pytest.mark.parametrize("job", JOBS[::3], ids=lambda j: f"{j['instr'].split('aligned.')[1]}-rs{int(j['rs'])}-sel{j['sp_sel']}")
def test_sparse_job_matches_refmodel(job):
    from gpu.kernels.sparse import SpVariant, run_wgmma_sp

    f = parse_wgmma_sp(job["instr"])
    x = R.job_inputs(job, seed=("test", 1))
    v = SpVariant(job["instr"], job["rs"], job["sp_sel"], 0, 0, job["imm_scale_a"], job["imm_scale_b"])
    d, _ = run_wgmma_sp(v, x["images"], x["desc_a"], x["desc_b"], x["meta_regs"], x["c_regs"],
                        np.full(R.TILES, job["scale_d"], np.int32), x["a_regs"] if job["rs"] else None)
    hw = unpack_accumulator(d, f.n, f.dtype_d)
    m = wgmma_sp(job["instr"], x["a"], x["meta"], x["b"], x["c"], sp_sel=job["sp_sel"], scale_d=bool(job["scale_d"]),
                 imm_scale_a=job["imm_scale_a"], imm_scale_b=job["imm_scale_b"])
    bad = np.argwhere(bits_of(hw) != bits_of(m))
    assert bad.size == 0, f"{len(bad)} mismatches, first (tile, row, col) {bad[0].tolist()}"


@pytest.mark.gpu
@pytest.mark.parametrize("probe", [p for p in R.PROBES if "tf32" not in p[0]], ids=lambda p: f"{p[0].split('aligned.')[1]}-rs{int(p[1])}-sel{p[2]}")
def test_tagged_probe_any_nibble(probe):
    from gpu.kernels.sparse import SpVariant, run_wgmma_sp

    instr, rs, sel = probe
    arr = R.probe_cases(instr, 4, illegal=True, tag="gpu-test")
    d, bases = run_wgmma_sp(SpVariant(instr, rs, sel), arr["images"], arr["desc_a"], arr["desc_b"], arr["meta"],
                            arr["c_regs"], arr["scale_d"], arr["a_regs"] if rs else None)
    assert np.array_equal(d, probe_model({"instr": instr, "rs": rs, "sp_sel": sel}, arr, bases))


@pytest.mark.gpu
def test_fuzz_sparse_end_to_end(tmp_path):
    from gpu.fuzz.cpu_engine import fuzz_sparse

    rep = fuzz_sparse("sparse:m64n64k", cases=64, seed=3, out=tmp_path)
    assert rep.tiles == 64 and rep.outputs > 0 and rep.mismatches == 0 and rep.repro is None


@pytest.mark.gpu
@pytest.mark.parametrize("chain", R.CHAINS[::2], ids=lambda c: f"{c[3]}x{c[0].split('aligned.')[1]}-rs{int(c[1])}")
def test_sparse_chain_matches_gemm_sp(chain):
    from gpu.kernels.sparse import SpVariant, run_wgmma_sp
    from refmodel.numerics.sparse import gemm_sp

    instr, rs, sel, n = chain
    f = parse_wgmma_sp(instr)
    x = R.chain_cases(instr, rs, sel, n, 4)
    d, _ = run_wgmma_sp(SpVariant(instr, rs, sel, chain=n), x["images"], x["desc_a"], x["desc_b"], x["meta_regs"],
                        x["c_regs"], np.ones(4, np.int32), x["a_regs"] if rs else None, a_step=x["a_step"],
                        b_step=x["b_step"])
    hw = unpack_accumulator(d, f.n, f.dtype_d)
    m = np.stack([gemm_sp(instr, x["a"][i], x["meta"][i], x["b"][i], x["c"][i], sp_sel=sel) for i in range(4)])
    assert np.array_equal(bits_of(hw), bits_of(m.astype(hw.dtype)))


# ----------------------------------------------------------------------------- the GPU-resident engine
# gpu/kernels/sparse_runner.py (SparseRunner) and gpu/fuzz/gpu_sparse.py (fuzz_sparse_device); the
# host tests run the same C++ text (host build) and the same Python with numpy.

from refmodel.layouts.sparse_meta import LEGAL_24 as _LEGAL_24
from refmodel.verify.sparse_cases import plan_jobs as _plan_jobs
from refmodel.wgmma_sp_forms import WGMMA_SP_FORMS as _SP_FORMS

_ALL_JOBS = _plan_jobs()


def _form_job(i: int) -> dict:
    """Form i's job (SS or RS alternating; sp-sel, scale-d and imm scales as plan_jobs spreads them)."""
    j = _ALL_JOBS[2 * i + (i % 2)]
    assert j["instr"] == _SP_FORMS[i].instr
    return j


def _has_illegal(meta) -> bool:
    return bool((~np.isin(np.asarray(meta), _LEGAL_24)).any())


def _batch_with_every_kind(run, seed: int, start: int, tiles: int = 8) -> tuple[int, dict]:
    """The first batch from ``start`` whose tiles hold every family and (2:4) any-nibble metadata."""
    for b in range(start, start + 64):
        x = run.generate(seed, b, tiles)
        if run.tf32 or _has_illegal(x["meta"]):
            return b, x
    raise AssertionError("no batch with any-nibble metadata in 64 tries")


_MIXES = sorted({f.instr.split(".")[-3] + "." + ".".join(f.instr.split(".")[-2:]) for f in _SP_FORMS})


@pytest.mark.parametrize("mix", _MIXES)
def test_host_engine_model_equals_wgmma_sp_on_every_form(mix):
    """Generator + kept positions + model (host builds) == refmodel.wgmma_sp, every sparse form of
    the type mix, 8 tiles (every family) including any-nibble metadata tiles."""
    from gpu.kernels.sparse_runner import SparseRunner

    idx = [i for i, f in enumerate(_SP_FORMS) if f.instr.endswith(mix) and f.instr.split(".")[-3] == mix.split(".")[0]]
    assert idx
    for i in idx:
        run = SparseRunner(_form_job(i), device=False)
        b, x = _batch_with_every_kind(run, 11, i)
        assert set(x["fams"].tolist()) == set(range(7))
        m, ref = run.model(x), run.refmodel(x)
        bad = np.argwhere(m != ref)
        assert bad.size == 0, f"{_SP_FORMS[i].instr} batch {b}: {len(bad)} outputs differ, first {bad[0].tolist()}"


SAMPLE = ["m64n8k32.f16.f16.f16", "m64n64k32.f32.bf16.bf16", "m64n24k16.f32.tf32.tf32", "m64n256k64.f32.e4m3.e4m3",
          "m64n40k64.f16.e5m2.e4m3", "m64n256k32.f32.f16.f16", "m64n128k16.f32.tf32.tf32", "m64n256k64.s32.s8.s8",
          "m64n16k64.satfinite.s32.u8.s8"]


def _variants(instr: str):
    """Every sp-sel, scale-d, imm-scale combination of a form, SS and RS."""
    f = parse_wgmma_sp(instr)
    imms = [(1, 1), (-1, 1), (1, -1), (-1, -1)] if f.has_imm_scale else [(1, 1)]
    for rs in (False, True):
        for sel in f.sp_sels:
            for sd in (0, 1):
                for sa, sb in imms:
                    yield {"instr": instr, "rs": rs, "sp_sel": sel, "scale_d": sd, "imm_scale_a": sa, "imm_scale_b": sb}


@pytest.mark.parametrize("shape", SAMPLE)
def test_host_engine_every_variant(shape):
    """Every sp-sel / scale-d / imm-scale / SS-RS variant of a few forms: the model equals wgmma_sp,
    the kept positions equal kept_positions, and the hardware inputs built from the index tables
    equal refmodel.verify.sparse_cases.inputs_from_math (images, descriptors, sp-meta registers with
    the garbage kept where no thread reads, C and A registers)."""
    from gpu.kernels.sparse_runner import SparseRunner
    from refmodel.numerics.sparse import kept_positions
    from refmodel.verify.sparse_cases import descriptors, inputs_from_math

    instr = next(f.instr for f in _SP_FORMS if f.instr.endswith(shape))
    for v, job in enumerate(_variants(instr)):
        run = SparseRunner(job, device=False)
        _, x = _batch_with_every_kind(run, 5, 100 * v)
        assert np.array_equal(run.positions(x), kept_positions(x["meta"], run.form))
        assert np.array_equal(run.model(x), run.refmodel(x)), job
        h = run.hardware_inputs(x)
        a, meta, bb, c = run.typed(x)
        want = inputs_from_math(run.form, a, meta, bb, c, job["sp_sel"], x["garbage"])
        assert np.array_equal(h["images"], want["images"][:, :run.size]) and not want["images"][:, run.size:].any()
        assert (h["desc_a"], h["desc_b"]) == tuple(int(d) for d in descriptors(run.form))
        assert np.array_equal(h["meta_regs"], want["meta_regs"]), job
        assert np.array_equal(h["c_regs"], want["c_regs"])
        assert (h["a_regs"] is None) if not job["rs"] else np.array_equal(h["a_regs"], want["a_regs"])


@pytest.mark.parametrize("shape", SAMPLE[::2])
def test_host_chain_model_kernel_equals_wgmma_sp(shape):
    """The swap-in model (device_model's tiled sparse chain kernels on pos, host build) == wgmma_sp."""
    from gpu.kernels.sparse_runner import SparseRunner

    instr = next(f.instr for f in _SP_FORMS if f.instr.endswith(shape))
    for v, job in enumerate(_variants(instr)):
        if job["rs"]:
            continue
        run = SparseRunner(job, device=False, model_kernel="chain")
        _, x = _batch_with_every_kind(run, 6, 100 * v)
        assert np.array_equal(run.model(x), run.refmodel(x)), job


def test_host_generator_is_reproducible_and_the_seeded_formulas():
    """(seed, batch) fixes a batch; another batch differs; the element bits are the numpy formulas
    of refmodel.verify.seeded (the dense engine's generator) and the garbage is really there."""
    from gpu.kernels.sparse_runner import generate_host
    from refmodel.verify.seeded import FORMATS, generate_operand, key, tile_families

    job = next(j for j in _ALL_JOBS if j["instr"].endswith("m64n32k64.f16.e4m3.e5m2"))
    f = parse_wgmma_sp(job["instr"])
    x1, x2, y = generate_host(job, 3, 9, 16), generate_host(job, 3, 9, 16), generate_host(job, 3, 10, 16)
    for k in x1:
        assert np.array_equal(x1[k], x2[k]), k
    assert not np.array_equal(x1["a"], y["a"]) and not np.array_equal(x1["meta"], y["meta"])
    fams = tile_families(3, 9, 16)
    for i, (name, dt, rows, cols, kdim) in enumerate((("a", f.dtype_a, 64, f.k_compressed, 1), ("b", f.dtype_b, f.k, f.n, 0),
                                                      ("c", f.dtype_d, 64, f.n, -1))):
        assert np.array_equal(x1[name], generate_operand(key(3, 9, i), fams, rows, cols, kdim, dt)), name
        assert FORMATS[dt]
    assert x1["meta"].max() <= 15 and _has_illegal(x1["meta"]) and len(np.unique(x1["garbage"])) > 1000
    legal = [t for t in range(16) if not _has_illegal(x1["meta"][t])]
    assert 0 < len(legal) < 16
    tf = next(j for j in _ALL_JOBS if ".tf32." in j["instr"])
    assert set(np.unique(generate_host(tf, 3, 9, 16)["meta"]).tolist()) == {0b0100, 0b1110}


def test_the_sparse_generator_source_parses_for_the_device():
    from gpu.kernels.runtime import PRELUDE
    from gpu.kernels.sparse_runner import SP_GEN_SOURCE

    r = device_source_syntax(PRELUDE + SP_GEN_SOURCE)
    assert r.returncode == 0, r.stderr


def test_sparse_runner_refuses_bad_jobs():
    from gpu.kernels.sparse_runner import SparseRunner
    from refmodel.errors import WgrefError

    good = dict(_form_job(0))
    for bad in ({}, {**good, "sp_sel": 5}, {**good, "instr": "wgmma.mma_async.sp.sync.aligned.m64n9k32.f32.f16.f16"}):
        with pytest.raises(WgrefError):
            SparseRunner(bad, device=False)
    s8 = next(j for j in _ALL_JOBS if ".s8." in j["instr"])
    with pytest.raises(WgrefError):
        SparseRunner({**s8, "imm_scale_a": -1}, device=False)
    with pytest.raises(WgrefError):
        SparseRunner(good, device=False).generate(0, 0, 0)


def test_host_campaign_plumbing_with_the_model_as_hardware(tmp_path, monkeypatch):
    """The campaign loop on host runners (the hardware stood in by the port itself): journal records,
    CPU recheck, exactly the planted output reported, the repro file readable by wgref replay's loader;
    a port that is wrong where refmodel agrees with the hardware counts as port_disagreements."""
    import json

    from gpu.fuzz.cpu_engine import sparse_jobs
    from gpu.fuzz.gpu_sparse import fuzz_sparse_device, job_key
    from gpu.kernels.sparse_runner import SparseRunner
    from refmodel.verify.shrink_sparse import load_sparse_case

    jobs = sparse_jobs("sparse:m64n16k")
    runners = {job_key(j): SparseRunner(j, device=False) for j in jobs}
    for r in runners.values():
        monkeypatch.setattr(r, "hardware", r.model)
    rep = fuzz_sparse_device("sparse:m64n16k", cases=400, seed=2, batch_tiles=16, out=tmp_path / "a", plant=2,
                             _runners=runners)
    assert rep.batches == 4 and rep.tiles == 400 and rep.mismatches == 1 and rep.port_disagreements == 0
    assert rep.first["batch"] == 2 and (rep.first["row"], rep.first["col"]) == (0, 7)
    recs = [json.loads(s) for s in (tmp_path / "a" / "journal.jsonl").read_text().splitlines()[1:]]
    assert [r["mismatches"] for r in recs] == [0, 0, 1, 0] and recs[2]["repro"] == rep.repro
    case, hw = load_sparse_case(rep.repro)
    assert bits_of(hw)[0, 7] != bits_of(case.model())[0, 7]
    for r in runners.values():          # a broken port: the hardware (the true model) agrees with refmodel
        true_model = r.model
        monkeypatch.setattr(r, "hardware", true_model)
        monkeypatch.setattr(r, "model", lambda x, m=true_model: m(x) ^ np.uint32(1))
    rep = fuzz_sparse_device("sparse:m64n16k", cases=100, seed=2, batch_tiles=16, out=tmp_path / "b", _runners=runners)
    assert rep.mismatches == 0 and rep.port_disagreements == rep.outputs > 0 and rep.repro is None


_DEV_JOBS = [next(j for j in _ALL_JOBS if j["instr"].endswith(s) and j["rs"] == rs)
             for s, rs in (("m64n256k64.f32.e4m3.e4m3", False), ("m64n256k32.f32.f16.f16", True),
                           ("m64n128k16.f32.tf32.tf32", False), ("m64n256k64.s32.s8.s8", True),
                           ("m64n8k32.f16.f16.f16", False), ("m64n24k64.f16.e5m2.e4m3", True))]


@pytest.mark.gpu
@pytest.mark.parametrize("job", _DEV_JOBS, ids=lambda j: j["instr"].split("aligned.")[1] + ("-rs" if j["rs"] else "-ss"))
def test_device_sparse_engine_is_the_host_engine_and_the_hardware(job):
    """Device generator == host generator; device hardware inputs, positions and model == host;
    hardware == model == refmodel on every output of the batch."""
    import cupy as cp

    from gpu.kernels.sparse_runner import SparseRunner

    dev, host = SparseRunner(job), SparseRunner(job, device=False)
    xd, xh = dev.generate(2, 4, 24), host.generate(2, 4, 24)
    for k in xh:
        assert np.array_equal(cp.asnumpy(xd[k]), xh[k]), k
    hd, hh = dev.hardware_inputs(xd), host.hardware_inputs(xh)
    for k in ("images", "meta_regs", "c_regs", "a_regs"):
        assert (hh[k] is None and hd[k] is None) or np.array_equal(cp.asnumpy(hd[k]), hh[k]), k
    assert np.array_equal(cp.asnumpy(dev.positions(xd)), host.positions(xh))
    md = cp.asnumpy(dev.model(xd))
    assert np.array_equal(md, host.model(xh))
    assert np.array_equal(cp.asnumpy(SparseRunner(job, model_kernel="chain").model(xd)), md)
    hw = cp.asnumpy(dev.hardware(xd))
    ref = host.refmodel(xh)
    bad = np.argwhere(hw != ref)
    assert bad.size == 0, f"{len(bad)} hardware outputs differ from refmodel, first {bad[0].tolist()}"
    assert np.array_equal(md, ref)


@pytest.mark.gpu
def test_device_sparse_campaign_clean_and_planted(tmp_path):
    """A short campaign on a few forms: 0 mismatches, 0 port disagreements; then one planted bit
    flip in batch 1 is reported as exactly one mismatch at that output and saved for replay."""
    import json

    from gpu.fuzz.gpu_sparse import fuzz_sparse_device
    from refmodel.verify.shrink_sparse import load_sparse_case

    rep = fuzz_sparse_device("sparse:m64n64k", cases=3000, seed=4, batch_tiles=256, out=tmp_path / "clean")
    assert rep.batches >= 3 and rep.mismatches == 0 and rep.port_disagreements == 0 and rep.repro is None
    lines = (tmp_path / "clean" / "journal.jsonl").read_text().splitlines()
    assert len(lines) == rep.batches + 1 and all("port_disagreements" in json.loads(s) for s in lines[1:])
    rep = fuzz_sparse_device("sparse:m64n64k", cases=3000, seed=4, batch_tiles=256, out=tmp_path / "plant", plant=1)
    assert rep.mismatches == 1 and rep.port_disagreements == 0
    assert rep.first["batch"] == 1 and (rep.first["row"], rep.first["col"]) == (0, 7) and rep.first["real_mismatch"]
    case, hw = load_sparse_case(rep.repro)
    assert hw is not None and bits_of(hw)[0, 7] != bits_of(case.model())[0, 7]
