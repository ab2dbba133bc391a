"""The GPU layout fuzzer (gpu/fuzz/gpu_layout.py): its case generator and descriptor addressing, built
for the host from the source the GPU runs, with the GPU port's accumulator, against the CPU refmodel
(refmodel.machine.wgmma.wgmma_registers) on every variant, near-illegal and refused cases included;
on the H200 (gpu marker) the device generator against the host one, a campaign with 0 mismatches
and 0 port disagreements, and a planted wrong register that must be found."""

import json

import numpy as np
import pytest
from host_cxx import device_source_syntax, needs_cxx

from refmodel.errors import InputError
from refmodel.verify.layout_cases import WGMMA_VARIANTS


def _check_variant(vi: int, cases: int, seed: int, bases: tuple = (0,)) -> tuple[int, int]:
    from gpu.kernels.layout_runner import LayoutRunner, refmodel_registers

    v = WGMMA_VARIANTS[vi]
    run = LayoutRunner(v, device=False)
    x = run.generate(seed, vi, cases)
    host = run.to_host(x)
    undefined = 0
    for base in bases:
        host["bases"] = np.full(cases, base, np.uint32)
        d, und = run.model(x, host["bases"])
        for i in range(cases):
            try:
                want = refmodel_registers(v, host, i)
            except InputError:
                assert und[i], f"{v} base {base} case {i}: refmodel refuses, the port does not"
                undefined += 1
                continue
            assert not und[i], f"{v} base {base} case {i}: the port refuses, refmodel does not"
            bad = np.count_nonzero(want != d[i])
            assert bad == 0, (f"{v} base {base} case {i} "
                              f"({run.notes(host['kinds'][i:i + 1], host['fam'][i:i + 1])[0]}): {bad} registers differ")
    return cases * len(bases), undefined


@needs_cxx
@pytest.mark.parametrize("vi", range(len(WGMMA_VARIANTS)))
def test_the_host_build_matches_wgmma_registers_on_every_variant(vi):
    n = 100
    checked, _ = _check_variant(vi, n, 11, bases=(0, 16, 0x1400))
    assert checked == 3 * n


@needs_cxx
def test_refused_cases_are_drawn_and_flagged():
    """Across variants the drawing makes a few unchecked descriptors, some reading outside the image."""
    total = und = 0
    for vi in (0, 6, 10):
        c, u = _check_variant(vi, 300, 23)
        total += c
        und += u
    assert 0 < und < total * 0.1


@needs_cxx
def test_the_drawing_covers_every_kind():
    from collections import Counter

    from gpu.kernels.layout_runner import LayoutRunner

    seen = Counter()
    for vi in (0, 3, 9):
        run = LayoutRunner(WGMMA_VARIANTS[vi], device=False)
        x = run.generate(2, 1, 1500)
        for n in run.notes(x["kinds"], x["fam"]):
            a, b = n.split("] B[")
            for part in (a[2:] + "," + b.split("]")[0]).split(","):
                seen[part] += 1
            seen[n.rsplit(" ", 1)[1]] += 1
    for kind in ("none", "32B", "64B", "128B", "K", "MN", "dense", "random-strides", "flush", "aligned", "kstep",
                 "any", "bo0", "bo1", "bo7", "unchecked", "ints", "floats"):
        assert seen[kind] > 0, kind


@needs_cxx
def test_the_chain_kernel_model_is_the_per_output_model_on_every_variant_host():
    """model_kernel="chain" (the tiled chain kernel, one step) gives the per-output kernel's D and
    undefined flags on every variant; the host builds of both kernels (the gpu test below does it on
    the device)."""
    from gpu.kernels.layout_runner import LayoutRunner

    for vi, v in enumerate(WGMMA_VARIANTS):
        slow, fast = LayoutRunner(v, device=False, model_kernel="per_output"), LayoutRunner(v, device=False, model_kernel="chain")
        x = slow.generate(6, vi, 48)
        (ds, us), (df, uf) = slow.model(x), fast.model(x)
        assert np.array_equal(us, uf) and np.array_equal(ds, df), v
        assert not us.all(), v          # some cases are defined: the comparison has outputs to compare


@needs_cxx
def test_a_batch_is_a_function_of_seed_and_batch():
    from gpu.kernels.layout_runner import LayoutRunner

    run = LayoutRunner(WGMMA_VARIANTS[14], device=False)
    one = run.generate(3, 9, 7)
    two = run.generate(3, 9, 7)
    assert all(np.array_equal(one[k], two[k]) for k in one)
    other = run.generate(3, 10, 7)
    assert not np.array_equal(one["images"], other["images"])
    assert not np.array_equal(one["a_regs"], other["a_regs"])
    # the first cases of a longer batch are the same cases
    longer = run.generate(3, 9, 9)
    assert all(np.array_equal(one[k], longer[k][:7]) for k in one)


def test_the_source_parses_for_the_device():
    from gpu.kernels.desc_gather import DG_SOURCE
    from gpu.kernels.runtime import PRELUDE

    r = device_source_syntax(PRELUDE + DG_SOURCE)
    assert r.returncode == 0, r.stderr


@pytest.mark.gpu
def test_the_device_generator_and_model_are_the_host_ones():
    import cupy as cp

    from gpu.kernels.layout_runner import LayoutRunner

    for vi in (0, 4, 6, 8, 10, 11, 14):
        v = WGMMA_VARIANTS[vi]
        dev, host = LayoutRunner(v), LayoutRunner(v, device=False)
        xd, xh = dev.generate(5, 11, 33), host.generate(5, 11, 33)
        for k in xh:
            assert np.array_equal(cp.asnumpy(xd[k]), xh[k]), (v, k)
        bases = np.full(33, dev.base, np.uint32)
        dd, ud = dev.model(xd, cp.asarray(bases))
        dh, uh = host.model(xh, bases)
        assert np.array_equal(cp.asnumpy(ud), uh) and np.array_equal(cp.asnumpy(dd), dh), v


@pytest.mark.gpu
def test_the_chain_kernel_model_is_the_per_output_model_on_every_variant():
    import cupy as cp

    from gpu.kernels.layout_runner import LayoutRunner

    for vi, v in enumerate(WGMMA_VARIANTS):
        slow, fast = LayoutRunner(v, model_kernel="per_output"), LayoutRunner(v, model_kernel="chain")
        x = slow.generate(6, vi, 65)
        bases = cp.asarray(np.full(65, slow.base, np.uint32))
        (ds, us), (df, uf) = slow.model(x, bases), fast.model(x, bases)
        assert np.array_equal(cp.asnumpy(us), cp.asnumpy(uf)) and np.array_equal(cp.asnumpy(ds), cp.asnumpy(df)), v


@pytest.mark.gpu
def test_device_campaign_agrees_with_the_hardware_and_finds_a_planted_error(tmp_path):
    from gpu.fuzz.gpu_layout import fuzz_layout_device
    from refmodel.verify.journal import merge_journals

    rep = fuzz_layout_device("layout", cases=40 * 512, batch=256, seed=4, out=tmp_path / "ok")
    assert rep.outputs > 0 and rep.mismatches == 0 and rep.port_disagreements == 0, rep.first
    assert rep.undefined > 0 and rep.repro is None
    recs = [json.loads(x) for x in (tmp_path / "ok" / "journal.jsonl").read_text().splitlines()[1:]]
    assert sum(r["outputs"] for r in recs) == rep.outputs
    assert merge_journals([tmp_path / "ok" / "journal.jsonl"]).outputs == rep.outputs
    planted = fuzz_layout_device("layout:bf16", cases=3 * 1024, batch=256, seed=4, out=tmp_path / "plant", plant=1)
    assert planted.mismatches == 1 and planted.port_disagreements == 0 and planted.tiles_copied_back == 1
    assert planted.first["batch"] == 1
    z = np.load(tmp_path / "plant" / "repro_layout.npz")
    assert int(np.count_nonzero(z["hardware"] != z["refmodel"])) == 1
    assert json.loads(str(z["config"]))["seed"] == [4, 1]
