"""What the command modules share: the command registry, usage errors, strict JSON output,
loading an input array and writing a file atomically."""

from __future__ import annotations

import argparse
import sys
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


def shown(text) -> str:
    """``text`` (a path, a name from argv) safe to print on any terminal: unpaired surrogates
    (undecodable bytes of a file name) and control characters backslash-escaped."""
    from refmodel.fileio import printable

    return printable(text, 1 << 20)


def excerpt(text, n: int = 60) -> str:
    """A short quoted excerpt of user input for an error message (at most ``n`` + 2 chars)."""
    from refmodel.fileio import printable

    return repr(printable(text, n))


def number_text(text: str, what: str) -> str:
    """The one rule for numbers typed on the command line: Python's digit separators are not part of a
    number here (float('1_0') is 10.0, int('0x1_0', 16) is 16 — a typo must not become a value)."""
    if "_" in text:
        raise UsageError(f"{what}: '_' is not part of a number here (write 10, not 1_0), got {excerpt(text)}")
    return text


def input_path(spec: str) -> str:
    """The file part of an input argument (``FILE.npz:key`` -> ``FILE.npz``)."""
    return spec.split(".npz:", 1)[0] + ".npz" if ".npz:" in spec else spec


def check_output(path: str, *inputs: str | None):
    """Refuse ``path`` as an output (not a regular file or a new path, a symlink, or one of
    the command's ``inputs``) before any work is done; returns the path."""
    from refmodel.fileio import check_output as _check

    return _check(path, [input_path(i) for i in inputs if i])


def load_array(path: str, fmt: str | None = None) -> np.ndarray:
    """One array from ``FILE.npy`` or ``FILE.npz:key`` (only that member is read).

    An array of an unnamed numpy type -- numpy saves ml_dtypes' bfloat16 / float8 arrays as
    void (``|V2``, ``|V1``) -- is read as the raw codes (unsigned integers of its width)
    when ``fmt`` names a format of that width, as ``wgref golden`` reads its inputs.
    """
    from refmodel.fileio import load_npy, load_npz

    if path.endswith(".npz"):
        raise UsageError(f"{shown(path)}: give a .npy file (one array), or NAME.npz:key")
    if ".npz:" in path:
        f, key = path.split(".npz:", 1)
        z = load_npz(f + ".npz")
        if key not in z:
            names = ", ".join(shown(k) for k in z) or "none"
            raise UsageError(f"{shown(f)}.npz has no array {shown(key)!r}; it has {names[:200]}")
        x = z[key]
    else:
        x = load_npy(path)
    if fmt is not None and x.dtype.kind == "V":
        from refmodel.numerics.formats import format_spec

        bits = format_spec(fmt).bits
        if 8 * x.dtype.itemsize != bits or bits not in (8, 16, 32, 64):
            raise UsageError(f"{shown(path)} holds {8 * x.dtype.itemsize}-bit values of an unnamed type, "
                             f"which cannot be {fmt} ({bits}-bit) codes")
        x = np.ascontiguousarray(x).view(np.dtype(f"u{bits // 8}"))
    return x


def write_text(path: str, text: str, *, inputs=()) -> None:
    """Write ``text`` to ``path`` with the one writer (:func:`refmodel.fileio.atomic_write_text`):
    checked (not a device, FIFO, directory, symlink or one of ``inputs``), atomic, the mode of
    a normal file."""
    from refmodel.fileio import atomic_write_text

    atomic_write_text(path, text, inputs=[input_path(i) for i in inputs if i])


def emit_text(output, text: str, what: str) -> int:
    """``text`` to ``output`` (``-o``) through :func:`write_text`, saying ``wrote PATH (what)``, or to stdout
    without one; the command's exit status (0)."""
    if output is not None:
        write_text(output, text)
        print(f"wrote {shown(output)} ({what})")
    else:
        sys.stdout.write(text)
    return 0
