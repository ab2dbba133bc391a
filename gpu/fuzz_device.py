"""A fuzz campaign that stays on the GPU: inputs, hardware, model and comparison (issue 11, item 2).

Per batch of T tiles of one dense wgmma form (drawn from ``(seed, batch)``):

1. **inputs on the GPU** — :data:`GEN_SOURCE`'s ``wgref_gen`` writes every element's bits from a
   counter-based hash of ``(seed, batch, operand, tile, row, col)``, in one of the input families
   of :data:`FAMILIES` per tile (NaN/Inf/subnormals/max values/cancellation/wide exponent
   spread/all-zero, as the CPU fuzzer's families).  The same text compiles for the host
   (:func:`generate_host`), and :mod:`refmodel.verify.seeded` is the same in numpy, so a batch
   can be rebuilt on any CPU from its seed;
2. **the hardware** — gpu.wgmma's kernel (one wgmma per tile), its shared-memory images and
   accumulator registers gathered on the GPU from the generated elements;
3. **the model** — :mod:`gpu.device_model`'s port of refmodel's accumulator on the CUDA cores;
4. **the comparison** on the GPU; only tiles with a differing output come back, and the CPU
   refmodel re-checks them (it stays the arbiter): a tile is reported as a mismatch only if the
   CPU refmodel also differs from the hardware; if the CPU model agrees with the hardware, the
   GPU port was wrong and that is reported as ``port_disagreements`` (a bug of ours, never hidden).

The journal has the CPU fuzzer's records (``batch``, ``tiles``, ``outputs``, ``mismatches``,
``seconds``), so ``wgref merge`` adds shards of both kinds up.
"""

from __future__ import annotations

import ctypes
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from refmodel.errors import InputError
from refmodel.fileio import atomic_write_text
from refmodel.numerics.accumulate import params_for
from refmodel.numerics.wgmma import operand_spec
from refmodel.verify.seeded import FAMILIES, FORMATS, key, tile_families
from refmodel.verify.seeded import typed as seeded_typed
from refmodel.wgmma_forms import WgmmaForm

from .fuzz import RatedReport

GEN_SOURCE = r"""
#ifndef WGREF_HD
#ifdef __CUDACC_RTC__
#define WGREF_HD __host__ __device__
#else
#define WGREF_HD
#endif
#endif
typedef unsigned long long wg_u64;

WGREF_HD static inline wg_u64 wg_mix(wg_u64 z) {          /* splitmix64's finaliser */
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* One element's bits.  key: (seed, batch, operand); fam: the tile's family; (t, r, c): tile, row,
   column of the operand in math layout; kdim: 1 for A (columns are K), 0 for B (rows are K), -1
   for C.  In the cancel family A[r, k^1] = A[r, k] and B[k^1, j] = -B[k, j] (k odd), so the
   pairs of products cancel.  ebits/mbits/width/ik: the element format (ik: 0 float, 1 signed,
   2 unsigned integer). */
WGREF_HD static unsigned int wg_gen_one(wg_u64 key, int fam, long long t, int r, int c, int kdim,
                                        int ebits, int mbits, int width, int ik) {
    int hr = r, hc = c;
    if (fam == 4 && kdim == 1) hc &= ~1;
    if (fam == 4 && kdim == 0) hr &= ~1;
    int kk = kdim == 1 ? c : (kdim == 0 ? r : -1);
    wg_u64 h = wg_mix(key ^ wg_mix(((wg_u64)t << 24) ^ ((wg_u64)(hr & 0xFFF) << 12) ^ (wg_u64)(hc & 0xFFF)));
    wg_u64 h2 = wg_mix(h ^ 0xA5A5A5A5ull);
    unsigned int wmask = width >= 32 ? 0xFFFFFFFFu : ((1u << width) - 1);
    if (ik) {                                                   /* integers: random, extremes, zero */
        unsigned int x = (unsigned int)h & wmask;
        if (fam == 3 || fam == 2) {
            unsigned int ext[4] = {0u, wmask, ik == 1 ? (1u << (width - 1)) : 0u,
                                   ik == 1 ? (wmask >> 1) : 1u};
            if ((h2 & 3) != 0) x = ext[(h2 >> 2) & 3];
        } else if (fam == 5) x = (h2 & 31) ? 0u : x;
        else if (fam == 1) x = (unsigned int)(h & 7) - 3u;     /* small values around 0 */
        return x & wmask;
    }
    unsigned int sbit = 1u << (ebits + mbits);
    unsigned int emax = (1u << ebits) - 1, mmask = (1u << mbits) - 1;
    int bias = (1 << (ebits - 1)) - 1;
    unsigned int sign = (unsigned int)(h >> 63) & 1u;
    unsigned int man = (unsigned int)(h >> 8) & mmask;
    unsigned int e;
    unsigned int x;
    switch (fam) {
    case 0: x = (unsigned int)(h >> 16) & wmask; return x;                      /* any bits */
    case 2: e = 1 + (unsigned int)((h >> 40) % (emax - 1)); break;               /* all finite exponents */
    case 6: e = (h2 & 1) ? 0u : (unsigned int)(bias - 2 + ((h >> 40) % 5)); break;
    default: e = (unsigned int)(bias - 2 + ((h >> 40) % 5)); break;             /* narrow: 2^-2 .. 2^2 */
    }
    x = (sign * sbit) | (e << mbits) | man;
    if (fam == 3 && (h2 & 7) == 0) {                            /* specials, one element in 8 */
        unsigned int pick = (unsigned int)(h2 >> 3) & 7;
        unsigned int s = sign * sbit;
        unsigned int sp[8] = {s, s | (emax << mbits), s | (emax << mbits) | mmask,         /* ±0, Inf-pattern, NaN-pattern */
                              s | (emax << mbits) | (man | 1u), s | ((emax - 1) << mbits) | mmask, /* NaN payload, max */
                              s | 1u, s | (man & mmask), s | (emax << mbits) | (mmask - 1u)};
        x = sp[pick];
    }
    if (fam == 5) x = (h2 & 31) ? (sign * sbit) : x;           /* ±0, one element in 32 a value */
    if (fam == 4 && kdim == 0 && (kk & 1)) {
        x ^= sbit;                                              /* b[k^1] = -b[k]: products cancel */
        if ((h2 & 15) == 0) x ^= 1u;                            /* ... but not always exactly */
    }
    return x & wmask;
}

/* T tiles of a (rows x cols) operand; kdim: 0 when rows index K (B), 1 when cols do (A), -1 for C. */
#define WGREF_GEN_BODY                                                                          \
    long long t = idx / ((long long)rows * cols);                                               \
    int r = (int)((idx / cols) % rows), c = (int)(idx % cols);                                  \
    int fam = fams[t];                                                                          \
    out[idx] = wg_gen_one(key, fam, t, r, c, kdim, ebits, mbits, width, ik);

#ifdef __CUDACC_RTC__
extern "C" __global__ void wgref_gen(unsigned int *out, const int *fams, long long T, int rows, int cols,
                                     unsigned long long key, int kdim, int ebits, int mbits, int width, int ik) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= T * rows * cols) return;
    WGREF_GEN_BODY
}
#else
extern "C" void wgref_gen_host(unsigned int *out, const int *fams, long long T, int rows, int cols,
                               unsigned long long key, int kdim, int ebits, int mbits, int width, int ik) {
    for (long long idx = 0; idx < T * rows * cols; ++idx) { WGREF_GEN_BODY }
}
#endif
"""


_HOST: Optional[ctypes.CDLL] = None


def _host_library() -> ctypes.CDLL:
    global _HOST
    if _HOST is None:
        from .device_model import build_host_library

        _HOST = build_host_library(GEN_SOURCE, "wgref_gen", "the generator")
    return _HOST


def _shapes(form: WgmmaForm):
    return (("a", form.dtype_a, 64, form.k, 1), ("b", form.dtype_b, form.k, form.n, 0),
            ("c", form.dtype_d, 64, form.n, -1))


def generate_host(form: WgmmaForm, seed: int, batch: int, tiles: int) -> dict[str, np.ndarray]:
    """The batch's A (T, 64, K), B (T, K, N), C (T, 64, N) element bits (uint32), built on the
    host from the very source the GPU runs (:data:`GEN_SOURCE`)."""
    lib = _host_library()
    fams = tile_families(seed, batch, tiles)
    out = {}
    for i, (name, dt, rows, cols, kdim) in enumerate(_shapes(form)):
        e, m, w, ik = FORMATS[dt]
        x = np.empty((tiles, rows, cols), np.uint32)
        lib.wgref_gen_host(x.ctypes.data_as(ctypes.c_void_p), fams.ctypes.data_as(ctypes.c_void_p),
                           ctypes.c_longlong(tiles), rows, cols, ctypes.c_ulonglong(key(seed, batch, i)), kdim,
                           e, m, w, ik)
        out[name] = x
    return out


def typed(form: WgmmaForm, bits: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Element bits (uint32) -> the typed A, B, C arrays refmodel takes."""
    return seeded_typed((form.dtype_a, form.dtype_b, form.dtype_d), bits)


@dataclass
class DeviceFuzzReport(RatedReport):
    target: str
    seed: int
    batches: int = 0
    tiles: int = 0
    outputs: int = 0
    mismatches: int = 0
    port_disagreements: int = 0
    tiles_copied_back: int = 0
    seconds: float = 0.0
    compile_seconds: float = 0.0
    first: Optional[dict] = None
    forms: dict = field(default_factory=dict)


class _FormRunner:
    """Compiled kernels and index tables of one form (built once, reused by every batch)."""

    def __init__(self, form: WgmmaForm, imm_scale_a: int, imm_scale_b: int):
        import cupy as cp

        from refmodel.layouts.fragment import accumulator_layout

        from .device_model import SOURCE, WgParams, kernel_params
        from .runtime import compile_module
        from .wgmma import KBYTES, KERNEL_NAME, LBO, SBO, THREADS, kernel_source, plan_stages
        from refmodel.layouts.descriptor import MatrixDescriptor, kmajor_offsets
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


def _draw(seed: int, batch: int, forms: list[WgmmaForm]):
    rng = np.random.default_rng([seed, batch, 77])
    f = forms[int(rng.integers(len(forms)))]
    imm = (int(rng.choice([1, -1])), int(rng.choice([1, -1]))) if f.has_imm_scale else (1, 1)
    return f, bool(rng.integers(4) != 0), imm


def tiles_for(form: WgmmaForm, batch_tiles: int) -> int:
    """Tiles of a batch: ``batch_tiles`` counts n256 tiles, so every batch has about the same
    number of outputs whatever the form's N (narrow forms get more tiles, at most 8 times as many)."""
    return max(1, batch_tiles * 256 // max(form.n, 32))


def precompile(forms: list[WgmmaForm], runners: dict, workers: int = 16) -> float:
    """Build the runner (NVRTC kernels, index tables) of every form and imm-scale pair the campaign
    can draw, in parallel threads; returns the seconds it took (kept out of the outputs/s)."""
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.time()
    keys = [(f, imm) for f in forms for imm in ([(1, 1), (1, -1), (-1, 1), (-1, -1)] if f.has_imm_scale else [(1, 1)])]
    todo = [k for k in keys if (k[0].instr, k[1]) not in runners]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for (f, imm), r in zip(todo, pool.map(lambda k: _FormRunner(k[0], *k[1]), todo)):
            runners[(f.instr, imm)] = r
    return time.time() - t0


def cpu_recheck(form: WgmmaForm, bits: dict, d_hw_bits: np.ndarray, scale_d: bool, imm) -> np.ndarray:
    """refmodel's D for the copied-back tiles vs the hardware: a boolean (T, 64*N) of real mismatches."""
    from refmodel.dtypes import bits_of
    from refmodel.numerics.wgmma import wgmma

    a, b, c = typed(form, bits)
    want = wgmma(form.instr, a, b, c, scale_d=scale_d, imm_scale_a=imm[0], imm_scale_b=imm[1])
    w = bits_of(want).reshape(a.shape[0], -1).astype(np.uint32)
    return w != d_hw_bits.astype(np.uint32)


def fuzz_device(target: str, *, seconds: Optional[float] = None, cases: int = 10**12, seed: int = 0,
                batch_tiles: int = 8192, out: str | Path = "wgref-fuzz", shard: tuple[int, int] = (0, 1),
                plant: Optional[int] = None, progress: bool = False, resume: bool = False,
                fault_at: Optional[int] = None) -> DeviceFuzzReport:
    """Fuzz the dense wgmma forms of ``target`` (gpu.fuzz.select_forms: ``e4m3``, ``bf16``, ``all``,
    an instruction, ...) with everything on the GPU; see the module doc.

    ``plant=b``: flip one bit of one hardware output in batch ``b`` (a self-test: the campaign must
    report exactly that output).  ``fault_at=b``: launch an illegal-address kernel before batch
    ``b`` once per ``out`` folder (as gpu.fuzz.fuzz).  Journal records as gpu.fuzz.fuzz's.
    """
    import cupy as cp

    from refmodel.verify.journal import open_journal

    from .fuzz import select_forms

    forms = select_forms(target)
    si, sn = shard
    if isinstance(si, bool) or isinstance(sn, bool) or sn < 1 or not 0 <= si < sn:
        raise InputError(f"shard must be (i, n) with n >= 1 and 0 <= i < n, got {shard!r}")
    if isinstance(batch_tiles, bool) or not isinstance(batch_tiles, int) or batch_tiles < 1:
        raise InputError(f"batch_tiles must be a positive int, got {batch_tiles!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    journal = out / "journal.jsonl"
    header = {"target": target, "seed": seed, "engine": "gpu", "batch_tiles": batch_tiles}
    if sn > 1:
        header["shard"] = [int(si), int(sn)]
    rep = DeviceFuzzReport(target, seed)
    b = si
    for rec in open_journal(journal, header, resume):
        b = max(b, rec["batch"] + sn)
        for k in ("tiles", "outputs", "mismatches", "seconds"):
            setattr(rep, k, getattr(rep, k) + rec[k])
        rep.port_disagreements += rec.get("port_disagreements", 0)
    runners: dict = {}
    rep.compile_seconds = precompile(forms, runners)
    t_start = time.time()
    while rep.tiles < cases and (seconds is None or time.time() - t_start < seconds):
        if fault_at is not None and b == fault_at and not (out / "fault-injected").exists():
            atomic_write_text(out / "fault-injected", f"batch {b}\n")
            from .runtime import fault_illegal_address

            try:
                fault_illegal_address()
            except Exception as e:  # the context is dead: exit now, without unloading ~900 modules noisily
                print(f"injected fault before batch {b}: {type(e).__name__}: {e}", flush=True)
                os._exit(70)
        t0 = time.time()
        form, scale_d, imm = _draw(seed, b, forms)
        key = (form.instr, imm)
        if key not in runners:
            runners[key] = _FormRunner(form, *imm)
        run = runners[key]
        T = int(min(tiles_for(form, batch_tiles), cases - rep.tiles))
        fams = cp.asarray(tile_families(seed, b, T))
        x = run.generate(seed, b, fams)
        d_hw = run.hardware(x, scale_d)
        d_model = run.model(x, scale_d)
        if plant == b:
            d_hw[T // 2, 7] ^= 1
        diff = d_hw.astype(cp.uint32) != d_model
        bad_tiles = cp.nonzero(diff.any(axis=1))[0]
        n_port = n_bad = 0
        if bad_tiles.size:     # only these tiles come back; the CPU refmodel decides
            idx = cp.asnumpy(bad_tiles)
            bits = {k: cp.asnumpy(v[bad_tiles]) for k, v in x.items()}
            hw_bits = cp.asnumpy(d_hw[bad_tiles])
            port_bits = cp.asnumpy(d_model[bad_tiles])
            real = cpu_recheck(form, bits, hw_bits, scale_d, imm)
            n_bad = int(real.sum())
            n_port = int(((port_bits != hw_bits.astype(np.uint32)) != real).sum())
            rep.tiles_copied_back += int(idx.size)
            if (n_bad or n_port) and rep.first is None:
                t, col = np.argwhere(real | ((port_bits != hw_bits.astype(np.uint32)) != real))[0]
                rep.first = {"batch": b, "instr": form.instr, "tile": int(idx[t]), "row": int(col) // form.n,
                             "col": int(col) % form.n, "family": FAMILIES[int(tile_families(seed, b, T)[idx[t]])],
                             "scale_d": scale_d, "imm_scale": list(imm), "hw": int(hw_bits[t, col]),
                             "gpu_model": int(port_bits[t, col]), "real_mismatch": bool(real[t, col])}
                np.savez_compressed(out / f"mismatch_batch{b}.npz", tiles=idx, hw=hw_bits, gpu_model=port_bits,
                                    **bits, meta=np.array(json.dumps({"instr": form.instr, "scale_d": scale_d,
                                                                      "imm": list(imm), "seed": seed, "batch": b})))
        cp.cuda.runtime.deviceSynchronize()
        dt = time.time() - t0
        outputs = T * 64 * form.n
        rec = {"batch": b, "job": f"{form.instr}|sd={int(scale_d)}|imm={imm[0]},{imm[1]}", "tiles": T,
               "outputs": outputs, "mismatches": n_bad, "port_disagreements": n_port,
               "tiles_copied_back": int(bad_tiles.size), "seconds": round(dt, 5)}
        with open(journal, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        rep.batches += 1
        rep.tiles += T
        rep.outputs += outputs
        rep.mismatches += n_bad
        rep.port_disagreements += n_port
        rep.seconds += dt
        f = rep.forms.setdefault(form.instr, [0, 0])
        f[0] += outputs
        f[1] += n_bad
        if progress:
            print(f"batch {b}: {form.instr} {outputs} outputs {n_bad} mismatches; "
                  f"{rep.rate / 1e9:.2f} G outputs/s", flush=True)
        b += sn
    return rep
