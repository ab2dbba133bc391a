"""wgref fuzz lib:... --schedule: a library call against a stored schedule, mismatches shrunk (the
library stood in by refmodel schedules here; tests/test_gpu_infer.py runs the real one on the H200)."""

import json

import numpy as np
import pytest

from gpu.fuzz.schedule import call_of, fuzz_schedule
from refmodel.dtypes import bits_of
from refmodel.errors import InputError
from refmodel.golden.schedule import Schedule

W = "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"
SRC = {"target": "cublas", "shape": "64x16x2048", "dtype": "bf16", "out": "bf16"}


def test_a_library_that_sums_like_its_schedule_has_no_mismatch(tmp_path):
    s = Schedule(W, splits=4, split_align=64, out_dtype="bf16", source=SRC)
    rep = fuzz_schedule(s, cases=6, out=tmp_path, run=lambda a, b: s.run(a, b), sparse=False)
    assert rep.calls == 6 and rep.outputs == 6 * 64 * 16 and rep.mismatches == 0 and rep.first is None
    assert len((tmp_path / "journal.jsonl").read_text().splitlines()) == 7      # header + 6 batches


def test_a_wrong_schedule_is_caught_and_shrunk_to_one_row_and_few_k(tmp_path):
    truth = Schedule(W, splits=4, split_align=64, out_dtype="bf16", source=SRC)
    claimed = truth.replace(splits=3)
    calls = []

    def library(a, b):
        calls.append(1)
        return truth.run(a, b)
    rep = fuzz_schedule(claimed, cases=6, out=tmp_path, run=library, sparse=False, shrink_calls=120)
    assert rep.mismatches > 0 and rep.first is not None
    z = np.load(rep.first["file"])
    i, j = rep.first["row"], rep.first["col"]
    a = z["a"]
    # only row i of A and column j of B survive, and far fewer K positions than K
    assert not np.any(np.delete(a, i, axis=0)) and not np.any(np.delete(z["b"], j, axis=1))
    assert 0 < rep.first["nonzero_k"] < 2048 // 4
    # the saved minimal input still shows the disagreement, with both outputs as bits
    assert z["library"][i, j] != z["schedule"][i, j]
    assert z["library"][i, j] == bits_of(truth.run(a.view(np.uint16).view(__import__("ml_dtypes").bfloat16),
                                                   z["b"].view(__import__("ml_dtypes").bfloat16)))[i, j]


def test_the_call_comes_from_the_schedule_source():
    s = Schedule(W, source={**SRC, "use_fast_accum": True, "split_k": 2})
    c = call_of(s)
    assert (c["M"], c["N"], c["K"], c["options"]) == (64, 16, 2048, {"fast_accum": True, "split_k": 2})
    with pytest.raises(InputError, match="lacks shape"):
        call_of(Schedule(W, source={"target": "cublas", "dtype": "bf16", "out": "bf16"}))
