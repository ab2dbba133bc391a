"""refmodel is pure CPU: importing it (and running its models) never imports cupy."""

import subprocess
import sys


def test_refmodel_never_imports_cupy():
    code = ("import sys, numpy as np, refmodel, wgref.cli, refmodel.verify.replay\n"
            "refmodel.cvt('cvt.rn.satfinite.e4m3x2.f32', np.float32(1), np.float32(2))\n"
            "import gpu\n"  # the gpu package imports cupy lazily, not at import time
            "assert 'cupy' not in sys.modules, 'cupy was imported'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_console_script_entry_point():
    from importlib.metadata import entry_points

    eps = [e for e in entry_points(group="console_scripts") if e.name == "wgref"]
    assert eps and eps[0].value == "wgref.cli:main"
