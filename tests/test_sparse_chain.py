"""The sparse GEMM chain (refmodel.numerics.sparse.gemm_sp) and the row-gathered B it reads
(refmodel.numerics.accumulate.gather_rows, RowGathered): the one-pass chain against the loop of one
wgmma_sp per instruction, the gathered operand against gathering the codes then decoding them, and the
fast kernel reading B's rows through their index against the operand built in full.

Independent evidence: the instruction loop (each instruction held to the dense reference in
tests/test_sparse.py), decode_operand of the gathered codes, and the integer chain kernel."""

from __future__ import annotations

import numpy as np
import pytest

from refmodel.dtypes import bits_of, element_dtype, from_bits
from refmodel.errors import InputError
from refmodel.numerics.accumulate import params_for
from refmodel.wgmma_sp_forms import parse_wgmma_sp
from test_sparse import A_TYPES


def test_gemm_sp_is_a_chain_of_wgmma_sp_and_promotes():
    """gemm_sp equals the explicit chain D_t = wgmma_sp(step t, C = D_{t-1}); with promotion every
    instruction it equals the float32 sum of the per-instruction partial results (fma with unit
    scales adds exactly when the partials are small integers)."""
    from refmodel.numerics.sparse import gemm_sp, wgmma_sp

    instr = "wgmma.mma_async.sp.sync.aligned.m64n16k32.f32.bf16.bf16"
    rng = np.random.default_rng(2026)
    import ml_dtypes

    ac = rng.integers(-3, 4, (128, 48)).astype(np.float32).astype(ml_dtypes.bfloat16)
    meta = rng.choice([4, 8, 12, 9, 13, 14, 0, 15], (128, 24)).astype(np.uint8)
    b = rng.integers(-3, 4, (96, 32)).astype(np.float32).astype(ml_dtypes.bfloat16)
    d = gemm_sp(instr, ac, meta, b)
    for r0, n0 in ((0, 0), (64, 16)):
        x = None
        parts = []
        for t in range(3):
            args = (ac[r0:r0 + 64, 16 * t:16 * t + 16], meta[r0:r0 + 64, 8 * t:8 * t + 8], b[32 * t:32 * t + 32, n0:n0 + 16])
            x = wgmma_sp(instr, *args, x)
            parts.append(wgmma_sp(instr, *args))
        assert np.array_equal(d[r0:r0 + 64, n0:n0 + 16], x)
        p = gemm_sp(instr, ac, meta, b, promote_every=1)
        assert np.array_equal(p[r0:r0 + 64, n0:n0 + 16], np.sum(parts, axis=0, dtype=np.float32))
    with pytest.raises(InputError, match="positive divisor"):
        gemm_sp(instr, ac, meta, b, promote_every=2)


@pytest.mark.parametrize("dtype", sorted(A_TYPES))
def test_gemm_sp_one_pass_equals_the_instruction_loop(dtype):
    """gemm_sp runs the whole chain in one pass of the chain kernel (B gathered along all of K);
    it equals the loop of one wgmma_sp per instruction, bit for bit, on adversarial values (NaN,
    Inf, subnormals, max, cancellation), every nibble, with C, with promotion and with negated
    operands, and across the column blocks the one-pass gather splits N into."""
    from refmodel.numerics import sparse

    base = A_TYPES[dtype]
    f0 = parse_wgmma_sp(base)
    instr = base.replace(f"m64n{f0.n}k", "m64n16k", 1)
    f = parse_wgmma_sp(instr)
    rng = np.random.default_rng(7 + len(dtype))
    steps = 4
    M, K, N = 128, f.k * steps, 48
    wa, wb = element_dtype(f.dtype_a).itemsize * 8, element_dtype(f.dtype_b).itemsize * 8
    raw_a = rng.integers(0, 1 << wa, (M, K // 2), dtype=np.uint64).astype({8: np.uint8, 16: np.uint16, 32: np.uint32}[wa])
    raw_b = rng.integers(0, 1 << wb, (K, N), dtype=np.uint64).astype({8: np.uint8, 16: np.uint16, 32: np.uint32}[wb])
    if f.dtype_a == "tf32":
        raw_a &= np.uint32(0xFFFFE000)
        raw_b &= np.uint32(0xFFFFE000)
    if f.family != "int8":         # mostly small normal values, so that sums are not all NaN
        small = rng.random(raw_a.shape) < 0.8
        raw_a = np.where(small, _small_bits(rng, f.dtype_a, raw_a.shape), raw_a)
        small = rng.random(raw_b.shape) < 0.8
        raw_b = np.where(small, _small_bits(rng, f.dtype_b, raw_b.shape), raw_b)
        raw_b[1::2] = raw_b[0::2] ^ raw_b.dtype.type(1 << (wb - 1))      # cancelling pairs
    a = from_bits(raw_a, f.dtype_a)
    b = from_bits(raw_b, f.dtype_b)
    nib = [4, 8, 12, 9, 13, 14, 0, 15, 1, 5] if f.chunk == 4 else [0b0100, 0b1110]
    meta = rng.choice(nib, (M, K // f.chunk)).astype(np.uint8)
    c = from_bits(rng.integers(0, 1 << 8, (M, N)).astype(np.uint8), "e4m3").astype(element_dtype(f.dtype_d)) \
        if f.family != "int8" else rng.integers(-100, 100, (M, N)).astype(element_dtype(f.dtype_d))
    cases = [dict(), dict(c=c)]
    if f.family != "int8":
        cases += [dict(promote_every=2), dict(promote_every=1, c=c.astype(np.float32)), dict(imm_scale_a=-1, imm_scale_b=-1)]
    kblk = params_for(f.dense).k_group or f.k_compressed
    per_column = 64 * (K // 2) if f.family == "int8" else 64 * (K // 2 // kblk)  # gathered B / block flags
    old_budget = sparse._GATHER_BUDGET
    try:
        for budget in (old_budget, per_column * 16):             # one column block, or three
            sparse._GATHER_BUDGET = budget
            for kw in cases:
                if "imm_scale_a" in kw and f.dtype_a not in ("f16", "bf16"):
                    continue
                with np.errstate(all="ignore"):
                    got = sparse.gemm_sp(instr, a, meta, b, **kw)
                    want = sparse._gemm_sp_loop(instr, a, meta, b, **kw)
                assert got.dtype == want.dtype
                assert np.array_equal(bits_of(got), bits_of(want)), (dtype, kw, budget)
    finally:
        sparse._GATHER_BUDGET = old_budget


def _small_bits(rng, dtype, shape):
    """Bits of small normal values of ``dtype`` (|x| in [1/8, 8))."""
    x = (rng.standard_normal(shape) * 2.0).astype(np.float32)
    return bits_of(x.astype(element_dtype(dtype))) if dtype != "tf32" else x.view(np.uint32) & np.uint32(0xFFFFE000)


@pytest.mark.parametrize("dtype,kblk", [("e4m3", 16), ("f16", 8), ("tf32", 4), ("e5m2", 32)])
def test_gathered_rows_are_gather_then_decode(dtype, kblk, request):
    """Decoding B's rows picked per row (dropped positions: the zero code) equals gathering the codes
    first and decoding them: significands, exponents, classes and the per-block zero/special flags."""
    from refmodel.numerics.accumulate import decode_operand, gather_rows
    from refmodel.numerics.wgmma import operand_spec
    from refmodel.wgmma_forms import parse_wgmma
    from seeds import rng_for

    rng = rng_for(request, dtype, kblk)
    k = {"e4m3": 32, "e5m2": 32, "f16": 16, "tf32": 8}[dtype]
    p = params_for(parse_wgmma(f"wgmma.mma_async.sync.aligned.m64n8k{k}.f32.{dtype}.{dtype}"))
    spec = operand_spec(dtype, p)
    K, Kc, Q = 96, 64, 24
    codes = rng.integers(0, 1 << spec.bits, (K, Q)).astype({8: np.uint8, 16: np.uint16}.get(spec.bits, np.uint32))
    pos = rng.integers(-1, K, (5, Kc))
    zero = int(rng.integers(0, 1 << spec.bits))
    g = np.where((pos < 0)[..., None], codes.dtype.type(zero), codes[np.where(pos < 0, 0, pos)])
    got, want = gather_rows(codes, pos, zero, spec, kblk=kblk).materialise(), decode_operand(g, spec, kblk=kblk)
    for name in ("sig", "exp", "cls", "any_zero", "any_special"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert got.mbits == want.mbits and got.spec == want.spec


@pytest.mark.parametrize("dtype,kblk,promote,tiny", [("e4m3", 16, 0, False), ("e4m3", 32, 2, False),
                                                     ("f16", 8, 0, False), ("bf16", 8, 4, False),
                                                     ("tf32", 4, 0, False), ("e5m2", 32, 0, False),
                                                     ("bf16", 8, 0, True), ("tf32", 4, 0, True)])
def test_chain_reads_gathered_rows_like_the_built_operand(dtype, kblk, promote, tiny, request):
    """The fast chain kernel reading a row-gathered B through its row indices gives the bits of the
    same chain on the gathered operand built in full, by the fast and by the integer kernel: every
    code (NaN, Inf, zeros, subnormals), dropped positions, C with specials, promotion stages; and
    (``tiny``) products near 2**-148, with zeros among them, whose sums land in f32's subnormals.
    (No form's e_zero lies above the smallest normal C's exponent, so a block's zero flags never
    move e_max; the gathered flags themselves are held to decode_operand's in the test above.)"""
    from refmodel.numerics.accumulate import decode_operand, fdpa_chain, gather_rows
    from refmodel.numerics.wgmma import operand_spec
    from refmodel.wgmma_forms import parse_wgmma
    from seeds import rng_for

    rng = rng_for(request, dtype, kblk, promote, tiny)
    k = {"e4m3": 32, "e5m2": 32, "f16": 16, "bf16": 16, "tf32": 8}[dtype]
    p = params_for(parse_wgmma(f"wgmma.mma_async.sync.aligned.m64n8k{k}.f32.{dtype}.{dtype}"))
    spec = operand_spec(dtype, p)
    K, Kc, Q, R = 160, 8 * kblk, 24, 45          # 45 rows: tiles of several rows, four at a time
    udt = {8: np.uint8, 16: np.uint16}.get(spec.bits, np.uint32)
    codes = rng.integers(0, 1 << spec.bits, (K, Q)).astype(udt)
    one = ((1 << (spec.ebits - 1)) - 1) << spec.mbits                 # the code of 1.0
    codes[rng.random((K, Q)) < 0.97] = one + rng.integers(0, 1 << spec.mbits)  # mostly finite terms
    pos = rng.integers(-1, K, (R, Kc))
    zero = int(rng.integers(0, 2)) << (spec.bits - 1)               # +0 or -0
    acodes = rng.integers(0, 1 << spec.bits, (R, Kc, 1)).astype(udt)
    acodes[rng.random(acodes.shape) < 0.99] = one - rng.integers(0, 4 << spec.mbits)
    if tiny:        # |A|, |B| near 2**-74, a tenth of B +0 / -0
        def tiny_codes(shape):
            return ((rng.integers(0, 2, shape) << (spec.bits - 1)) | ((rng.integers(-2, 3, shape) + bias - 74)
                    << spec.mbits) | rng.integers(0, 1 << spec.mbits, shape)).astype(udt)
        bias = (1 << (spec.ebits - 1)) - 1
        acodes = tiny_codes(acodes.shape)
        codes = tiny_codes(codes.shape)
        codes[rng.random(codes.shape) < 0.1] &= udt(1 << (spec.bits - 1))
    a = decode_operand(acodes, spec, kblk=kblk)
    cbits = rng.integers(0, 1 << 32, (R, Q), dtype=np.uint64).astype(np.uint32)
    cbits[rng.random((R, Q)) < 0.7] &= np.uint32(0x3FFFFFFF)        # mostly finite C
    if tiny:
        cbits[:] = 0
    gathered = gather_rows(codes, pos, zero, spec, kblk=kblk)
    built = gathered.materialise()
    outs = []
    for b, kernel, rows_per_b in ((gathered, "fast", 1), (built, "fast", 1), (built, "int", 1)):
        kw = {}
        if promote:
            kw = dict(promote_nblk=promote, acc_f32=np.zeros((R, Q), np.float32))
        d = fdpa_chain(a, b, cbits if not promote else np.zeros((R, Q), np.uint32), p, kblk=kblk,
                       rows_per_b=rows_per_b, kernel=kernel, **kw)
        outs.append(kw["acc_f32"].view(np.uint32).copy() if promote else d)
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[1], outs[2])
    assert np.any(outs[0] != outs[0][0, 0])         # not a constant: the chain did something
