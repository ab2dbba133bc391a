"""Fuzz campaigns without a GPU: a fake 'hardware' with a planted bug is caught, shrunk,
journaled and resumed."""

import json

import numpy as np
import pytest

from gpu.fuzz.cpu_engine import fuzz, select_forms
from gpu.fuzz.cpu_engine import model_device as honest
from refmodel.verify.jobs import model_chain
from refmodel.verify.case import load_case
from refmodel.errors import InputError
from refmodel.numerics.wgmma import wgmma

INSTR = "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3"


def drops_last_k(job, a, b, c):
    """A 'device' that ignores the last K column of every instruction."""
    a = a.copy()
    k = job.form.k
    a[..., k - 1::k] = 0
    return model_chain(wgmma, job, a, b, c)


def test_select_forms():
    assert len(select_forms(INSTR)) == 1
    assert {f.family for f in select_forms("int8")} == {"int8"}
    assert all("e5m2" in f.instr for f in select_forms("e5m2"))
    with pytest.raises(InputError, match="matches no wgmma form"):
        select_forms("f64")


def test_clean_campaign_and_resume(tmp_path):
    r = fuzz(INSTR, cases=40, seed=3, out=tmp_path, hw=honest, batch_tiles=18, progress=False)
    assert r.mismatches == 0 and r.tiles >= 40 and r.outputs == r.tiles * 64 * 16
    lines = (tmp_path / "journal.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["header"]["seed"] == 3 and len(lines) == 1 + r.batches
    r2 = fuzz(INSTR, cases=80, seed=3, out=tmp_path, hw=honest, batch_tiles=18, resume=True,
              progress=False)
    assert r2.tiles >= 80 and r2.batches > r.batches  # continued, not restarted
    with pytest.raises(InputError, match="another campaign"):
        fuzz(INSTR, cases=80, seed=4, out=tmp_path, hw=honest, batch_tiles=18, resume=True, progress=False)


def test_planted_bug_is_caught_and_shrunk(tmp_path):
    r = fuzz(INSTR, cases=200, seed=1, out=tmp_path, hw=drops_last_k, batch_tiles=18,
             families=["small_int"], progress=False)
    assert r.mismatches > 0 and r.repro
    case, hw_d = load_case(r.repro)
    assert case.form.n == 8 and case.chain == 1
    assert case.nonzeros() <= 3  # a[i, 31] and b[31, j] (and maybe C)
    assert (hw_d.view(np.uint32) != case.model().view(np.uint32)).any()


def test_fuzz_cvt_catches_a_wrong_device(tmp_path):
    from gpu.fuzz.cpu_engine import fuzz_cvt
    from refmodel.numerics.cvt import cvt

    honest_cvt = lambda instr, a, b=None: cvt(instr, a, b)  # noqa: E731

    def nan_sign_kept(instr, a, b=None):
        """A 'device' that keeps the sign of a NaN input (0xFF instead of 0x7F)."""
        d = cvt(instr, a, b).copy()
        if instr.endswith(".f32"):
            neg_nan = (a.view(np.uint32) & 0x7FFFFFFF) > 0x7F800000
            neg_nan &= (a.view(np.uint32) >> 31).astype(bool)
            d[neg_nan] |= np.uint16(0x8000) if d.dtype == np.uint16 else np.uint32(0x80000000)
        return d

    r = fuzz_cvt("cvt.rn.satfinite.e4m3x2.f32", cases=1 << 16, seed=1, out=tmp_path, hw=honest_cvt)
    assert r.mismatches == 0 and r.outputs == 1 << 16
    r = fuzz_cvt("cvt.rn.satfinite.e4m3x2.f32", cases=1 << 16, seed=1, out=tmp_path, hw=nan_sign_kept)
    assert r.mismatches > 0 and r.first["hardware"].startswith("0xff")
