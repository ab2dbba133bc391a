"""On an H200: every cvt form on fresh adversarial inputs, bit for bit (gpu marker)."""

import numpy as np
import pytest

from refmodel import cvt
from refmodel.numerics.cvt import CVT_FORMS
from refmodel.verify.families.f32 import adversarial_f32
from seeds import rng_for

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("form", CVT_FORMS, ids=lambda f: f.instr)
def test_cvt_form_matches_hardware(form, request):
    from gpu.kernels.cvt import run_cvt

    rng = rng_for(request, form.instr)
    if form.src == "f32":
        a, b = adversarial_f32(rng, 1 << 16), adversarial_f32(rng, 1 << 16)
    elif form.src == "f16x2":
        a, b = rng.integers(0, 2**32, 1 << 16, dtype=np.uint64).astype(np.uint32), None
    else:
        a, b = np.arange(1 << 16, dtype=np.uint16), None
    hw = run_cvt(form.instr, a, b)
    ref = cvt(form.instr, a, b)
    bad = np.flatnonzero(hw != ref)
    assert bad.size == 0, (f"{bad.size} mismatches; first: a=0x{int(a[bad[0]]):x} "
                           f"hw=0x{int(hw[bad[0]]):x} ref=0x{int(ref[bad[0]]):x}")
