"""The state the hardware keeps while a CTA runs the wgmma pipeline, and the checker that
replays a trace through it.

Per role: the uncommitted wgmmas, the committed groups in flight (a FIFO; ``wait_group N``
retires all but the newest N), the registers touched since the last ``wgmma.fence``, the
mbarrier phases it has observed; per CTA: mbarrier phases with their pending arrivals and
transaction bytes, shared ranges written by the generic proxy (and whether a
``fence.proxy.async`` and a barrier followed), shared ranges written by TMA (and the phase that
completes them).  :class:`PipelineChecker` takes the events one at a time: the rules of
:data:`~refmodel.machine.hazards.HAZARDS` checked at an event look at the state it meets, then
the event updates the state.  :func:`check` returns a :class:`PipelineReport`: the in-flight
groups after every event, the commit groups and the hazards.

In-flight wgmmas have no duration here: a group is in flight from its commit until a
``wait_group`` of its role retires it, which is the only point a program may rely on.
A TMA load's bytes count toward its mbarrier at the trace point of the load; its data is
visible to a role once that role's ``mbarrier.wait`` has observed the phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Iterable

from ..errors import InputError
from ..limits import check_limit
from ..validate import excerpt
from .hazards import HAZARDS, Hazard, HazardKind
from .pipeline_state import Group, _Bar, _RoleState  # noqa: F401 (Group is public here too)
from .trace import OPS, Event, Range, _overlap, parse_trace


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


#: op -> the hazard kinds checked at it, in the order of :data:`HAZARDS`.
_RULES_AT: dict[str, list[HazardKind]] = {op: [k for k in HAZARDS.values() if op in k.ops] for op in OPS}


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

    # -- what the rules read and report through
    def event_name(self, i: int) -> str:
        return self.events[i].name

    def add(self, kind: str, events: Iterable[int], **kw) -> None:
        """Record a hazard of ``kind`` naming ``events``, its message the kind's template filled with ``kw``."""
        evs = tuple(sorted(set(events)))
        self.hazards.append(Hazard(kind, evs, HAZARDS[kind].template.format(**kw)))

    def role(self, name: str) -> _RoleState:
        return self.roles.setdefault(name, _RoleState())

    def describe(self, rs: _RoleState) -> str:
        """A role's wgmma state, for messages."""
        k = len(rs.in_flight)
        parts = [f"{k} committed group(s) in flight"]
        if rs.open is not None:
            parts.append(f"{len(rs.open.mmas)} uncommitted mma_async")
        if rs.last_wait is not None:
            parts.append(f"last wait: {self.event_name(rs.last_wait)}")
        return ", ".join(parts)

    def live_groups(self):
        """(role state, group) of every wgmma not retired, all roles."""
        for rs in self.roles.values():
            yield from ((rs, g) for g in rs.in_flight)
            if rs.open is not None:
                yield rs, rs.open

    def wait_would_block(self, bar: str, parity: int) -> bool:
        """Whether ``mbarrier.wait`` on ``bar`` with ``parity`` would block now."""
        b = self.bars.get(bar)
        return b is None or b.phase % 2 == parity

    # -- the events
    def feed(self, e: Event) -> None:
        """Apply one event (its ``index`` must be the next position)."""
        if not isinstance(e, Event):
            raise InputError(f"the checker takes trace events (refmodel.machine.trace.Event), got {excerpt(e)}")
        if e.index != len(self.events):
            raise InputError(f"events must be fed in order: expected index {len(self.events)}, got {excerpt(e.index)}")
        check_limit("trace_events", len(self.events) + 1, "the events of a trace")
        self.events.append(e)
        rs = self.role(e.role)
        for kind in _RULES_AT.get(e.op, ()):
            kind.check(self, e, rs)
        self._apply(e, rs)
        self.snapshots.append(Snapshot(e.index, e.role, tuple(g.gid for g in rs.in_flight),
                                       len(rs.open.mmas) if rs.open is not None else 0))

    def _apply(self, e: Event, rs: _RoleState) -> None:
        """What the event does to the state."""
        i, op = e.index, e.op
        if op == "wgmma.fence":
            rs.fenced = True
            rs.touched.clear()
        elif op == "mma_async":
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
            while len(rs.in_flight) > e.n:
                rs.in_flight.popleft().retired = i
            rs.last_wait = i
        elif op in ("reg_write", "reg_read"):
            how = "wrote" if op == "reg_write" else "read"
            for r in e.regs:
                rs.touched[r] = (i, how)
        elif op in ("st_shared", "stmatrix"):
            self.generic.append(_GenericWrite(i, e.role, e.smem))
        elif op == "fence.proxy.async":
            for w in self.generic:
                if w.role == e.role:
                    w.fenced = True
        elif op == "bar.sync":
            for w in self.generic:
                w.published = w.published or w.fenced
        elif op == "mbarrier.init":
            self.bars[e.bar] = _Bar(i, e.count, pending=e.count)
        elif op in ("mbarrier.arrive", "mbarrier.arrive_expect_tx"):
            b = self.bars.get(e.bar)
            if b is not None:
                if op == "mbarrier.arrive_expect_tx":
                    b.tx += e.bytes
                    b.expected += e.bytes
                    b.arms.append(i)
                b.roles.add(e.role)
                b.arrivals.append((e.role, i))
                b.pending -= 1
                self._complete_if_done(b, i)
        elif op == "tma_load":
            b = self.bars.get(e.bar)
            self.tma = [w for w in self.tma if _overlap(w.ranges, e.smem) is None]
            self.generic = [w for w in self.generic if _overlap(w.ranges, e.smem) is None]  # replaced
            if b is not None:
                self.tma.append(_TmaWrite(i, e.smem, e.bar, b.phase))
                b.tx -= e.bytes
                b.delivered += e.bytes
                b.loads.append(i)
                self._complete_if_done(b, i)
        elif op == "mbarrier.wait":
            b = self.bars.get(e.bar)
            if b is not None and b.phase % 2 != e.phase:   # the phase of that parity has completed
                ph = b.phase - 1
                rs.last_seen[e.bar] = (ph, i)
                rs.acquired[e.bar] = max(rs.acquired.get(e.bar, -1), ph)
        elif op == "tma_store":
            rs.stores.append((i, e.smem))
        elif op == "bulk_wait_group":
            while len(rs.stores) > e.n:
                rs.stores.popleft()
        # ld_shared only reads: nothing changes

    @staticmethod
    def _complete_if_done(b: _Bar, i: int) -> None:
        if b.pending == 0 and b.tx == 0:
            b.completed.append(({r for r, _ in b.arrivals}, i))
            b.phase += 1
            b.pending, b.expected, b.delivered = b.count, 0, 0
            b.arms, b.loads, b.arrivals = [], [], []

    def finish(self) -> PipelineReport:
        """End-of-trace rules; the report."""
        for rs in self.roles.values():
            if rs.open is not None and rs.open not in self.groups:
                self.groups.append(rs.open)
        for kind in HAZARDS.values():
            if kind.at_end is not None:
                kind.at_end(self)
        self.hazards.sort(key=lambda h: (h.events[-1] if h.events else -1, h.kind))
        return PipelineReport(self.events, self.hazards, self.groups, self.snapshots)


def check(events: Iterable[Event] | str) -> PipelineReport:
    """Run the model over a trace (events, or JSON-lines text)."""
    if isinstance(events, str):
        events = parse_trace(events)
    elif isinstance(events, (bytes, dict)) or not hasattr(events, "__iter__"):
        raise InputError(f"check takes trace events or JSON-lines text, got {excerpt(events)}")
    c = PipelineChecker()
    for e in events:
        c.feed(e)
    return c.finish()
