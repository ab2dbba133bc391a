"""Fixed, printable seeds for randomized tests.

``stable_seed(*parts)`` is zlib.crc32 of the parts' repr: the same on every run and every
machine (Python's ``hash()`` of a str is salted per process).  ``rng_for(request, *parts)``
also records the seed on the test item; conftest.py prints it when the test fails.
"""

from __future__ import annotations

import zlib

import numpy as np


def stable_seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def rng_for(request, *parts) -> np.random.Generator:
    seed = stable_seed(*parts)
    request.node.user_properties.append(("seed", f"{seed} = zlib.crc32({repr(parts)!r})"))
    return np.random.default_rng(seed)
