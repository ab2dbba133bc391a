"""Teaching diagrams: ``layout`` (fragment, ldmatrix/stmatrix, swizzle, shared-memory and
sparse-metadata layouts) and ``desc`` (a wgmma matrix descriptor decoded, checked and drawn)."""

from __future__ import annotations

import sys

from wgref.commands.common import check_output, command, shown, write_text

def _emit_diagram(kind: str, args, **opts) -> int:
    from refmodel.render import render

    if args.output is not None:
        check_output(args.output)  # before drawing: never a device, a directory or a symlink
    text = render(kind, args.format, **opts)
    if args.output is not None:
        write_text(args.output, text)
        print(f"wrote {shown(args.output)} ({args.format}, {len(text.encode())} bytes)")
    else:
        sys.stdout.write(text)
    return 0


_LAYOUT_DTYPE = {"acc": "f32", "a-frag": "f16", "swizzle": "f16", "smem": "f16"}


@command("layout")
def cmd_layout(args) -> int:
    """Draw a layout: accumulator / A fragment / ldmatrix / stmatrix / swizzle / smem tile."""
    kind = args.kind
    dtype = args.dtype or _LAYOUT_DTYPE.get(kind, "f16")
    if kind == "acc":
        opts = {"n": args.n, "dtype": dtype}
    elif kind == "a-frag":
        opts = {"dtype": dtype}
    elif kind in ("stmatrix", "ldmatrix"):
        opts = {"num": args.num, "trans": args.trans}
    elif kind == "swizzle":
        opts = {"mode": args.swizzle, "dtype": dtype}
    elif kind == "sparse-meta":
        opts = {"dtype": dtype, "sel": args.sel}
    else:
        opts = {"major": args.major, "mode": args.swizzle, "dtype": dtype, "rows": args.rows, "k": args.k,
                "lbo": args.lbo, "sbo": args.sbo}
    return _emit_diagram(kind, args, **opts)


@command("desc")
def cmd_desc(args) -> int:
    """Decode and check a wgmma matrix descriptor; draw which bytes the hardware reads."""
    from refmodel.render.diagrams import parse_descriptor

    value = parse_descriptor(args.descriptor)
    return _emit_diagram("desc", args, value=value, dtype=args.dtype, rows=args.rows, k=args.k, major=args.major)


def add_layout_parser(sub) -> None:
    """``wgref layout``: draw a layout."""
    lay = sub.add_parser("layout", help="draw a layout (ascii, svg or html): acc, a-frag, stmatrix, ldmatrix, "
                         "swizzle, smem, sparse-meta")
    lay.add_argument("kind", choices=["acc", "a-frag", "stmatrix", "ldmatrix", "swizzle", "smem", "sparse-meta"])
    lay.add_argument("--n", type=int, default=64, help="acc: N of m64nN (8..256, default 64)")
    lay.add_argument("--dtype", default=None, help="acc: f32/s32/f16; a-frag, swizzle, smem: f16 bf16 tf32 e4m3 ...")
    lay.add_argument("--swizzle", default="128B", help="swizzle, smem: none, 32B, 64B, 128B (default 128B)")
    lay.add_argument("--trans", action="store_true", help="stmatrix, ldmatrix: the .trans form")
    lay.add_argument("--num", type=int, default=4, help="stmatrix, ldmatrix: matrices, 1 2 or 4 (default 4)")
    lay.add_argument("--major", default="K", choices=["K", "MN"], help="smem: operand major (default K)")
    lay.add_argument("--rows", type=int, default=64, help="smem: rows of the operand tile (M, or N of B)")
    lay.add_argument("--k", type=int, default=None, help="smem: K of the tile (default: one swizzle row / one wgmma)")
    lay.add_argument("--lbo", type=int, default=None, help="smem: LBO in bytes (default: dense canonical)")
    lay.add_argument("--sbo", type=int, default=None, help="smem: SBO in bytes (default: dense canonical)")
    lay.add_argument("--sel", type=int, default=0, help="sparse-meta: sp-sel, 0 or 1 (8-bit types: 0)")
    lay.add_argument("--format", default="ascii", choices=["ascii", "svg", "html"])
    lay.add_argument("-o", "--output", default=None, help="write here (atomically) instead of stdout")


def add_desc_parser(sub) -> None:
    """``wgref desc``: decode, check and draw a matrix descriptor."""
    ds = sub.add_parser("desc", help="decode and check a wgmma matrix descriptor, draw what the hardware reads")
    ds.add_argument("descriptor", help="the 64-bit descriptor, hex (0x...) or decimal")
    ds.add_argument("--dtype", default="f16", help="operand element type: f16 bf16 tf32 e4m3 e5m2 s8 u8")
    ds.add_argument("--rows", type=int, default=64, help="rows of the operand (A: 64; B: N)")
    ds.add_argument("--k", type=int, default=None, help="K of the operand (default: one wgmma, 32 bytes)")
    ds.add_argument("--major", default="K", choices=["K", "MN"])
    ds.add_argument("--format", default="ascii", choices=["ascii", "svg", "html"])
    ds.add_argument("-o", "--output", default=None, help="write here (atomically) instead of stdout")

