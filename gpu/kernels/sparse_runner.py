"""One sparse wgmma job (``wgmma.mma_async.sp``: a form with SS/RS, sp-sel, scale-d, imm scales) on
the GPU, end to end, for many tiles at once — the sparse counterpart of
:class:`gpu.kernels.form_runner.FormRunner`:

* **inputs** — :data:`SP_GEN_SOURCE` (the dense generator :data:`gpu.kernels.generator.GEN_SOURCE`
  plus the metadata): compressed A (64 x K/2), B (K x N) and C (64 x N) element bits from
  ``wg_gen_one`` with the families of :func:`refmodel.verify.seeded.tile_families`; metadata
  nibbles (legal 2:4 / 1:2 for tf32; in one 2:4 tile in four any 4-bit nibble, equal indices
  included) and 32-bit garbage for every sp-meta register, of which only the nibbles the sp-sel
  threads read are replaced (:func:`refmodel.layouts.sparse_meta.pack_meta`'s ``fill``);
* **the hardware** — shared-memory images, sp-meta / C / A (RS) registers gathered on the GPU with
  index tables built once per job from refmodel's layouts, then :mod:`gpu.kernels.sparse`'s kernel;
* **the model** — ``wg_sp_pos`` (a port of :func:`refmodel.numerics.sparse.kept_positions`) gives
  the B row of every kept product, and :meth:`SparseRunner.sp_model` the accumulator.

The same C++ text and the same Python (numpy instead of cupy, the host builds of the sources)
run on the host: ``SparseRunner(job, device=False)`` — the tests hold it equal to
:func:`refmodel.numerics.sparse.wgmma_sp` on every sparse form.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from gpu.kernels.generator import GEN_SOURCE
from refmodel.errors import InputError
from refmodel.verify.seeded import FORMATS, key, tile_families
from refmodel.wgmma_sp_forms import WgmmaSpForm, parse_wgmma_sp

KEY_META, KEY_GARBAGE = 4, 5          # hash keys of the metadata and the register garbage (0 A, 1 B, 2 C, 3 families)
ANY_NIBBLE_ONE_IN = 4                 # 2:4 tiles whose nibbles are any 4-bit value (hash of the tile)

SP_GEN_SOURCE = GEN_SOURCE + r"""
/* ---- sparse wgmma: metadata, kept positions, sp-meta registers ---- */
/* 1 when tile t's 2:4 metadata is any 4-bit nibble (equal indices, idx0 > idx1), else legal. */
WGREF_HD static int wg_sp_any(wg_u64 key, long long t) {
    return (wg_mix(key ^ wg_mix(((wg_u64)t << 24) ^ 0xFFFFFFull)) % WG_SP_ANY_ONE_IN) == 0;
}

/* The nibble of row r, chunk c (tf32: pair c) of tile t. */
WGREF_HD static unsigned int wg_sp_nibble(wg_u64 key, long long t, int r, int c, int tf32) {
    wg_u64 h = wg_mix(key ^ wg_mix(((wg_u64)t << 24) ^ ((wg_u64)(r & 0xFFF) << 12) ^ (wg_u64)(c & 0xFFF)));
    if (tf32) return ((h >> 7) & 1) ? 0xEu : 0x4u;                     /* 0b0100: element 0, 0b1110: 1 */
    if (wg_sp_any(key, t)) return (unsigned int)(h >> 11) & 15u;
    const unsigned int legal[6] = {0x4u, 0x8u, 0xCu, 0x9u, 0xDu, 0xEu};  /* idx0 < idx1 */
    return legal[(h >> 11) % 6];
}

/* Garbage of tile t's sp-meta register of thread th (the nibbles not read keep it). */
WGREF_HD static unsigned int wg_sp_garbage(wg_u64 key, long long t, int th) {
    return (unsigned int)(wg_mix(key ^ wg_mix(((wg_u64)t << 24) ^ (wg_u64)(th & 0xFFF))) >> 16);
}

/* refmodel.numerics.sparse.kept_positions: the K index compressed column j multiplies, from the
   nibble of its chunk (2:4: column 2c -> 4c + (nib & 3), 2c+1 -> 4c + (nib >> 2), any nibble;
   tf32 pair j: 0b0100 -> 2j, 0b1110 -> 2j+1, other nibbles -1 (refmodel refuses them)). */
WGREF_HD static int wg_sp_pos(unsigned int nib, int j, int tf32) {
    if (tf32) return nib == 0xEu ? 2 * j + 1 : (nib == 0x4u ? 2 * j : -1);
    return 4 * (j >> 1) + (int)((j & 1) ? (nib >> 2) & 3u : nib & 3u);
}

/* One sp-meta register: garbage, with nibble p replaced by nib[src[p]] where src[p] >= 0. */
WGREF_HD static unsigned int wg_sp_reg(const unsigned char *nib, const int *src, unsigned int g) {
    unsigned int r = g;
    for (int p = 0; p < 8; ++p)
        if (src[p] >= 0) r = (r & ~(0xFu << (4 * p))) | (((unsigned int)nib[src[p]] & 15u) << (4 * p));
    return r;
}

#define WGREF_SP_META_BODY  { long long t = idx / (64LL * mc); int r = (int)((idx / mc) % 64), c = (int)(idx % mc); \
    nib[idx] = (unsigned char)wg_sp_nibble(key, t, r, c, tf32); }
#define WGREF_SP_GARB_BODY  { long long t = idx / 128; garb[idx] = wg_sp_garbage(key, t, (int)(idx % 128)); }
#define WGREF_SP_POS_BODY   { long long t = idx / (64LL * kc); int r = (int)((idx / kc) % 64), j = (int)(idx % kc); \
    int c = tf32 ? j : (j >> 1); pos[idx] = (short)wg_sp_pos(nib[(t * 64 + r) * mc + c], j, tf32); }
#define WGREF_SP_REGS_BODY  { long long t = idx / 128; int th = (int)(idx % 128); \
    regs[idx] = wg_sp_reg(nib + t * 64 * mc, src + th * 8, garb[idx]); }

#ifdef __CUDACC_RTC__
extern "C" __global__ void wgref_sp_meta(unsigned char *nib, long long T, int mc, unsigned long long key, int tf32) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= T * 64 * mc) return;
    WGREF_SP_META_BODY
}
extern "C" __global__ void wgref_sp_garbage(unsigned int *garb, long long T, unsigned long long key) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= T * 128) return;
    WGREF_SP_GARB_BODY
}
extern "C" __global__ void wgref_sp_pos(short *pos, const unsigned char *nib, long long T, int kc, int mc, int tf32) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= T * 64 * kc) return;
    WGREF_SP_POS_BODY
}
extern "C" __global__ void wgref_sp_regs(unsigned int *regs, const unsigned char *nib, const unsigned int *garb,
                                         const int *src, long long T, int mc) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= T * 128) return;
    WGREF_SP_REGS_BODY
}
#else
extern "C" void wgref_sp_meta_host(unsigned char *nib, long long T, int mc, unsigned long long key, int tf32) {
    for (long long idx = 0; idx < T * 64 * mc; ++idx) WGREF_SP_META_BODY
}
extern "C" void wgref_sp_garbage_host(unsigned int *garb, long long T, unsigned long long key) {
    for (long long idx = 0; idx < T * 128; ++idx) WGREF_SP_GARB_BODY
}
extern "C" void wgref_sp_pos_host(short *pos, const unsigned char *nib, long long T, int kc, int mc, int tf32) {
    for (long long idx = 0; idx < T * 64 * kc; ++idx) WGREF_SP_POS_BODY
}
extern "C" void wgref_sp_regs_host(unsigned int *regs, const unsigned char *nib, const unsigned int *garb,
                                   const int *src, long long T, int mc) {
    for (long long idx = 0; idx < T * 128; ++idx) WGREF_SP_REGS_BODY
}
#endif
""".replace("WG_SP_ANY_ONE_IN", str(ANY_NIBBLE_ONE_IN))

MODEL_BYTES = 1 << 30     # the gathered B of one model launch (R = 1 path) stays under this

_HOST_GEN = None


def host_generator() -> ctypes.CDLL:
    """:data:`SP_GEN_SOURCE` compiled for the host (cached by source hash)."""
    global _HOST_GEN
    if _HOST_GEN is None:
        from gpu.kernels.device_model import build_host_library

        _HOST_GEN = build_host_library(SP_GEN_SOURCE, "wgref_sp_gen", "the sparse generator")
    return _HOST_GEN


def _p(x: np.ndarray):
    return x.ctypes.data_as(ctypes.c_void_p)


def _tag_map(tile_shape: tuple[int, int], elem_bytes: int, size: int) -> np.ndarray:
    """For every byte of ``tile_image(tile, 'K', 'none', size=size)`` of an (R, C) tile of
    ``elem_bytes``-byte elements: the index of the tile byte it holds (row-major bytes), -1 if none.
    Found by imaging tagged tiles (three passes: low, high byte of the index, presence)."""
    from refmodel.layouts.smem import tile_image

    R, C = tile_shape
    nb = R * C * elem_bytes
    idx = np.arange(nb, dtype=np.int64)
    dt = {1: np.uint8, 2: np.uint16, 4: np.uint32}[elem_bytes]

    def image(byte_tags):
        t = np.ascontiguousarray(byte_tags.astype(np.uint8)).view(dt).reshape(R, C)
        return tile_image(t, "K", "none", size=size).astype(np.int64)

    lo, hi, present = image(idx & 0xFF), image(idx >> 8), image(np.full(nb, 0xFF))
    if nb > 1 << 16:
        raise InputError(f"a sparse operand tile of {nb} bytes is larger than the 64 KiB the tag map covers")
    return np.where(present == 0xFF, lo | (hi << 8), -1)


class SparseRunner:
    """Tables and kernels of one sparse job (a dict of :func:`refmodel.verify.sparse_cases.plan_jobs`),
    built once and reused by every batch.  ``device=False``: numpy and the host builds (no GPU).
    ``model_kernel``: "chain" (the default: :meth:`sp_model_chain`, device_model's tiled
    ``wgref_model_chain_sparse`` kernels on pos; on the H200 1.2-2.6x the gather kernel end to end, equal on
    every batch, bench/results/sparse_gpu_h200/) or "gather" (:meth:`sp_model`: B gathered, the R = 1 kernel)."""

    def __init__(self, job: dict[str, Any], device: bool = True, model_kernel: str = "chain"):
        from gpu.kernels.sparse import SpVariant
        from refmodel.layouts.fragment import a_fragment_layout, accumulator_layout
        from refmodel.layouts.sparse_meta import meta_holders
        from refmodel.verify.sparse_cases import B_OFFSET, descriptors

        try:
            self.job = {"instr": job["instr"], "rs": bool(job["rs"]), "sp_sel": int(job["sp_sel"]),
                        "scale_d": int(job["scale_d"]), "imm_scale_a": int(job["imm_scale_a"]),
                        "imm_scale_b": int(job["imm_scale_b"])}
        except (KeyError, TypeError, ValueError):
            raise InputError("a sparse job must be a dict with instr, rs, sp_sel, scale_d, imm_scale_a and "
                             "imm_scale_b (refmodel.verify.sparse_cases.plan_jobs)") from None
        f: WgmmaSpForm = parse_wgmma_sp(self.job["instr"])
        self.form = f
        self.variant = SpVariant(f.instr, self.job["rs"], self.job["sp_sel"], 0, 0, self.job["imm_scale_a"],
                                 self.job["imm_scale_b"])
        from gpu.kernels.sparse import sp_kernel_source

        src_hw = sp_kernel_source(self.variant)           # validates sp-sel and imm scales for the form
        if not f.has_imm_scale and (self.job["imm_scale_a"], self.job["imm_scale_b"]) != (1, 1):
            raise InputError(f"{f.instr}: imm scales must be 1 for integer sparse wgmma")
        self.device = bool(device)
        if model_kernel not in ("gather", "chain"):
            raise InputError(f"model_kernel must be 'gather' or 'chain', got {model_kernel!r:.40}")
        self.model_kernel = model_kernel
        if self.device:
            from gpu.kernels.runtime import require_device

            self.xp = require_device()
        else:
            self.xp = np
        xp = self.xp
        self.kc, self.K, self.N, self.mc = f.k_compressed, f.k, f.n, f.meta_cols
        self.tf32 = int(f.dtype_a == "tf32")
        self.es_a, self.es_b = FORMATS[f.dtype_a][2] // 8, FORMATS[f.dtype_b][2] // 8
        self.acc_w = FORMATS[f.dtype_d][2]
        self.utype = {16: np.uint16, 32: np.uint32}[self.acc_w]
        # --- the shared-memory image: compressed A (K-major) at 0, B^T at B_OFFSET (sparse_cases.images_for)
        self.b_offset = B_OFFSET
        a_bytes = 64 * self.kc * self.es_a
        self.size = B_OFFSET + self.N * self.K * self.es_b                 # multiple of 16 (K * es_b = 64)
        map_a = _tag_map((64, self.kc), self.es_a, B_OFFSET)
        # B^T tile byte (j, q) is byte q % e of B[q // e, j]: its index in B's row-major bytes
        map_bt = _tag_map((self.N, self.K), self.es_b, self.size - B_OFFSET)
        jj, qq = np.divmod(np.arange(self.N * self.K * self.es_b), self.K * self.es_b)
        bt_to_b = ((qq // self.es_b) * self.N + jj) * self.es_b + qq % self.es_b
        b_len = self.K * self.N * self.es_b
        zero = a_bytes + b_len                                            # a zero byte appended to the sources
        img = np.full(self.size, zero, np.int64)
        img[:B_OFFSET] = np.where(map_a >= 0, map_a, zero)
        img[B_OFFSET:] = np.where(map_bt >= 0, a_bytes + bt_to_b[np.maximum(map_bt, 0)], zero)
        self._img_index_np = img
        self.img_index = xp.asarray(img)
        da, db = descriptors(f)
        self.desc_a, self.desc_b = int(da), int(db)
        rows, cols = accumulator_layout(self.N, f.dtype_d)
        self.d_regs = rows.shape[1]
        self.acc_index = xp.asarray((rows * self.N + cols).reshape(-1).astype(np.int64))
        ra, ca = a_fragment_layout(f.dtype_a)                             # (128, 4, per): the dense K = K/2
        self.a_index = xp.asarray((ra * self.kc + ca).reshape(-1).astype(np.int64))
        thread, pos = meta_holders(f.dtype_a, self.job["sp_sel"])
        src = np.full((128, 8), -1, np.int32)
        src[thread.ravel(), pos.ravel()] = (np.arange(64)[:, None] * self.mc + np.arange(self.mc)[None, :]).ravel()
        self.meta_src = xp.asarray(src)
        # --- the model's constants (FormRunner.model's bits -> codes)
        from refmodel.numerics.accumulate import params_for

        self.int_form = f.family == "int8"
        p = params_for(f.dense)
        self.p = p
        if self.int_form:
            self.clamp = int(p.clamps(f.satfinite))
        else:
            from gpu.kernels.device_model import WgParams, kernel_params
            from refmodel.numerics.accumulate import decode_table
            from refmodel.numerics.wgmma import operand_spec

            sa, sb = operand_spec(f.dtype_a, p), operand_spec(f.dtype_b, p)
            self.sign_a, self.sign_b = int(sa.sign_mask), int(sb.sign_mask)
            self.tf32_shift = int(p.tf32_ignored_bits)
            self._tables_np = [np.ascontiguousarray(x) for x in (*decode_table(sa), *decode_table(sb))]
            self.tables = [xp.asarray(x) for x in self._tables_np]
            self.wgp = kernel_params(p, sa.mbits, sb.mbits)
            self.pv = xp.asarray(np.array([getattr(self.wgp, n) for n, _ in WgParams._fields_], np.int32))
        # --- kernels
        if self.device:
            from gpu.kernels.device_model import SOURCE
            from gpu.kernels.layouts import _set_smem
            from gpu.kernels.runtime import compile_module

            gen = compile_module(SP_GEN_SOURCE)
            self._k = {n: gen.get_function(n) for n in ("wgref_gen", "wgref_sp_meta", "wgref_sp_garbage",
                                                        "wgref_sp_pos", "wgref_sp_regs")}
            mm = compile_module(SOURCE)
            self._model_mod = mm
            self._k["fdpa"] = mm.get_function("wgref_wgmma_model")
            self._k["int"] = mm.get_function("wgref_int_model")
            self.hw = compile_module(src_hw).get_function("wgmma_sp_kernel")
            _set_smem(self.hw, self.size)
        else:
            from gpu.kernels.device_model import host_library

            self._gen_lib, self._model_lib = host_generator(), host_library()

    # ------------------------------------------------------------------ launch helpers
    def _launch(self, name: str, n: int, args: tuple, host_args: tuple) -> None:
        if self.device:
            self._k[name](((n + 255) // 256,), (256,), args)
        else:
            lib = self._model_lib if name in ("fdpa", "int") else self._gen_lib
            fn = {"wgref_gen": "wgref_gen_host", "wgref_sp_meta": "wgref_sp_meta_host",
                  "wgref_sp_garbage": "wgref_sp_garbage_host", "wgref_sp_pos": "wgref_sp_pos_host",
                  "wgref_sp_regs": "wgref_sp_regs_host", "fdpa": "wgref_wgmma_model_host",
                  "int": "wgref_int_model_host"}[name]
            getattr(lib, fn)(*host_args)

    @staticmethod
    def _hp(v):
        """A host argument: pointers for arrays, ctypes for 64-bit scalars, ints otherwise."""
        if isinstance(v, np.ndarray):
            return _p(v)
        if isinstance(v, np.int64):
            return ctypes.c_longlong(int(v))
        if isinstance(v, np.uint64):
            return ctypes.c_ulonglong(int(v))
        return int(v)

    def _call(self, name: str, n: int, *args) -> None:
        self._launch(name, n, args, tuple(self._hp(a) for a in args) if not self.device else ())

    # ------------------------------------------------------------------ 1. inputs
    def generate(self, seed: int, batch: int, tiles: int) -> dict:
        """The batch's inputs from ``(seed, batch)``: ``a`` (T, 64, K/2), ``b`` (T, K, N), ``c``
        (T, 64, N) element bits (uint32), ``meta`` (T, 64, K/4 or K/2) nibbles (uint8), ``garbage``
        (T, 128) uint32 sp-meta register fill, ``fams`` (T,) int32 families (device or host arrays)."""
        xp, f = self.xp, self.form
        T = int(tiles)
        if T < 1:
            raise InputError(f"tiles must be a positive number of tiles, got {tiles!r}")
        fams = xp.asarray(tile_families(seed, batch, T))
        out = {"fams": fams}
        for i, (name, dt, rows, cols, kdim) in enumerate((("a", f.dtype_a, 64, self.kc, 1), ("b", f.dtype_b, self.K, self.N, 0),
                                                          ("c", f.dtype_d, 64, self.N, -1))):
            e, m, w, ik = FORMATS[dt]
            x = xp.empty((T, rows, cols), xp.uint32)
            self._call("wgref_gen", T * rows * cols, x, fams, np.int64(T), np.int32(rows), np.int32(cols),
                       np.uint64(key(seed, batch, i)), np.int32(kdim), np.int32(e), np.int32(m), np.int32(w),
                       np.int32(ik))
            out[name] = x
        nib = xp.empty((T, 64, self.mc), xp.uint8)
        self._call("wgref_sp_meta", T * 64 * self.mc, nib, np.int64(T), np.int32(self.mc),
                   np.uint64(key(seed, batch, KEY_META)), np.int32(self.tf32))
        garb = xp.empty((T, 128), xp.uint32)
        self._call("wgref_sp_garbage", T * 128, garb, np.int64(T), np.uint64(key(seed, batch, KEY_GARBAGE)))
        out["meta"], out["garbage"] = nib, garb
        return out

    def positions(self, x) -> Any:
        """(T, 64, K/2) int16: the B row each kept product uses (-1: dropped, contributes +0)."""
        xp = self.xp
        T = int(x["meta"].shape[0])
        pos = xp.empty((T, 64, self.kc), xp.int16)
        self._call("wgref_sp_pos", T * 64 * self.kc, pos, xp.ascontiguousarray(x["meta"]), np.int64(T),
                   np.int32(self.kc), np.int32(self.mc), np.int32(self.tf32))
        return pos

    # ------------------------------------------------------------------ 2. the hardware
    def hardware_inputs(self, x) -> dict:
        """What the kernel holds, gathered from the elements with the job's index tables: ``images``
        uint8 (T, size), ``meta_regs`` (T, 128), ``c_regs`` (T, 128, regs), ``a_regs`` (T, 128, 4)
        (RS only; None for SS), descriptors ``desc_a``/``desc_b`` (ints, relative to the image)."""
        xp = self.xp
        T = int(x["a"].shape[0])
        tb = {1: xp.uint8, 2: xp.uint16, 4: xp.uint32}
        a_el = x["a"].astype(tb[self.es_a]).reshape(T, -1)
        src = xp.concatenate([a_el.view(xp.uint8), x["b"].astype(tb[self.es_b]).reshape(T, -1).view(xp.uint8),
                              xp.zeros((T, 1), xp.uint8)], axis=1)
        images = xp.ascontiguousarray(xp.take(src, self.img_index, axis=1))
        c = x["c"].astype(self.utype).reshape(T, -1)
        c_regs = xp.ascontiguousarray(c[:, self.acc_index]).view(xp.uint32).reshape(T, 128, self.d_regs)
        a_regs = (xp.ascontiguousarray(a_el[:, self.a_index]).view(xp.uint32).reshape(T, 128, 4)
                  if self.job["rs"] else None)
        regs = xp.empty((T, 128), xp.uint32)
        self._call("wgref_sp_regs", T * 128, regs, xp.ascontiguousarray(x["meta"]), xp.ascontiguousarray(x["garbage"]),
                   self.meta_src, np.int64(T), np.int32(self.mc))
        return {"images": images, "meta_regs": regs, "c_regs": c_regs, "a_regs": a_regs,
                "desc_a": self.desc_a, "desc_b": self.desc_b}

    def launch(self, images, meta_regs, c_regs, a_regs=None, scale_d: bool | None = None):
        """gpu.kernels.sparse's kernel on device arrays (one block per tile): D registers (T, 128, regs)."""
        cp = self.xp
        if not self.device:
            raise InputError("the hardware runs only on the GPU: build the runner with device=True")
        T = int(images.shape[0])
        sd = bool(self.job["scale_d"]) if scale_d is None else bool(scale_d)
        if a_regs is None:
            a_regs = cp.zeros((T, 128, 4), cp.uint32)
        dout = cp.empty((T, 128, self.d_regs), cp.uint32)
        self.hw((T,), (128,), (images, np.int32(self.size), cp.full(T, self.desc_a, cp.uint64),
                               cp.full(T, self.desc_b, cp.uint64), cp.ascontiguousarray(a_regs),
                               cp.ascontiguousarray(meta_regs), cp.ascontiguousarray(c_regs), dout,
                               cp.full(T, int(sd), cp.int32), cp.empty(T, cp.uint32), np.int32(0), np.int32(0)),
                shared_mem=self.size)
        return dout

    def hardware(self, x) -> Any:
        """The H200's D bits (T, 64*N) uint32 (f16 in the low 16 bits) for the batch ``x``."""
        cp = self.xp
        h = self.hardware_inputs(x)
        dout = self.launch(h["images"], h["meta_regs"], h["c_regs"], h["a_regs"])
        T = int(dout.shape[0])
        d = cp.empty((T, 64 * self.N), self.utype)
        d[:, self.acc_index] = dout.reshape(T, -1).view(self.utype)
        return d.astype(cp.uint32)

    # ------------------------------------------------------------------ 3. the model
    def codes(self, x) -> tuple:
        """(acodes (T, 64, K/2), bcodes (T, K, N), cbits (T, 64, N)): operand codes (tf32 shifted,
        imm-scale -1 sign flipped; int8 forms: int32 values) and C's bits (+0 when scale-d is 0)."""
        xp, f = self.xp, self.form
        sd = bool(self.job["scale_d"])
        if self.int_form:
            def val(v, dt):
                return v.astype(xp.uint8).view(xp.int8).astype(xp.int32) if dt == "s8" else v.astype(xp.int32)
            c = x["c"].view(xp.int32) if sd else xp.zeros(x["c"].shape, xp.int32)
            return val(x["a"], f.dtype_a), val(x["b"], f.dtype_b), xp.ascontiguousarray(c)
        a, b = x["a"], x["b"]
        if f.dtype_a == "tf32":
            a = a >> np.uint32(self.tf32_shift)
        if f.dtype_b == "tf32":
            b = b >> np.uint32(self.tf32_shift)
        if self.job["imm_scale_a"] == -1:
            a = a ^ np.uint32(self.sign_a)
        if self.job["imm_scale_b"] == -1:
            b = b ^ np.uint32(self.sign_b)
        c = x["c"] if sd else xp.zeros(x["c"].shape, xp.uint32)
        return xp.ascontiguousarray(a), xp.ascontiguousarray(b), xp.ascontiguousarray(c)

    def zero_code(self) -> int:
        """The B code of a dropped element (+0's bits, sign flipped under imm-scale-b -1: as wgmma_sp)."""
        if self.int_form:
            return 0
        return self.sign_b if self.job["imm_scale_b"] == -1 else 0

    def sp_model(self, acodes, bcodes, pos, cbits):
        """The accumulator (T, 64, N) uint32 bits (int8: int32 values as uint32) from acodes (T, 64, K/2),
        bcodes (T, K, N), pos (T, 64, K/2) int16 (pos < 0: dropped, +0) and cbits (T, 64, N).  This
        path: B's rows gathered per row of A, then ``wgref_wgmma_model`` / ``wgref_int_model`` with
        R = 1 (device_model.wgmma_sp_host), in launches of at most MODEL_BYTES of gathered B."""
        xp = self.xp
        T, kc, N = int(acodes.shape[0]), self.kc, self.N
        out = xp.empty((T, 64, N), xp.uint32)
        step = max(1, MODEL_BYTES // (64 * kc * N * 4))
        zc = self.zero_code()
        for t0 in range(0, T, step):
            t1 = min(T, t0 + step)
            n = t1 - t0
            p = pos[t0:t1].astype(xp.int64)
            drop = p < 0
            ti = xp.arange(n)[:, None, None]
            g = bcodes[t0:t1][ti, xp.maximum(p, 0)]                           # (n, 64, kc, N)
            if bool(drop.any()):
                g = xp.where(drop[..., None], xp.asarray(zc, g.dtype), g)
            g = xp.ascontiguousarray(g)
            a = xp.ascontiguousarray(acodes[t0:t1])
            c = xp.ascontiguousarray(cbits[t0:t1])
            o = out[t0:t1]
            dims = (np.int32(n * 64), np.int32(1), np.int32(kc), np.int32(N))
            if self.int_form:
                if self.device:
                    self._k["int"](((n * 64 * N + 255) // 256,), (256,), (a, g, c, o.view(xp.int32), *dims,
                                                                          np.int32(self.clamp)))
                else:
                    self._model_lib.wgref_int_model_host(_p(a), _p(g), _p(c), _p(o), *map(int, dims), self.clamp)
            elif self.device:
                self._k["fdpa"](((n * 64 * N + 255) // 256,), (256,), (a, g, c, o, *dims, *self.tables, self.pv))
            else:
                self._model_lib.wgref_wgmma_model_host(_p(a), _p(g), _p(c), _p(o), *map(int, dims),
                                                       *[_p(v) for v in self._tables_np], ctypes.byref(self.wgp))
        return out

    def sp_model_chain(self, acodes, bcodes, pos, cbits):
        """:meth:`sp_model`'s contract on gpu.kernels.device_model's tiled chain kernels (one step, L = 1:
        ``wgref_model_chain_sparse[_wide]`` / ``wgref_int_model_chain`` with pos; grid, block and shared
        memory from :func:`gpu.kernels.device_model.launch_model_chain`)."""
        xp = self.xp
        T, kc, K, N = int(acodes.shape[0]), self.kc, self.K, self.N
        out = xp.empty((T, 64, N), xp.uint32)
        pos = xp.ascontiguousarray(pos, dtype=xp.int16)
        dims = (np.int32(T), np.int32(1), np.int32(64), np.int32(kc), np.int32(K), np.int32(N))
        if not self.device:
            lib = self._model_lib
            if self.int_form:
                lib.wgref_int_model_chain_host(_p(acodes), _p(bcodes), _p(pos), _p(cbits), _p(out), *map(int, dims),
                                               self.clamp)
            else:
                lib.wgref_model_chain_host(_p(acodes), _p(bcodes), _p(pos), _p(cbits), _p(out), *map(int, dims),
                                           *[_p(v) for v in self._tables_np], ctypes.byref(self.wgp))
            return out
        from gpu.kernels.device_model import launch_int_model_chain, launch_model_chain

        if self.int_form:
            launch_int_model_chain(self._model_mod, acodes, bcodes, pos, cbits, out.view(xp.int32), T, 1, 64, kc, K, N,
                                   bool(self.clamp))
        else:
            launch_model_chain(self._model_mod, acodes, bcodes, pos, cbits, out, T, 1, 64, kc, K, N, self.tables,
                               self.pv, F=self.wgp.F)
        return out

    def model(self, x) -> Any:
        """The model's D bits (T, 64*N) uint32 for the batch ``x`` (kept positions, then :meth:`sp_model`
        or :meth:`sp_model_chain`)."""
        a, b, c = self.codes(x)
        fn = self.sp_model_chain if self.model_kernel == "chain" else self.sp_model
        out = fn(a, b, self.positions(x), c)
        return out.reshape(out.shape[0], -1)

    # ------------------------------------------------------------------ CPU side
    def typed(self, bits: dict) -> tuple:
        """Host bits (numpy) of some tiles -> the typed (a, meta, b, c) refmodel.wgmma_sp takes."""
        from refmodel.verify.seeded import typed as seeded_typed

        f = self.form
        a, b, c = seeded_typed((f.dtype_a, f.dtype_b, f.dtype_d), {k: bits[k] for k in ("a", "b", "c")})
        return a, np.asarray(bits["meta"], np.uint8), b, c

    def refmodel(self, bits: dict) -> np.ndarray:
        """refmodel.numerics.sparse.wgmma_sp's D bits (T, 64*N) uint32 for host bits of some tiles."""
        from refmodel.dtypes import bits_of
        from refmodel.numerics.sparse import wgmma_sp

        a, meta, b, c = self.typed(bits)
        j = self.job
        d = wgmma_sp(j["instr"], a, meta, b, c, sp_sel=j["sp_sel"], scale_d=bool(j["scale_d"]),
                     imm_scale_a=j["imm_scale_a"], imm_scale_b=j["imm_scale_b"])
        return bits_of(np.ascontiguousarray(d)).reshape(a.shape[0], -1).astype(np.uint32)


def generate_host(job: dict, seed: int, batch: int, tiles: int) -> dict:
    """The batch's inputs built on the host from :data:`SP_GEN_SOURCE` (see :meth:`SparseRunner.generate`)."""
    return SparseRunner(job, device=False).generate(seed, batch, tiles)


__all__ = ["KEY_GARBAGE", "KEY_META", "SP_GEN_SOURCE", "SparseRunner", "generate_host", "host_generator"]
