"""Teaching diagrams and lookups: ``layout`` (fragment, ldmatrix/stmatrix, swizzle, shared-memory,
sparse-metadata, epilogue and sparse-compression layouts; ``--at``/``--thread`` answer who holds
one element or what one thread holds) and ``desc`` (a wgmma matrix descriptor decoded, checked
and drawn; ``--at`` gives the shared address of one element).

The lookups come from :mod:`refmodel.layouts.lookup`; ``--json`` prints its answers as they are
(the keys are documented there; outside tools rely on them)::

    wgref layout acc --n 64 --dtype f32 --at 17,2 --json
    {"thread": 37, "warp": 1, "lane": 5, "register": 0, "half": null}
"""

from __future__ import annotations

from wgref.commands.common import UsageError, check_output, command, emit_text, excerpt, json


def _emit_diagram(kind: str, args, **opts) -> int:
    from refmodel.render import render

    if args.output is not None:
        check_output(args.output)  # before drawing: never a device, a directory or a symlink
    text = render(kind, args.format, **opts)
    return emit_text(args.output, text, f"{args.format}, {len(text.encode())} bytes")


def _emit_text(args, text: str) -> int:
    """A lookup's answer (a paragraph or one JSON line) to stdout, or to ``-o`` through the safe writer."""
    if args.output is not None:
        check_output(args.output)
    return emit_text(args.output, text, f"{'json' if args.json else 'text'}, {len(text.encode())} bytes")


_LAYOUT_DTYPE = {"acc": "f32", "a-frag": "f16", "swizzle": "f16", "smem": "f16", "epilogue": "bf16",
                 "sparse-compress": "f16"}
LOOKUP_KINDS = ("acc", "a-frag", "ldmatrix", "stmatrix", "sparse-meta")


def parse_pair(text: str, names: str = "ROW,COL") -> tuple[int, int]:
    """Two integers from ``ROW,COL`` text; a one-line usage error otherwise."""
    parts = str(text).split(",")
    try:
        if len(parts) != 2:
            raise ValueError
        return int(parts[0].strip()), int(parts[1].strip())
    except ValueError:
        raise UsageError(f"--at must be {names} (two integers separated by a comma), got {excerpt(text)}") from None


# ----------------------------------------------------------------------------- answers in words

def _where(h: dict) -> str:
    return f"thread {h['thread']} (warp {h['warp']}, lane {h['lane']})"


def _slot_words(half, byte=None) -> str:
    if half is not None:
        return f", half {half} (bits {16 * half + 15}:{16 * half})"
    if byte is not None:
        return f", byte {byte} (bits {8 * byte + 7}:{8 * byte})"
    return ""


def _entries_words(entries: list[list[int]], name: str, suffix: str) -> str:
    return ", ".join(f"r{e[2]}{suffix.format(*e[3:]) if len(e) > 3 else ''}={name}[{e[0]},{e[1]}]" for e in entries)


def _acc_text(n: int, dtype: str, at, thread) -> str:
    from refmodel.layouts import lookup as lk

    per = "two f16 elements per 32-bit register, f16x2" if dtype == "f16" else f"one {dtype} element per register"
    rule = ("element i of thread t (w = t/32, g = (t%32)/4, q = t%4) is D[16w + g + 8*((i>>1)&1), "
            "2q + (i&1) + 8*(i>>2)]" + ("; register j holds elements 2j (bits 15:0) and 2j+1 (bits 31:16)"
                                        if dtype == "f16" else "; register i holds element i"))
    if at is not None:
        h = lk.acc_at(n, dtype, *at)
        return (f"D[{at[0]}, {at[1]}] of the m64n{n} {dtype} accumulator is held by {_where(h)}, register "
                f"{h['register']}{_slot_words(h['half'])}: {per}. Warp {h['warp']} holds rows {16 * h['warp']}-"
                f"{16 * h['warp'] + 15}; {rule}.\n")
    e = lk.acc_thread(n, dtype, thread)
    return (f"Thread {thread} (warp {thread // 32}, lane {thread % 32}) holds {len(e)} elements of the m64n{n} "
            f"{dtype} accumulator in {-(-len(e) // (2 if dtype == 'f16' else 1))} registers ({per}): "
            f"{_entries_words(e, 'D', '.{}')}. In general {rule}.\n")


def _afrag_text(dtype: str, at, thread) -> str:
    from refmodel.dtypes import element_bytes
    from refmodel.layouts import lookup as lk

    k, size = lk.a_frag_k(dtype), element_bytes(dtype)
    per = {4: "one tf32 element per register", 2: "two 16-bit elements per register (half 0 = bits 15:0)",
           1: "four 8-bit elements per register (byte 0 = bits 7:0)"}[size]
    if at is not None:
        h = lk.a_frag_at(dtype, *at)
        return (f"A[{at[0]}, {at[1]}] of the RS-form {dtype} A tile (64 x {k}, A from registers) is held by "
                f"{_where(h)}, register {h['register']}{_slot_words(h['half'], h['byte'])}: every thread holds 4 "
                f"registers, {per}.\n")
    e = lk.a_frag_thread(dtype, thread)
    suffix = {4: "", 2: ".{}", 1: ".b{}"}[size]
    return (f"Thread {thread} (warp {thread // 32}, lane {thread % 32}) holds {len(e)} elements of the RS-form "
            f"{dtype} A tile (64 x {k}) in 4 registers ({per}): {_entries_words(e, 'A', suffix)}.\n")


def _matrix_text(op: str, num: int, trans: bool, at, lane) -> str:
    from refmodel.layouts import lookup as lk

    form = f"{op} .m8n8.x{num}{'.trans' if trans else ''}.b16"
    rows, cols = lk.matrix_tile_shape(num)
    tile = (f"the {rows} x {cols} tile" + (" (matrix 0 top-left, 1 bottom-left, 2 top-right, 3 bottom-right)"
                                           if num == 4 else " (matrices stacked)" if num == 2 else ""))
    if at is not None:
        h = lk.matrix_at(op, num, trans, *at)
        move = (f"ldmatrix loads that row from lane {h['address_lane']}'s address and lane {h['lane']} receives the "
                f"element" if op == "ldmatrix" else
                f"stmatrix writes lane {h['lane']}'s half to the row at lane {h['address_lane']}'s address")
        return (f"Element ({at[0]}, {at[1]}) of {tile} of {form} is row {h['matrix_row']}, column "
                f"{h['matrix_col']} of matrix {h['matrix']}. Lane {h['address_lane']} gives the address of that "
                f"16-byte row; lane {h['lane']} holds the element in register {h['register']}"
                f"{_slot_words(h['half'])}: {move}.\n")
    e = lk.matrix_thread(op, num, trans, lane)
    addr = lk.matrix_address_row(op, num, lane)
    gives = (f"gives the address of the 16-byte row at tile row {addr[0]}, columns {addr[1]}-{addr[1] + 7} "
             f"(row {lane % 8} of matrix {lane // 8})" if addr is not None else
             f"gives no address (only lanes 0-{8 * num - 1} give row addresses for .x{num})")
    pairs = "; ".join(f"r{e[i][2]} = ({e[i][0]},{e[i][1]}) and ({e[i + 1][0]},{e[i + 1][1]})"
                      for i in range(0, len(e), 2))
    return (f"Lane {lane} of {form} holds {len(e)} elements of {tile} in {num} register(s), half 0 (bits 15:0) "
            f"then half 1: {pairs}. It {gives}.\n")


def _sparse_text(dtype: str, sel: int, at, thread) -> str:
    from refmodel.layouts import lookup as lk

    width = 2 if dtype == "tf32" else 4
    chunk = "pair" if dtype == "tf32" else "chunk"
    form = f"sparse {dtype} A (sp-sel {sel})"
    if at is not None:
        h = lk.sparse_meta_at(dtype, sel, *at)
        return (f"The metadata nibble of row {at[0]}, {chunk} {at[1]} (elements k {width * at[1]}-"
                f"{width * at[1] + width - 1}) of a {form} is in {_where(h)}, bits {h['bit']}-{h['bit'] + 3} "
                f"(nibble {h['nibble']}) of its sp-meta register; warp {h['warp']} supplies rows "
                f"{16 * h['warp']}-{16 * h['warp'] + 15}.\n")
    e = lk.sparse_meta_thread(dtype, sel, thread)
    if not e:
        return (f"Thread {thread} (warp {thread // 32}, lane {thread % 32}) supplies no metadata for a {form}: "
                f"the hardware ignores its sp-meta register (16-bit and tf32 forms read lanes "
                f"{2 * sel} and {2 * sel + 1} of each group of four).\n")
    held = ", ".join(f"bits {b}-{b + 3} = row {r} {chunk} {c}" for r, c, b in e)
    return (f"Thread {thread} (warp {thread // 32}, lane {thread % 32}) supplies {len(e)} metadata nibbles of a "
            f"{form} in its sp-meta register: {held}.\n")


def _lookup_answer(kind: str, args, dtype: str):
    """(JSON-ready object, paragraph) of ``wgref layout KIND --at/--thread``."""
    from refmodel.layouts import lookup as lk

    at = parse_pair(args.at, "ROW,CHUNK" if kind == "sparse-meta" else "ROW,COL") if args.at is not None else None
    t = args.thread
    if kind == "acc":
        obj = lk.acc_at(args.n, dtype, *at) if at else {"elements": lk.acc_thread(args.n, dtype, t)}
        return obj, _acc_text(args.n, dtype, at, t)
    if kind == "a-frag":
        obj = lk.a_frag_at(dtype, *at) if at else {"elements": lk.a_frag_thread(dtype, t)}
        return obj, _afrag_text(dtype, at, t)
    if kind in ("ldmatrix", "stmatrix"):
        obj = (lk.matrix_at(kind, args.num, args.trans, *at) if at else
               {"elements": lk.matrix_thread(kind, args.num, args.trans, t),
                "address": lk.matrix_address_row(kind, args.num, t)})
        return obj, _matrix_text(kind, args.num, args.trans, at, t)
    obj = lk.sparse_meta_at(dtype, args.sel, *at) if at else {"elements": lk.sparse_meta_thread(dtype, args.sel, t)}
    return obj, _sparse_text(dtype, args.sel, at, t)


def _check_lookup_flags(args, flags: str) -> bool:
    """True if this is a lookup; one-line usage errors for flags that do not go together."""
    lookup = args.at is not None or getattr(args, "thread", None) is not None
    if args.at is not None and getattr(args, "thread", None) is not None:
        raise UsageError("give --at or --thread, not both")
    if args.json and not lookup:
        raise UsageError(f"--json prints a lookup's answer: give {flags}")
    if lookup and args.format != "ascii":
        raise UsageError("--format svg/html draws a diagram; a lookup (--at/--thread) prints a paragraph or --json")
    return lookup


def _existing_acc_form(n, dtype) -> None:
    """The command line draws only forms that exist (the library's diagram draws others with a note)."""
    from refmodel.errors import WgrefError
    from refmodel.layouts.fragment import check_acc_form

    if n is None:
        return
    try:
        check_acc_form(int(n), dtype)
    except WgrefError as e:
        raise UsageError(f"no m64n{n} wgmma form has a {dtype} accumulator: {e}") from None


@command("layout")
def cmd_layout(args) -> int:
    """Draw a layout (accumulator / A fragment / ldmatrix / stmatrix / swizzle / smem tile / sparse
    metadata / epilogue / sparse compression), or look one element or thread up in it."""
    kind = args.kind
    if kind == "mma-sync":
        return _mma_sync_layout(args)
    dtype = args.dtype or _LAYOUT_DTYPE.get(kind, "f16")
    if _check_lookup_flags(args, "--at ROW,COL or --thread T"):
        if kind not in LOOKUP_KINDS:
            raise UsageError(f"--at/--thread look up elements of {', '.join(LOOKUP_KINDS)}; not {kind}")
        obj, text = _lookup_answer(kind, args, dtype)
        return _emit_text(args, json.dumps(obj) + "\n" if args.json else text)
    if kind == "acc":
        _existing_acc_form(args.n, dtype)
        opts = {"n": args.n, "dtype": dtype}
    elif kind == "a-frag":
        opts = {"dtype": dtype}
    elif kind in ("stmatrix", "ldmatrix"):
        opts = {"num": args.num, "trans": args.trans}
    elif kind == "swizzle":
        opts = {"mode": args.swizzle, "dtype": dtype}
    elif kind == "sparse-meta":
        opts = {"dtype": dtype, "sel": args.sel}
    elif kind == "epilogue":
        opts = {"n": args.n, "dtype": dtype, "swizzle": args.swizzle}
    elif kind == "sparse-compress":
        opts = {"dtype": dtype, "sel": args.sel}
    else:
        opts = {"major": args.major, "mode": args.swizzle, "dtype": dtype, "rows": args.rows, "k": args.k,
                "lbo": args.lbo, "sbo": args.sbo}
    return _emit_diagram(kind, args, **opts)


def _desc_text(value: int, args, el: dict, row: int, kidx: int) -> str:
    from refmodel.dtypes import element_bytes
    from refmodel.layouts.descriptor import MatrixDescriptor

    d = MatrixDescriptor.decode(value)
    e = element_bytes(args.dtype)
    k = 32 // e if args.k is None else args.k
    layout = el["swizzle"] if el["swizzle"] != "none" else "no-swizzle"
    span = f"{el['address']:#x}" if e == 1 else f"{el['address']:#x}-{el['last']:#x}"
    swz = (f"the {el['swizzle']} swizzle of the absolute address (phase = (address >> 7) - base offset "
           f"{d.base_offset}) moves it to {el['address']:#x}" if el["swizzle"] != "none" else
           "no swizzle, so that is the address read")
    return (f"Element (row {row}, k {kidx}) of the {args.rows} x {k} {args.dtype} {args.major}-major operand "
            f"described by {value:#018x} is read from shared address {span}: the start {el['start']:#x} plus "
            f"the canonical {layout} layout's offset {el['offset']} (LBO {d.lbo}, SBO {d.sbo}) gives the "
            f"logical address {el['logical']:#x}, and {swz}.\n")


def _mma_sync_layout(args) -> int:
    """``wgref layout mma-sync --form INSTR --operand a|b|c|d``: a warp-level mma.sync fragment as text, or
    who holds one element (--at ROW,COL) / what one lane holds (--thread LANE)."""
    from refmodel.layouts import mma_fragment as mf

    if args.form is None:
        raise UsageError("layout mma-sync needs --form, e.g. --form mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    if args.format != "ascii":
        raise UsageError(f"layout mma-sync draws text only (--format ascii), got --format {args.format}")
    form = mf.parse_mma_sync(args.form)
    if args.at is not None and args.thread is not None:
        raise UsageError("give --at or --thread, not both")
    if args.at is not None:
        row, col = parse_pair(args.at)
        h = mf.holder(form, args.operand, row, col, args.problem)
        slot = f", slot {h['slot']} (bits {h['bits'][0]}:{h['bits'][1]})" if h["bits"] else ""
        text = (json.dumps(h) + "\n" if args.json else
                f"{args.operand.upper()}[{row},{col}]{' of quad pair ' + str(args.problem) if form.quad_pair else ''} "
                f"of {form.name} is held by lane {h['lane']}, register {h['register']}{slot}\n")
        return _emit_text(args, text)
    if args.thread is not None:
        vals = mf.held(form, args.operand, args.thread)
        if args.json:
            text = json.dumps(vals) + "\n"
        else:
            text = f"lane {args.thread} holds of {args.operand.upper()} of {form.name}: " + ", ".join(
                f"r{v['register']}.{v['slot']}={args.operand.upper()}{'[q' + str(v['problem']) + ']' if form.quad_pair else ''}"
                f"[{v['row']},{v['col']}]" for v in vals) + "\n"
        return _emit_text(args, text)
    if args.json:
        raise UsageError("--json goes with --at or --thread")
    return _emit_text(args, mf.render_fragment(form, args.operand, args.problem))


@command("desc")
def cmd_desc(args) -> int:
    """Decode and check a wgmma matrix descriptor; draw which bytes the hardware reads, or give the
    shared address of one element (``--at ROW,KIDX``)."""
    from refmodel.render.diagrams import parse_descriptor

    value = parse_descriptor(args.descriptor)
    if _check_lookup_flags(args, "--at ROW,KIDX"):
        from refmodel.layouts.lookup import descriptor_element

        row, kidx = parse_pair(args.at, "ROW,KIDX")
        el = descriptor_element(value, args.dtype, args.rows, args.k, args.major, row, kidx)
        text = json.dumps({"address": el["address"]}) + "\n" if args.json else _desc_text(value, args, el, row, kidx)
        return _emit_text(args, text)
    return _emit_diagram("desc", args, value=value, dtype=args.dtype, rows=args.rows, k=args.k, major=args.major)


def add_layout_parser(sub) -> None:
    """``wgref layout``: draw a layout, or look an element / a thread up in it."""
    lay = sub.add_parser("layout", help="draw a layout (ascii, svg or html): acc, a-frag, stmatrix, ldmatrix, "
                         "swizzle, smem, sparse-meta, epilogue, sparse-compress, mma-sync; or look one element (--at) or "
                         "thread (--thread) up")
    lay.add_argument("kind", choices=["acc", "a-frag", "stmatrix", "ldmatrix", "swizzle", "smem", "sparse-meta",
                                      "epilogue", "sparse-compress", "mma-sync"])
    lay.add_argument("--form", default=None, help="mma-sync: the instruction, e.g. "
                     "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")
    lay.add_argument("--operand", default="a", choices=["a", "b", "c", "d"], help="mma-sync: the operand (default a)")
    lay.add_argument("--problem", type=int, default=0, help="mma-sync m8n8k4: the quad pair, 0..3 (default 0)")
    lay.add_argument("--n", type=int, default=64, help="acc, epilogue: N of m64nN (8..256, default 64)")
    lay.add_argument("--dtype", default=None, help="acc: f32/s32/f16; a-frag, swizzle, smem, sparse-meta, epilogue, "
                     "sparse-compress: f16 bf16 tf32 e4m3 ...")
    lay.add_argument("--swizzle", default="128B", help="swizzle, smem, epilogue: none, 32B, 64B, 128B (default 128B)")
    lay.add_argument("--trans", action="store_true", help="stmatrix, ldmatrix: the .trans form")
    lay.add_argument("--num", type=int, default=4, help="stmatrix, ldmatrix: matrices, 1 2 or 4 (default 4)")
    lay.add_argument("--major", default="K", choices=["K", "MN"], help="smem: operand major (default K)")
    lay.add_argument("--rows", type=int, default=64, help="smem: rows of the operand tile (M, or N of B)")
    lay.add_argument("--k", type=int, default=None, help="smem: K of the tile (default: one swizzle row / one wgmma)")
    lay.add_argument("--lbo", type=int, default=None, help="smem: LBO in bytes (default: dense canonical)")
    lay.add_argument("--sbo", type=int, default=None, help="smem: SBO in bytes (default: dense canonical)")
    lay.add_argument("--sel", type=int, default=0, help="sparse-meta, sparse-compress: sp-sel, 0 or 1 (8-bit types: 0)")
    lay.add_argument("--at", default=None, metavar="ROW,COL",
                     help="look up who holds one element (sparse-meta: ROW,CHUNK; ldmatrix/stmatrix: the drawn tile)")
    lay.add_argument("--thread", type=int, default=None, metavar="T",
                     help="look up what one thread holds (0..127; ldmatrix/stmatrix: a lane, 0..31): --json "
                     "gives [row, col, register] per element, plus the half (f16 acc, 16-bit a-frag, ld/stmatrix) "
                     "or byte (8-bit a-frag); sparse-meta: [row, chunk, bit]")
    lay.add_argument("--json", action="store_true", help="with --at/--thread: the answer as one JSON object")
    lay.add_argument("--format", default="ascii", choices=["ascii", "svg", "html"])
    lay.add_argument("-o", "--output", default=None, help="write here (atomically) instead of stdout")


def add_desc_parser(sub) -> None:
    """``wgref desc``: decode, check and draw a matrix descriptor, or give one element's address."""
    ds = sub.add_parser("desc", help="decode and check a wgmma matrix descriptor, draw what the hardware reads, "
                        "or give one element's shared address (--at)")
    ds.add_argument("descriptor", help="the 64-bit descriptor, hex (0x...) or decimal")
    ds.add_argument("--dtype", default="f16", help="operand element type: f16 bf16 tf32 e4m3 e5m2 s8 u8")
    ds.add_argument("--rows", type=int, default=64, help="rows of the operand (A: 64; B: N)")
    ds.add_argument("--k", type=int, default=None, help="K of the operand (default: one wgmma, 32 bytes)")
    ds.add_argument("--major", default="K", choices=["K", "MN"])
    ds.add_argument("--at", default=None, metavar="ROW,KIDX",
                    help="the absolute shared byte address the H200 reads for element (ROW, KIDX)")
    ds.add_argument("--json", action="store_true", help="with --at: {\"address\": ...}")
    ds.add_argument("--format", default="ascii", choices=["ascii", "svg", "html"])
    ds.add_argument("-o", "--output", default=None, help="write here (atomically) instead of stdout")
