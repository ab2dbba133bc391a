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


def test_every_module_command_in_the_docs_exists():
    """Every ``python -m <module>`` the README and docs/ name is a module of the tree with a main(),
    so the recorder and campaign commands they show run from the paths they give."""
    import ast
    import re

    names = set()
    for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        names |= set(re.findall(r"python3? -m ((?:gpu|refmodel|wgref|tools)(?:\.\w+)+)(?![.\w]*<)", p.read_text()))
    assert len(names) >= 10, sorted(names)
    for name in sorted(names):
        path = ROOT / (name.replace(".", "/") + ".py")
        if not path.exists():                              # a package runs its __main__.py
            path = ROOT / name.replace(".", "/") / "__main__.py"
        assert path.exists(), f"the docs name python -m {name}, but neither {name.replace('.', '/')}.py nor its " \
                              f"package's __main__.py exists"
        tree = ast.parse(path.read_text())
        assert any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body) or \
            "__main__" in path.read_text(), f"python -m {name}: the module has no main()"
