"""The cases of the layout campaign, drawn from a fixed seed: ldmatrix/stmatrix row addresses,
wgmma through random legal and near-illegal descriptors over a shared-memory image, the stmatrix
epilogue, TMA tile loads and fragment probes.  The recorder (``gpu.record.layouts``) runs them on
the H200 and the layout fuzzer (``wgref fuzz layout``) draws fresh ones; the models they are
compared with are in :mod:`refmodel.verify.replay_layouts`."""

from __future__ import annotations

import zlib
from typing import Any

import ml_dtypes
import numpy as np

from refmodel.dtypes import element_dtype
from refmodel.layouts.descriptor import MatrixDescriptor, operand_addresses
from refmodel.layouts.smem import dense_strides
from refmodel.layouts.stmatrix import parse_matrix_instr
from refmodel.layouts.swizzle import MODES
from refmodel.wgmma_forms import parse_wgmma

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


def matrix_cases(instr: str, cases: int) -> dict[str, np.ndarray]:
    f = parse_matrix_instr(instr)
    rng = _rng("matrix", instr)
    images = rng.integers(0, 256, (cases, MATRIX_IMAGE), dtype=np.uint8)
    slots = MATRIX_IMAGE // 16
    addrs = np.stack([rng.permutation(slots)[:32] * 16 for _ in range(cases)]).astype(np.uint32)
    regs = rng.integers(0, 1 << 32, (cases, 32, f.num), dtype=np.uint64).astype(np.uint32)
    return {"images": images, "addrs": addrs, "regs": regs}


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


def tma_tensor(eb: int) -> np.ndarray:
    rng = _rng("tma-tensor", eb)
    dt = {1: np.uint8, 2: np.uint16, 4: np.uint32}[eb]
    return rng.integers(1, np.iinfo(dt).max, (300, 208), dtype=np.uint64).astype(dt)


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
