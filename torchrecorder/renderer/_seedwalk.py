"""The 1.0.3 view a renderer draws for code written for torchrecorder 1.0.3 (see
:attr:`~torchrecorder.renderer.base.BaseRenderer.seed_view`): what is drawn, and the table of
nodes and edges 1.0.3's ``renderer(dest)`` walked."""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any, Optional

from ..errors import RenderError
from ..graph import Graph
from ..nodes import BaseNode, Key, LayerNode
from ..projection import Projection
from ..projection.budget import Fit

__all__ = ["pending_token", "resolve_pending", "seed_projection", "seed_table"]


def seed_projection(rec: Graph, depth: int) -> Fit:
    """What 1.0.3 drew of ``rec`` at ``depth``: every node of depth ``<= depth``, each layer
    above it a group, nothing folded or left out, edges re-attached to the nearest drawn node."""
    projection = Projection(rec, depth, lambda node: isinstance(node, LayerNode) and node.depth < depth,
                            min_run=0, tensor_nodes=True, all_ops=True, loops=False)
    return Fit(projection, depth, 0, (0, 0), None, depth, None, depth)


def seed_table(renderer: Any) -> OrderedDict[BaseNode, list[BaseNode]]:
    """1.0.3's ``processed`` for ``renderer`` (a :class:`~.base.BaseRenderer`): the drawn
    nodes in recording order, each with the drawn nodes its edges go to."""
    drawn: set[Key] = set()
    projection = renderer.projection
    stack = list(renderer.children(renderer.rec.context))
    while stack:
        node = stack.pop()
        drawn.add(node.key)
        if projection.is_expanded(node):
            stack.extend(renderer.children(node))
    table: OrderedDict[BaseNode, list[BaseNode]] = OrderedDict(
        (node, []) for key, node in renderer.rec.nodes.items() if key in drawn)
    for fnode, tnode in renderer.drawn_edges():
        table.setdefault(fnode, []).append(tnode)
    return table


#: a placeholder for what an edge drawn before its node waits for (see ``pending_token``)
_PENDING = re.compile("\x01([EN])([0-9]+)\x01")


def pending_token(kind: str, index: int) -> str:
    """The placeholder written for an edge (``kind`` ``"E"``) or one end of an edge (``"N"``)
    whose node is not drawn yet: entry ``index`` of the renderer's pending list."""
    return f"\x01{kind}{index}\x01"


def resolve_pending(renderer: Any, g: Any,
                    pending: list[tuple[BaseNode, Optional[BaseNode], str]]) -> None:
    """Write the names ``renderer`` (a :class:`~.graphviz.GraphvizRenderer`) drew nodes under
    into the placeholders of ``g`` (1.0.3 drew edges as it went, some
    before their nodes).

    Raises:
        RenderError: an edge's node was never drawn.
    """
    body = getattr(g, "body", None)
    if type(body) is not list:
        return
    resolved: dict[str, str] = {}

    def name(match: re.Match[str]) -> str:
        token = match.group(0)
        got = resolved.get(token)
        if got is None:
            node, other, text = pending[int(match.group(2))]
            if match.group(1) == "N":  # one end, written by a subclass's render_edge
                got = renderer.drawn_id(node, other)
            else:  # a whole edge statement of the default render_edge
                if other is None:
                    raise RenderError(f"an edge from {node.key!r} lost its other end")
                a, b = renderer._drawn.get(node.key), renderer._drawn.get(other.key)
                if a is None or b is None:
                    a, b, text = renderer._cluster_edge(g, node, other, text)
                got = f"{a} -> {b} [{text}]" if text else f"{a} -> {b}"
            resolved[token] = got
        return got

    for i, line in enumerate(body):
        if "\x01" in line:
            body[i] = _PENDING.sub(name, line)
