"""One layout-fuzzer variant (wgmma through random descriptors) on the GPU, end to end, or its
host twin: the seeded case generator and the descriptor addressing of
:mod:`gpu.kernels.desc_gather` (one C++ text for both), the hardware
(:func:`gpu.kernels.layouts.wgmma_kernel_source`'s kernel, launched on device arrays), and the model:
gather A and B through the descriptors, the accumulator (:meth:`LayoutRunner._accumulate`, the one
call of ``wgref_wgmma_model`` / ``wgref_int_model`` of :mod:`gpu.kernels.device_model`), D packed
into the accumulator registers (:func:`refmodel.layouts.fragment.accumulator_layout`).

A case the CPU refmodel would refuse (a byte read outside the image, reserved descriptor bits, a
bad shared base) is flagged *undefined* by the model and never compared; on the GPU such a case is
not run as drawn: its descriptor is replaced by a safe one before the hardware (reads outside the
CTA's shared window could fault the context).

``LayoutRunner(variant, device=False)`` runs everything on the host (numpy + the host builds);
``device=True`` (default) runs on the GPU with cupy, and nothing is copied back.
"""

from __future__ import annotations

import ctypes

import numpy as np

from gpu.kernels.desc_gather import (
    ACC_CODES,
    DG_SOURCE,
    ELEM_CODES,
    host_library,
    kind_note,
)
from refmodel.errors import InputError
from refmodel.verify.layout_cases import IMAGE
from refmodel.wgmma_forms import parse_wgmma

_EBYTES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1}
#: the descriptor the hardware gets instead of an undefined one: no swizzle, start 0, LBO 128, SBO 256
SAFE_DESC = (128 >> 4) << 16 | (256 >> 4) << 32
_THREADS = 256


def _unpack_index(rows, cols, ncols: int, width: int):
    """For a register layout (rows, cols: (128, regs, per)): per element of the (R, ncols) matrix
    (flattened), the register (thread * regs + reg) holding it and the bit shift of its slot."""
    t, i, s = np.meshgrid(np.arange(rows.shape[0]), np.arange(rows.shape[1]), np.arange(rows.shape[2]),
                          indexing="ij")
    flat = (rows * ncols + cols).ravel()
    src = np.empty(flat.size, np.int64)
    shift = np.empty(flat.size, np.uint32)
    src[flat] = (t * rows.shape[1] + i).ravel()
    shift[flat] = (s * width).ravel().astype(np.uint32)
    return src, shift


class LayoutRunner:
    """Compiled kernels and index tables of one variant of
    :data:`refmodel.verify.layout_cases.WGMMA_VARIANTS` (``(instr, rs, trans_a, trans_b, imm_scale_a,
    imm_scale_b)``).  Methods: :meth:`generate`, :meth:`hardware` (device only), :meth:`model`."""

    def __init__(self, variant, *, device: bool = True, size: int = IMAGE, model_kernel: str = "chain"):
        from gpu.kernels.device_model import WgParams, kernel_params
        from refmodel.layouts.fragment import a_fragment_layout, accumulator_layout
        from refmodel.numerics.accumulate import decode_table, params_for
        from refmodel.numerics.wgmma import operand_spec

        if model_kernel not in ("per_output", "chain"):
            raise InputError(f"model_kernel must be 'per_output' or 'chain', got {model_kernel!r:.40}")
        self.model_kernel = model_kernel
        v = tuple(variant)
        if len(v) != 6:
            raise InputError(f"a layout variant is (instr, rs, trans_a, trans_b, imm_scale_a, imm_scale_b), got {v!r:.80}")
        self.variant = (str(v[0]), bool(v[1]), int(v[2]), int(v[3]), int(v[4]), int(v[5]))
        instr, rs, ta, tb, sa, sb = self.variant
        f = self.form = parse_wgmma(instr)
        if (ta or tb) and not f.has_transpose:
            raise InputError(f"{instr}: imm-trans is only for f16/bf16 operands")
        if rs and ta:
            raise InputError("an RS wgmma has no imm-trans-a")
        self.rs, self.major_a, self.major_b, self.imm = rs, ta, tb, (sa, sb)
        self.size = int(size)
        self.K, self.N = f.k, f.n
        self.ea, self.eb = _EBYTES[f.dtype_a], _EBYTES[f.dtype_b]
        self.dt_a, self.dt_b, self.acc = ELEM_CODES[f.dtype_a], ELEM_CODES[f.dtype_b], ACC_CODES[f.dtype_d]
        self.nregs = f.d_regs
        self.acc_w = 16 if f.dtype_d == "f16" else 32
        rows, cols = accumulator_layout(f.n, f.dtype_d)
        self._d_rows, self._d_cols = rows, cols
        self.c_src, self.c_shift = _unpack_index(rows, cols, f.n, self.acc_w)
        self.d_index = (rows * f.n + cols).reshape(128 * self.nregs, -1)      # (regs, per) -> element
        ar, ac = a_fragment_layout(f.dtype_a)
        self.a_src, self.a_shift = _unpack_index(ar, ac, f.k, 8 * self.ea)
        self.int_form = f.family == "int8"
        if self.int_form:
            p = params_for(f)
            self.clamp = p.clamps(f.satfinite)
        else:
            p = params_for(f)
            if p.k_group not in (None, f.k):
                raise InputError(f"{instr}: the GPU port models one fused sum per instruction (k_group = K)")
            spa, spb = operand_spec(f.dtype_a, p), operand_spec(f.dtype_b, p)
            self.sign_a, self.sign_b = spa.sign_mask, spb.sign_mask
            self.tf32_shift = p.tf32_ignored_bits
            self._tables = [np.ascontiguousarray(x) for x in (*decode_table(spa), *decode_table(spb))]
            self._params = kernel_params(p, spa.mbits, spb.mbits)
            self._pv = np.array([getattr(self._params, n) for n, _ in WgParams._fields_], np.int32)
        self.device = bool(device)
        if self.device:
            self._init_device()
        else:
            import numpy

            from gpu.kernels.device_model import host_library as model_host

            self.xp = numpy
            self.lib = host_library()
            self.model_lib = model_host()
            self.base = 0

    # ------------------------------------------------------------------ plumbing
    def _init_device(self) -> None:
        from gpu.kernels.device_model import SOURCE
        from gpu.kernels.layouts import WgmmaVariant, _set_smem, wgmma_kernel_source
        from gpu.kernels.runtime import compile_module, require_device

        cp = require_device()
        self.cp = self.xp = cp
        self.mod = compile_module(DG_SOURCE)
        self.model_mod = compile_module(SOURCE)
        self.hw_kernel = compile_module(wgmma_kernel_source(WgmmaVariant(*self.variant))).get_function(
            "wgmma_desc_kernel")
        _set_smem(self.hw_kernel, self.size)
        for name in ("c_src", "c_shift", "a_src", "a_shift", "d_index"):
            setattr(self, name, cp.asarray(getattr(self, name)))
        if not self.int_form:
            self._tables = [cp.asarray(t) for t in self._tables]
            self._pv = cp.asarray(self._pv)
        # the kernel's shared base (swizzles act on absolute addresses): one probe launch
        probe = {"images": cp.zeros((1, self.size), cp.uint8), "desc_a": cp.full(1, SAFE_DESC, cp.uint64),
                 "desc_b": cp.full(1, SAFE_DESC, cp.uint64), "a_regs": cp.zeros((1, 128, 4), cp.uint32),
                 "c_regs": cp.zeros((1, 128, self.nregs), cp.uint32), "scale_d": cp.ones(1, cp.int32)}
        bases = cp.zeros(1, cp.uint32)
        self._launch_hw(probe, probe["desc_a"], probe["desc_b"], cp.empty_like(probe["c_regs"]), bases)
        self.base = int(bases[0])

    def _run(self, name: str, n: int, *args) -> None:
        """Kernel ``name`` over ``n`` threads on the device, or its ``_host`` loop."""
        if n <= 0:
            return
        if self.device:
            self.mod.get_function(name)(((n + _THREADS - 1) // _THREADS,), (_THREADS,), args)
        else:
            conv = [a.ctypes.data if isinstance(a, np.ndarray) else int(a) for a in args]
            getattr(self.lib, name + "_host")(*conv)

    def _launch_hw(self, x, da, db, dout, bases) -> None:
        C = int(x["images"].shape[0])
        self.hw_kernel((C,), (128,), (x["images"], np.int32(self.size), da, db, x["a_regs"], x["c_regs"], dout,
                                      x["scale_d"], bases), shared_mem=self.size)

    def _dims(self):
        return (np.int32(self.K), np.int32(self.N), np.int32(self.ea), np.int32(self.eb), np.int32(self.major_a),
                np.int32(self.major_b), np.int32(int(self.rs)), np.int32(self.size))

    # ------------------------------------------------------------------ stages
    def generate(self, seed: int, batch: int, cases: int) -> dict:
        """The batch's cases (arrays of this runner's kind): images (C, size) uint8, desc_a/desc_b
        (C,) uint64 with image-relative starts (desc_a 0 for RS), kinds (C,) uint32 (A's in the low
        16 bits, B's in the high: :func:`gpu.kernels.desc_gather.kind_note`), fam (C,) int32 (0 ints,
        1 floats), scale_d (C,) int32, c_regs (C, 128, regs), a_regs (C, 128, 4) uint32 (zeros for SS)."""
        xp = self.xp
        C = int(cases)
        if C < 1:
            raise InputError(f"a batch needs at least one case, got {cases}")
        s, b = np.uint64(int(seed) & (2 ** 64 - 1)), np.uint64(int(batch) & (2 ** 64 - 1))
        x = {"desc_a": xp.empty(C, xp.uint64), "desc_b": xp.empty(C, xp.uint64), "kinds": xp.empty(C, xp.uint32),
             "fam": xp.empty(C, xp.int32), "scale_d": xp.empty(C, xp.int32)}
        self._run("wl_gen_cases", C, s, b, np.int64(C), *self._dims(), x["desc_a"], x["desc_b"], x["kinds"],
                  x["fam"], x["scale_d"])
        img = xp.empty((C, self.size // 4), xp.uint32)
        self._run("wl_gen_image", C * (self.size // 4), s, b, np.int64(C), np.int32(self.size), np.int32(self.dt_a),
                  np.int32(self.dt_b), x["fam"], img)
        x["images"] = img.view(xp.uint8)
        x["c_regs"] = xp.empty((C, 128, self.nregs), xp.uint32)
        x["a_regs"] = xp.zeros((C, 128, 4), xp.uint32)
        self._run("wl_gen_regs", C * (128 * self.nregs + (512 if self.rs else 0)), s, b, np.int64(C),
                  np.int32(self.nregs), np.int32(self.acc), np.int32(int(self.rs)), np.int32(self.dt_a), x["fam"],
                  x["c_regs"], x["a_regs"])
        return x

    def check(self, x, bases) -> np.ndarray:
        """Per case: bit 0 A undefined, bit 1 B undefined (what refmodel refuses), int32 (C,)."""
        xp = self.xp
        C = int(x["desc_b"].shape[0])
        flags = xp.empty(C, xp.int32)
        self._run("wl_check", C, x["desc_a"], x["desc_b"], bases, np.int64(C), *self._dims(), flags)
        return flags

    def hardware(self, x):
        """D registers (C, 128, regs) uint32 of the H200 for the cases; sets ``x["bases"]`` (the shared
        base of each case) and ``x["hw_flags"]`` (the cases run with a safe descriptor instead)."""
        if not self.device:
            raise InputError("LayoutRunner(device=False) has no hardware; build it with device=True on a GPU")
        cp = self.cp
        C = int(x["images"].shape[0])
        flags = self.check(x, cp.full(C, self.base, cp.uint32))
        safe = cp.uint64(SAFE_DESC)
        da = cp.where((flags & 1) != 0, safe, x["desc_a"]).astype(cp.uint64)
        db = cp.where((flags & 2) != 0, safe, x["desc_b"]).astype(cp.uint64)
        dout = cp.empty_like(x["c_regs"])
        bases = cp.zeros(C, cp.uint32)
        self._launch_hw(x, da, db, dout, bases)
        x["bases"], x["hw_flags"] = bases, flags
        return dout

    def gather(self, x, bases):
        """(A bits (C, 64, K), B bits (C, K, N), flags (C,)): the operand elements the descriptors read."""
        xp = self.xp
        C = int(x["desc_b"].shape[0])
        flags = self.check(x, bases)
        bout = xp.empty((C, self.K, self.N), xp.uint32)
        if self.rs:
            regs = x["a_regs"].reshape(C, -1)
            mask = (1 << (8 * self.ea)) - 1 if self.ea < 4 else 0xFFFFFFFF
            aout = ((regs[:, self.a_src] >> self.a_shift) & xp.uint32(mask)).reshape(C, 64, self.K)
            aout = xp.ascontiguousarray(aout.astype(xp.uint32))
            dummy = xp.empty(1, xp.uint32)
            n = C * self.K * self.N
            self._run("wl_gather", n, x["images"], x["desc_a"], x["desc_b"], bases, flags, np.int64(C), *self._dims(),
                      dummy, bout)
        else:
            aout = xp.empty((C, 64, self.K), xp.uint32)
            n = C * (64 * self.K + self.K * self.N)
            self._run("wl_gather", n, x["images"], x["desc_a"], x["desc_b"], bases, flags, np.int64(C), *self._dims(),
                      aout, bout)
        return aout, bout, flags

    def _accumulate(self, a_bits, b_bits, c_bits):
        """D element bits (C, 64, N) uint32 from A (C, 64, K), B (C, K, N) element bits and C's
        (C, 64, N) — the one call of the accumulator (device_model's kernels or their host build)."""
        xp = self.xp
        f = self.form
        C = int(a_bits.shape[0])
        K, N = self.K, self.N
        dims = (np.int32(C), np.int32(64), np.int32(K), np.int32(N))
        n = C * 64 * N
        grid = ((n + _THREADS - 1) // _THREADS,)
        if self.int_form:
            def signed(v, dt):
                v = v.astype(xp.int32)
                return xp.ascontiguousarray(((v & 0xFF) ^ 0x80) - 0x80 if dt == "s8" else v & 0xFF)
            a, b = signed(a_bits, f.dtype_a), signed(b_bits, f.dtype_b)
            c = xp.ascontiguousarray(c_bits).view(xp.int32)
            out = xp.empty((C, 64, N), xp.int32)
            if self.device and self.model_kernel == "chain":   # the tiled chain kernel (one step)
                from gpu.kernels.device_model import model_chain_device

                model_chain_device(f, a.reshape(C, 1, 64, K), b.reshape(C, 1, K, N), c, out=out)
            elif self.device:
                self.model_mod.get_function("wgref_int_model")(grid, (_THREADS,), (a, b, c, out, *dims,
                                                                                  np.int32(self.clamp)))
            elif self.model_kernel == "chain":      # the host build of the tiled chain kernel
                from gpu.kernels.device_model import model_chain_host

                out = model_chain_host(f, a.reshape(C, 1, 64, K), b.reshape(C, 1, K, N), c)
            else:
                p = [v.ctypes.data_as(ctypes.c_void_p) for v in (a, b, c, out)]
                self.model_lib.wgref_int_model_host(*p, C, 64, K, N, int(self.clamp))
            return out.view(xp.uint32)
        a, b = a_bits, b_bits
        if f.dtype_a == "tf32":
            a = a >> xp.uint32(self.tf32_shift)
        if f.dtype_b == "tf32":
            b = b >> xp.uint32(self.tf32_shift)
        if self.imm[0] == -1:
            a = a ^ xp.uint32(self.sign_a)
        if self.imm[1] == -1:
            b = b ^ xp.uint32(self.sign_b)
        a, b, c = (xp.ascontiguousarray(v, dtype=xp.uint32) for v in (a, b, c_bits))
        out = xp.empty((C, 64, N), xp.uint32)
        if self.device and self.model_kernel == "chain":       # the tiled chain kernel (one step)
            from gpu.kernels.device_model import model_chain_device

            model_chain_device(f, a.reshape(C, 1, 64, K), b.reshape(C, 1, K, N), c, out=out)
        elif self.device:
            self.model_mod.get_function("wgref_wgmma_model")(grid, (_THREADS,), (a, b, c, out, *dims, *self._tables,
                                                                                self._pv))
        elif self.model_kernel == "chain":          # the host build of the tiled chain kernel
            from gpu.kernels.device_model import model_chain_host

            out = model_chain_host(f, a.reshape(C, 1, 64, K), b.reshape(C, 1, K, N), c)
        else:
            p = [v.ctypes.data_as(ctypes.c_void_p) for v in (a, b, c, out, *self._tables)]
            self.model_lib.wgref_wgmma_model_host(*p[:4], C, 64, K, N, *p[4:], ctypes.byref(self._params))
        return out

    def model(self, x, bases=None):
        """(D registers (C, 128, regs) uint32, undefined (C,) bool) of the GPU port.  ``bases``: the
        shared base of each case (default ``x["bases"]`` from :meth:`hardware`, else this runner's
        base: the probed one on the device, 0 on the host)."""
        xp = self.xp
        C = int(x["desc_b"].shape[0])
        if bases is None:
            bases = x.get("bases")
        if bases is None:
            bases = xp.full(C, self.base, xp.uint32)
        bases = xp.ascontiguousarray(xp.asarray(bases).astype(xp.uint32))
        a_bits, b_bits, flags = self.gather(x, bases)
        mask = xp.uint32(0xFFFF if self.acc_w == 16 else 0xFFFFFFFF)
        c = ((x["c_regs"].reshape(C, -1)[:, self.c_src] >> self.c_shift) & mask).reshape(C, 64, self.N)
        c = xp.where((x["scale_d"] != 0)[:, None, None], c, xp.uint32(0)).astype(xp.uint32)
        d = self._accumulate(a_bits, b_bits, c).reshape(C, -1)
        if self.acc_w == 16:
            regs = (d[:, self.d_index[:, 0]] & 0xFFFF) | (d[:, self.d_index[:, 1]] << 16)
        else:
            regs = d[:, self.d_index[:, 0]]
        return regs.reshape(C, 128, self.nregs).astype(xp.uint32), flags != 0

    # ------------------------------------------------------------------ helpers
    def to_host(self, x, idx=None) -> dict:
        """The case arrays (optionally only cases ``idx``) as numpy, in wgmma_cases' keys."""
        out = {}
        for k in ("images", "desc_a", "desc_b", "a_regs", "c_regs", "scale_d", "kinds", "fam", "bases"):
            if k in x:
                v = x[k] if idx is None else x[k][idx]
                out[k] = v.get() if hasattr(v, "get") and not isinstance(v, np.ndarray) else np.asarray(v)
        return out

    def notes(self, kinds, fam) -> list[str]:
        """``wgmma_cases``-style notes of the cases (numpy kinds, fam)."""
        return [f"A[{kind_note(int(k) & 0xFFFF)}] B[{kind_note(int(k) >> 16)}] {'ints' if f == 0 else 'floats'}"
                for k, f in zip(np.asarray(kinds), np.asarray(fam))]


def refmodel_registers(variant, arrays: dict, i: int) -> np.ndarray:
    """The CPU refmodel's D registers of case ``i`` of host arrays (raises InputError where it refuses)."""
    from refmodel.machine.wgmma import wgmma_registers

    instr, rs, ta, tb, sa, sb = variant
    base = int(arrays["bases"][i])
    a = arrays["a_regs"][i] if rs else int(arrays["desc_a"][i]) + (base >> 4)
    b = int(arrays["desc_b"][i]) + (base >> 4)
    return wgmma_registers(instr, arrays["images"][i], a, b, arrays["c_regs"][i], smem_base=base,
                           scale_d=bool(arrays["scale_d"][i]), imm_scale_a=sa, imm_scale_b=sb,
                           imm_trans_a=ta, imm_trans_b=tb)


__all__ = ["SAFE_DESC", "LayoutRunner", "refmodel_registers"]
