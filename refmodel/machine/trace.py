"""The pipeline trace format: the events a CTA performs, one JSON object per line.

The events of every role (producer warp, consumer warpgroups) are interleaved in one program order::

    {"op": "mbarrier.wait", "bar": "full0", "phase": 0, "t": "consumer0"}
    {"op": "wgmma.fence", "t": "consumer0"}
    {"op": "mma_async", "id": "k0", "acc": "d[0:64]", "smem": [[0, 8192]], "t": "consumer0"}
    {"op": "commit_group", "t": "consumer0"}
    {"op": "wait_group", "n": 1, "t": "consumer0"}

:data:`OPS` lists the event types with their fields; :func:`event_from_dict` validates one
line into an :class:`Event` (a bad line is one :class:`TraceError` sentence naming the line and
the rule), :func:`parse_trace` / :func:`load_trace` read a trace and :func:`dump_trace` writes
it.  Shared memory is half-open byte ranges; an ``mma_async`` may give its operands as wgmma
descriptors, whose bytes are derived through :func:`refmodel.layouts.descriptor.operand_addresses`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Iterable

from ..errors import FormError, InputError
from ..limits import LIMITS, check_limit, limit
from ..validate import check_json_text, excerpt, json_depth

Range = tuple[int, int]

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
    "tma_store": (("smem",), (), "cp.async.bulk.tensor store (with its bulk commit_group): async-proxy read "
                  "of `smem`, which may go on until a bulk_wait_group of the role retires it"),
    "bulk_wait_group": (("n",), (), "cp.async.bulk.wait_group[.read] N: the role's TMA stores beyond the newest N "
                        "have finished reading shared memory"),
    "mbarrier.wait": (("bar", "phase"), (), "mbarrier.try_wait.parity loop: blocks until the phase "
                      "with parity `phase` (0 or 1) has completed"),
}
COMMON_FIELDS = ("op", "t", "line")
WGMMA_OPS = ("wgmma.fence", "mma_async", "commit_group", "wait_group")
_REG_NAME = re.compile(r"^[A-Za-z_%][A-Za-z_0-9.]*$")
_REG_RANGE = re.compile(r"^([A-Za-z_%][A-Za-z_0-9.]*)\[(\d+):(\d+)\]$")
MAX_EVENTS = limit("trace_events")
MAX_REG_RANGE = limit("trace_reg_range")
MAX_REG_INDEX = limit("trace_reg_index")


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
        elif self.op in ("wait_group", "bulk_wait_group"):
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


def _show(v) -> str:
    """A JSON value in a message, cut to a short excerpt."""
    try:
        text = json.dumps(v)
    except (TypeError, ValueError):
        return excerpt(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _int(where: str, name: str, v, lo: int = 0, hi: int | None = None, rule: str = "") -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _bad(where, f"field {name!r} must be an integer, got {_show(v)}")
    if v < lo or (hi is not None and v > hi):
        rng = f"{lo}..{hi}" if hi is not None and (v > hi or hi - lo < 8) else f">= {lo}"
        raise _bad(where, f"field {name!r} must be {rng}{' (' + rule + ')' if rule else ''}, got {excerpt(v)}")
    return v


def _flag01(where: str, name: str, v) -> int:
    """A JSON flag: true/false or 0/1."""
    if isinstance(v, bool) or (isinstance(v, int) and v in (0, 1)):
        return int(v)
    raise _bad(where, f"field {name!r} must be 0 or 1 (or true/false), got {_show(v)}")


def parse_regs(where: str, name: str, v) -> tuple[str, ...]:
    """Register names from a list of names / ranges, or one range string ``"d[0:64]"`` (d0..d63)."""
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list) or not items:
        raise _bad(where, f"field {name!r} must be a non-empty list of register names or a range like \"d[0:64]\"")
    cap = LIMITS["regs_per_thread"]
    if len(items) > cap.value:
        raise _bad(where, f"field {name!r} names {len(items)} registers, more than the {cap.value} a thread has "
                   f"(limit 'regs_per_thread': {cap.reason})")
    out: list[str] = []
    for it in items:
        if not isinstance(it, str):
            raise _bad(where, f"field {name!r}: register names are strings, got {_show(it)}")
        if len(it) > 64:
            raise _bad(where, f"field {name!r}: {excerpt(it)} is not a register name (names are at most 64 characters)")
        m = _REG_RANGE.match(it)
        if m:
            short = len(m.group(2)) <= 9 and len(m.group(3)) <= 9
            lo, hi = (int(m.group(2)), int(m.group(3))) if short else (0, MAX_REG_INDEX + 1)
            if short and lo >= hi:
                raise _bad(where, f"field {name!r}: register range {it!r} must have start < end")
            if short and hi - lo > MAX_REG_RANGE:
                raise _bad(where, f"field {name!r}: register range {it!r} names {hi - lo} registers, at most "
                           f"{MAX_REG_RANGE} (limit 'trace_reg_range': {LIMITS['trace_reg_range'].reason})")
            if hi > MAX_REG_INDEX:
                raise _bad(where, f"field {name!r}: register range {it!r} numbers registers beyond {MAX_REG_INDEX} "
                           f"(limit 'trace_reg_index': {LIMITS['trace_reg_index'].reason})")
            out += [f"{m.group(1)}{i}" for i in range(lo, hi)]
        elif _REG_NAME.match(it):
            out.append(it)
        else:
            raise _bad(where, f"field {name!r}: {it!r} is not a register name or a range like \"d[0:64]\"")
        if len(out) > cap.value:
            raise _bad(where, f"field {name!r} names more than the {cap.value} registers a thread has "
                       f"(limit 'regs_per_thread': {cap.reason})")
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
    top = limit("trace_address")
    out = []
    for r in v:
        if (not isinstance(r, list) or len(r) != 2 or any(isinstance(x, bool) or not isinstance(x, int) for x in r)):
            raise _bad(where, f"field 'smem': each range is [start, end) with integer bytes, got {_show(r)}")
        if not 0 <= r[0] < r[1]:
            raise _bad(where, f"field 'smem': range {_show(r)} needs 0 <= start < end")
        if r[1] > top:
            raise _bad(where, f"field 'smem': range {_show(r)} ends past 2**32 (limit 'trace_address': "
                       f"{LIMITS['trace_address'].reason})")
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
        text = v
        try:
            v = int(text, 0) if len(text) <= 24 else None   # 0x + 16 hex digits, or 20 decimal digits
        except ValueError:
            v = None
        if v is None:
            raise _bad(where, f"field {name!r} must be a 64-bit descriptor (int or \"0x...\" string), "
                       f"got {excerpt(text)}")
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
        if not isinstance(d["instr"], str) or len(d["instr"]) > limit("instr_chars"):
            raise _bad(where, f"field 'instr' must be a wgmma opcode (a string of at most {limit('instr_chars')} "
                       f"characters), got {_show(d['instr'])}")
        try:
            form = parse_wgmma(d["instr"])
        except (InputError, FormError) as e:
            raise _bad(where, f"field 'instr': {e}") from None
        for name, rows, dt, tr in (("desc_a", M, form.dtype_a, "trans_a"), ("desc_b", form.n, form.dtype_b, "trans_b")):
            if name in d:
                major = "MN" if _flag01(where, tr, d.get(tr, 0)) else "K"
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
    try:  # roles, tags, ids, barrier names are printed and written: Unicode text only
        check_json_text(d, where)
    except InputError as e:
        raise TraceError(str(e)) from None
    op = d.get("op")
    if op not in OPS:
        raise _bad(where, f"unknown op {_show(op)}; ops are {', '.join(OPS)}")
    req, opt, _ = OPS[op]
    for k in req:
        if k not in d:
            raise _bad(where, f"{op} needs field {k!r}")
    allowed = set(req) | set(opt) | set(COMMON_FIELDS)
    for k in d:
        if k not in allowed:
            raise _bad(where, f"unknown field {excerpt(k)} for {op} (allowed: {', '.join(sorted(allowed - {'op'}))})")
    kw: dict = {"index": index, "op": op, "lineno": lineno, "raw": dict(d)}
    for k, attr in (("t", "role"), ("line", "tag"), ("id", "id"), ("bar", "bar")):
        if k in d:
            if not isinstance(d[k], str) or not d[k]:
                raise _bad(where, f"field {k!r} must be a non-empty string, got {_show(d[k])}")
            if len(d[k]) > 256:
                raise _bad(where, f"field {k!r} must be at most 256 characters, got {excerpt(d[k])}")
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
    for tr in ("trans_a", "trans_b"):
        if tr in d:
            _flag01(where, tr, d[tr])
    tx = limit("mbarrier_count")
    if "n" in d:
        kw["n"] = _int(where, "n", d["n"], 0, limit("wait_group_n"), "wgmma.wait_group N")
    if "count" in d:
        kw["count"] = _int(where, "count", d["count"], 1, tx, "an mbarrier arrival count is a 20-bit field")
    if "phase" in d:
        kw["phase"] = _int(where, "phase", d["phase"], 0, 1)
    if "bytes" in d:
        kw["bytes"] = _int(where, "bytes", d["bytes"], 1 if op == "tma_load" else 0, tx,
                           "an mbarrier's transaction count is a 20-bit field")
    if op == "tma_load":
        size = sum(b - a for a, b in kw["smem"])
        if kw.get("bytes", size) != size:
            raise _bad(where, f"tma_load writes {size} bytes of shared memory ('smem') but says 'bytes': "
                       f"{kw['bytes']}; the bytes a TMA completes are the bytes it writes")
        kw["bytes"] = size
    return Event(**kw)


def split_lines(text: str) -> list[str]:
    """The lines of a JSON-lines text: split on "\\n" only (a trailing "\\r" dropped), so a string
    holding U+2028, U+2029, U+0085 or a form feed -- valid inside JSON -- stays one line
    (``str.splitlines`` would cut it)."""
    lines = text.split("\n")
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def _parse_line(line: str, lineno: int):
    where = f"trace line {lineno}"
    lim = LIMITS["trace_line_chars"]
    if len(line) > lim.value:
        raise _bad(where, f"the line has {len(line)} characters, more than {lim.value} "
                   f"(limit 'trace_line_chars': {lim.reason})")
    depth = LIMITS["json_depth"]
    if json_depth(line) > depth.value:
        raise _bad(where, f"the JSON nests deeper than {depth.value} levels (limit 'json_depth': {depth.reason})")
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise _bad(where, f"not valid JSON ({e.msg} at column {e.colno}); each line holds one event object") from None
    except (ValueError, RecursionError) as e:   # e.g. an integer of more than 4300 digits
        raise _bad(where, f"not valid JSON ({str(e)[:80]}); each line holds one event object") from None


def parse_trace(text: str) -> list[Event]:
    """Events of a JSON-lines trace (blank lines skipped); a bad line raises :class:`TraceError`.
    Lines are split on "\\n" only (:func:`split_lines`); sizes are bounded by :mod:`refmodel.limits`
    (``trace_bytes``, ``trace_line_chars``, ``trace_events``, ``json_depth``)."""
    if not isinstance(text, str):
        raise TraceError(f"a trace is JSON-lines text, got {excerpt(text)}")
    check_limit("trace_bytes", len(text), "a trace (characters)")
    events: list[Event] = []
    for lineno, line in enumerate(split_lines(text), 1):
        if not line.strip():
            continue
        d = _parse_line(line, lineno)
        if len(events) >= MAX_EVENTS:
            raise _bad(f"trace line {lineno}", f"a trace has at most {MAX_EVENTS} events "
                       f"(limit 'trace_events': {LIMITS['trace_events'].reason})")
        events.append(event_from_dict(d, len(events), lineno))
    return events


def load_trace(path) -> list[Event]:
    """Read and parse a trace file (at most ``trace_bytes`` characters are read)."""
    cap = limit("trace_bytes")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(cap + 1)
    except UnicodeDecodeError:
        raise InputError(f"trace {excerpt(str(path))} is not UTF-8 text; a trace is JSON lines") from None
    except OSError as e:
        raise InputError(f"cannot read trace {excerpt(str(path))}: {e.strerror or e}") from None
    except (TypeError, ValueError) as e:   # not a path at all, or a NUL in it
        raise InputError(f"cannot read trace {excerpt(path)}: {str(e)[:80]}") from None
    if len(text) > cap:
        check_limit("trace_bytes", len(text), f"trace {excerpt(str(path))} (characters)")
    return parse_trace(text)


def dump_trace(events: Iterable[Event]) -> str:
    """The JSON-lines text of a trace."""
    return "".join(e.to_json() + "\n" for e in events)


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
