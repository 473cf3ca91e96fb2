"""How a :class:`~torchrecorder.renderer.graphviz.GraphvizRenderer` subclass's own
``render_node`` and ``render_edge`` are wrapped: the node IDs such a method writes are learnt,
and its edge statements are made to name the nodes as they were drawn."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..nodes import BaseNode
from ._statements import edge_ends, first_node_id, plain_id, same_id, top_level_statements

__all__ = ["naming_edge", "naming_node"]


def naming_node(method: Callable[..., Any]) -> Callable[..., Any]:
    """A subclass's ``render_node``, which remembers the ID of the node statement it wrote."""

    @functools.wraps(method)
    def render_node(self: Any, g: Any, node: BaseNode) -> Any:
        body = getattr(g, "body", None)
        if type(body) is not list:
            return method(self, g, node)
        start = len(body)
        result = method(self, g, node)
        if node.key not in self._drawn:
            name = first_node_id(body, start)
            if name is not None:
                self._drawn[node.key] = name
        return result

    render_node._names_render_node = True  # type: ignore[attr-defined]
    return render_node


def naming_edge(method: Callable[..., Any]) -> Callable[..., Any]:
    """A subclass's ``render_edge``, whose edge statements name the nodes as they were drawn."""

    @functools.wraps(method)
    def render_edge(self: Any, g: Any, fnode: BaseNode, tnode: BaseNode) -> Any:
        body = getattr(g, "body", None)
        if type(body) is not list:
            return method(self, g, fnode, tnode)
        start = len(body)
        result = method(self, g, fnode, tnode)
        for i, stmt in top_level_statements(body, start):
            spans = edge_ends(stmt)
            if spans is None:
                continue
            (a0, a1), (b0, b1) = spans
            tail, head = stmt[a0:a1], stmt[b0:b1]
            new_tail, new_head = _as_drawn(self, tail, fnode, tnode), _as_drawn(self, head, tnode, fnode)
            if new_tail != tail or new_head != head:
                body[i] = stmt[:a0] + new_tail + stmt[a1:b0] + new_head + stmt[b1:]
        return result

    render_edge._names_render_edge = True  # type: ignore[attr-defined]
    return render_edge


def _as_drawn(renderer: Any, written: str, node: BaseNode, other: BaseNode) -> str:
    """``written`` if it names a node drawn in this walk, else the ID ``node`` was drawn under."""
    drawn = renderer._drawn
    own = drawn.get(node.key)
    if own is not None and same_id(own, written):
        return written
    names, made_for = renderer._drawn_names
    if made_for != len(drawn):  # made again only after more nodes were drawn
        names = {plain_id(name) for name in drawn.values()}
        renderer._drawn_names = (names, len(drawn))
    if plain_id(written) in names:
        return written  # an edge the subclass meant to another node it drew
    if renderer._seed_walk and node.key not in drawn:  # drawn later, maybe: named at the end
        return str(renderer._pend(node, other, "", "N"))
    return str(renderer.drawn_id(node, other))
