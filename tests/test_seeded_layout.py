"""refmodel.verify.seeded_layout: the numpy twin of the GPU layout engine's case drawing
(gpu/kernels/desc_gather.py's DG_SOURCE) equals the host build of that C++ bit for bit on every
variant; its job plan covers every variant and descriptor kind; and the ``device_model_layout``
replayer, fed a fixture made from the host build's digests, finds 0 mismatches and reports a
flipped digest, a wrong undefined list and a wrong shared base for exactly that job."""


import numpy as np
import pytest
from host_cxx import needs_cxx

from refmodel.verify.layout_cases import IMAGE, WGMMA_VARIANTS
from refmodel.verify.seeded_layout import SEED, layout_cases, layout_jobs_plan


def _same(host: dict, twin: dict, what) -> None:
    assert sorted(host) == sorted(twin), what
    for k, v in host.items():
        h, t = np.asarray(v), twin[k]
        assert h.dtype == t.dtype and h.shape == t.shape, (what, k, h.dtype, t.dtype, h.shape, t.shape)
        bad = np.flatnonzero(h.reshape(-1) != t.reshape(-1))
        assert bad.size == 0, f"{what} {k}: {bad.size} differ, first at {bad[:4]}"


@needs_cxx
@pytest.mark.parametrize("vi", range(len(WGMMA_VARIANTS)))
def test_the_twin_is_the_host_build_on_every_variant(vi):
    from gpu.kernels.layout_runner import LayoutRunner

    v = WGMMA_VARIANTS[vi]
    run = LayoutRunner(v, device=False)
    for seed, batch, cases in ((SEED, vi, 250), (7, 2 ** 40 + vi, 3), (2 ** 64 - 1, 0, 1)):
        _same(run.generate(seed, batch, cases), layout_cases(v, seed, batch, cases), (v, seed, batch))


@needs_cxx
@pytest.mark.parametrize("vi", (0, 3, 6, 9, 12))
def test_the_twin_is_the_host_build_where_descriptors_fall_back(vi):
    """Small images: many first draws do not fit, and 64 failed attempts fall back to a dense one."""
    from gpu.kernels.layout_runner import LayoutRunner

    v = WGMMA_VARIANTS[vi]
    fallbacks = 0
    for size in (1024, 4096):
        x = layout_cases(v, 5, vi, 150, size=size)
        _same(LayoutRunner(v, device=False, size=size).generate(5, vi, 150), x, (v, size))
        fallbacks += int(((x["kinds"] >> 26) & 1).sum())
    assert fallbacks > 0


def test_the_plan_covers_every_variant_and_kind():
    plan = layout_jobs_plan()
    assert plan == layout_jobs_plan()
    assert [b for _, b, _ in plan] == list(range(len(plan)))
    counts = np.bincount([vi for vi, _, _ in plan], minlength=len(WGMMA_VARIANTS))
    assert (counts >= 3).all(), counts
    assert sum(c for _, _, c in plan) <= 40000        # the CPU replay stays well under a minute
    seen = {vi: set() for vi in range(len(WGMMA_VARIANTS))}
    for vi, b, c in plan:
        x = layout_cases(WGMMA_VARIANTS[vi], SEED, b, c)
        for k in np.concatenate([x["kinds"] & 0xFFFF, x["kinds"] >> 16]).tolist():
            if k == 0xFFFF:
                continue
            seen[vi] |= {f"mode{k & 3}", f"dense{k >> 3 & 1}", f"start{k >> 4 & 3}", f"bo{k >> 6 & 7}"}
            if k >> 9 & 1:
                seen[vi].add("unchecked")
        seen[vi] |= {f"fam{f}" for f in np.unique(x["fam"])} | {f"sd{s}" for s in np.unique(x["scale_d"])}
    for vi, v in enumerate(WGMMA_VARIANTS):
        k_major = (not v[1] and v[2] == 0) or v[3] == 0
        want = ({f"mode{m}" for m in range(4)} | {"dense0", "dense1", "start0", "start1", "start3"}
                | {f"bo{i}" for i in range(8)} | {"unchecked", "fam0", "fam1", "sd0", "sd1"}
                | ({"start2"} if k_major else set()))
        assert want <= seen[vi], (v, sorted(want - seen[vi]))


# ----------------------------------------------------------------------------- the replayer
def _fake_fixture(jobs, base_of):
    """meta and arrays as gpu.record.device_model_layout writes them, from the host build's model."""
    from gpu.kernels.layout_runner import LayoutRunner
    from gpu.record.device_model_layout import digest

    runners, meta_jobs, port = {}, [], []
    for j, (vi, batch, cases) in jobs:
        v = WGMMA_VARIANTS[vi]
        run = runners.setdefault(vi, LayoutRunner(v, device=False))
        x = run.generate(SEED, batch, cases)
        base = base_of(j)
        d, undef = run.model(x, np.full(cases, base, np.uint32))
        port.append(np.frombuffer(digest(d[~undef]), np.uint8))
        meta_jobs.append({"index": vi, "variant": list(v), "batch": batch, "cases": cases, "base": base,
                          "undefined": np.flatnonzero(undef).tolist()})
    p = np.stack(port)
    return ({"seed": SEED, "image": IMAGE, "jobs": meta_jobs, "plan": "sample"},
            {"port_sha256": p, "hw_sha256": p.copy()})


@pytest.fixture(scope="module")
def fake():
    """One planned job per variant (the first repeat), shared bases 0, 0x400 and 0x1480."""
    jobs = list(enumerate(layout_jobs_plan()))[:len(WGMMA_VARIANTS)]
    return _fake_fixture(jobs, lambda j: (0, 0x400, 0x1480)[j % 3])


def _replay(meta, arrays, **kw):
    from refmodel.verify.replay_golden import replay_device_model_layout

    return replay_device_model_layout(meta, arrays, **kw)


@needs_cxx
def test_the_replayer_agrees_with_the_host_builds_digests(fake):
    from refmodel.verify.replay import REPLAYERS, load_plugins

    load_plugins()
    assert REPLAYERS["device_model_layout"].__name__ == "replay_device_model_layout"
    meta, arrays = fake
    res = _replay(meta, arrays)
    undefined = sum(len(j["undefined"]) for j in meta["jobs"])
    defined = sum(j["cases"] for j in meta["jobs"]) - undefined
    assert res.mismatches == 0, res.details[:4]
    assert undefined > 0 and f"{undefined} cases refmodel refuses skipped" in res.scope
    assert res.cases == 2 * sum(_outputs(jb) for jb in meta["jobs"])
    assert defined > 0 and res.complete
    quick = _replay(meta, arrays, full=False)
    assert quick.mismatches == 0 and not quick.complete and quick.scope.startswith("every 8th: 2 of 15")


@needs_cxx
def test_the_replayer_reports_a_flipped_digest_for_that_job(fake):
    meta, arrays = fake
    j = 4
    one = {"seed": meta["seed"], "image": meta["image"], "jobs": meta["jobs"][j:j + 2]}
    for name in ("port_sha256", "hw_sha256"):
        bad = {k: v[j:j + 2].copy() for k, v in arrays.items()}
        bad[name][0, 17] ^= 0x40
        res = _replay(one, bad)
        label = "GPU port" if name == "port_sha256" else "hardware"
        assert res.mismatches == res.cases // 2 - _outputs(one["jobs"][1]) > 0, (name, res.mismatches)
        assert len(res.details) == 1 and res.details[0].startswith("job 0 ") and f"({label})" in res.details[0]


def _outputs(job) -> int:
    from refmodel.wgmma_forms import parse_wgmma

    return (job["cases"] - len(job["undefined"])) * 128 * parse_wgmma(job["variant"][0]).d_regs


@needs_cxx
def test_the_replayer_checks_the_undefined_cases_and_the_base(fake):
    meta, arrays = fake
    j = next(i for i, jb in enumerate(meta["jobs"]) if jb["undefined"])
    sub = {k: v[j:j + 1] for k, v in arrays.items()}
    trimmed = {**meta, "jobs": [{**meta["jobs"][j], "undefined": meta["jobs"][j]["undefined"][1:]}]}
    res = _replay(trimmed, sub)
    assert res.mismatches == res.cases > 0 and "the port flagged" in res.details[0]
    moved = {**meta, "jobs": [{**meta["jobs"][j], "base": meta["jobs"][j]["base"] + 0x80}]}
    assert _replay(moved, sub).mismatches > 0          # the swizzles act on absolute addresses


def test_the_replayer_refuses_digests_that_do_not_match_meta():
    from refmodel.verify.fixtures import FixtureError

    meta = {"seed": SEED, "image": IMAGE, "jobs": [{"index": 0, "variant": list(WGMMA_VARIANTS[0]), "batch": 0,
                                                    "cases": 1, "base": 0, "undefined": []}]}
    z = np.zeros((2, 32), np.uint8)
    with pytest.raises(FixtureError):
        _replay(meta, {"port_sha256": z, "hw_sha256": z})
    with pytest.raises(FixtureError):
        _replay(meta, {"port_sha256": z[:1], "hw_sha256": z[:1], "extra": z})


@needs_cxx
def test_the_recorder_end_to_end_on_host_runners(tmp_path, monkeypatch):
    """gpu.record.device_model_layout with numpy for cupy and host runners for the GPU (the host port
    standing in for the hardware, at a shared base of 0x400): the fixture it writes replays with 0
    mismatches, and a generator that disagrees with the numpy twin makes it exit 1."""
    import sys
    import types

    import gpu.kernels.layout_runner as lr
    import gpu.kernels.runtime as rt
    import gpu.record.device_model_layout as rec
    from refmodel.verify.fixtures import load_arrays, load_manifest
    from refmodel.verify.replay import REPLAYERS, load_plugins

    class HostRunner(lr.LayoutRunner):
        def __init__(self, v):
            super().__init__(v, device=False)
            self.base = 0x400

        def hardware(self, x):
            x["bases"] = np.full(x["desc_b"].shape[0], self.base, np.uint32)
            return self.model(x)[0]

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(asnumpy=np.asarray))
    monkeypatch.setattr(lr, "LayoutRunner", HostRunner)
    monkeypatch.setattr(rt, "device_info", lambda: {"device": "host stand-in"})
    monkeypatch.setattr(rec, "layout_jobs_plan", lambda: layout_jobs_plan()[::15])
    assert rec.main(["--out", str(tmp_path)]) == 0
    entry = load_manifest(tmp_path / "device_model")["entries"][0]
    assert entry["kind"] == "device_model_layout" and entry["file"] == "layout.npz"
    assert entry["provenance"]["recorder"] == "gpu.record.device_model_layout"
    assert [j["base"] for j in entry["meta"]["jobs"]] == [0x400] * 4
    load_plugins()
    res = REPLAYERS["device_model_layout"](entry["meta"], load_arrays(tmp_path / "device_model", entry))
    assert res.mismatches == 0 and res.cases == entry["cases"] > 0

    class WrongGenerator(HostRunner):
        def generate(self, seed, batch, cases):
            x = super().generate(seed, batch, cases)
            x["c_regs"][0, 0, 0] ^= 1
            return x

    monkeypatch.setattr(lr, "LayoutRunner", WrongGenerator)
    assert rec.main(["--out", str(tmp_path / "bad")]) == 1


def test_batched_wgmma_registers_equal_the_case_by_case_machine():
    """refmodel.machine.wgmma.wgmma_registers_batch (one numerics call a job) against
    wgmma_registers case by case, on jobs of the recorded layout plan (SS and RS, imm-trans, imm-scale,
    scale-d, refused descriptors): the same registers, the same refused cases."""
    import json

    from refmodel.errors import InputError
    from refmodel.verify.fixtures import default_root
    from refmodel.verify.replay_layouts import wgmma_model, wgmma_model_batch
    from refmodel.verify.seeded_layout import layout_cases

    man = json.loads((default_root() / "device_model" / "manifest.json").read_text())
    meta = next(e["meta"] for e in man["entries"] if e["kind"] == "device_model_layout")
    jobs = meta["jobs"]
    picked = {}
    for jb in jobs:          # one job of each (rs, trans, imm) kind, with refusals among them
        v = jb["variant"]
        picked.setdefault((v[1], v[2], v[3], v[4], v[5]), jb)
    assert len(picked) >= 4 and any(jb["undefined"] for jb in picked.values())
    n_refused = 0
    for jb in picked.values():
        v = tuple(jb["variant"])
        C = min(int(jb["cases"]), 96)
        x = layout_cases(v, meta["seed"], jb["batch"], int(jb["cases"]), size=meta["image"])
        x = {k: x[k][:C] for k in ("images", "desc_a", "desc_b", "a_regs", "c_regs", "scale_d")}
        got, refused = wgmma_model_batch(v, x, jb["base"])
        n_refused += len(refused)
        bases = np.full(1, jb["base"], np.uint32)
        for i in range(C):
            one = {k: x[k][i:i + 1] for k in x}
            try:
                want = wgmma_model(v, one, bases)[0]
            except InputError:
                assert i in refused and not got[i].any(), (v, i)
                continue
            assert i not in refused and np.array_equal(got[i], want), (v, i)
    assert n_refused > 0


def test_compiled_mix_is_the_formula():
    from refmodel.verify.seeded_layout import mix, mix_formula

    z = np.random.default_rng(34).integers(0, 1 << 63, (3, 5000), dtype=np.int64).astype(np.uint64) * np.uint64(2)
    z[0, :4] = [0, 1, (1 << 64) - 1, 0x9E3779B97F4A7C15]
    assert np.array_equal(mix(z), mix_formula(z)) and mix(z).shape == z.shape


@pytest.mark.parametrize("dt", range(7))
def test_elem_rand_is_elem_of_rand(dt):
    """The fused element draw equals wl_elem of wl_rand as numpy formulas, for every element type,
    both families and counters past 2**32."""
    from refmodel.verify.seeded_layout import _elem, _elem_rand, _rand

    rng = np.random.default_rng(dt)
    pre = rng.integers(0, 1 << 63, 9, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    fam = rng.integers(0, 2, 9).astype(np.int32)
    for start, n in ((0, 700), (12345, 64), ((1 << 33) + 5, 33)):
        want = _elem(_rand(pre[:, None], np.arange(start, start + n, dtype=np.int64)[None, :]), fam[:, None], dt)
        assert np.array_equal(_elem_rand(pre, start, n, fam, dt), want), (dt, start)
