"""The package's architecture, enforced: who may import whom.

ground (refmodel/*.py: errors, dtypes, wgmma_forms, interop)  <-  numerics, layouts
numerics  and  layouts  never import each other;  machine composes both;
verify sits on the model; render (teaching diagrams) draws layouts and machine, never verify;  refmodel never imports gpu, cupy or the CLI (not lazily
either);  gpu reads refmodel, never the reverse;  the CLI (wgref) sits on top of all.

gpu/ is four parts:  kernels  <-  libraries  <-  {record, fuzz};  record and fuzz never import
each other, kernels import neither libraries, record nor fuzz (gpu/__init__ only re-exports
kernels.runtime).
Every import statement is checked, including those inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("numerics", "layouts", "machine", "verify", "render", "golden")

# layer -> refmodel layers it must not import
FORBIDDEN = {
    "ground": set(LAYERS),
    "numerics": {"layouts", "machine", "verify", "render", "golden"},
    "layouts": {"numerics", "machine", "verify", "render", "golden"},
    "machine": {"verify", "render", "golden"},
    "verify": set(),
    "render": {"verify"},  # teaching diagrams: draw layouts/machine, never the verifier
    "golden": {"verify", "machine", "render"},  # library golden models: schedules of numerics
}
NEVER_FROM_REFMODEL = {"gpu", "cupy", "wgref", "torch"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in a file, relative ones resolved."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
            # "from refmodel import numerics" imports the subpackage too
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names]
    return out


def _layer(mod: str) -> str | None:
    parts = mod.split(".")
    if parts[0] != "refmodel":
        return None
    if len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    return "ground"


def _refmodel_files():
    return sorted((ROOT / "refmodel").rglob("*.py"))


def test_every_refmodel_module_has_a_layer():
    for p in _refmodel_files():
        rel = p.relative_to(ROOT / "refmodel")
        assert len(rel.parts) == 1 or rel.parts[0] in LAYERS, f"{rel} is in no layer"


@pytest.mark.parametrize("path", _refmodel_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_refmodel_imports_respect_layers(path):
    mod = _module_name(path)
    own = _layer(mod)
    if path.name == "__init__.py" and mod == "refmodel":
        own = "facade"  # the package's public face re-exports every layer
    for line, imp in _imports(path):
        top = imp.split(".")[0]
        assert top not in NEVER_FROM_REFMODEL, f"{mod}:{line} imports {imp}: refmodel never imports {top}"
        target = _layer(imp)
        if own == "facade" or target is None:
            continue
        assert target not in FORBIDDEN[own], (
            f"{mod}:{line} imports {imp}: the {own} layer must not import the {target} layer")


GPU_PARTS = ("kernels", "libraries", "record", "fuzz")
# part -> gpu parts it may import
GPU_ALLOWED = {
    "ground": {"kernels"},                       # gpu/__init__.py
    "kernels": {"kernels"},
    "libraries": {"kernels", "libraries"},
    "record": {"kernels", "libraries", "record"},
    "fuzz": {"kernels", "libraries", "fuzz"},
}


def _gpu_files():
    return sorted((ROOT / "gpu").rglob("*.py"))


def _gpu_part(mod: str) -> str | None:
    parts = mod.split(".")
    if parts[0] != "gpu":
        return None
    if len(parts) > 1 and parts[1] in GPU_PARTS:
        return parts[1]
    return "ground"


def test_every_gpu_module_is_in_one_of_four_parts():
    for p in _gpu_files():
        rel = p.relative_to(ROOT / "gpu")
        assert rel.parts == ("__init__.py",) or (len(rel.parts) == 2 and rel.parts[0] in GPU_PARTS), (
            f"gpu/{rel} is in none of gpu/{{{', '.join(GPU_PARTS)}}}/")


@pytest.mark.parametrize("part", GPU_PARTS)
def test_gpu_parts_say_what_lives_there(part):
    import ast as _ast

    doc = _ast.get_docstring(_ast.parse((ROOT / "gpu" / part / "__init__.py").read_text()))
    assert doc and len(doc.strip().splitlines()) == 1, f"gpu/{part}/__init__.py needs a one-line docstring"


@pytest.mark.parametrize("path", _gpu_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_gpu_imports_respect_parts(path):
    mod = _module_name(path)
    own = _gpu_part(mod)
    for line, imp in _imports(path):
        assert imp.split(".")[0] != "wgref", f"{mod}:{line} imports {imp}: the CLI sits on top"
        target = _gpu_part(imp)
        if target is None:
            continue
        if target == "ground" and imp != "gpu":
            raise AssertionError(f"{mod}:{line} imports {imp}: every gpu module lives in gpu/{{{', '.join(GPU_PARTS)}}}/")
        assert target in GPU_ALLOWED[own] or target == "ground" and own != "kernels", (
            f"{mod}:{line} imports {imp}: gpu/{own} must not import gpu/{target} "
            f"(kernels <- libraries <- {{record, fuzz}}; record and fuzz never import each other)")


def test_the_checker_sees_a_violation(tmp_path, monkeypatch):
    """The rule catches a lazy cross-layer import (so the tests above can fail)."""
    bad = ROOT / "refmodel" / "layouts" / "_probe_violation.py"
    bad.write_text("def f():\n    from ..numerics import fp8\n    import cupy\n")
    try:
        with pytest.raises(AssertionError, match="numerics layer"):
            test_refmodel_imports_respect_layers(bad)
    finally:
        bad.unlink()


@pytest.mark.parametrize("part, bad, rule", [
    ("kernels", "from gpu.record import wgmma", "gpu/kernels must not import gpu/record"),
    ("record", "def f():\n    from gpu.fuzz.cpu_engine import fuzz\n", "gpu/record must not import gpu/fuzz"),
    ("fuzz", "import gpu.record.forms\n", "gpu/fuzz must not import gpu/record"),
    ("libraries", "def f():\n    from ..fuzz import library\n", "gpu/libraries must not import gpu/fuzz"),
    ("kernels", "def f():\n    import wgref.cli\n", "the CLI sits on top"),
])
def test_the_gpu_checker_sees_a_violation(part, bad, rule):
    """The gpu rule catches lazy and relative cross-part imports (so the test above can fail)."""
    probe = ROOT / "gpu" / part / "_probe_violation.py"
    probe.write_text(bad + "\n")
    try:
        with pytest.raises(AssertionError, match=rule):
            test_gpu_imports_respect_parts(probe)
    finally:
        probe.unlink()


def _import_graph() -> dict[str, set[str]]:
    """module -> the tree's modules it imports (every import statement, those inside functions too; a
    child importing its own package is not an edge: the package runs first anyway)."""
    files = [p for pkg in ("refmodel", "gpu", "wgref") for p in sorted((ROOT / pkg).rglob("*.py"))]
    mods = {_module_name(p): p for p in files}
    graph: dict[str, set[str]] = {}
    for m, p in mods.items():
        deps = set()
        for _, imp in _imports(p):
            parts = imp.split(".")
            while parts and ".".join(parts) not in mods:
                parts.pop()
            d = ".".join(parts)
            if d and d != m and not m.startswith(d + "."):
                deps.add(d)
        graph[m] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles_anywhere():
    cycles = _cycles(_import_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
