"""On an H200: every SFU form on fresh random and adversarial operands, bit for bit, and the sweep
kernel's digests against the model's (gpu marker)."""

import numpy as np
import pytest

from refmodel.numerics.sfu import SFU_FORMS
from refmodel.numerics.sfu.pairs import SPECIALS, div_pairs
from refmodel.numerics.sfu.unit import UNARY_CODE, sfu, sweep_sums
from refmodel.verify.families.f32 import adversarial_f32
from seeds import rng_for

pytestmark = pytest.mark.gpu


def _operands(form, rng, n=1 << 18):
    if form.type == "f32":
        x = adversarial_f32(rng, n)
        # every exponent of both signs, and the edges MUFU and the ptxas wrappers branch on
        e = rng.integers(0, 256, n // 4).astype(np.uint32)
        x[: n // 4] = (rng.integers(0, 2, n // 4).astype(np.uint32) << 31) | (e << 23) \
            | rng.integers(0, 1 << 23, n // 4).astype(np.uint32)
        return x
    if form.type == "f64":
        hi = rng.integers(0, 1 << 32, n, dtype=np.uint64)
        lo = rng.integers(0, 1 << 32, n, dtype=np.uint64)
        w = (hi << np.uint64(32)) | lo
        w[:64] = np.array([0, 1 << 63, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000, 1,
                           0x000FFFFFFFFFFFFF, 0x3FF0000000000000] * 8, dtype=np.uint64)
        return w
    if form.word_bits == 16:
        return np.arange(1 << 16, dtype=np.uint16)
    return rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)


@pytest.mark.parametrize("form", [f for f in SFU_FORMS if f.n_operands == 1], ids=lambda f: f.instr)
def test_unary_form_matches_hardware(form, request):
    from gpu.kernels.sfu import run_sfu

    x = _operands(form, rng_for(request, form.instr))
    hw, ref = run_sfu(form.instr, x), sfu(form.instr, x)
    bad = np.flatnonzero(hw != ref)
    assert bad.size == 0, f"{bad.size} mismatches; first x=0x{int(x[bad[0]]):x} hw=0x{int(hw[bad[0]]):x} ref=0x{int(ref[bad[0]]):x}"


@pytest.mark.parametrize("form", [f for f in SFU_FORMS if f.n_operands == 2], ids=lambda f: f.instr)
def test_div_form_matches_hardware(form, request):
    from gpu.kernels.sfu import run_sfu

    rng = rng_for(request, form.instr)
    a, b = div_pairs(int(rng.integers(1000, 2000)), int(rng.integers(0, 1 << 30)))
    s = SPECIALS
    a = np.concatenate([a, np.repeat(s, s.size), adversarial_f32(rng, 1 << 16)])
    b = np.concatenate([b, np.tile(s, s.size), adversarial_f32(rng, 1 << 16)])
    hw, ref = run_sfu(form.instr, a, b), sfu(form.instr, a, b)
    bad = np.flatnonzero(hw != ref)
    assert bad.size == 0, (f"{bad.size} mismatches; first a=0x{int(a[bad[0]]):x} b=0x{int(b[bad[0]]):x} "
                           f"hw=0x{int(hw[bad[0]]):x} ref=0x{int(ref[bad[0]]):x}")


@pytest.mark.parametrize("instr", ["ex2.approx.f32", "tanh.approx.f32", "sqrt.approx.f32", "rsqrt.approx.f64"])
def test_sweep_kernel_digests_match_the_model(instr, request):
    from gpu.kernels.sfu import sweep

    rng = rng_for(request, instr)
    chunks = np.sort(rng.choice(256, 3, replace=False))
    bits = 64 if instr.endswith("f64") else 32
    lo = int(rng.integers(0, 1 << 32))
    sums, _ = sweep(instr, 0, 1 << 32, lo=lo)
    assert (sums.get()[chunks] == sweep_sums(UNARY_CODE[instr], chunks, bits, lo)).all()


def _spellings():
    from refmodel.numerics.sfu.spellings import SPELLINGS
    from refmodel.numerics.sfu.unit import spelled_binary, spelled_unary

    return [s for s in SPELLINGS if (spelled_unary(s.name) if s.arity == 1 else spelled_binary(s.name)) is not None]


@pytest.mark.parametrize("sp", _spellings(), ids=lambda s: s.name)
def test_spelling_matches_hardware(sp, request):
    """CUDA (NVRTC defaults / --use_fast_math) and Triton spellings vs their modelled SASS sequences."""
    from refmodel.numerics.sfu.unit import spelled

    rng = rng_for(request, sp.name)
    x = adversarial_f32(rng, 1 << 18)
    y = adversarial_f32(rng, 1 << 18) if sp.arity == 2 else None
    if sp.compiler == "triton":
        import cupy as cp
        import torch

        from gpu.libraries import triton_sfu

        tx = torch.from_dlpack(cp.asarray(x).view(cp.float32))
        ty = torch.from_dlpack(cp.asarray(y).view(cp.float32)) if y is not None else None
        o, _ = triton_sfu.run(sp.expr, tx, ty)
        hw = cp.from_dlpack(o).view(cp.uint32).get()
    else:
        from gpu.kernels.sfu import run_sfu

        hw = run_sfu(sp.name, x, y)
    ref = spelled(sp.name, x, y)
    bad = np.flatnonzero(hw != ref)
    assert bad.size == 0, (f"{bad.size} mismatches; first x=0x{int(x[bad[0]]):x}"
                           + (f" y=0x{int(y[bad[0]]):x}" if y is not None else "")
                           + f" hw=0x{int(hw[bad[0]]):x} ref=0x{int(ref[bad[0]]):x}")
