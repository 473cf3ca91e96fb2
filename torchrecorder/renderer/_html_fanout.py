"""The marks of shared fan-out edges in the HTML page, as a styler of the user's draws them.

A view over the drawing budget draws the edges of a value fed to many boxes as one edge to a
mark (see :mod:`._fanout`).  The page works out in the browser which boxes each mark stands
for and writes the default mark itself (``GraphvizStyler.style_fanout``'s ``"→ 32 ×
self_attn"``).  A styler with a ``style_fanout`` of its own is asked here, while the page is
built, for the mark of every value that feeds more boxes than the page shares at each depth
of the drawing (a drawing opened to a depth, its runs folded or not): the page draws a mark
for the same boxes exactly as ``make_dot`` draws it.  For a set of boxes not met there (a
view whose modules were opened and closed one by one) the page keeps its own label and
tooltip for them, with the styler's other attributes (its shape, colours, font) as the
styler gave them for the finest drawing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..graph import Graph
from ..nodes import BaseNode, Key, LayerNode
from ..projection import Projection
from ..projection.budget import wide_sources
from .base import ALL_DEPTHS
from .styler import GraphvizStyler

__all__ = ["fanout_marks"]

#: a GraphvizRenderer's HtmlRenderer (not imported here: html.py imports this module)
Renderer = Any


def fanout_marks(renderer: Renderer, rec: Graph, opens: Callable[[BaseNode], bool],
                 index: Mapping[Key, int], intern: Callable[[str], int]) -> dict[str, Any]:
    """``{"fanout_marks": {source row: {"rest": attributes, "exact": {"b,c,...": attributes}}}}``
    (attribute lists as indices of ``intern``'s strings; ``"b,c,..."`` the sorted rows of the
    boxes the mark stands for), or ``{}`` when the styler draws the default mark.

    Args:
        renderer: the page's renderer (its styler, its options, ``_attr_text``).
        rec: the recording.
        opens: whether a layer opens at an unlimited depth (the page's rule).
        index: node key -> its row in the page's data.
        intern: adds a string to the page's strings, giving its index.
    """
    styler = renderer.styler
    if getattr(type(styler), "style_fanout", None) is GraphvizStyler.style_fanout:
        return {}
    fanout = renderer.max_constraining_fanout
    deepest = max((n.depth for n in rec.nodes.values() if isinstance(n, LayerNode)), default=0)
    depths = [*range(1, deepest + 2), ALL_DEPTHS]
    runs = sorted({0, renderer.fold_min or 0})
    marks: dict[str, Any] = {}
    for min_run in runs:
        for depth in depths:
            p = Projection(rec, depth, _within(depth, opens), min_run=min_run,
                           tensor_nodes=renderer.tensor_nodes, all_ops=renderer.all_ops)
            for key in wide_sources(p, fanout):
                if key not in index:
                    continue
                targets = [b for a, b in p.edges if a.key == key]
                if any(b.key not in index for b in targets):  # (a folded loop's: the page's own)
                    continue
                rows = [index[b.key] for b in targets]
                attrs = dict(styler.style_fanout(rec.nodes[key], targets))
                entry = marks.setdefault(str(index[key]), {"rest": None, "exact": {}})
                entry["exact"][",".join(map(str, sorted(rows)))] = intern(
                    renderer._attr_text(attrs, "style_fanout"))
                if depth == ALL_DEPTHS or entry["rest"] is None:  # (the finest drawing's last)
                    rest = {k: v for k, v in attrs.items() if k not in ("label", "tooltip")}
                    entry["rest"] = intern(renderer._attr_text(rest, "style_fanout") if rest else "")
    return {"fanout_marks": marks} if marks else {}


def _within(depth: int, opens: Callable[[BaseNode], bool]) -> Callable[[BaseNode], bool]:
    """The page's rule for a drawing opened to ``depth``: a layer above it that can open."""
    return lambda node: node.depth < depth and opens(node)
