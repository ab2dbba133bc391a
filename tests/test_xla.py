"""refmodel.golden.xla_dot from the optimized HLO, against the XLA calls recorded on the H200
(fixtures/schedules/xla_*: the schedule inference's verification digests)."""

import numpy as np
import pytest

from refmodel.errors import InputError
from refmodel.golden import xla_dot, xla_schedule
from refmodel.golden.cublas import split_bounds
from refmodel.golden.schedule import Schedule
from refmodel.golden.xla import REDUCE_ORDERS, parse_split
from refmodel.verify.fixtures import default_root, load_manifest
from refmodel.verify.infer import call_digest, verification_inputs

ENTRIES = [e for e in load_manifest(default_root() / "schedules")["entries"] if e["meta"]["target"] == "xla"]


def test_the_reduce_table_is_the_recorded_one():
    got = {}
    for e in ENTRIES:
        s = e["meta"]["schedule"]
        got[(e["meta"]["dtype"], s["splits"], e["meta"]["M"], e["meta"]["N"])] = (s["reduce"], s.get("out_nan"))
    assert got == REDUCE_ORDERS


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["file"] for e in ENTRIES])
def test_the_hlo_gives_the_inferred_schedule_and_the_hardware_bits(entry):
    meta = entry["meta"]
    hlo = "\n".join(meta["hlo_excerpt"])
    p = parse_split(hlo)
    assert (p["M"], p["N"], p["K"], p["dtype"]) == (meta["M"], meta["N"], meta["K"], meta["dtype"])
    s = xla_schedule(hlo)
    inferred = Schedule.from_dict(meta["schedule"])
    assert split_bounds(p["K"], s.splits, s.split_align) == split_bounds(p["K"], inferred.splits, inferred.split_align)
    assert (s.reduce, s.out_nan) == (inferred.reduce, inferred.out_nan)
    # the first two verification calls: xla_dot's bits are the H200's (sha256 of the recorded outputs)
    from refmodel.verify.fixtures import load_arrays

    arrays = load_arrays(default_root() / "schedules", entry)
    for i, _, a, b in verification_inputs(meta["dtype"], meta["M"], meta["N"], meta["K"], sparse=False,
                                          outputs=2 * meta["M"] * meta["N"], seed=meta["verification"]["seed"]):
        with np.errstate(all="ignore"):
            d = xla_dot(a, b, hlo=hlo)
        din, dout = call_digest(a, b, d)
        assert din == arrays["inputs_sha256"][i].tobytes() and dout == arrays["outputs_sha256"][i].tobytes()


def test_an_unrecorded_reduction_is_refused_and_reduce_overrides():
    hlo = "\n".join(ENTRIES[0]["meta"]["hlo_excerpt"])
    p = parse_split(hlo)
    other = hlo.replace(f"{p['M']},{p['splits']},", f"{p['M'] * 2},{p['splits']},")
    assert parse_split(other)["M"] == 2 * p["M"]
    with pytest.raises(InputError, match="not recorded"):
        xla_schedule(other)
    assert xla_schedule(other, reduce="tree").reduce == "tree"
    with pytest.raises(InputError, match="no Triton GEMM fusion"):
        xla_schedule("HloModule m\nENTRY %e { ROOT %c = f32[] constant(0) }")
    with pytest.raises(InputError, match="shapes"):
        xla_dot(np.zeros((8, 8), np.float16), np.zeros((8, 8), np.float16), hlo=hlo)
