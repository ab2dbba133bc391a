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

This module is the public face; the model lives in :mod:`.trace` (the format: events, parse,
dump), :mod:`.hazards` (the hazard kinds and their checks), :mod:`.pipeline_check` (the state
and the checker) and :mod:`.mainloop` (the canonical mainloop and its broken variants).
"""

from __future__ import annotations

from ..errors import FormError, InputError  # noqa: F401
from .hazards import HAZARDS, Hazard, HazardKind, _fmt_range, format_hazard  # noqa: F401
from .mainloop import (BROKEN, DEFAULT_INSTR, SMEM_LIMIT, MainloopConfig, _schedule,  # noqa: F401
                       gemm_mainloop_trace, mainloop_config)
from .pipeline_check import (Group, PipelineChecker, PipelineReport, Snapshot, _Bar,  # noqa: F401
                             _GenericWrite, _RoleState, _TmaWrite, check)
from .trace import (COMMON_FIELDS, OPS, WGMMA_OPS, _DERIVED, _REG_NAME, _REG_RANGE, Event,  # noqa: F401
                    Range, TraceError, _bad, _desc_value, _int, _mma_smem, _overlap, addresses_to_ranges,
                    descriptor_ranges, dump_trace, event_from_dict, load_trace, merge_ranges, parse_ranges,
                    parse_regs, parse_trace)
