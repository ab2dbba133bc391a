"""refmodel.numerics.sweep.encode_f32_fast (the 2^32 sweep's kernel) gives the same codes as
refmodel.numerics.fp8.round_to_format; its docstring's "(tested)" points here."""

import numpy as np
import pytest

from refmodel.verify.families.f32 import adversarial_f32
from refmodel.numerics.fp8 import round_to_format
from refmodel.numerics.sweep import encode_f32_fast
from seeds import rng_for


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "f16", "bf16"])
@pytest.mark.parametrize("saturate", [True, False])
@pytest.mark.parametrize("relu", [False, True])
def test_encode_f32_fast_equals_round_to_format(fmt, saturate, relu, request):
    rng = rng_for(request, fmt, saturate, relu)
    strided = (np.arange(1 << 18, dtype=np.uint64) * 16411 % (1 << 32)).astype(np.uint32)
    bits = np.concatenate([adversarial_f32(rng, 1 << 17).view(np.uint32), strided])
    got = encode_f32_fast(bits, fmt, saturate=saturate, relu=relu)
    want = round_to_format(bits.view(np.float32), fmt, saturate=saturate, relu=relu)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (f"{bad.size} differ; first x=0x{int(bits[bad[0]]):08x}: fast 0x{int(got[bad[0]]):x}, "
                           f"round_to_format 0x{int(want[bad[0]]):x}")


def test_chunk_digest_is_sha256_of_the_bytes():
    """Constant chunks take a remembered digest: it must be the sha256 of those very bytes, per value,
    size and dtype; other chunks are hashed."""
    import hashlib

    from refmodel.numerics.sweep import chunk_digest

    for buf in (np.zeros(1000, np.uint8), np.full(1000, 0x7E, np.uint8), np.full(999, 0x7E, np.uint8),
                np.full(500, 0x7E, np.uint16), np.arange(1000, dtype=np.uint8), np.zeros(0, np.uint8)):
        for _ in range(2):
            assert chunk_digest(buf) == hashlib.sha256(buf.tobytes()).hexdigest()
    one = np.zeros(1000, np.uint8)
    one[999] = 1
    assert chunk_digest(one) == hashlib.sha256(one.tobytes()).hexdigest()


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "f16", "bf16"])
@pytest.mark.parametrize("relu", [False, True])
def test_sweep_runs_equal_the_per_input_kernel(fmt, relu, request):
    """The sweep's range kernel (one loop per run: below the smallest normal, normal, NaN) gives
    encode_f32_fast's codes: on whole chunks holding every run boundary of both signs, and on
    ranges of any start and length, crossing the sign boundary."""
    from refmodel.numerics.formats import format_spec
    from refmodel.numerics.sweep import CHUNK, _fast_params, _fast_range_kernel, sweep_chunk

    dst = format_spec(fmt)
    mnb = (127 + dst.emin) << 23
    chunks = {0, 1, mnb >> 24, (mnb - 1) >> 24, 0x7F, 0x80, 0x80 | (mnb >> 24), 0xFF}
    every = np.arange(CHUNK, dtype=np.uint32)
    for c in sorted(chunks):
        want = encode_f32_fast(every + np.uint32(c << 24), fmt, relu=relu)
        buf = np.empty(CHUNK, want.dtype)
        assert np.array_equal(sweep_chunk(fmt, relu, c, buf), want), hex(c)
    rng = rng_for(request, fmt, relu)
    params = _fast_params(dst, True, relu)
    out = np.zeros(1 << 12, np.uint8 if dst.bits == 8 else np.uint16)
    starts = [(1 << 31) - 100, mnb - 7, 0x7F800000 - 3, (1 << 32) - 50] + \
        rng.integers(0, (1 << 32) - out.size, 200).tolist()
    for base in starts:
        lo, hi = sorted(int(v) for v in rng.integers(0, out.size, 2))
        _fast_range_kernel(lo, hi, np.int64(base), out, *params)
        want = encode_f32_fast((np.arange(lo, hi, dtype=np.uint64) + base).astype(np.uint32), fmt, relu=relu)
        assert np.array_equal(out[lo:hi], want), (hex(base), lo, hi)
