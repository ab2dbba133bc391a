"""Schedule inference (refmodel.verify.infer) on CPU targets whose schedule is known: it must
rediscover them from its probes, verify them, report schedules it cannot tell apart, and say "none"
(with the closest candidates) for a target no schedule of the space explains."""

from __future__ import annotations

import numpy as np
import pytest

from refmodel.dtypes import bits_of, from_bits
from refmodel.golden.schedule import Schedule
from refmodel.verify.infer import candidate_space, check_schedule, find_template, infer_schedule, predicted_breaks

W = "wgmma.mma_async.sync.aligned.m64n8k"


def target(s: Schedule):
    return lambda a, b: s.run(a, b)


@pytest.mark.parametrize("truth, dtype, shape", [
    (Schedule(W + "16.f32.bf16.bf16", splits=6, split_align=64, out_dtype="bf16"), "bf16", (64, 64, 8192)),
    (Schedule(W + "32.f32.e4m3.e4m3", splits=3, split_align=128, out_dtype="f32"), "e4m3", (64, 64, 8192)),
    (Schedule(W + "32.f32.e4m3.e4m3", promote_every=4, out_dtype="bf16"), "e4m3", (128, 64, 2048)),
    (Schedule("wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16", splits=8, split_align=64, reduce="tree",
              out_dtype="f16"), "f16", (64, 64, 4096)),
])
def test_inference_rediscovers_known_schedules(truth, dtype, shape):
    M, N, K = shape
    rep = infer_schedule(target(truth), M=M, N=N, K=K, dtype=dtype, out_dtype=truth.out_dtype,
                         sparse="sp." in truth.instr, verify_outputs=20000, log=lambda *a: None)
    assert rep.status in ("found", "ambiguous") and rep.schedule is not None
    kin = 32 if "sp." in truth.instr and dtype == "f16" else (16 if dtype != "e4m3" else 32)
    assert rep.breaks == sorted(predicted_breaks(truth, K, kin))
    for s in [rep.schedule, *rep.equivalent]:            # every survivor gives the truth's bits
        from refmodel.verify.families.matrix import make_inputs

        a, b = make_inputs(np.random.default_rng(7), "wide", dtype, M, N, K)
        if "sp." in truth.instr:
            from refmodel.verify.seeded import prune_rows_2_4

            a = prune_rows_2_4(a)
        assert np.array_equal(bits_of(s.run(a, b)), bits_of(truth.run(a, b)))
    assert "Verified on" in rep.paragraph() and rep.verified_outputs >= 20000


def test_a_wrong_candidate_is_rejected_and_an_unexplained_target_is_none():
    truth = Schedule(W + "32.f32.e4m3.e4m3", splits=3, split_align=128, out_dtype="f32")
    wrong = truth.replace(splits=2)
    n, bad = check_schedule(target(truth), wrong, M=64, N=64, K=8192, dtype="e4m3", outputs=8192)
    assert n == 8192 and bad > 0

    def noisy(a, b):                       # one ulp off on a few outputs: no schedule explains it
        d = truth.run(a, b)
        u = bits_of(d).copy()
        u[::7, ::5] ^= np.uint32(1)
        return from_bits(u, "f32")
    rep = infer_schedule(noisy, M=64, N=64, K=8192, dtype="e4m3", out_dtype="f32", verify_outputs=8192,
                         log=lambda *a: None)
    assert rep.status == "none" and rep.schedule is None and rep.closest
    assert all(isinstance(why, str) and why for _, why, _ in rep.closest)


def test_templates_and_the_space():
    for dt, out in (("bf16", "bf16"), ("f16", "f16"), ("e4m3", "f32"), ("e4m3", "bf16")):
        tpl = find_template(dt, out)
        assert tpl is not None, (dt, out)
        rel, vals = tpl
        kin = 16 if dt in ("bf16", "f16") else 32
        assert len({p % kin for p in rel}) == len(rel)            # templates at different boundaries never collide
    space = candidate_space(8192, "e4m3")
    assert len({(s.splits, s.split_align, s.promote_every, s.restart_every) for s in space}) == len(space)
    assert any(s.splits == 3 and s.split_align == 128 for s in space)
