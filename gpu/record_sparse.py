"""Sparse wgmma campaign on the H200: probes of the sp-meta layout, the numerics and illegal
metadata, recorded raw (``--explore``) or compared with refmodel and stored as fixtures.

    python -m gpu.record_sparse --out DIR --explore      # record everything, compare later
    python -m gpu.record_sparse --out fixtures           # compare with refmodel, store fixtures

Probes use *tags*: the compressed A holds distinct small values, B is the identity
(K x N with N = K) and C = 0, so D[m, n] is the tag of the compressed element the hardware
placed at K index n (a sum when two land there): the metadata the hardware read can be read
back from D.  Numerics cases use random operand families with legal metadata.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from refmodel.dtypes import element_dtype
from refmodel.layouts.descriptor import MatrixDescriptor
from refmodel.layouts.fragment import pack_accumulator
from refmodel.layouts.smem import tile_image
from refmodel.wgmma_sp_forms import parse_wgmma_sp

SEED = 20261201
IMAGE = 16384
B_OFFSET = 8192
LEGAL_24 = np.array([0b0100, 0b1000, 0b1100, 0b1001, 0b1101, 0b1110], np.uint32)   # idx0 < idx1
LEGAL_TF32 = np.array([0b0100, 0b1110], np.uint32)


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng([SEED] + [zlib.crc32(str(k).encode()) for k in key])


def _tags(dtype_a: str, kc: int) -> np.ndarray:
    """(64, kc) distinct-per-row tags, exactly representable, whose sums stay exact."""
    j = np.broadcast_to(np.arange(kc)[None, :], (64, kc))
    if dtype_a in ("s8", "u8"):
        return (j + 1).astype(element_dtype(dtype_a))
    if dtype_a in ("e4m3", "e5m2"):
        base = 0x30 if dtype_a == "e4m3" else 0x38
        return (base + j).astype(np.uint8).view(element_dtype(dtype_a))
    return (j + 1).astype(np.float32).astype(element_dtype(dtype_a))


def images_for(form, a_c: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Image with the compressed A (K-major, no swizzle) at 0 and B^T at B_OFFSET."""
    img = np.zeros(IMAGE, np.uint8)
    ia = tile_image(np.ascontiguousarray(a_c), "K", "none")
    ib = tile_image(np.ascontiguousarray(b.T), "K", "none")
    img[:ia.size] = ia
    img[B_OFFSET:B_OFFSET + ib.size] = ib
    return img


def descriptors(form) -> tuple[int, int]:
    ea = element_dtype(form.dtype_a).itemsize
    eb = element_dtype(form.dtype_b).itemsize
    a = MatrixDescriptor(0, 128, 128 * (form.k_compressed * ea // 16)).encode()
    b = MatrixDescriptor(B_OFFSET, 128, 128 * (form.k * eb // 16)).encode()
    return a, b


def probe_cases(instr: str, cases: int, *, illegal: bool, tag: str) -> dict[str, Any]:
    """Tagged probes: random metadata nibbles in every lane and position."""
    from refmodel.layouts.fragment import pack_a_fragment

    f = parse_wgmma_sp(instr)
    rng = _rng("probe", instr, illegal, tag)
    a_c = _tags(f.dtype_a, f.k_compressed)
    eye = np.eye(f.k, f.n, dtype=np.float32)
    b = eye.astype(element_dtype(f.dtype_b)) if f.dtype_b not in ("s8", "u8") else eye.astype(element_dtype(f.dtype_b))
    img = images_for(f, a_c, b)
    da, db = descriptors(f)
    pool = np.arange(16, dtype=np.uint32) if illegal else (LEGAL_TF32 if f.dtype_a == "tf32" else LEGAL_24)
    nib = rng.choice(pool, (cases, 128, 8))
    meta = np.bitwise_or.reduce(nib << (4 * np.arange(8, dtype=np.uint32)), axis=-1).astype(np.uint32)
    c = np.zeros((64, f.n), element_dtype(f.dtype_d))
    return {"images": np.stack([img] * cases), "desc_a": np.full(cases, da, np.uint64),
            "desc_b": np.full(cases, db, np.uint64), "meta": meta,
            "c_regs": np.stack([pack_accumulator(c, f.dtype_d)] * cases), "scale_d": np.ones(cases, np.int32),
            "a_regs": np.stack([pack_a_fragment(np.ascontiguousarray(a_c), f.dtype_a)] * cases)}


def _random_operand(rng, dtype: str, shape, family: str) -> np.ndarray:
    dt = element_dtype(dtype)
    n = int(np.prod(shape))
    if dtype in ("s8", "u8"):
        return rng.integers(np.iinfo(dt).min, np.iinfo(dt).max + 1, n).astype(dt).reshape(shape)
    if family == "bits":
        w = dt.itemsize
        u = rng.integers(0, 1 << (8 * w), n, dtype=np.uint64).astype({1: np.uint8, 2: np.uint16, 4: np.uint32}[w])
        return u.view(dt).reshape(shape)
    if family == "ints":
        return rng.integers(-8, 9, n).astype(np.float32).astype(dt).reshape(shape)
    e = rng.integers(-12, 12, n) if family == "wide" else rng.integers(-3, 4, n)
    x = rng.standard_normal(n) * 2.0 ** e
    return x.astype(np.float32).astype(dt).reshape(shape)


def numerics_cases(instr: str, cases: int, tag: str) -> dict[str, Any]:
    """Random operands (families: bits with NaN/Inf/subnormal patterns, ints, wide spread,
    narrow) and random legal metadata; A also in registers for RS variants."""
    from refmodel.layouts.fragment import pack_a_fragment

    f = parse_wgmma_sp(instr)
    rng = _rng("num", instr, tag)
    da, db = descriptors(f)
    imgs, meta, cregs, aregs, sd, fams = [], [], [], [], [], []
    pool = LEGAL_TF32 if f.dtype_a == "tf32" else LEGAL_24
    for i in range(cases):
        fam = ["ints", "wide", "narrow", "bits"][i % 4]
        a_c = _random_operand(rng, f.dtype_a, (64, f.k_compressed), fam)
        b = _random_operand(rng, f.dtype_b, (f.k, f.n), fam)
        imgs.append(images_for(f, a_c, b))
        nib = rng.choice(pool, (128, 8))
        meta.append(np.bitwise_or.reduce(nib << (4 * np.arange(8, dtype=np.uint32)), axis=-1).astype(np.uint32))
        if f.dtype_d == "s32":
            c = rng.integers(-(1 << 20), 1 << 20, (64, f.n)).astype(np.int32)
        else:
            c = _random_operand(rng, f.dtype_d, (64, f.n), "narrow" if fam != "bits" else "wide")
        cregs.append(pack_accumulator(c, f.dtype_d))
        aregs.append(pack_a_fragment(np.ascontiguousarray(a_c), f.dtype_a))
        sd.append(int(rng.random() < 0.8))
        fams.append(fam)
    return {"images": np.stack(imgs), "desc_a": np.full(cases, da, np.uint64), "desc_b": np.full(cases, db, np.uint64),
            "meta": np.stack(meta), "c_regs": np.stack(cregs), "scale_d": np.array(sd, np.int32),
            "a_regs": np.stack(aregs), "families": np.array(fams)}


PROBES = [("wgmma.mma_async.sp.sync.aligned.m64n32k32.f32.f16.f16", False, s) for s in (0, 1)] + \
         [("wgmma.mma_async.sp.sync.aligned.m64n32k32.f32.f16.f16", True, s) for s in (0, 1)] + \
         [("wgmma.mma_async.sp.sync.aligned.m64n32k32.f32.bf16.bf16", False, 0),
          ("wgmma.mma_async.sp.sync.aligned.m64n16k16.f32.tf32.tf32", False, 0),
          ("wgmma.mma_async.sp.sync.aligned.m64n16k16.f32.tf32.tf32", False, 1),
          ("wgmma.mma_async.sp.sync.aligned.m64n16k16.f32.tf32.tf32", True, 1),
          ("wgmma.mma_async.sp.sync.aligned.m64n64k64.f32.e4m3.e4m3", False, 0),
          ("wgmma.mma_async.sp.sync.aligned.m64n64k64.f32.e4m3.e4m3", True, 0),
          ("wgmma.mma_async.sp.sync.aligned.m64n64k64.s32.s8.s8", False, 0)]

NUMERICS = [("wgmma.mma_async.sp.sync.aligned.m64n32k32.f32.f16.f16", False, 0, 1, 1),
            ("wgmma.mma_async.sp.sync.aligned.m64n32k32.f16.f16.f16", False, 1, -1, 1),
            ("wgmma.mma_async.sp.sync.aligned.m64n32k32.f32.bf16.bf16", True, 0, 1, -1),
            ("wgmma.mma_async.sp.sync.aligned.m64n16k16.f32.tf32.tf32", False, 0, 1, 1),
            ("wgmma.mma_async.sp.sync.aligned.m64n32k64.f32.e4m3.e5m2", False, 0, 1, 1),
            ("wgmma.mma_async.sp.sync.aligned.m64n32k64.f16.e5m2.e4m3", True, 0, 1, 1),
            ("wgmma.mma_async.sp.sync.aligned.m64n32k64.f32.e4m3.e4m3", False, 0, -1, -1),
            ("wgmma.mma_async.sp.sync.aligned.m64n32k64.satfinite.s32.s8.u8", False, 0, 1, 1),
            ("wgmma.mma_async.sp.sync.aligned.m64n32k64.s32.u8.u8", True, 0, 1, 1)]


def explore(out: Path, cases: int) -> None:
    from .sparse import SpVariant, run_wgmma_sp

    out.mkdir(parents=True, exist_ok=True)

    def run(v, arr):
        return run_wgmma_sp(v, arr["images"], arr["desc_a"], arr["desc_b"], arr["meta"], arr["c_regs"],
                            arr["scale_d"], arr["a_regs"] if v.rs else None)

    for i, (instr, rs, sel) in enumerate(PROBES):
        v = SpVariant(instr, rs, sel)
        for illegal in (False, True):
            arr = probe_cases(instr, cases, illegal=illegal, tag="x")
            d, bases = run(v, arr)
            d2, _ = run(v, arr)  # repeat: deterministic?
            np.savez_compressed(out / f"probe_{i:02d}_{'illegal' if illegal else 'legal'}.npz", **arr, hw=d, hw2=d2,
                                bases=bases, config=np.array(json.dumps({"instr": instr, "rs": rs, "sp_sel": sel})))
            print(f"probe {instr.split('aligned.')[1]} rs={int(rs)} sel={sel} illegal={illegal}: "
                  f"repeat identical={np.array_equal(d, d2)}", flush=True)
    for i, (instr, rs, sel, sa, sb) in enumerate(NUMERICS):
        v = SpVariant(instr, rs, sel, 0, 0, sa, sb)
        arr = numerics_cases(instr, cases, "x")
        d, bases = run(v, arr)
        np.savez_compressed(out / f"num_{i:02d}.npz", **arr, hw=d, bases=bases,
                            config=np.array(json.dumps({"instr": instr, "rs": rs, "sp_sel": sel,
                                                        "imm_scale_a": sa, "imm_scale_b": sb})))
        print(f"numerics {instr.split('aligned.')[1]} rs={int(rs)}: {d.size} outputs", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="fixtures")
    p.add_argument("--explore", action="store_true")
    p.add_argument("--cases", type=int, default=32)
    a = p.parse_args(argv)
    t0 = time.time()
    if a.explore:
        explore(Path(a.out), a.cases)
        print(f"sparse explore: done in {time.time() - t0:.0f} s")
        return 0
    print("sparse: recording mode not built yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
