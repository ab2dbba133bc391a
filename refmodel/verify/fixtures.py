"""Hardware-recorded fixtures: storage, manifests with provenance, sha256 checks, replay.

Layout::

    fixtures/<feature>/manifest.json     one manifest per feature directory
    fixtures/<feature>/<name>.npz        compressed arrays (np.savez_compressed)

A manifest is ``{"feature": ..., "entries": [entry, ...]}``; each entry names its
file, its sha256, the replayer (``kind``), the number of hardware outputs it holds
(``cases``), free-form ``meta`` the replayer reads (instruction, parameters) and the
``provenance`` (device, driver, CUDA/NVRTC/cupy versions, date, seed, host packages).

``fixtures/INDEX.json`` is the signed-off inventory of the whole tree: every feature's
manifest with its sha256, entry count, total cases and the list of files in its folder.
``wgref verify`` (and the test suite) refuse a tree that does not match it: a deleted
fixture, a trimmed manifest, a missing or extra feature or file.  :func:`write_fixture`
updates it; ``python -m refmodel.verify.fixtures --reindex`` regenerates it deliberately.

Entry file names are plain names inside their feature folder (no ``/``, ``..``, absolute
paths).  Replayers live in :mod:`refmodel.verify.replay`; ``wgref verify`` runs them all.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError

FIXTURE_ROOT_ENV = "WGREF_FIXTURES"
INDEX_NAME = "INDEX.json"


class FixtureError(InputError):
    """A fixture or the fixture tree breaks a rule; ``short`` is a few words for summaries."""

    def __init__(self, message: str, short: str | None = None):
        super().__init__(message)
        self.short = short or message


def _candidate_roots() -> list[Path]:
    here = Path(__file__).resolve()
    # 1. a source checkout (editable install): <repo>/fixtures
    # 2. a wheel / non-editable install: the package data copy refmodel/verify/_fixtures
    return [here.parents[2] / "fixtures", here.parent / "_fixtures"]


def default_root() -> Path:
    """$WGREF_FIXTURES, else fixtures/ of the source checkout, else the copy installed
    with the package (``refmodel/verify/_fixtures``)."""
    env = os.environ.get(FIXTURE_ROOT_ENV)
    if env:
        return Path(env)
    cands = _candidate_roots()
    for c in cands:
        if (c / INDEX_NAME).exists() or any(c.glob("*/manifest.json")):
            return c
    return cands[0]


def check_entry_file(name: Any) -> str:
    """The entry's file name, refused unless it is a plain name inside its feature folder."""
    if (not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name
            or name.startswith("~") or Path(name).is_absolute() or Path(name).name != name or "\0" in name):
        from ..fileio import printable

        shown = printable(repr(name), 80) if isinstance(name, str) else type(name).__name__
        raise FixtureError(f"fixture file names must be plain names inside their feature folder "
                           f"(no '/', '..' or absolute paths), got {shown}", short="path outside its folder")
    return name


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def host_provenance() -> dict[str, Any]:
    """Versions of the recording host's Python packages."""
    import ml_dtypes
    import numba

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "ml_dtypes": ml_dtypes.__version__,
        "numba": numba.__version__,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


@dataclass
class Entry:
    file: str
    kind: str
    cases: int
    sha256: str
    meta: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "kind": self.kind, "cases": int(self.cases),
                "sha256": self.sha256, "meta": self.meta, "provenance": self.provenance}


def write_fixture(feature: str, name: str, arrays: dict[str, np.ndarray], *, kind: str,
                  cases: int, meta: dict[str, Any], provenance: dict[str, Any],
                  root: str | Path | None = None) -> Entry:
    """Save arrays as fixtures/<feature>/<name>.npz and add/replace its manifest entry."""
    root = Path(root) if root is not None else default_root()
    check_entry_file(feature)
    check_entry_file(f"{name}.npz")
    d = root / feature
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{name}.npz"
    from ..fileio import atomic_write_text, save_npz

    save_npz(path, **arrays)  # atomic: a killed recorder leaves the old fixture or none
    entry = Entry(file=path.name, kind=kind, cases=int(cases), sha256=sha256_file(path),
                  meta=meta, provenance=provenance)
    man = load_manifest(d) if (d / "manifest.json").exists() else {"feature": feature, "entries": []}
    man["entries"] = [e for e in man["entries"] if e["file"] != entry.file] + [entry.to_json()]
    man["entries"].sort(key=lambda e: e["file"])
    atomic_write_text(d / "manifest.json", json.dumps(man, indent=1, sort_keys=True) + "\n")
    write_index(root)
    return entry


# ----------------------------------------------------------------------------- schemas
# One schema-like checker per file format.  A schema is a type (str, dict), one of the
# names "count" (an int >= 0, not a bool) and "sha256" (64 hex digits), a one-element
# list [item] (a list of items), a dict {key: schema} (an object with exactly these keys;
# a key ending in "?" is optional) or {str: schema} (an object of any keys).

_ENTRY_SCHEMA = {"file": str, "kind": str, "cases": "count", "sha256": "sha256", "meta": dict,
                 "provenance": dict}
MANIFEST_SCHEMA = {"feature?": str, "entries": [_ENTRY_SCHEMA]}
INDEX_SCHEMA = {"about?": str, "features": {str: {"manifest_sha256": "sha256", "entries": "count",
                                                  "cases": "count", "files": [str]}}}
_HEX = frozenset("0123456789abcdef")


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def check_schema(value: Any, schema: Any, where: str, what: str = "") -> None:
    """Raise one FixtureError naming the first place where ``value`` breaks ``schema``."""
    from ..fileio import printable

    here = what or "the top level"
    if schema == "count":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise FixtureError(f"{where}: {here} must be an integer >= 0, got {printable(repr(value), 40)}",
                               short="malformed file")
        return
    if schema == "sha256":
        if not (isinstance(value, str) and len(value) == 64 and set(value) <= _HEX):
            raise FixtureError(f"{where}: {here} must be a sha256 (64 lowercase hex digits), got "
                               f"{printable(repr(value), 40)}", short="malformed file")
        return
    if isinstance(schema, type):
        if not isinstance(value, schema) or isinstance(value, bool) and schema is not bool:
            raise FixtureError(f"{where}: {here} must be {_kind(schema())}, got {_kind(value)}",
                               short="malformed file")
        return
    if isinstance(schema, list):
        if not isinstance(value, list):
            raise FixtureError(f"{where}: {here} must be a list, got {_kind(value)}", short="malformed file")
        for i, v in enumerate(value):
            check_schema(v, schema[0], where, f"{what}[{i}]")
        return
    if not isinstance(value, dict):
        raise FixtureError(f"{where}: {here} must be an object, got {_kind(value)}", short="malformed file")
    if str in schema:
        for k, v in value.items():
            check_schema(v, schema[str], where, f"{what}[{printable(repr(k), 40)}]")
        return
    keys = {k.rstrip("?"): k for k in schema}
    extra = sorted(set(value) - set(keys))
    if extra:
        raise FixtureError(f"{where}: {here} has unknown key {printable(repr(extra[0]), 40)} (allowed: "
                           f"{', '.join(sorted(keys))})", short="malformed file")
    for k, sk in keys.items():
        if k not in value:
            if not sk.endswith("?"):
                raise FixtureError(f"{where}: {here} lacks the key {k!r}", short="malformed file")
            continue
        check_schema(value[k], schema[sk], where, f"{what}.{k}" if what else k)


def check_manifest(man: Any, where: str = "manifest.json") -> dict[str, Any]:
    """A manifest's structure (:data:`MANIFEST_SCHEMA`), each file listed once."""
    check_schema(man, MANIFEST_SCHEMA, where)
    seen: set[str] = set()
    for e in man["entries"]:
        if e["file"] in seen:
            from ..fileio import printable

            raise FixtureError(f"{where}: lists the fixture file {printable(repr(e['file']), 60)} twice",
                               short="malformed file")
        seen.add(e["file"])
    return man


def _read_json(p: Path, what: str) -> Any:
    """JSON of a fixture-tree file: bounded in size and depth, no symlink out of its folder."""
    from ..fileio import read_json

    _inside_folder(p, what)
    try:
        return read_json(p)
    except FixtureError:
        raise
    except InputError as e:
        raise FixtureError(f"{what}: {e}", short="unreadable") from None


def load_manifest(directory: str | Path) -> dict[str, Any]:
    """A feature's manifest, its structure checked (one FixtureError, never a traceback)."""
    p = Path(directory) / "manifest.json"
    man = _read_json(p, "fixture manifest")
    return check_manifest(man, str(p))


def _inside_folder(path: Path, what: str = "fixture") -> None:
    """Refuse ``path`` when it is a symlink whose target lies outside its own folder."""
    if not path.is_symlink():
        return
    from ..fileio import printable

    folder = path.parent.resolve()
    try:
        target = path.resolve(strict=False)
    except (OSError, RuntimeError):
        target = None
    if target is None or target.parent != folder:
        raise FixtureError(f"{what} {printable(repr(path.name), 80)} in {printable(path.parent, 60)} is a "
                           f"symlink to {printable(str(target), 60)}, outside its folder: refused, not followed",
                           short="symlink outside its folder")


def iter_entries(root: str | Path | None = None):
    """Yield (feature, directory, entry dict) for every manifest under root."""
    root = Path(root) if root is not None else default_root()
    for man_path in sorted(root.glob("*/manifest.json")):
        man = load_manifest(man_path.parent)
        for e in man["entries"]:
            yield man.get("feature", man_path.parent.name), man_path.parent, e


def load_arrays(directory: str | Path, entry: dict[str, Any], *, check: bool = True) -> dict[str, np.ndarray]:
    """Load an entry's arrays; refuse a file whose sha256 does not match the manifest, a
    file name that is not a plain name inside the feature folder, and a symlink to a file
    outside it.  Every array is read through the bounded reader (refmodel.fileio)."""
    from ..fileio import load_npz

    if not isinstance(entry, dict):
        raise FixtureError(f"a manifest entry must be an object, got {type(entry).__name__}",
                           short="malformed file")
    path = Path(directory) / check_entry_file(entry.get("file"))
    _inside_folder(path)
    if not path.is_file():
        raise FixtureError(f"fixture {path} is listed in its manifest but missing", short="missing")
    if check:
        got = sha256_file(path)
        if got != entry.get("sha256"):
            raise FixtureError(f"fixture {path} has sha256 {got[:16]}…, its manifest says "
                               f"{str(entry.get('sha256'))[:16]}…: refusing a modified fixture",
                               short="sha256 mismatch")
    try:
        z = load_npz(path)
        return {k: z[k] for k in z}
    except FixtureError:
        raise
    except InputError as e:
        raise FixtureError(str(e), short="unreadable fixture") from None


# ----------------------------------------------------------------------------- INDEX.json

def build_index(root: str | Path | None = None) -> dict[str, Any]:
    """The inventory of the tree as it is now (what :func:`write_index` signs off)."""
    root = Path(root) if root is not None else default_root()
    feats: dict[str, Any] = {}
    for man_path in sorted(root.glob("*/manifest.json")):
        d = man_path.parent
        man = load_manifest(d)
        entries = man.get("entries", [])
        for p in d.iterdir():
            _inside_folder(p)  # a symlink out of the tree is never signed off
        feats[d.name] = {
            "manifest_sha256": sha256_file(man_path),
            "entries": len(entries),
            "cases": int(sum(int(e.get("cases", 0)) for e in entries)),
            "files": sorted(p.name for p in d.iterdir() if p.is_file() and p.name != "manifest.json"),
        }
    return {"about": "inventory of the hardware fixtures; regenerate deliberately with "
                     "python -m refmodel.verify.fixtures --reindex", "features": feats}


def write_index(root: str | Path | None = None) -> Path:
    """(Re)write <root>/INDEX.json from the tree: a deliberate sign-off of its contents."""
    root = Path(root) if root is not None else default_root()
    from ..fileio import atomic_write_text

    path = root / INDEX_NAME
    text = json.dumps(build_index(root), indent=1, sort_keys=True) + "\n"
    # atomically: a write fault or a kill leaves the previous INDEX.json, never a truncated one
    atomic_write_text(path, text)
    return path


def load_index(root: str | Path | None = None) -> dict[str, Any]:
    root = Path(root) if root is not None else default_root()
    p = root / INDEX_NAME
    if not p.is_file():
        raise FixtureError(f"{p} is missing: every fixture tree needs its signed-off inventory "
                           f"(python -m refmodel.verify.fixtures --reindex)", short="missing")
    idx = _read_json(p, "fixture inventory")
    check_schema(idx, INDEX_SCHEMA, str(p))
    return idx


def check_index(root: str | Path | None = None) -> list[tuple[str, str, FixtureError]]:
    """Compare the tree with INDEX.json; returns (feature, thing, error) for every problem."""
    root = Path(root) if root is not None else default_root()
    try:
        want = load_index(root)["features"]
    except FixtureError as e:
        return [("INDEX", INDEX_NAME, e)]
    probs: list[tuple[str, str, FixtureError]] = []

    def bad(feature, thing, msg, short):
        probs.append((feature, thing, FixtureError(msg, short)))

    have_dirs = {p.parent.name for p in root.glob("*/manifest.json")}
    for feat in sorted(set(want) - have_dirs):
        bad(feat, "manifest.json", f"feature {feat!r} is listed in {INDEX_NAME} but {feat}/manifest.json "
            "is missing", "feature missing")
    for feat in sorted(have_dirs - set(want)):
        bad(feat, "manifest.json", f"feature {feat!r} ({feat}/manifest.json) is not listed in {INDEX_NAME}",
            "feature not in INDEX.json")
    for feat in sorted(set(want) & have_dirs):
        w = want[feat]
        d = root / feat
        try:
            man = load_manifest(d)
            entries = man.get("entries", [])
            cases = int(sum(int(e.get("cases", 0)) for e in entries))
        except (FixtureError, InputError, ValueError, TypeError, AttributeError) as e:
            bad(feat, "manifest.json", f"{feat}/manifest.json is unreadable: {e}", "unreadable manifest")
            continue
        files = set()
        for p in d.iterdir():
            try:
                _inside_folder(p)
            except FixtureError as err:
                probs.append((feat, p.name, err))
                files.add(p.name)  # reported once, as what it is (not also as "missing")
                continue
            if p.is_file() and p.name != "manifest.json":
                files.add(p.name)
        listed = set(w.get("files", []))
        for f in sorted(listed - files):
            bad(feat, f, f"{feat}/{f} is listed in {INDEX_NAME} but missing", "file missing")
        for f in sorted(files - listed):
            bad(feat, f, f"{feat}/{f} is not listed in {INDEX_NAME}", "file not in INDEX.json")
        for e in entries:
            name = e.get("file") if isinstance(e, dict) else None
            try:
                check_entry_file(name)
            except FixtureError as err:
                probs.append((feat, str(name), err))
                continue
            if name not in listed and name not in files:
                bad(feat, str(name), f"{feat}/manifest.json lists {name!r}, which is neither in the folder "
                    f"nor in {INDEX_NAME}", "file missing")
        if len(entries) < int(w.get("entries", 0)):
            bad(feat, "manifest.json", f"{feat}/manifest.json has {len(entries)} entries, {INDEX_NAME} says "
                f"{w.get('entries')}", "entries missing")
        if cases < int(w.get("cases", 0)):
            bad(feat, "manifest.json", f"{feat}/manifest.json counts {cases} cases, {INDEX_NAME} says "
                f"{w.get('cases')}", "cases missing")
        got = sha256_file(d / "manifest.json")
        if got != w.get("manifest_sha256"):
            bad(feat, "manifest.json", f"{feat}/manifest.json has sha256 {got[:16]}…, {INDEX_NAME} says "
                f"{str(w.get('manifest_sha256'))[:16]}…: the manifest changed without a sign-off "
                "(python -m refmodel.verify.fixtures --reindex)", "manifest sha256 mismatch")
    return probs


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m refmodel.verify.fixtures",
                                 description="Check or regenerate fixtures/INDEX.json.")
    ap.add_argument("--root", default=None, help="fixtures directory (default: the package's)")
    ap.add_argument("--reindex", action="store_true", help="rewrite INDEX.json from the tree (a sign-off)")
    args = ap.parse_args(argv)
    root = Path(args.root) if args.root else default_root()
    if not root.is_dir():
        print(f"error: fixtures directory {root} does not exist", file=sys.stderr)
        return 2
    if args.reindex:
        try:
            p = write_index(root)
            n = len(load_index(root)["features"])
        except InputError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"wrote {p} ({n} features)")
        return 0
    probs = check_index(root)
    for feat, thing, e in probs:
        print(f"{feat}/{thing}: {e}")
    print(f"{root / INDEX_NAME}: {'OK' if not probs else f'{len(probs)} problems'}")
    return 1 if probs else 0


if __name__ == "__main__":
    raise SystemExit(main())
