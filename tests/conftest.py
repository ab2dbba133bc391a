"""pytest setup: the ``gpu`` marker skips without an sm_90 device unless --require-gpu."""

import pytest


def pytest_addoption(parser):
    parser.addoption("--require-gpu", action="store_true", default=False,
                     help="fail (instead of skip) gpu-marked tests when no sm_90 device is usable")


def pytest_collection_modifyitems(config, items):
    gpu_items = [it for it in items if "gpu" in it.keywords]
    if not gpu_items:
        return
    from gpu.kernels.runtime import _probe

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


# ----------------------------------------------------------------------------- Hypothesis profiles
# CI is deterministic (derandomize): the same examples every run.  HYPOTHESIS_PROFILE=thorough
# runs many more, randomly seeded, for local bug hunting.
import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", derandomize=False, deadline=None, max_examples=2000,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# adversarial cases tried by tests/test_adversarial.py in this session (printed at the end)
ADVERSARIAL = {"cases": 0}


@pytest.fixture(scope="session")
def adversarial_counter():
    return ADVERSARIAL


def pytest_terminal_summary(terminalreporter):
    if ADVERSARIAL["cases"]:
        terminalreporter.write_line(f"adversarial cases tried: {ADVERSARIAL['cases']}")
