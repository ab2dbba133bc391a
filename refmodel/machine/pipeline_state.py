"""The pipeline checker's state, on its own so that the checker (:mod:`refmodel.machine.pipeline_check`)
and its hazard rules (:mod:`refmodel.machine.hazards`) both read it without importing each other: a
role's commit groups, its register and barrier view, each mbarrier's phase, and the view of the
checker a hazard rule gets (:class:`CheckerView`)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol


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


@dataclass
class _RoleState:
    fenced: bool = False
    touched: dict = field(default_factory=dict)      # register -> (event index, "read"/"wrote")
    open: Group | None = None
    in_flight: deque = field(default_factory=deque)
    ngroups: int = 0
    acquired: dict = field(default_factory=dict)     # bar -> highest completed phase observed
    last_seen: dict = field(default_factory=dict)    # bar -> (phase, wait event) of the last wait
    last_wait: int | None = None
    stores: deque = field(default_factory=deque)      # (tma_store event, ranges) still reading shared memory

    def live(self) -> list[Group]:
        """The role's groups not retired: committed ones in flight (oldest first), then the open one."""
        return list(self.in_flight) + ([self.open] if self.open is not None else [])


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


class CheckerView(Protocol):
    """What a hazard rule reads of the checker (:class:`refmodel.machine.pipeline_check.PipelineChecker`)."""

    events: list
    roles: dict
    bars: dict
    generic: Any
    bulk: Any
    tma: Any

    def add(self, kind: str, events: Any, **kw: Any) -> None: ...

    def event_name(self, i: int) -> str: ...

    def describe(self, rs: _RoleState) -> str: ...

    def live_groups(self) -> list: ...
