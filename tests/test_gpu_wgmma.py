"""wgmma on the GPU: layouts against exact integer products, then bits against refmodel.numerics.wgmma.

Needs an sm_90 device (``-m gpu``; skipped otherwise unless --require-gpu).  The
exact-product tests need no model: a failure there means a fragment or descriptor
layout is wrong.  The model tests skip while ``refmodel.numerics.wgmma`` does not exist.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpu.record import wgmma as rw
from gpu.kernels.wgmma import execute, finish_launch, prepare_launch, run_wgmma, run_wgmma_chain
from refmodel.errors import DeviceError
from refmodel.dtypes import element_dtype, raw_bits
from refmodel.wgmma_forms import WGMMA_FORMS, WgmmaForm

pytestmark = pytest.mark.gpu


def _combos():
    seen = {}
    for f in WGMMA_FORMS:
        seen.setdefault((f.family, f.dtype_d, f.dtype_a, f.dtype_b, f.satfinite), f.k)
    return seen


def _form(combo, n) -> WgmmaForm:
    fam, d, a, b, sat = combo
    return WgmmaForm(n, _combos()[combo], d, a, b, sat)


COMBOS = sorted(_combos())


def _ints(form: WgmmaForm, tiles: int, chain: int = 1, seed: int = 0):
    rng = np.random.default_rng(seed)
    lim = 3 if form.dtype_d == "f16" else 7
    a = rng.integers(-lim, lim + 1, size=(tiles, 64, form.k * chain))
    b = rng.integers(-lim, lim + 1, size=(tiles, form.k * chain, form.n))
    c = rng.integers(-60, 61, size=(tiles, 64, form.n))
    a = np.abs(a) if form.dtype_a == "u8" else a
    b = np.abs(b) if form.dtype_b == "u8" else b
    return (a.astype(element_dtype(form.dtype_a)), b.astype(element_dtype(form.dtype_b)),
            c.astype(element_dtype(form.dtype_d)))


def _exact(a, b, c, *, scale_d=True, s=1):
    acc = np.int64 if a.dtype.kind in "iu" else np.float64
    base = c.astype(acc) if scale_d else 0
    return base + s * (a.astype(acc) @ b.astype(acc))


@pytest.mark.parametrize("rs", [False, True], ids=["ss", "rs"])
@pytest.mark.parametrize("n", [8, 256])
@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: "-".join(map(str, c)))
def test_layout_exact(combo, n, rs):
    form = _form(combo, n)
    a, b, c = _ints(form, 3, seed=n)
    d = run_wgmma(form.instr, a, b, c, rs=rs)
    assert d.dtype == element_dtype(form.dtype_d) and d.shape == c.shape
    want = _exact(a, b, c)
    bad = np.argwhere(d.astype(want.dtype) != want)
    assert bad.size == 0, f"{len(bad)} wrong outputs, first (tile,row,col) {bad[:5].tolist()}"


@pytest.mark.parametrize("n", [16, 24, 48, 136, 248])
def test_layout_exact_more_n(n):
    combo = ("int8", "s32", "s8", "s8", False) if n in (16, 24, 48) else ("bf16", "f32", "bf16", "bf16", False)
    form = _form(combo, n)
    a, b, c = _ints(form, 2, seed=n)
    assert (run_wgmma(form.instr, a, b, c).astype(np.float64) == _exact(a, b, c)).all()


@pytest.mark.parametrize("rs", [False, True], ids=["ss", "rs"])
def test_scale_d_false_ignores_c(rs):
    form = _form(("f16", "f32", "f16", "f16", False), 32)
    a, b, _ = _ints(form, 2)
    c = np.full((2, 64, 32), np.nan, np.float32)
    d = run_wgmma(form.instr, a, b, c, scale_d=False, rs=rs)
    assert (d == _exact(a, b, c, scale_d=False)).all()


@pytest.mark.parametrize("sa,sb", [(-1, 1), (1, -1), (-1, -1)])
@pytest.mark.parametrize("rs", [False, True], ids=["ss", "rs"])
def test_imm_scales(sa, sb, rs):
    form = _form(("fp8", "f32", "e4m3", "e5m2", False), 16)
    a, b, c = _ints(form, 2)
    d = run_wgmma(form.instr, a, b, c, imm_scale_a=sa, imm_scale_b=sb, rs=rs)
    assert (d == _exact(a, b, c, s=sa * sb)).all()


@pytest.mark.parametrize("instr,chain,rs", [
    ("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", 4, False),
    ("wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32", 3, True),
    ("wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.u8", 48, False),   # staged: 3 stages
    ("wgmma.mma_async.sync.aligned.m64n256k16.f16.f16.f16", 40, True),  # staged RS
])
def test_chain_exact(instr, chain, rs):
    from refmodel.wgmma_forms import parse_wgmma

    form = parse_wgmma(instr)
    a, b, c = _ints(form, 2, chain=chain)
    if form.dtype_d == "f16":
        a = (a.astype(np.float64) / 3).round().astype(a.dtype)  # keep sums inside f16's exact integers
    d = run_wgmma_chain(instr, a, b, c, chain=chain, rs=rs)
    assert (d.astype(np.float64) == _exact(a, b, c)).all()
    d0 = run_wgmma_chain(instr, a, b, c, chain=chain, rs=rs, scale_d_first=False)
    assert (d0.astype(np.float64) == _exact(a, b, c, scale_d=False)).all()


def test_isolated_launch_and_recovery_after_fault():
    form = _form(("bf16", "f32", "bf16", "bf16", False), 8)
    a, b, c = _ints(form, 2)
    d = run_wgmma(form.instr, a, b, c, isolate=True)
    assert (d == _exact(a, b, c)).all()
    from gpu.kernels.isolate import default_runner

    launch = prepare_launch(form.instr, a, b, c)
    bad = dataclasses.replace(launch, desc_b=launch.desc_b | 0x3FF0)  # start ~256 KB: past the allocation
    with pytest.raises(DeviceError):  # the fault must happen: illegal address, worker restarted
        default_runner().call("gpu.kernels.wgmma", "execute", bad)
    d = finish_launch(launch, default_runner().call("gpu.kernels.wgmma", "execute", launch))
    assert (d == _exact(a, b, c)).all()
    assert (finish_launch(launch, execute(launch)) == d).all()  # and in this process


# ----------------------------------------------------------------------------- against the model

def _model():
    mod = pytest.importorskip("refmodel.numerics.wgmma", reason="refmodel.numerics.wgmma (the CPU model) not written yet")
    return mod.wgmma


MODEL_JOBS = [rw.Job(_form(c, n).instr, rs=rs) for c in COMBOS for n in (8, 256) for rs in (False, True)] + [
    rw.Job(_form(("fp8", "f32", "e4m3", "e4m3", False), 64).instr, scale_d=False),
    rw.Job(_form(("fp8", "f16", "e5m2", "e4m3", False), 64).instr, imm_scale_a=-1, imm_scale_b=-1),
    rw.Job(_form(("bf16", "f32", "bf16", "bf16", False), 128).instr, chain=4),
    rw.Job(_form(("int8", "s32", "u8", "s8", True), 32).instr, chain=3),
]


@pytest.mark.parametrize("job", MODEL_JOBS, ids=lambda j: j.key)
def test_bits_match_model(job):
    model = _model()
    rng = np.random.default_rng(zlib_seed(job.key))
    a, b, c, idx, names = rw.make_inputs(job, rng, 2)
    d = run_wgmma_chain(job.instr, a, b, c, chain=job.chain, scale_d_first=job.scale_d,
                        imm_scale_a=job.imm_scale_a, imm_scale_b=job.imm_scale_b, rs=job.rs)
    ref = rw.model_chain(model, job, a, b, c)
    eq = raw_bits(d, job.form.dtype_d) == raw_bits(ref, job.form.dtype_d)
    if not eq.all():
        per_family = {names[f]: int((~eq[idx == f]).sum()) for f in range(len(names))}
        pytest.fail(f"{int((~eq).sum())} of {eq.size} outputs differ from the model; by family {per_family}")


def zlib_seed(key: str) -> int:
    import zlib

    return zlib.crc32(key.encode())
