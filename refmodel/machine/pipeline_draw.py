"""Drawings of a checked pipeline trace: the seed §2 timeline of wgmma commit groups.

One block per role that issues wgmmas; one column per event of that role (plus the CTA
barriers it takes part in), in trace order.  Per commit group a row: ``m`` its mma_async,
``-`` still being issued, ``C`` its commit_group, ``=`` in flight, ``X`` the wait_group that
retired it (``>`` in flight at the end of the trace).  The ``ops`` row marks every event
(:data:`OP_CHARS`; a wait_group shows its N), ``in flight`` counts the committed groups in
flight after each event, ``hazards`` marks events named by a hazard with ``!``.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from .pipeline import Event, Group, PipelineReport

OP_CHARS = {"wgmma.fence": "F", "mma_async": "m", "commit_group": "C", "reg_read": "r", "reg_write": "w",
            "mbarrier.wait": "b", "mbarrier.arrive": "a", "mbarrier.arrive_expect_tx": "e", "stmatrix": "s",
            "st_shared": "s", "ld_shared": "l", "fence.proxy.async": "P", "bar.sync": "|", "tma_store": "T",
            "tma_load": "L", "mbarrier.init": "i"}
LEGEND = ("ops: F wgmma.fence, m mma_async, C commit_group, 0-9 wait_group N, r/w register read/write, "
          "b mbarrier.wait, a arrive, e arrive_expect_tx, s stmatrix/st.shared, P fence.proxy.async, | bar.sync, "
          "T tma_store, L tma_load; groups: m issue, - issuing, C commit, = in flight, X retired by that wait, "
          "> still in flight at the end")


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


def draw_ascii(rep: PipelineReport) -> str:
    """The timeline as plain text (one character per event column)."""
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
    lines.append(LEGEND)
    return "\n".join(lines) + "\n"


def draw_svg(rep: PipelineReport) -> str:
    """The timeline as a standalone SVG document (hand-written, no plotting library)."""
    cw, rh, lw, pad = 10, 16, 110, 10
    hazard_events = {i for h in rep.hazards for i in h.events}
    blocks = _blocks(rep)
    ncols = max((len(c) for _, c, _ in blocks), default=1)
    body: list[str] = []
    y = pad + 14
    body.append(f'<text x="{pad}" y="{y}" font-weight="bold">wgmma commit groups: issued, in flight, '
                f'retired ({len(rep.events)} events, {len(rep.hazards)} hazard(s))</text>')
    y += 10
    for role, cols, groups in blocks:
        x0 = pad + lw
        top = y + 6
        y += rh + 4
        body.append(f'<text x="{pad}" y="{y}" font-weight="bold">{escape(role)}</text>')
        y += rh
        rows_top = y - rh + 4
        body.append(f'<text x="{pad}" y="{y}">ops</text>')
        for c, e in enumerate(cols):
            color = "#c00" if e.index in hazard_events else "#000"
            body.append(f'<text x="{x0 + c * cw + 2}" y="{y}" fill="{color}">'
                        f'<title>{escape(e.name + (" " + e.where if e.where else ""))}</title>'
                        f'{escape(_op_char(e))}</text>')
        for g in groups:
            y += rh
            body.append(f'<text x="{pad}" y="{y}">{escape(_label(g, rep))}</text>')
            idx = {e.index: c for c, e in enumerate(cols)}
            start = g.mmas[0] if g.mmas else g.commit
            commit = idx.get(g.commit, len(cols) - 1) if g.commit is not None else len(cols) - 1
            end = idx[g.retired] if g.retired is not None else len(cols)
            if start is not None and start in idx and commit > idx[start]:
                body.append(f'<rect x="{x0 + idx[start] * cw}" y="{y - 11}" width="{(commit - idx[start]) * cw}" '
                            f'height="12" fill="#bbbbbb"><title>{escape(g.gid)} issuing</title></rect>')
            if g.commit is not None:
                body.append(f'<rect x="{x0 + commit * cw}" y="{y - 11}" width="{max(end - commit, 0) * cw}" '
                            f'height="12" fill="#4682b4"><title>{escape(g.gid)} in flight</title></rect>')
            if g.retired is not None:
                body.append(f'<rect x="{x0 + end * cw}" y="{y - 13}" width="{cw}" height="16" fill="#c00">'
                            f'<title>retired by {escape(rep.events[g.retired].name)}</title></rect>')
        y += rh
        body.append(f'<text x="{pad}" y="{y}">in flight</text>')
        for c, n in enumerate(_in_flight_counts(rep, role, cols)):
            if n:
                body.append(f'<rect x="{x0 + c * cw + 1}" y="{y - 3 * n}" width="{cw - 2}" height="{3 * n}" '
                            f'fill="#4682b4"/>')
        for c, e in enumerate(cols):
            if e.op in ("wait_group", "wgmma.fence"):
                color = "#c00" if e.op == "wait_group" else "#2a2"
                body.append(f'<line x1="{x0 + c * cw + cw / 2}" y1="{rows_top}" x2="{x0 + c * cw + cw / 2}" '
                            f'y2="{y + 2}" stroke="{color}" stroke-width="0.6" stroke-dasharray="2,2"/>')
        body.append(f'<rect x="{pad / 2}" y="{top}" width="{lw + ncols * cw + pad}" height="{y + 8 - top}" '
                    f'fill="none" stroke="#999"/>')
        y += rh
    y += rh
    for i in range(0, len(LEGEND), 150):
        body.append(f'<text x="{pad}" y="{y}" font-size="9">{escape(LEGEND[i:i + 150])}</text>')
        y += 12
    width = lw + ncols * cw + 3 * pad
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y + pad}" '
            f'font-family="monospace" font-size="11">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n")
