"""Sparse wgmma (``wgmma.mma_async.sp``) numerics: compression, metadata, and the accumulator.

A structured-sparse A (64 x K) is stored compressed (64 x K/2) with one metadata nibble per
row and chunk: for 2:4 (f16, bf16, 8-bit types) a chunk is 4 elements and the nibble is
``idx0 | idx1 << 2``, the positions of the chunk's two kept elements (compressed columns
2c and 2c+1); for tf32 (1:2) a chunk is a pair and the nibble 0b0100 keeps element 0,
0b1110 element 1 (a tf32 element is two 16-bit halves to the 2:4 hardware).

What the H200 computes (fixtures/sparse), for every sparse form:

* **the kept products**: compressed element j of row m multiplies B's row ``pos(m, j)``,
  the K index its nibble names;
* **one fused block**: the K/2 kept products and C form one fused, truncated dot product —
  exactly the dense form of half the K with B's rows gathered per row of A (the dense
  binding of :data:`refmodel.numerics.accumulate.BINDING` carries over unchanged);
* **any nibble works as two indices** (PTX calls 0b0000, 0b0101, 0b1010, 0b1111 invalid):
  ``idx0 > idx1`` is fine, and equal indices put both kept elements on the same B row — both
  products join the sum.  tf32 nibbles other than 0b0100 / 0b1110 are refused (see
  :func:`kept_positions`).

Worked example (f16, K = 32): nibble 0b1001 in chunk 1 of row 0 keeps A[0, 5] and A[0, 6]
(idx0 = 1, idx1 = 2), stored as compressed columns 2 and 3.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..dtypes import bits_of, element_dtype, from_bits
from ..errors import DTypeError, InputError
from ..limits import check_limit
from ..validate import _describe, as_array, check_flag, check_instr
from ..wgmma_sp_forms import WgmmaSpForm
from ..wgmma_sp_forms import parse_wgmma_sp as _parse_wgmma_sp
from .accumulate import AccumParams, IntAccumParams, decode_operand, fdpa, fdpa_chain, gather_rows, int_dot, int_dot_chain, params_for
from .wgmma import operand_codes, operand_spec, operand_values

M = 64
EXAMPLE_INSTR = "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16"


def parse_wgmma_sp(instr) -> WgmmaSpForm:
    """:func:`refmodel.wgmma_sp_forms.parse_wgmma_sp` after a length check of the opcode."""
    return _parse_wgmma_sp(check_instr("instr", instr, EXAMPLE_INSTR))


def _check_imm(form, imm_scale_a, imm_scale_b) -> None:
    for name, v in (("imm_scale_a", imm_scale_a), ("imm_scale_b", imm_scale_b)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or int(v) not in (1, -1):
            raise InputError(f"{name} must be 1 or -1, got {_describe(v)}")
        if v == -1 and not form.has_imm_scale:
            raise InputError(f"{name} must be 1 for integer wgmma (no imm-scale operands), got -1")


# ----------------------------------------------------------------------------- metadata

def _nibbles(meta, form: WgmmaSpForm) -> np.ndarray:
    mt = as_array("meta", meta)
    if mt.dtype.kind not in "iu":
        raise DTypeError(f"meta must hold integer nibbles (uint8), got {mt.dtype}")
    if mt.ndim < 2 or mt.shape[-2:] != (M, form.meta_cols):
        raise InputError(f"meta for {form.shape} .{form.dtype_a} must have shape (..., 64, {form.meta_cols}): one "
                         f"nibble per row and {form.chunk}-element chunk, got {mt.shape}")
    if mt.size and (mt.min() < 0 or mt.max() > 15):
        raise InputError("metadata nibbles must be in 0..15")
    return mt.astype(np.int64)


def kept_positions(meta, form: WgmmaSpForm | str) -> np.ndarray:
    """(..., 64, K/2) K index each compressed element multiplies (-1: it contributes nothing).

    2:4: column 2c goes to 4c + (nib & 3), column 2c+1 to 4c + (nib >> 2) — any nibble, in
    any order, equal indices included (all recorded on the H200).  tf32 (pair c, compressed
    column c): 0b0100 → element 0, 0b1110 → element 1; other nibbles are refused (the H200
    is deterministic with them but mixes the half-words of the element: recorded, not modelled).
    """
    f = form if isinstance(form, WgmmaSpForm) else parse_wgmma_sp(form)
    nib = _nibbles(meta, f)
    c = np.arange(f.meta_cols)
    if f.chunk == 4:
        pos = np.empty(nib.shape[:-1] + (f.k_compressed,), np.int64)
        pos[..., 0::2] = 4 * c + (nib & 3)
        pos[..., 1::2] = 4 * c + (nib >> 2)
        return pos
    bad = ~np.isin(nib, (0b0100, 0b1110))
    if bad.any():
        at = tuple(int(v) for v in np.argwhere(bad)[0])
        raise InputError(f"tf32 sparse metadata nibbles must be 0b0100 or 0b1110, got {int(nib[at]):#06b} at row "
                         f"{at[-2]}, pair {at[-1]}: the H200 answers other nibbles deterministically but with "
                         f"garbled half-words that refmodel does not model (docs/sparse.md)")
    return 2 * c + (nib == 0b1110)


def _kept_for_mask(chunk: int, keep: int) -> np.ndarray:
    """For every nonzero mask of one chunk (bit i: element i nonzero, at most ``keep`` bits set), the
    positions :func:`compress` keeps: the nonzeros, then the lowest free positions, in increasing order."""
    tab = np.zeros((1 << chunk, keep), np.int64)
    for m in range(1 << chunk):
        nonzero = [i for i in range(chunk) if m >> i & 1]
        free = [i for i in range(chunk) if not m >> i & 1]
        tab[m] = sorted((nonzero + free)[:keep])
    return tab


_KEPT_FOR_MASK = {4: _kept_for_mask(4, 2), 2: _kept_for_mask(2, 1)}   # 2:4, and tf32's 1:2
_POPCOUNT = np.array([bin(m).count("1") for m in range(16)], np.int64)


def compress(a, form: WgmmaSpForm | str) -> tuple[np.ndarray, np.ndarray]:
    """(a_compressed (..., 64, K/2), meta uint8 (..., 64, K/4 or K/2)) of a dense A with 2:4
    structure (1:2 for tf32).  A chunk with fewer nonzeros than it keeps stores zeros at the
    first free positions (all-zero chunk: 0b0100 — elements 0 and 1; tf32: 0b0100).

    ``a`` is one instruction's tiles (..., 64, K), or a whole (M, K) matrix (M a multiple of 64, K of
    the instruction's K): then a_compressed is (M, K/2) and meta (M, K/4 or K/2), instruction after
    instruction along K, as :func:`gemm_sp` takes them."""
    f = form if isinstance(form, WgmmaSpForm) else parse_wgmma_sp(form)
    dt = element_dtype(f.dtype_a)
    x = as_array("a", a)
    if x.dtype != dt:
        raise DTypeError(f"a must be {dt.name} for .{f.dtype_a}, got {x.dtype.name}")
    if x.ndim == 2 and x.shape != (M, f.k) and x.shape[0] and x.shape[0] % M == 0 and x.shape[1] \
            and x.shape[1] % f.k == 0:
        rows, kk = x.shape
        tiles = np.ascontiguousarray(x.reshape(rows // M, M, kk // f.k, f.k).transpose(0, 2, 1, 3))
        ac, meta = compress(tiles, f)
        return (np.ascontiguousarray(ac.transpose(0, 2, 1, 3).reshape(rows, kk // 2)),
                np.ascontiguousarray(meta.transpose(0, 2, 1, 3).reshape(rows, -1)))
    if x.ndim < 2 or x.shape[-2:] != (M, f.k):
        raise InputError(f"a must have shape (..., 64, {f.k}) for {f.shape}, or (M, K) with M a multiple of 64 "
                         f"and K of {f.k}, got {x.shape}")
    bits = bits_of(x)
    keep = 2 if f.chunk == 4 else 1
    ch = bits.reshape(bits.shape[:-1] + (f.meta_cols, f.chunk))
    nz = ch != 0
    if f.dtype_a != "tf32":
        nz = nz & ((ch & ~np.asarray(_sign_mask(f.dtype_a), ch.dtype)) != 0)  # -0 counts as zero
    mask = np.zeros(nz.shape[:-1], np.uint8)          # bit i: element i of the chunk is nonzero
    for i in range(f.chunk):
        mask |= nz[..., i].astype(np.uint8) << np.uint8(i)
    counts = _POPCOUNT[mask]
    bad = np.argwhere(counts > keep)
    if bad.size:
        idx = tuple(int(v) for v in bad[0])
        raise InputError(f"a is not {'2:4' if keep == 2 else '1:2'} sparse: row {idx[-2]}, chunk {idx[-1]} "
                         f"(columns {f.chunk * idx[-1]}..{f.chunk * idx[-1] + f.chunk - 1}) has "
                         f"{int(counts[bad[0][0]] if counts.ndim == 1 else counts[tuple(bad[0])])} nonzeros")
    order = _KEPT_FOR_MASK[f.chunk][mask]             # the nonzeros, then the lowest free positions
    vals = np.take_along_axis(ch, order, axis=-1)
    comp = vals.reshape(bits.shape[:-1] + (f.k_compressed,))
    if f.chunk == 4:
        meta = (order[..., 0] | (order[..., 1] << 2)).astype(np.uint8)
    else:
        meta = np.where(order[..., 0] == 0, 0b0100, 0b1110).astype(np.uint8)
    return from_bits(comp, f.dtype_a), meta


def _sign_mask(dtype_a: str) -> int:
    return {"f16": 0x8000, "bf16": 0x8000, "e4m3": 0x80, "e5m2": 0x80, "s8": 0, "u8": 0, "tf32": 0}[dtype_a]


def decompress(a_compressed, meta, form: WgmmaSpForm | str) -> np.ndarray:
    """Dense (..., 64, K) A of a compressed A and legal metadata (each position at most once)."""
    f = form if isinstance(form, WgmmaSpForm) else parse_wgmma_sp(form)
    ac = _check_operand("a_compressed", a_compressed, f.dtype_a, (M, f.k_compressed), f)
    pos = kept_positions(meta, f)
    if pos.shape[:-2] != ac.shape[:-2]:
        pos = np.broadcast_to(pos, ac.shape[:-2] + pos.shape[-2:])
    srt = np.sort(np.where(pos < 0, -1 - np.arange(pos.shape[-1]), pos), axis=-1)
    if np.any(srt[..., 1:] == srt[..., :-1]):
        raise InputError("metadata names the same K position twice in a chunk (equal indices): such A has no "
                         "dense form; the hardware adds both products (see wgmma_sp)")
    bits = bits_of(ac)
    out = np.zeros(ac.shape[:-1] + (f.k,), bits.dtype)
    ok = pos >= 0
    np.put_along_axis(out, np.where(ok, pos, 0), np.where(ok, bits, 0), axis=-1)
    return from_bits(out, f.dtype_a)


def prune_2_4(a, form: WgmmaSpForm | str) -> np.ndarray:
    """Keep the two largest magnitudes of each quartet (one of each pair for tf32), zero the
    rest (ties: the lower index); returns a dense A that :func:`compress` accepts."""
    f = form if isinstance(form, WgmmaSpForm) else parse_wgmma_sp(form)
    dt = element_dtype(f.dtype_a)
    x = as_array("a", a)
    if x.dtype != dt:
        raise DTypeError(f"a must be {dt.name} for .{f.dtype_a}, got {x.dtype.name}")
    whole = x.ndim == 2 and x.shape[0] and x.shape[0] % M == 0 and x.shape[1] and x.shape[1] % f.k == 0
    if not whole and (x.ndim < 2 or x.shape[-2:] != (M, f.k)):
        raise InputError(f"a must have shape (..., 64, {f.k}) for {f.shape}, or (M, K) with M a multiple of 64 "
                         f"and K of {f.k}, got {x.shape}")
    mag = np.abs(x.astype(np.float64))
    mag = np.where(np.isnan(mag), np.inf, mag)
    ch = mag.reshape(mag.shape[:-1] + (x.shape[-1] // f.chunk, f.chunk))
    keep = 2 if f.chunk == 4 else 1
    order = np.argsort(-ch, axis=-1, kind="stable")[..., :keep]
    mask = np.zeros(ch.shape, bool)
    np.put_along_axis(mask, order, True, axis=-1)
    bits = bits_of(x).copy().reshape(ch.shape)
    bits[~mask] = 0
    return from_bits(bits.reshape(x.shape), f.dtype_a)


# ----------------------------------------------------------------------------- accumulator

def _check_operand(name, x, type_name, tail, form):
    dt = element_dtype(type_name)
    x = as_array(name, x, what=f"a {dt.name} array")
    if x.dtype != dt:
        raise DTypeError(f"{name} must be {dt.name} for .{type_name}, got {x.dtype.name}")
    if x.ndim < 2 or tuple(x.shape[-2:]) != tail:
        raise InputError(f"{name} must have shape (..., {tail[0]}, {tail[1]}) for {form.shape}, got {tuple(x.shape)}")
    return x


def _check_sp_sel(form, sp_sel) -> None:
    if isinstance(sp_sel, bool) or not isinstance(sp_sel, (int, np.integer)) or int(sp_sel) not in form.sp_sels:
        raise InputError(f"sp_sel must be {' or '.join(map(str, form.sp_sels))} for .{form.dtype_a} sparse wgmma, "
                         f"got {_describe(sp_sel)}")


def wgmma_sp(instr: str, a_compressed, meta, b, c=None, *, sp_sel: int = 0, scale_d=True,
             imm_scale_a: int = 1, imm_scale_b: int = 1, params=None) -> np.ndarray:
    """D (..., 64, N) of one sparse wgmma: ``a_compressed`` (..., 64, K/2), ``meta`` (..., 64,
    K/4) uint8 nibbles (tf32: (..., 64, K/2)), ``b`` (..., K, N), ``c`` (..., 64, N).

    ``sp_sel`` selects which threads hold the metadata (0 or 1 for 16-bit and tf32, 0 for
    8-bit); it is validated here and does not change the arithmetic.  ``params``
    overrides the dense binding (e.g. ``k_group`` to split the kept products in blocks).
    """
    form = parse_wgmma_sp(instr)
    d = form.dense
    _check_sp_sel(form, sp_sel)
    scale_d = check_flag("scale_d", scale_d)
    _check_imm(form, imm_scale_a, imm_scale_b)
    p = params_for(d) if params is None else params
    want = IntAccumParams if form.family == "int8" else AccumParams
    if not isinstance(p, want):
        raise InputError(f"params for {form.dtype_a} inputs must be a {want.__name__}, got {type(p).__name__}")
    kc, K, N = form.k_compressed, form.k, form.n
    if p.k_group is not None and (p.k_group <= 0 or kc % p.k_group):
        raise InputError(f"k_group must divide the {kc} kept products, got {p.k_group}")
    a = _check_operand("a_compressed", a_compressed, form.dtype_a, (M, kc), form)
    bb = _check_operand("b", b, form.dtype_b, (K, N), form)
    pos = kept_positions(meta, form)
    cdt = element_dtype(form.dtype_d)
    if c is not None:
        c = _check_operand("c", c, form.dtype_d, (M, N), form)
    shapes = [a.shape[:-2], bb.shape[:-2], pos.shape[:-2]] + ([c.shape[:-2]] if c is not None else [])
    try:
        batch = np.broadcast_shapes(*shapes)
    except ValueError:
        raise InputError(f"batch dimensions of a_compressed {a.shape[:-2]}, meta {pos.shape[:-2]}, b {bb.shape[:-2]}"
                         f"{'' if c is None else f', c {c.shape[:-2]}'} do not broadcast") from None
    check_limit("batch_elements", int(np.prod(batch, dtype=object)) * M * kc * N,
                "the broadcast batch's gathered B elements (batch x 64 x K/2 x N)")
    a = np.broadcast_to(a, batch + a.shape[-2:])
    bb = np.broadcast_to(bb, batch + bb.shape[-2:])
    pos = np.broadcast_to(pos, batch + pos.shape[-2:])
    c = (np.zeros(batch + (M, N), cdt) if c is None or not bool(scale_d)
         else np.broadcast_to(c, batch + c.shape[-2:]))
    nb = int(np.prod(batch, dtype=np.int64))
    # B's rows gathered per row of A: (nb, 64, K/2, N); a dropped element multiplies +0
    bbits = bits_of(np.ascontiguousarray(bb)).reshape(nb, K, N)
    p2 = pos.reshape(nb, M, kc)
    g = bbits[np.arange(nb)[:, None, None], np.where(p2 < 0, 0, p2)]
    g = np.where((p2 < 0)[..., None], 0, g).astype(bbits.dtype)
    kblk = p.k_group or kc
    if form.family == "int8":
        clamp = p.clamps(form.satfinite)
        bvals = from_bits(g, form.dtype_b).astype(np.int32).reshape(nb * M, kc, N)
        out = int_dot_chain(a.reshape(-1, kc).astype(np.int32), bvals, c.reshape(-1, N), clamp, kblk=kblk,
                            rows_per_b=1)
        return out.reshape(batch + (M, N))
    ca = operand_codes(a, form.dtype_a, p, imm_scale_a == -1).reshape(-1, kc)
    cb = operand_codes(from_bits(g, form.dtype_b), form.dtype_b, p, imm_scale_b == -1).reshape(nb * M, kc, N)
    A = decode_operand(ca[..., None], operand_spec(form.dtype_a, p), kblk=kblk)
    B = decode_operand(cb, operand_spec(form.dtype_b, p), kblk=kblk)
    bits = fdpa_chain(A, B, bits_of(np.ascontiguousarray(c)).astype(np.uint32).reshape(-1, N), p, kblk=kblk,
                      rows_per_b=1)
    return from_bits(bits, form.dtype_d).reshape(batch + (M, N))


def wgmma_sp_reference(instr: str, a_compressed, meta, b, c=None, *, scale_d=True, imm_scale_a: int = 1,
                       imm_scale_b: int = 1) -> np.ndarray:
    """The readable float64 formula of :func:`wgmma_sp` (one batch, slow): per row, the dense
    fused dot product of the K/2 kept products with B's gathered rows (tests hold the two equal)."""
    form = parse_wgmma_sp(instr)
    scale_d = check_flag("scale_d", scale_d)
    _check_imm(form, imm_scale_a, imm_scale_b)
    p = params_for(form.dense)
    a = _check_operand("a_compressed", a_compressed, form.dtype_a, (M, form.k_compressed), form)
    bb = _check_operand("b", b, form.dtype_b, (form.k, form.n), form)
    pos = kept_positions(meta, form)
    if c is not None:
        c = _check_operand("c", c, form.dtype_d, (M, form.n), form)
    c = np.zeros((M, form.n), element_dtype(form.dtype_d)) if c is None or not scale_d else np.asarray(c)
    if form.family == "int8":
        clamp = p.clamps(form.satfinite)
        bv = np.where((pos < 0)[..., None], 0, bb.astype(np.int64)[np.where(pos < 0, 0, pos)])   # (64, K/2, N)
        return int_dot(a.astype(np.int64)[:, None, :], np.swapaxes(bv, -1, -2), c.astype(np.int64), clamp)
    with np.errstate(all="ignore"):   # NaN / Inf operands are expected here
        av = operand_values(a, form.dtype_a, p) * imm_scale_a
        bv = operand_values(bb, form.dtype_b, p) * imm_scale_b
        g = np.where((pos < 0)[..., None], 0.0, bv[np.where(pos < 0, 0, pos)])                    # (64, K/2, N)
        return fdpa(av[:, None, :], np.swapaxes(g, -1, -2), c.astype(np.float64), p,
                    operand_spec(form.dtype_a, p), operand_spec(form.dtype_b, p))


def gemm_sp(instr: str, a_compressed, meta, b, c=None, *, sp_sel: int = 0, promote_every: Optional[int] = None,
            imm_scale_a: int = 1, imm_scale_b: int = 1) -> np.ndarray:
    """A chain of sparse wgmmas along K (the refmodel.gemm schedule for sparse A).

    ``a_compressed`` (M, K/2), ``meta`` (M, K/4) nibbles (tf32: (M, K/2)), ``b`` (K, N): M a
    multiple of 64, K of the instruction's K, N of its N.  Instruction t multiplies compressed
    columns [t*Kc, (t+1)*Kc) with its metadata columns by B's rows [t*K, (t+1)*K); each D is the
    next C (the first C is ``c`` or +0).  With ``promote_every=p`` every p instructions form a
    stage started from +0 whose result is added into a float32 accumulator
    ``acc = fma(1, partial, acc)`` (unit scales; DeepGEMM's promotion).
    """
    form = parse_wgmma_sp(instr)
    ac = as_array("a_compressed", a_compressed)
    mt = as_array("meta", meta)
    bb = as_array("b", b)
    if ac.ndim != 2 or mt.ndim != 2 or bb.ndim != 2:
        raise InputError("gemm_sp takes 2-D a_compressed (M, K/2), meta (M, cols) and b (K, N)")
    M, kc_all = ac.shape
    K, N = bb.shape
    if M == 0 or M % 64:
        raise InputError(f"M must be a positive multiple of 64, got {M}")
    if K % form.k or kc_all * 2 != K or mt.shape != (M, K // form.chunk):
        raise InputError(f"shapes do not chain {form.shape}: a_compressed {ac.shape}, meta {mt.shape}, b {bb.shape} "
                         f"(K must be a multiple of {form.k}; a_compressed has K/2 columns, meta K/{form.chunk})")
    if N % form.n:
        raise InputError(f"N must be a multiple of {form.n} for {form.shape}, got {N}")
    steps = K // form.k
    if promote_every is not None and (isinstance(promote_every, bool) or not isinstance(promote_every, (int, np.integer))
                                      or promote_every <= 0 or steps % promote_every):
        raise InputError(f"promote_every must be a positive divisor of the {steps} instructions, got {_describe(promote_every)}")
    if promote_every is not None and form.family == "int8":
        raise InputError("promote_every applies to floating-point forms; integer wgmma accumulates exactly in s32")
    _check_sp_sel(form, sp_sel)
    _check_imm(form, imm_scale_a, imm_scale_b)
    _check_operand("a_compressed", ac[:64, :form.k_compressed], form.dtype_a, (64, form.k_compressed), form)
    _check_operand("b", bb[:form.k, :form.n], form.dtype_b, (form.k, form.n), form)
    if c is not None:
        c = as_array("c", c)
        if c.shape != (M, N):
            raise InputError(f"c must have shape (M, N) = ({M}, {N}), got {tuple(c.shape)}")
        if not promote_every:
            _check_operand("c", c[:64, :form.n], form.dtype_d, (64, form.n), form)
    return _chain_sp(form, ac, mt, bb, c, promote_every, imm_scale_a, imm_scale_b)


#: elements one pass of :func:`_chain_sp` builds at most: the gathered B (rows x kept products x
#: columns) of an integer form, the block flags (rows x blocks x columns) of a float one
_GATHER_BUDGET = 1 << 22


def _chain_sp(form, ac, mt, bb, c, promote_every, imm_scale_a, imm_scale_b) -> np.ndarray:
    """:func:`gemm_sp`'s chain in one pass of the chain kernel per block of 64 rows and columns:
    B's rows gathered for every instruction's kept positions along the whole K (a dropped element
    multiplies +0; float forms read them through :func:`refmodel.numerics.accumulate.gather_rows`), then the instructions' fused dot products chained (``kblk`` = the kept
    products of one instruction, or its k_group), and promoted every ``promote_every`` instructions
    as the loop :func:`_gemm_sp_loop` does instruction by instruction (tests hold the two equal)."""
    p = params_for(form.dense)
    M, kc_all = ac.shape
    K, N = bb.shape
    kc, mc, steps = form.k_compressed, form.meta_cols, K // form.k
    kblk = p.k_group or kc
    pos = np.concatenate([np.where(q < 0, -1, q + t * form.k) for t in range(steps)
                          for q in [kept_positions(mt[:, t * mc:(t + 1) * mc].reshape(-1, 64, mc), form)
                                    .reshape(M, kc)]], axis=1)             # (M, K/2) positions along all of K
    bbits = bits_of(np.ascontiguousarray(bb))
    out = np.empty((M, N), np.float32 if promote_every else element_dtype(form.dtype_d))
    if form.family == "int8":       # the gathered B is built: (64, K/2, columns) a pass
        nw = max(form.n, min(N, _GATHER_BUDGET // (64 * kc_all) // form.n * form.n))
    else:                           # B's rows are read through the gather: its block flags a pass
        nw = max(form.n, min(N, _GATHER_BUDGET // (64 * (kc_all // kblk)) // form.n * form.n))
    if form.family != "int8":       # B's codes once; each row block reads its kept rows of them
        spec_b = operand_spec(form.dtype_b, p)
        bcodes = operand_codes(bb, form.dtype_b, p, imm_scale_b == -1)
        zero_b = int(operand_codes(from_bits(np.zeros((1, 1), bbits.dtype), form.dtype_b), form.dtype_b, p,
                                   imm_scale_b == -1)[0, 0])
    for r0 in range(0, M, 64):
        pr = pos[r0:r0 + 64]
        a_rows = ac[r0:r0 + 64]
        if form.family != "int8":
            A = decode_operand(operand_codes(a_rows, form.dtype_a, p, imm_scale_a == -1)[..., None],
                               operand_spec(form.dtype_a, p), kblk=kblk)
        for n0 in range(0, N, nw):
            n1 = min(N, n0 + nw)
            cblk = None if c is None else np.asarray(c)[r0:r0 + 64, n0:n1]
            if form.family == "int8":
                g = bbits[np.where(pr < 0, 0, pr), n0:n1]
                g = np.where((pr < 0)[..., None], 0, g).astype(bbits.dtype)      # (64, K/2, columns)
                clamp = p.clamps(form.satfinite)
                c0 = np.zeros((64, n1 - n0), np.int32) if cblk is None else cblk
                out[r0:r0 + 64, n0:n1] = int_dot_chain(
                    np.asarray(a_rows).astype(np.int32), from_bits(g, form.dtype_b).astype(np.int32), c0, clamp,
                    kblk=kblk, rows_per_b=1)
                continue
            B = gather_rows(bcodes[:, n0:n1], pr, zero_b, spec_b, kblk=kblk)      # (64, K/2, columns)
            if promote_every:
                acc = (np.zeros((64, n1 - n0), np.float32) if cblk is None else
                       np.array(cblk, np.float32, order="C"))
                fdpa_chain(A, B, np.zeros((64, n1 - n0), np.uint32), p, kblk=kblk, rows_per_b=1,
                           promote_nblk=promote_every * kc // kblk, acc_f32=acc)
                out[r0:r0 + 64, n0:n1] = acc
            else:
                cbits = (np.zeros((64, n1 - n0), np.uint32) if cblk is None else
                         bits_of(np.ascontiguousarray(cblk)).astype(np.uint32))
                out[r0:r0 + 64, n0:n1] = from_bits(fdpa_chain(A, B, cbits, p, kblk=kblk, rows_per_b=1), form.dtype_d)
    return out


def _gemm_sp_loop(instr: str, ac, mt, bb, c=None, *, sp_sel: int = 0, promote_every: Optional[int] = None,
                  imm_scale_a: int = 1, imm_scale_b: int = 1) -> np.ndarray:
    """:func:`gemm_sp` one :func:`wgmma_sp` at a time (slow; the readable schedule tests hold
    :func:`_chain_sp` to)."""
    from .accumulate import promote

    form = parse_wgmma_sp(instr)
    M = ac.shape[0]
    K, N = bb.shape
    steps = K // form.k
    kc, mc = form.k_compressed, form.meta_cols
    out = np.empty((M, N), np.float32 if promote_every else element_dtype(form.dtype_d))
    for r0 in range(0, M, 64):
        for n0 in range(0, N, form.n):
            d = None if c is None or promote_every else np.asarray(c)[r0:r0 + 64, n0:n0 + form.n]
            acc = (np.zeros((64, form.n), np.float32) if c is None else
                   np.ascontiguousarray(np.asarray(c, np.float32)[r0:r0 + 64, n0:n0 + form.n])) if promote_every else None
            for t in range(steps):
                first = promote_every is not None and t % promote_every == 0
                d = wgmma_sp(instr, ac[r0:r0 + 64, t * kc:(t + 1) * kc], mt[r0:r0 + 64, t * mc:(t + 1) * mc],
                             bb[t * form.k:(t + 1) * form.k, n0:n0 + form.n], None if first else d, sp_sel=sp_sel,
                             imm_scale_a=imm_scale_a, imm_scale_b=imm_scale_b)
                if promote_every and (t + 1) % promote_every == 0:
                    promote(acc, d.astype(np.float32), np.float32(1), np.float32(1))
            out[r0:r0 + 64, n0:n0 + form.n] = acc if promote_every else d
    return out


__all__ = ["kept_positions", "compress", "decompress", "prune_2_4", "wgmma_sp", "wgmma_sp_reference", "gemm_sp"]
