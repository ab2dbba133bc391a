"""Run GPU work in a child process so a device fault cannot kill the caller's CUDA context.

A wgmma that reads past its shared memory raises ``cudaErrorIllegalAddress``; after
that the process's CUDA context is unusable.  :class:`IsolatedRunner` keeps one
worker process (multiprocessing, 'spawn': no CUDA state is inherited), sends it
``(module, function, args, kwargs)`` and returns the result (numpy arrays pickle
across).  When a call fails with anything but a wgref input error, or times out,
the worker is ended and a fresh one starts on the next call; the caller gets one
:class:`DeviceError` (or the worker's own wgref error) carrying the message.
"""

from __future__ import annotations

import atexit
import importlib
import multiprocessing as mp
import traceback
from typing import Any

from refmodel import errors as _errors
from refmodel.errors import DeviceError, WgrefError

DEFAULT_TIMEOUT = 600.0


def _worker(conn) -> None:
    """Child loop: run requested functions until told to stop or a fatal error."""
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        module, func, args, kwargs = msg
        try:
            fn = getattr(importlib.import_module(module), func)
            conn.send(("ok", fn(*args, **kwargs)))
        except WgrefError as e:  # bad input: the context is fine, keep going
            conn.send(("err", type(e).__name__, str(e), False))
        except BaseException as e:  # device fault or bug: report, then die
            tb = traceback.format_exc(limit=4)
            try:
                conn.send(("err", type(e).__name__, f"{e}\n{tb}", True))
            finally:
                return


class IsolatedRunner:
    """One persistent spawn-started worker; restarted after a fatal error or a timeout."""

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = float(timeout)
        self._ctx = mp.get_context("spawn")
        self._proc = None
        self._conn = None
        self.restarts = 0

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker, args=(child,), daemon=True, name="wgref-gpu-worker")
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent

    def _stop(self, *, kill: bool = False) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            try:
                if not kill:
                    conn.send(None)
            except (OSError, ValueError):
                pass
            conn.close()
        if proc is not None:
            proc.join(timeout=0 if kill else 10)
            if proc.is_alive():
                proc.kill()  # only the worker this runner started
                proc.join(timeout=10)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def call(self, module: str, func: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """``module.func(*args, **kwargs)`` in the worker; raise DeviceError (or the wgref error) on failure."""
        if not self.alive():
            if self._proc is not None:
                self._stop(kill=True)
                self.restarts += 1
            self._start()
        conn = self._conn
        limit = self.timeout if timeout is None else float(timeout)
        try:
            conn.send((module, func, args, kwargs))
            ready = conn.poll(limit)
        except (OSError, ValueError) as e:
            self._stop(kill=True)
            raise DeviceError(f"isolated worker unreachable ({e}); it will be restarted") from None
        if not ready:
            self._stop(kill=True)
            raise DeviceError(f"{module}.{func} did not finish within {limit:g} s in the isolated worker; "
                              f"worker killed")
        try:
            reply = conn.recv()
        except (EOFError, OSError):
            code = self._proc.exitcode if self._proc is not None else None
            self._stop(kill=True)
            raise DeviceError(f"isolated worker died during {module}.{func} (exit code {code})") from None
        if reply[0] == "ok":
            return reply[1]
        _, cls_name, message, fatal = reply
        if fatal:
            self._stop(kill=True)
        cls = getattr(_errors, cls_name, None)
        if isinstance(cls, type) and issubclass(cls, WgrefError) and not fatal:
            raise cls(message)
        raise DeviceError(f"{cls_name} in isolated {module}.{func}: {message.strip()}")

    def try_call(self, module: str, func: str, *args: Any, **kwargs: Any) -> tuple[Any, str | None]:
        """Like :meth:`call` but returns ``(result, None)`` or ``(None, error string)``."""
        try:
            return self.call(module, func, *args, **kwargs), None
        except WgrefError as e:
            return None, f"{type(e).__name__}: {e}"

    def close(self) -> None:
        self._stop()


_DEFAULT: IsolatedRunner | None = None


def default_runner() -> IsolatedRunner:
    """The process-wide runner used by ``run_wgmma(..., isolate=True)``."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = IsolatedRunner()
        atexit.register(_DEFAULT.close)
    return _DEFAULT
