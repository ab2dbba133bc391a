"""Replayers of the library fixtures whose schedules are picked by kernel name: cuSPARSELt calls
(kind ``cusparselt_calls``, ``python -m gpu.record.cusparselt``), split-K ``torch._scaled_mm`` calls
(kind ``scaled_mm_split``, ``python -m gpu.record.cublas --explore-split``) and the kernel map
(kind ``kernel_map``, ``python -m gpu.record.kernel_map``), all recorded on the H200.

A call stored with ``expect`` "match" must be reproduced bit for bit by the golden model given the
kernel names torch's profiler showed; one stored with "refused" must still be refused (the model
does not know that split) — and the model's default schedule must indeed miss its recorded bits, or
warn, so it never returns them as if they were verified.
"""

from __future__ import annotations

import warnings
from typing import Any

import ml_dtypes
import numpy as np

from ..dtypes import bits_of
from ..errors import InputError
from .fixtures import FixtureError
from .replay import Result, _count, meta_error, replayer

_OD = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}


def _rebuilt(c: dict[str, Any], a, b) -> None:
    from .seeded import matrix_sha256

    if (matrix_sha256(a), matrix_sha256(b)) != (c["a_sha256"], c["b_sha256"]):
        raise FixtureError(f"{c['name']}: the inputs rebuilt from seed {c['seed']} are not the recorded ones "
                           "(sha256 differs: numpy's Generator stream changed?)", short="inputs not reproducible")


def _refusal(label: str, run_kernel, run_default, want: np.ndarray) -> Result:
    """A "refused" call: the model with the kernel names refuses, and without them it warns (or its
    bits differ from the hardware's): never silently wrong."""
    try:
        run_kernel()
    except InputError:
        pass
    else:
        return Result(want.size, want.size, [f"{label}: the model no longer refuses this recorded split kernel"])
    from ..golden.kernel_regions import ScheduleWarning

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        d = run_default()
    warned = any(issubclass(x.category, ScheduleWarning) for x in w)
    if warned or np.count_nonzero(bits_of(d).view(want.dtype).reshape(-1) != want.reshape(-1)):
        return Result(want.size, 0)
    return Result(want.size, want.size, [f"{label}: refused with its kernel, yet silently matched without it"])


@replayer("cusparselt_calls")
def replay_cusparselt(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """cuSPARSELt calls against refmodel.golden.cusparselt_matmul(kernel=...) on the kept rows and columns."""
    from ..golden.cusparselt import cusparselt_matmul, cusparselt_schedule
    from .seeded import sparse_library_matrices

    total = Result(0, 0)
    for c in meta["calls"]:
        i = c["array"]
        want, rows, cols = arrays[f"d{i}"], arrays[f"rows{i}"], arrays[f"cols{i}"]
        if want.shape != (rows.size, cols.size):
            raise meta_error(f"{c['name']}: output {want.shape} is not {rows.size} rows x {cols.size} columns")
        a, b = sparse_library_matrices(c["seed"], c["dtype"], c["M"], c["N"], c["K"])
        _rebuilt(c, a, b)
        sub_a, sub_b = a[rows], b[:, cols]
        od = _OD[c["out"]]
        whole = rows.size == c["M"] and cols.size == c["N"]
        if c["expect"] == "refused":
            total.add(_refusal(c["name"], lambda: cusparselt_schedule(c["dtype"], c["M"], c["N"], c["K"],
                                                                      out_dtype=c["out"], kernel=c["kernels"]),
                               lambda: cusparselt_matmul(sub_a, sub_b, out_dtype=od), want))
            continue
        if whole:
            got = cusparselt_matmul(a, b, out_dtype=od, kernel=c["kernels"])
        else:
            sched = cusparselt_schedule(c["dtype"], c["M"], c["N"], c["K"], out_dtype=c["out"], kernel=c["kernels"])
            got = cusparselt_matmul(sub_a, sub_b, out_dtype=od, schedule=sched)
        total.add(_count(bits_of(got).view(want.dtype), want, c["name"], {}))
    return total


@replayer("scaled_mm_split")
def replay_scaled_mm_split(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """torch._scaled_mm calls in split-K shapes against refmodel.golden.torch_scaled_mm.scaled_mm(kernel=...)."""
    from ..golden.torch_scaled_mm import scaled_mm
    from .seeded import library_matrices

    total = Result(0, 0)
    for c in meta["calls"]:
        want = arrays[f"d{c['array']}"]
        a, b = library_matrices(c["seed"], "e4m3", c["M"], c["N"], c["K"], exp_range=tuple(c["exp_range"]), lim=c["lim"])
        _rebuilt(c, a, b)
        b_nk = np.ascontiguousarray(b.T)
        sa, sb = np.float32(c["scale_a"]), np.float32(c["scale_b"])

        def call(**kw):
            return scaled_mm(a, b_nk, sa, sb, out_dtype=c["out"], use_fast_accum=c["use_fast_accum"], **kw)
        if c["expect"] == "refused":
            total.add(_refusal(c["name"], lambda: call(kernel=c["kernels"]), call, want))
            continue
        total.add(_count(bits_of(call(kernel=c["kernels"])).view(want.dtype), want, c["name"], {}))
    return total


@replayer("kernel_map")
def replay_kernel_map(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """The kernel classes the golden models warn from (refmodel.golden.kernel_regions_data) are the
    recorded ones, shape by shape."""
    from ..golden.kernel_regions_data import CLASSES, GRID_K, GRID_MN

    if tuple(meta["MN"]) != GRID_MN or tuple(meta["K"]) != GRID_K:
        return Result(1, 1, ["the grid of refmodel.golden.kernel_regions_data is not the recorded one"])
    total = Result(0, 0)
    for op in meta["ops"]:
        want = np.asarray(arrays[op], np.uint8).reshape(-1)
        got = np.frombuffer(CLASSES.get(op, "").encode(), np.uint8) - ord("0") if op in CLASSES else np.zeros(0, np.uint8)
        if got.size != want.size:
            total.add(Result(want.size, want.size, [f"{op}: refmodel has no kernel classes for this op"]))
            continue
        total.add(_count(got, want, f"kernel map {op}", {}))
    return total


@replayer("inferred_schedule")
def replay_inferred_schedule(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """A schedule inferred on the H200 (``python -m gpu.record.schedules``) against the target's outputs on
    its verification calls: the inputs rebuilt from the seed (checked by digest), the schedule run by
    refmodel, the output digest compared with the recorded one.  A quick replay checks every 8th call."""
    from .._parallel import prefetch
    from ..golden.schedule import Schedule
    from .infer import call_digest, verification_inputs

    sched = Schedule.from_dict(meta["schedule"])
    ver = meta["verification"]
    ins, outs = arrays["inputs_sha256"], arrays["outputs_sha256"]
    if ins.shape != (ver["calls"], 64) or outs.shape != (ver["calls"], 32):
        raise meta_error(f"{meta['name']}: digests {ins.shape}/{outs.shape} do not match {ver['calls']} calls")
    M, N, K, dt = meta["M"], meta["N"], meta["K"], meta["dtype"]
    total = Result(0, 0, complete=full, scope="" if full else "every 8th verification call")
    calls = verification_inputs(dt, M, N, K, sparse=meta["target"] == "cusparselt",
                                outputs=ver["calls"] * M * N, seed=ver["seed"])
    # the inputs of the next calls are drawn on another thread while the schedule runs (same stream, in order)
    for i, _, a, b in prefetch(calls, depth=2):
        if not full and i % 8:
            continue
        with np.errstate(all="ignore"):
            d = sched.run(a, b)
        din, dout = call_digest(a, b, d)
        if din != ins[i].tobytes():
            raise FixtureError(f"{meta['name']}: verification inputs of call {i} are not the recorded ones (sha256 "
                               "differs: numpy's Generator stream changed?)", short="inputs not reproducible")
        ok = dout == outs[i].tobytes()
        total.add(Result(M * N, 0 if ok else M * N, [] if ok else [f"{meta['name']} call {i}: the digest differs"]))
    return total


@replayer("deepgemm")
def replay_deepgemm(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """DeepGEMM's ``fp8_gemm_nt`` on the H200 (``python -m gpu.record.deepgemm``): the FP8 codes and scales
    it was fed, its bf16 output, against :func:`refmodel.golden.deepgemm.fp8_gemm_nt`."""
    from ..golden.deepgemm import fp8_gemm_nt

    total = Result(0, 0)
    for nm in meta["shapes"]:
        a, b, sfa, sfb, want = (arrays[f"{nm}.{x}"] for x in ("a", "b", "sfa", "sfb", "d"))
        got = fp8_gemm_nt(a, sfa, b, sfb).view(np.uint16)
        total.add(_count(got, want, nm, {}))
    return total
