"""pytest setup: the ``gpu`` marker skips without an sm_90 device unless --require-gpu."""

import os
import stat
import tempfile

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


# ----------------------------------------------------------------------------- adversarial file tests
# (used by tests/test_adversarial_writes.py and tests/test_adversarial_reads.py: pytestmark usefixtures)

def _dangerous(dst) -> str | None:
    p = os.path.abspath(os.fsdecode(dst))
    if p == "/dev" or p.startswith("/dev/") or os.path.realpath(p).startswith("/dev/"):
        return f"{p} is under /dev"
    try:
        st_ = os.lstat(p)
    except OSError:
        return None
    if not stat.S_ISREG(st_.st_mode):
        return f"{p} exists and is not a regular file"
    return None


@pytest.fixture
def no_clobber(monkeypatch):
    """Make a wrong writer fail loudly instead of replacing /dev/null or a FIFO (we are root)."""
    real_replace, real_rename, real_mkstemp = os.replace, os.rename, tempfile.mkstemp

    def replace(src, dst, *a, **kw):
        why = _dangerous(dst)
        if why:
            raise AssertionError(f"a writer tried to replace {why}")
        return real_replace(src, dst, *a, **kw)

    def rename(src, dst, *a, **kw):
        why = _dangerous(dst)
        if why:
            raise AssertionError(f"a writer tried to rename onto {why}")
        return real_rename(src, dst, *a, **kw)

    def mkstemp(*a, **kw):
        d = kw.get("dir") or (a[2] if len(a) > 2 else None)
        if d is not None and os.path.abspath(os.fsdecode(d)).startswith("/dev"):
            raise AssertionError(f"a writer tried to create a temporary file in {d}")
        return real_mkstemp(*a, **kw)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    null_before = os.stat("/dev/null")
    yield
    null_after = os.stat("/dev/null")
    assert stat.S_ISCHR(null_after.st_mode) and null_after.st_rdev == null_before.st_rdev, \
        "/dev/null is no longer the null character device"


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    p = tmp_path_factory.mktemp("outside") / "precious.txt"
    p.write_bytes(b"precious")
    return p
