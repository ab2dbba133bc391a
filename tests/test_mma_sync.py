"""mma.sync: the form table against ptxas, the fragment layouts, the numerics against independent
formulas, the binary64 FMA against exact integer arithmetic, and the H200 fixtures' replay."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from refmodel.errors import FormError, InputError
from refmodel.layouts import mma_fragment as mf
from refmodel.mma_sync_forms import MMA_SYNC_FORMS, MmaSyncForm, element_codes, from_codes, parse_mma_sync
from refmodel.numerics.fma64 import DEFAULT_NAN, fma64, fma64_reference
from refmodel.numerics.mma_sync import mma_sync

NEAR_MISSES = [
    "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f16",      # D f32 with C f16 only at m8n8k4
    "mma.sync.aligned.m8n8k4.row.row.f16.f16.f16.f32",       # D f16 with C f32
    "mma.sync.aligned.m16n8k16.col.col.f32.bf16.bf16.f32",   # .col A outside m8n8k4
    "mma.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32",   # tf32 k16
    "mma.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32",   # FP8 k64 (sm_120a's kind::f8f6f4)
    "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f16",   # FP8 D/C mixed
    "mma.sync.aligned.m8n8k8.row.col.f64.f64.f64.f64",
    "mma.sync.aligned.m8n8k32.row.col.s32.s8.s8.s32",
    "mma.sync.aligned.m16n8k16.row.col.s32.s4.s4.s32",
    "mma.sync.aligned.m16n8k64.row.col.s32.b1.b1.s32.and.popc",
]


def _regs(n: int, t: str) -> str:
    return "{" + ", ".join(f"%{t}{i}" for i in range(n)) + "}"


def _ptx(instrs: list[str], counts) -> str:
    body = []
    for op, (na, nb, nc, nd, ta, tc, td) in zip(instrs, counts):
        body.append(f"{op} {_regs(nd, td)}, {_regs(na, ta)}, {_regs(nb, ta)}, {_regs(nc, tc)};")
    return (".version 9.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 p){\n"
            ".reg .b32 %r<64>;\n.reg .f32 %f<64>;\n.reg .f64 %fd<64>;\n" + "\n".join(body) + "\nret;\n}\n")


def _unchecked(op: str) -> MmaSyncForm:
    """An MmaSyncForm of any opcode (no validation), to size its registers."""
    parts = op.split(".")
    m, k = (int(x) for x in re.match(r"m(\d+)n8k(\d+)", parts[3]).groups())
    lay = [x for x in parts[4:] if x in ("row", "col")]
    types = [x for x in parts[4:] if x not in ("row", "col", "satfinite", "xor", "and", "popc")]
    bitop = next((x for x in parts if x in ("xor", "and")), "")
    return MmaSyncForm(m, k, types[0], types[1], types[2], types[3], lay[0], lay[1], "satfinite" in parts, bitop)


def _counts(f):
    rt = lambda t: "fd" if t == "f64" else ("f" if t == "f32" else "r")  # noqa: E731
    return (max(1, f.a_regs), max(1, f.b_regs), f.c_regs, f.d_regs, rt(f.dtype_a), rt(f.dtype_c), rt(f.dtype_d))


def _assembles(tmp_path, instrs, counts) -> tuple[bool, str]:
    src = tmp_path / "t.ptx"
    src.write_text(_ptx(instrs, counts))
    r = subprocess.run(["ptxas", "-arch=sm_90a", str(src), "-o", str(tmp_path / "t.cubin")],
                       capture_output=True, text=True)
    return r.returncode == 0, r.stderr


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas")
def test_every_form_assembles_and_near_misses_are_refused(tmp_path):
    ok, err = _assembles(tmp_path, [f.instr for f in MMA_SYNC_FORMS], [_counts(f) for f in MMA_SYNC_FORMS])
    assert ok, err
    for op in NEAR_MISSES:
        ok, err = _assembles(tmp_path, [op], [_counts(_unchecked(op))])
        assert not ok and "mma" in err, op     # refused for the instruction, with registers sized for it


def test_table_counts_and_parse_errors():
    assert len(MMA_SYNC_FORMS) == 94 and len({f.instr for f in MMA_SYNC_FORMS}) == 94
    for f in MMA_SYNC_FORMS:
        assert parse_mma_sync(f.instr) is f
    for op in NEAR_MISSES:
        with pytest.raises(FormError) as e:
            parse_mma_sync(op)
        assert "\n" not in str(e.value) and op in str(e.value)
    with pytest.raises(FormError, match="sm_120a"):
        parse_mma_sync("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32")


# ----------------------------------------------------------------------------- layouts


@pytest.mark.parametrize("form", MMA_SYNC_FORMS, ids=lambda f: f.name)
def test_fragments_cover_each_element_once_and_round_trip(form):
    rng = np.random.default_rng(7)
    for op, t in zip("abcd", (form.dtype_a, form.dtype_b, form.dtype_c, form.dtype_d)):
        p, r, c = mf.fragment_layout(form, op)
        shape = mf.matrix_shape(form, op)
        seen = np.zeros(shape, int)
        np.add.at(seen, (p, r, c) if form.quad_pair else (r, c), 1)
        assert (seen == 1).all()
        bits = mf.TYPE_BITS[t]
        codes = rng.integers(0, 2 ** min(bits, 63), size=(2,) + shape, dtype=np.uint64)
        regs = mf.pack(form, op, from_codes(codes, t))
        assert regs.shape == (2, 32, {"a": form.a_regs, "b": form.b_regs, "c": form.c_regs, "d": form.d_regs}[op])
        assert (element_codes(mf.unpack(form, op, regs), t) == codes).all()


def test_fragment_spot_values_from_the_ptx_figures():
    f = parse_mma_sync("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    p, r, c = mf.fragment_layout(f, "a")       # lane 5: g=1, t=1; a4, a5 (register 2) at row 1, cols 10, 11
    assert (r[5, 4], c[5, 4], r[5, 5], c[5, 5]) == (1, 10, 1, 11)
    p, r, c = mf.fragment_layout(f, "d")       # c2 of lane 6: row g+8 = 9, col 2t = 4
    assert (r[6, 2], c[6, 2]) == (9, 4)
    q = parse_mma_sync("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32")
    p, r, c = mf.fragment_layout(q, "d")       # lane 21: quad pair 1, high half: f32 c0 at row 1 + 4, col 0
    assert (p[21, 0], r[21, 0], c[21, 0]) == (1, 5, 0)
    assert (p[5, 7], r[5, 7], c[5, 7]) == (1, 3, 5)   # lane 5, c7: row 1 + 2, col 4 + 0 + 1


# ----------------------------------------------------------------------------- numerics


def _draw(form, tiles, seed):
    from refmodel.verify.seeded_mma import generate, typed

    return typed(form, generate(form, seed, MMA_SYNC_FORMS.index(form), tiles))


@pytest.mark.parametrize("form", [f for f in MMA_SYNC_FORMS if f.family in ("int8", "int4", "b1")], ids=lambda f: f.name)
def test_integer_forms_are_the_exact_dot_product_wrapped_or_clamped(form):
    a, b, c = _draw(form, 14, 3)
    ex = [[int(c[p, m, n]) + sum(int(a[p, m, k]) * int(b[p, k, n]) if form.bitop != "xor"
                                 else int(a[p, m, k]) ^ int(b[p, k, n]) for k in range(form.k))
           for n in range(8)] for p in range(a.shape[0]) for m in range(form.m)]
    ex = np.array(ex, dtype=object).reshape(c.shape)
    want = np.vectorize(lambda v: max(-2 ** 31, min(2 ** 31 - 1, v)) if form.satfinite
                        else (v + 2 ** 31) % 2 ** 32 - 2 ** 31, otypes=[np.int64])(ex)
    got = mma_sync(form.instr, a, b, c)
    assert got.dtype == np.int32 and (got.astype(np.int64) == want).all()
    assert (ex != (ex + 2 ** 31) % 2 ** 32 - 2 ** 31).any(), "the draw should overflow somewhere"


def _f64_chain_reference(a, b, c):
    out = np.empty(c.shape, np.uint64)
    A, B, C = (np.ascontiguousarray(x).view(np.uint64) for x in (a, b, c))
    for p, m, n in np.ndindex(c.shape):
        d = int(C[p, m, n])
        for k in range(a.shape[-1]):
            d = fma64_reference(int(A[p, m, k]), int(B[p, k, n]), d)
        out[p, m, n] = d
    return out


@pytest.mark.parametrize("form", [f for f in MMA_SYNC_FORMS if f.family == "f64"], ids=lambda f: f.name)
def test_f64_forms_are_a_k_order_fma_chain(form):
    a, b, c = _draw(form, 21, 4)
    got = np.ascontiguousarray(mma_sync(form.instr, a, b, c)).view(np.uint64)
    assert (got == _f64_chain_reference(a, b, c)).all()


def _adversarial64(rng, n):
    x = rng.integers(0, 2 ** 64, n, dtype=np.uint64)
    kind = rng.integers(0, 7, n)
    sign = x & np.uint64(1 << 63)
    frac = x & np.uint64((1 << 52) - 1)
    exp = lambda e: np.asarray(e, np.uint64) << np.uint64(52)   # noqa: E731
    x = np.where(kind == 1, sign | frac | exp(993 + rng.integers(0, 60, n)), x)    # near 1
    x = np.where(kind == 2, sign | frac, x)                                          # subnormal
    x = np.where(kind == 3, sign | frac | exp(rng.integers(1, 40, n)), x)            # tiny normal
    x = np.where(kind == 4, sign, x)                                                 # zero
    x = np.where(kind == 5, sign | exp(2047), x)                                     # infinity
    x = np.where(kind == 6, sign | frac | exp(2046 - rng.integers(0, 4, n)), x)      # huge
    return x


def test_fma64_is_correctly_rounded_against_integer_arithmetic():
    rng = np.random.default_rng(11)
    n = 60000
    a, b, c = (_adversarial64(rng, n) for _ in range(3))
    with np.errstate(all="ignore"):
        cancel = (-(a.view(np.float64) * b.view(np.float64))).view(np.uint64)
    c = np.where(rng.random(n) < 0.25, cancel, c)               # near-total cancellation
    got = fma64(a, b, c)
    want = np.array([fma64_reference(int(x), int(y), int(z)) for x, y, z in zip(a, b, c)], np.uint64)
    assert (got == want).all()
    # the reference itself against Python's exact rationals on the finite, non-zero sums
    from fractions import Fraction
    import math

    checked = 0
    for x, y, z, w in zip(a[:4000].view(np.float64), b[:4000].view(np.float64), c[:4000].view(np.float64), want[:4000]):
        if not all(math.isfinite(v) for v in (x, y, z)):
            continue
        r = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        if r == 0:
            continue
        try:
            f = r.numerator / r.denominator
        except OverflowError:
            f = math.inf if r > 0 else -math.inf
        assert np.float64(f).view(np.uint64) == w
        checked += 1
    assert checked > 1000


def test_fma64_nan_rules():
    qnan_a, qnan_b = 0x7FF8000000000001, 0xFFF8000000000002
    snan_c = 0x7FF0000000000003
    one, inf, zero = 0x3FF0000000000000, 0x7FF0000000000000, 0
    assert int(fma64(qnan_a, qnan_b, one)) == qnan_b                  # b before a
    assert int(fma64(qnan_a, one, snan_c)) == snan_c | (1 << 51)      # the accumulator before a, quieted
    assert int(fma64(inf, zero, one)) == DEFAULT_NAN
    assert int(fma64(inf, one, inf | (1 << 63))) == DEFAULT_NAN
    assert int(fma64(zero | (1 << 63), one, zero | (1 << 63))) == 1 << 63   # -0 + -0 = -0
    assert int(fma64(one, one, one | (1 << 63))) == 0                 # exact cancellation: +0


@pytest.mark.parametrize("form", [f for f in MMA_SYNC_FORMS if f.family in ("f16", "bf16", "tf32")],
                         ids=lambda f: f.name)
def test_hmma_forms_equal_the_wgmma_fused_dot(form):
    """One HMMA is the wgmma accumulator of the same types over the instruction's K (established on the
    H200 for both; the fixtures hold it): rows placed in a 64-row wgmma tile give the same D."""
    from refmodel.numerics.accumulate import BINDING
    from refmodel.numerics.wgmma import wgmma

    a, b, c = _draw(form, 12, 5)
    got = mma_sync(form.instr, a, b, c)
    for p in range(a.shape[0]):
        A = np.zeros((64, form.k), a.dtype)
        A[:16] = a[p]
        C = np.zeros((64, 8), c.dtype)
        C[:16] = c[p]
        instr = f"wgmma.mma_async.sync.aligned.m64n8k{ {'tf32': 8}.get(form.family, 16) }.{form.dtype_d}.{form.dtype_a}.{form.dtype_b}"
        p_ = BINDING[(form.family, form.dtype_d)]
        if form.k == {"tf32": 8}.get(form.family, 16):
            want = wgmma(instr, A, b[p], C)[:16]
            assert (element_codes(got[p], form.dtype_d) == element_codes(want, form.dtype_d)).all()
        else:   # half K: the wgmma of K with the upper half zero is not the same (zeros join e_max); use fdpa
            from refmodel.numerics.accumulate import fdpa
            from refmodel.numerics.wgmma import operand_spec, operand_values

            av = operand_values(a[p], form.dtype_a, p_)[:, None, :]
            bv = np.swapaxes(operand_values(b[p], form.dtype_b, p_), 0, 1)[None, :, :]
            with np.errstate(all="ignore"):
                want = fdpa(av, bv, c[p].astype(np.float64), p_, operand_spec(form.dtype_a, p_),
                            operand_spec(form.dtype_b, p_))
            assert (element_codes(got[p], form.dtype_d) == element_codes(want, form.dtype_d)).all()


@pytest.mark.parametrize("form", [f for f in MMA_SYNC_FORMS if f.family == "fp8"], ids=lambda f: f.name)
def test_fp8_forms_follow_the_f16_hmma_pair_then_fadd(form):
    """The readable formula of the lowering: f16 fdpa over k mod 4 in {0,1} from +0, chained over {2,3},
    then C added with one rounding, NaN canonical."""
    from refmodel.numerics.accumulate import BINDING, fdpa
    from refmodel.numerics.formats import F16

    a, b, c = _draw(form, 14, 6)
    p = BINDING[("f16", form.dtype_d)]
    k = np.arange(form.k)
    g1, g2 = k[k % 4 < 2], k[k % 4 >= 2]
    av = a.astype(np.float64)[:, :, None, :]
    bv = np.swapaxes(b.astype(np.float64), -1, -2)[:, None, :, :]
    dt = np.float16 if form.dtype_d == "f16" else np.float32
    with np.errstate(all="ignore"):
        t = fdpa(av[..., g1], bv[..., g1], np.zeros(c.shape), p, F16, F16)
        t = fdpa(av[..., g2], bv[..., g2], t.astype(np.float64), p, F16, F16)
        want = (t.astype(dt) + c.astype(dt)).astype(dt)
    wbits = element_codes(want, form.dtype_d)
    wbits[np.isnan(want)] = 0x7FFF if dt == np.float16 else 0x7FFFFFFF
    assert (element_codes(mma_sync(form.instr, a, b, c), form.dtype_d) == wbits).all()


def test_quad_pair_fp32_code_by_hand():
    """m8n8k4 f32: t = +0, four FFMAs, then C; checked on one element with exact rationals."""
    form = parse_mma_sync("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32")
    a = np.zeros((4, 8, 4), np.float16)
    b = np.zeros((4, 4, 8), np.float16)
    c = np.zeros((4, 8, 8), np.float32)
    a[2, 3] = [1.0, 2.0 ** -12, -1.0, 2.0 ** -12]
    b[2, :, 5] = [1.0, 2.0 ** -12, 1.0, 2.0 ** -12]
    c[2, 3, 5] = -0.0
    d = mma_sync(form.instr, a, b, c)
    # t = 1, then 1 + 2^-24 rounds to 1 (tie to even), then 0, then 2^-24: sequential, not fused (fused: 2^-23)
    assert d[2, 3, 5] == np.float32(2.0 ** -24)
    assert np.count_nonzero(d) == 1


def test_bad_inputs_are_one_sentence():
    f = "mma.sync.aligned.m16n8k32.row.col.s32.s4.s4.s32"
    with pytest.raises(InputError, match="s4 values must lie in -8..7"):
        mma_sync(f, np.full((16, 32), 9, np.int8), np.zeros((32, 8), np.int8))
    with pytest.raises(InputError, match=r"shape \(\.\.\., 16, 32\)"):
        mma_sync(f, np.zeros((16, 16), np.int8), np.zeros((32, 8), np.int8))


# ----------------------------------------------------------------------------- fixtures


def _entry():
    from refmodel.verify.fixtures import default_root, load_arrays, load_manifest

    d = default_root() / "mma_sync"
    e = next(e for e in load_manifest(d)["entries"] if e["kind"] == "mma_sync_forms")
    return e, load_arrays(d, e)


def test_fixture_replays_with_no_mismatch_and_covers_every_form():
    from refmodel.verify.replay_mma_sync import replay_mma_sync

    e, arrays = _entry()
    assert set(e["meta"]["instrs"]) == {f.instr for f in MMA_SYNC_FORMS}
    assert e["provenance"]["device"].startswith("NVIDIA H")
    r = replay_mma_sync(e["meta"], arrays)
    assert r.mismatches == 0 and r.cases == e["cases"] + arrays["raw32"].size + arrays["raw64"].size


def test_fixture_replay_catches_a_changed_digest_and_a_changed_code():
    from refmodel.verify.replay_mma_sync import replay_mma_sync

    e, arrays = _entry()
    meta = dict(e["meta"], instrs=e["meta"]["instrs"][:1])          # first form only, with its own arrays
    form = parse_mma_sync(meta["instrs"][0])
    nraw = meta["raw_problems"] * form.m * form.n
    part = {"hw_sha256": arrays["hw_sha256"][:1].copy(), "raw32": arrays["raw32"][:nraw].copy(),
            "raw64": np.zeros(0, np.uint64)}
    assert replay_mma_sync(meta, part).mismatches == 0
    part["hw_sha256"][0, 1, 3, 0] ^= 1
    assert replay_mma_sync(meta, part).mismatches > 0
    part["hw_sha256"] = arrays["hw_sha256"][:1].copy()
    part["raw32"][5] ^= 1
    assert replay_mma_sync(meta, part).mismatches == 1


# ----------------------------------------------------------------------------- hardware


@pytest.mark.gpu
def test_h200_runs_every_form_like_the_model():
    from gpu.kernels.runtime import gpu_available

    if not gpu_available():
        pytest.skip("needs a GPU")
    from gpu.kernels.mma_sync import run_mma_sync

    bad = []
    for form in MMA_SYNC_FORMS:
        a, b, c = _draw(form, 70, 99)
        hw = element_codes(run_mma_sync(form.instr, a, b, c), form.dtype_d)
        model = element_codes(mma_sync(form.instr, a, b, c), form.dtype_d)
        if (hw != model).any():
            bad.append((form.name, int((hw != model).sum())))
    assert not bad


def test_cli_layout_mma_sync_lookups():
    import json

    from tests.cli_harness import run_cli

    form = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"
    rc, out, err = run_cli(["layout", "mma-sync", "--form", form, "--at", "9,21", "--json"])
    assert rc == 0 and json.loads(out) == {"lane": 5, "register": 3, "slot": 1, "bits": [15, 8]}
    rc, out, err = run_cli(["layout", "mma-sync", "--form", "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32",
                            "--operand", "d", "--thread", "21", "--json"])
    assert rc == 0 and json.loads(out)[0] == {"problem": 1, "row": 5, "col": 0, "register": 0, "slot": 0}
    rc, out, err = run_cli(["layout", "mma-sync", "--form", form.replace("k32", "k64")])
    assert rc == 2 and "shapes m16n8k16, m16n8k32" in err and err.count("\n") == 1
