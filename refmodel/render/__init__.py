"""Teaching renderers: layout diagrams as ascii, SVG (hand-written) and HTML.

    from refmodel.render import render
    render("acc", "svg", n=64, dtype="f32")
    render("stmatrix", "ascii", num=4, trans=False)
    render("desc", "html", value=0x4000004000010040, dtype="f16", rows=64, k=16, major="K")

    render("epilogue", "svg", n=64, dtype="bf16", swizzle="128B")
    render("sparse-compress", "ascii", dtype="f16", sel=0)

Kinds: acc, a-frag, stmatrix, ldmatrix, swizzle, smem, desc, sparse-meta, epilogue (cvt + stmatrix.x4
slices into a swizzled tile, :mod:`.epilogue`), sparse-compress (quartet -> kept pair -> nibble ->
lane/bit, :mod:`.sparse_draw`).  Every picture is built from :mod:`refmodel.layouts` /
:mod:`refmodel.machine` (the model the H200 fixtures check), has a title, a legend, and names the
source it mirrors.  One wgmma output element explained bit by bit: :mod:`.explain_draw`.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from ..errors import InputError
from ..validate import excerpt
from . import diagrams, epilogue, sparse_draw
from .core import Diagram, Panel, to_ascii, to_html, to_svg

FORMATS = ("ascii", "svg", "html")

BUILDERS: dict[str, Callable[..., Diagram]] = {
    "acc": diagrams.acc,
    "a-frag": diagrams.a_frag,
    "stmatrix": functools.partial(diagrams.matrix, "stmatrix"),
    "ldmatrix": functools.partial(diagrams.matrix, "ldmatrix"),
    "swizzle": diagrams.swizzle,
    "smem": diagrams.smem,
    "desc": diagrams.desc,
    "sparse-meta": diagrams.sparse_meta,
    "epilogue": epilogue.epilogue,
    "sparse-compress": sparse_draw.sparse_compress,
}
KINDS = tuple(BUILDERS)


def diagram(kind: str, **opts: Any) -> Diagram:
    """The :class:`Diagram` of one kind with its options (see the builders in ``diagrams``)."""
    if not isinstance(kind, str) or kind not in BUILDERS:
        raise InputError(f"diagram kind must be one of {', '.join(KINDS)}, got {excerpt(kind)}")
    builder = BUILDERS[kind]
    sig = inspect.signature(builder)
    unknown = [k for k in opts if k not in sig.parameters]
    if unknown:
        raise InputError(f"the {kind} diagram takes no option {excerpt(unknown[0])}; its options are "
                         f"{', '.join(sig.parameters) or 'none'}")
    d = builder(**opts)
    from ..layouts.cute import cute_layout

    bridge = cute_layout(kind, **opts)       # the CuTe shape:stride of the same layout (None: it has none)
    if bridge:
        d.caption.append(bridge)
    return d


def render(kind: str, fmt: str = "ascii", **opts: Any) -> str:
    """Render one diagram kind as ascii, svg or html text."""
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise InputError(f"format must be one of {', '.join(FORMATS)}, got {excerpt(fmt)}")
    d = diagram(kind, **opts)
    return {"ascii": to_ascii, "svg": to_svg, "html": to_html}[fmt](d)


__all__ = ["render", "diagram", "KINDS", "FORMATS", "BUILDERS", "Diagram", "Panel", "to_ascii", "to_svg", "to_html"]
