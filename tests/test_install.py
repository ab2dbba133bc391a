"""A non-editable install ships the fixtures: the wheel holds refmodel/verify/_fixtures and
an installed copy's default fixture root is that folder, complete (INDEX.json checks)."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """What ``pip install .`` installs: pip builds the wheel (build isolation, as users do)."""
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-cache-dir", "-w", str(out),
                        str(ROOT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    (whl,) = out.glob("wgref-*.whl")
    return whl


def test_wheel_contains_every_fixture(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    want = {f"refmodel/verify/_fixtures/{p.relative_to(ROOT / 'fixtures').as_posix()}"
            for p in (ROOT / "fixtures").rglob("*") if p.is_file()}
    assert "refmodel/verify/_fixtures/INDEX.json" in want
    assert want <= names, sorted(want - names)[:5]


def test_installed_copy_finds_its_fixtures(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import os, refmodel.verify.fixtures as f; r = f.default_root(); print(r); "
            "assert not f.check_index(r), f.check_index(r)")
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert Path(r.stdout.strip()) == site / "refmodel" / "verify" / "_fixtures"
