"""The canonical warp-specialised GEMM mainloop, as a pipeline trace.

:func:`gemm_mainloop_trace` emits the events of one CTA tile: a TMA producer warp and
``consumers`` wgmma warpgroups around a ring of ``stages`` 128B-swizzled shared-memory slots
with full/empty mbarriers, then the epilogue (drain, cvt, stmatrix, fence.proxy.async, TMA
store).  :class:`MainloopConfig` is the plan (tile shapes, bytes per stage, where each slot
lives); :data:`BROKEN` lists three deliberately broken variants and the hazard each must raise.
The roles' programs are interleaved by running the checker's barrier state, so the producer
runs as far ahead as the ring allows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..limits import limit
from ..validate import check_instr, excerpt
from .pipeline_check import PipelineChecker
from .trace import Event, Range, event_from_dict

#: Largest dynamic shared memory of one Hopper block (227 KiB; refmodel.limits 'smem_bytes').
SMEM_LIMIT = limit("smem_bytes")

DEFAULT_INSTR = "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"

#: The deliberately broken variants of :func:`gemm_mainloop_trace` and the hazard each must raise.
BROKEN: dict[str, tuple[str, str]] = {
    "lax_wait": ("acc_in_flight", "the epilogue waits with wait_group 1 instead of 0, then reads the accumulators"),
    "no_proxy_fence": ("generic_write_async_read", "the epilogue's stmatrix writes go to the TMA store "
                       "without fence.proxy.async"),
    "early_reuse": ("smem_overwrite_in_flight", "each consumer releases a ring slot (arrives on its empty "
                    "barrier) right after commit_group, before a wait_group retired the wgmmas reading it"),
}


@dataclass(frozen=True)
class MainloopConfig:
    """Tile shapes and the shared-memory plan of the warp-specialised TMA + mbarrier GEMM.

    The CTA computes a ``block_m x block_n`` tile (``block_m = 64 * consumers``: one m64
    wgmma row block per consumer warpgroup; ``block_n`` = the instruction's N).  K advances
    ``block_k`` elements per k-block, one 128-byte swizzle row (``block_k * elem_bytes = 128``),
    i.e. ``block_k / K`` mma_async per k-block, each stepping 32 bytes inside the row.
    Ring slot ``s`` holds the A tile (``block_m`` rows x 128 B) then the B tile (``block_n``
    rows x 128 B), both 128B-swizzled K-major as TMA writes them; after the ring, the output
    tile in ``128``-byte column panels for the TMA store.
    """

    instr: str
    stages: int
    k_iters: int
    wait_depth: int
    consumers: int
    promote_every: int | None
    smem_base: int
    out_bytes: int

    @property
    def form(self):
        from ..wgmma_forms import parse_wgmma
        return parse_wgmma(self.instr)

    @property
    def elem_bytes(self) -> int:
        from ..dtypes import element_bytes
        return element_bytes(self.form.dtype_a)

    @property
    def block_m(self) -> int:
        return 64 * self.consumers

    @property
    def block_n(self) -> int:
        return self.form.n

    @property
    def block_k(self) -> int:
        return 128 // self.elem_bytes

    @property
    def mmas_per_kblock(self) -> int:
        return self.block_k // self.form.k

    @property
    def acc_regs(self) -> int:
        return self.form.d_regs

    @property
    def a_tile_bytes(self) -> int:
        return self.block_m * 128

    @property
    def b_tile_bytes(self) -> int:
        return self.block_n * 128

    @property
    def stage_bytes(self) -> int:
        """Bytes one stage's TMA loads deliver (the expect_tx of its full barrier)."""
        return self.a_tile_bytes + self.b_tile_bytes

    def a_slot(self, s: int) -> int:
        return self.smem_base + s * self.stage_bytes

    def b_slot(self, s: int) -> int:
        return self.a_slot(s) + self.a_tile_bytes

    @property
    def c_tile(self) -> int:
        return self.smem_base + self.stages * self.stage_bytes

    @property
    def c_panel_bytes(self) -> int:
        """Bytes of one output row inside one panel (at most a 128-byte swizzle row)."""
        return min(128, self.block_n * self.out_bytes)

    @property
    def c_panels(self) -> int:
        return self.block_n * self.out_bytes // self.c_panel_bytes

    def c_panel(self, p: int) -> Range:
        start = self.c_tile + p * self.block_m * self.c_panel_bytes
        return (start, start + self.block_m * self.c_panel_bytes)

    @property
    def smem_bytes(self) -> int:
        """Ring + output tile (the 2 * stages 8-byte mbarriers live in static shared memory)."""
        return self.stages * self.stage_bytes + self.block_m * self.block_n * self.out_bytes

    def describe(self) -> str:
        f = self.form
        return (f"{self.instr}: CTA tile {self.block_m}x{self.block_n}, k-block {self.block_k} "
                f"({self.mmas_per_kblock} mma_async of K={f.k}), {self.consumers} consumer warpgroup(s), "
                f"{self.stages} stages x {self.stage_bytes} B (A {self.a_tile_bytes} B + B {self.b_tile_bytes} B), "
                f"output tile {self.block_m * self.block_n * self.out_bytes} B in {self.c_panels} panel(s); "
                f"{self.smem_bytes} B of shared memory")


def mainloop_config(stages: int = 4, k_iters: int = 8, wait_depth: int = 1, consumers: int = 2,
                    promote_every: int | None = None, *, instr: str = DEFAULT_INSTR, smem_base: int = 0,
                    out_bytes: int = 2) -> MainloopConfig:
    """A validated :class:`MainloopConfig` (each broken rule is a one-sentence InputError)."""
    def pos(name, v, lo, hi=None):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < lo \
                or (hi is not None and v > hi):
            raise InputError(f"{name} must be an int in {lo}..{hi if hi is not None else 'inf'}, got {excerpt(v)}")
        return int(v)
    check_instr("instr", instr, DEFAULT_INSTR)
    stages = pos("stages", stages, 1, 32)
    k_iters = pos("k_iters", k_iters, 1, 4096)
    wait_depth = pos("wait_depth", wait_depth, 0, 7)
    consumers = pos("consumers", consumers, 1, 4)
    smem_base = pos("smem_base", smem_base, 0, limit("smem_address"))
    if isinstance(out_bytes, (bool, np.bool_)) or not isinstance(out_bytes, (int, np.integer)) \
            or int(out_bytes) not in (1, 2, 4):
        raise InputError(f"out_bytes must be 1, 2 or 4, got {excerpt(out_bytes)}")
    out_bytes = int(out_bytes)
    if promote_every is not None:
        promote_every = pos("promote_every", promote_every, 1, k_iters)
    if smem_base % 1024:
        raise InputError(f"smem_base must be 1024-byte aligned (the 128B swizzle pattern), got {smem_base:#x}")
    if wait_depth >= stages:
        raise InputError(f"wait_depth {wait_depth} must be < stages {stages}: a consumer keeps wait_depth + 1 "
                         f"slots busy, so fewer stages deadlock the ring")
    cfg = MainloopConfig(instr, stages, k_iters, wait_depth, consumers, promote_every, smem_base, out_bytes)  # ints
    f = cfg.form
    if f.k * cfg.elem_bytes != 32:
        raise InputError(f"{instr}: each mma_async must read 32 bytes of K per row")
    if cfg.smem_bytes > SMEM_LIMIT:
        raise InputError(f"the plan needs {cfg.smem_bytes} bytes of shared memory, more than the "
                         f"{SMEM_LIMIT} a Hopper block can use: fewer stages or a smaller tile")
    return cfg


def _schedule(prefix: list[dict], programs: dict[str, list[dict]]) -> list[Event]:
    """Interleave role programs: at each step the first role (in order) whose next event can
    run executes it; ``mbarrier.wait`` runs once its phase completed, a ``bar.sync`` once all
    its roles reach it.  Producers listed first therefore run as far ahead as the ring allows."""
    chk = PipelineChecker()
    events: list[Event] = []

    def emit(d: dict) -> None:
        e = event_from_dict({k: v for k, v in d.items() if not k.startswith("_")}, len(events))
        chk.feed(e)
        events.append(e)

    for d in prefix:
        emit(d)
    pos = {r: 0 for r in programs}
    while any(pos[r] < len(p) for r, p in programs.items()):
        for r, prog in programs.items():
            if pos[r] >= len(prog):
                continue
            d = prog[pos[r]]
            if d["op"] == "mbarrier.wait" and chk.wait_would_block(d["bar"], d["phase"]):
                continue
            if d["op"] == "bar.sync":
                parts = d["_with"]
                if not all(pos[p] < len(programs[p]) and programs[p][pos[p]].get("_sync") == d["_sync"]
                           for p in parts):
                    continue
                for p in parts:
                    pos[p] += 1
            else:
                pos[r] += 1
            emit(d)
            break
        else:
            stuck = ", ".join(f"{r} at {prog[pos[r]]['op']}" for r, prog in programs.items() if pos[r] < len(prog))
            raise InputError(f"the generated roles deadlock ({stuck}); check stages and wait_depth")
    return events


def gemm_mainloop_trace(stages: int = 4, k_iters: int = 8, wait_depth: int = 1, consumers: int = 2,
                        promote_every: int | None = None, *, instr: str = DEFAULT_INSTR, smem_base: int = 0,
                        out_bytes: int = 2, broken: str | None = None) -> list[Event]:
    """The events of the canonical warp-specialised GEMM mainloop (one CTA tile).

    Producer warp: per k-block ``k`` (slot ``s = k % stages``, round ``r = k // stages``) wait
    on ``empty{s}`` with parity ``(r & 1) ^ 1`` (the first round passes at once), arm
    ``full{s}`` with ``arrive_expect_tx(stage_bytes)``, TMA-load the A and B tiles into the slot.
    Consumer warpgroup ``c``: wait on ``full{s}`` with parity ``r & 1``, ``wgmma.fence``, the
    k-block's mma_async (descriptors of its 64 A rows and of B, 128B swizzle, 32-byte K steps),
    ``commit_group``, then ``wait_group(wait_depth)`` once more than ``wait_depth`` groups are
    in flight, and arrive on ``empty`` of every slot whose wgmmas have just retired.  With
    ``promote_every`` (FP8 two-level accumulation) every that many k-blocks: ``wait_group 0``,
    read the wgmma accumulators and add them into float32 registers ``f``.  Epilogue:
    ``wait_group 0``, release the last slots, cvt (read the accumulators), stmatrix into the
    output panels, ``fence.proxy.async``, ``bar.sync`` of the consumers, consumer 0 TMA-stores
    every panel.  ``broken`` picks a variant of :data:`BROKEN`.
    """
    from ..layouts.descriptor import make_descriptor

    cfg = mainloop_config(stages, k_iters, wait_depth, consumers, promote_every, instr=instr,
                          smem_base=smem_base, out_bytes=out_bytes)
    stages, k_iters, wait_depth, consumers = cfg.stages, cfg.k_iters, cfg.wait_depth, cfg.consumers
    promote_every = cfg.promote_every
    if broken is not None and (not isinstance(broken, str) or broken not in BROKEN):
        raise InputError(f"broken must be one of {', '.join(BROKEN)} (or None), got {excerpt(broken)}")
    if broken == "lax_wait" and wait_depth < 1:
        raise InputError("broken='lax_wait' needs wait_depth >= 1 (otherwise nothing is in flight at the epilogue)")
    if broken == "early_reuse" and k_iters <= stages:
        raise InputError(f"broken='early_reuse' needs k_iters > stages ({k_iters} <= {stages}): "
                         f"otherwise no slot is ever refilled")
    f, eb, R = cfg.form, cfg.elem_bytes, cfg.acc_regs
    prod = "producer"
    cons = [f"consumer{c}" for c in range(consumers)]
    prefix = []
    for s in range(stages):
        prefix.append({"op": "mbarrier.init", "bar": f"full{s}", "count": 1, "t": prod, "line": "init"})
        prefix.append({"op": "mbarrier.init", "bar": f"empty{s}", "count": consumers, "t": prod, "line": "init"})
    prefix.append({"op": "bar.sync", "t": "all", "line": "init: __syncthreads after mbarrier.init"})

    p: list[dict] = []
    for k in range(k_iters):
        s, r = k % stages, k // stages
        tag = f"producer k={k} slot={s}"
        p += [{"op": "mbarrier.wait", "bar": f"empty{s}", "phase": (r & 1) ^ 1, "t": prod, "line": tag},
              {"op": "mbarrier.arrive_expect_tx", "bar": f"full{s}", "bytes": cfg.stage_bytes, "t": prod, "line": tag},
              {"op": "tma_load", "bar": f"full{s}", "smem": [[cfg.a_slot(s), cfg.a_slot(s) + cfg.a_tile_bytes]],
               "t": prod, "line": tag + " A"},
              {"op": "tma_load", "bar": f"full{s}", "smem": [[cfg.b_slot(s), cfg.b_slot(s) + cfg.b_tile_bytes]],
               "t": prod, "line": tag + " B"}]
    programs = {prod: p}
    acc = f"d[0:{R}]"
    for c, role in enumerate(cons):
        q: list[dict] = []
        committed: list[int] = []
        released: set[int] = set()

        def release(kbs, tag, q=q, role=role, released=released):
            for kb in kbs:
                if kb not in released:
                    released.add(kb)
                    q.append({"op": "mbarrier.arrive", "bar": f"empty{kb % stages}", "t": role,
                              "line": f"{tag}: release slot {kb % stages} (k={kb})"})

        def wait(n, tag, q=q, role=role, committed=committed):
            q.append({"op": "wait_group", "n": n, "t": role, "line": tag})
            done = committed[:max(len(committed) - n, 0)]
            del committed[:len(done)]
            return done

        for k in range(k_iters):
            s, r = k % stages, k // stages
            tag = f"{role} k={k} slot={s}"
            q.append({"op": "mbarrier.wait", "bar": f"full{s}", "phase": r & 1, "t": role, "line": tag})
            q.append({"op": "wgmma.fence", "t": role, "line": tag})
            for j in range(cfg.mmas_per_kblock):
                da = make_descriptor(cfg.a_slot(s) + c * 64 * 128, swizzle="128B", rows=64, k=f.k,
                                     elem_bytes=eb, k_step=j)
                db = make_descriptor(cfg.b_slot(s), swizzle="128B", rows=cfg.block_n, k=f.k, elem_bytes=eb,
                                     k_step=j)
                q.append({"op": "mma_async", "id": f"k{k}.{j}", "acc": acc, "desc_a": hex(int(da)),
                          "desc_b": hex(int(db)), "instr": instr, "t": role, "line": tag})
            q.append({"op": "commit_group", "t": role, "line": tag})
            committed.append(k)
            if broken == "early_reuse":
                release([k], tag + " (too early)")
            if len(committed) > wait_depth:
                release(wait(wait_depth, tag), tag)
            if promote_every and (k + 1) % promote_every == 0 and k != k_iters - 1:
                if committed:
                    release(wait(0, tag + " promote"), tag)
                q += [{"op": "reg_read", "regs": acc, "t": role, "line": tag + " promote: read wgmma accumulators"},
                      {"op": "reg_write", "regs": f"f[0:{R}]", "t": role, "line": tag + " promote: f += d"}]
        tag = f"{role} epilogue"
        if committed:
            release(wait(1 if broken == "lax_wait" else 0, tag + " drain"), tag)
        final = acc
        if promote_every:
            q += [{"op": "reg_read", "regs": acc, "t": role, "line": tag + " promote: read wgmma accumulators"},
                  {"op": "reg_write", "regs": f"f[0:{R}]", "t": role, "line": tag + " promote: f += d"}]
            final = f"f[0:{R}]"
        q.append({"op": "reg_read", "regs": final, "t": role, "line": tag + ": cvt accumulators to the output type"})
        rows = 64 * cfg.c_panel_bytes
        q.append({"op": "stmatrix", "t": role, "line": tag + ": stmatrix rows of this warpgroup",
                  "smem": [[cfg.c_panel(pn)[0] + c * rows, cfg.c_panel(pn)[0] + (c + 1) * rows]
                           for pn in range(cfg.c_panels)]})
        if broken != "no_proxy_fence":
            q.append({"op": "fence.proxy.async", "t": role, "line": tag})
        q.append({"op": "bar.sync", "t": ",".join(cons), "line": "epilogue: consumers' named barrier",
                  "_sync": "epilogue", "_with": cons})
        if c == 0:
            for pn in range(cfg.c_panels):
                q.append({"op": "tma_store", "smem": [list(cfg.c_panel(pn))], "t": role,
                          "line": tag + f": TMA store panel {pn}"})
        programs[role] = q
    return _schedule(prefix, programs)
