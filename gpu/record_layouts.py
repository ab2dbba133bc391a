"""Layout campaign: ldmatrix/stmatrix, wgmma through raw descriptors, the stmatrix epilogue,
TMA tile loads — run on the H200, compared with refmodel.machine bit for bit, recorded.

    python -m gpu.record_layouts --out fixtures            # record (fails loudly on any mismatch)
    python -m gpu.record_layouts --out DIR --explore       # save everything, report, never fail

Cases are drawn from a fixed seed (``--seed``).  wgmma cases draw random descriptors for A
and B independently: swizzle mode, major (f16/bf16), canonical or deliberately wrong
LBO/SBO, starts aligned to the swizzle period, advanced by 32-byte K steps inside a
swizzle row, or anywhere (16-byte aligned), base offsets 0..7 — every read kept inside
the image, so the model must predict the hardware's answer for wrong descriptors too.
Every case is compared on the device; ``--store`` says how many of each launch are kept as
fixtures (the rest count in the summary but are not stored, to keep fixtures/ compact).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from pathlib import Path
from typing import Any, Callable

import ml_dtypes
import numpy as np

from refmodel.dtypes import element_dtype
from refmodel.layouts.descriptor import MatrixDescriptor, operand_addresses
from refmodel.layouts.smem import dense_strides
from refmodel.layouts.stmatrix import parse_matrix_instr
from refmodel.layouts.swizzle import MODES, swizzle_mode
from refmodel.verify.replay_layouts import epilogue_model, matrix_model, tma_model, wgmma_model
from refmodel.wgmma_forms import parse_wgmma

FEATURE = "layouts"
SEED = 20261201
IMAGE = 16384          # bytes of shared memory per wgmma case
MATRIX_IMAGE = 1024    # bytes per ldmatrix/stmatrix case
TMA_SMEM = 32768

MATRIX_INSTRS = [f"{op}.sync.aligned.m8n8.x{n}{t}.shared.b16"
                 for op in ("ldmatrix", "stmatrix") for n in (1, 2, 4) for t in ("", ".trans")]

# (instr, rs, trans_a, trans_b, imm_scale_a, imm_scale_b); majors drawn per case only where
# the kernel's immediates allow (trans is compiled in)
WGMMA_VARIANTS = [
    ("wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16", False, 0, 0, 1, 1),
    ("wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16", False, 1, 0, 1, 1),
    ("wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16", False, 0, 1, 1, 1),
    ("wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16", False, 1, 1, 1, 1),
    ("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", False, 1, 1, 1, -1),
    ("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", False, 0, 0, 1, 1),
    ("wgmma.mma_async.sync.aligned.m64n256k16.f16.f16.f16", False, 0, 1, 1, 1),
    ("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", False, 1, 0, 1, 1),
    ("wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32", False, 0, 0, 1, 1),
    ("wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3", False, 0, 0, 1, 1),
    ("wgmma.mma_async.sync.aligned.m64n48k32.f16.e5m2.e4m3", False, 0, 0, -1, 1),
    ("wgmma.mma_async.sync.aligned.m64n16k32.s32.s8.u8", False, 0, 0, 1, 1),
    ("wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16", True, 0, 1, 1, 1),
    ("wgmma.mma_async.sync.aligned.m64n24k16.f32.bf16.bf16", True, 0, 0, 1, 1),
    ("wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3", True, 0, 0, 1, 1),
]


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng([SEED] + [zlib.crc32(str(k).encode()) for k in key])


# ----------------------------------------------------------------------------- ldmatrix / stmatrix

def matrix_cases(instr: str, cases: int) -> dict[str, np.ndarray]:
    f = parse_matrix_instr(instr)
    rng = _rng("matrix", instr)
    images = rng.integers(0, 256, (cases, MATRIX_IMAGE), dtype=np.uint8)
    slots = MATRIX_IMAGE // 16
    addrs = np.stack([rng.permutation(slots)[:32] * 16 for _ in range(cases)]).astype(np.uint32)
    regs = rng.integers(0, 1 << 32, (cases, 32, f.num), dtype=np.uint64).astype(np.uint32)
    return {"images": images, "addrs": addrs, "regs": regs}


# ----------------------------------------------------------------------------- wgmma via descriptors

def _fill_image(rng, dtype_name: str, size: int, family: str) -> np.ndarray:
    dt = element_dtype(dtype_name)
    n = size // dt.itemsize
    if dtype_name in ("s8", "u8", "e4m3", "e5m2"):
        v = rng.integers(0, 256, n, dtype=np.uint8)
        if dtype_name in ("e4m3", "e5m2") and family == "ints":
            v = np.asarray(rng.integers(-8, 9, n), np.float32).astype(dt).view(np.uint8)
        elif dtype_name == "e4m3":
            v[(v & 0x7F) == 0x7F] ^= 0x01          # no NaN codes: a layout probe
        elif dtype_name == "e5m2":
            v[(v & 0x7C) == 0x7C] &= 0xBB          # no Inf/NaN
        return v.view(np.uint8)
    if family == "ints":
        x = rng.integers(-8, 9, n).astype(np.float32)
    else:
        x = (rng.standard_normal(n) * 2.0 ** rng.integers(-4, 5, n)).astype(np.float32)
    return x.astype(dt).view(np.uint8)


def _draw_desc(rng, rows: int, k: int, ebytes: int, major_ok: bool, major: str,
               size: int) -> tuple[int, str]:
    """A random descriptor (start relative to the image) whose reads stay inside ``size``."""
    for _ in range(1000):
        mode = MODES[int(rng.integers(0, 4))]
        if major == "MN" and not major_ok:
            raise AssertionError("MN-major needs 2-byte elements")
        r = rng.random()
        if r < 0.6:
            lbo, sbo = dense_strides(major, mode, rows, 32 if major == "K" else None)
            kind = "dense"
        else:
            lbo = int(rng.integers(0, 160)) * 16
            sbo = int(rng.integers(0, 160)) * 16
            kind = "random-strides"
        period = max(mode.period, 16)
        u = rng.random()
        if u < 0.05:  # near-illegal: the last 128-byte line read is the image's last one
            start = 0
            kind += ",flush"
        elif u < 0.4:
            start = int(rng.integers(0, size // period)) * period
            kind += ",aligned"
        elif u < 0.7 and mode.bits and major == "K":
            start = int(rng.integers(0, size // period)) * period + 32 * int(rng.integers(0, mode.width // 32))
            kind += ",kstep"
        else:
            start = int(rng.integers(0, size // 16)) * 16
            kind += ",any"
        base_offset = int(rng.integers(1, 8)) if rng.random() < 0.3 and mode.bits else 0
        d = MatrixDescriptor(start, lbo, sbo, base_offset, mode.desc_code)
        addr = operand_addresses(d, rows, k, ebytes, major=major, rule="ignore")
        if kind.endswith("flush"):
            shift = (size // 128 - 1 - int(addr.max()) // 128) * 128
            if shift < 0 or start + shift >= 1 << 18:
                continue
            d = d.with_start(start + shift)
            addr = addr + shift
        lines_lo, lines_hi = int(addr.min()) // 128, int(addr.max()) // 128
        if lines_lo >= 0 and lines_hi * 128 + 127 < size:
            return d.encode(), f"{mode.name},{major},{kind},bo{base_offset}"
    raise RuntimeError("could not draw a descriptor that fits")


def wgmma_cases(variant: tuple, cases: int, tag: str = "rec") -> dict[str, Any]:
    instr, rs, ta, tb, sa, sb = variant
    f = parse_wgmma(instr)
    rng = _rng("wgmma", variant, tag)
    e_a, e_b = element_dtype(f.dtype_a).itemsize, element_dtype(f.dtype_b).itemsize
    images, da, db, notes = [], [], [], []
    afr, cregs, sd = [], [], []
    from refmodel.layouts.fragment import pack_a_fragment, pack_accumulator

    for i in range(cases):
        family = "ints" if rng.random() < 0.75 else "floats"
        img = _fill_image(rng, f.dtype_a, IMAGE, family)
        if f.dtype_b != f.dtype_a:  # mixed FP8: second half of the image in B's type
            img[IMAGE // 2:] = _fill_image(rng, f.dtype_b, IMAGE // 2, family)
        images.append(img)
        if rs:
            da.append(0)
            a = np.frombuffer(_fill_image(rng, f.dtype_a, 64 * f.k * e_a, family), dtype=element_dtype(f.dtype_a))
            afr.append(pack_a_fragment(a.reshape(64, f.k), f.dtype_a))
            na = "regs"
        else:
            d, na = _draw_desc(rng, 64, f.k, e_a, True, "MN" if ta else "K", IMAGE)
            da.append(d)
            afr.append(np.zeros((128, 4), np.uint32))
        d, nb = _draw_desc(rng, f.n, f.k, e_b, True, "MN" if tb else "K", IMAGE)
        db.append(d)
        cdt = element_dtype(f.dtype_d)
        c = (rng.integers(-4, 5, (64, f.n)).astype(np.float32).astype(cdt) if f.dtype_d != "s32"
             else rng.integers(-1000, 1000, (64, f.n)).astype(np.int32))
        cregs.append(pack_accumulator(c, f.dtype_d))
        sd.append(int(rng.random() < 0.8))
        notes.append(f"A[{na}] B[{nb}] {family}")
    return {"images": np.stack(images), "desc_a": np.array(da, np.uint64), "desc_b": np.array(db, np.uint64),
            "a_regs": np.stack(afr), "c_regs": np.stack(cregs), "scale_d": np.array(sd, np.int32),
            "notes": notes}


# ----------------------------------------------------------------------------- epilogue

EPILOGUE_CONFIGS = [(n, t, b) for n in (16, 64, 128, 256) for t in ("f16", "bf16") for b in range(4)
                    if b == 0 or (2 * n) % (16 << b) == 0]


def epilogue_cases(cfg: tuple, cases: int) -> dict[str, np.ndarray]:
    n, t, b = cfg
    rng = _rng("epilogue", cfg)
    x = (rng.standard_normal((cases, 128, n // 2)) * 2.0 ** rng.integers(-30, 30, (cases, 128, n // 2)))
    x = x.astype(np.float32)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 65504.0, 65520.0, 3.4e38, 1e-45, -1e-40,
                        5.96e-8, 2.98e-8], np.float32)
    mask = rng.random(x.shape) < 0.1
    x[mask] = rng.choice(special, int(mask.sum()))
    bits = x.view(np.uint32)
    nanmask = rng.random(x.shape) < 0.01
    bits[nanmask] = 0x7F800000 | rng.integers(1, 1 << 23, int(nanmask.sum()), dtype=np.uint32) | (
        rng.integers(0, 2, int(nanmask.sum()), dtype=np.uint32) << 31)
    return {"acc": bits}


# ----------------------------------------------------------------------------- TMA

def tma_plan() -> list[dict[str, Any]]:
    """Groups of TMA cases (one launch each: same element size and transaction bytes)."""
    rng = _rng("tma")
    groups = []
    for eb in (1, 2, 4):
        for m in MODES:
            maxrow = m.width if m.bits else 256
            for row_bytes in (16, 32, 64, 128, 256):
                if row_bytes > maxrow or row_bytes // eb > 256:
                    continue
                for box_rows in (8, 64, 100):
                    cases = []
                    for j in range(6):
                        dst = [0, 128, 384, 1024, 2048 + 256, 4096 + 640][j]
                        if dst + box_rows * row_bytes > TMA_SMEM:
                            dst = 0
                        r0 = int(rng.integers(-20, 260))
                        # the box's first column must sit on a 16-byte boundary (else the
                        # H200 faults: see tma_fault_cases)
                        c0 = int(rng.integers(-2, 13)) * (16 // eb)
                        cases.append({"box": [box_rows, row_bytes // eb], "coords": [r0, c0],
                                      "swizzle": m.tma_code, "mode": m.name, "dst": dst})
                    groups.append({"elem_bytes": eb, "cases": cases})
    return groups


def tma_fault_cases() -> list[dict[str, Any]]:
    """TMA loads probing the 16-byte rule on the box's first column, each run in its own process."""
    out = []
    for eb, sw, mode, cols in ((1, 0, "none", 16), (2, 0, "none", 8), (4, 0, "none", 4), (2, 1, "32B", 16),
                               (2, 3, "128B", 64), (1, 3, "128B", 128)):
        for c0 in (0, -16 // eb, 16 // eb, 1, 3, 5 if eb < 4 else 2, -1):
            out.append({"elem_bytes": eb, "box": [8, cols], "coords": [3, c0], "swizzle": sw, "mode": mode, "dst": 0})
    return out


def _fault_child(case_json: str) -> None:
    """Run one TMA case; print MATCH/DIFF (the process dies with the device on a fault)."""
    from gpu import layouts as hw

    c = json.loads(case_json)
    t = tma_tensor(c["elem_bytes"])
    imgs, bases = hw.run_tma(t, [c], TMA_SMEM)
    from refmodel.machine.tma import tma_load

    m = tma_load(t, tuple(c["box"]), tuple(c["coords"]), c["mode"], dst=c["dst"], smem_size=TMA_SMEM,
                 smem_base=int(bases[0]))
    print("MATCH" if np.array_equal(imgs[0], m) else "DIFF")


def tma_tensor(eb: int) -> np.ndarray:
    rng = _rng("tma-tensor", eb)
    dt = {1: np.uint8, 2: np.uint16, 4: np.uint32}[eb]
    return rng.integers(1, np.iinfo(dt).max, (300, 208), dtype=np.uint64).astype(dt)


# ----------------------------------------------------------------------------- fragments

FRAGMENT_INSTRS = ["wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16",
                   "wgmma.mma_async.sync.aligned.m64n16k16.f16.f16.f16",
                   "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16",
                   "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32",
                   "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3",
                   "wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8"]


def fragment_cases(instr: str) -> dict[str, np.ndarray]:
    """Tagged-identity probes: A holds distinct tags, B = I (K x N, N = K), C = 0, so D = A
    exactly and each register shows which A element the fragment layouts put there.  Types
    with too few codes for 64*K distinct tags (e4m3, s8) use two probes: tag = row, tag = col."""
    from refmodel.layouts.fragment import pack_a_fragment, pack_accumulator
    from refmodel.layouts.smem import tile_image

    f = parse_wgmma(instr)
    ka = f.k
    idx = np.arange(64 * ka).reshape(64, ka)
    probes = []
    if f.dtype_a == "f16":
        probes.append((0x3C00 + idx).astype(np.uint16).view(np.float16))
    elif f.dtype_a == "bf16":
        probes.append((0x3F80 + idx).astype(np.uint16).view(ml_dtypes.bfloat16))
    elif f.dtype_a == "tf32":
        probes.append((0x3F800000 + (idx << 13)).astype(np.uint32).view(np.float32))
    elif f.dtype_a == "e4m3":
        rows = np.broadcast_to(np.arange(64)[:, None], (64, ka))
        cols = np.broadcast_to(np.arange(ka)[None, :], (64, ka))
        probes += [(0x20 + rows).astype(np.uint8).view(ml_dtypes.float8_e4m3fn),
                   (0x20 + cols).astype(np.uint8).view(ml_dtypes.float8_e4m3fn)]
    else:
        probes += [np.broadcast_to(np.arange(64)[:, None] - 32, (64, ka)).astype(np.int8),
                   np.broadcast_to(np.arange(ka)[None, :] - 16, (64, ka)).astype(np.int8)]
    eye = np.eye(ka, f.n, dtype=np.float32)
    b = eye.astype(np.int8) if f.dtype_b in ("s8", "u8") else eye.astype(element_dtype(f.dtype_b))
    imgs, aregs = [], []
    ib = tile_image(np.ascontiguousarray(b.T), "K", "none")
    for a in probes:
        ia = tile_image(np.ascontiguousarray(a), "K", "none")
        img = np.zeros(4096, np.uint8)
        img[:ia.size] = ia
        img[2048:2048 + ib.size] = ib
        imgs.append(img)
        aregs.append(pack_a_fragment(np.ascontiguousarray(a), f.dtype_a))
    c = np.zeros((64, f.n), element_dtype(f.dtype_d))
    n = len(probes)
    from refmodel.layouts.descriptor import MatrixDescriptor

    return {"images": np.stack(imgs), "a_regs": np.stack(aregs),
            "desc_a": np.full(n, MatrixDescriptor(0, 128, 256).encode(), np.uint64),
            "desc_b": np.full(n, MatrixDescriptor(2048, 128, 256).encode(), np.uint64),
            "c_regs": np.stack([pack_accumulator(c, f.dtype_d)] * n), "scale_d": np.ones(n, np.int32),
            "a_tags": np.stack([np.ascontiguousarray(a).view(np.uint8) for a in probes])}


# ----------------------------------------------------------------------------- campaign

def _mismatch(got: np.ndarray, want: np.ndarray) -> int:
    return int(np.count_nonzero(np.asarray(got) != np.asarray(want)))


def _take(arrays: dict[str, Any], k: int) -> dict[str, Any]:
    """The first ``k`` cases of every per-case array (the stored subset)."""
    return {key: (v[:k] if isinstance(v, (np.ndarray, list)) else v) for key, v in arrays.items()}


def run(out: Path, *, explore: bool, matrix_n: int, wgmma_n: int, epi_n: int, store: dict[str, int],
        only: list[str] | None, compare: bool = True, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every part; compare with refmodel; store the first ``store[part]`` cases of each
    launch as fixtures (all of them with ``explore``)."""
    from gpu import layouts as hw
    from gpu.runtime import device_info
    from refmodel.layouts.descriptor import BASE_OFFSET_RULE
    from refmodel.verify.fixtures import host_provenance, write_fixture

    prov = {**device_info(), **host_provenance(), "seed": SEED, "recorder": "gpu.record_layouts"}
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"outputs": 0, "mismatches": 0, "stored": 0, "items": []}

    def note(name, n_out, mm, info=""):
        summary["outputs"] += n_out
        summary["mismatches"] += mm
        summary["items"].append({"name": name, "outputs": n_out, "mismatches": mm, "info": info})
        log(f"{name:<64} {n_out:>10} outputs  {mm:>8} mismatches {info}")

    def save(part, name, arrays, kind, meta, cases_out):
        if explore:
            np.savez_compressed(out / f"{name}.npz", **arrays)
            (out / f"{name}.json").write_text(json.dumps(meta))
            return
        summary["stored"] += cases_out
        write_fixture(FEATURE, name, arrays, kind=kind, cases=cases_out, meta=meta, provenance=prov, root=out)

    if not only or "matrix" in only:
        for instr in MATRIX_INSTRS:
            f = parse_matrix_instr(instr)
            arr = matrix_cases(instr, matrix_n)
            regs, imgs, bases = hw.run_matrix(instr, arr["images"], arr["addrs"],
                                              arr["regs"] if f.op == "stmatrix" else None)
            mregs, mimgs = matrix_model(instr, arr) if compare else (regs, imgs)
            key, hw_out, model_out = (("hw_regs", regs, mregs) if f.op == "ldmatrix" else ("hw_images", imgs, mimgs))
            # outputs: register halves loaded, or bytes stored (the whole image is compared)
            per_case = 64 * f.num if f.op == "ldmatrix" else 128 * f.num
            note(instr, per_case * matrix_n, _mismatch(hw_out, model_out))
            k = matrix_n if explore else store["matrix"]
            keep = _take({**arr, key: hw_out, "bases": bases}, k)
            save("matrix", f"matrix_{f.op}_x{f.num}{'_trans' if f.trans else ''}", keep, "matrix",
                 {"instr": instr}, per_case * k)

    if not only or "wgmma" in only:
        for vi, v in enumerate(WGMMA_VARIANTS):
            instr, rs, ta, tb, sa, sb = v
            var = hw.WgmmaVariant(instr, rs, ta, tb, sa, sb)
            arr = wgmma_cases(v, wgmma_n)
            notes = arr.pop("notes")
            dregs, bases = hw.run_wgmma_desc(var, arr["images"], arr["desc_a"], arr["desc_b"],
                                             arr["c_regs"], arr["scale_d"], arr["a_regs"] if rs else None)
            rules = ("ignore", "subtract", "add", "xor") if explore else (BASE_OFFSET_RULE,)
            per_rule = {}
            for rule in (rules if compare else ()):
                m = wgmma_model(v, arr, bases, rule=rule)
                per_rule[rule] = _mismatch(dregs, m)
                per_rule[rule + "_cases"] = [i for i in range(wgmma_n) if not np.array_equal(dregs[i], m[i])][:20]
            label = f"{instr.split('aligned.')[1]} rs={int(rs)} trans={ta}{tb} scale={sa},{sb}"
            note(label, dregs.size, per_rule.get(BASE_OFFSET_RULE, 0),
                 json.dumps({r: per_rule[r] for r in rules if r in per_rule}) if explore else "")
            k = wgmma_n if explore else store["wgmma"]
            keep = _take({**arr, "hw_d_regs": dregs, "bases": bases}, k)
            meta = {"instr": instr, "rs": rs, "trans_a": ta, "trans_b": tb, "imm_scale_a": sa,
                    "imm_scale_b": sb, "notes": notes[:k]}
            save("wgmma", f"wgmma_desc_{vi:02d}", keep, "wgmma_desc", meta, int(keep["hw_d_regs"].size))

    if not only or "epilogue" in only:
        for cfg in EPILOGUE_CONFIGS:
            n, t, b = cfg
            arr = epilogue_cases(cfg, epi_n)
            imgs, laddr, bases = hw.run_epilogue(arr["acc"], n, t, b)
            mimgs, maddr = epilogue_model(cfg, arr, bases) if compare else (imgs, laddr)
            mm = _mismatch(imgs, mimgs) + _mismatch(laddr, maddr)
            note(f"epilogue n{n} {t} swizzle {[m.name for m in MODES if m.bits == b][0]}", imgs.size + laddr.size, mm)
            k = epi_n if explore else store["epilogue"]
            keep = _take({"acc": arr["acc"], "hw_images": imgs, "hw_addrs": laddr, "bases": bases}, k)
            save("epilogue", f"epilogue_n{n}_{t}_sw{b}", keep, "epilogue",
                 {"n": n, "out_type": t, "swizzle_bits": b}, int(keep["hw_images"].size + keep["hw_addrs"].size))

    if not only or "tma" in only:
        groups = tma_plan()
        tensors = {eb: tma_tensor(eb) for eb in (1, 2, 4)}
        kept_cases, kept_imgs, kept_bases, kept_eb = [], [], [], []
        for g in groups:
            eb = g["elem_bytes"]
            imgs, bases = hw.run_tma(tensors[eb], g["cases"], TMA_SMEM)
            m = tma_model(tensors[eb], g["cases"], bases, TMA_SMEM) if compare else imgs
            bad = [i for i in range(len(imgs)) if not np.array_equal(imgs[i], m[i])]
            c0 = g["cases"][0]
            box_bytes = c0["box"][0] * c0["box"][1] * eb  # bytes written (the whole image is compared)
            note(f"tma e{eb} box {c0['box']} {c0['mode']}", box_bytes * len(imgs), _mismatch(imgs, m),
                 json.dumps(bad) if bad else "")
            k = len(imgs) if explore else store["tma"]
            kept_cases += g["cases"][:k]
            kept_imgs.append(imgs[:k])
            kept_bases.append(bases[:k])
            kept_eb += [eb] * min(k, len(imgs))
        imgs = np.concatenate(kept_imgs)
        save("tma", "tma_loads", {"tensor_1": tensors[1], "tensor_2": tensors[2], "tensor_4": tensors[4],
                                  "hw_images": imgs, "bases": np.concatenate(kept_bases),
                                  "elem_bytes": np.array(kept_eb, np.int32)}, "tma",
             {"cases": kept_cases, "smem": TMA_SMEM},
             int(sum(c["box"][0] * c["box"][1] * e for c, e in zip(kept_cases, kept_eb))))
    if not only or "fragments" in only:
        from refmodel.verify.replay_layouts import fragment_identity_errors

        for instr in FRAGMENT_INSTRS:
            for rs in (False, True):
                v = (instr, rs, 0, 0, 1, 1)
                arr = fragment_cases(instr)
                d, bases = hw.run_wgmma_desc(hw.WgmmaVariant(*v), arr["images"], arr["desc_a"], arr["desc_b"],
                                             arr["c_regs"], arr["scale_d"], arr["a_regs"] if rs else None)
                m = wgmma_model(v, arr, bases) if compare else d
                ident = fragment_identity_errors(instr, arr["a_tags"], d)
                note(f"fragments {instr.split('aligned.')[1]} rs={int(rs)} (D = tagged A)", d.size,
                     _mismatch(d, m) + ident)
                save("fragments", f"fragments_{instr.split('aligned.')[1].replace('.', '_')}_{'rs' if rs else 'ss'}",
                     {**arr, "hw_d_regs": d, "bases": bases}, "fragments",
                     {"instr": instr, "rs": rs, "trans_a": 0, "trans_b": 0, "imm_scale_a": 1, "imm_scale_b": 1},
                     int(d.size))

    if not only or "tma_faults" in only:
        import subprocess

        results = []
        for c in tma_fault_cases():
            r = subprocess.run([sys.executable, "-m", "gpu.record_layouts", "--fault-child", json.dumps(c)],
                               capture_output=True, text=True, timeout=120)
            text = r.stdout + r.stderr
            outcome = ("fault" if "cudaErrorIllegalInstruction" in text or "ILLEGAL_INSTRUCTION" in text
                       else "match" if "MATCH" in r.stdout else "diff" if "DIFF" in r.stdout else "error")
            results.append({**c, "outcome": outcome})
            log(f"tma fault probe e{c['elem_bytes']} {c['mode']} col0={c['coords'][1]:>3}: {outcome}")
            if outcome in ("diff", "error"):
                summary["mismatches"] += 1
        summary["outputs"] += len(results)
        if not explore:
            (out / FEATURE).mkdir(parents=True, exist_ok=True)
        save("tma_faults", "tma_faults", {"outcomes": np.array([r["outcome"] for r in results])}, "tma_faults",
             {"cases": results}, len(results))
    return summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="fixtures")
    p.add_argument("--explore", action="store_true", help="save everything; report mismatches, never fail")
    p.add_argument("--matrix-cases", type=int, default=256)
    p.add_argument("--wgmma-cases", type=int, default=256)
    p.add_argument("--epilogue-cases", type=int, default=16)
    p.add_argument("--store", default="matrix=16,wgmma=10,epilogue=1,tma=2",
                   help="cases of each launch kept as fixtures (the rest is compared, not stored)")
    p.add_argument("--only", nargs="*", choices=["matrix", "wgmma", "epilogue", "tma", "tma_faults", "fragments"])
    p.add_argument("--fault-child", help=argparse.SUPPRESS)
    p.add_argument("--no-model", action="store_true", help="(with --explore) record only, compare later")
    a = p.parse_args(argv)
    if a.fault_child:
        _fault_child(a.fault_child)
        return 0
    store = {"matrix": 16, "wgmma": 10, "epilogue": 1, "tma": 2}
    for item in a.store.split(","):
        key, _, val = item.partition("=")
        if key not in store or not val.isdigit():
            p.error(f"--store takes part=count pairs for {', '.join(store)}, got {item!r}")
        store[key] = int(val)
    t0 = time.time()
    s = run(Path(a.out), explore=a.explore, matrix_n=a.matrix_cases, wgmma_n=a.wgmma_cases,
            epi_n=a.epilogue_cases, store=store, only=a.only, compare=not a.no_model)
    print(f"layouts: {s['outputs']} hardware outputs compared, {s['mismatches']} mismatches, "
          f"{s['stored']} stored as fixtures ({time.time() - t0:.0f} s)")
    if a.explore:
        (Path(a.out) / "summary.json").write_text(json.dumps(s, indent=1))
        return 0
    if a.no_model:
        print("layouts: --no-model only records; nothing was compared", file=sys.stderr)
        return 1
    if s["mismatches"]:
        print("layouts: FAILED: refmodel disagrees with the hardware (fixtures written for inspection)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
