"""The CuTe bridge (refmodel.layouts.cute): every printed CuTe layout, evaluated element by element,
gives what refmodel's layouts give — by our own evaluator, and by pycute (NVIDIA's Python CuTe,
shipped in the nvidia-cutlass wheel) as a peer oracle.  CUTLASS's own definitions
(CLayout_64xN, ALayout_64x*, the GMMA smem atoms, the ldmatrix/stmatrix copy traits, quoted
from their headers) are evaluated by pycute against refmodel too."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from refmodel.errors import InputError
from refmodel.layouts.cute import (KIND_OPTIONS, NO_CUTE_FORM, CuteLayout, a_frag_layout, acc_layout, atom_layout, crd2idx,
                                   cute_layout, desc_layout, epilogue_layout, layout_for, matrix_layout, smem_layout, swizzle_layout)
from refmodel.layouts.descriptor import MatrixDescriptor, operand_addresses
from refmodel.layouts.fragment import ACC_NS, a_fragment_layout, accumulator_layout
from refmodel.layouts.smem import SmemLayout, dense_strides, rowmajor_offsets
from refmodel.layouts.stmatrix import fragment_map
from refmodel.layouts.swizzle import MODES, atom_table, swizzle_address

try:
    import pycute
except ImportError:  # pragma: no cover - the venv has it
    pycute = None

needs_pycute = pytest.mark.skipif(pycute is None, reason="pycute not importable; install it with "
                                                         "`pip install nvidia-cutlass` (it ships pycute)")

A_DTYPES = ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8")


# ----------------------------------------------------------------------------- the cases

def _smem_cases():
    """(major, mode, elem bytes, rows, k, lbo, sbo): every canonical major x swizzle x element size,
    several tile sizes and non-dense strides (None = dense)."""
    out = []
    for m in MODES:
        for e in (1, 2, 4):
            t = 16 // e
            for rows in (8, 64, 128):
                for k in ({m.width // e if m.bits else 32 // e, t, 64 // e} if m.bits == 0 else
                          {m.width // e, 32 // e}):
                    out.append(("K", m.name, e, rows, k, None, None))
            out.append(("K", m.name, e, 64, 32 // e, 256, 2048))           # padded strides
    for m in MODES:
        for rows in (8, 24, 64, 72, 128, 256):
            for k in (8, 16, 32):
                out.append(("MN", m.name, 2, rows, k, None, None))
        dl, ds = dense_strides("MN", m, 128)
        out.append(("MN", m.name, 2, 128, 16, ds, dl))                     # LBO/SBO swapped: still a layout
    return out


SMEM_CASES = _smem_cases()


def _case_id(c):
    return "-".join(str(x) for x in c)


def _model_bytes(major, mode, e, rows, k, lbo, sbo) -> np.ndarray:
    """(rows, k) byte address of each element's first byte: SmemLayout offsets, then the swizzle."""
    dl, ds = dense_strides(major, mode, rows, k * e if major == "K" else None)
    lay = SmemLayout(major, mode, e, dl if lbo is None else lbo, ds if sbo is None else sbo)
    return np.asarray(swizzle_address(lay.offsets(rows, k), mode))[:, ::e]


def _grid(rows, k):
    return np.meshgrid(np.arange(rows), np.arange(k), indexing="ij")


def _pycute(lay: CuteLayout):
    """pycute's Layout of the same shape:stride, composed with the element-unit swizzle."""
    el = lay.element_form()
    L = pycute.Layout(el.shape, el.stride)
    if el.swizzle is None:
        return L
    return pycute.ComposedLayout(pycute.Swizzle(*el.swizzle), el.offset, L)


def _both(msg_a, a, b):
    bad = np.argwhere(np.asarray(a) != np.asarray(b))
    assert not bad.size, f"{msg_a}: first mismatch at {tuple(bad[0])}: {np.asarray(a)[tuple(bad[0])]} vs " \
                         f"{np.asarray(b)[tuple(bad[0])]} ({len(bad)} in all)"


# ----------------------------------------------------------------------------- shared memory

@pytest.mark.parametrize("case", SMEM_CASES, ids=_case_id)
def test_smem_layout_gives_the_model_bytes_on_every_element(case):
    major, mode, e, rows, k, lbo, sbo = case
    lay = smem_layout(major, mode, e, rows, k, lbo, sbo)
    assert lay.size == rows * k or (major == "MN" and lay.size > rows)   # partial MN block: bigger domain
    r, c = _grid(rows, k)
    _both(str(lay), lay((r, c)), _model_bytes(*case))
    # the pure element form (Swizzle<B, 4 - log2 e, 3>) is the same map
    el = lay.element_form()
    _both("element form", e * np.asarray(el((r, c))), _model_bytes(*case))


@needs_pycute
@pytest.mark.parametrize("case", SMEM_CASES, ids=_case_id)
def test_pycute_evaluates_the_smem_layout_to_the_model_bytes(case):
    major, mode, e, rows, k, lbo, sbo = case
    pl = _pycute(smem_layout(major, mode, e, rows, k, lbo, sbo))
    got = np.array([[e * pl((r, c)) for c in range(k)] for r in range(rows)])
    _both(str(pl), got, _model_bytes(*case))


DESCS = [MatrixDescriptor(0x400, 16, 1024, 0, 1), MatrixDescriptor(0x420, 16, 1024, 0, 1),
         MatrixDescriptor(0x480, 16, 1024, 1, 1), MatrixDescriptor(0x480, 16, 1024, 0, 1),
         MatrixDescriptor(0x1000, 128, 256, 0, 0), MatrixDescriptor(0x200, 16, 512, 0, 2),
         MatrixDescriptor(0x300, 16, 256, 0, 3), MatrixDescriptor(0x2000, 1024, 2048, 0, 1),
         MatrixDescriptor(0x2000, 2048, 1024, 0, 1), MatrixDescriptor(0x1a00, 64, 512, 5, 1)]


@pytest.mark.parametrize("d", DESCS, ids=lambda d: f"{d.encode():#x}")
@pytest.mark.parametrize("dtype,major", [("f16", "K"), ("e4m3", "K"), ("tf32", "K"), ("bf16", "MN")])
def test_desc_layout_gives_the_addresses_the_hardware_reads(d, dtype, major):
    e = {"f16": 2, "bf16": 2, "e4m3": 1, "tf32": 4}[dtype]
    rows, k = (128, 16) if major == "MN" else (64, 32 // e)
    lay = desc_layout(d.encode(), dtype, rows, k, major)
    r, c = _grid(rows, k)
    want = operand_addresses(d, rows, k, e, major=major)[:, ::e]
    _both(str(lay), lay((r, c)), want)
    if pycute is not None and not lay.anchor:
        pl = _pycute(lay)
        _both("pycute", np.array([[e * pl((i, j)) for j in range(k)] for i in range(rows)]), want)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("dtype", ["f16", "e4m3", "tf32"])
def test_swizzle_layout_is_the_model_swizzle_and_its_atom_table(mode, dtype):
    e = {"f16": 2, "e4m3": 1, "tf32": 4}[dtype]
    lay = swizzle_layout(mode.name, dtype, 16)
    r, i = np.meshgrid(np.arange(16), np.arange(128 // e), indexing="ij")
    _both(str(lay), lay((r, i)), swizzle_address(r * 128 + i * e, mode))
    atoms = (np.asarray(lay((r[:, ::16 // e], i[:, ::16 // e]))) % 128) // 16
    _both("atom table", atoms, atom_table(mode, 16))
    if pycute is not None:
        pl = _pycute(lay)
        _both("pycute", e * np.array([[pl((a, b)) for b in range(128 // e)] for a in range(16)]),
              swizzle_address(r * 128 + i * e, mode))


# CUTLASS cute/atom/mma_traits_sm90_gmma.hpp, "GMMA layouts in units of bits": (shape, stride) of the
# layout part of Layout_{MN,K}_{INTER,SW32,SW64,SW128}_Atom_Bits; the swizzle is Swizzle<B,4,3>.
CUTLASS_ATOM_BITS = {
    ("MN", 0): ((128, 8), (1, 128)), ("MN", 1): ((256, 8), (1, 256)),
    ("MN", 2): ((512, 8), (1, 512)), ("MN", 3): ((1024, 8), (1, 1024)),
    ("K", 0): ((8, 128), (128, 1)), ("K", 1): ((8, 256), (256, 1)),
    ("K", 2): ((8, 512), (512, 1)), ("K", 3): ((8, 1024), (1024, 1)),
}


@needs_pycute
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("major,e", [("K", 1), ("K", 2), ("K", 4), ("MN", 2)])
def test_cutlass_gmma_atoms_tiled_by_pycute_are_the_dense_canonical_layout(mode, major, e):
    """upcast<8e>(Layout_*_Atom_Bits), tiled over a 64 x K tile with pycute's logical_product (K-major:
    along K first, then rows; MN-major: along MN first, then K) = refmodel's dense packing."""
    (s0, s1), (d0, d1) = CUTLASS_ATOM_BITS[(major, mode.bits)]
    bits = 8 * e
    if major == "K":   # upcast the contiguous (K) mode from bits to elements
        atom = pycute.Layout((s0, s1 // bits), (d0 // bits, d1))
    else:
        atom = pycute.Layout((s0 // bits, s1), (d0, d1 // bits))
    ar, ak = pycute.size(atom.shape[0]), pycute.size(atom.shape[1])
    rows = 64 if major == "K" else max(64, ar)
    k = (2 * ak if mode.bits == 0 else ak) if major == "K" else 16
    nr, nk = rows // ar, k // ak
    order = pycute.Layout((nk, nr)) if major == "K" else pycute.Layout((nr, nk))
    tiled = pycute.logical_product(atom, order)
    sw = pycute.Swizzle(mode.bits, 4 - (e.bit_length() - 1), 3)
    got = np.zeros((rows, k), dtype=np.int64)
    for r in range(rows):
        for c in range(k):
            blk = (c // ak, r // ar) if major == "K" else (r // ar, c // ak)
            got[r, c] = e * sw(tiled((r % ar, c % ak), blk))
    _both(f"{major} {mode.name} atom {atom} tiled {tiled}", got, _model_bytes(major, mode.name, e, rows, k, None, None))
    # and our layout of the same tile names the CUTLASS atom
    assert smem_layout(major, mode.name, e, rows, k).atom.startswith(f"GMMA::Layout_{major}_")


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("major,e", [("K", 1), ("K", 2), ("K", 4), ("MN", 2)])
def test_atom_layout_is_the_cutlass_atom_upcast_and_the_model(mode, major, e):
    """atom_layout = upcast<8e>(Layout_*_Atom_Bits) (the contiguous mode divided by the element
    bits), and it gives the model's bytes on every element of the atom."""
    (s0, s1), (d0, d1) = CUTLASS_ATOM_BITS[(major, mode.bits)]
    bits = 8 * e
    want = ((s0, s1 // bits), (d0 // bits, d1)) if major == "K" else ((s0 // bits, s1), (d0, d1 // bits))
    lay = atom_layout(major, mode.name, e)
    assert (lay.shape, lay.stride) == want
    assert lay.atom == f"GMMA::Layout_{major}_{('INTER', 'SW32', 'SW64', 'SW128')[mode.bits]}_Atom<uint{bits}_t>"
    rows, k = lay.shape
    r, c = _grid(rows, k)
    _both(str(lay), lay((r, c)), _model_bytes(major, mode.name, e, max(rows, 8), k, None, None)[:rows])


EPILOGUE_CASES = [(n, d, m.name) for m in MODES for d in ("bf16", "f16") for n in range(16, 257, 16)
                  if not m.bits or (2 * n) % m.width == 0]


@pytest.mark.parametrize("n,dtype,mode", EPILOGUE_CASES, ids=lambda x: str(x))
def test_epilogue_layout_is_the_stored_tile(n, dtype, mode):
    lay = epilogue_layout(n, dtype, mode)
    want = rowmajor_offsets(64, n, 2, mode)
    r, c = _grid(64, n)
    _both(str(lay), lay((r, c)), want)
    if pycute is not None:
        pl = _pycute(lay)
        _both("pycute", 2 * np.array([[pl((i, j)) for j in range(n)] for i in range(64)]), want)
        m = next(x for x in MODES if x.name == mode)
        if m.bits:   # CUTLASS: tile_to_shape(Layout_K_SW*_Atom<T>, (64, N)) = the atom repeated down, then across
            (s0, s1), (d0, d1) = CUTLASS_ATOM_BITS[("K", m.bits)]
            atom = pycute.Layout((s0, s1 // 16), (d0 // 16, d1))
            w = s1 // 16
            tiled = pycute.logical_product(atom, pycute.Layout((8, n // w)))
            sw = pycute.Swizzle(m.bits, 3, 3)
            got = np.array([[2 * sw(tiled((i % 8, j % w), (i // 8, j // w))) for j in range(n)] for i in range(64)])
            _both(f"tile_to_shape {tiled}", got, want)


def test_epilogue_refuses_what_the_model_refuses():
    with pytest.raises(InputError, match="multiple of 64 bytes"):
        epilogue_layout(16, "bf16", "64B")
    with pytest.raises(InputError, match="f16 or bf16"):
        epilogue_layout(64, "f32", "128B")


# ----------------------------------------------------------------------------- thread-value layouts

def _tv_model(rows, cols):
    """(threads, values) index row + 64*col; value v = register * per + slot."""
    return (rows + 64 * cols).reshape(rows.shape[0], -1)


def _tv_eval(lay, threads, values):
    t, v = np.meshgrid(np.arange(threads), np.arange(values), indexing="ij")
    return np.asarray(lay((t, v)))


ACC_CASES = [(n, d) for d in ("f32", "s32", "f16") for n in range(8, 257, 8)]


@pytest.mark.parametrize("n,dtype", ACC_CASES, ids=lambda x: str(x))
def test_acc_layout_gives_the_model_fragment(n, dtype):
    rows, cols = accumulator_layout(n, dtype)
    lay = acc_layout(n, dtype)
    want = _tv_model(rows, cols)
    _both(str(lay), _tv_eval(lay, 128, n // 2), want)
    assert np.array_equal(np.sort(want.ravel()), np.arange(64 * n))   # every element exactly once
    assert bool(lay.notes) == (n not in ACC_NS[dtype])                 # the no-form note, only when true
    # CUTLASS's CLayout_64xN<N>, quoted from mma_traits_sm90_gmma.hpp: the same shape:stride
    assert (lay.shape, lay.stride) == (((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512)))
    if pycute is not None and dtype != "s32":   # s32 is the f32 map (asserted above)
        pl = pycute.Layout(lay.shape, lay.stride)
        _both("pycute CLayout_64xN", np.array([[pl(t, v) for v in range(n // 2)] for t in range(128)]), want)


# CUTLASS mma_traits_sm90_gmma.hpp: register-source A layouts (ALayout_64x16 = CLayout_64x16)
CUTLASS_ALAYOUT = {
    4: ("ALayout_64x8", ((4, 8, 4), (2, 2)), ((64, 1, 16), (8, 256))),
    2: ("ALayout_64x16", ((4, 8, 4), (2, 2, 2)), ((128, 1, 16), (64, 8, 512))),
    1: ("ALayout_64x32", ((4, 8, 4), (4, 2, 2)), ((256, 1, 16), (64, 8, 1024))),
}


@pytest.mark.parametrize("dtype", A_DTYPES)
def test_a_frag_layout_gives_the_model_fragment(dtype):
    rows, cols = a_fragment_layout(dtype)
    lay = a_frag_layout(dtype)
    want = _tv_model(rows, cols)
    nv = want.shape[1]
    _both(str(lay), _tv_eval(lay, 128, nv), want)
    e = {1: 4, 2: 2, 4: 1}[rows.shape[-1]]
    name, shape, stride = CUTLASS_ALAYOUT[e]
    assert lay.atom == f"GMMA::{name}" and (lay.shape, lay.stride) == (shape, stride)
    if pycute is not None:
        for L in (pycute.Layout(lay.shape, lay.stride), pycute.Layout(shape, stride)):
            _both(f"pycute {L}", np.array([[L(t, v) for v in range(nv)] for t in range(128)]), want)


# CuTe copy traits (copy_traits_sm75.hpp / sm90.hpp): the register-side (thread, bit) layouts of
# the .b16 ldmatrix (DstLayout) / stmatrix (SrcLayout); the same for both instructions.
def _trait_bits(num: int, trans: bool):
    if not trans:   # SM75_U32x{1,2,4}_LDSM_N / SM90_U32x{1,2,4}_STSM_N
        return ((32, (32, num)), (32, (1, 1024))) if num > 1 else ((32, 32), (32, 1))
    # SM75_U16x{2,4,8}_LDSM_T / SM90_U16x{2,4,8}_STSM_T
    return ((4, 8), (16, 2, num)), ((256, 16), (1, 128, 1024))


MATRIX_CASES = [(op, num, trans) for op in ("ldmatrix", "stmatrix") for num in (1, 2, 4) for trans in (False, True)]


@pytest.mark.parametrize("op,num,trans", MATRIX_CASES, ids=lambda x: str(x))
def test_matrix_layout_gives_the_model_holders(op, num, trans):
    mat, row, col = fragment_map(num, trans)
    want = (64 * mat + 8 * row + col).reshape(32, -1)
    lay = matrix_layout(op, num, trans)
    _both(str(lay), _tv_eval(lay, 32, 2 * num), want)
    assert np.array_equal(np.sort(want.ravel()), np.arange(64 * num))
    assert lay.atom.startswith("SM75_" if op == "ldmatrix" else "SM90_")
    assert lay.atom.endswith("_T" if trans else "_N")
    if pycute is not None:
        pl = pycute.Layout(lay.shape, lay.stride)
        _both("pycute", np.array([[pl(t, v) for v in range(2 * num)] for t in range(32)]), want)
        shape, stride = _trait_bits(num, trans)
        tb = pycute.Layout(shape, stride)   # bits: value 16-bit element v starts at bit 16 v
        _both(f"CuTe trait {tb}", np.array([[tb(t, 16 * v) for v in range(2 * num)] for t in range(32)]),
              16 * want)


# ----------------------------------------------------------------------------- printing

def test_the_issue_examples_print_exactly():
    k128 = smem_layout("K", "128B", "f16", 64, 64)
    assert k128.template == "Swizzle<3,4,3> o ((8,m),(T,2k)):((8T,SBO),(1,T))"
    assert str(k128) == "Swizzle<3,4,3> o ((8,8),(8,8)):((64,512),(1,8))"      # T = 8, m = 8, 2k = 8
    acc = acc_layout(64, "f32")
    assert acc.template == "((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))"
    assert str(acc) == "((4,8,4),(2,2,8)):((128,1,16),(64,8,512))"
    assert acc.atom == "GMMA::CLayout_64xN<64>"
    assert k128.atom == "GMMA::Layout_K_SW128_Atom<half_t>"
    # CUTLASS's make_gmma_desc comment forms for the other modes
    assert smem_layout("K", "none", "f16", 64, 16).template == "Swizzle<0,4,3> o ((8,m),(T,2k)):((1T,SBO),(1,LBO))"
    assert smem_layout("MN", "128B", "f16", 128, 16).template == "Swizzle<3,4,3> o ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))"
    assert smem_layout("MN", "none", "f16", 64, 16).template == "Swizzle<0,4,3> o ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))"


def test_filled_in_strides_are_the_descriptor_fields():
    """T, m, k and LBO/SBO (in elements) appear where the CUTLASS form puts them."""
    for e in (1, 2, 4):
        t = 16 // e
        lay = smem_layout("K", "none", e, 64, 32 // e, lbo=256, sbo=1024)
        assert (lay.shape, lay.stride) == (((8, 8), (t, 2)), ((t, 1024 // e), (1, 256 // e)))
        lay = smem_layout("K", "128B", e, 64, 128 // e)
        assert (lay.shape, lay.stride) == (((8, 8), (t, 8)), ((8 * t, 1024 // e), (1, t)))
    lay = smem_layout("MN", "64B", "f16", 128, 16)
    assert (lay.shape, lay.stride) == (((8, 4, 4), (8, 2)), ((1, 8, 256), (32, 1024)))   # LBO 512 B, SBO 2048 B


def test_desc_prints_its_start_and_base_offset():
    assert str(desc_layout(MatrixDescriptor(0x400, 16, 1024, 0, 1).encode())).startswith(
        "Swizzle<3,4,3> o smem_ptr[16b](0x400) o ((8,8),(8,2))")
    s = str(desc_layout(MatrixDescriptor(0x480, 16, 1024, 1, 1).encode()))
    assert s.startswith("0x80 + Swizzle<3,4,3> o smem_ptr[16b](0x400) o ")


def test_crd2idx_follows_cute_colexicographic_rules():
    shape, stride = ((2, 3), 4), ((1, 2), 6)
    # integer for the whole shape: colex over (2, 3, 4); the last mode takes the rest
    assert [crd2idx(i, shape, stride) for i in range(6)] == [0, 1, 2, 3, 4, 5]
    assert crd2idx(6, shape, stride) == 6 and crd2idx(24, shape, stride) == 24
    assert crd2idx((5, 1), shape, stride) == 1 + 2 * 2 + 6
    if pycute is not None:
        L = pycute.Layout(shape, stride)
        assert all(L(i) == crd2idx(i, shape, stride) for i in range(24))
        assert all(L((i, j)) == crd2idx((i, j), shape, stride) for i in range(6) for j in range(4))


@needs_pycute
def test_evaluator_agrees_with_pycute_on_random_layouts():
    """Random nested shapes/strides and swizzles: our CuteLayout == pycute on every coordinate (1-D and per mode)."""
    rng = np.random.default_rng(2024)

    def mode(depth):
        if depth == 0 or rng.random() < 0.5:
            return int(rng.integers(1, 5)), int(rng.integers(0, 40))
        parts = [mode(depth - 1) for _ in range(int(rng.integers(1, 4)))]
        return tuple(p[0] for p in parts), tuple(p[1] for p in parts)

    for _ in range(100):
        modes = [mode(2) for _ in range(int(rng.integers(1, 4)))]
        shape, stride = tuple(m[0] for m in modes), tuple(m[1] for m in modes)
        if pycute.size(shape) > 1024:
            continue
        b = int(rng.integers(0, 4))
        sw = (b, int(rng.integers(0, 4)), int(rng.integers(max(b, 1), 5)))   # pycute recurses forever on S = 0
        off = int(rng.integers(0, 64))
        ours = CuteLayout(shape, stride, sw, None, off)
        ref = pycute.ComposedLayout(pycute.Swizzle(*sw), off, pycute.Layout(shape, stride))
        n = ours.size
        assert n == pycute.size(shape)
        assert [ours(i) for i in range(n)] == [ref(i) for i in range(n)], (shape, stride, sw)
        c0 = pycute.idx2crd(n - 1, shape)
        assert ours(c0) == ref(c0)


# ----------------------------------------------------------------------------- by kind

def test_kind_options_are_the_render_builders_options():
    from refmodel.render import BUILDERS

    for kind, builder in BUILDERS.items():
        assert tuple(inspect.signature(builder).parameters) == KIND_OPTIONS[kind], kind
    assert set(KIND_OPTIONS) == set(BUILDERS)


@pytest.mark.parametrize("kind", list(KIND_OPTIONS))
def test_cute_layout_of_every_kind_with_the_diagram_defaults(kind):
    from refmodel.render import BUILDERS

    params = inspect.signature(BUILDERS[kind]).parameters
    opts = {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty}
    if kind == "desc":
        opts["value"] = MatrixDescriptor(0x400, 16, 1024, 0, 1).encode()
    text = cute_layout(kind, **opts)
    if kind in NO_CUTE_FORM:
        assert text is None
        return
    assert text.startswith("CuTe: ") and str(layout_for(kind, **opts)) in text


def test_bad_input_is_one_clear_sentence():
    with pytest.raises(InputError, match="layout kind must be one of"):
        cute_layout("tma")
    with pytest.raises(InputError, match="takes no option 'swizzle'"):
        cute_layout("smem", swizzle="128B")
    with pytest.raises(InputError, match="MN-major"):
        smem_layout("MN", "128B", "e4m3", 64, 16)          # the model's rule: MN-major is f16/bf16 only
    with pytest.raises(InputError, match="N must be a multiple of 8"):
        acc_layout(12)
    with pytest.raises(InputError, match="same nesting"):
        CuteLayout((2, 2), 1)
    with pytest.raises(InputError, match="positive"):
        CuteLayout((2, 0), (1, 2))


# ----------------------------------------------------------------------------- the §15 claims of docs/fp8.md

def test_fp8_register_claims_hold_in_the_model():
    """tools/cute_doc.py's checks: every 8-bit A register is one aligned word of the 128B-swizzled
    K-major tile; ld.shared.b32 of those words and ldmatrix.x4.b16 both give pack_a_fragment; a
    .trans register on an MN-major byte tile is a 2 x 2 block.  The page says 'holds', never 'FAILS'."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import cute_doc

    checks = cute_doc.fp8_checks()
    assert checks and all(checks.values()), checks
    assert "FAILS" not in cute_doc.fp8_registers_md()
    svg = cute_doc.fp8_a_registers_svg()
    assert svg.startswith("<svg") and svg.count('class="panel"') == 2


def test_fp8_picture_is_current():
    """docs/img/fp8_a_registers.svg is what tools/cute_doc.py draws (python tools/gen_docs.py writes it)."""
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "tools"))
    import cute_doc

    assert (root / cute_doc.FP8_SVG).read_text(encoding="utf-8") == cute_doc.fp8_a_registers_svg(), \
        "run python tools/gen_docs.py"
