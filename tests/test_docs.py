"""docs/ pages are generated from the code: they must be up to date."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_generated_docs_are_current():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_docs.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_generated_gallery_is_current():
    """docs/gallery/*.svg, index.html and docs/debug-descriptor.md come from tools/gen_gallery.py."""
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_gallery.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
