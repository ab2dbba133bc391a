"""On an H200: ldmatrix/stmatrix, wgmma through raw descriptors (random legal and wrong ones),
the stmatrix epilogue, TMA loads and the TMA column-alignment fault — fresh cases, compared
with refmodel.machine bit for bit (gpu marker)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from gpu.record import layouts as R
from refmodel.layouts.stmatrix import parse_matrix_instr
from refmodel.verify.replay_layouts import epilogue_model, matrix_model, tma_model, wgmma_model

pytestmark = pytest.mark.gpu


def _first_bad(hw, model):
    bad = [i for i in range(len(hw)) if not np.array_equal(hw[i], model[i])]
    return f"{len(bad)} bad cases, first {bad[:5]}" if bad else ""


@pytest.mark.parametrize("instr", R.MATRIX_INSTRS)
def test_matrix_instructions(instr):
    from gpu.kernels import layouts as hw
    f = parse_matrix_instr(instr)
    arr = R.matrix_cases(instr, 32)
    regs, imgs, _ = hw.run_matrix(instr, arr["images"], arr["addrs"], arr["regs"] if f.op == "stmatrix" else None)
    mregs, mimgs = matrix_model(instr, arr)
    got, want = (regs, mregs) if f.op == "ldmatrix" else (imgs, mimgs)
    assert np.array_equal(got, want), _first_bad(got, want)


@pytest.mark.parametrize("variant", R.WGMMA_VARIANTS, ids=lambda v: f"{v[0].split('aligned.')[1]}-rs{int(v[1])}-t{v[2]}{v[3]}")
def test_wgmma_through_descriptors(variant):
    """Random descriptors (swizzle, major, dense or wrong LBO/SBO, K steps, base offsets)."""
    from gpu.kernels import layouts as hw
    instr, rs, ta, tb, sa, sb = variant
    arr = R.wgmma_cases(variant, 24, tag="test")
    arr.pop("notes")
    d, bases = hw.run_wgmma_desc(hw.WgmmaVariant(*variant), arr["images"], arr["desc_a"], arr["desc_b"],
                                 arr["c_regs"], arr["scale_d"], arr["a_regs"] if rs else None)
    m = wgmma_model(variant, arr, bases)
    assert np.array_equal(d, m), _first_bad(d, m)


@pytest.mark.parametrize("cfg", R.EPILOGUE_CONFIGS, ids=lambda c: f"n{c[0]}-{c[1]}-sw{c[2]}")
def test_epilogue(cfg):
    from gpu.kernels import layouts as hw
    arr = R.epilogue_cases(cfg, 2)
    imgs, addrs, bases = hw.run_epilogue(arr["acc"], *cfg)
    mi, ma = epilogue_model(cfg, arr, bases)
    assert np.array_equal(imgs, mi) and np.array_equal(addrs, ma)


def test_tma_loads():
    from gpu.kernels import layouts as hw
    for g in R.tma_plan()[::7]:
        t = R.tma_tensor(g["elem_bytes"])
        imgs, bases = hw.run_tma(t, g["cases"], R.TMA_SMEM)
        m = tma_model(t, g["cases"], bases, R.TMA_SMEM)
        assert np.array_equal(imgs, m), (g["cases"][0], _first_bad(imgs, m))


def test_tma_unaligned_start_column_faults():
    """The device really faults (in a child process) where refmodel refuses the load."""
    c = {"elem_bytes": 2, "box": [8, 16], "coords": [3, 5], "swizzle": 0, "mode": "none", "dst": 0}
    r = subprocess.run([sys.executable, "-m", "gpu.record.layouts", "--fault-child", json.dumps(c)],
                       capture_output=True, text=True, timeout=120)
    assert "ILLEGAL_INSTRUCTION" in (r.stdout + r.stderr) or "IllegalInstruction" in (r.stdout + r.stderr), \
        r.stdout[-500:] + r.stderr[-500:]
    ok = dict(c, coords=[3, 8])
    r = subprocess.run([sys.executable, "-m", "gpu.record.layouts", "--fault-child", json.dumps(ok)],
                       capture_output=True, text=True, timeout=120)
    assert "MATCH" in r.stdout, r.stdout[-500:] + r.stderr[-500:]
