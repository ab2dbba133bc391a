"""pytest setup: the ``gpu`` marker skips without an sm_90 device unless --require-gpu."""

import pytest


def pytest_addoption(parser):
    parser.addoption("--require-gpu", action="store_true", default=False,
                     help="fail (instead of skip) gpu-marked tests when no sm_90 device is usable")


def pytest_collection_modifyitems(config, items):
    gpu_items = [it for it in items if "gpu" in it.keywords]
    if not gpu_items:
        return
    from gpu.runtime import _probe

    ok, why = _probe()
    if ok:
        return
    if config.getoption("--require-gpu"):
        raise pytest.UsageError(f"--require-gpu given but no usable GPU: {why}")
    for it in gpu_items:
        it.add_marker(pytest.mark.skip(reason=f"no sm_90 GPU: {why}"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Print the seeds a failing randomized test drew from (tests/seeds.py)."""
    outcome = yield
    rep = outcome.get_result()
    seeds = [v for k, v in item.user_properties if k == "seed"]
    if rep.failed and seeds:
        rep.sections.append(("seed", "reproduce with seed " + "; ".join(seeds)))
