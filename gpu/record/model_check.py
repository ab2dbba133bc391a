"""Recorders compare the hardware with refmodel on the spot; without the model they must stop.

:func:`require_model` imports the refmodel function a recorder compares against and turns
a missing module into one :class:`ModelMissingError` line (the recorders exit 2 with it),
before any GPU work or fixture writing starts.
"""

from __future__ import annotations

import importlib
from typing import Callable

from refmodel.errors import WgrefError


class ModelMissingError(WgrefError, RuntimeError):
    """The refmodel function a recorder compares the hardware with cannot be imported."""


def require_model(module: str, name: str) -> Callable:
    """``module.name`` or :class:`ModelMissingError`: a recorder never records what it cannot compare."""
    try:
        mod = importlib.import_module(module)
    except ImportError as e:  # ModuleNotFoundError included
        raise ModelMissingError(f"cannot compare with the model: {module} does not import "
                                f"({e.__class__.__name__}: {e}); nothing recorded") from None
    fn = getattr(mod, name, None)
    if fn is None:
        raise ModelMissingError(f"cannot compare with the model: {module} has no {name}; nothing recorded")
    return fn
