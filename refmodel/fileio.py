"""Reading and writing wgref's files safely (the ground of refmodel).

* :func:`atomic_write`: every output is written to a temporary file in the target's
  directory and moved into place with ``os.replace``, so a killed process leaves the
  previous file or none, never a partial one.
* :func:`load_npy` / :func:`load_npz`: an empty, truncated, corrupt or non-numpy file,
  a directory or a missing path gives one :class:`~refmodel.errors.InputError` sentence.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .errors import InputError

# what numpy / zipfile raise on files that are not what they claim to be
_READ_ERRORS = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, KeyError,
                UnicodeDecodeError, RuntimeError, NotImplementedError, IndexError, TypeError)


def _reason(e: BaseException) -> str:
    if isinstance(e, IsADirectoryError):
        return "it is a directory"
    if isinstance(e, FileNotFoundError):
        return "no such file"
    if isinstance(e, PermissionError):
        return "permission denied"
    if isinstance(e, EOFError):
        return "the file is empty or truncated"
    if isinstance(e, (zipfile.BadZipFile, zlib.error)):
        return "not a valid .npz archive (truncated or corrupt)"
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text.rstrip(".")


def atomic_write(path: str | Path, write: Callable[[Any], None], *, mode: str = "wb") -> Path:
    """Call ``write(fileobj)`` on a temporary file next to ``path``, then move it over ``path``."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"cannot write {path}: it is a directory")
    d = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=d)
    except OSError as e:
        raise InputError(f"cannot write {path}: {_reason(e)}") from None
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise InputError(f"cannot write {path}: {_reason(e)}") from None
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write(path, lambda f: f.write(text), mode="w")


def save_npz(path: str | Path, **arrays: np.ndarray) -> Path:
    """``np.savez_compressed`` to exactly ``path`` (no '.npz' appended), atomically."""
    return atomic_write(path, lambda f: np.savez_compressed(f, **arrays))


def load_npy(path: str | Path) -> np.ndarray:
    """One array from a .npy file (no pickles)."""
    try:
        x = np.load(path, allow_pickle=False)
    except _READ_ERRORS as e:
        raise InputError(f"cannot read {path}: {_reason(e)}") from None
    if not isinstance(x, np.ndarray):
        x.close()
        raise InputError(f"{path} must hold one array (.npy), not an .npz archive")
    return x


def load_npz(path: str | Path) -> dict[str, np.ndarray]:
    """Every array of an .npz archive, read completely (a corrupt member fails here)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if not hasattr(z, "files"):
                raise InputError(f"{path} must be an .npz archive, not a single array (.npy)")
            return {k: z[k] for k in z.files}
    except InputError:
        raise
    except _READ_ERRORS as e:
        raise InputError(f"cannot read {path}: {_reason(e)}") from None
