"""Reading and writing wgref's files safely (the ground of refmodel).

Writing -- one writer for every output:

* :func:`check_output` refuses an output path that is not a regular file or a new path
  (a directory, a device such as ``/dev/null``, a FIFO, a socket, any symlink), whose
  directory does not exist, or that is the same file (same inode) as one of the command's
  inputs.  Symlinks are refused outright: replacing one would cut the link, following it
  could write anywhere.
* :func:`atomic_write` (and :func:`atomic_write_text`, :func:`save_npz`) check the path,
  write a temporary file in the target's directory, fsync it and move it into place with
  ``os.replace``, so a killed process leaves the previous file or none, never a partial
  one.  A new file gets the mode any new file gets (``0o666 & ~umask``); an existing one
  keeps its permission bits.

Reading -- bounded and lazy:

* :func:`load_npy` / :func:`load_npz`: an empty, truncated, corrupt or non-numpy file,
  a directory or a missing path gives one :class:`~refmodel.errors.InputError` sentence.
  The npy header is read first and an array whose header declares more than
  the limit ``'array_bytes'`` is refused before anything is allocated; :func:`load_npz` returns a
  mapping that reads a member only when it is looked up, so a member a command does not
  need (a zip bomb, say) is never decompressed.
* :func:`loads_json`: JSON text bounded in size and nesting depth (one error, never a
  RecursionError).

The size limits are rows of :mod:`refmodel.limits`.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import threading
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from .errors import InputError

# ----------------------------------------------------------------------------- limits
# The largest files wgref reads, checked before anything is allocated: the rows
# 'array_bytes', 'npz_members', 'json_depth', 'json_bytes' of refmodel.limits (the one table
# of the model's size limits, with their reasons).  The biggest real input is far below each
# (the largest fixture member is 4 MB, the most members 54, the largest manifest 380 KB
# nested 7 deep); the limits only stop files that are absurd.
from .limits import MAX_ARRAY_BYTES, MAX_JSON_BYTES, MAX_JSON_DEPTH, MAX_NPZ_MEMBERS

MAX_ARRAY_DIMS = 32  # dimensions of one array (numpy itself allows 64; wgref's arrays have <= 4)

# what numpy / zipfile raise on files that are not what they claim to be
_READ_ERRORS = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, KeyError,
                UnicodeDecodeError, RuntimeError, NotImplementedError, IndexError, TypeError,
                SyntaxError, MemoryError, OverflowError, RecursionError)


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
    if isinstance(e, MemoryError):
        return "it does not fit in memory"
    if isinstance(e, RecursionError):
        return "it is nested too deeply"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return _short(text, 120).rstrip(".")


def printable(path: Any, n: int = 80) -> str:
    """``path`` (or any user text) as printable text cut to ``n`` characters: unpaired
    surrogates (undecodable bytes of a file name) and control characters backslash-escaped,
    so that printing it never raises UnicodeEncodeError and never moves the terminal."""
    t = os.fspath(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
    if isinstance(t, bytes):
        t = t.decode("utf-8", "surrogateescape")
    t = t.encode("utf-8", "backslashreplace").decode("utf-8")
    t = "".join(c if c.isprintable() else repr(c)[1:-1] for c in t)
    return t if len(t) <= n else t[: n - 3] + "..."


_short = printable


def check_output(path: str | Path, inputs=()) -> Path:
    """Refuse an output path that is not a regular file or a new path, or is one of ``inputs``.

    Refused, each with one :class:`InputError` sentence naming the path and the rule:
    a directory, a device (``/dev/null``), a FIFO, a socket, any symlink (outputs are
    never written through a symlink: replacing it would cut the link, following it could
    write outside the target's directory), a missing parent directory, and a path that is
    the same file (same ``st_dev``/``st_ino``) as one of ``inputs``.
    """
    if isinstance(path, (str, bytes)) and not path:
        raise InputError("cannot write to an empty path: an output needs a file name")
    path = Path(path)
    shown = _short(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except (OSError, ValueError) as e:
        raise InputError(f"cannot write {shown}: {_reason(e)}") from None
    if st is not None:
        m = st.st_mode
        if stat.S_ISLNK(m):
            raise InputError(f"cannot write {shown}: outputs must not be symlinks")
        if stat.S_ISDIR(m):
            raise InputError(f"cannot write {shown}: it is a directory")
        if not stat.S_ISREG(m):
            kind = ("a character device" if stat.S_ISCHR(m) else "a block device" if stat.S_ISBLK(m)
                    else "a FIFO" if stat.S_ISFIFO(m) else "a socket" if stat.S_ISSOCK(m)
                    else "not a regular file")
            raise InputError(f"cannot write {shown}: it is {kind}, and outputs must be regular files "
                             "or new paths")
        for i in inputs or ():
            if i is None:
                continue
            try:
                si = os.stat(i)
            except (OSError, ValueError, TypeError):
                continue
            if (si.st_dev, si.st_ino) == (st.st_dev, st.st_ino):
                raise InputError(f"cannot write {shown}: it is the same file as the input "
                                 f"{_short(i)}, and an output must not overwrite an input")
    else:
        d = path.parent if str(path.parent) else Path(".")
        try:
            dst = os.stat(d)
        except FileNotFoundError:
            raise InputError(f"cannot write {shown}: its directory {_short(d)} does not exist") from None
        except (OSError, ValueError) as e:
            raise InputError(f"cannot write {shown}: {_reason(e)}") from None
        if not stat.S_ISDIR(dst.st_mode):
            raise InputError(f"cannot write {shown}: {_short(d)} is not a directory")
    return path


# ----------------------------------------------------------------------------- writing

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask, read without changing it where /proc says it (Linux), else read
    by setting and restoring it under a lock."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        old = os.umask(0o022)
        os.umask(old)
    return old


def _new_file_mode(path: Path) -> int:
    """Permission bits the file written at ``path`` gets: an existing regular file's own
    (as ``open(path, "w")`` keeps them), else ``0o666 & ~umask``."""
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode) & 0o777
    except OSError:
        pass
    return 0o666 & ~current_umask()


def atomic_write(path: str | Path, write: Callable[[Any], None], *, mode: str = "wb",
                 inputs: Iterable[str | Path] = (), encoding: str = "utf-8") -> Path:
    """Call ``write(fileobj)`` on a temporary file next to ``path``, then move it over ``path``.

    ``path`` is checked first (:func:`check_output`, with ``inputs``); the temporary file is
    fsynced before the move and gets the mode of a normally written file.
    """
    path = check_output(path, inputs)
    shown = _short(path)
    d = path.parent if str(path.parent) else Path(".")
    perm = _new_file_mode(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:100]}.", suffix=".tmp", dir=d)
    except OSError as e:
        raise InputError(f"cannot write {shown}: {_reason(e)}") from None
    try:
        try:
            os.fchmod(fd, perm)
        except OSError:
            pass
        kw = {"encoding": encoding} if "b" not in mode else {}
        with os.fdopen(fd, mode, **kw) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        # checked again just before the move: the target must still be what check_output saw
        check_output(path, inputs)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise InputError(f"cannot write {shown}: {_reason(e)}") from None
        if isinstance(e, UnicodeEncodeError):
            raise InputError(f"cannot write {shown}: the text is not valid Unicode "
                             "(it holds an unpaired surrogate)") from None
        raise
    try:  # the rename itself durable too (best effort: not every file system allows it)
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return path


def atomic_write_text(path: str | Path, text: str, *, inputs: Iterable[str | Path] = ()) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through :func:`atomic_write`."""
    return atomic_write(path, lambda f: f.write(text), mode="w", inputs=inputs)


def save_npz(path: str | Path, **arrays: np.ndarray) -> Path:
    """``np.savez_compressed`` to exactly ``path`` (no '.npz' appended), atomically.

    (A command whose inputs must not be overwritten calls ``check_output(path, inputs)``
    first: every keyword here is an array name.)
    """
    return atomic_write(path, lambda f: np.savez_compressed(f, **arrays))


# ----------------------------------------------------------------------------- reading

def _header_of(f, where: str) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """(shape, fortran_order, dtype, data bytes) from an npy header, checked against the
    limits before anything is allocated."""
    fmt = np.lib.format
    version = fmt.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = fmt.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, fortran, dtype = fmt.read_array_header_2_0(f)
    elif version == (3, 0) and hasattr(getattr(np.lib, "_format_impl", None), "_read_array_header"):
        shape, fortran, dtype = np.lib._format_impl._read_array_header(f, version)  # utf-8 header
    else:
        raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
    if not isinstance(shape, tuple) or len(shape) > MAX_ARRAY_DIMS:
        raise InputError(f"{where} declares an array of more than {MAX_ARRAY_DIMS} dimensions "
                         f"(limit MAX_ARRAY_DIMS)")
    if dtype.hasobject:
        raise InputError(f"{where} holds Python objects (pickles), which wgref never loads")
    if any(int(s) < 0 for s in shape):
        raise InputError(f"{where} declares a negative dimension in shape {_short(str(shape), 60)}")
    count = 1
    for s in shape:
        count *= int(s)
    nbytes = count * int(dtype.itemsize)
    if nbytes > MAX_ARRAY_BYTES or count > MAX_ARRAY_BYTES:
        raise InputError(f"{where} declares an array of shape {_short(str(shape), 60)} {dtype.str} "
                         f"({nbytes} bytes), more than the limit 'array_bytes' = {MAX_ARRAY_BYTES} bytes")
    return shape, bool(fortran), dtype, nbytes


def _read_exact(f, n: int) -> bytearray:
    """Up to ``n`` bytes of ``f`` into one buffer (shorter only at the end of the stream)."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = f.readinto(view[got: got + (1 << 24)])
        if not k:
            break
        got += k
    view.release()
    if got < n:
        del buf[got:]
    return buf


def _read_npy_stream(f, where: str, size: int | None = None) -> np.ndarray:
    """One array from an open npy stream: the header checked first, then exactly the data
    it declares (and nothing after it)."""
    shape, fortran, dtype, nbytes = _header_of(f, where)
    if size is not None and size - f.tell() < nbytes:
        raise EOFError
    data = _read_exact(f, nbytes)
    if len(data) != nbytes:
        raise EOFError
    if f.read(1):
        raise InputError(f"{where} holds more data than its header declares")
    if not nbytes:  # no elements, or elements of no bytes
        return np.zeros(shape, dtype, order="F" if fortran else "C")
    arr = np.frombuffer(data, dtype=dtype)
    if fortran:
        return arr.reshape(shape[::-1]).transpose()
    return arr.reshape(shape)


def _open_regular(path: str | Path):
    """``open(path, "rb")`` of a regular file (checked before opening: opening a FIFO would
    block, reading /dev/zero would never end), and its size."""
    p = Path(path)
    st = os.stat(p)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(21, "Is a directory", str(p))
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"cannot read {_short(path)}: it is not a regular file")
    f = open(p, "rb")
    st = os.fstat(f.fileno())
    if not stat.S_ISREG(st.st_mode):
        f.close()
        raise InputError(f"cannot read {_short(path)}: it is not a regular file")
    return f, st.st_size


def load_npy(path: str | Path) -> np.ndarray:
    """One array from a .npy file (no pickles; the header's size checked before reading)."""
    shown = _short(path)
    try:
        f, size = _open_regular(path)
        with f:
            magic = f.read(6)
            f.seek(0)
            if magic[:4] == b"PK\x03\x04":
                raise InputError(f"{shown} must hold one array (.npy), not an .npz archive")
            if not magic:
                raise EOFError
            if magic != b"\x93NUMPY":
                raise InputError(f"cannot read {shown}: it is not a .npy file (no NUMPY header)")
            return _read_npy_stream(f, shown, size)
    except InputError:
        raise
    except _READ_ERRORS as e:
        raise InputError(f"cannot read {shown}: {_reason(e)}") from None


def _zip_entry_count(f) -> int | None:
    """The member count the archive's end record declares (read before the member list is),
    or None where it does not say (no end record found, zip64)."""
    try:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        tail = min(size, (1 << 16) + 22)
        f.seek(size - tail)
        buf = f.read(tail)
    except OSError:
        return None
    i = buf.rfind(b"PK\x05\x06")
    if i < 0 or i + 22 > len(buf):
        return None
    n = int.from_bytes(buf[i + 10: i + 12], "little")
    return None if n == 0xFFFF else n


class NpzArchive(Mapping):
    """The arrays of an .npz archive, each read (and checked) only when it is looked up.

    Keys are the member names without ``.npy`` (as ``np.load`` gives them).  The member
    list is read when the archive is opened; a member's data when it is first looked up
    (then kept).  A corrupt, oversized or non-array member raises one InputError then.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._shown = _short(path)
        self._cache: dict[str, np.ndarray] = {}
        f, _ = _open_regular(path)
        with f:
            if f.read(4) not in (b"PK\x03\x04", b"PK\x05\x06"):  # members, or an empty archive
                f.seek(0)
                if f.read(6) == b"\x93NUMPY":
                    raise InputError(f"{self._shown} must be an .npz archive, not a single array (.npy)")
                f.seek(0)
                if not f.read(1):
                    raise EOFError
                raise zipfile.BadZipFile("not a zip file")
            n = _zip_entry_count(f)
            if n is not None and n > MAX_NPZ_MEMBERS:
                raise InputError(f"{self._shown} has {n} members, more than the limit "
                                 f"'npz_members' = {MAX_NPZ_MEMBERS}")
            f.seek(0)
            with zipfile.ZipFile(f) as z:
                infos = z.infolist()
        if len(infos) > MAX_NPZ_MEMBERS:
            raise InputError(f"{self._shown} has {len(infos)} members, more than the limit "
                             f"'npz_members' = {MAX_NPZ_MEMBERS}")
        self._members: dict[str, str] = {}
        for i in infos:
            key = i.filename[:-4] if i.filename.endswith(".npy") else i.filename
            if key in self._members:
                raise InputError(f"{self._shown} has two members named {_short(key, 40)!r}")
            self._members[key] = i.filename

    @property
    def files(self) -> list[str]:
        return list(self._members)

    def __iter__(self) -> Iterator[str]:
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, key: object) -> bool:
        return key in self._members

    def __getitem__(self, key: str) -> np.ndarray:
        if key in self._cache:
            return self._cache[key]
        if key not in self._members:
            raise KeyError(key)
        name = self._members[key]
        where = f"{self._shown} member {_short(key, 40)!r}"
        if not name.endswith(".npy"):
            raise InputError(f"{where} is not an array (.npy member)")
        try:
            with zipfile.ZipFile(self.path) as z, z.open(name) as f:
                # the member's declared size bounds what is read (nothing allocated beyond it)
                arr = _read_npy_stream(f, where, z.getinfo(name).file_size)
        except InputError:
            raise
        except _READ_ERRORS as e:
            raise InputError(f"cannot read {where}: {_reason(e)}") from None
        self._cache[key] = arr
        return arr

    def __repr__(self) -> str:
        return f"NpzArchive({self._shown!r}, members={self.files!r:.200})"


def load_npz(path: str | Path) -> NpzArchive:
    """The arrays of an .npz archive as a mapping that reads a member on first access.

    Opening checks the archive (its member list); a corrupt or oversized member raises
    one InputError when it is looked up, and a member never looked up is never read.
    """
    try:
        return NpzArchive(path)
    except InputError:
        raise
    except _READ_ERRORS as e:
        raise InputError(f"cannot read {_short(path)}: {_reason(e)}") from None


# ----------------------------------------------------------------------------- JSON

def json_depth(obj: Any) -> int:
    """Nesting depth of parsed JSON (iteratively: any depth, no recursion)."""
    depth, stack = 0, [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if isinstance(o, dict):
            depth = max(depth, d)
            stack.extend((v, d + 1) for v in o.values())
        elif isinstance(o, list):
            depth = max(depth, d)
            stack.extend((v, d + 1) for v in o)
    return depth


def loads_json(text: str | bytes, where: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse JSON text from ``where``: one InputError for invalid, oversized ('json_bytes')
    or too deeply nested (``max_depth``, default 'json_depth') text, never a RecursionError."""
    if len(text) > MAX_JSON_BYTES:
        raise InputError(f"{_short(where)} is {len(text)} bytes, more than the limit "
                         f"'json_bytes' = {MAX_JSON_BYTES} bytes")
    try:
        obj = json.loads(text)
    except RecursionError:
        obj = None
        deep = True
    except (ValueError, TypeError) as e:
        raise InputError(f"{_short(where)} is not valid JSON: {_reason(e)}") from None
    else:
        deep = json_depth(obj) > max_depth
    if deep:
        raise InputError(f"{_short(where)} nests JSON deeper than the limit 'json_depth' = {max_depth}")
    from .validate import check_json_text

    return check_json_text(obj, _short(where), text=text if isinstance(text, str) else None)


def read_json(path: str | Path, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """:func:`loads_json` of a file (size checked before reading it)."""
    shown = _short(path)
    try:
        f, size = _open_regular(path)
        with f:
            if size > MAX_JSON_BYTES:
                raise InputError(f"{shown} is {size} bytes, more than the limit "
                                 f"'json_bytes' = {MAX_JSON_BYTES} bytes")
            raw = f.read(MAX_JSON_BYTES + 1)
        text = raw.decode("utf-8")
    except InputError:
        raise
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read {shown}: {_reason(e)}") from None
    return loads_json(text, str(path), max_depth=max_depth)
