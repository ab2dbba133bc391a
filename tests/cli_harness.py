"""Shared by the adversarial test files: the CLI run in-process (``run_cli``, ``check_cli``,
``refused``) and the example-count scale (``n``).  The ``no_clobber`` guard and the ``outside``
file are fixtures in tests/conftest.py."""

from __future__ import annotations

import contextlib
import io
import os
import warnings

from wgref.cli import main

SCALE = 20 if os.environ.get("HYPOTHESIS_PROFILE") == "thorough" else 1


def n(k: int) -> int:
    return k * SCALE


def run_cli(argv, *, strict_stdout: bool = False):
    """(rc, stdout, stderr) of the CLI in-process.  ``strict_stdout``: stdout and stderr are
    strict UTF-8 streams, as a terminal's are (a surrogate printed raw raises there)."""
    if strict_stdout:
        ob, eb = io.BytesIO(), io.BytesIO()
        out = io.TextIOWrapper(ob, encoding="utf-8", errors="strict", write_through=True)
        err = io.TextIOWrapper(eb, encoding="utf-8", errors="strict", write_through=True)
    else:
        out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
    if strict_stdout:
        out.flush(), err.flush()
        return rc, ob.getvalue().decode(), eb.getvalue().decode()
    return rc, out.getvalue(), err.getvalue()


def check_cli(argv, **kw):
    rc, out, err = run_cli(argv, **kw)
    assert rc in (0, 1, 2), (argv, rc, err)
    assert "Traceback" not in err and "Traceback" not in out, (argv, err)
    if rc == 2:
        assert err.count("\n") == 1 and err.strip(), f"{argv}: stderr must be one line, got {err!r}"
    return rc, out, err


def refused(argv, *words, **kw):
    rc, out, err = check_cli(argv, **kw)
    assert rc == 2, (argv, rc, out, err)
    for w in words:
        assert w in err, (argv, err)
    return err
