"""The hazard rules of the wgmma pipeline model, as data.

:data:`HAZARDS` maps each hazard kind to a :class:`HazardKind`: its severity, a one-line
summary, the explanation template its findings fill in, and its check -- ``check(checker,
event, role)`` run at each event whose op is in ``ops``, before the event changes the state
(so it sees the state the event meets), and/or ``at_end(checker)`` run once the whole trace has
been fed.  The checks read the state a :class:`~refmodel.machine.pipeline_check.PipelineChecker`
keeps (roles, mbarriers, shared-memory writes) and report through its :meth:`add`.  A finding
is a :class:`Hazard`; :func:`format_hazard` writes it as one line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .pipeline_state import CheckerView as PipelineChecker  # the checker as its rules see it
from .pipeline_state import _Bar, _RoleState
from .trace import Event, Range, _overlap


@dataclass(frozen=True)
class HazardKind:
    """One rule: severity, a one-line summary, the explanation template, and its check."""

    severity: str   # "error" or "warning"
    summary: str
    template: str
    ops: tuple[str, ...] = ()   # the events `check` runs at
    check: Callable[[PipelineChecker, Event, _RoleState], None] | None = field(default=None, repr=False)
    at_end: Callable[[PipelineChecker], None] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Hazard:
    """One finding: its kind (a key of :data:`HAZARDS`), the events involved and an explanation."""

    kind: str
    events: tuple[int, ...]
    message: str

    @property
    def severity(self) -> str:
        return HAZARDS[self.kind].severity


def format_hazard(h: Hazard, events: list[Event]) -> str:
    """One line: severity, kind, events with their trace lines, explanation."""
    where = []
    for i in h.events:
        w = events[i].where
        where.append(f"{i}" + (f" [{w}]" if w else ""))
    return f"{h.severity}: {h.kind} (events {', '.join(where)}): {h.message}"


def _fmt_range(r: Range) -> str:
    return f"{r[0]:#x}..{r[1] - 1:#x}"


# ----------------------------------------------------------------------------- the checks

# registers

def _acc_in_flight(c: PipelineChecker, e: Event, rs: _RoleState) -> None:
    verb = "writes" if e.op == "reg_write" else "reads"
    for g in rs.live():
        hit = [r for r in e.regs if r in g.acc_of]
        if hit:
            c.add("acc_in_flight", [g.acc_of[hit[0]], e.index], ev=e.name, verb=verb, reg=hit[0],
                  mma=c.event_name(g.acc_of[hit[0]]), state=c.describe(rs))


def _a_regs_in_flight(c: PipelineChecker, e: Event, rs: _RoleState) -> None:
    for g in rs.live():
        hit = [r for r in e.regs if r in g.a_regs]
        if hit:
            c.add("a_regs_in_flight", [g.a_regs[hit[0]], e.index], ev=e.name, reg=hit[0],
                  mma=c.event_name(g.a_regs[hit[0]]), state=c.describe(rs))


def _no_fence_before_first_mma(c: PipelineChecker, e: Event, rs: _RoleState) -> None:
    if not rs.fenced:
        c.add("no_fence_before_first_mma", [e.index], ev=e.name, role=e.role)


def _missing_wgmma_fence(c: PipelineChecker, e: Event, rs: _RoleState) -> None:
    if not rs.fenced:
        return  # no fence at all: no_fence_before_first_mma
    for use, regs in (("accumulator", e.acc), ("A fragment", e.a_regs)):
        hit = [r for r in regs if r in rs.touched]
        if hit:
            j, how = rs.touched[hit[0]]
            c.add("missing_wgmma_fence", [j, e.index], ev=e.name, reg=hit[0], use=use,
                  access=f"{c.event_name(j)} {how}")
            return


# commit groups

def _uncommitted_at_wait(c: PipelineChecker, e: Event, rs: _RoleState) -> None:
    if rs.open is not None:
        c.add("uncommitted_at_wait", [rs.open.mmas[0], e.index], ev=e.name, mma=c.event_name(rs.open.mmas[0]))


def _pointless_wait(c: PipelineChecker, e: Event, rs: _RoleState) -> None:
    k = len(rs.in_flight)
    if k <= e.n:
        c.add("pointless_wait", [e.index], ev=e.name, n=e.n, k=k,
              groups=", ".join(g.gid for g in rs.in_flight) or "none")


def _unretired_at_end(c: PipelineChecker) -> None:
    for role, rs in c.roles.items():
        live = rs.live()
        if live:
            mmas = [g.mmas[0] for g in live if g.mmas]
            # an empty group (a commit_group with no mma_async) is named by its commit event
            commits = [g.commit for g in live if not g.mmas and g.commit is not None]
            last = f"; the last wait is {c.event_name(rs.last_wait)}" if rs.last_wait is not None else ""
            named = ", ".join(c.event_name(j) for j in mmas)
            if commits:
                empty = "empty group(s) committed by " + ", ".join(c.event_name(j) for j in commits)
                named = f"{named}; {empty}" if named else empty
            c.add("unretired_at_end", mmas + commits + ([rs.last_wait] if rs.last_wait is not None else []),
                  k=len(live), role=role, mmas=named, last=last)


# shared memory and the two proxies

def _generic_write_async_read(c: PipelineChecker, e: Event, rs: _RoleState) -> None:
    for w in c.generic:
        r = _overlap(e.smem, w.ranges)
        if r is not None and not w.fenced:
            c.add("generic_write_async_read", [w.event, e.index], ev=e.name, rng=_fmt_range(r),
                  writer=c.event_name(w.event), wrole=c.events[w.event].role)


def _no_barrier_after_proxy_fence(c: PipelineChecker, e: Event, rs: _RoleState) -> None:
    for w in c.generic:
        r = _overlap(e.smem, w.ranges)
        if r is not None and w.fenced and w.role != e.role and not w.published:
            c.add("no_barrier_after_proxy_fence", [w.event, e.index], ev=e.name, rng=_fmt_range(r),
                  writer=c.event_name(w.event), wrole=w.role)


def _smem_overwrite_in_flight(c: PipelineChecker, e: Event, rs: _RoleState) -> None:
    seen = set()
    for owner, g in c.live_groups():
        for ranges, mi in g.reads:
            r = _overlap(e.smem, ranges)
            if r is not None and g.gid not in seen:
                seen.add(g.gid)
                c.add("smem_overwrite_in_flight", [mi, e.index], ev=e.name, rng=_fmt_range(r),
                      mma=c.event_name(mi), state=c.describe(owner))


def _smem_overwrite_store_in_flight(c: PipelineChecker, e: Event, rs: _RoleState) -> None:
    for name, owner in c.roles.items():
        for si, ranges in owner.stores:
            r = _overlap(e.smem, ranges)
            if r is not None:
                c.add("smem_overwrite_store_in_flight", [si, e.index], ev=e.name, rng=_fmt_range(r),
                      store=c.event_name(si), role=name)
                break


def _read_before_tma_complete(c: PipelineChecker, e: Event, rs: _RoleState) -> None:
    for w in c.tma:
        if rs.acquired.get(w.bar, -1) >= w.phase:
            continue
        r = _overlap(e.smem, w.ranges)
        if r is not None:
            c.add("read_before_tma_complete", [w.event, e.index], ev=e.name, rng=_fmt_range(r),
                  tma=c.event_name(w.event), role=e.role, ph=w.phase, bar=w.bar)


# mbarriers

def _tx_stuck(b: _Bar) -> bool:
    """All arrivals of the current phase are in, but its transaction count is not back to 0."""
    return b.pending <= 0 and b.tx != 0


def _mbarrier_uninitialized(c: PipelineChecker, e: Event, rs: _RoleState) -> None:
    if c.bars.get(e.bar) is None:
        c.add("mbarrier_uninitialized", [e.index], ev=e.name, bar=e.bar)


def _mbarrier_phase_not_complete(c: PipelineChecker, e: Event, rs: _RoleState) -> None:
    b = c.bars.get(e.bar)
    if b is not None and b.phase % 2 == e.phase and not _tx_stuck(b):  # stuck bytes: expect_tx_mismatch
        tx = f", {b.tx} transaction byte(s) pending" if b.tx else ""
        c.add("mbarrier_phase_not_complete", [e.index], ev=e.name, bar=e.bar, p=e.phase,
              ph=b.phase, pending=b.pending, count=b.count, tx=tx)


def _mbarrier_parity_not_flipped(c: PipelineChecker, e: Event, rs: _RoleState) -> None:
    b = c.bars.get(e.bar)
    if b is None or b.phase % 2 == e.phase:
        return
    ph = b.phase - 1
    prev = rs.last_seen.get(e.bar)
    if prev is not None and prev[0] == ph and ph >= 0:
        c.add("mbarrier_parity_not_flipped", [prev[1], e.index], ev=e.name, ph=ph, bar=e.bar,
              prev=c.event_name(prev[1]))


def _tx_mismatch(c: PipelineChecker, b: _Bar, name: str, at: str, extra: list[int]) -> None:
    b.flagged_tx = True  # one report per barrier
    c.add("expect_tx_mismatch", b.arms + b.loads + extra, ph=b.phase, bar=name, exp=b.expected,
          arms=", ".join(c.event_name(i) for i in b.arms) or "no arrive_expect_tx",
          got=b.delivered, tmas=", ".join(c.event_name(i) for i in b.loads) or "no tma_load", at=at)


def _expect_tx_mismatch(c: PipelineChecker, e: Event, rs: _RoleState) -> None:
    b = c.bars.get(e.bar)
    if b is not None and b.phase % 2 == e.phase and _tx_stuck(b) and not b.flagged_tx:
        _tx_mismatch(c, b, e.bar, f"; {e.name} waits on it forever", [e.index])


def _expect_tx_mismatch_at_end(c: PipelineChecker) -> None:
    for name, b in c.bars.items():
        if _tx_stuck(b) and not b.flagged_tx:
            _tx_mismatch(c, b, name, " (the trace ends with it pending)", [])


def _arrive_count_mismatch(c: PipelineChecker, e: Event, rs: _RoleState) -> None:
    b = c.bars.get(e.bar)
    if b is None:
        return
    prev = [j for r, j in b.arrivals if r == e.role]
    if prev:
        c.add("arrive_count_mismatch", [b.init, prev[0], e.index], detail=(
            f"{e.name} arrives on phase {b.phase} of {e.bar} a second time ({e.role} already "
            f"arrived at {c.event_name(prev[0])}); the count {b.count} of {c.event_name(b.init)} is more "
            f"than the roles that arrive per phase, or an arrive is duplicated"))


def _arrive_count_mismatch_at_end(c: PipelineChecker) -> None:
    for name, b in c.bars.items():
        for roles, j in b.completed:
            missing = sorted(b.roles - roles)
            if missing and b.count < len(b.roles):
                c.add("arrive_count_mismatch", [b.init, j], detail=(
                    f"phase {b.completed.index((roles, j))} of {name} completed at {c.event_name(j)} on the "
                    f"arrivals of {', '.join(sorted(roles))} alone, while {', '.join(missing)} also "
                    f"arrive on it; the count {b.count} of {c.event_name(b.init)} is smaller than the "
                    f"{len(b.roles)} roles that arrive"))
                break


# ----------------------------------------------------------------------------- the table

_ASYNC_READS = ("mma_async", "tma_store")
_BAR_OPS = ("mbarrier.arrive", "mbarrier.arrive_expect_tx", "tma_load", "mbarrier.wait")
_ARRIVES = ("mbarrier.arrive", "mbarrier.arrive_expect_tx")

#: The rules, as data.  Templates are filled with event names (``Event.name``) and details.
HAZARDS: dict[str, HazardKind] = {
    "acc_in_flight": HazardKind(
        "error", "accumulator register read or written while its wgmma is in flight",
        "{ev} {verb} accumulator register {reg} of {mma} while its group is in flight ({state}); "
        "a wait_group that retires the group must come first",
        ("reg_read", "reg_write"), _acc_in_flight),
    "a_regs_in_flight": HazardKind(
        "error", "RS A-fragment register written while the wgmma reading it is in flight",
        "{ev} writes A-fragment register {reg} of {mma} while that wgmma is in flight ({state}); "
        "it may read the new value -- retire its group with wait_group first",
        ("reg_write",), _a_regs_in_flight),
    "no_fence_before_first_mma": HazardKind(
        "error", "the first mma_async of a role has no wgmma.fence before it",
        "{ev} is the first mma_async of {role} and no wgmma.fence precedes it; PTX requires "
        "wgmma.fence before the first wgmma.mma_async of a warpgroup",
        ("mma_async",), _no_fence_before_first_mma),
    "missing_wgmma_fence": HazardKind(
        "error", "registers accessed and then used by mma_async without wgmma.fence in between",
        "{ev} uses register {reg} as {use}, which {access} after the last wgmma.fence; "
        "a wgmma.fence must separate the access from the mma_async",
        ("mma_async",), _missing_wgmma_fence),
    "uncommitted_at_wait": HazardKind(
        "error", "mma_async not committed before a wait_group (the wait does not cover it)",
        "{ev} waits, but {mma} has not been committed (no commit_group since); wait_group only "
        "retires committed groups, so that wgmma is still running after the wait",
        ("wait_group",), _uncommitted_at_wait),
    "pointless_wait": HazardKind(
        "warning", "wait_group N with N >= the groups in flight: nothing retires",
        "{ev} lets up to {n} group(s) stay in flight and only {k} are ({groups}); nothing retires here",
        ("wait_group",), _pointless_wait),
    "unretired_at_end": HazardKind(
        "error", "the trace ends with wgmma groups still in flight",
        "the trace ends with {k} wgmma group(s) of {role} not retired (issued by {mmas}){last}; "
        "wait_group 0 must retire them before the accumulators are used or the warpgroup exits",
        at_end=_unretired_at_end),
    "generic_write_async_read": HazardKind(
        "error", "shared memory written by the generic proxy, then read by the async proxy without fence.proxy.async",
        "{ev} reads shared bytes {rng} through the async proxy, but {writer} wrote them through the "
        "generic proxy with no fence.proxy.async by {wrole} in between",
        _ASYNC_READS, _generic_write_async_read),
    "no_barrier_after_proxy_fence": HazardKind(
        "error", "another role's fenced generic write read by the async proxy without a barrier after the fence",
        "{ev} reads shared bytes {rng} written by {writer} of another role; {wrole} did fence.proxy.async "
        "but no bar.sync followed the fence before this read",
        _ASYNC_READS, _no_barrier_after_proxy_fence),
    "smem_overwrite_in_flight": HazardKind(
        "error", "shared bytes overwritten while an in-flight wgmma may still read them",
        "{ev} overwrites shared bytes {rng} that {mma} reads, and that wgmma is still in flight ({state}); "
        "the slot must be released only after a wait_group retired it",
        ("st_shared", "stmatrix", "tma_load"), _smem_overwrite_in_flight),
    "smem_overwrite_store_in_flight": HazardKind(
        "error", "shared bytes overwritten while a TMA store may still be reading them",
        "{ev} overwrites shared bytes {rng} that {store} may still be reading: {role} has not retired that "
        "store with cp.async.bulk.wait_group.read (bulk_wait_group) yet",
        ("st_shared", "stmatrix", "tma_load"), _smem_overwrite_store_in_flight),
    "read_before_tma_complete": HazardKind(
        "error", "shared bytes read before the reading role waited on the TMA load's mbarrier phase",
        "{ev} reads shared bytes {rng} that {tma} writes, but {role} has not waited on phase {ph} "
        "of {bar} that completes that load",
        _ASYNC_READS + ("ld_shared",), _read_before_tma_complete),
    "mbarrier_uninitialized": HazardKind(
        "error", "an mbarrier used before mbarrier.init",
        "{ev} uses mbarrier {bar}, which no earlier mbarrier.init initialised",
        _BAR_OPS, _mbarrier_uninitialized),
    "mbarrier_phase_not_complete": HazardKind(
        "error", "waiting on an mbarrier phase that has not completed (never armed / arrivals missing)",
        "{ev} waits for the phase of {bar} with parity {p}, but its current phase {ph} has not completed "
        "({pending} of {count} arrival(s) missing{tx}); in this order the wait never returns",
        ("mbarrier.wait",), _mbarrier_phase_not_complete),
    "mbarrier_parity_not_flipped": HazardKind(
        "error", "a role waits twice on the same mbarrier phase without the phase bit flipping",
        "{ev} observes phase {ph} of {bar} again, which {prev} already waited for; the parity was not "
        "flipped, so the wait returns at once on a stale phase",
        ("mbarrier.wait",), _mbarrier_parity_not_flipped),
    "expect_tx_mismatch": HazardKind(
        "error", "the bytes announced by arrive_expect_tx differ from the bytes the TMA loads delivered",
        "phase {ph} of {bar} expects {exp} transaction bytes ({arms}) but its TMA loads delivered {got} "
        "({tmas}); the phase can never complete{at}",
        ("mbarrier.wait",), _expect_tx_mismatch, _expect_tx_mismatch_at_end),
    "arrive_count_mismatch": HazardKind(
        "error", "mbarrier arrival count does not match the roles that arrive per phase",
        "{detail}",
        _ARRIVES, _arrive_count_mismatch, _arrive_count_mismatch_at_end),
}
