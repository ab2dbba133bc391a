"""Point lookups (refmodel.layouts.lookup, ``wgref layout/desc --at/--thread``) and the cvt wording.

Evidence besides the round trip at <-> thread over every element: the packers of the model
(pack_accumulator / pack_a_fragment / pack_meta of tagged matrices), the fragment formulas of
the PTX ISA written out again here, the diagrams' cells, and the descriptor's own operand
address arrays and tile images.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from refmodel.dtypes import element_bytes, from_bits
from refmodel.errors import InputError
from refmodel.layouts import lookup as lk
from refmodel.layouts.descriptor import make_descriptor, operand_addresses
from refmodel.layouts.fragment import ACC_NS, pack_a_fragment, pack_accumulator
from refmodel.layouts.smem import tile_image
from refmodel.layouts.sparse_meta import pack_meta
from wgref.cli import main

ROOT = Path(__file__).resolve().parent.parent
NS = tuple(range(8, 257, 8))


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


# ----------------------------------------------------------------------------- accumulator

@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_acc_at_and_thread_round_trip_every_element_of_every_n(dtype):
    for n in NS:
        seen = np.zeros((64, n), dtype=int)
        for t in range(128):
            entries = lk.acc_thread(n, dtype, t)
            assert len(entries) == n // 2
            for e in entries:
                assert len(e) == (4 if dtype == "f16" else 3)
                row, col, reg = e[:3]
                seen[row, col] += 1
                h = lk.acc_at(n, dtype, row, col)
                assert (h["thread"], h["register"], h["half"]) == (t, reg, e[3] if dtype == "f16" else None)
                assert (h["warp"], h["lane"]) == (t // 32, t % 32)
                # the PTX fragment formula, inverted by hand (a second derivation)
                i = 4 * (col // 8) + 2 * ((row % 16) // 8) + (col & 1)
                assert t == 32 * (row // 16) + 4 * (row % 8) + (col % 8) // 2
                assert (reg, e[3] if dtype == "f16" else 0) == ((i >> 1, i & 1) if dtype == "f16" else (i, 0))
        assert (seen == 1).all(), f"N={n}: every element held exactly once"


@pytest.mark.parametrize("dtype", ["f32", "s32", "f16"])
def test_acc_thread_agrees_with_pack_accumulator_of_an_index_matrix(dtype):
    for n in ACC_NS[dtype]:
        index = np.arange(64 * n, dtype=np.uint32).reshape(64, n)       # bits of D[r, c] = r*n + c
        regs = pack_accumulator(from_bits(index, dtype), dtype)
        for t in (0, 1, 5, 37, 64, 127):
            for row, col, reg, *half in lk.acc_thread(n, dtype, t):
                word = int(regs[t, reg])
                got = (word >> (16 * half[0])) & 0xFFFF if dtype == "f16" else word
                assert got == row * n + col, (n, t, row, col)


def test_acc_worked_examples_and_json_shape():
    assert lk.acc_at(64, "f32", 17, 2) == {"thread": 37, "warp": 1, "lane": 5, "register": 0, "half": None}
    assert lk.acc_at(64, "f16", 0, 1) == {"thread": 0, "warp": 0, "lane": 0, "register": 0, "half": 1}
    assert lk.acc_thread(8, "f16", 37)[:2] == [[17, 2, 0, 0], [17, 3, 0, 1]]


# ----------------------------------------------------------------------------- A fragment

@pytest.mark.parametrize("dtype", lk.A_DTYPES)
def test_a_frag_round_trip_and_pack_a_fragment(dtype):
    k = lk.a_frag_k(dtype)
    size = element_bytes(dtype)
    assert k * size == 32
    seen = np.zeros((64, k), dtype=int)
    r_idx, c_idx = np.indices((64, k), dtype=np.uint32)
    by_row = pack_a_fragment(from_bits(r_idx, dtype), dtype)   # every element's bits: its row
    by_col = pack_a_fragment(from_bits(c_idx, dtype), dtype)   # ... its column
    width, mask = 8 * size, (1 << 8 * size) - 1 if size < 4 else 0xFFFFFFFF
    for t in range(128):
        entries = lk.a_frag_thread(dtype, t)
        assert len(entries) == 16 // size
        for e in entries:
            row, col, reg = e[:3]
            slot = e[3] if size < 4 else 0
            assert len(e) == (3 if size == 4 else 4)
            seen[row, col] += 1
            assert (int(by_row[t, reg]) >> (width * slot)) & mask == row
            assert (int(by_col[t, reg]) >> (width * slot)) & mask == col
            h = lk.a_frag_at(dtype, row, col)
            assert (h["thread"], h["register"]) == (t, reg)
            assert h["half"] == (slot if size == 2 else None) and h["byte"] == (slot if size == 1 else None)
    assert (seen == 1).all()


# ----------------------------------------------------------------------------- ldmatrix / stmatrix

@pytest.mark.parametrize("op", lk.MATRIX_OPS)
@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_matrix_round_trip_and_the_ptx_rule(op, num, trans):
    h_, w_ = lk.matrix_tile_shape(num)
    seen = np.zeros((h_, w_), dtype=int)
    for lane in range(32):
        entries = lk.matrix_thread(op, num, trans, lane)
        assert len(entries) == 2 * num
        for row, col, reg, half in entries:
            seen[row, col] += 1
            at = lk.matrix_at(op, num, trans, row, col)
            assert (at["lane"], at["register"], at["half"], at["matrix"]) == (lane, reg, half, reg)
            # PTX: without .trans lane l holds row l/4, columns 2(l%4)+half; .trans swaps row and column
            want = (2 * (lane % 4) + half, lane // 4) if trans else (lane // 4, 2 * (lane % 4) + half)
            assert (at["matrix_row"], at["matrix_col"]) == want
            # the lane giving this row's address points at the row's first element
            r0, c0 = lk.matrix_origin(num, reg)
            assert at["address_lane"] == 8 * reg + at["matrix_row"]
            assert lk.matrix_address_row(op, num, at["address_lane"]) == [row, c0]
            assert (row - r0, col - c0) == want
        addr = lk.matrix_address_row(op, num, lane)
        assert (addr is None) == (lane >= 8 * num)
    assert (seen == 1).all()


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_matrix_tile_coordinates_are_the_diagrams(num, trans):
    from refmodel.render import diagram

    d = diagram("ldmatrix", num=num, trans=trans)
    addr, data = d.panels
    for r in range(len(data.labels)):
        for c in range(len(data.labels[0])):
            h = lk.matrix_at("ldmatrix", num, trans, r, c)
            assert data.labels[r][c] == f"T{h['lane']}:r{h['register']}.{h['half']}"
    for lane in range(8 * num):
        r, c = lk.matrix_address_row("ldmatrix", num, lane)
        assert addr.labels[r][c] == f"L{lane}>"


# ----------------------------------------------------------------------------- sparse metadata

SPARSE = [(d, s) for d in lk.A_DTYPES for s in ((0,) if element_bytes(d) == 1 else (0, 1))]


@pytest.mark.parametrize("dtype,sel", SPARSE)
def test_sparse_meta_round_trip_and_pack_meta(dtype, sel):
    cols = 16 if element_bytes(dtype) == 1 else 8
    seen = np.zeros((64, cols), dtype=int)
    rng = np.random.default_rng(18)
    metas = [rng.integers(0, 16, (64, cols), dtype=np.uint8) for _ in range(3)]
    regs = [pack_meta(m, dtype, sel) for m in metas]
    for t in range(128):
        entries = lk.sparse_meta_thread(dtype, sel, t)
        bits = [b for _, _, b in entries]
        assert bits == sorted(set(bits)) and all(b % 4 == 0 and 0 <= b < 32 for b in bits)
        for row, chunk, bit in entries:
            seen[row, chunk] += 1
            h = lk.sparse_meta_at(dtype, sel, row, chunk)
            assert (h["thread"], h["bit"], h["nibble"], h["warp"], h["lane"]) == (t, bit, bit // 4, t // 32, t % 32)
            for m, r in zip(metas, regs):
                assert (int(r[t]) >> bit) & 0xF == m[row, chunk]
    assert (seen == 1).all()


def test_sparse_meta_worked_example_and_ignored_lanes():
    assert lk.sparse_meta_at("f16", 0, 9, 5) == {"thread": 5, "warp": 0, "lane": 5, "nibble": 5, "bit": 20}
    assert lk.sparse_meta_thread("f16", 0, 2) == [] and lk.sparse_meta_thread("f16", 1, 2) != []
    assert all(lk.sparse_meta_thread("e4m3", 0, t) for t in range(128))   # 8-bit forms read every lane


# ----------------------------------------------------------------------------- descriptors

DESC_CASES = [
    # (start, major, swizzle, dtype, rows, k, base_offset)
    (0x400, "K", "none", "f16", 64, 16, 0), (0x400, "K", "128B", "f16", 64, 16, 0),
    (0x400, "K", "64B", "bf16", 64, 16, 0), (0x400, "K", "32B", "f16", 64, 16, 0),
    (0x800, "K", "128B", "e4m3", 64, 32, 0), (0x800, "K", "128B", "tf32", 64, 8, 0),
    (0x1000, "K", "none", "s8", 128, 32, 0), (0x400, "MN", "none", "f16", 64, 16, 0),
    (0x400, "MN", "128B", "f16", 64, 16, 0), (0x400, "MN", "64B", "bf16", 64, 16, 0),
    (0x480, "K", "128B", "f16", 64, 16, 1), (0x600, "K", "128B", "f16", 64, 16, 4),
]


@pytest.mark.parametrize("start,major,swz,dtype,rows,k,base", DESC_CASES)
def test_descriptor_address_is_the_operand_address_array(start, major, swz, dtype, rows, k, base):
    e = element_bytes(dtype)
    d = make_descriptor(start, major=major, swizzle=swz, rows=rows, k=k, elem_bytes=e, base_offset=base)
    value = d.encode()
    addr = operand_addresses(d, rows, k, e, major=major)
    for r in range(rows):
        for c in range(k):
            el = lk.descriptor_element(value, dtype, rows, k, major, r, c)
            assert el["address"] == addr[r, c * e] == lk.descriptor_address(value, dtype, rows, k, major, r, c)
            assert el["last"] == addr[r, c * e + e - 1] == el["address"] + e - 1   # an element never splits
            if swz == "none":
                assert el["logical"] == el["address"]


@pytest.mark.parametrize("start,major,swz,dtype,rows,k,base", [c for c in DESC_CASES if c[-1] == 0])
def test_descriptor_address_reads_back_the_written_tile(start, major, swz, dtype, rows, k, base):
    """Independent of operand_addresses: the writer's image (tile_image at absolute base = start)
    holds element (r, c) at the address the lookup names."""
    e = element_bytes(dtype)
    d = make_descriptor(start, major=major, swizzle=swz, rows=rows, k=k, elem_bytes=e)
    tags = np.arange(rows * k, dtype={1: np.uint8, 2: np.uint16, 4: np.uint32}[e]).reshape(rows, k)
    if e == 1:
        tags = (tags % 251).astype(np.uint8)
    img = tile_image(tags, major, swz, base=start)
    words = {1: np.uint8, 2: np.uint16, 4: np.uint32}[e]
    for r in range(rows):
        for c in range(k):
            a = lk.descriptor_address(d.encode(), dtype, rows, k, major, r, c) - start
            assert img[a:a + e].view(words)[0] == tags[r, c]


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("call,msg", [
    (lambda: lk.acc_at(64, "f32", 64, 0), "row must be an integer from 0 to 63"),
    (lambda: lk.acc_at(64, "f32", 0, 64), "col must be an integer from 0 to 63"),
    (lambda: lk.acc_thread(64, "f16", 128), "thread must be an integer from 0 to 127"),
    (lambda: lk.acc_at(40, "s32", 0, 0), "no wgmma form accumulates m64n40"),
    (lambda: lk.acc_at(12, "f32", 0, 0), "N must be a multiple of 8"),
    (lambda: lk.acc_at(64, "bf16", 0, 0), "accumulator type must be one of"),
    (lambda: lk.a_frag_at("tf32", 0, 8), "col must be an integer from 0 to 7"),
    (lambda: lk.a_frag_thread("f64", 0), "A type must be one of"),
    (lambda: lk.matrix_at("ldmatrix", 2, False, 0, 8), "col must be an integer from 0 to 7"),
    (lambda: lk.matrix_at("ldmatrix", 3, False, 0, 0), "num must be 1, 2 or 4"),
    (lambda: lk.matrix_thread("stmatrix", 4, True, 32), "lane must be an integer from 0 to 31"),
    (lambda: lk.matrix_thread("movmatrix", 4, True, 0), "op must be one of"),
    (lambda: lk.sparse_meta_at("s8", 1, 0, 0), "sp_sel must be 0"),
    (lambda: lk.sparse_meta_at("f16", 0, 0, 8), "chunk must be an integer from 0 to 7"),
    (lambda: lk.descriptor_address(0x4000004000010040, "f16", 64, 16, "K", 0, 16), "k index must be"),
    (lambda: lk.descriptor_address(0x4000004000010040, "e4m3", 64, None, "MN", 0, 0), "MN-major"),
])
def test_bad_lookups_name_the_valid_range(call, msg):
    with pytest.raises(InputError, match=msg):
        call()


# ----------------------------------------------------------------------------- CLI

@pytest.mark.parametrize("argv,want", [
    (["layout", "acc", "--n", "64", "--dtype", "f32", "--at", "17,2", "--json"],
     lk.acc_at(64, "f32", 17, 2)),
    (["layout", "acc", "--n", "24", "--dtype", "f16", "--at", "9,20", "--json"], lk.acc_at(24, "f16", 9, 20)),
    (["layout", "acc", "--n", "16", "--dtype", "f32", "--thread", "99", "--json"],
     {"elements": lk.acc_thread(16, "f32", 99)}),
    (["layout", "acc", "--n", "16", "--dtype", "f16", "--thread", "99", "--json"],
     {"elements": lk.acc_thread(16, "f16", 99)}),
    (["layout", "a-frag", "--dtype", "e5m2", "--at", "40,30", "--json"], lk.a_frag_at("e5m2", 40, 30)),
    (["layout", "a-frag", "--dtype", "bf16", "--thread", "3", "--json"], {"elements": lk.a_frag_thread("bf16", 3)}),
    (["layout", "ldmatrix", "--num", "2", "--trans", "--at", "12,3", "--json"],
     lk.matrix_at("ldmatrix", 2, True, 12, 3)),
    (["layout", "stmatrix", "--num", "4", "--thread", "9", "--json"],
     {"elements": lk.matrix_thread("stmatrix", 4, False, 9), "address": lk.matrix_address_row("stmatrix", 4, 9)}),
    (["layout", "sparse-meta", "--dtype", "tf32", "--sel", "1", "--at", "33,6", "--json"],
     lk.sparse_meta_at("tf32", 1, 33, 6)),
    (["layout", "sparse-meta", "--dtype", "e4m3", "--thread", "77", "--json"],
     {"elements": lk.sparse_meta_thread("e4m3", 0, 77)}),
    (["desc", "0x4000004000010040", "--dtype", "f16", "--rows", "64", "--k", "16", "--major", "K", "--at", "3,5",
      "--json"], {"address": lk.descriptor_address(0x4000004000010040, "f16", 64, 16, "K", 3, 5)}),
])
def test_cli_json_is_the_lookup(capsys, argv, want):
    rc, out, err = run(capsys, *argv)
    assert rc == 0 and err == "", err
    got = json.loads(out)
    assert got == want and list(got) == list(want)
    assert out.count("\n") == 1


def test_cli_json_exact_keys(capsys):
    keys = {"acc": ["thread", "warp", "lane", "register", "half"]}
    _, out, _ = run(capsys, "layout", "acc", "--n", "64", "--dtype", "f32", "--at", "0,0", "--json")
    assert list(json.loads(out)) == keys["acc"] and json.loads(out)["half"] is None
    _, out, _ = run(capsys, "layout", "acc", "--n", "64", "--dtype", "f16", "--at", "0,1", "--json")
    assert list(json.loads(out)) == keys["acc"] and json.loads(out)["half"] == 1
    _, out, _ = run(capsys, "layout", "acc", "--n", "64", "--dtype", "f32", "--thread", "0", "--json")
    el = json.loads(out)
    assert list(el) == ["elements"] and all(len(e) == 3 for e in el["elements"])
    _, out, _ = run(capsys, "desc", "0x4000004000010040", "--at", "0,0", "--json")
    assert json.loads(out) == {"address": 0x400}
    _, out, _ = run(capsys, "layout", "a-frag", "--dtype", "s8", "--at", "0,0", "--json")
    assert list(json.loads(out)) == ["thread", "warp", "lane", "register", "half", "byte"]
    _, out, _ = run(capsys, "layout", "ldmatrix", "--at", "0,0", "--json")
    assert list(json.loads(out)) == ["matrix", "matrix_row", "matrix_col", "address_lane", "lane", "register", "half"]
    _, out, _ = run(capsys, "layout", "sparse-meta", "--at", "0,0", "--json")
    assert list(json.loads(out)) == ["thread", "warp", "lane", "nibble", "bit"]


@pytest.mark.parametrize("argv,words", [
    (["layout", "acc", "--n", "64", "--at", "17,2"], ["thread 37", "warp 1", "lane 5", "register 0"]),
    (["layout", "acc", "--n", "8", "--dtype", "f16", "--at", "0,1"], ["thread 0", "half 1", "bits 31:16"]),
    (["layout", "a-frag", "--dtype", "e4m3", "--at", "9,17"], ["thread 4", "register 3", "byte 1"]),
    (["layout", "stmatrix", "--at", "9,10"], ["matrix 3", "Lane 25 gives the address", "lane 5"]),
    (["layout", "ldmatrix", "--num", "1", "--thread", "20"], ["gives no address"]),
    (["layout", "sparse-meta", "--at", "9,5"], ["thread 5", "bits 20-23"]),
    (["layout", "sparse-meta", "--thread", "2"], ["ignores"]),
    (["desc", "0x4000004000010040", "--at", "3,5"],
     [f"{lk.descriptor_address(0x4000004000010040, 'f16', 64, None, 'K', 3, 5):#x}", "128B swizzle"]),
])
def test_cli_text_is_one_paragraph(capsys, argv, words):
    rc, out, err = run(capsys, *argv)
    assert rc == 0 and err == "" and out.count("\n") == 1
    for w in words:
        assert w in out, (w, out)


@pytest.mark.parametrize("argv,msg", [
    (["layout", "acc", "--n", "64", "--at", "64,0"], "row must be an integer from 0 to 63"),
    (["layout", "acc", "--n", "64", "--thread", "128", "--json"], "thread must be an integer from 0 to 127"),
    (["layout", "acc", "--n", "40", "--dtype", "s32", "--at", "0,0"], "no wgmma form"),
    (["layout", "acc", "--at", "1"], "--at must be ROW,COL"),
    (["layout", "acc", "--at", "1,x"], "--at must be ROW,COL"),
    (["layout", "acc", "--at", "1,2", "--thread", "3"], "not both"),
    (["layout", "acc", "--json"], "--json prints a lookup"),
    (["layout", "swizzle", "--at", "0,0"], "not swizzle"),
    (["layout", "acc", "--at", "0,0", "--format", "svg"], "--format"),
    (["layout", "a-frag", "--dtype", "tf32", "--at", "0,8"], "col must be an integer from 0 to 7"),
    (["layout", "ldmatrix", "--num", "3", "--thread", "0"], "num must be 1, 2 or 4"),
    (["layout", "stmatrix", "--num", "1", "--at", "8,0"], "row must be an integer from 0 to 7"),
    (["layout", "ldmatrix", "--thread", "32"], "lane must be an integer from 0 to 31"),
    (["layout", "sparse-meta", "--dtype", "u8", "--sel", "1", "--thread", "0"], "sp_sel must be 0"),
    (["layout", "sparse-meta", "--dtype", "e4m3", "--at", "0,16"], "chunk must be an integer from 0 to 15"),
    (["desc", "0x4000004000010040", "--at", "0,16", "--json"], "k index must be an integer from 0 to 15"),
    (["desc", "0x4000004000010040", "--at", "64,0"], "row must be an integer from 0 to 63"),
    (["desc", "0x4000004000010040", "--json"], "--json prints a lookup"),
])
def test_cli_bad_lookup_is_one_line_exit_2(capsys, argv, msg):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == "" and err.count("\n") == 1 and msg in err and "Traceback" not in err, err


@pytest.mark.parametrize("kind", ["epilogue", "sparse-compress"])
def test_new_diagram_kinds_draw(kind):
    from refmodel.render import BUILDERS

    assert kind in BUILDERS
    r = subprocess.run([sys.executable, "-m", "wgref.cli", "layout", kind], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout and r.stderr == "", r.stderr


def test_lookup_written_with_o_gets_the_mode_of_a_normal_file(tmp_path):
    script = ("import os, sys; os.umask(0o022); from wgref.cli import main; "
              "sys.exit(main(['layout', 'acc', '--at', '1,2', '--json', '-o', sys.argv[1]]))")
    out = tmp_path / "a.json"
    r = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o644
    assert json.loads(out.read_text()) == lk.acc_at(64, "f32", 1, 2)


def test_pipeline_check_into_a_closed_pipe_is_quiet(tmp_path):
    """``wgref pipeline check t.jsonl | head``: far more output than a pipe buffer, the reader
    leaves after one line; exit 141, nothing on stderr."""
    trace = tmp_path / "t.jsonl"
    assert main(["pipeline", "gen", "--broken", "early_reuse", "--k-iters", "256", "-o", str(trace)]) == 0
    p = subprocess.Popen([sys.executable, "-m", "wgref.cli", "pipeline", "check", str(trace)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert p.stdout.readline().startswith(b"error:")
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141 and err == "", err
    r = subprocess.run(f"{sys.executable} -m wgref.cli pipeline check {trace} | head -n 2", shell=True,
                       capture_output=True, text=True, cwd=ROOT)
    assert r.stdout.count("\n") == 2 and r.stderr == "", r.stderr


# ----------------------------------------------------------------------------- cvt wording

def _cvt(capsys, value, fmt, policy):
    rc, out, err = run(capsys, "cvt", value, "--to", fmt, "--policy", policy, "--json")
    assert rc == 0, err
    return json.loads(out)


def _overflows(x: float, fmt: str) -> bool:
    """Second formula: RNE overflows past max iff |x| passes max + half an ulp (the tie goes to
    max when max's mantissa is even: e4m3 448 = 1.110b x 2^8; e5m2 57344 = 1.11b x 2^15 is odd)."""
    top, half_ulp, even = {"e4m3": (448.0, 16.0, True), "e5m2": (57344.0, 4096.0, False)}[fmt]
    return abs(x) > top + half_ulp or (abs(x) == top + half_ulp and not even)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_cvt_overflow_clamped_saturated_mean_one_thing(fmt):
    from wgref.commands.fp8 import explain_cvt

    top = 448.0 if fmt == "e4m3" else 57344.0
    values = sorted({v * s for v in np.linspace(0.9 * top, 1.3 * top, 41).tolist()
                     + [top, top + (16.0 if fmt == "e4m3" else 4096.0), 450.0, 470.0, 464.0, 465.0, 61440.0]
                     for s in (1.0, -1.0)})
    for v in values:
        r = {p: explain_cvt(np.array(v, np.float64), fmt, p) for p in ("satfinite", "nosat", "relu")}
        for p, info in r.items():
            assert info["overflow"] == _overflows(v, fmt), (v, p)
            assert info["clamped"] == (info["overflow"] and p != "nosat" and not (p == "relu" and v < 0)), (v, p)
            if info["saturated"]:
                assert abs(info["value"]) == top and abs(v) > top
            if p == "nosat" and info["overflow"]:
                assert info["rounding"] == "overflow" and not info["saturated"]
        if r["satfinite"]["code"] == r["nosat"]["code"]:   # same code: the same words
            assert r["satfinite"]["saturated"] == r["nosat"]["saturated"], v


def test_cvt_450_and_470_are_told_precisely(capsys):
    a, b = _cvt(capsys, "450", "e4m3", "satfinite"), _cvt(capsys, "450", "e4m3", "nosat")
    assert a["code"] == b["code"] == "0x7E"
    assert a["saturated"] == b["saturated"] is True and not a["overflow"] and not a["clamped"]
    c = _cvt(capsys, "470", "e4m3", "satfinite")
    assert c["overflow"] and c["clamped"] and c["saturated"]
    rc, out, _ = run(capsys, "cvt", "470", "--to", "e4m3", "--policy", "nosat")
    assert rc == 0 and "rounded nan" not in out and "overflow -> NaN (e4m3 has no Inf)" in out
    rc, out, _ = run(capsys, "cvt", "70000", "--to", "e5m2", "--policy", "nosat")
    assert "overflow -> Inf" in out and "0x7C" in out
    rc, out, _ = run(capsys, "cvt", "inf", "--to", "e5m2", "--policy", "nosat")
    assert "has Inf" in out and "overflow" not in out
    rc, out, _ = run(capsys, "cvt", "nan", "--to", "e4m3")
    assert "rounded nan" not in out and "NaN input" in out
