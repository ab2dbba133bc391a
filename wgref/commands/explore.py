"""``wgref explore``: write the interactive layout explorer, one self-contained HTML file."""

from __future__ import annotations

import sys

from wgref.commands.common import check_output, command, shown, write_text


@command("explore")
def cmd_explore(args) -> int:
    """Write the explorer page (every layout, descriptor box, shareable URL fragment)."""
    from refmodel.render.explore import explore_html

    if args.output is not None:
        check_output(args.output)  # before building: never a device, a directory or a symlink
    text = explore_html()
    if args.output is None:
        sys.stdout.write(text)
        return 0
    write_text(args.output, text)
    print(f"wrote {shown(args.output)} (html, {len(text.encode())} bytes): open it in a browser, no network needed")
    return 0


def add_explore_parser(sub) -> None:
    """``wgref explore``: the interactive layout explorer."""
    ex = sub.add_parser("explore", help="write an interactive HTML explorer of every layout (self-contained, "
                        "works from file://): hover a cell or move with the keyboard, click a thread, paste a descriptor, "
                        "an N = 256 overview, FP8 dot products explained bit by bit")
    ex.add_argument("-o", "--output", default=None, help="write here (atomically) instead of stdout, e.g. explore.html")
