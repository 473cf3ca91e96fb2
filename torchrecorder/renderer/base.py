"""The renderer contract: walk a finished recording, at a chosen depth, and draw it.

A renderer never runs a model; it reads a :class:`~torchrecorder.recorder.Recorder`
(recorded, or loaded from JSON).  :meth:`BaseRenderer.render` does the walk; a
subclass says how to draw by overriding:

================================  ==================================================
``new_graph()``                   create the object being drawn into
``render_node(g, node)``          draw one node; for an expanded layer call
                                  ``render_recursive_node`` instead
``render_recursive_node(g, n)``   draw an expanded layer as a group holding
                                  ``self.children(n)``, each through ``render_node``
``render_edge(g, fnode, tnode)``  draw one edge between two drawn nodes
``finish(g)``                     turn ``g`` into the result (default: ``g`` itself)
================================  ==================================================

and may use the helpers :meth:`~BaseRenderer.is_expanded`,
:meth:`~BaseRenderer.children` and :meth:`~BaseRenderer.drawn_edges`.
"""

from __future__ import annotations

from typing import Any, Optional

from ..nodes import BaseNode, ContextNode, Key, LayerNode, OpNode, ParamNode
from ..recorder import Recorder

__all__ = ["BaseRenderer"]


class BaseRenderer:
    """Base class of all renderers.

    Args:
        rec: the recording to draw.
        render_depth: modules at depth ``< render_depth`` are drawn expanded,
            showing what ran inside them; modules at ``render_depth`` are drawn
            as single nodes; everything deeper is folded into its nearest drawn
            ancestor, and edges are re-attached there.
    """

    def __init__(self, rec: Recorder, render_depth: int = 256) -> None:
        if not isinstance(rec, Recorder):
            raise TypeError(f"expected a Recorder to render, got {type(rec).__name__}")
        if isinstance(render_depth, bool) or not isinstance(render_depth, int) or render_depth < 0:
            raise ValueError(f"render_depth must be an int >= 0, got {render_depth!r}")
        self.rec = rec
        self.render_depth = render_depth
        self._rep_memo: dict[Key, Optional[Key]] = {}

    # ------------------------------------------------------------- contract
    def new_graph(self) -> Any:
        """Create the object that the nodes and edges are drawn into."""
        raise NotImplementedError(f"{type(self).__name__} must implement new_graph()")

    def render_node(self, g: Any, node: BaseNode) -> None:
        """Draw ``node`` into ``g`` (expanded layers go to :meth:`render_recursive_node`)."""
        raise NotImplementedError(f"{type(self).__name__} must implement render_node()")

    def render_recursive_node(self, g: Any, node: LayerNode) -> None:
        """Draw the expanded layer ``node`` as a group holding its children."""
        raise NotImplementedError(f"{type(self).__name__} must implement render_recursive_node()")

    def render_edge(self, g: Any, fnode: BaseNode, tnode: BaseNode) -> None:
        """Draw an edge from ``fnode`` to ``tnode``."""
        raise NotImplementedError(f"{type(self).__name__} must implement render_edge()")

    def finish(self, g: Any) -> Any:
        """Turn the drawn ``g`` into the value :meth:`render` returns."""
        return g

    # --------------------------------------------------------------- walk
    def render(self) -> Any:
        """Draw the whole recording: top-level nodes, then every drawn edge."""
        g = self.new_graph()
        for child in self.children(self.rec.context):
            self.render_node(g, child)
        for fnode, tnode in self.drawn_edges():
            self.render_edge(g, fnode, tnode)
        return self.finish(g)

    def is_expanded(self, node: BaseNode) -> bool:
        """Whether ``node`` is a layer drawn as a group of its children.

        Layers above ``render_depth`` are expanded, except a module that calls
        no other module and ran at most one operation (an ``nn.Linear``): its
        box already says all that a group would.
        """
        if not isinstance(node, LayerNode) or node.depth >= self.render_depth or not node.subnets:
            return False
        nodes = self.rec.nodes
        ops = 0
        for key in node.subnets:
            child = nodes.get(key)
            if isinstance(child, LayerNode):
                return True
            if isinstance(child, OpNode):
                ops += 1
        return ops > 1

    def children(self, node: BaseNode) -> list[BaseNode]:
        """The nodes drawn directly inside the expanded layer ``node``, in order."""
        if not isinstance(node, LayerNode):
            return []
        nodes = self.rec.nodes
        return [nodes[k] for k in node.subnets if k in nodes]

    def drawn_key(self, key: Key) -> Optional[Key]:
        """The key of the drawn node that stands for ``key`` (itself or an ancestor).

        A hidden parameter stands for nothing (``None``): edges out of it are
        not data flowing between layers.
        """
        node = self.rec.nodes[key]
        rep = self._inner_rep(node.parent) if key is not None else None
        if rep is None:
            return key
        if isinstance(node, ParamNode):
            return None
        return rep

    def _inner_rep(self, key: Key) -> Optional[Key]:
        """``None`` if the children of layer ``key`` are drawn, else the key drawn in their place."""
        memo = self._rep_memo
        nodes = self.rec.nodes
        chain = []
        k = key
        while k is not None and k not in memo:
            chain.append(k)
            k = nodes[k].parent
        result = memo[k] if k is not None else None
        for k in reversed(chain):
            if result is None:
                result = None if self.is_expanded(nodes[k]) else k
            memo[k] = result
        return result

    def drawn_edges(self) -> list[tuple[BaseNode, BaseNode]]:
        """Edges between drawn nodes: re-attached, deduplicated, without self-loops."""
        nodes = self.rec.nodes
        cache: dict[Key, Optional[Key]] = {}
        seen: dict[tuple[Key, Key], None] = {}
        for a, b in self.rec.edges:
            da = cache[a] if a in cache else cache.setdefault(a, self.drawn_key(a))
            db = cache[b] if b in cache else cache.setdefault(b, self.drawn_key(b))
            if da is None or db is None or da == db:
                continue
            if isinstance(nodes[da], ContextNode) or isinstance(nodes[db], ContextNode):
                continue
            seen[(da, db)] = None
        return [(nodes[a], nodes[b]) for a, b in seen]
