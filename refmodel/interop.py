"""Accept PyTorch tensors and cupy arrays wherever refmodel takes numpy arrays.

Nothing here imports torch or cupy: an object is recognised by the module its type
comes from, and only then is that framework's own API used (it is already imported,
since the caller made the object).  CPU tensors convert without a copy (a bit view:
``torch.float8_e4m3fn`` -> ``ml_dtypes.float8_e4m3fn``, ``torch.bfloat16`` ->
``ml_dtypes.bfloat16``); GPU tensors and cupy arrays are copied to the host.

``like=`` on :func:`to_framework` converts a numpy result back into the caller's
framework (same device as the given object).
"""

from __future__ import annotations

import sys

import functools
from typing import Any

import ml_dtypes
import numpy as np

_TORCH_TO_NUMPY = {
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2,
    "bfloat16": ml_dtypes.bfloat16,
}
# same-width integer views torch can produce for dtypes numpy lacks
_VIEW = {"float8_e4m3fn": "uint8", "float8_e5m2": "uint8", "bfloat16": "int16"}


def _framework(x: Any) -> str | None:
    mod = type(x).__module__.split(".")[0]
    if mod == "torch" and hasattr(x, "detach"):
        return "torch"
    if mod == "cupy" and hasattr(x, "get"):
        return "cupy"
    return None


def as_numpy(x: Any) -> Any:
    """numpy view (or host copy) of a torch tensor / cupy array; anything else unchanged."""
    fw = _framework(x)
    if fw is None:
        return x
    if fw == "cupy":
        return x.get()
    t = x.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.is_conj():
        t = t.resolve_conj()
    name = str(t.dtype).replace("torch.", "")
    if name in _TORCH_TO_NUMPY:
        torch = sys.modules["torch"]  # loaded by the caller, who made a torch tensor

        raw = t.contiguous().view(getattr(torch, _VIEW[name])).numpy()
        return raw.view(_TORCH_TO_NUMPY[name])
    return t.numpy()


def to_framework(result: np.ndarray, like: Any) -> Any:
    """Convert a numpy result into ``like``'s framework (and device); numpy stays numpy."""
    fw = _framework(like)
    if fw is None or not isinstance(result, np.ndarray):
        return result
    # the caller's framework is already loaded (``like`` is one of its arrays): take it from
    # sys.modules instead of importing it, so refmodel never imports cupy or torch itself
    if fw == "cupy":
        cupy = sys.modules["cupy"]

        if result.dtype in (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2),
                            np.dtype(ml_dtypes.bfloat16)):
            return cupy.asarray(result.view(np.uint8 if result.dtype.itemsize == 1 else np.uint16))
        return cupy.asarray(result)
    torch = sys.modules["torch"]

    for name, npdt in _TORCH_TO_NUMPY.items():
        if result.dtype == np.dtype(npdt):
            raw = torch.from_numpy(np.ascontiguousarray(result).view(_VIEW[name]))
            return raw.view(getattr(torch, name)).to(like.device)
    if result.dtype == np.uint16:  # torch has uint16 only recently; keep the bits in int16
        return torch.from_numpy(result.astype(np.int32)).to(like.device)
    if result.dtype == np.uint32:
        return torch.from_numpy(result.astype(np.int64)).to(like.device)
    return torch.from_numpy(np.ascontiguousarray(result)).to(like.device)


def accepts_frameworks(fn):
    """Decorator: convert torch/cupy positional and keyword arguments to numpy first.

    With ``as_framework=True`` the result is returned in the framework of the first
    such argument (numpy otherwise)."""

    @functools.wraps(fn)
    def wrapper(*args, as_framework: bool = False, **kwargs):
        from .validate import check_flag

        as_framework = check_flag("as_framework", as_framework)
        like = next((a for a in list(args) + list(kwargs.values()) if _framework(a)), None)
        args = tuple(as_numpy(a) for a in args)
        kwargs = {k: as_numpy(v) for k, v in kwargs.items()}
        out = fn(*args, **kwargs)
        if as_framework and like is not None:
            if isinstance(out, tuple):
                return tuple(to_framework(o, like) for o in out)
            return to_framework(out, like)
        return out

    return wrapper
