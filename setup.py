"""Build hook: ship the hardware fixtures inside the package.

``wgref verify`` replays ``fixtures/``; a wheel (``pip install .``, not editable) would not
contain that top-level folder, so build_py copies it to ``refmodel/verify/_fixtures``,
where :func:`refmodel.verify.fixtures.default_root` finds it in an installed copy.
An editable install reads ``fixtures/`` of the checkout directly.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py as _build_py

HERE = Path(__file__).resolve().parent


class build_py(_build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        src = HERE / "fixtures"
        dst = Path(self.build_lib) / "refmodel" / "verify" / "_fixtures"
        if src.is_dir():
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": build_py})
