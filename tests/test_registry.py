"""refmodel.golden.registry is the one list of golden models: every entry resolves (function, kernel
parser, recorder module, fixtures), and the CLI, schedule inference and the library fuzzer take exactly
the names it lists."""

import importlib.util
from pathlib import Path

import pytest

from refmodel.golden.registry import GOLDEN_MODELS, cli_names, fuzz_targets, golden_model, infer_targets, option_owners

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("m", GOLDEN_MODELS, ids=[m.name for m in GOLDEN_MODELS])
def test_every_entry_resolves(m):
    assert callable(m.resolve())
    if m.kernel_parser:
        assert callable(m.resolve("kernel_parser"))
    if m.recorder:
        assert importlib.util.find_spec(m.recorder) is not None, m.recorder
    for f in m.fixtures:
        assert (ROOT / "fixtures" / f).exists(), f


def test_names_are_unique_and_lookups_refuse_unknown_names():
    names = [m.name for m in GOLDEN_MODELS]
    assert len(names) == len(set(names))
    with pytest.raises(ValueError, match="the registry has"):
        golden_model("nope")


def test_the_cli_takes_exactly_the_registry():
    from wgref.cli import build_parser

    p = build_parser()
    sub = next(a for a in p._actions if a.__class__.__name__ == "_SubParsersAction")
    golden = sub.choices["golden"]
    lib = next(a for a in golden._actions if a.dest == "library")
    assert tuple(lib.choices) == cli_names()
    flags = {o for a in golden._actions for o in a.option_strings}
    assert set(option_owners()) <= flags
    infer = sub.choices["infer"]
    assert tuple(next(a for a in infer._actions if a.dest == "target").choices) == infer_targets()


def test_fuzz_and_inference_targets_come_from_the_registry():
    from gpu.libraries.gemm_targets import TARGETS
    from refmodel.verify.library_calls import TARGETS as FUZZ
    from wgref.commands.fuzz import _LIB_TARGETS

    assert TARGETS == infer_targets()
    assert FUZZ == fuzz_targets()
    assert _LIB_TARGETS == tuple("lib:" + t for t in fuzz_targets())


def test_an_option_given_to_the_wrong_library_is_refused(tmp_path, capsys):
    import numpy as np

    from wgref.cli import main

    np.save(tmp_path / "a.npy", np.zeros((64, 64), np.uint16))
    rc = main(["golden", "cublas", str(tmp_path / "a.npy"), str(tmp_path / "a.npy"), "--dtype", "bf16",
               "--out-dtype", "bf16", "--recipe", "rowwise", "-o", str(tmp_path / "o.npy")])
    assert rc == 2 and "--recipe is for torchao" in capsys.readouterr().err
