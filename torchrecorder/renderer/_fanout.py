"""Shared fan-out edges in DOT: a value fed to more boxes than the drawing budget lets
``dot`` route one by one (the rotary tables read by every layer of an unfolded Llama) is
drawn with one edge to a small mark that names the boxes it feeds
(:func:`~torchrecorder.projection.budget.wide_sources` says which; the styler's
``style_fanout`` draws the mark)."""

from __future__ import annotations

from typing import Any

from .._text import quote_dot_id
from ..nodes import BaseNode, Key
from ._statements import plain_id

__all__ = ["FANOUT_SUFFIX", "draw_marks"]

#: appended to a node's DOT id: the id of the mark that stands for the boxes it feeds
FANOUT_SUFFIX = "::fanout"

#: a GraphvizRenderer (not imported here: it imports this module)
Renderer = Any


def draw_marks(renderer: Renderer, g: Any, targets: dict[Key, list[BaseNode]]) -> None:
    """Write to ``g`` a mark for each source key in ``targets`` that the walk drew, styled by
    the styler's ``style_fanout`` (given the source and the drawn nodes it feeds), and one
    edge to it styled as the source's first edge (``style_edge`` / ``style_tensor_edge``)."""
    nodes = renderer.rec.nodes
    for key, tnodes in targets.items():
        tail = renderer._drawn.get(key)
        if tail is None or not tnodes:  # a subclass's render_node drew nothing for it
            continue
        fnode = nodes[key]
        mark = quote_dot_id(plain_id(tail) + FANOUT_SUFFIX)
        attrs = renderer.styler.style_fanout(fnode, tnodes)
        g.body.append(f"\t{mark} [{renderer._attr_text(attrs, 'style_fanout')}]\n")
        tensor = renderer.edge_tensor(fnode, tnodes[0])
        if tensor is not None:
            edge, method = renderer.styler.style_tensor_edge(fnode, tnodes[0], tensor), "style_tensor_edge"
        else:
            edge, method = renderer.styler.style_edge(fnode, tnodes[0]), "style_edge"
        g.body.append(f"\t{tail} -> {mark} [{renderer._attr_text(edge, method)}]\n")
