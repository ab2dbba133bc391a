"""How a GEMM sums, as data: one :class:`Schedule` describes what a library kernel does along K, and
one executor (:meth:`Schedule.run`) computes it bit for bit with refmodel.

A schedule is:

* the **instruction** that forms the products: a dense or sparse wgmma form, an ``mma.sync`` shape,
  or CUDA-core FMAs (``fma.rn.f32``), with an optional operand conversion and K order (Triton's FP8
  ``mma.sync`` path) or emulation (Triton's ``tf32x3``);
* **chains**: consecutive instructions feed each D into the next C; a chain restarts from +0 at every
  ``restart_every`` K (Triton's BLOCK_K slices) where the kernel does so;
* **promotion**: every ``promote_every`` instructions the chain's partial sum enters a float32
  accumulator (``promote_op``: ``fma`` / ``mul_add`` / ``fma_exact``; with unit scales, or the
  caller's 1 x 128 / 128 x 128 ``block_scales``);
* **split-K**: ``splits`` chunks of ``round_up(ceil(K/splits), split_align)``, each a fresh chain,
  partials kept in ``partial_dtype`` and reduced in ``reduce`` order (``sequential``: split order;
  ``reverse``; ``tree``: pairwise; ``lanes{T}-{strided|chunked}-{down|pairwise}``: a GPU reduction's
  shape, T threads each summing its partials in order (partial j to thread j mod T, or T contiguous
  runs), then the T sums combined by a shuffle-down tree (i with i + T/2, ...) or pairwise) with ``add.f32``;
* the **epilogue**: ``epilogue_scale`` (``tensor``: ``RN(RN(sa*sb) * acc) + 0``; ``rowwise``:
  ``RN(sa[m] * RN(sb[n] * acc))``; cuBLASLt's, NaNs canonical: :func:`refmodel.numerics.scaled_mm.epilogue`), then ``cvt.rn`` to ``out_dtype``; ``out_nan`` ``"canonical"``:
  every NaN output is the type's canonical quiet NaN (bf16 0x7FC0, f16 0x7E00, f32 0x7FC00000; XLA's
  bf16 convert), None: the cvt's own NaN bits.

``source`` says where the schedule comes from (library, version, kernel, shape, device, and how it is
known: recorded on the H200, inferred, or a model's default); :meth:`describe` says it all in one
paragraph, and :meth:`to_json` / :func:`load_schedule` store it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import ml_dtypes
import numba
import numpy as np

from .._parallel import parallel_ranges
from ..errors import InputError
from ..limits import check_block
from ..numerics.accumulate import add_f32, canonical_nan_f32, fma_f32, params_for, with_params
from ..numerics.gemm import _convert, gemm
from ..numerics.gemm import zero_pad as _pad
from ..validate import _describe, as_array, check_json_text
from ..wgmma_forms import parse_wgmma
from ..wgmma_sp_forms import parse_wgmma_sp

OUT_DTYPES = {"f32": np.dtype(np.float32), "bf16": np.dtype(ml_dtypes.bfloat16), "f16": np.dtype(np.float16)}
PROMOTE_OPS = ("fma", "mul_add", "fma_exact", "fma_row_first")
REDUCE_ORDERS = ("sequential", "reverse", "tree")
LANE_ASSIGN = ("strided", "chunked")
LANE_TREES = ("down", "pairwise")
OUT_NANS = (None, "canonical", "gpu")
_CANONICAL_NAN = {"f32": 0x7FC00000, "bf16": 0x7FC0, "f16": 0x7E00}
_GPU_NAN = {"f32": 0x7FFFFFFF, "bf16": 0x7FFF, "f16": 0x7FFF}     # what NVIDIA's cvt/FADD write


def canonical_nans(out: np.ndarray, dtype: str, kind: str = "canonical") -> np.ndarray:
    """A copy of ``out`` (f32, bf16 or f16) with every NaN one NaN (``out_nan``): ``"canonical"``, the type's
    canonical quiet NaN (XLA's); ``"gpu"``, the NVIDIA GPU's (0x7FFFFFFF / 0x7FFF: cvt.f32.f16 of an f16 NaN)."""
    out = np.array(out)
    bits = out.view({"f32": np.uint32, "bf16": np.uint16, "f16": np.uint16}[dtype])
    bits[np.isnan(out.astype(np.float32))] = (_GPU_NAN if kind == "gpu" else _CANONICAL_NAN)[dtype]
    return out


def lane_order(threads: int, assign: str, tree: str) -> str:
    """The ``reduce`` name of a GPU reduction shape: ``lanes{threads}-{assign}-{tree}``."""
    return f"lanes{threads}-{assign}-{tree}"


def reduce_orders(splits: int) -> list[str]:
    """Every reduction order of the space for ``splits`` partials: the three plain orders, then each
    lane shape with 2 <= T < splits threads (T a power of two)."""
    out = list(REDUCE_ORDERS)
    t = 2
    while t < splits:
        out += [lane_order(t, a, tr) for a in LANE_ASSIGN for tr in (LANE_TREES if t > 2 else LANE_TREES[:1])]
        t *= 2
    return out


def _parse_reduce(v: Any) -> tuple:
    """('plain', name) or ('lanes', T, assign, tree); one clear error otherwise."""
    if isinstance(v, str) and v in REDUCE_ORDERS:
        return ("plain", v)
    if isinstance(v, str) and v.startswith("lanes"):
        parts = v[5:].split("-")
        if (len(parts) == 3 and parts[0].isdigit() and 2 <= int(parts[0]) <= 4096
                and int(parts[0]) & (int(parts[0]) - 1) == 0 and parts[1] in LANE_ASSIGN and parts[2] in LANE_TREES):
            return ("lanes", int(parts[0]), parts[1], parts[2])
    raise InputError(f"reduce must be one of {', '.join(REDUCE_ORDERS)} or lanes{{T}}-{{strided|chunked}}-"
                     f"{{down|pairwise}} with T a power of two in 2..4096, got {_describe(v)}")
EPILOGUE_SCALES = ("none", "tensor", "rowwise")
K_ORDERS = ("natural", "triton_fp8_mma_sync")
EMULATIONS = (None, "tf32x3")
MMA_SYNC_K8 = {"mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32": "bf16",
               "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32": "f16"}
MMA_SYNC_F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
MMA_SYNC_F16_F16 = "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"    # Triton's MMAv2 with an f16 acc
FMA = "fma.rn.f32"
SCHEMA = "wgref-schedule/1"


def _kind(instr: str) -> str:
    if instr == FMA:
        return "fma"
    if instr in MMA_SYNC_K8:
        return "mma_k8"
    if instr in (MMA_SYNC_F16, MMA_SYNC_F16_F16):
        return "mma_f16"
    if isinstance(instr, str) and instr.startswith("wgmma.mma_async.sp."):
        parse_wgmma_sp(instr)
        return "wgmma_sp"
    if isinstance(instr, str) and instr.startswith("wgmma.mma_async."):
        parse_wgmma(instr)
        return "wgmma"
    raise InputError(f"instr must be a wgmma form, {FMA!r}, {MMA_SYNC_F16!r}, {MMA_SYNC_F16_F16!r} or one of "
                     f"{sorted(MMA_SYNC_K8)}, "
                     f"got {_describe(instr)}")


def _pos_int(name: str, v: Any, *, none_ok: bool = True) -> Optional[int]:
    if v is None and none_ok:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
        raise InputError(f"{name} must be a positive int{' or None' if none_ok else ''}, got {_describe(v)}")
    return int(v)


def _choice(name: str, v: Any, options) -> Any:
    if v not in options or (v is not None and not isinstance(v, str)):
        raise InputError(f"{name} must be one of {', '.join(repr(o) for o in options)}, got {_describe(v)}")
    return v


@dataclass(frozen=True)
class Schedule:
    """How a GEMM sums (see the module doc for every field); frozen, JSON-serialisable."""

    instr: str
    k_order: str = "natural"
    operand_cvt: Optional[str] = None
    emulation: Optional[str] = None
    restart_every: Optional[int] = None
    promote_every: Optional[int] = None
    promote_op: str = "fma"
    block_scales: bool = False
    scale_block: int = 128
    splits: int = 1
    split_align: int = 64
    partial_dtype: str = "f32"
    reduce: str = "sequential"
    epilogue_scale: str = "none"
    out_dtype: Optional[str] = None
    out_nan: Optional[str] = None
    source: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        kind = _kind(self.instr)
        _choice("k_order", self.k_order, K_ORDERS)
        _choice("operand_cvt", self.operand_cvt, (None, "f16"))
        _choice("emulation", self.emulation, EMULATIONS)
        _pos_int("restart_every", self.restart_every)
        _pos_int("promote_every", self.promote_every)
        _choice("promote_op", self.promote_op, PROMOTE_OPS)
        if not isinstance(self.block_scales, (bool, np.bool_)):
            raise InputError(f"block_scales must be True or False, got {_describe(self.block_scales)}")
        check_block("scale_block", _pos_int("scale_block", self.scale_block, none_ok=False))  # no tensor here
        _pos_int("splits", self.splits, none_ok=False)
        _pos_int("split_align", self.split_align, none_ok=False)
        _choice("partial_dtype", self.partial_dtype, tuple(OUT_DTYPES))
        _parse_reduce(self.reduce)
        _choice("out_nan", self.out_nan, OUT_NANS)
        _choice("epilogue_scale", self.epilogue_scale, EPILOGUE_SCALES)
        _choice("out_dtype", self.out_dtype, (None, *OUT_DTYPES))
        if not isinstance(self.source, Mapping):
            raise InputError(f"source must be a mapping, got {_describe(self.source)}")
        if (self.k_order != "natural" or self.operand_cvt) and kind != "mma_f16":
            raise InputError(f"k_order / operand_cvt describe Triton's FP8 mma.sync path ({MMA_SYNC_F16}), "
                             f"not {self.instr}")
        if self.emulation == "tf32x3" and (kind != "wgmma" or "tf32" not in self.instr or not self.restart_every):
            raise InputError("emulation 'tf32x3' needs a tf32 wgmma and restart_every (the BLOCK_K slice)")
        if self.promote_every and kind not in ("wgmma", "wgmma_sp") and self.instr != MMA_SYNC_F16:
            raise InputError(f"promote_every applies to wgmma chains and {MMA_SYNC_F16}, not {self.instr}")
        if self.promote_every and kind == "mma_f16" and (self.promote_op != "fma" or self.restart_every
                                                         or self.block_scales or self.epilogue_scale != "none"):
            raise InputError("an mma.sync chain's groups enter the float32 accumulator with unit scales "
                             "(promote_op 'fma', no block scales, no restart_every)")
        if self.block_scales and not self.promote_every:
            raise InputError("block_scales are applied at promotion: they need promote_every")
        if self.block_scales and self.splits > 1:
            raise InputError("block_scales with split-K is not modelled")
        if self.restart_every and self.splits > 1:
            raise InputError("restart_every (chains restarting at slices) with split-K is not modelled")
        object.__setattr__(self, "source", dict(self.source))

    # ------------------------------------------------------------------ data

    def to_dict(self) -> dict:
        d = {"schema": SCHEMA, **asdict(self)}
        if d["out_nan"] is None:          # the field is newer than the first stored schedules
            del d["out_nan"]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Schedule":
        if not isinstance(d, Mapping):
            raise InputError(f"a schedule is a JSON object, got {type(d).__name__}")
        if d.get("schema", SCHEMA) != SCHEMA:
            raise InputError(f"schedule schema must be {SCHEMA!r}, got {_describe(d.get('schema'))}")
        known = set(cls.__dataclass_fields__)
        extra = sorted(set(d) - known - {"schema"})
        if extra:
            raise InputError(f"unknown schedule field(s): {', '.join(extra)[:80]}")
        if "instr" not in d:
            raise InputError("a schedule needs 'instr'")
        return cls(**{k: v for k, v in d.items() if k != "schema"})

    def replace(self, **changes) -> "Schedule":
        return Schedule.from_dict({**asdict(self), **changes})

    # ------------------------------------------------------------------ words

    def describe(self) -> str:
        """One readable paragraph: what the kernel does along K."""
        kind = _kind(self.instr)
        what = {"wgmma": f"a chain of `{self.instr}`", "wgmma_sp": f"a chain of sparse `{self.instr}`",
                "mma_k8": f"a chain of `{self.instr}` (fused sums of 8 products)",
                "mma_f16": f"a chain of `{self.instr}` on operands converted to f16 (exact)",
                "fma": "CUDA-core FMAs in K order (one correctly rounded fma.rn.f32 per product)"}[kind]
        s = [f"Products: {what}"]
        if self.k_order == "triton_fp8_mma_sync":
            s.append("in Triton's FP8 mma.sync K order (k = 0, 1 mod 4, then 2, 3 mod 4 in every 32-wide window)")
        if self.emulation == "tf32x3":
            s.append("as tf32x3: per slice P = small_a·big_b, P += big_a·small_b, NaNs of P to +0, "
                     "Q = big_a·big_b chained on P, acc = add.f32(acc, Q)")
        if self.restart_every:
            s.append(f"restarting from +0 every {self.restart_every} K (each slice of the kernel's loop)")
        text = ", ".join(s) + "."
        if self.promote_every:
            b = self.scale_block
            sc = f"block scales (1 x {b} A, {b} x {b} B)" if self.block_scales else "unit scales"
            text += (f" Every {self.promote_every} instruction(s) the partial sum enters a float32 accumulator "
                     f"({self.promote_op}, {sc}).")
        else:
            text += " No promotion: the tensor core's accumulator holds the whole sum."
        if self.splits > 1:
            text += (f" Split-K: {self.splits} chunks of round_up(ceil(K/{self.splits}), {self.split_align}), each a "
                     f"fresh chain, partials in {self.partial_dtype}, reduced {_reduce_words(self.reduce)} with add.f32.")
        if self.epilogue_scale == "tensor":
            text += " Epilogue: D = RN(RN(scale_a*scale_b) * acc) + 0."
        elif self.epilogue_scale == "rowwise":
            text += " Epilogue: D = RN(scale_a[m] * RN(scale_b[n] * acc))."
        text += f" Output: {'the accumulator type' if self.out_dtype is None else self.out_dtype} (cvt.rn)"
        text += {"canonical": ", every NaN the canonical quiet NaN.",
                 "gpu": ", every NaN the GPU's (0x7FFFFFFF / 0x7FFF: cvt.f32.f16 of an f16 accumulator)."}.get(
            self.out_nan, ".")
        src = self.source
        if src:
            bits = [f"{k} {src[k]}" for k in ("library", "version", "kernel", "shape", "device", "evidence") if k in src]
            text += " Source: " + "; ".join(str(b) for b in bits) + "."
        return text

    # ------------------------------------------------------------------ the executor

    def run(self, a, b, c=None, *, scale_a=None, scale_b=None) -> np.ndarray:
        """``D`` of ``a`` (M, K) times ``b`` (K, N) under this schedule, bit for bit.  ``c``: the first
        chain's C (or the promotion accumulator's start); ``scale_a``/``scale_b``: block scales
        (``block_scales``) or the epilogue's per-tensor / row-wise scales."""
        a = as_array("a", a)
        b = as_array("b", b)
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or 0 in a.shape or 0 in b.shape:
            raise InputError(f"a must be (M, K) and b (K, N) with M, N, K > 0, got {a.shape} and {b.shape}")
        if c is not None and (self.splits > 1 or self.emulation or _kind(self.instr) in ("fma", "mma_f16")):
            raise InputError("c is taken only by a single wgmma / mma.sync chain (no split-K, no emulation)")
        K = a.shape[1]
        if self.splits > 1:
            bnd = split_bounds(K, self.splits, self.split_align)
        else:
            bnd = [0, K]
        blk = (scale_a, scale_b) if self.block_scales else (None, None)
        parts = [self._chunk(a[:, k0:k1], b[k0:k1], c, *blk) for k0, k1 in zip(bnd[:-1], bnd[1:])]
        if len(parts) > 1 or self.partial_dtype != "f32":
            pd = OUT_DTYPES[self.partial_dtype]
            parts = [np.asarray(p, np.float32) for p in parts]
            if pd != np.float32:
                parts = [_convert(p, pd).astype(np.float32) for p in parts]
            acc = _reduce(parts, self.reduce)
        else:
            acc = parts[0]
        acc = self._epilogue(acc, None if self.block_scales else scale_a, None if self.block_scales else scale_b)
        out = _convert(np.asarray(acc), OUT_DTYPES[self.out_dtype]) if self.out_dtype else np.asarray(acc)
        if self.out_nan is None:
            return out
        return canonical_nans(out, self.out_dtype or ("f16" if out.dtype == np.float16 else "f32"), self.out_nan)

    def expected(self, a, b_nk, scale_a=None, scale_b=None) -> np.ndarray:
        """:meth:`run` for operands as a kernel stores them: ``a`` (M, K) and ``b_nk`` (N, K), K-major,
        as typed arrays or raw codes (uint8 for FP8); with ``block_scales``, ``scale_a`` (M, K/scale_block)
        and ``scale_b`` (K/scale_block, N/scale_block)."""
        kind = _kind(self.instr)
        if kind != "wgmma":
            raise InputError(f"expected() takes wgmma schedules, not {self.instr}")
        f = parse_wgmma(self.instr)
        from ..dtypes import element_dtype

        def typed(x, name, t):
            x = as_array(name, x)
            dt = element_dtype(t)
            if x.dtype != dt and x.dtype.itemsize == dt.itemsize and x.dtype.kind == "u":
                x = x.view(dt)
            return x
        at = typed(a, "a", f.dtype_a)
        bt = np.ascontiguousarray(typed(b_nk, "b_nk", f.dtype_b).T)
        return self.run(at, bt, scale_a=scale_a, scale_b=scale_b)

    def _epilogue(self, acc, sa, sb):
        if self.epilogue_scale == "none":
            if sa is not None or sb is not None:
                raise InputError("this schedule applies no scales: scale_a/scale_b must be None")
            return acc
        from ..numerics.scaled_mm import epilogue
        from ..validate import as_float32

        sa = as_float32("scale_a", np.float32(1) if sa is None else sa)
        sb = as_float32("scale_b", np.float32(1) if sb is None else sb)
        acc = np.asarray(acc, np.float32)
        with np.errstate(all="ignore"):
            if self.epilogue_scale == "tensor":
                if sa.ndim or sb.ndim:
                    raise InputError(f"per-tensor scales are scalars, got shapes {sa.shape} and {sb.shape}")
                return epilogue(acc, "tensor", sa, sb)
            m, n = acc.shape
            if sa.shape != (m, 1) or sb.shape != (1, n):
                raise InputError(f"row-wise scales are scale_a (M, 1) and scale_b (1, N), got {sa.shape} and {sb.shape}")
            return epilogue(acc, "row", sa, sb)

    def _chunk(self, a, b, c, scale_a, scale_b) -> np.ndarray:
        kind = _kind(self.instr)
        M, k = a.shape
        N = b.shape[1]
        if kind == "fma":
            return _fma_matmul(np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32))
        if kind == "mma_f16":
            return self._mma_f16(a, b)
        if kind == "mma_k8":
            name = MMA_SYNC_K8[self.instr]
            instr_s = f"wgmma.mma_async.sync.aligned.m64n8k16.f32.{name}.{name}"
            A, B = _pad(a, _up(M, 64), _up(k, 16)), _pad(b, _up(k, 16), _up(N, 8))
            d = gemm(A, B, c, instr=instr_s, params=with_params(params_for(parse_wgmma(instr_s)), k_group=8))
            return np.ascontiguousarray(d[:M, :N])
        if kind == "wgmma_sp":
            return self._sparse_chain(a, b, c)
        form = parse_wgmma(self.instr)
        if self.emulation == "tf32x3":
            return _tf32x3(a, b, self.instr, self.restart_every)
        if self.restart_every and self.promote_every and \
                (self.restart_every // form.k) % self.promote_every:        # groups restart at every slice
            return _sliced_groups(a, b, self.instr, form.k, self.restart_every, self.promote_every)
        if self.restart_every and not self.promote_every:
            raise InputError("restart_every without promote_every or an emulation is not a schedule any model uses")
        kq = form.k * (self.promote_every or 1)
        if self.promote_every:  # a promotion group is a block of K: checked before K is padded to it
            check_block(f"a promotion group's K (promote_every {_describe(self.promote_every)} x {form.k})", kq,
                        _up(k, form.k), "K")
        A, B = _pad(a, _up(M, 64), _up(k, kq)), _pad(b, _up(k, kq), _up(N, 8))
        cc = None if c is None else _pad(np.asarray(c), A.shape[0], B.shape[1])
        if self.promote_every:
            sa = np.float32(1) if scale_a is None else scale_a
            sb = np.float32(1) if scale_b is None else scale_b
            d = gemm(A, B, cc, instr=self.instr, promote_every=self.promote_every, scale_a=sa, scale_b=sb,
                     promote_op=self.promote_op)
        else:
            d = gemm(A, B, cc, instr=self.instr)
        return np.ascontiguousarray(np.asarray(d)[:M, :N])

    def _mma_f16(self, a, b) -> np.ndarray:
        """A chain of ``mma.sync.m16n8k16`` on f16 copies of the operands (an HMMA sums like the wgmma k16 of
        the same accumulator); with ``promote_every`` each group of that many instructions is a fresh chain
        from +0 added into a float32 accumulator (``add.f32``)."""
        acc = "f16" if self.instr == MMA_SYNC_F16_F16 else "f32"
        instr = f"wgmma.mma_async.sync.aligned.m64n8k16.{acc}.f16.f16"
        k = a.shape[1]
        step = 16 * self.promote_every if self.promote_every else k
        if k % step:
            raise InputError(f"K = {k} is not a whole number of promote_every groups ({step} K each)")
        out = None
        for k0 in range(0, k, step):
            x, y = a[:, k0:k0 + step], b[k0:k0 + step]
            if self.k_order == "triton_fp8_mma_sync":
                perm = mma_sync_fp8_k_order(step)
                x, y = x[:, perm], y[perm]
            part = np.asarray(gemm(x.astype(np.float16), y.astype(np.float16), instr=instr))
            with np.errstate(all="ignore"):
                out = part if out is None else (out + part.astype(np.float32)).astype(np.float32)
        return out

    def _sparse_chain(self, a, b, c):
        from ..numerics.sparse import compress, gemm_sp

        f = parse_wgmma_sp(self.instr)
        M, K = a.shape
        N = b.shape[1]
        if M % 64 or K % f.k:
            raise InputError(f"sparse schedules take M a multiple of 64 and K of {f.k}, got M={M}, K={K}")
        n = _widest_n(_up(N, 8))
        instr = self.instr.replace(f"m64n{f.n}k", f"m64n{n}k", 1)
        Np = _up(N, n)
        ac, meta = compress(a, instr)             # the whole (M, K) matrix
        cc = None if c is None else _pad(np.asarray(c), M, Np)
        d = gemm_sp(instr, ac, meta, _pad(b, K, Np), cc, promote_every=self.promote_every)
        return np.ascontiguousarray(np.asarray(d)[:, :N])


def load_schedule(src) -> Schedule:
    """A :class:`Schedule` from a JSON file path, a JSON string or a dict (``wgref golden --schedule``)."""
    if isinstance(src, Schedule):
        return src
    if isinstance(src, Mapping):
        return Schedule.from_dict(src)
    if isinstance(src, (str, Path)):
        text = str(src)
        if not text.lstrip().startswith("{"):
            try:
                text = Path(src).read_text()
            except (OSError, UnicodeDecodeError) as e:
                raise InputError(f"cannot read the schedule {str(src)[:80]}: {type(e).__name__}") from None
        try:
            d = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise InputError(f"the schedule is not valid JSON: {str(e)[:80]}") from None
        return Schedule.from_dict(check_json_text(d, "the schedule", text=text))
    raise InputError(f"a schedule is a Schedule, a dict, a JSON string or a file path, got {_describe(src)}")


# ----------------------------------------------------------------------------- pieces

def split_bounds(K: int, splits: int, align: int) -> list[int]:
    """The K boundaries of ``splits`` chunks: ``round_up(ceil(K/splits), align)`` each, the last one
    taking what is left (cuBLAS's and CUTLASS's gemm_k_size rule); raises if a chunk would be empty."""
    for nm, v in (("K", K), ("splits", splits), ("align", align)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
            raise InputError(f"{nm} must be a positive int, got {_describe(v)}")
    chunk = -(-(-(-K // splits)) // align) * align
    if (splits - 1) * chunk >= K:
        raise InputError(f"splits = {_describe(splits)} leaves an empty chunk: K = {K} in chunks of {_describe(chunk)} "
                         f"(ceil(K/splits) rounded up to {_describe(align)}) makes only {-(-K // chunk)}")
    return [min(i * chunk, K) for i in range(splits)] + [K]


def mma_sync_fp8_k_order(K: int) -> np.ndarray:
    """The K order in which Triton's FP8 ``max_num_imprecise_acc=0`` dot feeds ``mma.sync.m16n8k16``:
    in each 32-wide K window the first instruction takes k = 0, 1 (mod 4) and the second k = 2, 3
    (mod 4) (the FP8 dot-operand layout holds 4 consecutive k per thread and each f16 instruction
    takes 2 of them).  Within one instruction the order does not matter (one fused sum)."""
    if K % 32:
        raise InputError(f"K must be a multiple of 32 for the FP8 mma.sync K order, got {K}")
    w = np.arange(32)
    win = np.concatenate([w[w % 4 < 2], w[w % 4 >= 2]])
    return (np.arange(0, K, 32)[:, None] + win[None, :]).ravel()


def rna_tf32(x: np.ndarray) -> np.ndarray:
    """``cvt.rna.tf32.f32``: round a float32 to tf32 (10 mantissa bits), to nearest with ties away from
    zero, returned in a float32 whose low 13 bits are zero (recorded: finite values; NaN is kept as is
    and values that round past FLT_MAX become Inf, which was not recorded)."""
    x = np.ascontiguousarray(x, np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x1000) & 0xFFFFE000).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, r)  # a NaN stays NaN (carrying into the sign bit would make it -0)



def _up(x: int, m: int) -> int:
    return -(-x // m) * m


def _widest_n(n: int) -> int:
    """The widest wgmma N (multiple of 8, <= 256) dividing ``n`` (columns are independent)."""
    for w in range(256, 7, -8):
        if n % w == 0:
            return w
    return 8


def _reduce_words(order: str) -> str:
    r = _parse_reduce(order)
    if r[0] == "plain":
        return r[1]
    _, t, assign, tree = r
    return (f"by {t} threads (partial j to thread {'j mod ' + str(t) if assign == 'strided' else 'j // ceil(S/' + str(t) + ')'},"
            f" each in order), then {'a shuffle-down tree' if tree == 'down' else 'pairwise'} across the threads")


def _lanes(parts: list, t: int, assign: str, tree: str) -> np.ndarray:
    n = len(parts)
    per = -(-n // t)
    lanes = []
    for i in range(t):
        idx = range(i, n, t) if assign == "strided" else range(i * per, min(n, (i + 1) * per))
        acc = None
        for j in idx:
            acc = parts[j] if acc is None else add_f32(acc, parts[j])
        lanes.append(acc)
    while len(lanes) > 1:
        if tree == "down":
            h = (len(lanes) + 1) // 2
            lanes = [add_f32(lanes[i], lanes[i + h]) if i + h < len(lanes) and lanes[i + h] is not None
                     else lanes[i] for i in range(h)]
        else:
            lanes = [add_f32(lanes[i], lanes[i + 1]) if i + 1 < len(lanes) and lanes[i + 1] is not None
                     else lanes[i] for i in range(0, len(lanes), 2)]
    return lanes[0]


def _reduce(parts: list, order: str) -> np.ndarray:
    r = _parse_reduce(order)
    if r[0] == "lanes":
        return _lanes(parts, *r[1:])
    if order == "reverse":
        parts = parts[::-1]
    if order == "tree":
        while len(parts) > 1:
            parts = [add_f32(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i]
                     for i in range(0, len(parts), 2)]
        return parts[0]
    acc = parts[0]
    for p in parts[1:]:
        acc = add_f32(acc, p)
    return acc


def _sliced_groups(a, b, instr: str, kinstr: int, slice_k: int, group: int) -> np.ndarray:
    """Promotion groups of ``group`` instructions that restart at every ``slice_k`` slice (the last
    group of a slice may be shorter), each group's sum added into f32 with add.f32."""
    M, K = a.shape
    if K % slice_k:
        raise InputError(f"K = {K} must be a multiple of the slice K = {slice_k}")
    acc = np.zeros((M, b.shape[1]), np.float32)
    per_slice = slice_k // kinstr
    for k0 in range(0, K, slice_k):
        for g0 in range(0, per_slice, group):
            ks = slice(k0 + g0 * kinstr, k0 + min(g0 + group, per_slice) * kinstr)
            acc = add_f32(acc, gemm(a[:, ks], b[ks], instr=instr))
    return acc


def tf32x3_slice(a, b, acc, instr: str) -> np.ndarray:
    """One BLOCK_K slice of Triton's tf32x3 dot added into ``acc``: big = cvt.rna.tf32(x), small = x - big;
    P = small_a·big_b, P += big_a·small_b, NaNs of P to +0, Q = big_a·big_b chained on P; add.f32(acc, Q)."""
    big_a, big_b = rna_tf32(a), rna_tf32(b)
    with np.errstate(all="ignore"):
        small_a, small_b = canonical_nan_f32(a - big_a), canonical_nan_f32(b - big_b)
        p = gemm(small_a, big_b, instr=instr)
        p = gemm(big_a, small_b, p, instr=instr)
        p = np.where(np.isnan(p), np.float32(0), p)      # Triton's replaceNansWithZeros
        return add_f32(acc, gemm(big_a, big_b, p, instr=instr))


def _tf32x3(a, b, instr: str, slice_k: int) -> np.ndarray:
    M, K = a.shape
    if K % slice_k:
        raise InputError(f"K = {K} must be a multiple of the slice K = {slice_k}")
    acc = np.zeros((M, b.shape[1]), np.float32)
    for k0 in range(0, K, slice_k):
        acc = tf32x3_slice(a[:, k0:k0 + slice_k], b[k0:k0 + slice_k], acc, instr)
    return acc


@numba.njit(cache=True, nogil=True)
def _fma_kernel(lo, hi, a, b, out):
    K = a.shape[1]
    N = b.shape[1]
    for i in range(lo, hi):
        for j in range(N):
            acc = np.float32(0.0)
            for k in range(K):
                acc = fma_f32(np.float64(a[i, k]), np.float64(b[k, j]), acc)  # products in float64: no overflow
            out[i, j] = acc


def _fma_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One fma.rn.f32 per K element, in K order (Triton's ``input_precision="ieee"`` dot)."""
    out = np.empty((a.shape[0], b.shape[1]), np.float32)
    parallel_ranges(_fma_kernel, a.shape[0], a, b, out)
    return canonical_nan_f32(out)   # fma.rn.f32 writes the canonical NaN


__all__ = ["Schedule", "load_schedule", "OUT_DTYPES", "REDUCE_ORDERS", "EPILOGUE_SCALES", "reduce_orders", "lane_order",
           "OUT_NANS"]
