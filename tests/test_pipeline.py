"""The wgmma pipeline model: trace format, hazard rules (each fires, near misses do not),
the canonical GEMM mainloop generator and its broken variants, drawings, CLI."""

import json
import xml.etree.ElementTree as ET

import pytest

from refmodel.errors import InputError
from refmodel.machine import pipeline as pl
from refmodel.machine.pipeline_draw import draw_ascii, draw_svg
from wgref.cli import main

BF16 = "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"
E4M3 = "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"
TF32 = "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32"
S8 = "wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8"


def T(*events) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


F = {"op": "wgmma.fence"}
C = {"op": "commit_group"}


def W(n, **kw):
    return {"op": "wait_group", "n": n, **kw}


def mma(id="k0", acc="d[0:4]", smem=((0, 64),), **kw):
    d = {"op": "mma_async", "id": id, "acc": acc, **kw}
    if smem is not None:
        d["smem"] = [list(r) for r in smem]
    return d


def op(name, **kw):
    return {"op": name, **kw}


def init(bar="b", count=1):
    return op("mbarrier.init", bar=bar, count=count)


# (kind, trace that must raise it, near miss that must be clean)
CASES = [
    ("acc_in_flight", T(F, mma(), C, op("reg_read", regs=["d1"]), W(0)),
     T(F, mma(), C, W(0), op("reg_read", regs=["d1"]))),
    ("acc_in_flight", T(F, mma(), C, op("reg_write", regs="d[2:3]"), W(0)),
     T(F, mma(), C, op("reg_write", regs="d[4:8]"), W(0))),          # other registers
    ("a_regs_in_flight", T(F, mma(a_regs="a[0:4]"), C, op("reg_write", regs=["a2"]), W(0)),
     T(F, mma(a_regs="a[0:4]"), C, op("reg_read", regs=["a2"]), W(0))),  # reading A is fine
    ("no_fence_before_first_mma", T(mma(), C, W(0)), T(F, mma(), C, W(0))),
    ("missing_wgmma_fence", T(F, op("reg_write", regs=["d0"]), mma(), C, W(0)),
     T(op("reg_write", regs=["d0"]), F, mma(), C, W(0))),
    ("missing_wgmma_fence", T(F, mma(), C, W(0), op("reg_read", regs=["d3"]), mma("k1"), C, W(0)),
     T(F, mma(), C, W(0), op("reg_read", regs=["d3"]), F, mma("k1"), C, W(0))),
    ("missing_wgmma_fence", T(F, op("reg_write", regs=["a0"]), mma(a_regs="a[0:4]"), C, W(0)),
     T(F, mma(), mma("k1"), C, W(0))),          # accumulator chaining across mma_async needs no fence
    ("uncommitted_at_wait", T(F, mma(), C, mma("k1"), W(0), C, W(0)),
     T(F, mma(), C, mma("k1"), C, W(0))),
    ("pointless_wait", T(F, mma(), C, W(1), W(0)), T(F, mma(), C, F, mma("k1"), C, W(1), W(0))),
    ("unretired_at_end", T(F, mma(), C, F, mma("k1"), C, W(1)), T(F, mma(), C, F, mma("k1"), C, W(1), W(0))),
    ("generic_write_async_read", T(op("stmatrix", smem=[[0, 64]]), op("tma_store", smem=[[32, 96]])),
     T(op("stmatrix", smem=[[0, 64]]), op("fence.proxy.async"), op("tma_store", smem=[[32, 96]]))),
    ("generic_write_async_read", T(op("st_shared", smem=[[0, 16]]), F, mma(), C, W(0)),
     T(op("st_shared", smem=[[64, 80]]), F, mma(), C, W(0))),        # disjoint bytes
    ("no_barrier_after_proxy_fence",
     T(op("stmatrix", smem=[[0, 64]], t="c1"), op("bar.sync"), op("fence.proxy.async", t="c1"),
       op("tma_store", smem=[[0, 64]], t="c0")),
     T(op("stmatrix", smem=[[0, 64]], t="c1"), op("fence.proxy.async", t="c1"), op("bar.sync"),
       op("tma_store", smem=[[0, 64]], t="c0"))),
    ("smem_overwrite_in_flight", T(F, mma(), C, op("st_shared", smem=[[60, 61]]), W(0)),
     T(F, mma(), C, W(0), op("st_shared", smem=[[60, 61]]))),
    ("smem_overwrite_in_flight",
     T(init(), F | {"t": "c"}, mma(t="c"), C | {"t": "c"}, op("tma_load", bar="b", smem=[[0, 64]], t="p"),
       W(0, t="c")),
     T(init(), F | {"t": "c"}, mma(t="c"), C | {"t": "c"}, op("tma_load", bar="b", smem=[[64, 128]], t="p"),
       W(0, t="c"))),
    ("smem_overwrite_store_in_flight",      # the staging buffer rewritten before its store has read it
     T(op("stmatrix", smem=[[0, 64]]), op("fence.proxy.async"), op("tma_store", smem=[[0, 64]]),
       op("stmatrix", smem=[[32, 48]])),
     T(op("stmatrix", smem=[[0, 64]]), op("fence.proxy.async"), op("tma_store", smem=[[0, 64]]),
       op("bulk_wait_group", n=0), op("stmatrix", smem=[[32, 48]]))),
    ("smem_overwrite_store_in_flight",      # two buffers, wait_group.read 1: the latest store still reads its buffer
     T(op("stmatrix", smem=[[0, 64]]), op("fence.proxy.async"), op("tma_store", smem=[[0, 64]]),
       op("stmatrix", smem=[[64, 128]]), op("fence.proxy.async"), op("tma_store", smem=[[64, 128]]),
       op("bulk_wait_group", n=1), op("stmatrix", smem=[[64, 128]])),
     T(op("stmatrix", smem=[[0, 64]]), op("fence.proxy.async"), op("tma_store", smem=[[0, 64]]),
       op("stmatrix", smem=[[64, 128]]), op("fence.proxy.async"), op("tma_store", smem=[[64, 128]]),
       op("bulk_wait_group", n=1), op("stmatrix", smem=[[0, 64]]))),
    ("smem_overwrite_store_in_flight",      # another role's TMA load refills the bytes a store still reads
     T(init(), op("stmatrix", smem=[[0, 64]], t="c"), op("fence.proxy.async", t="c"),
       op("tma_store", smem=[[0, 64]], t="c"), op("tma_load", bar="b", smem=[[0, 64]], t="p")),
     T(init(), op("stmatrix", smem=[[0, 64]], t="c"), op("fence.proxy.async", t="c"),
       op("tma_store", smem=[[0, 64]], t="c"), op("bulk_wait_group", n=0, t="c"),
       op("tma_load", bar="b", smem=[[0, 64]], t="p"))),
    ("read_before_tma_complete",
     T(init(), op("mbarrier.arrive_expect_tx", bar="b", bytes=64, t="p"),
       op("tma_load", bar="b", smem=[[0, 64]], t="p"), F | {"t": "c"}, mma(t="c"), C | {"t": "c"}, W(0, t="c")),
     T(init(), op("mbarrier.arrive_expect_tx", bar="b", bytes=64, t="p"),
       op("tma_load", bar="b", smem=[[0, 64]], t="p"), op("mbarrier.wait", bar="b", phase=0, t="c"),
       F | {"t": "c"}, mma(t="c"), C | {"t": "c"}, W(0, t="c"))),
    ("mbarrier_uninitialized", T(op("mbarrier.arrive", bar="x")), T(init("x"), op("mbarrier.arrive", bar="x"))),
    ("mbarrier_phase_not_complete", T(init(), op("mbarrier.wait", bar="b", phase=0)),
     T(init(), op("mbarrier.arrive", bar="b"), op("mbarrier.wait", bar="b", phase=0))),
    ("mbarrier_phase_not_complete", T(init(), op("mbarrier.arrive", bar="b"), op("mbarrier.wait", bar="b", phase=1),
                                      op("mbarrier.wait", bar="b", phase=0)),
     T(init(), op("mbarrier.wait", bar="b", phase=1))),               # the "previous phase" passes at once
    ("mbarrier_parity_not_flipped",
     T(init(), op("mbarrier.arrive", bar="b"), op("mbarrier.wait", bar="b", phase=0),
       op("mbarrier.wait", bar="b", phase=0)),
     T(init(), op("mbarrier.arrive", bar="b"), op("mbarrier.wait", bar="b", phase=0),
       op("mbarrier.arrive", bar="b"), op("mbarrier.wait", bar="b", phase=1))),
    ("expect_tx_mismatch",
     T(init(), op("mbarrier.arrive_expect_tx", bar="b", bytes=128), op("tma_load", bar="b", smem=[[0, 64]]),
       op("mbarrier.wait", bar="b", phase=0)),
     T(init(), op("mbarrier.arrive_expect_tx", bar="b", bytes=64), op("tma_load", bar="b", smem=[[0, 64]]),
       op("mbarrier.wait", bar="b", phase=0))),
    ("expect_tx_mismatch",
     T(init(), op("mbarrier.arrive_expect_tx", bar="b", bytes=32), op("tma_load", bar="b", smem=[[0, 64]])),
     T(init(), op("tma_load", bar="b", smem=[[0, 64]]), op("mbarrier.arrive_expect_tx", bar="b", bytes=64))),
    ("arrive_count_mismatch",
     T(init(count=2), op("mbarrier.arrive", bar="b", t="c0"), op("mbarrier.arrive", bar="b", t="c0")),
     T(init(count=2), op("mbarrier.arrive", bar="b", t="c0"), op("mbarrier.arrive", bar="b", t="c1"),
       op("mbarrier.arrive", bar="b", t="c0"), op("mbarrier.arrive", bar="b", t="c1"))),
    ("arrive_count_mismatch",
     T(init(count=1), op("mbarrier.arrive", bar="b", t="c0"), op("mbarrier.arrive", bar="b", t="c1")),
     T(init(count=1), op("mbarrier.arrive", bar="b", t="c0"), op("mbarrier.arrive", bar="b", t="c0"))),
]


@pytest.mark.parametrize("kind,bad,good", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_rule_fires_and_its_near_miss_does_not(kind, bad, good):
    rep = pl.check(bad)
    hits = [h for h in rep.hazards if h.kind == kind]
    assert hits, f"{kind} did not fire: {rep.kinds()}"
    for h in hits:
        for i in h.events:  # the explanation names every event it lists
            assert f"event {i} " in h.message, (i, h.message)
        assert "\n" not in h.message and h.severity == pl.HAZARDS[kind].severity
    assert pl.check(good).hazards == []


def test_every_hazard_kind_has_a_case():
    assert {c[0] for c in CASES} == set(pl.HAZARDS)
    assert {k.severity for k in pl.HAZARDS.values()} == {"error", "warning"}


def test_wait_group_retires_all_but_the_newest_n():
    rep = pl.check(T(F, mma("a"), C, F, mma("b"), C, F, mma("c"), C, W(2), W(1), W(0)))
    assert [len(s.in_flight) for s in rep.snapshots] == [0, 0, 1, 1, 1, 2, 2, 2, 3, 2, 1, 0]
    assert [g.retired for g in rep.groups] == [9, 10, 11]
    assert rep.snapshots[9].in_flight == ("main:g1", "main:g2")   # FIFO: the oldest retires first


def test_roles_keep_separate_wgmma_state():
    rep = pl.check(T(F | {"t": "c0"}, mma(t="c0"), C | {"t": "c0"}, op("reg_read", regs=["d0"], t="c1"),
                     W(0, t="c0")))
    assert rep.hazards == []   # c1's d0 is another warpgroup's register


# ----------------------------------------------------------------------------- the format

@pytest.mark.parametrize("text,line,rule", [
    ('{"op": "wgmma.fence"}\n{"op": "commit_group"\n', 2, "not valid JSON"),
    ('[1, 2]\n', 1, "JSON object"),
    ('{"op": "wgmma.fance"}\n', 1, "unknown op"),
    ('\n\n{"op": "wait_group"}\n', 3, "needs field 'n'"),
    ('{"op": "wait_group", "n": 1, "N": 2}\n', 1, "unknown field 'N'"),
    ('{"op": "wait_group", "n": -1}\n', 1, "'n' must be >= 0"),
    ('{"op": "st_shared", "smem": [[8, 8]]}\n', 1, "0 <= start < end"),
    ('{"op": "st_shared", "smem": [8, 16]}\n', 1, "[start, end)"),
    ('{"op": "reg_read", "regs": "d[4:2]"}\n', 1, "start < end"),
    ('{"op": "reg_read", "regs": ["d0", "d0"]}\n', 1, "twice"),
    ('{"op": "mbarrier.wait", "bar": "b", "phase": 2}\n', 1, "'phase' must be 0..1"),
    ('{"op": "mbarrier.init", "bar": "b", "count": 0}\n', 1, "'count' must be >= 1"),
    ('{"op": "tma_load", "bar": "b", "smem": [[0, 64]], "bytes": 32}\n', 1, "bytes a TMA completes"),
    ('{"op": "mma_async", "acc": "d[0:4]", "desc_b": "0x40"}\n', 1, "needs 'instr'"),
    ('{"op": "mma_async", "acc": "d[0:4]"}\n', 1, "must say what it reads"),
    ('{"op": "mma_async", "acc": "d[0:4]", "desc_b": "zz", "instr": "%s"}\n' % BF16, 1, "64-bit descriptor"),
    ('{"op": "mma_async", "acc": "d[0:4]", "desc_b": 64, "instr": "wgmma.bogus"}\n', 1, "'instr'"),
])
def test_bad_trace_lines_are_one_sentence_with_the_line_number(text, line, rule):
    with pytest.raises(pl.TraceError) as ei:
        pl.parse_trace(text)
    msg = str(ei.value)
    assert msg.startswith(f"trace line {line}: ") and rule in msg and "\n" not in msg
    assert isinstance(ei.value, InputError)


def test_descriptor_ranges_are_the_bytes_the_wgmma_reads():
    from refmodel.layouts.descriptor import make_descriptor, operand_addresses

    d = make_descriptor(0x1000, swizzle="128B", rows=64, k=16, elem_bytes=2, k_step=1)
    e = pl.parse_trace(json.dumps({"op": "mma_async", "acc": "d[0:64]", "desc_a": hex(int(d)),
                                   "desc_b": int(d), "instr": "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"}))[0]
    addr = set(operand_addresses(d, 64, 16, 2).ravel().tolist())
    covered = {a for lo, hi in e.smem for a in range(lo, hi)}
    assert covered == addr and len(addr) == 64 * 32
    assert e.acc == tuple(f"d{i}" for i in range(64))


def test_trace_round_trips_through_json_lines():
    ev = pl.gemm_mainloop_trace(stages=3, k_iters=5, consumers=2)
    back = pl.parse_trace(pl.dump_trace(ev))
    assert [(e.op, e.role, e.smem, e.acc, e.bar, e.phase, e.n) for e in back] == \
        [(e.op, e.role, e.smem, e.acc, e.bar, e.phase, e.n) for e in ev]
    assert back[5].lineno == 6


# ----------------------------------------------------------------------------- the generator

GOOD = [
    dict(),
    dict(stages=2, k_iters=5, wait_depth=1, consumers=1),
    dict(stages=3, k_iters=9, wait_depth=2, consumers=2),
    dict(stages=4, k_iters=8, wait_depth=0, consumers=2),
    dict(stages=1, k_iters=3, wait_depth=0, consumers=1),
    dict(stages=5, k_iters=12, wait_depth=1, consumers=2, promote_every=4, instr=E4M3),
    dict(stages=4, k_iters=7, wait_depth=2, consumers=3, promote_every=2, instr=E4M3),
    dict(stages=3, k_iters=6, wait_depth=1, consumers=2, instr=TF32),
    dict(stages=5, k_iters=4, wait_depth=3, consumers=4, instr=S8),
]


@pytest.mark.parametrize("kw", GOOD, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()) or "default")
def test_canonical_mainloop_is_clean_and_pipelined(kw):
    ev = pl.gemm_mainloop_trace(**kw)
    rep = pl.check(ev)
    assert rep.hazards == [], [pl.format_hazard(h, ev) for h in rep.hazards]
    cfg = pl.mainloop_config(**kw)
    wd, consumers, k_iters = cfg.wait_depth, cfg.consumers, cfg.k_iters
    for c in range(consumers):
        role = f"consumer{c}"
        groups = [g for g in rep.groups if g.role == role]
        promotions = (k_iters - 1) // cfg.promote_every if cfg.promote_every else 0
        assert len(groups) == k_iters and all(g.retired is not None for g in groups)
        assert all(len(g.mmas) == cfg.mmas_per_kblock for g in groups)
        snaps = [s for s in rep.snapshots if s.role == role]
        assert max(len(s.in_flight) for s in snaps) == min(wd + 1, k_iters) if not cfg.promote_every \
            else max(len(s.in_flight) for s in snaps) <= wd + 1
        waits = [e for e in ev if e.role == role and e.op == "wait_group"]
        assert sum(e.n == 0 for e in waits) == (k_iters if wd == 0 else 1 + promotions)
        for e in waits:  # after every wait at most N groups remain in flight, and exactly N in the mainloop
            assert len(rep.snapshots[e.index].in_flight) == e.n
        assert all(len(s.in_flight) <= wd + 1 for s in snaps)
    loads = [e for e in ev if e.op == "tma_load"]
    assert len(loads) == 2 * k_iters and sum(e.bytes for e in loads) == k_iters * cfg.stage_bytes


def test_mainloop_operands_stay_inside_their_ring_slot():
    cfg = pl.mainloop_config(stages=3, k_iters=7, consumers=2)
    for e in pl.gemm_mainloop_trace(stages=3, k_iters=7, consumers=2):
        if e.op != "mma_async":
            continue
        k = int(e.id[1:].split(".")[0])
        c = int(e.role[-1])
        s = k % 3
        a_lo = cfg.a_slot(s) + c * 64 * 128
        read = {a for lo, hi in e.smem for a in range(lo, hi)}
        in_a = {a for a in read if a_lo <= a < a_lo + 64 * 128}
        in_b = {a for a in read if cfg.b_slot(s) <= a < cfg.b_slot(s) + cfg.b_tile_bytes}
        assert read == in_a | in_b and len(in_a) == 64 * 32 and len(in_b) == 128 * 32


def test_producer_runs_ahead_by_the_ring_depth():
    ev = pl.gemm_mainloop_trace(stages=4, k_iters=10, consumers=1)
    first_mma = next(e.index for e in ev if e.op == "mma_async")
    loads_before = sum(1 for e in ev[:first_mma] if e.op == "tma_load")
    assert loads_before == 2 * 4   # every slot filled before the consumer starts


@pytest.mark.parametrize("broken", list(pl.BROKEN))
def test_broken_variants_are_flagged_with_the_right_explanation(broken):
    kind, _ = pl.BROKEN[broken]
    ev = pl.gemm_mainloop_trace(broken=broken)
    rep = pl.check(ev)
    hits = [h for h in rep.hazards if h.kind == kind]
    assert hits, rep.kinds()
    h = hits[0]
    ops = {ev[i].op for i in h.events}
    expect = {"lax_wait": {"mma_async", "reg_read"}, "no_proxy_fence": {"stmatrix", "tma_store"},
              "early_reuse": {"mma_async", "tma_load"}}[broken]
    assert ops == expect
    for i in h.events:
        assert ev[i].name in h.message
    if broken == "early_reuse":   # the refilled slot is the one the in-flight wgmma reads
        mma, load = sorted(h.events)
        assert int(ev[mma].id[1:].split(".")[0]) % 4 == int(ev[load].bar[4:])


def test_generator_rejects_impossible_plans():
    with pytest.raises(InputError, match="must be < stages"):
        pl.gemm_mainloop_trace(stages=2, wait_depth=2)
    with pytest.raises(InputError, match="227 KiB|a Hopper block"):
        pl.gemm_mainloop_trace(stages=8)
    with pytest.raises(InputError, match="broken must be one of"):
        pl.gemm_mainloop_trace(broken="nope")
    with pytest.raises(InputError, match="k_iters > stages"):
        pl.gemm_mainloop_trace(stages=4, k_iters=4, broken="early_reuse")


# ----------------------------------------------------------------------------- drawings and CLI

def test_ascii_timeline_rows():
    rep = pl.check(pl.gemm_mainloop_trace(stages=3, k_iters=5, consumers=1))
    text = draw_ascii(rep)
    rows = [l for l in text.splitlines() if l.startswith("  g")]
    assert len(rows) == 5 and all(r.count("C") == 1 and r.count("X") == 1 for r in rows)
    assert "at most 2 in flight" in text
    lax = draw_ascii(pl.check(pl.gemm_mainloop_trace(stages=3, k_iters=5, consumers=1, broken="lax_wait")))
    last = [l for l in lax.splitlines() if l.startswith("  g")][-1]
    assert last.rstrip().endswith(">") and "hazards" in lax


def test_svg_parses():
    svg = draw_svg(pl.check(pl.gemm_mainloop_trace(broken="early_reuse")))
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    rects = root.findall(".//{http://www.w3.org/2000/svg}rect")
    assert len(rects) > 16 * 2


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_exit_codes(tmp_path, capsys):
    good, bad, broken = tmp_path / "good.jsonl", tmp_path / "bad.jsonl", tmp_path / "broken.jsonl"
    assert run(capsys, "pipeline", "gen", "-o", str(good))[0] == 0
    rc, out, _ = run(capsys, "pipeline", "check", str(good))
    assert rc == 0 and "0 hazard(s)" in out
    assert run(capsys, "pipeline", "gen", "--broken", "no_proxy_fence", "-o", str(broken))[0] == 0
    rc, out, _ = run(capsys, "pipeline", "check", str(broken))
    assert rc == 1 and "generic_write_async_read" in out and "trace line" in out
    rc, out, _ = run(capsys, "pipeline", "check", str(broken), "--json")
    assert rc == 1 and json.loads(out)["hazards"][0]["kind"] == "generic_write_async_read"
    bad.write_text('{"op": "wgmma.fence"}\n{"op": "mbarrier.wait", "bar": "b"}\n')
    rc, out, err = run(capsys, "pipeline", "check", str(bad))
    assert rc == 2 and err.strip().count("\n") == 0 and "trace line 2" in err and "'phase'" in err
    rc, _, err = run(capsys, "pipeline", "check", str(tmp_path / "missing.jsonl"))
    assert rc == 2 and "cannot read trace" in err


def test_cli_warnings_and_strict(tmp_path, capsys):
    t = tmp_path / "w.jsonl"
    t.write_text(T(F, mma(), C, W(1), W(0)))
    rc, out, _ = run(capsys, "pipeline", "check", str(t))
    assert rc == 0 and "warning: pointless_wait" in out
    assert run(capsys, "pipeline", "check", str(t), "--strict")[0] == 1


def test_cli_draw(tmp_path, capsys):
    t = tmp_path / "t.jsonl"
    t.write_text(pl.dump_trace(pl.gemm_mainloop_trace(k_iters=5, consumers=1)))
    rc, out, _ = run(capsys, "pipeline", "draw", str(t))
    assert rc == 0 and out.startswith("consumer0:")
    svg = tmp_path / "t.svg"
    rc, out, _ = run(capsys, "pipeline", "draw", str(t), "--format", "svg", "-o", str(svg))
    assert rc == 0 and ET.parse(svg).getroot().tag.endswith("svg")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".wgref-")] == []
