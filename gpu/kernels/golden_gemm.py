"""Golden GEMMs on the GPU: a :class:`refmodel.golden.Schedule` (dense wgmma chains, promotion with
scales, split-K and its reduction order, the epilogue) executed for a whole GEMM on the CUDA cores,
bit for bit what :meth:`Schedule.run` computes.  :func:`golden_gemm_device` takes cupy / torch CUDA
arrays; :func:`host_golden_gemm` runs the same C++ compiled for the host (small shapes, the tests).

The kernels' C++ (:data:`SOURCE`) is compiled by NVRTC for
sm_90a (``--fmad=false``: no contraction, so every float/double expression means what it says) and, as
the very same text, by the host C++ compiler for the tests.

Pieces (each written from refmodel's formulas; the host build is checked against refmodel bit for bit):

* ``gg_decode``: operand codes (R, Kt) through refmodel's decode tables into the kernels' form,
  transposed to (Kt, R): ``v`` = signed significand (shifted left by ``Lp`` for A), ``e`` = exponent
  (zero / NaN / Inf: ``-16384 - class``, never the maximum), per row and K-group a flag word (bit 0:
  a zero operand, bit 1: a NaN/Inf operand) and a sign word (bit k: element k negative);
* ``gg_tiled_i32`` / ``gg_tiled_i64``: the GEMM, one CTA of 128 threads per 64 x 64 output tile and
  split-K chunk, each thread a 4 x 8 register tile; per K-group (the wgmma K) A and B are staged in
  shared memory, pass 1 finds every output's largest term exponent, pass 2 sums the aligned truncated
  products (the sign applied as ``t ^ s`` plus a popcount of the differing signs), then the C term
  joins, one rounding to the accumulator and the NaN/Inf fix-up — :func:`refmodel.numerics.accumulate.
  fdpa_chain` per output; promotion into float32 every ``stage_groups`` groups (``promote_one``);
* ``gg_ref``: the debugging kernel, one thread per output, calling device_model's ``wgref_fdpa_one``;
* ``gg_epilogue``: split-K partials (rounded to ``partial_dtype``) reduced sequential / reverse / tree
  with ``add.f32``, the epilogue scale, ``cvt.rn`` to the output format (refmodel.golden.Schedule.run).

On the host, ``gg_tiled_host`` runs a CTA's threads phase by phase (all threads stage, then all compute)
with the same functions, so the cooperative kernel itself is what the host tests check.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpu.kernels.device_model import SOURCE as DEVICE_MODEL_SOURCE
from gpu.kernels.device_model import build_host_library
from gpu.kernels.golden_gemm_source import GOLDEN_SOURCE
from refmodel.errors import DTypeError, InputError

#: device_model's accumulator (``wgref_fdpa_one`` for the reference kernel) followed by the GEMM kernels
SOURCE = DEVICE_MODEL_SOURCE + GOLDEN_SOURCE

NVRTC_EXTRA = ("--fmad=false",)      # no contraction: every float/double expression as written
BM, BN, KG_MAX, MAX_SPLITS = 64, 64, 32, 64
THREADS = (BM // 4) * (BN // 8)       # GG_NT: 128 threads, each a 4 x 8 register tile
KERNELS = ("tiled", "reference")
_PD = {"f32": 0, "f16": 1, "bf16": 2}
_RED = {"sequential": 0, "reverse": 1, "tree": 2}
_EPI = {"none": 0, "tensor": 1, "rowwise": 2}
_GPU_PROMOTE_OPS = ("fma", "mul_add", "fma_exact")
_OUT = {"f32": 0, "f16": 1, "bf16": 2, None: 3}


def _up(x: int, m: int) -> int:
    return -(-x // m) * m


def default_instr(dtype) -> str:
    """The wgmma form of a golden GEMM of ``dtype``: 'e4m3', 'e5m2', a pair such as ('e4m3', 'e5m2') or
    'e4m3,e5m2' (k32), 'f16' / 'bf16' (k16) or 'tf32' (k8), f32 accumulator, N = 8 (columns independent)."""
    if isinstance(dtype, str):
        names = [x.strip() for x in dtype.split(",")]
    elif isinstance(dtype, (tuple, list)):
        names = list(dtype)
    else:
        names = []
    if len(names) == 1:
        names = names * 2
    fp8 = ("e4m3", "e5m2")
    if len(names) == 2 and all(n in fp8 for n in names):
        return f"wgmma.mma_async.sync.aligned.m64n8k32.f32.{names[0]}.{names[1]}"
    if len(names) == 2 and names[0] == names[1] and names[0] in ("f16", "bf16"):
        return f"wgmma.mma_async.sync.aligned.m64n8k16.f32.{names[0]}.{names[0]}"
    if len(names) == 2 and names[0] == names[1] == "tf32":
        return "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32"
    raise InputError(f"dtype must be e4m3, e5m2, an FP8 pair such as 'e4m3,e5m2', f16, bf16 or tf32, got {dtype!r:.60}")


def make_schedule(schedule=None, *, dtype=None, promote_every: int | None = None, promote_op: str = "fma",
                  splits: int = 1, out_dtype: str | None = None, block_scales: bool = False):
    """The :class:`~refmodel.golden.Schedule` to run: ``schedule`` (a Schedule, dict, JSON text or file), or
    one built from ``dtype`` (see :func:`default_instr`), ``promote_every``, ``promote_op``, ``splits``,
    ``block_scales`` and ``out_dtype`` (default f32); ``out_dtype`` given with a schedule replaces its own."""
    from refmodel.golden import Schedule, load_schedule

    if schedule is not None:
        if dtype is not None or promote_every is not None or promote_op != "fma" or splits != 1 or block_scales:
            raise InputError("give schedule= or dtype= with promote_every/promote_op/splits/block_scales, not both")
        s = load_schedule(schedule)
        return s if out_dtype is None else s.replace(out_dtype=out_dtype)
    if dtype is None:
        raise InputError("give schedule= (a refmodel.golden.Schedule) or dtype= (e4m3, e5m2, f16, bf16, tf32)")
    return Schedule(default_instr(dtype), promote_every=promote_every, promote_op=promote_op,
                    block_scales=bool(block_scales), splits=splits, out_dtype=out_dtype or "f32",
                    source={"evidence": "gpu.kernels.golden_gemm: built from dtype / promote_every"})


@dataclass
class Plan:
    """Everything the kernels need besides the operands (one plan for the host and the device)."""

    schedule: Any
    form: Any
    params: Any
    M: int
    N: int
    K: int
    Mp: int
    Np: int
    Kt: int
    kg: int
    bounds: list            # chunk K boundaries of the (M, K) operands
    padded: list            # each chunk's padded length (a multiple of kq)
    g0s: np.ndarray         # chunk starts in groups (nchunks + 1), int32
    stage_groups: int
    wide: bool
    pv: np.ndarray          # int32 parameter vector of the GEMM kernels
    ep: np.ndarray          # int32 parameter vector of the epilogue
    scA: np.ndarray         # (stages, Mp) float32 promotion scales (or (1, 1) unused)
    scB: np.ndarray         # (stages, Np)
    esc: np.ndarray         # (1,) float32: the per-tensor epilogue scale RN(sa*sb)
    rsa: np.ndarray         # (Mp,) row-wise epilogue scales
    rsb: np.ndarray         # (Np,)
    out_name: str | None     # f32 / f16 / bf16 of the result


def plan(schedule, M: int, K: int, N: int, scale_a=None, scale_b=None) -> Plan:
    """Check that the GPU kernels model ``schedule`` (refusing, one sentence, what they do not) and lay
    out an M x K x N GEMM: chunks, zero padding, promotion stages and scales, epilogue."""
    from gpu.kernels.device_model import kernel_params
    from refmodel.golden.cublas import split_bounds
    from refmodel.golden.schedule import _kind
    from refmodel.numerics.accumulate import AccumParams, params_for
    from refmodel.numerics.gemm import _scales
    from refmodel.numerics.wgmma import operand_spec
    from refmodel.validate import as_float32
    from refmodel.wgmma_forms import parse_wgmma

    s = schedule
    kind = _kind(s.instr)
    if kind != "wgmma":
        raise InputError(f"the GPU golden GEMM runs dense wgmma chains; {s.instr[:60]} ({kind}) is not supported")
    if s.emulation or s.restart_every:
        raise InputError("the GPU golden GEMM does not model emulation or restart_every (Triton's slices)")
    if s.splits > 1 and s.reduce not in _RED:
        raise InputError(f"the GPU golden GEMM reduces split-K partials {', '.join(_RED)}, not {s.reduce}")
    if s.out_nan is not None:
        raise InputError("the GPU golden GEMM writes the output conversion's own NaN bits; out_nan="
                         f"{s.out_nan!r} is not modelled")
    form = parse_wgmma(s.instr)
    p = params_for(form)
    if not isinstance(p, AccumParams):
        raise InputError(f"the GPU golden GEMM covers floating-point wgmma, not the integer form {form.shape}.{form.dtype_a}")
    if p.k_group not in (None, form.k) or form.k > KG_MAX:
        raise InputError(f"the GPU golden GEMM fuses one sum per instruction (k_group = K <= {KG_MAX}), got k_group {p.k_group}")
    ma, mb = operand_spec(form.dtype_a, p).mbits, operand_spec(form.dtype_b, p).mbits
    L = p.F - ma - mb
    if ma + mb + 2 + max(L, 0) > 31:
        raise InputError(f"F = {p.F} with {ma}+{mb} mantissa bits does not fit the 32-bit term kernel")
    for nm, v in (("M", M), ("K", K), ("N", N)):
        if v <= 0:
            raise InputError(f"a must be (M, K) and b (K, N) with M, N, K > 0, got {nm} = {v}")
    if s.splits > MAX_SPLITS:
        raise InputError(f"the GPU golden GEMM takes at most {MAX_SPLITS} splits, got {s.splits}")
    kg = form.k
    kq = kg * (s.promote_every or 1)
    bounds = split_bounds(K, s.splits, s.split_align) if s.splits > 1 else [0, K]
    padded = [_up(k1 - k0, kq) for k0, k1 in zip(bounds[:-1], bounds[1:])]
    g0s = np.concatenate([[0], np.cumsum(padded) // kg]).astype(np.int32)
    Kt = int(sum(padded))
    Mp, Np = _up(M, BM), _up(N, BN)
    stage = s.promote_every or 0
    wide = p.F + 2 + int(np.ceil(np.log2(kg + 1))) > 30
    # promotion scales: refmodel.numerics.gemm's per-stage vectors on its own padding (M to 64, N to 8)
    scA = scB = np.ones((1, 1), np.float32)
    has_scales = 0
    if s.block_scales:
        sa_ = np.float32(1) if scale_a is None else scale_a
        sb_ = np.float32(1) if scale_b is None else scale_b
        N8 = _up(N, 8)
        if np.ndim(sa_) == 2 or np.ndim(sb_) == 2 or np.ndim(sa_) == 0 and np.ndim(sb_) == 0:
            fa = _scales(sa_, "scale_a", Mp, Kt, kq)
            fb = _scales(sb_, "scale_b", N8, Kt, kq, N8)
        else:
            raise InputError("block scales are None, scalars or 2-D arrays (scale_a (M, Kb), scale_b (Kb, Nb))")
        nst = Kt // kq
        scA = np.ascontiguousarray(np.stack([fa(i) for i in range(nst)]), np.float32)
        scB = np.ones((nst, Np), np.float32)
        scB[:, :N8] = np.stack([fb(i) for i in range(nst)])
        has_scales = 1
    # epilogue scales (Schedule._epilogue)
    esc = np.ones(1, np.float32)
    rsa, rsb = np.ones(Mp, np.float32), np.ones(Np, np.float32)
    esa, esb = (None, None) if s.block_scales else (scale_a, scale_b)
    if s.epilogue_scale == "none":
        if esa is not None or esb is not None:
            raise InputError("this schedule applies no scales: scale_a/scale_b must be None")
    else:
        sa = as_float32("scale_a", np.float32(1) if esa is None else esa)
        sb = as_float32("scale_b", np.float32(1) if esb is None else esb)
        if not (np.isfinite(sa).all() and np.isfinite(sb).all()):
            raise InputError("the GPU golden GEMM takes finite float32 epilogue scales")
        if s.epilogue_scale == "tensor":
            if sa.ndim or sb.ndim:
                raise InputError(f"per-tensor scales are scalars, got shapes {sa.shape} and {sb.shape}")
            with np.errstate(all="ignore"):
                esc[0] = np.float32(sa * sb)
        else:
            if sa.shape != (M, 1) or sb.shape != (1, N):
                raise InputError(f"row-wise scales are scale_a (M, 1) and scale_b (1, N), got {sa.shape} and {sb.shape}")
            rsa[:M], rsb[:N] = sa[:, 0], sb[0]
    if s.promote_op not in _GPU_PROMOTE_OPS:
        raise InputError(f"the GPU golden GEMM implements promote_op {', '.join(_GPU_PROMOTE_OPS)}, not "
                         f"{s.promote_op!r}: run the schedule on the CPU (Schedule.run)")
    kp = kernel_params(p, ma, mb)
    pv = np.array([Mp, Np, Kt, kg, len(padded), stage, _GPU_PROMOTE_OPS.index(s.promote_op), has_scales,
                   kp.F, kp.e_zero, kp.acc_e, kp.acc_m, kp.rnd_m, kp.rz, kp.sat, kp.nan_bits, kp.Lp, kp.Ln], np.int32)
    raw16 = int(p.acc == "f16" and not stage)
    nch = len(padded)
    is16 = raw16 and nch == 1 and s.partial_dtype == "f32" and s.epilogue_scale == "none"
    out_name = s.out_dtype or ("f16" if is16 else "f32")
    ep = np.array([Mp, Np, nch, raw16, _PD[s.partial_dtype], _RED.get(s.reduce, 0), _EPI[s.epilogue_scale],
                   _OUT[s.out_dtype], M, N], np.int32)
    return Plan(s, form, p, M, N, K, Mp, Np, Kt, kg, bounds, padded, g0s, stage, wide, pv, ep, scA, scB, esc,
                rsa, rsb, out_name)


def _layout(codes, rows: int, pl: Plan, xp):
    """Operand codes (R, K) laid out as the kernels read them: (rows, Kt) uint32, every chunk zero-padded
    to its padded length (zero codes are +0 in every format, as refmodel's padding)."""
    R, K = codes.shape
    if R == rows and pl.Kt == K and len(pl.padded) == 1:
        return xp.ascontiguousarray(codes.astype(xp.uint32, copy=False))
    out = xp.zeros((rows, pl.Kt), xp.uint32)
    o = 0
    for (k0, k1), n in zip(zip(pl.bounds[:-1], pl.bounds[1:]), pl.padded):
        out[:R, o:o + k1 - k0] = codes[:, k0:k1]
        o += n
    return out


def _tables(pl: Plan):
    from refmodel.numerics.accumulate import decode_table
    from refmodel.numerics.wgmma import operand_spec

    return [[np.ascontiguousarray(t) for t in decode_table(operand_spec(d, pl.params))]
            for d in (pl.form.dtype_a, pl.form.dtype_b)]


def _result(bits, pl: Plan, xp):
    """uint32 kernel output (M, N) as the result: float32, float16, or bf16 (ml_dtypes on the host, uint16
    bits in cupy, which has no bfloat16)."""
    if pl.out_name == "f32":
        return bits.view(xp.float32)
    b16 = bits.astype(xp.uint16)
    if pl.out_name == "f16":
        return b16.view(xp.float16)
    if xp is np:
        import ml_dtypes

        return b16.view(ml_dtypes.bfloat16)
    return b16


# ----------------------------------------------------------------------------- host build

_HOST: ctypes.CDLL | None = None


def host_library() -> ctypes.CDLL:
    """:data:`SOURCE` compiled for the host (cached by source hash)."""
    global _HOST
    if _HOST is None:
        _HOST = build_host_library(SOURCE, "wgref_golden_gemm", "the GPU golden GEMM")
    return _HOST


def _p(x: np.ndarray):
    return x.ctypes.data_as(ctypes.c_void_p)


def _host_codes(x, name: str, type_name: str, p) -> np.ndarray:
    from refmodel.dtypes import element_dtype
    from refmodel.numerics.wgmma import operand_codes
    from refmodel.validate import as_array

    x = as_array(name, x)
    dt = np.dtype(element_dtype(type_name))
    if x.dtype != dt and x.dtype.kind == "u" and x.dtype.itemsize == dt.itemsize:
        x = x.view(dt)
    if x.dtype != dt:
        raise DTypeError(f"{name} must be {dt.name} (or {8 * dt.itemsize}-bit codes) for .{type_name}, got {x.dtype}")
    if x.ndim != 2:
        raise InputError(f"{name} must be a 2-D array, got shape {x.shape}")
    return np.asarray(operand_codes(x, type_name, p)).astype(np.uint32)


def _decode_host(lib, codes: np.ndarray, kg: int, shift: int, tables):
    R, Kt = codes.shape
    G = Kt // kg
    v = np.empty((Kt, R), np.int32)
    e = np.empty((Kt, R), np.int32)
    fl = np.empty((G, R), np.uint32)
    sw = np.empty((G, R), np.uint32)
    lib.gg_decode_host(_p(codes), R, Kt, kg, shift, *[_p(t) for t in tables], _p(v), _p(e), _p(fl), _p(sw))
    return v, e, fl, sw


def _checked_call(schedule, dtype, promote_every, promote_op, splits, out_dtype, scale_a, scale_b, b_layout,
                  kernel):
    """The schedule of a host or device call, after the checks both share (kernel, b_layout)."""
    s = make_schedule(schedule, dtype=dtype, promote_every=promote_every, promote_op=promote_op, splits=splits,
                      out_dtype=out_dtype, block_scales=promote_every is not None and schedule is None
                      and (scale_a is not None or scale_b is not None))
    if kernel not in KERNELS:
        raise InputError(f"kernel must be one of {', '.join(KERNELS)}, got {kernel!r:.40}")
    if b_layout not in ("kn", "nk"):
        raise InputError(f"b_layout must be 'kn' (b is (K, N)) or 'nk' (b is (N, K)), got {b_layout!r:.20}")
    return s


def host_golden_gemm(a, b, *, schedule=None, dtype=None, promote_every: int | None = None,
                     promote_op: str = "fma", splits: int = 1, out_dtype: str | None = None,
                     scale_a=None, scale_b=None, b_layout: str = "kn", kernel: str = "tiled") -> np.ndarray:
    """The golden GEMM by the host build of the GPU kernels (same arguments as :func:`golden_gemm_device`;
    numpy arrays typed as the instruction's A and B, or their raw codes).  Meant for small shapes: it is
    how the tests prove the kernels equal :meth:`refmodel.golden.Schedule.run` bit for bit."""
    s = _checked_call(schedule, dtype, promote_every, promote_op, splits, out_dtype, scale_a, scale_b,
                      b_layout, kernel)
    from refmodel.numerics.accumulate import params_for
    from refmodel.wgmma_forms import parse_wgmma

    form = parse_wgmma(s.instr) if s.instr.startswith("wgmma.mma_async.sync") else None
    if form is None:
        plan(s, 1, 1, 1)            # refuses the schedule with its reason
    p = params_for(form)
    ca = _host_codes(a, "a", form.dtype_a, p)
    cb = _host_codes(b, "b", form.dtype_b, p)
    cbt = cb if b_layout == "nk" else np.ascontiguousarray(cb.T)
    M, K = ca.shape
    N = cbt.shape[0]
    if cbt.shape[1] != K:
        raise InputError(f"a (M, K) and b must share K, got a {ca.shape} and b {cb.shape} ({b_layout})")
    pl = plan(s, M, K, N, scale_a, scale_b)
    A = _layout(ca, pl.Mp, pl, np)
    Bt = _layout(cbt, pl.Np, pl, np)
    lib = host_library()
    (tsa, tea, tca), (tsb, teb, tcb) = _tables(pl)
    nch = len(pl.padded)
    part = np.empty((nch, pl.Mp, pl.Np), np.uint32)
    if kernel == "reference":
        lib.gg_ref_host(_p(A), _p(Bt), _p(pl.g0s), _p(tsa), _p(tea), _p(tca), _p(tsb), _p(teb), _p(tcb),
                        _p(pl.scA), _p(pl.scB), _p(part), _p(pl.pv))
    else:
        da = _decode_host(lib, A, pl.kg, int(pl.pv[16]), (tsa, tea, tca))
        db = _decode_host(lib, Bt, pl.kg, 0, (tsb, teb, tcb))
        lib.gg_tiled_host(*[_p(x) for x in da], *[_p(x) for x in db], _p(pl.g0s), _p(pl.scA), _p(pl.scB), _p(part),
                          _p(pl.pv), int(pl.wide))
    out = np.empty((M, N), np.uint32)
    lib.gg_epilogue_host(_p(part), _p(out), _p(pl.ep), _p(pl.esc), _p(pl.rsa), _p(pl.rsb))
    return _result(out, pl, np)


# ----------------------------------------------------------------------------- device

def _device_codes(x, name: str, type_name: str, p, cp):
    """A cupy / torch CUDA array (typed, or raw codes of the same width) or a numpy array as uint32 codes
    on the device (tf32: the f32 container shifted right by the ignored bits)."""
    from refmodel.dtypes import element_dtype

    width = np.dtype(element_dtype(type_name)).itemsize
    udt = {1: cp.uint8, 2: cp.uint16, 4: cp.uint32}[width]
    mod = type(x).__module__
    if mod.startswith("torch"):
        import torch

        if not x.is_cuda:
            raise InputError(f"{name} is a torch tensor on {x.device}: move it to the CUDA device")
        if x.element_size() != width:
            raise DTypeError(f"{name} must hold {8 * width}-bit values for .{type_name}, got torch {x.dtype}")
        t = x.detach().contiguous().view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[width])
        arr = cp.from_dlpack(t).view(udt)
    elif isinstance(x, cp.ndarray):
        if x.dtype.itemsize != width or x.dtype.kind not in "fiu":
            raise DTypeError(f"{name} must hold {8 * width}-bit values or codes for .{type_name}, got {x.dtype}")
        arr = x.view(udt)
    elif hasattr(x, "__cuda_array_interface__"):
        return _device_codes(cp.asarray(x), name, type_name, p, cp)
    else:
        arr = cp.asarray(_host_codes(x, name, type_name, p))
        return arr
    if arr.ndim != 2:
        raise InputError(f"{name} must be a 2-D array, got shape {tuple(arr.shape)}")
    codes = arr.astype(cp.uint32)
    if type_name == "tf32":
        codes >>= cp.uint32(p.tf32_ignored_bits)
    return codes


def _decode_device(mod, codes, kg: int, shift: int, tables, cp):
    R, Kt = codes.shape
    G = Kt // kg
    v = cp.empty((Kt, R), cp.int32)
    e = cp.empty((Kt, R), cp.int32)
    fl = cp.empty((G, R), cp.uint32)
    sw = cp.empty((G, R), cp.uint32)
    n = R * G
    mod.get_function("gg_decode")(((n + 255) // 256,), (256,),
                                  (codes, np.int32(R), np.int32(Kt), np.int32(kg), np.int32(shift),
                                   *tables, v, e, fl, sw))
    return v, e, fl, sw


def device_module():
    """The NVRTC module of :data:`SOURCE` for sm_90a (``--fmad=false``)."""
    from gpu.kernels.runtime import NVRTC_OPTIONS, compile_module

    return compile_module(SOURCE, options=tuple(NVRTC_OPTIONS) + NVRTC_EXTRA)


def golden_gemm_device(a, b, *, schedule=None, dtype=None, promote_every: int | None = None,
                       promote_op: str = "fma", splits: int = 1, out_dtype: str | None = None,
                       scale_a=None, scale_b=None, b_layout: str = "kn", kernel: str = "tiled"):
    """``D`` of the golden GEMM ``a`` (M, K) x ``b`` on the GPU, bit for bit :meth:`refmodel.golden.Schedule.run`.

    ``a``, ``b``: cupy or torch CUDA arrays (or anything with ``__cuda_array_interface__``, or numpy) typed as
    the instruction's A and B (torch float8 / bfloat16 / float16 / float32) or their raw codes (uint8 for FP8,
    uint16 for f16/bf16); ``b`` is (K, N), or (N, K) with ``b_layout='nk'`` (torch._scaled_mm's b.T).
    The schedule: ``schedule`` (a Schedule, dict, JSON text or file), or ``dtype`` ('e4m3', 'e4m3,e5m2',
    'f16', 'bf16', 'tf32') with ``promote_every`` (wgmma instructions per float32 promotion, None: one chain),
    ``promote_op``, ``splits`` and ``out_dtype``; ``scale_a``/``scale_b``: block scales applied at promotion
    (DeepGEMM's, refmodel.numerics.gemm's shapes) or the schedule's epilogue scales.
    ``kernel``: 'tiled' (the fast one) or 'reference' (one thread per output, device_model's fdpa).
    Returns a cupy array (M, N): float32, float16, or bf16 as uint16 bits.  Unsupported schedules (sparse,
    mma.sync, FMA, emulations, integer forms) are refused with one sentence.
    """
    from gpu.kernels.runtime import require_device

    cp = require_device()
    s = _checked_call(schedule, dtype, promote_every, promote_op, splits, out_dtype, scale_a, scale_b,
                      b_layout, kernel)
    from refmodel.numerics.accumulate import params_for
    from refmodel.wgmma_forms import parse_wgmma

    if not s.instr.startswith("wgmma.mma_async.sync"):
        plan(s, 1, 1, 1)
    form = parse_wgmma(s.instr)
    p = params_for(form)
    ca = _device_codes(a, "a", form.dtype_a, p, cp)
    cb = _device_codes(b, "b", form.dtype_b, p, cp)
    cbt = cb if b_layout == "nk" else cp.ascontiguousarray(cb.T)
    M, K = ca.shape
    N = cbt.shape[0]
    if cbt.shape[1] != K:
        raise InputError(f"a (M, K) and b must share K, got a {tuple(ca.shape)} and b {tuple(cb.shape)} ({b_layout})")
    def host(x):      # scales are small: the plan reads them on the host
        if isinstance(x, cp.ndarray):
            return cp.asnumpy(x)
        if type(x).__module__.startswith("torch"):
            return x.detach().cpu().numpy()
        return x
    pl = plan(s, M, K, N, host(scale_a), host(scale_b))
    A = _layout(ca, pl.Mp, pl, cp)
    Bt = _layout(cbt, pl.Np, pl, cp)
    del ca, cb, cbt
    mod = device_module()
    (tsa, tea, tca), (tsb, teb, tcb) = [[cp.asarray(t) for t in tt] for tt in _tables(pl)]
    nch = len(pl.padded)
    part = cp.empty((nch, pl.Mp, pl.Np), cp.uint32)
    g0s, pv, scA, scB = (cp.asarray(x) for x in (pl.g0s, pl.pv, pl.scA, pl.scB))
    if kernel == "reference":
        n = pl.Mp * pl.Np
        mod.get_function("gg_ref")(((n + 127) // 128, nch), (128,),
                                   (A, Bt, g0s, tsa, tea, tca, tsb, teb, tcb, scA, scB, part, pv))
    else:
        da = _decode_device(mod, A, pl.kg, int(pl.pv[16]), (tsa, tea, tca), cp)
        del A
        db = _decode_device(mod, Bt, pl.kg, 0, (tsb, teb, tcb), cp)
        del Bt
        name = "gg_tiled_i64" if pl.wide else "gg_tiled_i32"
        mod.get_function(name)((pl.Np // BN, pl.Mp // BM, nch), (THREADS,),
                               (*da, *db, g0s, scA, scB, part, pv))
    out = cp.empty((M, N), cp.uint32)
    n = M * N
    mod.get_function("gg_epilogue")(((n + 255) // 256,), (256,),
                                    (part, out, cp.asarray(pl.ep), cp.asarray(pl.esc), cp.asarray(pl.rsa),
                                     cp.asarray(pl.rsb)))
    return _result(out, pl, cp)


def reference_gemm(a, b, *, schedule=None, dtype=None, promote_every: int | None = None,
                   promote_op: str = "fma", splits: int = 1, out_dtype: str | None = None,
                   scale_a=None, scale_b=None, b_layout: str = "kn") -> np.ndarray:
    """The CPU refmodel's answer for the same arguments (numpy operands): :meth:`Schedule.run`, the arbiter."""
    from refmodel.dtypes import element_dtype
    from refmodel.wgmma_forms import parse_wgmma

    s = make_schedule(schedule, dtype=dtype, promote_every=promote_every, promote_op=promote_op, splits=splits,
                      out_dtype=out_dtype, block_scales=promote_every is not None and schedule is None
                      and (scale_a is not None or scale_b is not None))
    form = parse_wgmma(s.instr)

    def typed(x, t):
        x = np.asarray(x)
        dt = np.dtype(element_dtype(t))
        return x.view(dt) if x.dtype != dt and x.dtype.kind == "u" and x.dtype.itemsize == dt.itemsize else x

    at, bt = typed(a, form.dtype_a), typed(b, form.dtype_b)
    if b_layout == "nk":
        bt = np.ascontiguousarray(bt.T)
    return s.run(at, bt, scale_a=scale_a, scale_b=scale_b)


__all__ = [
    "GOLDEN_SOURCE",
    "KERNELS",
    "SOURCE",
    "default_instr",
    "device_module",
    "golden_gemm_device",
    "host_golden_gemm",
    "make_schedule",
    "plan",
    "reference_gemm",
]
