"""Make numba's on-disk cache work wherever refmodel is installed (the ground of refmodel).

refmodel's kernels are ``numba.njit(cache=True)``.  numba writes their cache next to the
source (``__pycache__``), else into ``$NUMBA_CACHE_DIR``, else into the user's cache
directory; when none of these is writable (a read-only install and no writable home)
numba refuses to even *define* the functions, so ``import refmodel`` would fail.  Then
the cache goes to a fresh temporary directory instead, with a one-line warning (the
kernels compile once per process, as without a cache).
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _writable(d: str | os.PathLike) -> bool:
    try:
        os.makedirs(d, exist_ok=True)
        with tempfile.TemporaryFile(dir=d):
            pass
        return True
    except OSError:
        return False


def _in_tree_ok() -> bool:
    dirs = {p.parent for p in _PACKAGE.rglob("*.py") if "cache=True" in p.read_text(errors="ignore")}
    return all(_writable(d / "__pycache__") for d in dirs)


def ensure_cache_dir() -> str | None:
    """Point numba at a temporary cache directory when no cache location is writable;
    returns that directory (None when numba's own choice works)."""
    from numba.core import config

    if config.CACHE_DIR and _writable(config.CACHE_DIR):
        return None
    if _in_tree_ok():
        return None
    try:
        from numba.misc.appdirs import AppDirs

        user = AppDirs(appname="numba", appauthor=False).user_cache_dir
    except Exception:  # pragma: no cover - numba internals moved
        user = None
    if user and _writable(user):
        return None
    import atexit
    import shutil

    tmp = tempfile.mkdtemp(prefix="wgref-numba-cache-")
    atexit.register(shutil.rmtree, tmp, True)
    config.CACHE_DIR = tmp
    warnings.warn(f"refmodel: no writable numba cache location (package directory, NUMBA_CACHE_DIR, "
                  f"home); caching compiled kernels in {tmp} for this process", RuntimeWarning,
                  stacklevel=3)
    return tmp
