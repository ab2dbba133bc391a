"""The special-function unit of sm_90a: forms as data (:mod:`.forms`), the unit's datapaths
(:mod:`.mufu`, tables solved from H200 outputs in :mod:`.tables`), the ptxas sequences of every
form (:mod:`.sequences`), the compiler spellings (:mod:`.spellings`, :mod:`.spelled`), the digests
the recordings are checked with (:mod:`.digest`) and the operand pairs of the binary forms
(:mod:`.pairs`).  ``refmodel.sfu(op, x, y=None)`` (:mod:`.unit`) evaluates any form."""

from __future__ import annotations

import hashlib
from pathlib import Path


def _drop_stale_cache() -> None:
    """numba's cache of a function is keyed by its own file only, and these kernels compile in the
    tables and the functions of sibling modules (the dispatchers over every form, too): when any source
    of this package changes, drop the package's cached kernels so that none runs stale code."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(here.glob("*.py")))).hexdigest()
    dirs = [here / "__pycache__"]
    try:
        from numba.core import config

        if config.CACHE_DIR:
            dirs += [d for d in Path(config.CACHE_DIR).rglob("*") if d.is_dir() and d.name == "sfu"]
    except Exception:  # pragma: no cover
        pass
    for d in dirs:
        stamp = d / "wgref_sfu_sources.sha256"
        try:
            if stamp.exists() and stamp.read_text() == digest:
                continue
            for f in list(d.glob("*.nbi")) + list(d.glob("*.nbc")):
                f.unlink(missing_ok=True)
            d.mkdir(parents=True, exist_ok=True)
            stamp.write_text(digest)
        except OSError:  # a read-only install: numba's cache is elsewhere (refmodel._numba_cache)
            pass


_drop_stale_cache()

from .forms import SFU_FORMS, SfuForm, parse_sfu  # noqa: E402

__all__ = ["SFU_FORMS", "SfuForm", "parse_sfu"]
