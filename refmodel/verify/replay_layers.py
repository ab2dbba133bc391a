"""Replayer of the whole-layer calls (kind ``layer_calls``, ``python -m gpu.record.layers``): every
``torch._scaled_mm`` mode, cuBLAS epilogues and batches, torchao's float8 layers, recorded on the H200
as a spec (inputs rebuilt from its seed, :mod:`refmodel.verify.layer_calls`), the kernels that ran and
the sha256 of the outputs.

A call that ran must be reproduced bit for bit (same digest) by its golden model given the kernel
names — or refused by the model in one sentence (a mode, kernel or dtype it does not know), never
silently wrong; a call torch itself refused must be refused by the model too.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..errors import WgrefError
from .replay import Result, replayer


@replayer("layer_calls")
def replay_layer_calls(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    from . import layer_calls as L

    digests = arrays["digests"]
    total = Result(0, 0)
    refused, torch_refused, compared = 0, 0, 0
    records = L.records_of(arrays) if "records" in arrays else meta["records"]
    for i, rec in enumerate(records):
        spec = rec["spec"]
        if not full and i % 8:
            continue
        label = L.label(spec)
        if rec["status"] != "ok":
            torch_refused += 1
            try:
                L.golden(spec, None)
            except (WgrefError, ImportError):
                total.add(Result(1, 0))
            else:
                total.add(Result(1, 1, [f"{label}: torch refused it ({rec['error'][:80]}), the model returns bits"]))
            continue
        try:
            with warnings.catch_warnings():       # an undetermined split count warns; the digest decides
                warnings.simplefilter("ignore")
                outs = L.golden(spec, rec["kernels"])
        except WgrefError:
            refused += 1
            continue
        compared += 1
        size = L.output_size(spec)
        if L.digest(*outs) != bytes(digests[i]).hex():
            total.add(Result(size, size, [f"{label}: the golden model's bits differ from the H200's (digest)"]))
        else:
            total.add(Result(size, 0))
    total.scope = (f"{compared} calls compared, {refused} refused by the model, {torch_refused} refused by torch "
                   f"(the model refuses them too){'' if full else '; every 8th call (quick)'}")
    total.complete = full
    return total
