"""Layout instructions on the GPU: ldmatrix, stmatrix, wgmma through raw descriptors, an
epilogue (cvt + stmatrix.x4 loop), and TMA tile loads — each returning exactly what
refmodel.machine returns, so a differ compares them.

Every launch runs many *cases*, one per block; each case brings its own shared-memory
image (copied into dynamic shared memory at the kernel's shared base address, which is
reported back: swizzles act on absolute addresses).  Descriptors are passed with start
addresses relative to the image; the kernel adds ``base >> 4`` to the start field.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refmodel.errors import InputError
from refmodel.layouts.stmatrix import parse_matrix_instr
from refmodel.wgmma_forms import WgmmaForm, parse_wgmma

from gpu.kernels.runtime import compile_module, require_device
from gpu.kernels.wgmma_asm import accumulator_io, imm_tail, wgmma_asm

_SBASE = r"""
__device__ __forceinline__ u32 smem_base_of(const void* p) {
  u32 s; asm volatile("{ .reg .u64 g; cvta.to.shared.u64 g, %1; cvt.u32.u64 %0, g; }" : "=r"(s) : "l"((u64)p));
  return s;
}
"""


def _set_smem(kern, nbytes: int) -> None:
    if nbytes > 48 * 1024:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            kern.max_dynamic_shared_size_bytes = nbytes


# ----------------------------------------------------------------------------- ldmatrix / stmatrix

def matrix_kernel_source(instr: str) -> str:
    """Kernel ``matrix_kernel(img_in, img_out, addrs, regs_in, regs_out, bases, size)``: one warp
    a case; ldmatrix loads ``regs_out``, stmatrix stores ``regs_in`` and copies the image out."""
    f = parse_matrix_instr(instr)
    n = f.num
    regs = ", ".join(f"%{i}" for i in range(n))
    if f.op == "ldmatrix":
        outs = ", ".join(f'"=r"(r[{i}])' for i in range(n))
        body = (f'asm volatile("{f.instr} {{{regs}}}, [%{n}];\\n" : {outs} : "r"(sb + a) : "memory");\n'
                f"  for (int i = 0; i < {n}; ++i) regs_out[(c * 32 + l) * {n} + i] = r[i];")
    else:
        ins = ", ".join(f'"r"(r[{i}])' for i in range(n))
        body = (f"for (int i = 0; i < {n}; ++i) r[i] = regs_in[(c * 32 + l) * {n} + i];\n"
                f'  asm volatile("{f.instr} [%0], {{{", ".join(f"%{i + 1}" for i in range(n))}}};\\n" '
                f':: "r"(sb + a), {ins} : "memory");')
    return _SBASE + f"""
extern "C" __global__ void matrix_kernel(const u8* __restrict__ img_in, u8* __restrict__ img_out,
    const u32* __restrict__ addrs, const u32* __restrict__ regs_in, u32* __restrict__ regs_out,
    u32* __restrict__ bases, int size)
{{
  extern __shared__ __align__(1024) u8 sm[];
  const int l = threadIdx.x; const long c = blockIdx.x;
  for (int i = l; i < size; i += 32) sm[i] = img_in[c * size + i];
  __syncwarp();
  const u32 sb = smem_base_of(sm);
  if (l == 0) bases[c] = sb;
  const u32 a = addrs[c * 32 + l];
  u32 r[{n}];
  {body}
  __syncwarp();
  for (int i = l; i < size; i += 32) img_out[c * size + i] = sm[i];
}}
"""


def run_matrix(instr: str, images: np.ndarray, addrs: np.ndarray, regs: np.ndarray | None = None):
    """Run ldmatrix/stmatrix on C cases: images uint8 (C, size), addrs (C, 32), regs (C, 32, num)
    for stmatrix.  Returns (regs_out (C, 32, num), images_out (C, size), bases (C,))."""
    f = parse_matrix_instr(instr)
    cp = require_device()
    images = np.ascontiguousarray(images, dtype=np.uint8)
    c, size = images.shape
    if size % 16 or size > 200 * 1024:
        raise InputError(f"image size must be a multiple of 16 up to 200 KiB, got {size}")
    mod = compile_module(matrix_kernel_source(f.instr))
    k = mod.get_function("matrix_kernel")
    _set_smem(k, size)
    rin = np.zeros((c, 32, f.num), np.uint32) if regs is None else np.ascontiguousarray(regs, dtype=np.uint32)
    d_img = cp.asarray(images)
    d_out = cp.zeros_like(d_img)
    d_addr = cp.asarray(np.ascontiguousarray(addrs, dtype=np.uint32))
    d_rin = cp.asarray(rin)
    d_rout = cp.zeros((c, 32, f.num), dtype=cp.uint32)
    d_base = cp.zeros(c, dtype=cp.uint32)
    k((c,), (32,), (d_img, d_out, d_addr, d_rin, d_rout, d_base, np.int32(size)), shared_mem=size)
    cp.cuda.runtime.deviceSynchronize()
    return cp.asnumpy(d_rout), cp.asnumpy(d_out), cp.asnumpy(d_base)


# ----------------------------------------------------------------------------- wgmma via descriptors

@dataclass(frozen=True)
class WgmmaVariant:
    """What is compiled into one wgmma kernel (immediates); the rest is per case."""

    instr: str
    rs: bool = False
    trans_a: int = 0
    trans_b: int = 0
    imm_scale_a: int = 1
    imm_scale_b: int = 1

    @property
    def form(self) -> WgmmaForm:
        return parse_wgmma(self.instr)


def wgmma_kernel_source(v: WgmmaVariant) -> str:
    """Kernel ``wgmma_desc_kernel(img, size, desc_a, desc_b, afrag, cin, dout, scale_d, bases)``."""
    f = v.form
    if (v.trans_a or v.trans_b) and not f.has_transpose:
        raise InputError(f"{f.instr}: imm-trans only for f16/bf16")
    if v.rs and v.trans_a:
        raise InputError("RS wgmma has no imm-trans-a")
    nregs = f.d_regs
    acc_t, con, load, store = accumulator_io(f.dtype_d, "cb")
    asm = wgmma_asm(f.instr, nregs, f.dtype_d, rs=v.rs,
                    tail=imm_tail(f, v.rs, v.imm_scale_a, v.imm_scale_b, v.trans_a, v.trans_b))
    return _SBASE + f"""
#define NREGS {nregs}
extern "C" __global__ void __launch_bounds__(128, 1)
wgmma_desc_kernel(const u8* __restrict__ img, int size, const u64* __restrict__ desc_a,
                  const u64* __restrict__ desc_b, const u32* __restrict__ afrag,
                  const u32* __restrict__ cin, u32* __restrict__ dout, const int* __restrict__ scale_d,
                  u32* __restrict__ bases)
{{
  extern __shared__ __align__(1024) u8 sm[];
  const int t = threadIdx.x; const long c = blockIdx.x;
  const uint4* src = (const uint4*)(img + c * size);
  for (int i = t; i < size / 16; i += 128) ((uint4*)sm)[i] = src[i];
  asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");
  __syncthreads();
  const u32 sb = smem_base_of(sm);
  if (t == 0) bases[c] = sb;
  const u64 da = desc_a[c] + (u64)(sb >> 4);
  const u64 db = desc_b[c] + (u64)(sb >> 4);
  const u32* ap = afrag + (c * 128 + t) * 4;
  u32 a0 = ap[0], a1 = ap[1], a2 = ap[2], a3 = ap[3];
  {acc_t} d[NREGS];
  const long cb = (c * 128 + t) * NREGS;
#pragma unroll
  for (int i = 0; i < NREGS; ++i) d[i] = {load};
  const int sd = scale_d[c];
#pragma unroll
  for (int i = 0; i < NREGS; ++i) asm volatile("" : "{con}"(d[i]) :: "memory");
  asm volatile("" : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3) :: "memory");
  asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");
  {asm}
  asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\\n" ::: "memory");
#pragma unroll
  for (int i = 0; i < NREGS; ++i) asm volatile("" : "{con}"(d[i]) :: "memory");
#pragma unroll
  for (int i = 0; i < NREGS; ++i) dout[cb + i] = {store};
}}
"""


def run_wgmma_desc(v: WgmmaVariant, images: np.ndarray, desc_a: np.ndarray, desc_b: np.ndarray,
                   c_regs: np.ndarray, scale_d: np.ndarray, a_regs: np.ndarray | None = None):
    """C cases of one variant.  images uint8 (C, size); desc_a/desc_b uint64 (C,) with start
    addresses relative to the image; c_regs uint32 (C, 128, regs); scale_d int (C,);
    a_regs uint32 (C, 128, 4) for RS.  Returns (d_regs (C, 128, regs), bases (C,))."""
    cp = require_device()
    f = v.form
    images = np.ascontiguousarray(images, dtype=np.uint8)
    c, size = images.shape
    if size % 16:
        raise InputError(f"image size must be a multiple of 16, got {size}")
    mod = compile_module(wgmma_kernel_source(v))
    k = mod.get_function("wgmma_desc_kernel")
    _set_smem(k, size)
    af = np.zeros((c, 128, 4), np.uint32) if a_regs is None else np.ascontiguousarray(a_regs, dtype=np.uint32)
    d_img = cp.asarray(images)
    d_da = cp.asarray(np.ascontiguousarray(desc_a, dtype=np.uint64))
    d_db = cp.asarray(np.ascontiguousarray(desc_b, dtype=np.uint64))
    d_af = cp.asarray(af)
    d_c = cp.asarray(np.ascontiguousarray(c_regs, dtype=np.uint32))
    d_out = cp.zeros_like(d_c)
    d_sd = cp.asarray(np.ascontiguousarray(scale_d, dtype=np.int32))
    d_base = cp.zeros(c, dtype=cp.uint32)
    k((c,), (128,), (d_img, np.int32(size), d_da, d_db, d_af, d_c, d_out, d_sd, d_base), shared_mem=size)
    cp.cuda.runtime.deviceSynchronize()
    return cp.asnumpy(d_out), cp.asnumpy(d_base)


# ----------------------------------------------------------------------------- epilogue

def epilogue_kernel_source(n: int, out_type: str, swizzle_bits: int) -> str:
    """Kernel ``epilogue_kernel(acc, img_out, lane_addrs, bases)``: the seed §5.4 epilogue of a
    64 x N f32 accumulator: cvt.rn.{f16x2,bf16x2}.f32 per register pair, then a loop over
    the N/16 slices, each one stmatrix.x4 per warp into a row-major tile cut into column
    blocks of W bytes (W = 16 << swizzle_bits; the whole 2N-byte row without swizzle),
    swizzled on the absolute address.  Records each lane's stmatrix address per slice."""
    if out_type not in ("f16", "bf16"):
        raise InputError(f"epilogue output must be f16 or bf16, got {out_type!r}")
    nregs = n // 2
    slices = n // 16
    w = (16 << swizzle_bits) if swizzle_bits else 2 * n
    cvt = f"cvt.rn.{out_type}x2.f32"
    mask = (1 << swizzle_bits) - 1
    return _SBASE + f"""
extern "C" __global__ void __launch_bounds__(128, 1)
epilogue_kernel(const float* __restrict__ acc, u8* __restrict__ img_out, u32* __restrict__ lane_addrs,
                u32* __restrict__ bases)
{{
  extern __shared__ __align__(1024) u8 sm[];
  const int t = threadIdx.x, w = t / 32, l = t % 32; const long c = blockIdx.x;
  const int SIZE = 64 * {2 * n};
  for (int i = t; i < SIZE / 4; i += 128) ((u32*)sm)[i] = 0xA5A5A5A5u;
  __syncthreads();
  const u32 sb = smem_base_of(sm);
  if (t == 0) bases[c] = sb;
  float d[{nregs}];
  for (int i = 0; i < {nregs}; ++i) d[i] = acc[(c * 128 + t) * {nregs} + i];
  u32 p[{nregs // 2}];
#pragma unroll
  for (int j = 0; j < {nregs // 2}; ++j)
    asm volatile("{cvt} %0, %1, %2;\\n" : "=r"(p[j]) : "f"(d[2 * j + 1]), "f"(d[2 * j]));
#pragma unroll
  for (int s = 0; s < {slices}; ++s) {{
    const int m = l / 8;
    const int row = 16 * w + (l % 8) + 8 * (m % 2);
    const int colb = 2 * (16 * s + 8 * (m / 2));
    const u32 logical = (u32)(colb / {w}) * (64 * {w}) + row * {w} + (colb % {w});
    u32 a = sb + logical;
    a ^= ((a >> 7) & {mask}u) << 4;
    lane_addrs[((c * {slices} + s) * 128) + t] = a - sb;
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {{%1, %2, %3, %4}};\\n"
                 :: "r"(a), "r"(p[4 * s]), "r"(p[4 * s + 1]), "r"(p[4 * s + 2]), "r"(p[4 * s + 3]) : "memory");
  }}
  __syncthreads();
  for (int i = t; i < SIZE / 4; i += 128) ((u32*)(img_out + c * SIZE))[i] = ((u32*)sm)[i];
}}
"""


def run_epilogue(acc_regs: np.ndarray, n: int, out_type: str, swizzle_bits: int):
    """acc_regs float32/uint32 (C, 128, N/2) f32 accumulator registers.  Returns
    (images (C, 64*2N) uint8, lane addresses (C, N/16, 128) uint32, bases (C,))."""
    cp = require_device()
    acc = np.ascontiguousarray(acc_regs).view(np.float32)
    c = acc.shape[0]
    size = 64 * 2 * n
    mod = compile_module(epilogue_kernel_source(n, out_type, swizzle_bits))
    k = mod.get_function("epilogue_kernel")
    _set_smem(k, size)
    d_acc = cp.asarray(acc)
    d_img = cp.zeros((c, size), dtype=cp.uint8)
    d_la = cp.zeros((c, n // 16, 128), dtype=cp.uint32)
    d_base = cp.zeros(c, dtype=cp.uint32)
    k((c,), (128,), (d_acc, d_img, d_la, d_base), shared_mem=size)
    cp.cuda.runtime.deviceSynchronize()
    return cp.asnumpy(d_img), cp.asnumpy(d_la), cp.asnumpy(d_base)


# ----------------------------------------------------------------------------- TMA

TMA_SOURCE = _SBASE + r"""
struct __align__(64) TmapT { u64 v[16]; };
extern "C" __global__ void tma_kernel(const __grid_constant__ TmapT tmap, int x, int y, u32 dst_off,
    u32 tx, u8* __restrict__ img_out, int size, u32* __restrict__ bases)
{
  extern __shared__ __align__(1024) u8 sm[];
  __shared__ __align__(8) u64 mbar;
  const int t = threadIdx.x;
  for (int i = t; i < size / 4; i += blockDim.x) ((u32*)sm)[i] = 0x5A5A5A5Au;
  const u32 sb = smem_base_of(sm);
  const u32 bar = smem_base_of(&mbar);
  if (t == 0) {
    bases[0] = sb;
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(bar));
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  if (t == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(tx) : "memory");
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(sb + dst_off), "l"((u64)&tmap), "r"(x), "r"(y), "r"(bar) : "memory");
    asm volatile("{\n.reg .pred P;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 P, [%0], 0;\n@!P bra WAIT;\n}\n" :: "r"(bar) : "memory");
  }
  __syncthreads();
  for (int i = t; i < size / 4; i += blockDim.x) ((u32*)img_out)[i] = ((u32*)sm)[i];
}
"""

TMAP_DTYPE = np.dtype([("v", np.uint64, (16,))])


_CU_DTYPE = {1: 0, 2: 1, 4: 2}  # CU_TENSOR_MAP_DATA_TYPE_UINT8 / UINT16 / UINT32


def encode_tensor_map(ptr: int, dims: tuple[int, int], elem_bytes: int, box: tuple[int, int],
                      swizzle_tma: int) -> bytes:
    """128-byte CUtensorMap of a 2-D row-major tensor (dims = (rows, cols)) at device address
    ``ptr``, made by the driver's ``cuTensorMapEncodeTiled`` (called through ctypes on
    libcuda, so no binding layer stands between us and the bytes).  ``box`` = (box_rows,
    box_cols); ``swizzle_tma`` the CUtensorMapSwizzle value (0 none, 1 32B, 2 64B, 3 128B);
    no interleave, no L2 promotion, zero fill out of bounds."""
    import ctypes

    lib = ctypes.CDLL("libcuda.so.1")
    fn = lib.cuTensorMapEncodeTiled
    fn.restype = ctypes.c_int
    tmap = (ctypes.c_uint64 * 16)()
    rows, cols = dims
    gdim = (ctypes.c_uint64 * 2)(cols, rows)
    gstride = (ctypes.c_uint64 * 1)(cols * elem_bytes)
    bdim = (ctypes.c_uint32 * 2)(box[1], box[0])
    estr = (ctypes.c_uint32 * 2)(1, 1)
    err = fn(ctypes.byref(tmap), ctypes.c_int(_CU_DTYPE[elem_bytes]), ctypes.c_uint32(2),
             ctypes.c_void_p(ptr), gdim, gstride, bdim, estr, ctypes.c_int(0), ctypes.c_int(swizzle_tma),
             ctypes.c_int(0), ctypes.c_int(0))
    if err != 0:
        raise InputError(f"cuTensorMapEncodeTiled refused dims={dims} box={box} elem={elem_bytes} "
                         f"swizzle={swizzle_tma}: CUresult {err}")
    return bytes(tmap)


def run_tma(tensor: np.ndarray, cases: list[dict], size: int):
    """TMA 2-D tile loads from ``tensor`` (rows, cols) of 1/2/4-byte unsigned ints, one launch a
    case, the CUtensorMap passed by value (``__grid_constant__``).  Each case dict: box
    (rows, cols), coords (row, col) of the box's first element, swizzle (TMA code 0..3), dst
    (byte offset of the destination in shared memory).  Returns (images (C, size) uint8 —
    bytes not written stay 0x5A —, bases (C,))."""
    cp = require_device()
    tensor = np.ascontiguousarray(tensor)
    eb = tensor.dtype.itemsize
    d_t = cp.asarray(tensor)
    k = compile_module(TMA_SOURCE).get_function("tma_kernel")
    _set_smem(k, size)
    imgs = cp.zeros((len(cases), size), dtype=cp.uint8)
    bases = cp.zeros(len(cases), dtype=cp.uint32)
    for i, cs in enumerate(cases):
        raw = encode_tensor_map(int(d_t.data.ptr), tensor.shape, eb, tuple(cs["box"]), int(cs["swizzle"]))
        tm = np.zeros((), TMAP_DTYPE)
        tm["v"] = np.frombuffer(raw, dtype=np.uint64)
        tx = int(cs["box"][0]) * int(cs["box"][1]) * eb
        k((1,), (128,), (tm[()], np.int32(cs["coords"][1]), np.int32(cs["coords"][0]), np.uint32(cs["dst"]),
                         np.uint32(tx), imgs[i], np.int32(size), bases[i:i + 1]), shared_mem=size)
    cp.cuda.runtime.deviceSynchronize()
    return cp.asnumpy(imgs), cp.asnumpy(bases)


__all__ = ["matrix_kernel_source", "run_matrix", "WgmmaVariant", "wgmma_kernel_source", "run_wgmma_desc",
           "epilogue_kernel_source", "run_epilogue", "encode_tensor_map", "run_tma", "TMA_SOURCE",
           "TMAP_DTYPE"]
