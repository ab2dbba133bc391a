"""The cases of the sparse wgmma campaign: tag probes of the sp-meta layout (legal and illegal
nibbles), random operands with legal metadata, the job plan over all sparse forms (SS/RS, sp-sel,
scale-d, imm scales), chains, and the shared-memory images and registers a kernel holds for them.
The recorder (``gpu.record.sparse``) runs them on the H200 and ``wgref fuzz sparse`` draws fresh ones."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from refmodel.dtypes import element_dtype
from refmodel.layouts.descriptor import MatrixDescriptor
from refmodel.layouts.fragment import pack_accumulator
from refmodel.layouts.smem import tile_image
from refmodel.verify.families.operand import random_operand
from refmodel.wgmma_sp_forms import parse_wgmma_sp

SEED = 20261201


IMAGE = 2048 + 256 * 64     # compressed A (64 x 32 bytes) then B^T (up to 256 x 64 bytes)


B_OFFSET = 2048


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
        a_c = random_operand(rng, f.dtype_a, (64, f.k_compressed), fam)
        b = random_operand(rng, f.dtype_b, (f.k, f.n), fam)
        imgs.append(images_for(f, a_c, b))
        nib = rng.choice(pool, (128, 8))
        meta.append(np.bitwise_or.reduce(nib << (4 * np.arange(8, dtype=np.uint32)), axis=-1).astype(np.uint32))
        if f.dtype_d == "s32":
            c = rng.integers(-(1 << 20), 1 << 20, (64, f.n)).astype(np.int32)
        else:
            c = random_operand(rng, f.dtype_d, (64, f.n), "narrow" if fam != "bits" else "wide")
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


TILES = 16                  # tiles compared per job (4 families x 4); tiles 0 and 5 are stored


def tf32_probe_cases(cases: int, *, illegal: bool) -> dict[str, Any]:
    """tf32 probes with random tags (full mantissas, low half-words nonzero), B = I."""
    instr = "wgmma.mma_async.sp.sync.aligned.m64n16k16.f32.tf32.tf32"
    arr = probe_cases(instr, cases, illegal=illegal, tag="tf32-random")
    rng = _rng("tf32-tags", illegal)
    f = parse_wgmma_sp(instr)
    imgs, aregs = [], []
    from refmodel.layouts.fragment import pack_a_fragment

    eye = np.eye(f.k, f.n, dtype=np.float32)
    for i in range(cases):
        a_c = (rng.uniform(1, 2, (64, f.k_compressed)) * rng.choice([-1, 1], (64, f.k_compressed))).astype(np.float32)
        imgs.append(images_for(f, a_c, eye))
        aregs.append(pack_a_fragment(a_c, "tf32"))
    arr["images"], arr["a_regs"] = np.stack(imgs), np.stack(aregs)
    return arr


def plan_jobs() -> list[dict[str, Any]]:
    """Every sparse form, SS and RS; sp-sel, scale-d and imm scales spread over the forms."""
    from refmodel.wgmma_sp_forms import WGMMA_SP_FORMS

    jobs = []
    scales = [(1, 1), (-1, 1), (1, -1), (-1, -1)]
    for i, f in enumerate(WGMMA_SP_FORMS):
        for rs in (False, True):
            sa, sb = scales[(i + rs) % 4] if f.has_imm_scale else (1, 1)
            jobs.append({"instr": f.instr, "rs": rs, "sp_sel": f.sp_sels[(i + rs) % len(f.sp_sels)],
                         "scale_d": int((i + rs) % 3 != 0), "imm_scale_a": sa, "imm_scale_b": sb})
    return jobs


def inputs_from_math(f, a, meta, b, c, sp_sel: int, garbage=None) -> dict[str, Any]:
    """Machine-level inputs (images, descriptors, sp-meta/A/C registers) of T math-level tiles."""
    from refmodel.layouts.fragment import pack_a_fragment
    from refmodel.layouts.sparse_meta import pack_meta

    T = len(a)
    da, db = descriptors(f)
    garbage = np.zeros((T, 128), np.uint32) if garbage is None else garbage
    return {"images": np.stack([images_for(f, a[t], b[t]) for t in range(T)]),
            "desc_a": np.full(T, da, np.uint64), "desc_b": np.full(T, db, np.uint64),
            "meta_regs": np.stack([pack_meta(meta[t], f.dtype_a, sp_sel, fill=garbage[t]) for t in range(T)]),
            "a_regs": np.stack([pack_a_fragment(np.ascontiguousarray(a[t]), f.dtype_a) for t in range(T)]),
            "c_regs": np.stack([pack_accumulator(c[t], f.dtype_d) for t in range(T)])}


def job_inputs(job: dict[str, Any], seed=None) -> dict[str, Any]:
    """TILES full tiles: compressed A, metadata nibbles (legal; tiles 5, 7, 13, 15 of 2:4 forms use
    any nibble, equal indices included), B, C — plus their machine-level form."""

    f = parse_wgmma_sp(job["instr"])
    rng = _rng("job", job["instr"], job["rs"]) if seed is None else _rng("fuzz", job["instr"], job["rs"], seed)
    a, meta, b, c = [], [], [], []
    for t in range(TILES):
        fam = ["bits", "ints", "wide", "narrow"][t % 4]
        a.append(random_operand(rng, f.dtype_a, (64, f.k_compressed), fam))
        b.append(random_operand(rng, f.dtype_b, (f.k, f.n), fam))
        if f.dtype_d == "s32":
            c.append(rng.integers(-(1 << 31), (1 << 31) - 1, (64, f.n), dtype=np.int64).astype(np.int32)
                     if t % 2 else rng.integers(-1000, 1000, (64, f.n)).astype(np.int32))
        else:
            c.append(random_operand(rng, f.dtype_d, (64, f.n), "wide" if fam == "bits" else "narrow"))
        pool = (LEGAL_TF32 if f.dtype_a == "tf32" else
                (np.arange(16, dtype=np.uint32) if t % 8 in (5, 7) else LEGAL_24))
        meta.append(rng.choice(pool, (64, f.meta_cols)).astype(np.uint8))
    garbage = rng.integers(0, 1 << 32, (TILES, 128), dtype=np.uint64).astype(np.uint32)
    return {"a": np.stack(a), "meta": np.stack(meta), "b": np.stack(b), "c": np.stack(c),
            **inputs_from_math(f, a, meta, b, c, job["sp_sel"], garbage)}


CHAINS = [("wgmma.mma_async.sp.sync.aligned.m64n32k32.f32.f16.f16", False, 1, 4),
          ("wgmma.mma_async.sp.sync.aligned.m64n32k32.f16.f16.f16", True, 0, 3),
          ("wgmma.mma_async.sp.sync.aligned.m64n32k32.f32.bf16.bf16", False, 0, 4),
          ("wgmma.mma_async.sp.sync.aligned.m64n32k16.f32.tf32.tf32", True, 1, 4),
          ("wgmma.mma_async.sp.sync.aligned.m64n32k64.f32.e4m3.e5m2", False, 0, 4),
          ("wgmma.mma_async.sp.sync.aligned.m64n32k64.f16.e5m2.e5m2", True, 0, 2),
          ("wgmma.mma_async.sp.sync.aligned.m64n32k64.satfinite.s32.s8.u8", False, 0, 4)]


def chain_cases(instr: str, rs: bool, sp_sel: int, chain: int, cases: int) -> dict[str, Any]:
    """``cases`` chains of ``chain`` sparse wgmmas along K (each D the next C, one commit
    group), math level (a (cases, 64, chain*K/2), meta, b (cases, chain*K, N), c) and machine
    level (image: the compressed A steps at 0, 2048, ..., then the B^T steps)."""
    from refmodel.layouts.fragment import pack_a_fragment
    from refmodel.layouts.sparse_meta import pack_meta

    f = parse_wgmma_sp(instr)
    rng = _rng("chain", instr, rs, chain)
    ea, eb = element_dtype(f.dtype_a).itemsize, element_dtype(f.dtype_b).itemsize
    a_step, b_step = 64 * f.k_compressed * ea, f.n * f.k * eb
    pool = LEGAL_TF32 if f.dtype_a == "tf32" else np.arange(16, dtype=np.uint32)
    out = {k: [] for k in ("a", "meta", "b", "c", "images", "meta_regs", "a_regs", "c_regs")}
    for i in range(cases):
        fam = ["ints", "wide", "narrow", "bits"][i % 4]
        steps_a = [random_operand(rng, f.dtype_a, (64, f.k_compressed), fam) for _ in range(chain)]
        steps_b = [random_operand(rng, f.dtype_b, (f.k, f.n), fam) for _ in range(chain)]
        steps_m = [rng.choice(pool, (64, f.meta_cols)).astype(np.uint8) for _ in range(chain)]
        c = (rng.integers(-1000, 1000, (64, f.n)).astype(np.int32) if f.dtype_d == "s32"
             else random_operand(rng, f.dtype_d, (64, f.n), "narrow"))
        img = np.zeros(IMAGE, np.uint8)
        for st in range(chain):
            ia = tile_image(np.ascontiguousarray(steps_a[st]), "K", "none")
            ib = tile_image(np.ascontiguousarray(steps_b[st].T), "K", "none")
            img[st * a_step:st * a_step + ia.size] = ia
            img[chain * a_step + st * b_step:chain * a_step + st * b_step + ib.size] = ib
        out["a"].append(np.concatenate(steps_a, axis=1))
        out["meta"].append(np.concatenate(steps_m, axis=1))
        out["b"].append(np.concatenate(steps_b, axis=0))
        out["c"].append(c)
        out["images"].append(img)
        out["meta_regs"].append(np.stack([pack_meta(m, f.dtype_a, sp_sel) for m in steps_m]))
        out["a_regs"].append(np.stack([pack_a_fragment(np.ascontiguousarray(x), f.dtype_a) for x in steps_a]))
        out["c_regs"].append(pack_accumulator(c, f.dtype_d))
    res = {k: np.stack(v) for k, v in out.items()}
    da = MatrixDescriptor(0, 128, 128 * (f.k_compressed * ea // 16)).encode()
    db = MatrixDescriptor(chain * a_step, 128, 128 * (f.k * eb // 16)).encode()
    res.update(desc_a=np.full(cases, da, np.uint64), desc_b=np.full(cases, db, np.uint64), a_step=a_step, b_step=b_step)
    return res
