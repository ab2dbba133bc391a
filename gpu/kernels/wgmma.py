"""Run any dense sm_90a wgmma form on the GPU: kernel generator, host images, launcher.

One block of 128 threads (one warpgroup) per 64 x N tile.  The host builds the
no-swizzle K-major shared-memory images of A and B (:mod:`refmodel.layouts.descriptor`) and
the register images of C (and of A for the RS form, :mod:`refmodel.layouts.fragment`); the
kernel copies the images into shared memory, loads C into the accumulator
registers, issues ``chain`` wgmmas along K (the first with the runtime scale-d,
the rest accumulating), and writes the accumulator registers out raw.

Shared memory per chain step is ``[A image 2048 B (SS only)][B image N*32 B]``; a
chain longer than fits in :data:`SMEM_BUDGET` is staged: each stage copies its
steps in, issues them, waits, and syncs before the next stage overwrites them.

Only the K-major, no-swizzle, imm-trans = 0 operand layout is generated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from refmodel.layouts.descriptor import CORE_MATRIX_BYTES, MatrixDescriptor, kmajor_offsets
from refmodel.errors import InputError
from refmodel.layouts.fragment import (accumulator_layout, element_dtype, from_bits, pack_a_fragment,
                               pack_accumulator, raw_bits, unpack_accumulator)
from refmodel.wgmma_forms import M, WgmmaForm, parse_wgmma

from gpu.kernels.wgmma_asm import accumulator_io, imm_tail
from gpu.kernels.wgmma_asm import wgmma_asm as _wgmma_asm

THREADS = 128
KBYTES = 32  # every dense form reads 32 bytes of K per row
A_IMAGE_BYTES = M * KBYTES
SMEM_BUDGET = 200 * 1024  # dynamic shared memory per block (the sm_90 limit is 227 KB)
KERNEL_NAME = "wgmma_kernel"

# dense packing of one K-step operand: K-halves of an 8-row group adjacent
LBO = CORE_MATRIX_BYTES          # 128: step between the two K-adjacent core matrices
SBO = 2 * CORE_MATRIX_BYTES      # 256: step between 8-row groups


@dataclass(frozen=True)
class StagePlan:
    """How a chain is staged through shared memory."""

    chain: int
    steps_per_stage: int
    a_bytes: int      # A image bytes per step (0 for RS)
    b_bytes: int      # B image bytes per step

    @property
    def step_bytes(self) -> int:
        return self.a_bytes + self.b_bytes

    @property
    def stages(self) -> int:
        return -(-self.chain // self.steps_per_stage)

    @property
    def smem_bytes(self) -> int:
        return self.steps_per_stage * self.step_bytes


def plan_stages(form: WgmmaForm, chain: int, rs: bool, *, budget: int = SMEM_BUDGET) -> StagePlan:
    """Steps per stage so one stage fits in ``budget`` bytes of shared memory."""
    if not isinstance(chain, (int, np.integer)) or chain < 1:
        raise InputError(f"chain must be a positive int, got {chain!r}")
    a_bytes = 0 if rs else A_IMAGE_BYTES
    b_bytes = form.n * KBYTES
    per = max(1, min(int(chain), budget // (a_bytes + b_bytes)))
    return StagePlan(int(chain), per, a_bytes, b_bytes)


def _check_scales(form: WgmmaForm, imm_scale_a: int, imm_scale_b: int) -> None:
    for name, v in (("imm_scale_a", imm_scale_a), ("imm_scale_b", imm_scale_b)):
        if v not in (1, -1) or isinstance(v, bool):
            raise InputError(f"{name} must be 1 or -1, got {v!r}")
    if not form.has_imm_scale and (imm_scale_a, imm_scale_b) != (1, 1):
        raise InputError(f"{form.instr}: integer wgmma has no imm-scale operands; they must be 1")


def _form(instr: str | WgmmaForm) -> WgmmaForm:
    return instr if isinstance(instr, WgmmaForm) else parse_wgmma(instr)


def _chain_steps(wgmma_asm: str, rs: bool, load_a: str) -> tuple[str, str, str]:
    """(step body, before the step loop, after it) of a chain stage: RS steps set A's registers with
    ``load_a`` (C text defining ``a0..a3``) and wait per step; SS steps issue the whole stage's
    wgmmas in one commit group."""
    if rs:
        step_body = f"""{load_a}
      asm volatile("" : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3) :: "memory");
      const u64 db = desc_b | (u64)(((sbase + s * STEP_BYTES + A_BYTES) >> 4) & 0x3FFF);
      fence_acc(d);
      asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");
      {wgmma_asm}
      asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 0;\\n" ::: "memory");
      fence_acc(d);
      sd = 1;"""
        return step_body, "", ""
    step_body = f"""
      const u64 da = desc_a | (u64)(((sbase + s * STEP_BYTES) >> 4) & 0x3FFF);
      const u64 db = desc_b | (u64)(((sbase + s * STEP_BYTES + A_BYTES) >> 4) & 0x3FFF);
      {wgmma_asm}
      sd = 1;"""
    pre_loop = """
    fence_acc(d);
    asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");"""
    post_loop = """
    asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\\n" ::: "memory");
    fence_acc(d);"""
    return step_body, pre_loop, post_loop


def kernel_source(form: str | WgmmaForm, *, rs: bool = False, chain: int = 1, imm_scale_a: int = 1,
                  imm_scale_b: int = 1, budget: int = SMEM_BUDGET) -> str:
    """CUDA C++ (NVRTC, no headers; needs :data:`gpu.kernels.runtime.PRELUDE`) of the kernel for one form.

    Kernel ``wgmma_kernel(img, afrag, cin, dout, desc_a, desc_b, scale_d_first)``:
    ``img`` u32 words of (T, chain, step_bytes) images, ``afrag`` (T, chain, 128, 4)
    A registers (RS only), ``cin``/``dout`` (T, 128, d_regs) accumulator registers,
    ``desc_a``/``desc_b`` descriptor templates with a zero start address.
    """
    form = _form(form)
    _check_scales(form, imm_scale_a, imm_scale_b)
    plan = plan_stages(form, chain, rs, budget=budget)
    nregs = form.d_regs
    acc_t, con, load, store = accumulator_io(form.dtype_d, "cbase")
    wgmma_asm = _wgmma_asm(form.instr, nregs, form.dtype_d, rs=rs,
                           tail=imm_tail(form, rs, imm_scale_a, imm_scale_b))  # no imm-trans: 0

    step_body, pre_loop, post_loop = _chain_steps(wgmma_asm, rs, """
      const u32* ap = afrag + (((u64)tile * CHAIN + s0 + s) * 128 + t) * 4;
      u32 a0 = ap[0], a1 = ap[1], a2 = ap[2], a3 = ap[3];""")

    return f"""
// {form.instr} rs={int(rs)} chain={chain} imm_scale=({imm_scale_a},{imm_scale_b})
#define NREGS {nregs}
#define CHAIN {plan.chain}
#define STEPS {plan.steps_per_stage}
#define A_BYTES {plan.a_bytes}
#define STEP_BYTES {plan.step_bytes}
#define STEP_WORDS (STEP_BYTES / 4)

__device__ __forceinline__ void fence_acc({acc_t} (&d)[NREGS]) {{
#pragma unroll
  for (int i = 0; i < NREGS; ++i) asm volatile("" : "{con}"(d[i]) :: "memory");
}}

extern "C" __global__ void __launch_bounds__(128, 1)
{KERNEL_NAME}(const u32* __restrict__ img, const u32* __restrict__ afrag,
             const u32* __restrict__ cin, u32* __restrict__ dout,
             u64 desc_a, u64 desc_b, int scale_d_first)
{{
  extern __shared__ __align__(128) u32 smem[];
  const int t = threadIdx.x;
  const u64 tile = blockIdx.x;
  u32 sbase;
  asm volatile("{{ .reg .u64 g; cvta.to.shared.u64 g, %1; cvt.u32.u64 %0, g; }}"
               : "=r"(sbase) : "l"((u64)smem));
  {acc_t} d[NREGS];
  const u64 cbase = (tile * 128 + t) * NREGS;
#pragma unroll
  for (int i = 0; i < NREGS; ++i) d[i] = {load};
  int sd = scale_d_first;
  for (int s0 = 0; s0 < CHAIN; s0 += STEPS) {{
    const int ns = (CHAIN - s0) < STEPS ? (CHAIN - s0) : STEPS;
    const u32* src = img + (tile * CHAIN + s0) * STEP_WORDS;
    for (int i = t; i < ns * STEP_WORDS; i += 128) smem[i] = src[i];
    asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");
    __syncthreads();{pre_loop}
    for (int s = 0; s < ns; ++s) {{{step_body}
    }}{post_loop}
    __syncthreads();
  }}
#pragma unroll
  for (int i = 0; i < NREGS; ++i) dout[cbase + i] = {store};
}}
"""


GATHER_KERNEL_NAME = "wgmma_gather_kernel"


def gather_kernel_source(form: str | WgmmaForm, *, rs: bool = False, chain: int = 1, imm_scale_a: int = 1,
                         imm_scale_b: int = 1, budget: int = SMEM_BUDGET) -> str:
    """The kernel of :func:`kernel_source` that builds its own inputs from element arrays (the GPU fuzz
    engine's: one uint32 per element, A (T, 64, chain*K), B (T, chain*K, N), C (T, 64, N)) and writes D
    per element (uint32, row * N + col) — no image, register or scatter passes outside the kernel.

    Kernel ``wgmma_gather_kernel(a, b, c, dout, img_src, afrag_index, desc_a, desc_b, scale_d_first)``:
    ``img_src`` (chain * step_bytes) int32, the byte of the tile's (A bytes | B bytes) each image byte
    holds (:func:`gpu.kernels.form_runner.job_tables`); ``afrag_index`` (chain, 128, 4, per) the A
    element of each RS register slot; the accumulator's element positions are computed in the kernel."""
    form = _form(form)
    _check_scales(form, imm_scale_a, imm_scale_b)
    plan = plan_stages(form, chain, rs, budget=budget)
    nregs = form.d_regs
    acc_t, con, _, _ = accumulator_io(form.dtype_d, "cbase")
    asm = _wgmma_asm(form.instr, nregs, form.dtype_d, rs=rs, tail=imm_tail(form, rs, imm_scale_a, imm_scale_b))
    from refmodel.verify.seeded import FORMATS

    es_a, es_b = FORMATS[form.dtype_a][2] // 8, FORMATS[form.dtype_b][2] // 8
    f16acc = form.dtype_d == "f16"
    per_a = {1: 4, 2: 2, 4: 1}[es_a]
    # accumulator element j of thread t (refmodel.layouts.fragment.accumulator_layout, checked by a test):
    # row 16*(t/32) + (t%32)/4 + 8*((j>>1)&1), column 8*(j>>2) + 2*(t%4) + (j&1); an f16 register
    # holds elements 2i (low half) and 2i+1
    pos = "(row0 + 8 * (((J) >> 1) & 1)) * {n} + 8 * ((J) >> 2) + col0 + ((J) & 1)".format(n=form.n)
    if f16acc:
        load_c = (f"d[i] = cg[{pos.replace('J', '2 * i')}] | (cg[{pos.replace('J', '2 * i + 1')}] << 16);")
        store_d = (f"dg[{pos.replace('J', '2 * i')}] = d[i] & 0xFFFFu; dg[{pos.replace('J', '2 * i + 1')}] = d[i] >> 16;")
    else:
        cast = "__uint_as_float" if form.dtype_d == "f32" else ""
        back = "__float_as_uint" if form.dtype_d == "f32" else ""
        load_c = f"d[i] = {cast}(cg[{pos.replace('J', 'i')}]);"
        store_d = f"dg[{pos.replace('J', 'i')}] = {back}(d[i]);"
    step_body, pre_loop, post_loop = _chain_steps(asm, rs, """
      u32 a0, a1, a2, a3;
      {
        u32 r[4];
        const int* ix = afrag_index + ((s0 + s) * 128 + t) * 4 * PER_A;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          u32 v = 0;
#pragma unroll
          for (int e = 0; e < PER_A; ++e) v |= (ag[ix[j * PER_A + e]] & EMASK_A) << (e * (32 / PER_A));
          r[j] = v;
        }
        a0 = r[0]; a1 = r[1]; a2 = r[2]; a3 = r[3];
      }""")
    return f"""
// gather {form.instr} rs={int(rs)} chain={chain} imm_scale=({imm_scale_a},{imm_scale_b})
#define NREGS {nregs}
#define CHAIN {plan.chain}
#define STEPS {plan.steps_per_stage}
#define A_BYTES {plan.a_bytes}
#define STEP_BYTES {plan.step_bytes}
#define STEP_WORDS (STEP_BYTES / 4)
#define ES_A {es_a}
#define ES_B {es_b}
#define PER_A {per_a}
#define EMASK_A {hex((1 << (8 * es_a)) - 1) if es_a < 4 else "0xFFFFFFFFu"}
#define A_ELEMS (64LL * CHAIN * {form.k})
#define B_ELEMS ((long long)CHAIN * {form.k} * {form.n})
#define C_ELEMS (64LL * {form.n})

__device__ __forceinline__ void fence_acc({acc_t} (&d)[NREGS]) {{
#pragma unroll
  for (int i = 0; i < NREGS; ++i) asm volatile("" : "{con}"(d[i]) :: "memory");
}}

__device__ __forceinline__ u32 gather_byte(const u32* ag, const u32* bg, int src) {{
  const int a_len = (int)(A_ELEMS * ES_A);
  if (src < a_len) return (ag[src / ES_A] >> (8 * (src % ES_A))) & 0xFFu;
  src -= a_len;
  return (bg[src / ES_B] >> (8 * (src % ES_B))) & 0xFFu;
}}

extern "C" __global__ void __launch_bounds__(128)
{GATHER_KERNEL_NAME}(const u32* __restrict__ a, const u32* __restrict__ b, const u32* __restrict__ c,
                     u32* __restrict__ dout, const int* __restrict__ img_src,
                     const int* __restrict__ afrag_index, u64 desc_a, u64 desc_b, int scale_d_first)
{{
  extern __shared__ __align__(128) u32 smem[];
  const int t = threadIdx.x;
  const u64 tile = blockIdx.x;
  const u32* ag = a + tile * A_ELEMS;
  const u32* bg = b + tile * B_ELEMS;
  const u32* cg = c + tile * C_ELEMS;
  u32* dg = dout + tile * C_ELEMS;
  const int row0 = 16 * (t / 32) + (t % 32) / 4, col0 = 2 * (t % 4);
  u32 sbase;
  asm volatile("{{ .reg .u64 g; cvta.to.shared.u64 g, %1; cvt.u32.u64 %0, g; }}"
               : "=r"(sbase) : "l"((u64)smem));
  {acc_t} d[NREGS];
#pragma unroll
  for (int i = 0; i < NREGS; ++i) {{ {load_c} }}
  int sd = scale_d_first;
  for (int s0 = 0; s0 < CHAIN; s0 += STEPS) {{
    const int ns = (CHAIN - s0) < STEPS ? (CHAIN - s0) : STEPS;
    const int* src = img_src + s0 * STEP_BYTES;
    for (int w = t; w < ns * STEP_WORDS; w += 128) {{
      const int* q = src + 4 * w;
      smem[w] = gather_byte(ag, bg, q[0]) | (gather_byte(ag, bg, q[1]) << 8) |
                (gather_byte(ag, bg, q[2]) << 16) | (gather_byte(ag, bg, q[3]) << 24);
    }}
    asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");
    __syncthreads();{pre_loop}
    for (int s = 0; s < ns; ++s) {{{step_body}
    }}{post_loop}
    __syncthreads();
  }}
#pragma unroll
  for (int i = 0; i < NREGS; ++i) {{ {store_d} }}
}}
"""


@dataclass
class Launch:
    """Everything one kernel launch needs, built on the host (no GPU needed)."""

    form: WgmmaForm
    rs: bool
    plan: StagePlan
    tiles: int
    lead_shape: tuple[int, ...]
    img: np.ndarray      # (T, chain, step_bytes) uint8
    afrag: np.ndarray    # (T, chain, 128, 4) uint32, or (1,) dummy for SS
    c_bits: np.ndarray   # (T, 64, N) raw accumulator element bits (uint16 / uint32)
    desc_a: int          # template, start address 0
    desc_b: int
    scale_d_first: bool
    imm_scale_a: int
    imm_scale_b: int
    source: str

    @property
    def cin(self) -> np.ndarray:
        """(T, 128, d_regs) uint32 register images of C (refmodel.layouts.fragment layout)."""
        return pack_accumulator(from_bits(self.c_bits, self.form.dtype_d), self.form.dtype_d)

    @property
    def acc_index(self) -> np.ndarray:
        """Flat (row * N + col) of every accumulator register slot, in (thread, register,
        slot) order: the gather that turns C into register images (done on the GPU)."""
        rows, cols = accumulator_layout(self.form.n, self.form.dtype_d)
        return (rows * self.form.n + cols).reshape(-1).astype(np.int64)


def _check_operand(x: Any, name: str, dtype_name: str, shape_tail: tuple[int, int]) -> np.ndarray:
    x = np.asarray(x)
    raw_bits(x, dtype_name)  # dtype check with a one-line DTypeError
    if x.ndim < 2 or tuple(x.shape[-2:]) != shape_tail:
        raise InputError(f"{name} must have shape (..., {shape_tail[0]}, {shape_tail[1]}), got {x.shape}")
    return x


def _kmajor_images(mats: np.ndarray, rows: int) -> np.ndarray:
    """(..., rows, 32 bytes) uint8 K-major rows -> (..., rows*32) canonical images."""
    off = kmajor_offsets(rows, KBYTES, lbo=LBO, sbo=SBO)
    img = np.zeros(mats.shape[:-2] + (rows * KBYTES,), dtype=np.uint8)
    img[..., off] = mats
    return img


def prepare_launch(instr: str | WgmmaForm, a: np.ndarray, b: np.ndarray, c: np.ndarray | None, *,
                   chain: int = 1, scale_d_first: bool = True, imm_scale_a: int = 1,
                   imm_scale_b: int = 1, rs: bool = False, budget: int = SMEM_BUDGET) -> Launch:
    """Check the inputs and build the images and source of one launch (CPU only)."""
    form = _form(instr)
    _check_scales(form, imm_scale_a, imm_scale_b)
    plan = plan_stages(form, chain, rs, budget=budget)
    k, n = form.k, form.n
    a = _check_operand(a, "a", form.dtype_a, (M, k * chain))
    b = _check_operand(b, "b", form.dtype_b, (k * chain, n))
    lead = a.shape[:-2]
    if b.shape[:-2] != lead:
        raise InputError(f"a and b must have the same leading (tile) shape, got {a.shape[:-2]} and {b.shape[:-2]}")
    if c is None:
        c = np.zeros(lead + (M, n), dtype=element_dtype(form.dtype_d))
    c = _check_operand(c, "c", form.dtype_d, (M, n))
    if c.shape[:-2] != lead:
        raise InputError(f"c must have the leading (tile) shape {lead} of a and b, got {c.shape[:-2]}")
    tiles = int(np.prod(lead, dtype=np.int64)) if lead else 1
    if tiles < 1:
        raise InputError("at least one tile is needed")
    a = a.reshape(tiles, M, chain, k)
    b = b.reshape(tiles, chain, k, n)
    c = c.reshape(tiles, M, n)

    # per step: A (64, K) and B^T (N, K), both K-major rows of 32 bytes
    a_steps = np.ascontiguousarray(a.transpose(0, 2, 1, 3))            # (T, chain, 64, K)
    bt_steps = np.ascontiguousarray(b.transpose(0, 1, 3, 2))           # (T, chain, N, K)
    b_bytes = bt_steps.view(np.uint8).reshape(tiles, chain, n, KBYTES)
    parts = []
    if not rs:
        parts.append(_kmajor_images(a_steps.view(np.uint8).reshape(tiles, chain, M, KBYTES), M))
    parts.append(_kmajor_images(b_bytes, n))
    img = np.ascontiguousarray(np.concatenate(parts, axis=-1))
    assert img.shape[-1] == plan.step_bytes
    afrag = pack_a_fragment(a_steps, form.dtype_a) if rs else np.zeros(1, dtype=np.uint32)
    c_bits = np.ascontiguousarray(raw_bits(c, form.dtype_d))
    tmpl = MatrixDescriptor(0, LBO, SBO).encode()
    src = kernel_source(form, rs=rs, chain=chain, imm_scale_a=imm_scale_a,
                        imm_scale_b=imm_scale_b, budget=budget)
    return Launch(form, bool(rs), plan, tiles, tuple(lead), img, np.ascontiguousarray(afrag), c_bits,
                  tmpl, tmpl, bool(scale_d_first), int(imm_scale_a), int(imm_scale_b), src)


def finish_launch(launch: Launch, dout: np.ndarray) -> np.ndarray:
    """(T, 128, d_regs) raw registers -> (..., 64, N) accumulator in refmodel's dtype."""
    d = unpack_accumulator(np.asarray(dout, dtype=np.uint32).reshape(launch.tiles, THREADS, -1),
                           launch.form.n, launch.form.dtype_d)
    return d.reshape(launch.lead_shape + (M, launch.form.n))


def _launch_on_device(launch: Launch):
    """Run the kernel; returns (cupy module, raw registers on the device, flat index on the device).

    C goes up in math layout and is gathered into register images on the GPU with the
    refmodel.layouts.fragment layout (:attr:`Launch.acc_index`)."""
    from gpu.kernels.runtime import compile_module, require_device

    cp = require_device()
    mod = compile_module(launch.source)
    kern = mod.get_function(KERNEL_NAME)
    smem = launch.plan.smem_bytes
    if smem > 48 * 1024:
        import warnings

        with warnings.catch_warnings():  # newer cupy moved the attribute to kern.function
            warnings.simplefilter("ignore", DeprecationWarning)
            kern.max_dynamic_shared_size_bytes = smem
    img = cp.asarray(launch.img.view(np.uint32))
    afrag = cp.asarray(launch.afrag)
    idx = cp.asarray(launch.acc_index)
    c_dev = cp.asarray(launch.c_bits.reshape(launch.tiles, -1))
    cin = cp.ascontiguousarray(c_dev[:, idx]).view(cp.uint32)   # (T, 128 * d_regs)
    dout = cp.zeros_like(cin)
    kern((launch.tiles,), (THREADS,),
         (img, afrag, cin, dout, np.uint64(launch.desc_a), np.uint64(launch.desc_b),
          np.int32(1 if launch.scale_d_first else 0)),
         shared_mem=smem)
    cp.cuda.runtime.deviceSynchronize()
    return cp, dout, idx


def execute(launch: Launch) -> np.ndarray:
    """Launch on device 0 and return the raw (T, 128, d_regs) uint32 accumulator registers."""
    cp, dout, _ = _launch_on_device(launch)
    return cp.asnumpy(dout).reshape(launch.tiles, THREADS, -1)


def execute_math(launch: Launch) -> np.ndarray:
    """Launch and return D (..., 64, N) in refmodel's dtype; the registers are scattered
    back to matrix positions on the GPU (same index as the gather)."""
    cp, dout, idx = _launch_on_device(launch)
    utype = launch.c_bits.dtype
    d = cp.empty((launch.tiles, M * launch.form.n), dtype=utype)
    d[:, idx] = dout.view(utype)
    bits = cp.asnumpy(d).reshape(launch.lead_shape + (M, launch.form.n))
    return from_bits(bits, launch.form.dtype_d)


def run_wgmma_chain(instr: str | WgmmaForm, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, *,
                    chain: int = 1, scale_d_first: bool = True, imm_scale_a: int = 1,
                    imm_scale_b: int = 1, rs: bool = False, isolate: bool = False) -> np.ndarray:
    """D after ``chain`` wgmmas along K on the GPU: a (T, 64, K*chain), b (T, K*chain, N), c (T, 64, N).

    Step ``s`` multiplies ``a[..., s*K:(s+1)*K]`` by ``b[..., s*K:(s+1)*K, :]``; the first
    step uses ``scale_d_first`` (False: C is ignored), the others accumulate.
    ``isolate=True`` runs the launch in a child process (:mod:`gpu.kernels.isolate`) so a
    device fault cannot kill the caller's CUDA context.
    """
    if isolate:
        from gpu.kernels.isolate import default_runner

        return default_runner().call("gpu.kernels.wgmma", "run_wgmma_chain", instr if isinstance(instr, str) else instr.instr,
                                     a, b, c, chain=chain, scale_d_first=scale_d_first,
                                     imm_scale_a=imm_scale_a, imm_scale_b=imm_scale_b, rs=rs)
    launch = prepare_launch(instr, a, b, c, chain=chain, scale_d_first=scale_d_first,
                            imm_scale_a=imm_scale_a, imm_scale_b=imm_scale_b, rs=rs)
    return execute_math(launch)


def run_wgmma(instr: str | WgmmaForm, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, *,
              scale_d: bool = True, imm_scale_a: int = 1, imm_scale_b: int = 1, rs: bool = False,
              isolate: bool = False) -> np.ndarray:
    """D = scale_d*C + (imm_scale_a*A) @ (imm_scale_b*B) on the GPU, one tile per block.

    a (T, 64, K), b (T, K, N), c (T, 64, N) (any leading shape, or none) in the CPU
    model's dtypes; returns D (T, 64, N) in the accumulator's dtype.
    """
    return run_wgmma_chain(instr, a, b, c, chain=1, scale_d_first=scale_d, imm_scale_a=imm_scale_a,
                           imm_scale_b=imm_scale_b, rs=rs, isolate=isolate)


def run_case(case, *, isolate: bool = False) -> np.ndarray:
    """The GPU's D for a :class:`refmodel.verify.case.WgmmaCase` (needs an sm_90 device)."""
    return run_wgmma_chain(case.instr, case.a, case.b, case.c, chain=case.chain,
                           scale_d_first=case.scale_d, imm_scale_a=case.imm_scale_a,
                           imm_scale_b=case.imm_scale_b, rs=case.rs, isolate=isolate)


__all__ = ["run_case", "kernel_source", "run_wgmma", "run_wgmma_chain", "prepare_launch", "finish_launch",
           "execute", "execute_math", "plan_stages", "StagePlan", "Launch", "LBO", "SBO"]


def job_runner(isolate: bool) -> Callable:
    """hw(job, a, b, c) -> D of a :class:`refmodel.verify.jobs.Job` on the GPU (in a child process
    when ``isolate``)."""

    def hw(job, a, b, c):
        return run_wgmma_chain(job.instr, a, b, c, chain=job.chain, scale_d_first=job.scale_d,
                               imm_scale_a=job.imm_scale_a, imm_scale_b=job.imm_scale_b, rs=job.rs,
                               isolate=isolate)
    return hw
