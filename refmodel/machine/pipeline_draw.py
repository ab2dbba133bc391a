"""Drawings of a checked pipeline trace: the seed §2 timeline of wgmma commit groups and the
producer's TMA lane.

One block per role that issues wgmmas; one column per event of that role (plus the CTA
barriers it takes part in), in trace order.  Per commit group a row: ``m`` its mma_async,
``-`` still being issued, ``C`` its commit_group, ``=`` in flight, ``X`` the wait_group that
retired it (``>`` in flight at the end of the trace).  The ``ops`` row marks every event
(:data:`OP_CHARS`; a wait_group shows its N), ``in flight`` counts the committed groups in
flight after each event, ``hazards`` marks events named by a hazard with ``!``.

Then one block per role that issues TMA loads (the producer): per mbarrier its loads complete
on (one ring slot), ``e`` its arrive_expect_tx, ``L`` a tma_load into the slot, ``:`` the slot
holding the loaded data until its next refill.  In the SVG every hazard mark carries the
hazard's explanation as its tooltip (``<title>``), and a colour legend names every fill.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from .hazards import format_hazard
from .pipeline import Event, Group, PipelineReport

OP_CHARS = {"wgmma.fence": "F", "mma_async": "m", "commit_group": "C", "reg_read": "r", "reg_write": "w",
            "mbarrier.wait": "b", "mbarrier.arrive": "a", "mbarrier.arrive_expect_tx": "e", "stmatrix": "s",
            "st_shared": "s", "ld_shared": "l", "fence.proxy.async": "P", "bar.sync": "|", "tma_store": "T",
            "tma_load": "L", "mbarrier.init": "i", "bulk_wait_group": "R"}
LEGEND = ("ops: F wgmma.fence, m mma_async, C commit_group, 0-9 wait_group N, r/w register read/write, "
          "b mbarrier.wait, a arrive, e arrive_expect_tx, s stmatrix/st.shared, P fence.proxy.async, | bar.sync, "
          "T tma_store, R bulk_wait_group (stores' reads retired), L tma_load, i mbarrier.init; groups: m issue, - issuing, C commit, = in flight, X retired by "
          "that wait, > still in flight at the end; TMA slots: e arrive_expect_tx, L tma_load, : slot filled until "
          "its next refill; ! an event named by a hazard")

# SVG colours (each legend entry is drawn only when the picture uses it)
ISSUING, IN_FLIGHT, RETIRED = "#bbbbbb", "#4682b4", "#c00000"
TMA_LOAD, SLOT_FULL, EXPECT = "#d9822b", "#f6d7b0", "#8a5a00"
HAZARD = "#c00000"           # contrast 5.9 on white
FENCE_LINE = "#2a2"


def legend_for(rep: PipelineReport) -> str:
    """:data:`LEGEND` without the clauses for what this drawing does not show (no TMA lane, no hazard)."""
    text = LEGEND
    if not rep.hazards:
        text = text.replace("; ! an event named by a hazard", "")
    if not _tma_blocks(rep):
        text = text.replace("; TMA slots: e arrive_expect_tx, L tma_load, : slot filled until its next refill", "")
    return text


def _op_char(e: Event) -> str:
    if e.op == "wait_group":
        return str(e.n) if e.n < 10 else "W"
    return OP_CHARS.get(e.op, "?")


def _in_role(e: Event, role: str) -> bool:
    return e.role == role or (e.op == "bar.sync" and (e.role == "all" or role in e.role.split(",")))


def _blocks(rep: PipelineReport) -> list[tuple[str, list[Event], list[Group]]]:
    """(role, its columns, its groups) for each role that issues wgmmas, in order of appearance."""
    roles: list[str] = []
    for g in rep.groups:
        if g.role not in roles:
            roles.append(g.role)
    return [(r, [e for e in rep.events if _in_role(e, r)], [g for g in rep.groups if g.role == r]) for r in roles]


def _tma_blocks(rep: PipelineReport) -> list[tuple[str, list[Event], list[str]]]:
    """(role, its columns, the barriers its loads complete on) for each role issuing tma_load."""
    wgmma_roles = {g.role for g in rep.groups}
    roles: list[str] = []
    for e in rep.events:
        if e.op == "tma_load" and e.role not in roles and e.role not in wgmma_roles:
            roles.append(e.role)
    out = []
    for r in roles:
        cols = [e for e in rep.events if _in_role(e, r)]
        bars: list[str] = []
        for e in cols:
            if e.op == "tma_load" and e.bar is not None and e.bar not in bars:
                bars.append(e.bar)
        out.append((r, cols, bars))
    return out


def _slot_cells(bar: str, cols: list[Event]) -> list[str]:
    """One TMA slot row: e expect_tx, L tma_load, - between them, : filled until the next refill."""
    out, state = [], " "
    for e in cols:
        if e.bar == bar and e.op == "mbarrier.arrive_expect_tx":
            out.append("e")
            state = "-"
        elif e.bar == bar and e.op == "tma_load":
            out.append("L")
            state = ":"
        else:
            out.append(state)
    return out


def _group_cells(g: Group, cols: list[Event]) -> list[str]:
    start = g.mmas[0] if g.mmas else g.commit
    out = []
    for e in cols:
        i = e.index
        if start is None or i < start or (g.retired is not None and i > g.retired):
            out.append(" ")
        elif i in g.mmas:
            out.append("m")
        elif g.commit is None or i < g.commit:
            out.append("-")
        elif i == g.commit:
            out.append("C")
        elif i == g.retired:
            out.append("X")
        else:
            out.append("=")
    if g.retired is None and out and out[-1] in "=-":
        out[-1] = ">"
    return out


def _in_flight_counts(rep: PipelineReport, role: str, cols: list[Event]) -> list[int]:
    out, cur = [], 0
    for e in cols:
        if e.role == role:
            cur = len(rep.snapshots[e.index].in_flight)
        out.append(cur)
    return out


def _label(g: Group, rep: PipelineReport) -> str:
    first = rep.events[g.mmas[0]].id if g.mmas else None
    short = g.gid.split(":")[-1]
    return f"{short} {first}" if first else f"{short} (empty)"


def _hazard_text(rep: PipelineReport) -> dict[int, list[str]]:
    """Event index -> the one-line explanations of the hazards that name it."""
    out: dict[int, list[str]] = {}
    for h in rep.hazards:
        line = format_hazard(h, rep.events)
        for i in h.events:
            out.setdefault(i, []).append(line)
    return out


def _wrap(text: str, width: int) -> list[str]:
    """Word-wrap (never inside a word)."""
    lines, cur = [], ""
    for w in text.split():
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    return lines + ([cur] if cur else [])


def _report(rep) -> PipelineReport:
    """The one rule for what the drawings take: a PipelineReport (refmodel.machine.pipeline.check)."""
    if not isinstance(rep, PipelineReport):
        from ..errors import InputError
        from ..validate import _describe

        raise InputError(f"a pipeline drawing takes the PipelineReport that refmodel.machine.pipeline.check returns, "
                         f"got {_describe(rep)}")
    return rep


def draw_ascii(rep: PipelineReport) -> str:
    """The timeline as plain text (one character per event column)."""
    rep = _report(rep)
    hazard_events = {i for h in rep.hazards for i in h.events}
    lines = []
    for role, cols, groups in _blocks(rep):
        lines.append(f"{role}: events {cols[0].index}..{cols[-1].index}, {len(groups)} commit group(s), "
                     f"at most {max(_in_flight_counts(rep, role, cols))} in flight")
        lines.append(f"  {'ops':<12} " + "".join(_op_char(e) for e in cols))
        for g in groups:
            lines.append(f"  {_label(g, rep):<12} " + "".join(_group_cells(g, cols)).rstrip())
        lines.append(f"  {'in flight':<12} " + "".join(str(min(n, 9)) for n in _in_flight_counts(rep, role, cols)))
        if hazard_events & {e.index for e in cols}:
            lines.append(f"  {'hazards':<12} " + "".join("!" if e.index in hazard_events else " "
                                                          for e in cols).rstrip())
        lines.append("")
    if not lines:
        return "no commit groups in this trace\n"
    for role, cols, bars in _tma_blocks(rep):
        loads = sum(e.op == "tma_load" and e.role == role for e in cols)
        lines.append(f"{role} (TMA): events {cols[0].index}..{cols[-1].index}, {loads} tma_load(s) into "
                     f"{len(bars)} slot(s)")
        lines.append(f"  {'ops':<12} " + "".join(_op_char(e) for e in cols))
        for bar in bars:
            lines.append(f"  {'slot ' + bar:<12} " + "".join(_slot_cells(bar, cols)).rstrip())
        if hazard_events & {e.index for e in cols}:
            lines.append(f"  {'hazards':<12} " + "".join("!" if e.index in hazard_events else " "
                                                          for e in cols).rstrip())
        lines.append("")
    lines.append(legend_for(rep))
    return "\n".join(lines) + "\n"


def draw_svg(rep: PipelineReport) -> str:
    """The timeline as a standalone SVG document (hand-written, no plotting library): the
    wgmma blocks, the producer's TMA lane, hazard marks whose tooltips explain each hazard,
    a colour legend and the op-letter key."""
    rep = _report(rep)
    cw, rh, lw, pad = 10, 16, 130, 10
    hazards = _hazard_text(rep)
    blocks = _blocks(rep)
    tma = _tma_blocks(rep)
    ncols = max([len(c) for _, c, _ in blocks] + [len(c) for _, c, _ in tma] + [1])
    width = max(lw + ncols * cw + 3 * pad, 760)
    used: set[str] = set()
    body: list[str] = []
    y = pad + 14
    body.append(f'<text x="{pad}" y="{y}" font-weight="bold" font-size="12">wgmma commit groups: issued, in '
                f'flight, retired ({len(rep.events)} events, {len(rep.hazards)} hazard(s))</text>')
    y += 10

    def ops_row(cols: list[Event], x0: float, y: float) -> None:
        body.append(f'<text x="{pad}" y="{y}">ops</text>')
        for c, e in enumerate(cols):
            tip = e.name + (" " + e.where if e.where else "")
            if e.index in hazards:
                tip += "\n" + "\n".join(hazards[e.index])
                used.add("hazard")
            color = HAZARD if e.index in hazards else "#000"
            body.append(f'<text x="{x0 + c * cw + 2}" y="{y}" fill="{color}">'
                        f'<title>{escape(tip)}</title>{escape(_op_char(e))}</text>')

    def hazard_row(cols: list[Event], x0: float, y: float) -> float:
        if not any(e.index in hazards for e in cols):
            return y
        y += rh
        body.append(f'<text x="{pad}" y="{y}">hazards</text>')
        for c, e in enumerate(cols):
            if e.index in hazards:
                body.append(f'<g class="hazard"><title>{escape(chr(10).join(hazards[e.index]))}</title>'
                            f'<rect x="{x0 + c * cw}" y="{y - 11}" width="{cw}" height="14" fill="#fff" '
                            f'stroke="{HAZARD}" stroke-width="0.8"/>'
                            f'<text x="{x0 + c * cw + 2}" y="{y}" fill="{HAZARD}" font-weight="bold">!</text></g>')
        return y

    for role, cols, groups in blocks:
        x0 = pad + lw
        top = y + 6
        y += rh + 4
        body.append(f'<text x="{pad}" y="{y}" font-weight="bold">{escape(role)}</text>')
        y += rh
        rows_top = y - rh + 4
        ops_row(cols, x0, y)
        for g in groups:
            y += rh
            body.append(f'<text x="{pad}" y="{y}">{escape(_label(g, rep))}</text>')
            idx = {e.index: c for c, e in enumerate(cols)}
            start = g.mmas[0] if g.mmas else g.commit
            commit = idx.get(g.commit, len(cols) - 1) if g.commit is not None else len(cols) - 1
            end = idx[g.retired] if g.retired is not None else len(cols)
            if start is not None and start in idx and commit > idx[start]:
                used.add("issuing")
                body.append(f'<rect x="{x0 + idx[start] * cw}" y="{y - 11}" width="{(commit - idx[start]) * cw}" '
                            f'height="12" fill="{ISSUING}"><title>{escape(g.gid)} issuing</title></rect>')
            if g.commit is not None:
                used.add("in flight")
                body.append(f'<rect x="{x0 + commit * cw}" y="{y - 11}" width="{max(end - commit, 0) * cw}" '
                            f'height="12" fill="{IN_FLIGHT}"><title>{escape(g.gid)} in flight</title></rect>')
            if g.retired is not None:
                used.add("retired")
                body.append(f'<rect x="{x0 + end * cw}" y="{y - 13}" width="{cw}" height="16" fill="{RETIRED}">'
                            f'<title>retired by {escape(rep.events[g.retired].name)}</title></rect>')
        y += rh
        body.append(f'<text x="{pad}" y="{y}">in flight</text>')
        for c, n in enumerate(_in_flight_counts(rep, role, cols)):
            if n:
                body.append(f'<rect x="{x0 + c * cw + 1}" y="{y - 3 * n}" width="{cw - 2}" height="{3 * n}" '
                            f'fill="{IN_FLIGHT}"><title>{n} group(s) in flight</title></rect>')
        y = hazard_row(cols, x0, y)
        for c, e in enumerate(cols):
            if e.op in ("wait_group", "wgmma.fence"):
                used.add(e.op)
                color = RETIRED if e.op == "wait_group" else FENCE_LINE
                body.append(f'<line x1="{x0 + c * cw + cw / 2}" y1="{rows_top}" x2="{x0 + c * cw + cw / 2}" '
                            f'y2="{y + 2}" stroke="{color}" stroke-width="0.6" stroke-dasharray="2,2"/>')
        body.append(f'<rect x="{pad / 2}" y="{top}" width="{lw + ncols * cw + pad}" height="{y + 8 - top}" '
                    f'fill="none" stroke="#999"/>')
        y += rh
    for role, cols, bars in tma:
        x0 = pad + lw
        top = y + 6
        y += rh + 4
        body.append(f'<text x="{pad}" y="{y}" font-weight="bold">{escape(role)} (TMA)</text>')
        y += rh
        ops_row(cols, x0, y)
        for bar in bars:
            y += rh
            body.append(f'<text x="{pad}" y="{y}">slot {escape(bar)}</text>')
            cells = _slot_cells(bar, cols)
            c = 0
            while c < len(cells):
                ch = cells[c]
                if ch in ":-":
                    run = 1
                    while c + run < len(cells) and cells[c + run] == ch:
                        run += 1
                    if ch == ":":
                        used.add("slot")
                        body.append(f'<rect x="{x0 + c * cw}" y="{y - 9}" width="{run * cw}" height="8" '
                                    f'fill="{SLOT_FULL}"><title>{escape(bar)}: slot filled</title></rect>')
                    c += run
                    continue
                if ch == "L":
                    used.add("tma")
                    body.append(f'<rect x="{x0 + c * cw}" y="{y - 11}" width="{cw}" height="12" fill="{TMA_LOAD}">'
                                f'<title>{escape(cols[c].name)}</title></rect>')
                elif ch == "e":
                    used.add("expect")
                    body.append(f'<rect x="{x0 + c * cw + 2}" y="{y - 11}" width="{cw - 4}" height="12" '
                                f'fill="{EXPECT}"><title>{escape(cols[c].name)}</title></rect>')
                c += 1
        y = hazard_row(cols, x0, y)
        body.append(f'<rect x="{pad / 2}" y="{top}" width="{lw + ncols * cw + pad}" height="{y + 8 - top}" '
                    f'fill="none" stroke="#999"/>')
        y += rh
    # colour legend: only what the picture uses
    y += rh
    items = [("issuing", "rect", ISSUING, "group being issued (mma_async before its commit)"),
             ("in flight", "rect", IN_FLIGHT, "committed group in flight; in-flight count bars"),
             ("retired", "rect", RETIRED, "the wait_group that retired the group"),
             ("tma", "rect", TMA_LOAD, "tma_load into the slot"),
             ("expect", "rect", EXPECT, "arrive_expect_tx on the slot's barrier"),
             ("slot", "rect", SLOT_FULL, "slot filled until its next refill"),
             ("wait_group", "line", RETIRED, "wait_group (dashed line)"),
             ("wgmma.fence", "line", FENCE_LINE, "wgmma.fence (dashed line)"),
             ("hazard", "text", HAZARD, "! and red op letters: events named by a hazard (hover for its explanation)")]
    body.append(f'<g class="legend"><text x="{pad}" y="{y}" font-weight="bold">legend</text>')
    y += 6
    lx = pad
    for key, shape, colour, text in items:
        if key not in used:
            continue
        tw = 18 + len(text) * 6.1 + 16
        if lx + tw > width - pad and lx > pad:
            lx, y = pad, y + 16
        if shape == "rect":
            mark = f'<rect x="{lx}" y="{y + 2}" width="12" height="10" fill="{colour}" stroke="#666" stroke-width=".5"/>'
        elif shape == "line":
            mark = (f'<line x1="{lx}" y1="{y + 7}" x2="{lx + 12}" y2="{y + 7}" stroke="{colour}" stroke-width="1.2" '
                    f'stroke-dasharray="2,2"/>')
        else:
            mark = f'<text x="{lx + 3}" y="{y + 11}" fill="{colour}" font-weight="bold">!</text>'
        body.append(f'<g class="item" data-key="{escape(key)}" data-colour="{colour}">{mark}'
                    f'<text x="{lx + 18}" y="{y + 11}" font-size="10">{escape(text)}</text></g>')
        lx += tw
    body.append("</g>")
    y += 32
    for line in _wrap(legend_for(rep), int((width - 2 * pad) / 6.1)):
        body.append(f'<text x="{pad}" y="{y}" font-size="10">{escape(line)}</text>')
        y += 13
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y + pad}" '
            f'viewBox="0 0 {width} {y + pad}" font-family="monospace" font-size="11">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n")
