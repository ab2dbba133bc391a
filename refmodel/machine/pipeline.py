"""The warpgroup pipeline model and hazard checker (seed §1-3: commit/wait groups, the
pipelined timeline, wgmma.fence, fence.proxy.async; mbarrier + TMA rings).

A *trace* is the sequence of pipeline events a CTA performs, every role (producer warp,
consumer warpgroups) interleaved in one program order, written as JSON lines
(``docs/pipeline.md`` is the format reference)::

    {"op": "mbarrier.wait", "bar": "full0", "phase": 0, "t": "consumer0"}
    {"op": "wgmma.fence", "t": "consumer0"}
    {"op": "mma_async", "id": "k0", "acc": "d[0:64]", "smem": [[0, 8192]], "t": "consumer0"}
    {"op": "commit_group", "t": "consumer0"}
    {"op": "wait_group", "n": 1, "t": "consumer0"}

:func:`check` replays the trace through a model of the state the hardware keeps --
per role: uncommitted wgmmas, committed groups in flight (a FIFO; ``wait_group N`` retires
all but the newest N), registers touched since the last ``wgmma.fence``; per CTA: mbarrier
phases with their pending arrivals and transaction bytes, shared ranges written by the
generic proxy (and whether a ``fence.proxy.async`` and a barrier followed), shared ranges
written by TMA (and which roles have acquired them through the mbarrier) -- and returns the
in-flight groups after every event plus a list of :class:`Hazard` (kinds: :data:`HAZARDS`).

In-flight wgmmas have no duration here: a group is in flight from its commit until a
``wait_group`` of its role retires it, which is the only point a program may rely on.
A TMA load's bytes count toward its mbarrier at the trace point of the load; its data is
visible to a role once that role's ``mbarrier.wait`` has observed the phase.

:func:`gemm_mainloop_trace` emits the trace of the canonical warp-specialised GEMM
mainloop (TMA producer warp, ``consumers`` wgmma warpgroups, a ring of ``stages``
128B-swizzled slots with full/empty mbarriers) and three deliberately broken variants.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable

from ..errors import FormError, InputError

Range = tuple[int, int]

#: Largest dynamic shared memory of one Hopper block (227 KiB).
SMEM_LIMIT = 227 * 1024

# ----------------------------------------------------------------------------- the format

#: op -> (required fields, optional fields, what the event is).  Every event may also carry
#: ``"t"`` (the role: thread / warp / warpgroup issuing it, default "main") and ``"line"``
#: (a free source tag such as "gemm.cu:88").
OPS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "wgmma.fence": ((), (), "wgmma.fence.sync.aligned: orders the role's register accesses before "
                    "the mma_async that follow"),
    "mma_async": (("acc",), ("id", "a_regs", "smem", "desc_a", "desc_b", "instr", "trans_a", "trans_b"),
                  "wgmma.mma_async: accumulator registers `acc`, A registers `a_regs` (RS only), "
                  "shared bytes read `smem` and/or derived from `desc_a`/`desc_b` + `instr`"),
    "commit_group": ((), (), "wgmma.commit_group: closes the uncommitted mma_async into one group "
                     "(an empty group if none)"),
    "wait_group": (("n",), (), "wgmma.wait_group N: retires all but the newest N committed groups"),
    "reg_write": (("regs",), (), "an ordinary instruction writes these registers"),
    "reg_read": (("regs",), (), "an ordinary instruction reads these registers (e.g. cvt of the accumulators)"),
    "st_shared": (("smem",), (), "st.shared: generic-proxy write of shared bytes"),
    "stmatrix": (("smem",), (), "stmatrix: generic-proxy write of shared bytes"),
    "ld_shared": (("smem",), (), "ld.shared / ldmatrix: generic-proxy read of shared bytes"),
    "fence.proxy.async": ((), (), "fence.proxy.async.shared::cta: the role's earlier generic writes "
                          "become visible to the async proxy"),
    "bar.sync": ((), (), "bar.sync / __syncthreads: a CTA barrier (the roles taking part are in `t`)"),
    "mbarrier.init": (("bar", "count"), (), "mbarrier.init with an arrival count"),
    "mbarrier.arrive": (("bar",), (), "mbarrier.arrive: one arrival on the current phase"),
    "mbarrier.arrive_expect_tx": (("bar", "bytes"), (), "mbarrier.arrive.expect_tx: expect `bytes` "
                                  "transaction bytes, then one arrival"),
    "tma_load": (("bar", "smem"), ("bytes",), "cp.async.bulk.tensor load: async-proxy write of `smem`, "
                 "completing `bytes` (default: the size of `smem`) on `bar`"),
    "tma_store": (("smem",), (), "cp.async.bulk.tensor store: async-proxy read of `smem`"),
    "mbarrier.wait": (("bar", "phase"), (), "mbarrier.try_wait.parity loop: blocks until the phase "
                      "with parity `phase` (0 or 1) has completed"),
}
COMMON_FIELDS = ("op", "t", "line")
WGMMA_OPS = ("wgmma.fence", "mma_async", "commit_group", "wait_group")
_REG_NAME = re.compile(r"^[A-Za-z_%][A-Za-z_0-9.]*$")
_REG_RANGE = re.compile(r"^([A-Za-z_%][A-Za-z_0-9.]*)\[(\d+):(\d+)\]$")


@dataclass(frozen=True)
class Event:
    """One trace event; ``index`` is its position in the trace (0-based)."""

    index: int
    op: str
    role: str = "main"
    tag: str | None = None          # the "line" source tag
    lineno: int | None = None       # line of the trace file it came from
    id: str | None = None
    acc: tuple[str, ...] = ()
    a_regs: tuple[str, ...] = ()
    regs: tuple[str, ...] = ()
    smem: tuple[Range, ...] = ()    # all shared bytes touched (explicit + derived from descriptors)
    n: int | None = None
    bar: str | None = None
    count: int | None = None
    bytes: int | None = None
    phase: int | None = None
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def name(self) -> str:
        """Short name used in explanations: ``event 12 (mma_async k3 @consumer0)``."""
        what = self.op
        if self.id:
            what += f" {self.id}"
        elif self.op == "wait_group":
            what += f" {self.n}"
        elif self.bar is not None:
            what += f" {self.bar}"
        if self.op == "mbarrier.wait":
            what += f" phase {self.phase}"
        if self.role != "main":
            what += f" @{self.role}"
        return f"event {self.index} ({what})"

    @property
    def where(self) -> str:
        """Trace line and source tag, for messages: ``trace line 13, gemm.cu:88``."""
        parts = []
        if self.lineno is not None:
            parts.append(f"trace line {self.lineno}")
        if self.tag:
            parts.append(self.tag)
        return ", ".join(parts)

    def to_json(self) -> str:
        """The event as one JSON line (the dict it was parsed from, or one built from the fields)."""
        if self.raw:
            return json.dumps(self.raw, separators=(", ", ": "))
        d: dict = {"op": self.op}
        for k in ("id", "acc", "a_regs", "regs", "n", "bar", "count", "bytes", "phase"):
            v = getattr(self, k)
            if v not in (None, ()):
                d[k] = list(v) if isinstance(v, tuple) else v
        if self.smem:
            d["smem"] = [list(r) for r in self.smem]
        if self.role != "main":
            d["t"] = self.role
        if self.tag:
            d["line"] = self.tag
        return json.dumps(d, separators=(", ", ": "))


class TraceError(InputError):
    """A trace line breaks the format (one sentence naming the line and the rule)."""


def _bad(where: str, rule: str) -> TraceError:
    return TraceError(f"{where}: {rule}")


def _int(where: str, name: str, v, lo: int = 0, hi: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _bad(where, f"field {name!r} must be an integer, got {json.dumps(v)}")
    if v < lo or (hi is not None and v > hi):
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise _bad(where, f"field {name!r} must be {rng}, got {v}")
    return v


def parse_regs(where: str, name: str, v) -> tuple[str, ...]:
    """Register names from a list of names / ranges, or one range string ``"d[0:64]"`` (d0..d63)."""
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list) or not items:
        raise _bad(where, f"field {name!r} must be a non-empty list of register names or a range like \"d[0:64]\"")
    out: list[str] = []
    for it in items:
        if not isinstance(it, str):
            raise _bad(where, f"field {name!r}: register names are strings, got {json.dumps(it)}")
        m = _REG_RANGE.match(it)
        if m:
            lo, hi = int(m.group(2)), int(m.group(3))
            if lo >= hi:
                raise _bad(where, f"field {name!r}: register range {it!r} must have start < end")
            out += [f"{m.group(1)}{i}" for i in range(lo, hi)]
        elif _REG_NAME.match(it):
            out.append(it)
        else:
            raise _bad(where, f"field {name!r}: {it!r} is not a register name or a range like \"d[0:64]\"")
    if len(set(out)) != len(out):
        raise _bad(where, f"field {name!r} names a register twice")
    return tuple(out)


def merge_ranges(ranges: Iterable[Range]) -> tuple[Range, ...]:
    """Sorted, coalesced half-open byte ranges."""
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return tuple((a, b) for a, b in out)


def parse_ranges(where: str, v) -> tuple[Range, ...]:
    """``[[start, end), ...]`` byte ranges (half-open, 0 <= start < end)."""
    if not isinstance(v, list) or not v:
        raise _bad(where, "field 'smem' must be a non-empty list of [start, end) byte ranges")
    out = []
    for r in v:
        if (not isinstance(r, list) or len(r) != 2 or any(isinstance(x, bool) or not isinstance(x, int) for x in r)):
            raise _bad(where, f"field 'smem': each range is [start, end) with integer bytes, got {json.dumps(r)}")
        if not 0 <= r[0] < r[1]:
            raise _bad(where, f"field 'smem': range {r} needs 0 <= start < end")
        out.append((r[0], r[1]))
    return merge_ranges(out)


def addresses_to_ranges(addr) -> tuple[Range, ...]:
    """Coalesced byte ranges covering an array of shared addresses."""
    import numpy as np

    a = np.unique(np.asarray(addr, dtype=np.int64).ravel())
    if a.size == 0:
        return ()
    breaks = np.nonzero(np.diff(a) != 1)[0]
    starts = np.concatenate([[a[0]], a[breaks + 1]])
    ends = np.concatenate([a[breaks], [a[-1]]]) + 1
    return tuple((int(s), int(e)) for s, e in zip(starts, ends))


_DERIVED: dict[tuple, tuple[Range, ...]] = {}


def descriptor_ranges(desc: int, rows: int, k: int, elem_bytes: int, major: str = "K") -> tuple[Range, ...]:
    """Shared bytes one wgmma reads through ``desc`` (:func:`refmodel.layouts.descriptor.operand_addresses`)."""
    from ..layouts.descriptor import operand_addresses

    key = (desc, rows, k, elem_bytes, major)
    if key not in _DERIVED:
        _DERIVED[key] = addresses_to_ranges(operand_addresses(desc, rows, k, elem_bytes, major=major))
    return _DERIVED[key]


def _desc_value(where: str, name: str, v) -> int:
    if isinstance(v, str):
        try:
            v = int(v, 0)
        except ValueError:
            raise _bad(where, f"field {name!r} must be a 64-bit descriptor (int or \"0x...\" string), got {v!r}") from None
    return _int(where, name, v, 0, (1 << 64) - 1)


def _mma_smem(where: str, d: dict) -> tuple[Range, ...]:
    """Explicit ranges plus those the descriptors read; at least one source is required (SS needs
    desc_a or smem covering A; RS needs a_regs)."""
    from ..dtypes import element_bytes
    from ..wgmma_forms import M, parse_wgmma

    ranges = list(parse_ranges(where, d["smem"])) if "smem" in d else []
    if "desc_a" in d and "a_regs" in d:
        raise _bad(where, "mma_async takes A from registers (a_regs) or from shared memory (desc_a), not both")
    if "desc_a" in d or "desc_b" in d:
        if "instr" not in d:
            raise _bad(where, "mma_async with desc_a/desc_b needs 'instr' (the wgmma opcode) to derive the bytes read")
        try:
            form = parse_wgmma(d["instr"])
        except (InputError, FormError) as e:
            raise _bad(where, f"field 'instr': {e}") from None
        for name, rows, dt, tr in (("desc_a", M, form.dtype_a, "trans_a"), ("desc_b", form.n, form.dtype_b, "trans_b")):
            if name in d:
                major = "MN" if _int(where, tr, d.get(tr, 0), 0, 1) else "K"
                try:
                    ranges += descriptor_ranges(_desc_value(where, name, d[name]), rows, form.k,
                                                element_bytes(dt), major)
                except InputError as e:
                    if isinstance(e, TraceError):
                        raise
                    raise _bad(where, f"field {name!r}: {e}") from None
    elif "instr" in d:
        raise _bad(where, "field 'instr' is only used with desc_a/desc_b")
    return merge_ranges(ranges)


def event_from_dict(d, index: int, lineno: int | None = None) -> Event:
    """Validate one decoded JSON object and build its :class:`Event`."""
    where = f"trace line {lineno}" if lineno is not None else f"event {index}"
    if not isinstance(d, dict):
        raise _bad(where, "each line must be a JSON object with an \"op\" field")
    op = d.get("op")
    if op not in OPS:
        raise _bad(where, f"unknown op {json.dumps(op)}; ops are {', '.join(OPS)}")
    req, opt, _ = OPS[op]
    for k in req:
        if k not in d:
            raise _bad(where, f"{op} needs field {k!r}")
    allowed = set(req) | set(opt) | set(COMMON_FIELDS)
    for k in d:
        if k not in allowed:
            raise _bad(where, f"unknown field {k!r} for {op} (allowed: {', '.join(sorted(allowed - {'op'}))})")
    kw: dict = {"index": index, "op": op, "lineno": lineno, "raw": dict(d)}
    for k, attr in (("t", "role"), ("line", "tag"), ("id", "id"), ("bar", "bar")):
        if k in d:
            if not isinstance(d[k], str) or not d[k]:
                raise _bad(where, f"field {k!r} must be a non-empty string, got {json.dumps(d[k])}")
            kw[attr] = d[k]
    if "acc" in d:
        kw["acc"] = parse_regs(where, "acc", d["acc"])
    if "a_regs" in d:
        kw["a_regs"] = parse_regs(where, "a_regs", d["a_regs"])
        if set(kw["a_regs"]) & set(kw["acc"]):
            raise _bad(where, "mma_async: a register cannot be both an A fragment and an accumulator")
    if "regs" in d:
        kw["regs"] = parse_regs(where, "regs", d["regs"])
    if op == "mma_async":
        kw["smem"] = _mma_smem(where, d)
        if not kw["smem"] and "a_regs" not in d:
            raise _bad(where, "mma_async must say what it reads: 'smem' ranges or 'desc_b' (+ 'desc_a' or 'a_regs')")
    elif "smem" in d:
        kw["smem"] = parse_ranges(where, d["smem"])
    if "n" in d:
        kw["n"] = _int(where, "n", d["n"], 0)
    if "count" in d:
        kw["count"] = _int(where, "count", d["count"], 1)
    if "phase" in d:
        kw["phase"] = _int(where, "phase", d["phase"], 0, 1)
    if "bytes" in d:
        kw["bytes"] = _int(where, "bytes", d["bytes"], 1 if op == "tma_load" else 0)
    if op == "tma_load":
        size = sum(b - a for a, b in kw["smem"])
        if kw.get("bytes", size) != size:
            raise _bad(where, f"tma_load writes {size} bytes of shared memory ('smem') but says 'bytes': "
                       f"{kw['bytes']}; the bytes a TMA completes are the bytes it writes")
        kw["bytes"] = size
    return Event(**kw)


def parse_trace(text: str) -> list[Event]:
    """Events of a JSON-lines trace (blank lines skipped); a bad line raises :class:`TraceError`."""
    events: list[Event] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise _bad(f"trace line {lineno}", f"not valid JSON ({e.msg} at column {e.colno}); "
                       f"each line holds one event object") from None
        events.append(event_from_dict(d, len(events), lineno))
    return events


def load_trace(path) -> list[Event]:
    """Read and parse a trace file."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"cannot read trace {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"trace {path} is not UTF-8 text; a trace is JSON lines") from None
    return parse_trace(text)


def dump_trace(events: Iterable[Event]) -> str:
    """The JSON-lines text of a trace."""
    return "".join(e.to_json() + "\n" for e in events)


# ----------------------------------------------------------------------------- hazards

@dataclass(frozen=True)
class HazardKind:
    """One rule: severity, a one-line summary, and the explanation template."""

    severity: str   # "error" or "warning"
    summary: str
    template: str


#: The rules, as data.  Templates are filled with event names (``Event.name``) and details.
HAZARDS: dict[str, HazardKind] = {
    "acc_in_flight": HazardKind(
        "error", "accumulator register read or written while its wgmma is in flight",
        "{ev} {verb} accumulator register {reg} of {mma} while its group is in flight ({state}); "
        "a wait_group that retires the group must come first"),
    "a_regs_in_flight": HazardKind(
        "error", "RS A-fragment register written while the wgmma reading it is in flight",
        "{ev} writes A-fragment register {reg} of {mma} while that wgmma is in flight ({state}); "
        "it may read the new value -- retire its group with wait_group first"),
    "no_fence_before_first_mma": HazardKind(
        "error", "the first mma_async of a role has no wgmma.fence before it",
        "{ev} is the first mma_async of {role} and no wgmma.fence precedes it; PTX requires "
        "wgmma.fence before the first wgmma.mma_async of a warpgroup"),
    "missing_wgmma_fence": HazardKind(
        "error", "registers accessed and then used by mma_async without wgmma.fence in between",
        "{ev} uses register {reg} as {use}, which {access} after the last wgmma.fence; "
        "a wgmma.fence must separate the access from the mma_async"),
    "uncommitted_at_wait": HazardKind(
        "error", "mma_async not committed before a wait_group (the wait does not cover it)",
        "{ev} waits, but {mma} has not been committed (no commit_group since); wait_group only "
        "retires committed groups, so that wgmma is still running after the wait"),
    "pointless_wait": HazardKind(
        "warning", "wait_group N with N >= the groups in flight: nothing retires",
        "{ev} lets up to {n} group(s) stay in flight and only {k} are ({groups}); nothing retires here"),
    "unretired_at_end": HazardKind(
        "error", "the trace ends with wgmma groups still in flight",
        "the trace ends with {k} wgmma group(s) of {role} not retired (issued by {mmas}){last}; "
        "wait_group 0 must retire them before the accumulators are used or the warpgroup exits"),
    "generic_write_async_read": HazardKind(
        "error", "shared memory written by the generic proxy, then read by the async proxy without fence.proxy.async",
        "{ev} reads shared bytes {rng} through the async proxy, but {writer} wrote them through the "
        "generic proxy with no fence.proxy.async by {wrole} in between"),
    "no_barrier_after_proxy_fence": HazardKind(
        "error", "another role's fenced generic write read by the async proxy without a barrier after the fence",
        "{ev} reads shared bytes {rng} written by {writer} of another role; {wrole} did fence.proxy.async "
        "but no bar.sync followed the fence before this read"),
    "smem_overwrite_in_flight": HazardKind(
        "error", "shared bytes overwritten while an in-flight wgmma may still read them",
        "{ev} overwrites shared bytes {rng} that {mma} reads, and that wgmma is still in flight ({state}); "
        "the slot must be released only after a wait_group retired it"),
    "read_before_tma_complete": HazardKind(
        "error", "shared bytes read before the reading role waited on the TMA load's mbarrier phase",
        "{ev} reads shared bytes {rng} that {tma} writes, but {role} has not waited on phase {ph} "
        "of {bar} that completes that load"),
    "mbarrier_uninitialized": HazardKind(
        "error", "an mbarrier used before mbarrier.init",
        "{ev} uses mbarrier {bar}, which no earlier mbarrier.init initialised"),
    "mbarrier_phase_not_complete": HazardKind(
        "error", "waiting on an mbarrier phase that has not completed (never armed / arrivals missing)",
        "{ev} waits for the phase of {bar} with parity {p}, but its current phase {ph} has not completed "
        "({pending} of {count} arrival(s) missing{tx}); in this order the wait never returns"),
    "mbarrier_parity_not_flipped": HazardKind(
        "error", "a role waits twice on the same mbarrier phase without the phase bit flipping",
        "{ev} observes phase {ph} of {bar} again, which {prev} already waited for; the parity was not "
        "flipped, so the wait returns at once on a stale phase"),
    "expect_tx_mismatch": HazardKind(
        "error", "the bytes announced by arrive_expect_tx differ from the bytes the TMA loads delivered",
        "phase {ph} of {bar} expects {exp} transaction bytes ({arms}) but its TMA loads delivered {got} "
        "({tmas}); the phase can never complete{at}"),
    "arrive_count_mismatch": HazardKind(
        "error", "mbarrier arrival count does not match the roles that arrive per phase",
        "{detail}"),
}


@dataclass(frozen=True)
class Hazard:
    """One finding: its kind (a key of :data:`HAZARDS`), the events involved and an explanation."""

    kind: str
    events: tuple[int, ...]
    message: str

    @property
    def severity(self) -> str:
        return HAZARDS[self.kind].severity


@dataclass
class Group:
    """One commit group of a role."""

    gid: str
    role: str
    mmas: list[int] = field(default_factory=list)
    acc: set = field(default_factory=set)
    a_regs: dict = field(default_factory=dict)    # register -> mma event index
    acc_of: dict = field(default_factory=dict)    # register -> mma event index (last)
    reads: list = field(default_factory=list)     # (ranges, mma event index)
    commit: int | None = None
    retired: int | None = None


@dataclass(frozen=True)
class Snapshot:
    """The issuing role's wgmma state after one event."""

    index: int
    role: str
    in_flight: tuple[str, ...]   # committed, not retired (oldest first)
    uncommitted: int             # mma_async not yet committed


@dataclass
class PipelineReport:
    """What :func:`check` found."""

    events: list[Event]
    hazards: list[Hazard]
    groups: list[Group]
    snapshots: list[Snapshot]

    @property
    def errors(self) -> list[Hazard]:
        return [h for h in self.hazards if h.severity == "error"]

    @property
    def warnings(self) -> list[Hazard]:
        return [h for h in self.hazards if h.severity == "warning"]

    def kinds(self) -> list[str]:
        return [h.kind for h in self.hazards]

    def in_flight(self, index: int) -> int:
        """Committed groups in flight of event ``index``'s role, after that event."""
        return len(self.snapshots[index].in_flight)


def format_hazard(h: Hazard, events: list[Event]) -> str:
    """One line: severity, kind, events with their trace lines, explanation."""
    where = []
    for i in h.events:
        w = events[i].where
        where.append(f"{i}" + (f" [{w}]" if w else ""))
    return f"{h.severity}: {h.kind} (events {', '.join(where)}): {h.message}"


def _fmt_range(r: Range) -> str:
    return f"{r[0]:#x}..{r[1] - 1:#x}"


def _overlap(a: tuple[Range, ...], b: tuple[Range, ...]) -> Range | None:
    """First overlapping interval of two coalesced range lists."""
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            return (lo, hi)
        if a[i][1] <= b[j][1]:
            i += 1
        else:
            j += 1
    return None


@dataclass
class _RoleState:
    fenced: bool = False
    touched: dict = field(default_factory=dict)      # register -> (event index, "read"/"written")
    open: Group | None = None
    in_flight: deque = field(default_factory=deque)
    ngroups: int = 0
    acquired: dict = field(default_factory=dict)     # bar -> highest completed phase observed
    last_seen: dict = field(default_factory=dict)    # bar -> (phase, wait event) of the last wait
    last_wait: int | None = None


@dataclass
class _Bar:
    init: int
    count: int
    phase: int = 0                 # phases completed so far = number of the current phase
    pending: int = 0
    tx: int = 0
    expected: int = 0
    delivered: int = 0
    arms: list = field(default_factory=list)        # expect_tx events of the current phase
    loads: list = field(default_factory=list)       # tma_load events of the current phase
    arrivals: list = field(default_factory=list)    # (role, event) of the current phase
    completed: list = field(default_factory=list)   # per completed phase: (roles, completing event)
    roles: set = field(default_factory=set)
    flagged_tx: bool = False


@dataclass
class _GenericWrite:
    event: int
    role: str
    ranges: tuple[Range, ...]
    fenced: bool = False
    published: bool = False


@dataclass
class _TmaWrite:
    event: int
    ranges: tuple[Range, ...]
    bar: str
    phase: int


class PipelineChecker:
    """Incremental checker: :meth:`feed` events in trace order, then :meth:`finish`."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.hazards: list[Hazard] = []
        self.groups: list[Group] = []
        self.snapshots: list[Snapshot] = []
        self.roles: dict[str, _RoleState] = {}
        self.bars: dict[str, _Bar] = {}
        self.generic: list[_GenericWrite] = []
        self.tma: list[_TmaWrite] = []

    # -- helpers
    def _ev(self, i: int) -> str:
        return self.events[i].name

    def _add(self, kind: str, events: Iterable[int], **kw) -> None:
        evs = tuple(sorted(set(events)))
        self.hazards.append(Hazard(kind, evs, HAZARDS[kind].template.format(**kw)))

    def _role(self, name: str) -> _RoleState:
        return self.roles.setdefault(name, _RoleState())

    def _state(self, rs: _RoleState) -> str:
        k = len(rs.in_flight)
        parts = [f"{k} committed group(s) in flight"]
        if rs.open is not None:
            parts.append(f"{len(rs.open.mmas)} uncommitted mma_async")
        if rs.last_wait is not None:
            parts.append(f"last wait: {self._ev(rs.last_wait)}")
        return ", ".join(parts)

    def _live_groups(self):
        """(role state, group) of every wgmma not retired, all roles."""
        for rs in self.roles.values():
            yield from ((rs, g) for g in rs.in_flight)
            if rs.open is not None:
                yield rs, rs.open

    def wait_would_block(self, bar: str, parity: int) -> bool:
        """Whether ``mbarrier.wait`` on ``bar`` with ``parity`` would block now."""
        b = self.bars.get(bar)
        return b is None or b.phase % 2 == parity

    # -- barrier accounting
    def _complete_if_done(self, b: _Bar, i: int) -> None:
        if b.pending == 0 and b.tx == 0:
            b.completed.append(({r for r, _ in b.arrivals}, i))
            b.phase += 1
            b.pending, b.expected, b.delivered = b.count, 0, 0
            b.arms, b.loads, b.arrivals = [], [], []

    def _bar(self, e: Event) -> _Bar | None:
        b = self.bars.get(e.bar)
        if b is None:
            self._add("mbarrier_uninitialized", [e.index], ev=e.name, bar=e.bar)
        return b

    def _tx_mismatch(self, b: _Bar, name: str, at: str, extra: list[int]) -> None:
        b.flagged_tx = True
        self._add("expect_tx_mismatch", b.arms + b.loads + extra, ph=b.phase, bar=name, exp=b.expected,
                  arms=", ".join(self._ev(i) for i in b.arms) or "no arrive_expect_tx",
                  got=b.delivered, tmas=", ".join(self._ev(i) for i in b.loads) or "no tma_load", at=at)

    # -- shared memory
    def _async_read(self, e: Event) -> None:
        for w in self.generic:
            r = _overlap(e.smem, w.ranges)
            if r is None:
                continue
            if not w.fenced:
                self._add("generic_write_async_read", [w.event, e.index], ev=e.name, rng=_fmt_range(r),
                          writer=self._ev(w.event), wrole=self.events[w.event].role)
            elif w.role != e.role and not w.published:
                self._add("no_barrier_after_proxy_fence", [w.event, e.index], ev=e.name, rng=_fmt_range(r),
                          writer=self._ev(w.event), wrole=w.role)
        self._tma_read(e)

    def _tma_read(self, e: Event) -> None:
        rs = self._role(e.role)
        for w in self.tma:
            if rs.acquired.get(w.bar, -1) >= w.phase:
                continue
            r = _overlap(e.smem, w.ranges)
            if r is not None:
                self._add("read_before_tma_complete", [w.event, e.index], ev=e.name, rng=_fmt_range(r),
                          tma=self._ev(w.event), role=e.role, ph=w.phase, bar=w.bar)

    def _overwrite(self, e: Event) -> None:
        seen = set()
        for rs, g in self._live_groups():
            for ranges, mi in g.reads:
                r = _overlap(e.smem, ranges)
                if r is not None and g.gid not in seen:
                    seen.add(g.gid)
                    self._add("smem_overwrite_in_flight", [mi, e.index], ev=e.name, rng=_fmt_range(r),
                              mma=self._ev(mi), state=self._state(rs))

    def _regs(self, e: Event, verb: str) -> None:
        rs = self._role(e.role)
        groups = list(rs.in_flight) + ([rs.open] if rs.open is not None else [])
        for g in groups:
            hit = [r for r in e.regs if r in g.acc_of]
            if hit:
                self._add("acc_in_flight", [g.acc_of[hit[0]], e.index], ev=e.name, verb=verb, reg=hit[0],
                          mma=self._ev(g.acc_of[hit[0]]), state=self._state(rs))
            if verb == "writes":
                hit = [r for r in e.regs if r in g.a_regs]
                if hit:
                    self._add("a_regs_in_flight", [g.a_regs[hit[0]], e.index], ev=e.name, reg=hit[0],
                              mma=self._ev(g.a_regs[hit[0]]), state=self._state(rs))
        for r in e.regs:
            rs.touched[r] = (e.index, "read" if verb == "reads" else "wrote")

    # -- the events
    def feed(self, e: Event) -> None:
        """Apply one event (its ``index`` must be the next position)."""
        if e.index != len(self.events):
            raise InputError(f"events must be fed in order: expected index {len(self.events)}, got {e.index}")
        self.events.append(e)
        rs = self._role(e.role)
        i, op = e.index, e.op
        if op == "wgmma.fence":
            rs.fenced = True
            rs.touched.clear()
        elif op == "mma_async":
            if not rs.fenced:
                self._add("no_fence_before_first_mma", [i], ev=e.name, role=e.role)
            else:
                for use, regs in (("accumulator", e.acc), ("A fragment", e.a_regs)):
                    hit = [r for r in regs if r in rs.touched]
                    if hit:
                        j, how = rs.touched[hit[0]]
                        self._add("missing_wgmma_fence", [j, i], ev=e.name, reg=hit[0], use=use,
                                  access=f"{self._ev(j)} {how}")
                        break
            self._async_read(e)
            if rs.open is None:
                rs.open = Group(f"{e.role}:g{rs.ngroups}", e.role)
                rs.ngroups += 1
            g = rs.open
            g.mmas.append(i)
            g.acc |= set(e.acc)
            g.acc_of.update({r: i for r in e.acc})
            g.a_regs.update({r: i for r in e.a_regs})
            if e.smem:
                g.reads.append((e.smem, i))
        elif op == "commit_group":
            g = rs.open or Group(f"{e.role}:g{rs.ngroups}", e.role)
            if rs.open is None:
                rs.ngroups += 1
            g.commit = i
            rs.open = None
            rs.in_flight.append(g)
            self.groups.append(g)
        elif op == "wait_group":
            if rs.open is not None:
                self._add("uncommitted_at_wait", [rs.open.mmas[0], i], ev=e.name, mma=self._ev(rs.open.mmas[0]))
            k = len(rs.in_flight)
            if k <= e.n:
                self._add("pointless_wait", [i], ev=e.name, n=e.n, k=k,
                          groups=", ".join(g.gid for g in rs.in_flight) or "none")
            while len(rs.in_flight) > e.n:
                rs.in_flight.popleft().retired = i
            rs.last_wait = i
        elif op == "reg_write":
            self._regs(e, "writes")
        elif op == "reg_read":
            self._regs(e, "reads")
        elif op in ("st_shared", "stmatrix"):
            self._overwrite(e)
            self.generic.append(_GenericWrite(i, e.role, e.smem))
        elif op == "ld_shared":
            self._tma_read(e)
        elif op == "fence.proxy.async":
            for w in self.generic:
                if w.role == e.role:
                    w.fenced = True
        elif op == "bar.sync":
            for w in self.generic:
                w.published = w.published or w.fenced
        elif op == "tma_store":
            self._async_read(e)
        elif op == "mbarrier.init":
            self.bars[e.bar] = _Bar(i, e.count, pending=e.count)
        elif op in ("mbarrier.arrive", "mbarrier.arrive_expect_tx"):
            b = self._bar(e)
            if b is not None:
                if op == "mbarrier.arrive_expect_tx":
                    b.tx += e.bytes
                    b.expected += e.bytes
                    b.arms.append(i)
                prev = [j for r, j in b.arrivals if r == e.role]
                if prev:
                    self._add("arrive_count_mismatch", [b.init, prev[0], i], detail=(
                        f"{e.name} arrives on phase {b.phase} of {e.bar} a second time ({e.role} already "
                        f"arrived at {self._ev(prev[0])}); the count {b.count} of {self._ev(b.init)} is more "
                        f"than the roles that arrive per phase, or an arrive is duplicated"))
                b.roles.add(e.role)
                b.arrivals.append((e.role, i))
                b.pending -= 1
                self._complete_if_done(b, i)
        elif op == "tma_load":
            b = self._bar(e)
            self._overwrite(e)
            self.tma = [w for w in self.tma if _overlap(w.ranges, e.smem) is None]
            self.generic = [w for w in self.generic if _overlap(w.ranges, e.smem) is None]  # replaced
            if b is not None:
                self.tma.append(_TmaWrite(i, e.smem, e.bar, b.phase))
                b.tx -= e.bytes
                b.delivered += e.bytes
                b.loads.append(i)
                self._complete_if_done(b, i)
        elif op == "mbarrier.wait":
            b = self._bar(e)
            if b is not None:
                if b.phase % 2 == e.phase:
                    if b.pending <= 0 and b.tx != 0 and not b.flagged_tx:
                        self._tx_mismatch(b, e.bar, f"; {e.name} waits on it forever", [i])
                    elif not (b.pending <= 0 and b.tx != 0):
                        tx = f", {b.tx} transaction byte(s) pending" if b.tx else ""
                        self._add("mbarrier_phase_not_complete", [i], ev=e.name, bar=e.bar, p=e.phase,
                                  ph=b.phase, pending=b.pending, count=b.count, tx=tx)
                else:
                    ph = b.phase - 1
                    prev = rs.last_seen.get(e.bar)
                    if prev is not None and prev[0] == ph and ph >= 0:
                        self._add("mbarrier_parity_not_flipped", [prev[1], i], ev=e.name, ph=ph, bar=e.bar,
                                  prev=self._ev(prev[1]))
                    rs.last_seen[e.bar] = (ph, i)
                    rs.acquired[e.bar] = max(rs.acquired.get(e.bar, -1), ph)
        self.snapshots.append(Snapshot(i, e.role, tuple(g.gid for g in rs.in_flight),
                                       len(rs.open.mmas) if rs.open is not None else 0))

    def finish(self) -> PipelineReport:
        """End-of-trace rules; the report."""
        for role, rs in self.roles.items():
            live = list(rs.in_flight) + ([rs.open] if rs.open is not None else [])
            if live:
                if rs.open is not None and rs.open not in self.groups:
                    self.groups.append(rs.open)
                mmas = [g.mmas[0] for g in live if g.mmas]
                last = f"; the last wait is {self._ev(rs.last_wait)}" if rs.last_wait is not None else ""
                self._add("unretired_at_end", mmas + ([rs.last_wait] if rs.last_wait is not None else []),
                          k=len(live), role=role, mmas=", ".join(self._ev(j) for j in mmas) or "empty groups",
                          last=last)
        for name, b in self.bars.items():
            if b.pending <= 0 and b.tx != 0 and not b.flagged_tx:
                self._tx_mismatch(b, name, " (the trace ends with it pending)", [])
            for roles, j in b.completed:
                missing = sorted(b.roles - roles)
                if missing and b.count < len(b.roles):
                    self._add("arrive_count_mismatch", [b.init, j], detail=(
                        f"phase {b.completed.index((roles, j))} of {name} completed at {self._ev(j)} on the "
                        f"arrivals of {', '.join(sorted(roles))} alone, while {', '.join(missing)} also "
                        f"arrive on it; the count {b.count} of {self._ev(b.init)} is smaller than the "
                        f"{len(b.roles)} roles that arrive"))
                    break
        self.hazards.sort(key=lambda h: (h.events[-1], h.kind))
        return PipelineReport(self.events, self.hazards, self.groups, self.snapshots)


def check(events: Iterable[Event] | str) -> PipelineReport:
    """Run the model over a trace (events, or JSON-lines text)."""
    if isinstance(events, str):
        events = parse_trace(events)
    c = PipelineChecker()
    for e in events:
        c.feed(e)
    return c.finish()


# ----------------------------------------------------------------------------- the canonical mainloop

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
        if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
            raise InputError(f"{name} must be an int in {lo}..{hi if hi is not None else 'inf'}, got {v!r}")
        return v
    pos("stages", stages, 1, 32)
    pos("k_iters", k_iters, 1, 4096)
    pos("wait_depth", wait_depth, 0, 7)
    pos("consumers", consumers, 1, 4)
    pos("smem_base", smem_base, 0)
    if out_bytes not in (1, 2, 4):
        raise InputError(f"out_bytes must be 1, 2 or 4, got {out_bytes!r}")
    if promote_every is not None:
        pos("promote_every", promote_every, 1)
    if smem_base % 1024:
        raise InputError(f"smem_base must be 1024-byte aligned (the 128B swizzle pattern), got {smem_base:#x}")
    if wait_depth >= stages:
        raise InputError(f"wait_depth {wait_depth} must be < stages {stages}: a consumer keeps wait_depth + 1 "
                         f"slots busy, so fewer stages deadlock the ring")
    cfg = MainloopConfig(instr, stages, k_iters, wait_depth, consumers, promote_every, smem_base, out_bytes)
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
    if broken is not None and broken not in BROKEN:
        raise InputError(f"broken must be one of {', '.join(BROKEN)} (or None), got {broken!r}")
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
