"""``wgref fuzz lib:triton|lib:cublas|lib:scaled-mm``: fuzz a library call against its golden model.

Each batch ``b`` is one call of the real library on the GPU, drawn from ``np.random.default_rng([seed, b])``
(so a resumed or sharded campaign sees the same calls): a configuration of the call and one input
family (:data:`FAMILIES`), built on the host with numpy + ml_dtypes.  The library's output is compared
bit for bit (NaN payloads included) with refmodel's golden model of that library:

=================  ====================================================  ==========================================
target             the call                                              golden model
=================  ====================================================  ==========================================
``lib:triton``     the textbook Triton tiled matmul (:data:`TRITON_BM` x  :func:`refmodel.golden.triton_matmul`
                   :data:`TRITON_BN` tiles): e4m3/e5m2/f16/bf16/f32,
                   BLOCK_K, num_warps, max_num_imprecise_acc,
                   input_precision, out dtype
``lib:cublas``     ``torch.matmul`` bf16/f16 (cuBLAS)                    :func:`refmodel.golden.cublas_matmul` under
                                                                         :func:`~refmodel.golden.cublas_schedule`
``lib:scaled-mm``  ``torch._scaled_mm`` e4m3, per-tensor or row-wise     :func:`refmodel.numerics.scaled_mm.scaled_mm`
                   scales, f32/bf16 out, ``use_fast_accum``
=================  ====================================================  ==========================================

A call whose schedule the golden model cannot tell is ``skipped`` (journaled with the reason), never
counted as a mismatch: a cuBLAS split-K kernel whose split count was not recorded, a ``_scaled_mm``
that ran a split-K kernel (the model is the unsplit schedule), or a configuration the library refused
to build (:class:`CallRefused`).

The library sits behind a runner (:class:`TorchRunner` on the GPU; :class:`GoldenRunner`, the golden
models themselves, for tests): one method per target taking the numpy inputs and the configuration and
returning ``(output, kernel names or None)``.  The journal (``<out>/journal.jsonl``) has the wgmma
fuzzer's records, one per call (``tiles`` = 1), so ``wgref merge`` adds shards up; the first mismatch
is saved to ``<out>/mismatch_batch<b>.npz`` (inputs and both outputs as bits, the configuration).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from refmodel.dtypes import bits_of, element_dtype, from_bits
from refmodel.errors import DeviceError, InputError
from refmodel.verify.seeded import FORMATS

from .fuzz import RatedReport

TARGETS = ("triton", "cublas", "scaled-mm")
FAMILIES = ("narrow", "wide", "special", "cancel", "zero", "subnormal")
TRITON_BM = TRITON_BN = 64          # the fuzzed Triton kernel's tile (M, N multiples of it)
# the shapes drawn (module constants, so a test can shrink them)
TRITON_MN = (64, 128, 256)          # M and N of a Triton call; K = BLOCK_K * 1..TRITON_K_BLOCKS
TRITON_K_BLOCKS = 16
CUBLAS_MN = (256, 512, 1024)        # cuBLAS runs these without split-K (mostly)
CUBLAS_K = (256, 512, 1024, 2048)
SCALED_MM_M = (64, 128, 256)
SCALED_MM_N = (64, 128, 256, 512)   # N >= 64: small outputs with a long K make cuBLAS split K
SCALED_MM_K_BLOCKS = 16             # K = 128 * 1..SCALED_MM_K_BLOCKS
_FP8 = ("e4m3", "e5m2")
_SAFE_EXP = 56                      # wide/subnormal families: |exponent| <= 56 so products stay in f32
WIDE_TOP = 4                        # the wide family's largest exponent: sums of K <= 2048 products fit f16


class CallRefused(Exception):
    """The library refused to build or run a drawn configuration (e.g. a Triton compile error)."""


@dataclass
class LibraryFuzzReport(RatedReport):
    target: str
    seed: int
    batches: int = 0
    calls: int = 0
    outputs: int = 0
    mismatches: int = 0
    skipped: int = 0
    seconds: float = 0.0
    first: Optional[dict] = None
    repro: Optional[str] = None


def parse_target(target: str) -> str:
    """``'lib:triton'`` or ``'triton'`` -> ``'triton'`` (one of :data:`TARGETS`)."""
    t = str(target).strip()
    name = t[4:] if t.startswith("lib:") else t
    if name not in TARGETS:
        raise InputError(f"library fuzz target {target!r} is not one of "
                         f"{', '.join('lib:' + x for x in TARGETS)}")
    return name


# ----------------------------------------------------------------------------- inputs

def _fmt(dtype: str) -> tuple[int, int, int]:
    e, m, w, _ = FORMATS[dtype]
    return e, m, w


def _uint(width: int):
    return {8: np.uint8, 16: np.uint16, 32: np.uint32}[width]


def _compose(dtype: str, sign, efield, man) -> np.ndarray:
    """Element bits from sign, biased exponent field and mantissa arrays (e4m3's NaN code -> max)."""
    e, m, w = _fmt(dtype)
    bits = (np.asarray(sign, np.uint64) << np.uint64(e + m)) | (np.asarray(efield, np.uint64) << np.uint64(m)) \
        | np.asarray(man, np.uint64)
    if dtype == "e4m3":
        bits = np.where((bits & 0x7F) == 0x7F, bits - 1, bits)
    return bits.astype(_uint(w))


def special_values(dtype: str) -> dict[str, int]:
    """Bits of +0, +Inf (e4m3 has none: its max), a quiet NaN, the max finite and the min subnormal."""
    e, m, _ = _fmt(dtype)
    emax = (1 << e) - 1
    if dtype == "e4m3":
        return {"zero": 0, "inf": 0x7E, "nan": 0x7F, "max": 0x7E, "min_subnormal": 1}
    return {"zero": 0, "inf": emax << m, "nan": (emax << m) | (1 << (m - 1)),
            "max": ((emax - 1) << m) | ((1 << m) - 1), "min_subnormal": 1}


def _narrow(rng: np.random.Generator, dtype: str, shape) -> np.ndarray:
    """Standard normals times 2**randint(-3, 4), rounded to ``dtype`` (as bits)."""
    x = rng.standard_normal(shape).astype(np.float32) * np.exp2(rng.integers(-3, 5, shape)).astype(np.float32)
    fmax = float(from_bits(np.array([special_values(dtype)["max"]]), dtype).astype(np.float32)[0])
    return bits_of(np.clip(x, -fmax, fmax).astype(element_dtype(dtype))).copy()


def _random_exponent(rng: np.random.Generator, dtype: str, shape, lo: int, hi: int) -> np.ndarray:
    """Normal values with unbiased exponents uniform in [lo, hi] (kept inside the dtype's normals)."""
    e, m, _ = _fmt(dtype)
    bias = (1 << (e - 1)) - 1
    flo, fhi = max(1, lo + bias), min((1 << e) - 2 + (dtype == "e4m3"), hi + bias)
    return _compose(dtype, rng.integers(0, 2, shape), rng.integers(flo, fhi + 1, shape),
                    rng.integers(0, 1 << m, shape))


def _emin(dtype: str) -> int:
    """The smallest normal exponent of ``dtype``."""
    e, _, _ = _fmt(dtype)
    return 2 - (1 << (e - 1))


def _operand(rng: np.random.Generator, family: str, dtype: str, shape, role: str, K: int) -> np.ndarray:
    """One operand's bits (``role`` 'a' or 'b') in ``family``; see :func:`make_inputs`."""
    e, m, w = _fmt(dtype)
    sign = np.uint64(1 << (e + m))
    if family in ("narrow", "cancel"):
        return _narrow(rng, dtype, shape)
    if family == "wide":
        return _random_exponent(rng, dtype, shape, max(_emin(dtype), -_SAFE_EXP), WIDE_TOP)
    if family == "special":
        x = _narrow(rng, dtype, shape)
        sp = special_values(dtype)
        vals = np.array([sp["zero"], sp["inf"], sp["nan"], sp["max"], sp["min_subnormal"]], np.uint64)
        hit = rng.random(shape) < min(1 / 64, 1 / K)
        pick = vals[rng.integers(0, vals.size, shape)] | (rng.integers(0, 2, shape).astype(np.uint64) * sign)
        return np.where(hit, pick, x).astype(_uint(w))
    if family == "zero":
        zeros = (rng.integers(0, 2, shape).astype(np.uint64) * sign)
        return np.where(rng.random(shape) < 31 / 32, zeros, _narrow(rng, dtype, shape)).astype(_uint(w))
    if family == "subnormal":
        lo = _emin(dtype)
        if role == "b":     # large values: B times A's subnormals lands in the normal range
            top = min(-lo, _SAFE_EXP)
            return _random_exponent(rng, dtype, shape, top - 4, top)
        sub = _compose(dtype, rng.integers(0, 2, shape), 0, rng.integers(1, 1 << m, shape))
        low = _random_exponent(rng, dtype, shape, lo, lo + 2)
        return np.where(rng.random(shape) < 0.75, sub, low).astype(_uint(w))
    raise InputError(f"unknown input family {family!r}; known are {', '.join(FAMILIES)}")


def make_inputs(rng: np.random.Generator, family: str, dtype: str, M: int, N: int, K: int):
    """A (M, K) and B (K, N) of ``dtype`` (typed ml_dtypes/numpy arrays) in one input family.

    narrow: normals times 2**randint(-3, 4); wide: exponents uniform from the smallest normal one
    (at least -56) up to :data:`WIDE_TOP` (products span most of the range, sums stay finite in
    f16); special: narrow with min(1/64, 1/K) of the elements ±0, ±Inf (e4m3: ±max), ±NaN, ±max,
    ±min subnormal (about two per dot product, so most outputs are not NaN); cancel: narrow with
    A[:, 2i+1] = A[:, 2i] and B[2i+1] = -B[2i] (each pair of products cancels exactly); zero: 31/32
    of the elements ±0; subnormal: A 3/4 subnormals and 1/4 of the lowest normal binades, B large
    (about 2**-emin, at most 2**56) so the products are normal numbers."""
    if K % 2 and family == "cancel":
        raise InputError(f"the cancel family pairs K columns: K must be even, got {K}")
    a = _operand(rng, family, dtype, (M, K), "a", K)
    b = _operand(rng, family, dtype, (K, N), "b", K)
    if family == "cancel":
        e, m, _ = _fmt(dtype)
        a[:, 1::2] = a[:, 0::2]
        b[1::2] = b[0::2] ^ a.dtype.type(1 << (e + m))
    return from_bits(a, dtype), from_bits(b, dtype)


# ----------------------------------------------------------------------------- configurations

def _pick(rng: np.random.Generator, options):
    return options[int(rng.integers(len(options)))]


def draw_triton(rng: np.random.Generator) -> dict:
    """One Triton matmul configuration (K of the instruction always divides BLOCK_K)."""
    dtype = _pick(rng, ("e4m3", "e5m2", "f16", "bf16", "f32"))
    bk = _pick(rng, (32, 64, 128))
    cfg = {"dtype": dtype, "block_k": bk, "num_warps": _pick(rng, (4, 8)), "imp": None, "input_precision": None}
    if dtype in _FP8:
        cfg["imp"] = _pick(rng, [None, 0] + list(range(32, bk + 1, 32)))
    if dtype == "f32":
        cfg["input_precision"] = _pick(rng, ("tf32", "tf32x3", "ieee"))
    cfg["out"] = _pick(rng, ("f32", "bf16", "f16"))
    cfg["M"], cfg["N"] = _pick(rng, TRITON_MN), _pick(rng, TRITON_MN)
    cfg["K"] = bk * int(rng.integers(1, TRITON_K_BLOCKS + 1))
    return cfg


def draw_cublas(rng: np.random.Generator) -> dict:
    """One ``torch.matmul`` (bf16/f16 in and out) on shapes where cuBLAS mostly runs no split-K."""
    return {"dtype": _pick(rng, ("bf16", "f16")), "M": _pick(rng, CUBLAS_MN), "N": _pick(rng, CUBLAS_MN),
            "K": _pick(rng, CUBLAS_K)}


def draw_scaled_mm(rng: np.random.Generator) -> dict:
    """One ``torch._scaled_mm`` e4m3 call: per-tensor scales (powers of two or not) or row-wise scales
    (bf16 out, torch's rule), out f32/bf16, use_fast_accum; M % 64, N % 16, K % 128 == 0."""
    scaling = _pick(rng, ("pow2", "tensor", "row"))
    return {"dtype": "e4m3", "scaling": scaling, "out": "bf16" if scaling == "row" else _pick(rng, ("f32", "bf16")),
            "use_fast_accum": bool(rng.integers(2)), "M": _pick(rng, SCALED_MM_M), "N": _pick(rng, SCALED_MM_N),
            "K": 128 * int(rng.integers(1, SCALED_MM_K_BLOCKS + 1))}


def _scales(rng: np.random.Generator, cfg: dict) -> tuple[np.ndarray, np.ndarray]:
    if cfg["scaling"] == "pow2":
        return (np.float32(2.0 ** int(rng.integers(-4, 5))), np.float32(2.0 ** int(rng.integers(-4, 5))))
    if cfg["scaling"] == "tensor":
        return (np.float32(rng.uniform(0.05, 4.0)), np.float32(rng.uniform(0.05, 4.0)))
    return ((rng.random((cfg["M"], 1)) + 0.5).astype(np.float32), (rng.random((1, cfg["N"])) + 0.5).astype(np.float32))


def job_string(target: str, cfg: dict, family: str) -> str:
    """A short description of a drawn call, for the journal."""
    shape = f"{cfg['M']}x{cfg['N']}x{cfg['K']}"
    if target == "triton":
        opt = (f" imp={cfg['imp']}" if cfg["dtype"] in _FP8 else "") + \
              (f" {cfg['input_precision']}" if cfg["dtype"] == "f32" else "")
        return f"{cfg['dtype']} {shape} bk{cfg['block_k']} w{cfg['num_warps']}{opt} ->{cfg['out']} {family}"
    if target == "cublas":
        return f"{cfg['dtype']} {shape} {family}"
    return f"e4m3 {shape} {cfg['scaling']} ->{cfg['out']} fast={int(cfg['use_fast_accum'])} {family}"


def draw_call(target: str, seed: int, batch: int) -> tuple[dict, str, dict]:
    """Configuration, input family and inputs of batch ``batch`` (from ``default_rng([seed, batch])``)."""
    rng = np.random.default_rng([seed, batch])
    cfg = {"triton": draw_triton, "cublas": draw_cublas, "scaled-mm": draw_scaled_mm}[target](rng)
    family = _pick(rng, FAMILIES)
    a, b = make_inputs(rng, family, cfg["dtype"], cfg["M"], cfg["N"], cfg["K"])
    if target == "scaled-mm":
        sa, sb = _scales(rng, cfg)
        return cfg, family, {"a": a, "b_nk": np.ascontiguousarray(b.T), "scale_a": sa, "scale_b": sb}
    return cfg, family, {"a": a, "b": b}


# ----------------------------------------------------------------------------- golden models

def _np_out(name: str) -> np.dtype:
    return element_dtype(name)


def golden_triton(x: dict, cfg: dict) -> np.ndarray:
    from refmodel.golden import triton_matmul

    with np.errstate(all="ignore"):       # Inf - Inf in tf32x3's split is data, not a fault
        return triton_matmul(x["a"], x["b"], block_k=cfg["block_k"],
                             input_precision=cfg["input_precision"] or "tf32", max_num_imprecise_acc=cfg["imp"],
                             out_dtype=_np_out(cfg["out"]))


def golden_cublas(x: dict, cfg: dict, kernels) -> np.ndarray:
    """cuBLAS's output under the schedule its kernels name; InputError when that schedule is unknown."""
    from refmodel.golden import cublas_matmul, cublas_schedule

    sched = cublas_schedule(list(kernels or []), cfg["M"], cfg["N"], cfg["K"])
    return cublas_matmul(x["a"], x["b"], **sched.kwargs(), out_dtype=cfg["dtype"])


def golden_scaled_mm(x: dict, cfg: dict) -> np.ndarray:
    from refmodel.numerics.scaled_mm import scaled_mm

    return scaled_mm(x["a"], x["b_nk"], x["scale_a"], x["scale_b"], out_dtype=cfg["out"],
                     use_fast_accum=cfg["use_fast_accum"])


def _golden(target: str, x: dict, cfg: dict, kernels) -> tuple[Optional[np.ndarray], Optional[str]]:
    """(golden output, None), or (None, why the call cannot be modelled)."""
    if target == "triton":
        return golden_triton(x, cfg), None
    if target == "cublas":
        try:
            return golden_cublas(x, cfg, kernels), None
        except InputError as e:
            return None, str(e)
    split = [k for k in (kernels or []) if "splitK" in k]
    if split:
        return None, f"cuBLAS ran a split-K kernel ({_short(split[0])}); refmodel's scaled_mm is the unsplit schedule"
    return golden_scaled_mm(x, cfg), None


def _short(name: str) -> str:
    return name if len(name) <= 120 else name[:117] + "..."


class GoldenRunner:
    """The golden models standing in for the libraries (tests, and a CPU check of the campaign
    machinery: it finds nothing by construction).  cuBLAS calls report a no-split nvjet kernel."""

    def triton(self, x: dict, cfg: dict):
        return golden_triton(x, cfg), None

    def cublas(self, x: dict, cfg: dict):
        kern = [f"nvjet_sm90_{'tst' if cfg['dtype'] == 'bf16' else 'hsh'}_64x8_64x16_1x2_h_bz_NNT"]
        return golden_cublas(x, cfg, kern), kern

    def scaled_mm(self, x: dict, cfg: dict):
        return golden_scaled_mm(x, cfg), ["nvjet_sm90_qqsss_64x48_128x15_2x4_h_bz_algo2_TNT"]


# ----------------------------------------------------------------------------- the GPU runner

def _triton_kernel():
    """gpu.record_triton's kernel: the one whose recordings fixtures/triton holds."""
    from .record_triton import tiled_matmul_kernel

    return tiled_matmul_kernel()


def _triton_refusals() -> tuple:
    """Triton's exception types for a configuration it will not build (compile error, out of resources)."""
    found = []
    for mod, cls in (("triton.compiler.errors", "CompilationError"), ("triton.runtime.errors", "OutOfResources")):
        try:
            found.append(getattr(__import__(mod, fromlist=[cls]), cls))
        except (ImportError, AttributeError):
            pass
    return tuple(found)


class TorchRunner:
    """The real libraries on the GPU through torch (cuBLAS, ``_scaled_mm``) and Triton; kernel
    names from torch's profiler, as gpu.record_cublas reads them."""

    def __init__(self):
        try:
            import torch
        except ImportError as e:
            raise DeviceError(f"torch is needed to fuzz library calls: pip install torch ({e})") from None
        if not torch.cuda.is_available():
            raise DeviceError("torch sees no CUDA device: run on a machine with an H100/H200 GPU")
        cc = torch.cuda.get_device_capability(0)
        if cc != (9, 0):
            raise DeviceError(f"device 0 has compute capability {cc[0]}.{cc[1]}, the golden models are Hopper's (9.0)")
        self.torch = torch
        self._tdt = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "f16": torch.float16,
                     "bf16": torch.bfloat16, "f32": torch.float32}
        self._view = {1: torch.uint8, 2: torch.int16, 4: torch.int32}

    def _to_gpu(self, x: np.ndarray, dtype: str):
        signed = {1: np.uint8, 2: np.int16, 4: np.int32}[x.dtype.itemsize]
        t = self.torch.from_numpy(np.ascontiguousarray(bits_of(x)).view(signed))
        return t.view(self._tdt[dtype]).cuda()

    def _to_host(self, t, dtype: str) -> np.ndarray:
        u = t.contiguous().view(self._view[t.element_size()]).cpu().numpy()
        return from_bits(bits_of(u), dtype)

    def _profiled(self, call):
        """Run ``call`` once to warm up, then once under the profiler: (output, CUDA kernel names)."""
        from torch.profiler import ProfilerActivity, profile

        call()
        self.torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            d = call()
            self.torch.cuda.synchronize()
        return d, sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})

    def triton(self, x: dict, cfg: dict):
        try:
            import triton.language as tl
        except ImportError as e:
            raise DeviceError(f"triton is needed to fuzz lib:triton: pip install triton ({e})") from None
        torch = self.torch
        kern = _triton_kernel()
        a, b = self._to_gpu(x["a"], cfg["dtype"]), self._to_gpu(x["b"], cfg["dtype"])
        M, N, K = cfg["M"], cfg["N"], cfg["K"]
        c = torch.empty(M, N, device="cuda", dtype=self._tdt[cfg["out"]])
        imp = -1 if (cfg["dtype"] in _FP8 and cfg["imp"] is None) else (cfg["imp"] or 0)
        out_tl = {"f32": tl.float32, "bf16": tl.bfloat16, "f16": tl.float16}[cfg["out"]]
        try:
            kern[(M // TRITON_BM, N // TRITON_BN)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                                   c.stride(0), c.stride(1), BM=TRITON_BM, BN=TRITON_BN,
                                                   BK=cfg["block_k"], PREC=cfg["input_precision"] or "none", IMP=imp,
                                                   OUT=out_tl, num_warps=cfg["num_warps"])
        except _triton_refusals() as e:
            raise CallRefused(f"Triton refused it: {type(e).__name__}: {str(e).splitlines()[0][:200]}") from None
        torch.cuda.synchronize()
        return self._to_host(c, cfg["out"]), None

    def cublas(self, x: dict, cfg: dict):
        a, b = self._to_gpu(x["a"], cfg["dtype"]), self._to_gpu(x["b"], cfg["dtype"])
        d, kernels = self._profiled(lambda: self.torch.matmul(a, b))
        return self._to_host(d, cfg["dtype"]), kernels

    def scaled_mm(self, x: dict, cfg: dict):
        torch = self.torch
        a, b_nk = self._to_gpu(x["a"], "e4m3"), self._to_gpu(x["b_nk"], "e4m3")
        sa = torch.from_numpy(np.array(x["scale_a"], np.float32)).cuda()    # 0-d (per tensor) or (M, 1)
        sb = torch.from_numpy(np.array(x["scale_b"], np.float32)).cuda()    # 0-d or (1, N)
        out = {"f32": torch.float32, "bf16": torch.bfloat16}[cfg["out"]]
        d, kernels = self._profiled(lambda: torch._scaled_mm(a, b_nk.t(), sa, sb, out_dtype=out,
                                                             use_fast_accum=cfg["use_fast_accum"]))
        return self._to_host(d, cfg["out"]), kernels


# ----------------------------------------------------------------------------- the campaign

def _header(target: str, seed: int, shard: tuple[int, int]) -> dict:
    head = {"target": f"lib:{target}", "seed": seed, "engine": "library"}
    if shard[1] > 1:
        head["shard"] = [int(shard[0]), int(shard[1])]
    return head


def _check_args(cases, seed, shard) -> None:
    si, sn = shard
    if isinstance(si, bool) or isinstance(sn, bool) or sn < 1 or not 0 <= si < sn:
        raise InputError(f"shard must be (i, n) with n >= 1 and 0 <= i < n, got {shard!r}")
    if isinstance(cases, bool) or not isinstance(cases, (int, np.integer)) or cases < 1:
        raise InputError(f"cases must be a positive int (library calls), got {cases!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be an int >= 0, got {seed!r}")


def _save_mismatch(out: Path, target: str, seed: int, b: int, job: str, cfg: dict, family: str, x: dict,
                   got: np.ndarray, want: np.ndarray, bad: np.ndarray, kernels) -> dict:
    """Save the first mismatching call and return its summary (``report.first``)."""
    path = out / f"mismatch_batch{b}.npz"
    conf = {"target": f"lib:{target}", "seed": seed, "batch": b, "family": family, "config": cfg,
            "kernels": kernels}
    arrays = {k: bits_of(v) if k in ("a", "b", "b_nk") else np.asarray(v, np.float32) for k, v in x.items()}
    np.savez_compressed(path, **arrays, library=bits_of(got), golden=bits_of(want), config=np.array(json.dumps(conf)))
    i, j = (int(v) for v in np.argwhere(bad)[0])
    w = 2 * got.dtype.itemsize
    lib, gold = f"0x{int(bits_of(got)[i, j]):0{w}x}", f"0x{int(bits_of(want)[i, j]):0{w}x}"
    n = int(bad.sum())
    return {"batch": b, "job": job, "row": i, "col": j, "library": lib, "golden": gold, "mismatches": n,
            "file": str(path), "minimal": f"{job}: D[{i},{j}] library {lib}, golden {gold} "
                                          f"({n} of {bad.size} outputs differ)"}


def fuzz_library(target: str, *, cases: int, seed: int = 0, seconds: Optional[float] = None,
                 out: str | Path = "wgref-fuzz", shard: tuple[int, int] = (0, 1), resume: bool = False,
                 runner: Any = None, progress: bool = False) -> LibraryFuzzReport:
    """Run ``cases`` library calls (or until ``seconds``) of ``target`` ('triton', 'cublas',
    'scaled-mm', with or without the 'lib:' prefix) and diff each against its golden model (module doc).

    ``shard=(i, n)`` runs the batches ``i, i + n, ...``; ``resume`` continues after the last journaled
    batch of the same campaign.  ``runner`` defaults to :class:`TorchRunner` (the GPU)."""
    name = parse_target(target)
    _check_args(cases, seed, shard)
    from refmodel.verify.journal import open_journal

    si, sn = shard
    if runner is None:
        runner = TorchRunner()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    journal = out / "journal.jsonl"
    header = _header(name, int(seed), (si, sn))
    rep = LibraryFuzzReport(f"lib:{name}", int(seed))
    b = si
    for rec in open_journal(journal, header, resume):
        b = max(b, rec["batch"] + sn)
        rep.batches += 1
        rep.calls += rec["tiles"]
        rep.outputs += rec["outputs"]
        rep.mismatches += rec["mismatches"]
        rep.skipped += int(bool(rec.get("skipped")))
        rep.seconds += rec["seconds"]
    call = getattr(runner, name.replace("-", "_"))
    t_start = time.time()
    while rep.calls < cases and (seconds is None or time.time() - t_start < seconds):
        t0 = time.time()
        cfg, family, x = draw_call(name, int(seed), b)
        job = job_string(name, cfg, family)
        rec: dict = {"batch": b, "job": job, "tiles": 1, "outputs": 0, "mismatches": 0}
        kernels = None
        try:
            got, kernels = call(x, cfg)
            with np.errstate(all="ignore"):       # overflow and Inf - Inf are data, not faults
                want, why = _golden(name, x, cfg, kernels)
        except CallRefused as e:
            want, why = None, str(e)
        if kernels is not None:
            rec["kernels"] = [_short(k) for k in kernels]
        if want is None:
            rec["skipped"], rec["why"] = True, why
            rep.skipped += 1
        else:
            got, want = np.asarray(got), np.asarray(want)
            if got.dtype != want.dtype or got.shape != want.shape:
                raise InputError(f"the {name} runner returned {got.dtype} {got.shape}, the golden model "
                                 f"{want.dtype} {want.shape}")
            bad = bits_of(got) != bits_of(want)
            rec["outputs"], rec["mismatches"], rec["skipped"] = int(bad.size), int(bad.sum()), False
            if rec["mismatches"] and rep.first is None:
                rep.first = _save_mismatch(out, name, int(seed), b, job, cfg, family, x, got, want, bad, kernels)
                rep.repro = rep.first["file"]
                rec["mismatch_file"] = rep.repro
        dt = time.time() - t0
        rec["seconds"] = round(dt, 4)
        with open(journal, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        rep.batches += 1
        rep.calls += 1
        rep.outputs += rec["outputs"]
        rep.mismatches += rec["mismatches"]
        rep.seconds += dt
        if progress:
            what = f"skipped ({rec['why']})" if rec.get("skipped") else \
                f"{rec['outputs']} outputs, {rec['mismatches']} mismatches"
            print(f"batch {b}: {job}: {what}", flush=True)
        b += sn
    return rep


def record_batches(target: str, seed: int, batches: list[int], path: str | Path) -> None:
    """Re-run batches of a library campaign on the GPU and save the library's output bits (``b<batch>``
    arrays in one npz): how a mismatch found by a campaign becomes a fixture
    (:func:`gpu.record_triton.store_fuzz`)."""
    runner = TorchRunner()
    out = {}
    for b in batches:
        t = parse_target(target)
        cfg, _, x = draw_call(t, seed, b)
        o, _ = getattr(runner, t.replace("-", "_"))(x, cfg)
        out[f"b{b}"] = o.view({4: np.uint32, 2: np.uint16}[o.dtype.itemsize])
    np.savez_compressed(path, **out)
