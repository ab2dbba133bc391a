"""Replayers of the layout fixtures (fixtures/layouts): ldmatrix/stmatrix, wgmma through raw
descriptors, the stmatrix epilogue, TMA tile loads.  The model side of each comparison
lives here (the recorder, gpu/record/layouts.py, calls the same functions)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..layouts.stmatrix import parse_matrix_instr
from ..layouts.swizzle import MODES
from .replay import Result, _count, replayer


def matrix_model(instr: str, arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(registers (C, 32, num), images (C, size)) refmodel gives for C ldmatrix/stmatrix cases."""
    from ..machine.stmatrix import ldmatrix, stmatrix

    f = parse_matrix_instr(instr)
    imgs, regs = [], []
    for i in range(arrays["images"].shape[0]):
        if f.op == "ldmatrix":
            regs.append(ldmatrix(instr, arrays["addrs"][i], arrays["images"][i]))
            imgs.append(arrays["images"][i])
        else:
            imgs.append(stmatrix(instr, arrays["regs"][i], arrays["addrs"][i], arrays["images"][i]))
            regs.append(np.zeros((32, f.num), np.uint32))
    return np.stack(regs), np.stack(imgs)


def wgmma_model(variant: tuple, arrays: dict[str, np.ndarray], bases: np.ndarray, *,
                rule: str | None = None) -> np.ndarray:
    """D registers (C, 128, regs) for C cases; descriptors are stored with image-relative
    starts and made absolute with each case's shared base, as the kernel does."""
    from ..layouts import descriptor as dmod
    from ..machine.wgmma import wgmma_registers

    instr, rs, ta, tb, sa, sb = variant
    old = dmod.BASE_OFFSET_RULE
    if rule is not None:
        dmod.BASE_OFFSET_RULE = rule
    try:
        out = []
        for i in range(arrays["images"].shape[0]):
            base = int(bases[i])
            a = arrays["a_regs"][i] if rs else int(arrays["desc_a"][i]) + (base >> 4)
            b = int(arrays["desc_b"][i]) + (base >> 4)
            out.append(wgmma_registers(instr, arrays["images"][i], a, b, arrays["c_regs"][i], smem_base=base,
                                       scale_d=bool(arrays["scale_d"][i]), imm_scale_a=sa, imm_scale_b=sb,
                                       imm_trans_a=ta, imm_trans_b=tb))
        return np.stack(out)
    finally:
        dmod.BASE_OFFSET_RULE = old


def wgmma_model_batch(variant: tuple, arrays: dict[str, np.ndarray], base: int):
    """:func:`wgmma_model` for C cases at one shared base, in one numerics call
    (:func:`refmodel.machine.wgmma.wgmma_registers_batch`): (D registers (C, 128, regs), refused cases
    {index: error}; a refused case's registers are zero)."""
    from ..machine.wgmma import wgmma_registers_batch

    instr, rs, ta, tb, sa, sb = variant
    C = arrays["images"].shape[0]
    shift = int(base) >> 4
    a = np.asarray(arrays["a_regs"][:C]) if rs else [int(d) + shift for d in arrays["desc_a"][:C]]
    b = [int(d) + shift for d in arrays["desc_b"][:C]]
    return wgmma_registers_batch(instr, arrays["images"], a, b, arrays["c_regs"][:C],
                                 smem_bases=np.full(C, int(base), np.int64), scale_d=arrays["scale_d"][:C].astype(bool),
                                 imm_scale_a=sa, imm_scale_b=sb, imm_trans_a=ta, imm_trans_b=tb)


def epilogue_model(cfg: tuple, arrays: dict[str, np.ndarray], bases: np.ndarray):
    """(images, stmatrix addresses) of the epilogue for C accumulators (C, 128, N/2)."""
    from ..machine.epilogue import epilogue_stmatrix

    n, t, b = cfg
    mode = [m for m in MODES if m.bits == b][0]
    imgs, addrs = [], []
    for i in range(arrays["acc"].shape[0]):
        img, ad = epilogue_stmatrix(arrays["acc"][i].view(np.float32), t, mode, smem_base=int(bases[i]))
        imgs.append(img)
        addrs.append(ad)
    return np.stack(imgs), np.stack(addrs).astype(np.uint32)


def tma_model(tensor: np.ndarray, cases: list[dict], bases: np.ndarray, smem: int) -> np.ndarray:
    """Images (C, smem) of C TMA tile loads from ``tensor``."""
    from ..machine.tma import tma_load

    return np.stack([tma_load(tensor, tuple(c["box"]), tuple(c["coords"]), c["mode"], dst=c["dst"],
                              smem_size=smem, smem_base=int(b)) for c, b in zip(cases, bases)])


def _check_cases(arrays: dict[str, np.ndarray], key: str, n: int, what: str) -> None:
    if arrays[key].shape[0] != n:
        raise ValueError(f"{what}: {arrays[key].shape[0]} hardware outputs for {n} recorded cases")


@replayer("matrix")
def replay_matrix(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    f = parse_matrix_instr(meta["instr"])
    regs, imgs = matrix_model(meta["instr"], arrays)
    n = arrays["images"].shape[0]
    if f.op == "ldmatrix":
        _check_cases(arrays, "hw_regs", n, meta["instr"])
        r = _count(regs, arrays["hw_regs"], meta["instr"], {})
        # outputs: the 16-bit elements loaded (two a register)
        return Result(n * 64 * f.num, r.mismatches, r.details)
    _check_cases(arrays, "hw_images", n, meta["instr"])
    r = _count(imgs, arrays["hw_images"], meta["instr"], {})
    # the whole image is compared; the outputs are the bytes stmatrix writes
    return Result(n * 128 * f.num, r.mismatches, r.details)


@replayer("wgmma_desc")
def replay_wgmma_desc(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    v = (meta["instr"], meta["rs"], meta["trans_a"], meta["trans_b"], meta["imm_scale_a"], meta["imm_scale_b"])
    _check_cases(arrays, "hw_d_regs", arrays["images"].shape[0], meta["instr"])
    d = wgmma_model(v, arrays, arrays["bases"])
    return _count(d, arrays["hw_d_regs"], meta["instr"], {})


@replayer("epilogue")
def replay_epilogue(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    cfg = (meta["n"], meta["out_type"], meta["swizzle_bits"])
    _check_cases(arrays, "hw_images", arrays["acc"].shape[0], "epilogue")
    imgs, addrs = epilogue_model(cfg, arrays, arrays["bases"])
    r1 = _count(imgs, arrays["hw_images"], f"epilogue n{cfg[0]} {cfg[1]} image", {})
    r2 = _count(addrs, arrays["hw_addrs"], f"epilogue n{cfg[0]} {cfg[1]} lane addresses", {})
    return Result(r1.cases + r2.cases, r1.mismatches + r2.mismatches, r1.details + r2.details)


@replayer("tma")
def replay_tma(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    cases = meta["cases"]
    eb = arrays["elem_bytes"]
    _check_cases(arrays, "hw_images", len(cases), "tma")
    if eb.shape[0] != len(cases):
        raise ValueError(f"tma: {eb.shape[0]} element sizes for {len(cases)} cases")
    total = Result(0, 0)
    for size in sorted(set(int(x) for x in eb)):
        idx = [i for i in range(len(cases)) if int(eb[i]) == size]
        m = tma_model(arrays[f"tensor_{size}"], [cases[i] for i in idx], arrays["bases"][idx], meta["smem"])
        r = _count(m, arrays["hw_images"][idx], f"tma e{size}", {})
        written = sum(cases[i]["box"][0] * cases[i]["box"][1] * size for i in idx)  # whole image compared
        total = Result(total.cases + written, total.mismatches + r.mismatches, total.details + r.details)
    return total


def fragment_identity_errors(instr: str, a_tags: np.ndarray, d_regs: np.ndarray) -> int:
    """Registers whose value is not the tagged A element the layouts place there (B = I, C = 0:
    D = A exactly).  Independent of the accumulator numerics: the tags convert exactly."""
    from ..dtypes import element_dtype
    from ..layouts.fragment import pack_accumulator
    from ..wgmma_forms import parse_wgmma

    f = parse_wgmma(instr)
    bad = 0
    for tags, regs in zip(a_tags, d_regs):
        a = np.ascontiguousarray(tags).view(element_dtype(f.dtype_a)).reshape(64, f.k)
        want = a[:, :f.n].astype(np.float64)
        if f.dtype_a == "tf32":
            want = (a[:, :f.n].view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
        acc = (want.astype(np.int32) if f.dtype_d == "s32" else want.astype(element_dtype(f.dtype_d)))
        bad += int(np.count_nonzero(pack_accumulator(acc, f.dtype_d) != regs))
    return bad


@replayer("fragments")
def replay_fragments(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """Tagged-identity probes: the hardware's D registers against refmodel, and against the
    tags the fragment layouts say each register holds."""
    v = (meta["instr"], meta["rs"], 0, 0, 1, 1)
    _check_cases(arrays, "hw_d_regs", arrays["images"].shape[0], meta["instr"])
    d = wgmma_model(v, arrays, arrays["bases"])
    r = _count(d, arrays["hw_d_regs"], meta["instr"], {})
    ident = fragment_identity_errors(meta["instr"], arrays["a_tags"], arrays["hw_d_regs"])
    details = r.details + ([f"{ident} registers differ from the tagged A element the layouts predict"] if ident else [])
    return Result(r.cases, r.mismatches + ident, details)


@replayer("tma_faults")
def replay_tma_faults(meta: dict[str, Any], arrays: dict[str, np.ndarray], *, full: bool = True) -> Result:
    """The H200 faulted exactly on the loads refmodel refuses (a box column start off 16 bytes)."""
    from ..errors import InputError
    from ..machine.tma import tma_load

    cases = meta["cases"]
    outcomes = [str(x) for x in arrays["outcomes"]]
    if len(outcomes) != len(cases):
        raise ValueError(f"tma_faults: {len(outcomes)} outcomes for {len(cases)} cases")
    bad = []
    for c, hw in zip(cases, outcomes):
        dt = {1: np.uint8, 2: np.uint16, 4: np.uint32}[c["elem_bytes"]]
        try:
            tma_load(np.zeros((16, 256), dt), tuple(c["box"]), tuple(c["coords"]), c["mode"], dst=c["dst"])
            model = "match"
        except InputError:
            model = "fault"
        if model != hw:
            bad.append(f"{c}: hardware {hw}, refmodel {model}")
    return Result(len(cases), len(bad), bad[:3])


__all__ = ["matrix_model", "wgmma_model", "epilogue_model", "tma_model"]
