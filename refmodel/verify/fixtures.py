"""Hardware-recorded fixtures: storage, manifests with provenance, sha256 checks, replay.

Layout::

    fixtures/<feature>/manifest.json     one manifest per feature directory
    fixtures/<feature>/<name>.npz        compressed arrays (np.savez_compressed)

A manifest is ``{"feature": ..., "entries": [entry, ...]}``; each entry names its
file, its sha256, the replayer (``kind``), the number of hardware outputs it holds
(``cases``), free-form ``meta`` the replayer reads (instruction, parameters) and the
``provenance`` (device, driver, CUDA/NVRTC/cupy versions, date, seed, host packages).

Replayers live in :mod:`refmodel.replay`; ``wgref verify`` runs them all.
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


def default_root() -> Path:
    """fixtures/ of the source checkout (or $WGREF_FIXTURES)."""
    env = os.environ.get(FIXTURE_ROOT_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "fixtures"


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
    return entry


def load_manifest(directory: str | Path) -> dict[str, Any]:
    p = Path(directory) / "manifest.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read fixture manifest {p}: {e}") from None


def iter_entries(root: str | Path | None = None):
    """Yield (feature, directory, entry dict) for every manifest under root."""
    root = Path(root) if root is not None else default_root()
    for man_path in sorted(root.glob("*/manifest.json")):
        man = load_manifest(man_path.parent)
        for e in man["entries"]:
            yield man.get("feature", man_path.parent.name), man_path.parent, e


def load_arrays(directory: str | Path, entry: dict[str, Any], *, check: bool = True) -> dict[str, np.ndarray]:
    """Load an entry's arrays; refuse a file whose sha256 does not match the manifest."""
    path = Path(directory) / entry["file"]
    if not path.exists():
        raise InputError(f"fixture {path} is listed in its manifest but missing")
    if check:
        got = sha256_file(path)
        if got != entry["sha256"]:
            raise InputError(f"fixture {path} has sha256 {got[:16]}…, its manifest says "
                             f"{entry['sha256'][:16]}…: refusing a modified fixture")
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}
