"""Run one recording step in a fresh child process with a fresh Inductor and Triton cache, so that no autotune
pick or compiled kernel of an earlier step is reused (gpu.record.inductor, gpu.record.attention)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional


def run_fresh(module: str, args: list[str], *, label: str, timeout: float, error_file: Path) -> Optional[dict]:
    """``python -m module *args`` in a child with its own ``TORCHINDUCTOR_CACHE_DIR`` and ``TRITON_CACHE_DIR``:
    the JSON of its last stdout line, or None when it timed out or failed (said on stdout under ``label``;
    a failure's stderr kept in ``error_file``)."""
    cache = tempfile.mkdtemp(prefix=f"{label}_")
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, TRITON_CACHE_DIR=cache + "_triton")
    try:
        r = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=timeout,
                           env=env)
    except subprocess.TimeoutExpired:
        print(f"{label}: timed out", flush=True)
        return None
    if r.returncode != 0:
        print(f"{label}: failed: {r.stderr[-3000:]}", flush=True)
        Path(error_file).write_text(r.stderr[-30000:])
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])
