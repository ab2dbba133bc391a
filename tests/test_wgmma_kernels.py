"""CPU checks of the wgmma kernel generator and launcher.

* the generated source assembles with nvcc/ptxas for sm_90a (a representative
  subset of the 528 forms: every type combination at N=8 and N=256, SS and RS,
  imm scales, chains, staged chains);
* the host side (shared-memory images, descriptors, register images, staging) is
  checked by emulating the kernel's data flow on the CPU: decode each descriptor
  the kernel would build, read the operands back from the emulated shared memory
  by the PTX canonical-layout formula (written out independently here), multiply
  exactly, and compare with the plain matrix product.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from gpu.kernels.runtime import PRELUDE
from gpu.kernels.wgmma import (KERNEL_NAME, Launch, finish_launch, kernel_source, plan_stages,
                       prepare_launch)
from refmodel.layouts.descriptor import MatrixDescriptor
from refmodel.errors import DTypeError, InputError
from refmodel.layouts.fragment import (element_dtype, pack_accumulator, unpack_a_fragment,
                               unpack_accumulator)
from refmodel.wgmma_forms import WGMMA_FORMS, WgmmaForm, parse_wgmma

NVCC = shutil.which("nvcc")


def _combos():
    seen = {}
    for f in WGMMA_FORMS:
        seen.setdefault((f.family, f.dtype_d, f.dtype_a, f.dtype_b, f.satfinite), f.k)
    return seen


def _form(combo, k, n):
    fam, d, a, b, sat = combo
    return WgmmaForm(n, k, d, a, b, sat)


def representative_kernels() -> list[tuple[WgmmaForm, dict]]:
    out = []
    for combo, k in _combos().items():
        for n in (8, 256):
            for rs in (False, True):
                out.append((_form(combo, k, n), dict(rs=rs)))
        f = _form(combo, k, 24 if combo[0] == "int8" else 136)
        out.append((f, dict(chain=3)))
        if combo[0] != "int8":
            out.append((_form(combo, k, 16), dict(imm_scale_a=-1, imm_scale_b=-1)))
            out.append((_form(combo, k, 16), dict(rs=True, imm_scale_a=-1)))
    for combo, k in list(_combos().items())[:6]:
        out.append((_form(combo, k, 256), dict(chain=48)))           # staged: 3 stages
        out.append((_form(combo, k, 256), dict(chain=40, rs=True)))  # staged RS
    return out


def _batch_source(items) -> str:
    parts = [PRELUDE]
    for i, (form, kw) in enumerate(items):
        src = kernel_source(form, **kw).replace(f"{KERNEL_NAME}(", f"{KERNEL_NAME}_{i}(")
        parts.append(f"namespace k{i} {{\n{src}\n}}\n#undef NREGS\n#undef CHAIN\n#undef STEPS\n"
                     f"#undef A_BYTES\n#undef STEP_BYTES\n#undef STEP_WORDS\n")
    return "\n".join(parts)


@pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH: cannot assemble the generated sm_90a kernels")
def test_generated_kernels_assemble_for_sm90a():
    items = representative_kernels()
    assert len(items) >= 90
    nbatch = max(2, min(8, os.cpu_count() or 2))
    batches = [items[i::nbatch] for i in range(nbatch)]
    with tempfile.TemporaryDirectory() as tmp:
        def build(j):
            cu = os.path.join(tmp, f"b{j}.cu")
            with open(cu, "w") as fh:
                fh.write(_batch_source(batches[j]))
            r = subprocess.run([NVCC, "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-std=c++17",
                                "-o", os.path.join(tmp, f"b{j}.cubin"), cu],
                               capture_output=True, text=True, timeout=600)
            return r
        with ThreadPoolExecutor(nbatch) as ex:
            results = list(ex.map(build, range(nbatch)))
    for j, r in enumerate(results):
        forms = [f"{f.instr} {kw}" for f, kw in batches[j]]
        assert r.returncode == 0, f"nvcc failed for batch {j} ({forms[:3]}...):\n{r.stderr[-4000:]}"
        assert "error" not in r.stderr.lower(), r.stderr[-4000:]


def test_source_operand_lists():
    f = parse_wgmma("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16")
    src = kernel_source(f)
    line = next(x for x in src.splitlines() if f.instr in x and "setp" in x)
    regs = re.search(r"\{(%0[^}]*)\}", line).group(1).split(", ")
    assert regs == [f"%{i}" for i in range(128)]
    assert ", %128, %129, p, 1, 1, 0, 0;" in line
    assert src.count('"+f"(d[') == 128 + 1  # asm operands + the operand fence
    rs = kernel_source(f, rs=True, imm_scale_b=-1)
    line = next(x for x in rs.splitlines() if f.instr in x and "setp" in x)
    assert "{%128, %129, %130, %131}, %132, p, 1, -1, 0;" in line  # RS: only imm-trans-b
    i8 = kernel_source("wgmma.mma_async.sync.aligned.m64n24k32.satfinite.s32.u8.s8")
    line = next(x for x in i8.splitlines() if "m64n24k32" in x and "setp" in x)
    assert line.rstrip().endswith('%12, %13, p;\\n}\\n"')  # no imm operands for integer forms
    assert '"+r"(d[11])' in i8 and '"+r"(d[12])' not in i8
    f16acc = kernel_source("wgmma.mma_async.sync.aligned.m64n8k32.f16.e5m2.e4m3", imm_scale_a=-1)
    assert "{%0, %1}, %2, %3, p, -1, 1;" in f16acc


def test_source_rejects_bad_scales():
    with pytest.raises(InputError):
        kernel_source("wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8", imm_scale_a=-1)
    with pytest.raises(InputError):
        kernel_source("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", imm_scale_b=2)


def test_stage_plan():
    f = parse_wgmma("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16")
    p = plan_stages(f, 48, False)
    assert (p.a_bytes, p.b_bytes, p.step_bytes) == (2048, 8192, 10240)
    assert p.steps_per_stage == 20 and p.stages == 3 and p.smem_bytes <= 227 * 1024
    p = plan_stages(f, 5, True)
    assert p.a_bytes == 0 and p.steps_per_stage == 5 and p.stages == 1


# ----------------------------------------------------------------------------- CPU emulation

SMEM_WINDOW_BASE = 0x400  # pretend the dynamic shared memory starts here


def _read_operand(smem: np.ndarray, desc: int, rows: int, dtype) -> np.ndarray:
    """Read a (rows, 32-byte) K-major operand as wgmma would, from the PTX canonical layout."""
    d = MatrixDescriptor.decode(desc)
    assert d.swizzle == 0 and d.base_offset == 0
    out = np.zeros((rows, 32), dtype=np.uint8)
    for r in range(rows):
        for kb in range(32):
            addr = (d.start_address + (r // 8) * d.sbo + (kb // 16) * d.lbo + (r % 8) * 16 + kb % 16)
            out[r, kb] = smem[addr]
    return out.view(dtype)


def emulate(launch: Launch) -> np.ndarray:
    """What the generated kernel computes, exactly (for small-integer data), as raw registers."""
    form, plan = launch.form, launch.plan
    n, k = form.n, form.k
    is_int = form.family == "int8"
    acc_t = np.int64 if is_int else np.float64
    acc = unpack_accumulator(launch.cin, n, form.dtype_d).astype(acc_t)
    img = launch.img.reshape(launch.tiles, plan.chain, plan.step_bytes)
    scale = launch.imm_scale_a * launch.imm_scale_b
    dout = np.zeros_like(launch.cin)
    for t in range(launch.tiles):
        d = acc[t]
        sd = launch.scale_d_first
        for s0 in range(0, plan.chain, plan.steps_per_stage):
            ns = min(plan.steps_per_stage, plan.chain - s0)
            smem = np.full(SMEM_WINDOW_BASE + plan.smem_bytes, 0xEE, dtype=np.uint8)  # stale garbage
            smem[SMEM_WINDOW_BASE:SMEM_WINDOW_BASE + ns * plan.step_bytes] = img[t, s0:s0 + ns].ravel()
            for s in range(ns):
                base = SMEM_WINDOW_BASE + s * plan.step_bytes
                db = launch.desc_b | (((base + plan.a_bytes) >> 4) & 0x3FFF)
                bt = _read_operand(smem, db, n, element_dtype(form.dtype_b))          # (N, K)
                if launch.rs:
                    a = unpack_a_fragment(launch.afrag[t, s0 + s], form.dtype_a)
                else:
                    a = _read_operand(smem, launch.desc_a | ((base >> 4) & 0x3FFF), 64,
                                      element_dtype(form.dtype_a))
                prod = a.astype(acc_t) @ bt.astype(acc_t).T
                d = scale * prod + (d if sd else 0)
                sd = True
        dout[t] = pack_accumulator(d.astype(element_dtype(form.dtype_d)), form.dtype_d)
    return dout


def _small_ints(form: WgmmaForm, tiles: int, chain: int, rng):
    lim = 3 if form.dtype_d == "f16" else 7
    a = rng.integers(-lim, lim + 1, size=(tiles, 64, form.k * chain))
    b = rng.integers(-lim, lim + 1, size=(tiles, form.k * chain, form.n))
    c = rng.integers(-50, 51, size=(tiles, 64, form.n))
    if form.dtype_a == "u8":
        a = np.abs(a)
    if form.dtype_b == "u8":
        b = np.abs(b)
    return (a.astype(element_dtype(form.dtype_a)), b.astype(element_dtype(form.dtype_b)),
            c.astype(element_dtype(form.dtype_d)))


CASES = [
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16", dict()),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16", dict(rs=True)),
    ("wgmma.mma_async.sync.aligned.m64n24k8.f32.tf32.tf32", dict(chain=3, rs=True)),
    ("wgmma.mma_async.sync.aligned.m64n40k32.f16.e4m3.e5m2", dict(chain=2, scale_d_first=False)),
    ("wgmma.mma_async.sync.aligned.m64n16k32.f32.e5m2.e4m3", dict(imm_scale_a=-1)),
    ("wgmma.mma_async.sync.aligned.m64n16k32.f32.e5m2.e5m2", dict(rs=True, imm_scale_a=-1, imm_scale_b=-1)),
    ("wgmma.mma_async.sync.aligned.m64n48k32.satfinite.s32.u8.s8", dict(rs=True, chain=2)),
    ("wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.u8", dict(chain=5, budget=3 * (2048 + 32 * 32))),
    ("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", dict(chain=7, rs=True, budget=3 * 64 * 32)),
]


@pytest.mark.parametrize("instr,kw", CASES)
def test_launch_emulation_matches_matrix_product(instr, kw):
    rng = np.random.default_rng(11)
    form = parse_wgmma(instr)
    chain = kw.get("chain", 1)
    a, b, c = _small_ints(form, 2, chain, rng)
    launch = prepare_launch(instr, a, b, c, **kw)
    assert launch.img.shape == (2, chain, launch.plan.step_bytes)
    if "budget" in kw:
        assert launch.plan.stages > 1
    d = finish_launch(launch, emulate(launch))
    acc_t = np.int64 if form.family == "int8" else np.float64
    want = c.astype(acc_t) if kw.get("scale_d_first", True) else np.zeros(c.shape, acc_t)
    s = kw.get("imm_scale_a", 1) * kw.get("imm_scale_b", 1)
    want = want + s * (a.astype(acc_t) @ b.astype(acc_t))
    assert d.dtype == element_dtype(form.dtype_d) and d.shape == c.shape
    assert (d.astype(acc_t) == want).all()


def test_launch_leading_shape_and_default_c():
    rng = np.random.default_rng(5)
    form = parse_wgmma("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16")
    a, b, _ = _small_ints(form, 6, 1, rng)
    launch = prepare_launch(form, a.reshape(2, 3, 64, 16), b.reshape(2, 3, 16, 8), None)
    d = finish_launch(launch, emulate(launch))
    assert d.shape == (2, 3, 64, 8)
    assert (d.reshape(6, 64, 8) == (a.astype(np.float64) @ b.astype(np.float64))).all()


def test_launch_input_errors():
    f = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"
    a = np.zeros((1, 64, 16), np.float16)
    b = np.zeros((1, 16, 8), np.float16)
    with pytest.raises(DTypeError):
        prepare_launch(f, a.astype(np.float32), b, None)
    with pytest.raises(DTypeError):
        prepare_launch(f, a, b, np.zeros((1, 64, 8), np.float16))  # f32 accumulator expected
    with pytest.raises(InputError):
        prepare_launch(f, a, b[:, :8], None)
    with pytest.raises(InputError):
        prepare_launch(f, a, np.zeros((2, 16, 8), np.float16), None)
    with pytest.raises(InputError):
        prepare_launch(f, a, b, None, chain=0)
