"""What the command modules share: the command registry, usage errors, strict JSON output,
loading an input array and writing a file atomically."""

from __future__ import annotations

import argparse
import json as _stdjson
import types
from typing import Callable

import numpy as np

from refmodel.errors import WgrefError
from refmodel.validate import dumps_strict

# every --json output is strict JSON: NaN / +-Inf are written as the strings "nan", "inf",
# "-inf" (json.dumps would write NaN / Infinity, which strict parsers reject)
json = types.SimpleNamespace(dumps=dumps_strict, loads=_stdjson.loads)

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


class UsageError(WgrefError, ValueError):
    pass


def command(name):
    """Register the decorated function as the handler of ``wgref NAME``."""
    def deco(fn):
        COMMANDS[name] = fn
        return fn
    return deco


def load_array(path: str) -> np.ndarray:
    from refmodel.fileio import load_npy, load_npz

    if path.endswith(".npz"):
        raise UsageError(f"{path}: give a .npy file (one array), or NAME.npz:key")
    if ".npz:" in path:
        f, key = path.split(".npz:", 1)
        z = load_npz(f + ".npz")
        if key not in z:
            raise UsageError(f"{f}.npz has no array {key!r}; it has {', '.join(z) or 'none'}")
        return z[key]
    return load_npy(path)



def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file in the same folder, then os.replace)."""
    import os
    import tempfile

    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"cannot write {path}: folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".wgref-", suffix=".tmp", dir=folder)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise

