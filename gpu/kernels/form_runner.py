"""One dense wgmma form on the GPU, end to end, for many tiles at once: the generator's inputs, the
hardware (shared-memory images and accumulator registers gathered on the GPU from the generated
elements, one wgmma per tile) and the GPU port of the accumulator, each a method on device arrays."""

from __future__ import annotations

import numpy as np

from gpu.kernels.generator import GEN_SOURCE, _shapes
from refmodel.numerics.accumulate import params_for
from refmodel.numerics.wgmma import operand_spec
from refmodel.verify.seeded import FORMATS, key
from refmodel.wgmma_forms import WgmmaForm


class FormRunner:
    """Compiled kernels and index tables of one form (built once, reused by every batch)."""

    def __init__(self, form: WgmmaForm, imm_scale_a: int, imm_scale_b: int):
        import cupy as cp

        from gpu.kernels.device_model import SOURCE, WgParams, kernel_params
        from gpu.kernels.runtime import compile_module
        from gpu.kernels.wgmma import (
            KBYTES,
            KERNEL_NAME,
            LBO,
            SBO,
            THREADS,
            kernel_source,
            plan_stages,
        )
        from refmodel.layouts.descriptor import MatrixDescriptor, kmajor_offsets
        from refmodel.layouts.fragment import accumulator_layout
        from refmodel.numerics.accumulate import decode_table

        self.cp, self.form = cp, form
        self.imm = (imm_scale_a, imm_scale_b)
        self.es_a = FORMATS[form.dtype_a][2] // 8
        self.es_b = FORMATS[form.dtype_b][2] // 8
        self.acc_w = FORMATS[form.dtype_d][2]
        self.utype = {16: cp.uint16, 32: cp.uint32}[self.acc_w]
        self.plan = plan_stages(form, 1, False)
        mod = compile_module(kernel_source(form, rs=False, chain=1, imm_scale_a=imm_scale_a, imm_scale_b=imm_scale_b))
        self.hw = mod.get_function(KERNEL_NAME)
        if self.plan.smem_bytes > 48 * 1024:
            self.hw.max_dynamic_shared_size_bytes = self.plan.smem_bytes
        self.threads = THREADS
        self.desc = MatrixDescriptor(0, LBO, SBO).encode()
        # one gather builds the (A | B^T) K-major images from the (A bytes | B bytes) of a tile
        n, k = form.n, form.k
        a_len = 64 * k * self.es_a
        src = np.empty(self.plan.step_bytes, np.int64)
        off_a = kmajor_offsets(64, KBYTES, lbo=LBO, sbo=SBO)          # (64, 32) image offsets
        rr, qq = np.meshgrid(np.arange(64), np.arange(KBYTES), indexing="ij")
        src[off_a.reshape(64, KBYTES)] = rr * KBYTES + qq                # A row-major bytes == K-major rows
        off_b = kmajor_offsets(n, KBYTES, lbo=LBO, sbo=SBO).reshape(n, KBYTES) + 64 * KBYTES
        jj, qq = np.meshgrid(np.arange(n), np.arange(KBYTES), indexing="ij")
        src[off_b] = a_len + ((qq // self.es_b) * n + jj) * self.es_b + qq % self.es_b
        self.img_index = cp.asarray(src)
        rows, cols = accumulator_layout(n, form.dtype_d)
        self.acc_index = cp.asarray((rows * n + cols).reshape(-1).astype(np.int64))
        self.gen = compile_module(GEN_SOURCE).get_function("wgref_gen")
        self.model_mod = compile_module(SOURCE)
        self.int_form = form.family == "int8"
        if not self.int_form:
            p = params_for(form)
            self.p = p
            sa, sb = operand_spec(form.dtype_a, p), operand_spec(form.dtype_b, p)
            self.sign_a, self.sign_b = sa.sign_mask, sb.sign_mask
            self.tables = [cp.asarray(np.ascontiguousarray(x)) for x in (*decode_table(sa), *decode_table(sb))]
            prm = kernel_params(p, sa.mbits, sb.mbits)
            self.pv = cp.asarray(np.array([getattr(prm, f) for f, _ in WgParams._fields_], np.int32))
            self.tf32_shift = p.tf32_ignored_bits

    def generate(self, seed: int, batch: int, fams):
        cp = self.cp
        T = int(fams.size)
        out = {}
        for i, (name, dt, rows, cols, kdim) in enumerate(_shapes(self.form)):
            e, m, w, ik = FORMATS[dt]
            x = cp.empty((T, rows, cols), cp.uint32)
            n = T * rows * cols
            self.gen(((n + 255) // 256,), (256,), (x, fams, np.int64(T), np.int32(rows), np.int32(cols),
                                                    np.uint64(key(seed, batch, i)), np.int32(kdim), np.int32(e),
                                                    np.int32(m), np.int32(w), np.int32(ik)))
            out[name] = x
        return out

    def hardware(self, x, scale_d: bool):
        cp = self.cp
        T = x["a"].shape[0]
        tb = {1: cp.uint8, 2: cp.uint16, 4: cp.uint32}
        a_bytes = x["a"].astype(tb[self.es_a]).reshape(T, -1).view(cp.uint8)
        b_bytes = x["b"].astype(tb[self.es_b]).reshape(T, -1).view(cp.uint8)
        img = cp.take(cp.concatenate([a_bytes, b_bytes], axis=1), self.img_index, axis=1)
        c = x["c"].astype(self.utype).reshape(T, -1)
        cin = cp.ascontiguousarray(c[:, self.acc_index]).view(cp.uint32)
        dout = cp.zeros_like(cin)
        self.hw((T,), (self.threads,), (cp.ascontiguousarray(img).view(cp.uint32), cp.zeros(1, cp.uint32), cin, dout,
                                       np.uint64(self.desc), np.uint64(self.desc), np.int32(1 if scale_d else 0)),
                shared_mem=self.plan.smem_bytes)
        d = cp.empty((T, 64 * self.form.n), self.utype)
        d[:, self.acc_index] = dout.view(self.utype)
        return d

    def model(self, x, scale_d: bool):
        cp = self.cp
        form = self.form
        T = x["a"].shape[0]
        K, N = form.k, form.n
        n = T * 64 * N
        grid = ((n + 255) // 256,)
        dims = (np.int32(T), np.int32(64), np.int32(K), np.int32(N))
        if self.int_form:
            def signed(v, dt):
                return v.astype(cp.uint8).view(cp.int8).astype(cp.int32) if dt == "s8" else v.astype(cp.int32)
            a, b = signed(x["a"], form.dtype_a), signed(x["b"], form.dtype_b)
            c = x["c"].view(cp.int32) if scale_d else cp.zeros_like(x["c"]).view(cp.int32)
            out = cp.empty((T, 64, N), cp.int32)
            p = params_for(form)
            clamp = (p.overflow_satfinite if form.satfinite else p.overflow_plain) == "clamp"
            self.model_mod.get_function("wgref_int_model")(grid, (256,), (a, b, c, out, *dims, np.int32(clamp)))
            return out.view(cp.uint32).reshape(T, -1)
        a, b = x["a"], x["b"]
        if form.dtype_a == "tf32":
            a = a >> self.tf32_shift
        if form.dtype_b == "tf32":
            b = b >> self.tf32_shift
        if self.imm[0] == -1:
            a = a ^ np.uint32(self.sign_a)
        if self.imm[1] == -1:
            b = b ^ np.uint32(self.sign_b)
        c = x["c"] if scale_d else cp.zeros_like(x["c"])
        out = cp.empty((T, 64, N), cp.uint32)
        self.model_mod.get_function("wgref_wgmma_model")(grid, (256,), (cp.ascontiguousarray(a), cp.ascontiguousarray(b),
                                                                       c, out, *dims, *self.tables, self.pv))
        return out.reshape(T, -1)
