"""One dense wgmma job on the GPU, end to end, for many tiles at once: the generator's inputs, the
hardware (shared-memory images, A registers for RS and accumulator registers gathered on the GPU
from the generated elements; a chain of ``chain`` wgmmas along K per tile) and the GPU port of the
accumulator, each a method on device arrays.

A job is (form, imm scales, rs, chain); scale-d is a per-batch argument: it applies to the first
wgmma of the chain, the others accumulate (as :func:`refmodel.verify.jobs.model_chain`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu.kernels.generator import GEN_SOURCE, _shapes
from refmodel.numerics.accumulate import params_for
from refmodel.numerics.wgmma import operand_spec
from refmodel.verify.seeded import FORMATS, key
from refmodel.wgmma_forms import WgmmaForm


@dataclass(frozen=True)
class JobTables:
    """The index tables that turn one tile's generated elements into the hardware kernel's inputs
    (numpy; the GPU keeps device copies): ``img_index`` gathers the (T, chain, step_bytes) shared-memory
    images from the (A bytes | B bytes) of a tile, ``afrag_index``/``afrag_shift`` the RS A
    registers (T, chain, 128, 4), ``acc_index`` the accumulator registers (row * N + col per slot)."""

    form: WgmmaForm
    rs: bool
    chain: int
    es_a: int
    es_b: int
    img_index: np.ndarray
    acc_index: np.ndarray
    afrag_index: np.ndarray | None
    afrag_shift: np.ndarray | None


def job_tables(form: WgmmaForm, rs: bool = False, chain: int = 1) -> JobTables:
    """:class:`JobTables` of a (form, rs, chain) job: A (64, chain*K) and B (chain*K, N) are row-major
    element bytes; step s reads A's columns and B's rows s*K .. s*K+K-1 (K-major, no swizzle, the
    LBO/SBO of :mod:`gpu.kernels.wgmma`)."""
    from gpu.kernels.wgmma import KBYTES, LBO, SBO, plan_stages
    from refmodel.layouts.descriptor import kmajor_offsets
    from refmodel.layouts.fragment import a_fragment_layout, accumulator_layout

    L = int(chain)
    es_a, es_b = FORMATS[form.dtype_a][2] // 8, FORMATS[form.dtype_b][2] // 8
    plan = plan_stages(form, L, rs)
    n, k = form.n, form.k
    a_len = 64 * L * k * es_a
    step = plan.step_bytes
    src = np.empty(L * step, np.int64)
    off_a = kmajor_offsets(64, KBYTES, lbo=LBO, sbo=SBO).reshape(64, KBYTES)
    off_b = kmajor_offsets(n, KBYTES, lbo=LBO, sbo=SBO).reshape(n, KBYTES) + plan.a_bytes
    rr, qa = np.meshgrid(np.arange(64), np.arange(KBYTES), indexing="ij")
    jj, qb = np.meshgrid(np.arange(n), np.arange(KBYTES), indexing="ij")
    for s in range(L):
        if not rs:
            src[s * step + off_a] = (rr * L * k + s * k) * es_a + qa
        src[s * step + off_b] = a_len + ((s * k + qb // es_b) * n + jj) * es_b + qb % es_b
    afrag_index = afrag_shift = None
    if rs:
        fr, fc = a_fragment_layout(form.dtype_a)                     # (128, 4, per)
        steps = np.arange(L)[:, None, None, None]
        afrag_index = (fr[None] * (L * k) + steps * k + fc[None]).reshape(-1).astype(np.int64)
        per = fr.shape[-1]
        afrag_shift = (np.arange(per) * (32 // per)).astype(np.uint32)
    rows, cols = accumulator_layout(n, form.dtype_d)
    return JobTables(form, bool(rs), L, es_a, es_b, src, (rows * n + cols).reshape(-1).astype(np.int64),
                     afrag_index, afrag_shift)


def hardware_inputs(xp, t: JobTables, x: dict, index: dict | None = None):
    """(images as uint32 words (T, chain*step_bytes/4), A registers (T, chain*128*4) or a dummy, C
    registers (T, 128*d_regs)) from generated element bits ``x`` (uint32 (T, 64, chain*K), ...),
    with ``xp`` numpy or cupy; ``index``: device copies of the tables (default: ``t``'s)."""
    ix = index or {"img": t.img_index, "acc": t.acc_index, "afrag": t.afrag_index, "shift": t.afrag_shift}
    T = x["a"].shape[0]
    tb = {1: xp.uint8, 2: xp.uint16, 4: xp.uint32}
    a_bytes = x["a"].astype(tb[t.es_a]).reshape(T, -1).view(xp.uint8)
    b_bytes = x["b"].astype(tb[t.es_b]).reshape(T, -1).view(xp.uint8)
    img = xp.ascontiguousarray(xp.take(xp.concatenate([a_bytes, b_bytes], axis=1), ix["img"], axis=1)).view(xp.uint32)
    if t.rs:
        per = t.afrag_shift.size
        g = xp.take(x["a"].reshape(T, -1), ix["afrag"], axis=1).reshape(T, -1, per)
        afrag = xp.ascontiguousarray((g << ix["shift"]).sum(axis=-1, dtype=xp.uint32))
    else:
        afrag = xp.zeros(1, xp.uint32)
    utype = xp.uint32 if FORMATS[t.form.dtype_d][2] == 32 else xp.uint16
    c = x["c"].astype(utype).reshape(T, -1)
    cin = xp.ascontiguousarray(c[:, ix["acc"]]).view(xp.uint32)
    return img, afrag, cin


def operand_codes_xp(xp, form: WgmmaForm, imm, x: dict):
    """A and B element bits (uint32 (T, 64, L*K), (T, L*K, N)) as the port's operand codes, with ``xp``
    numpy or cupy: tf32's ignored low bits dropped, imm-scale -1 as a flipped sign bit (what
    :func:`refmodel.numerics.wgmma.operand_codes` computes from typed values); int8 forms: int32 values."""
    if form.family == "int8":
        def signed(v, dt):
            return v.astype(xp.uint8).view(xp.int8).astype(xp.int32) if dt == "s8" else v.astype(xp.int32)
        return signed(x["a"], form.dtype_a), signed(x["b"], form.dtype_b)
    p = params_for(form)
    a, b = x["a"], x["b"]
    if form.dtype_a == "tf32":
        a = a >> xp.uint32(p.tf32_ignored_bits)
    if form.dtype_b == "tf32":
        b = b >> xp.uint32(p.tf32_ignored_bits)
    if imm[0] == -1:
        a = a ^ xp.uint32(operand_spec(form.dtype_a, p).sign_mask)
    if imm[1] == -1:
        b = b ^ xp.uint32(operand_spec(form.dtype_b, p).sign_mask)
    return a, b


def port_operands(xp, form: WgmmaForm, imm, chain: int, x: dict, scale_d: bool):
    """The chain kernel's inputs (:func:`gpu.kernels.device_model.model_chain_device`) from generated
    element bits: A codes (T, L, 64, K) (step l = A's columns l*K..), B codes (T, L, K, N), C bits
    (T, 64, N) (zeros for scale-d = 0); ``xp`` numpy or cupy."""
    a, b = operand_codes_xp(xp, form, imm, x)
    T, K, N, L = x["a"].shape[0], form.k, form.n, int(chain)
    a = xp.ascontiguousarray(a.reshape(T, 64, L, K).transpose(0, 2, 1, 3))
    b = xp.ascontiguousarray(b.reshape(T, L, K, N))
    c = x["c"] if scale_d else xp.zeros_like(x["c"])
    return a, b, c


class FormRunner:
    """Compiled kernels and index tables of one job (built once, reused by every batch)."""

    def __init__(self, form: WgmmaForm, imm_scale_a: int, imm_scale_b: int, *, rs: bool = False, chain: int = 1):
        import cupy as cp

        from gpu.kernels.device_model import SOURCE, WgParams, kernel_params
        from gpu.kernels.runtime import compile_module
        from gpu.kernels.wgmma import (
            GATHER_KERNEL_NAME,
            LBO,
            SBO,
            THREADS,
            gather_kernel_source,
            kernel_source,
            plan_stages,
        )
        from refmodel.layouts.descriptor import MatrixDescriptor
        from refmodel.numerics.accumulate import decode_table

        self.cp, self.form = cp, form
        self.imm = (imm_scale_a, imm_scale_b)
        self.rs, self.chain = bool(rs), int(chain)
        self.acc_w = FORMATS[form.dtype_d][2]
        self.utype = {16: cp.uint16, 32: cp.uint32}[self.acc_w]
        self.plan = plan_stages(form, self.chain, self.rs)
        self._staged_source = kernel_source(form, rs=self.rs, chain=self.chain, imm_scale_a=imm_scale_a,
                                            imm_scale_b=imm_scale_b)
        self._hw = None          # the launcher's kernel, compiled when hardware_staged is first called
        self.hw_gather = compile_module(gather_kernel_source(form, rs=self.rs, chain=self.chain, imm_scale_a=imm_scale_a,
                                                             imm_scale_b=imm_scale_b)).get_function(GATHER_KERNEL_NAME)
        if self.plan.smem_bytes > 48 * 1024:
            self.hw_gather.max_dynamic_shared_size_bytes = self.plan.smem_bytes
        self.threads = THREADS
        self.desc = MatrixDescriptor(0, LBO, SBO).encode()
        self.tables_np = job_tables(form, self.rs, self.chain)
        t = self.tables_np
        self.index = {"img": cp.asarray(t.img_index), "acc": cp.asarray(t.acc_index),
                      "afrag": None if t.afrag_index is None else cp.asarray(t.afrag_index),
                      "shift": None if t.afrag_shift is None else cp.asarray(t.afrag_shift)}
        self.acc_index = self.index["acc"]
        self.index32 = {"img": cp.asarray(t.img_index.astype(np.int32)), "acc": cp.asarray(t.acc_index.astype(np.int32)),
                        "afrag": cp.asarray(np.zeros(1, np.int32) if t.afrag_index is None
                                            else t.afrag_index.astype(np.int32))}
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
        for i, (name, dt, rows, cols, kdim) in enumerate(_shapes(self.form, self.chain)):
            e, m, w, ik = FORMATS[dt]
            x = cp.empty((T, rows, cols), cp.uint32)
            n = T * rows * cols
            self.gen(((n + 255) // 256,), (256,), (x, fams, np.int64(T), np.int32(rows), np.int32(cols),
                                                    np.uint64(key(seed, batch, i)), np.int32(kdim), np.int32(e),
                                                    np.int32(m), np.int32(w), np.int32(ik)))
            out[name] = x
        return out

    def hardware(self, x, scale_d: bool):
        """The hardware's D (T, 64*N) bits as uint32: ``chain`` wgmmas per tile, the first with
        ``scale_d``; the kernel builds its images and registers from the element arrays itself
        (:func:`gpu.kernels.wgmma.gather_kernel_source`)."""
        cp = self.cp
        T = x["a"].shape[0]
        d = cp.empty((T, 64 * self.form.n), cp.uint32)
        ix = self.index32
        self.hw_gather((T,), (self.threads,), (x["a"], x["b"], x["c"], d, ix["img"], ix["afrag"],
                                              np.uint64(self.desc), np.uint64(self.desc), np.int32(1 if scale_d else 0)),
                       shared_mem=self.plan.smem_bytes)
        return d

    def hardware_staged(self, x, scale_d: bool):
        """:meth:`hardware` through the host launcher's kernel (:func:`gpu.kernels.wgmma.kernel_source`):
        images and registers gathered by cupy passes first, D scattered back (element dtype)."""
        cp = self.cp
        T = x["a"].shape[0]
        img, afrag, cin = hardware_inputs(cp, self.tables_np, x, self.index)
        dout = cp.zeros_like(cin)
        if self._hw is None:
            from gpu.kernels.runtime import compile_module
            from gpu.kernels.wgmma import KERNEL_NAME

            self._hw = compile_module(self._staged_source).get_function(KERNEL_NAME)
            if self.plan.smem_bytes > 48 * 1024:
                self._hw.max_dynamic_shared_size_bytes = self.plan.smem_bytes
        self._hw((T,), (self.threads,), (img, afrag, cin, dout, np.uint64(self.desc), np.uint64(self.desc),
                                       np.int32(1 if scale_d else 0)), shared_mem=self.plan.smem_bytes)
        d = cp.empty((T, 64 * self.form.n), self.utype)
        d[:, self.acc_index] = dout.view(self.utype)
        return d

    def codes(self, x):
        """A and B as the port's operand codes (tf32's ignored low bits dropped, imm-scale -1 as a
        flipped sign bit); int8 forms: int32 values."""
        return operand_codes_xp(self.cp, self.form, self.imm, x)

    def model(self, x, scale_d: bool):
        """The GPU port's D (T, 64*N) bits (uint32) for the same chain: the tiled chain kernel of
        :func:`gpu.kernels.device_model.model_chain_device` (operands staged in shared memory, the
        chain kept in registers), on :func:`port_operands`."""
        from gpu.kernels.device_model import model_chain_device

        a, b, c = port_operands(self.cp, self.form, self.imm, self.chain, x, scale_d)
        out = model_chain_device(self.form, a, b, c)
        return out.view(self.cp.uint32).reshape(a.shape[0], -1)

    def model_per_output(self, x, scale_d: bool):
        """:meth:`model` by the first port kernel (one thread per output, one launch per chain step)."""
        cp = self.cp
        form = self.form
        T = x["a"].shape[0]
        K, N, L = form.k, form.n, self.chain
        n = T * 64 * N
        grid = ((n + 255) // 256,)
        dims = (np.int32(T), np.int32(64), np.int32(K), np.int32(N))
        a, b = self.codes(x)
        if L > 1:   # step s's operands: K columns of A, K rows of B
            a = a.reshape(T, 64, L, K).transpose(2, 0, 1, 3)
            b = b.reshape(T, L, K, N).transpose(1, 0, 2, 3)
        else:
            a, b = a[None], b[None]
        if self.int_form:
            c = x["c"].view(cp.int32) if scale_d else cp.zeros_like(x["c"]).view(cp.int32)
            p = params_for(form)
            clamp = p.clamps(form.satfinite)
            for s_ in range(L):
                out = cp.empty((T, 64, N), cp.int32)
                self.model_mod.get_function("wgref_int_model")(grid, (256,), (cp.ascontiguousarray(a[s_]),
                                                                            cp.ascontiguousarray(b[s_]), c, out,
                                                                            *dims, np.int32(clamp)))
                c = out
            return c.view(cp.uint32).reshape(T, -1)
        c = x["c"] if scale_d else cp.zeros_like(x["c"])
        for s_ in range(L):
            out = cp.empty((T, 64, N), cp.uint32)
            self.model_mod.get_function("wgref_wgmma_model")(grid, (256,), (cp.ascontiguousarray(a[s_]),
                                                                           cp.ascontiguousarray(b[s_]), c, out,
                                                                           *dims, *self.tables, self.pv))
            c = out
        return c.reshape(T, -1)
