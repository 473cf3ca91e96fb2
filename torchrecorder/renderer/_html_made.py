"""The edges of the HTML page out of a closed box that holds an operation nothing feeds.

``make_dot`` leaves out an operation that no input, parameter or layer feeds, however far
back (a constant: T5's zero cross-attention position bias, made inside its first decoder
block), with its edges, while the module that holds it is open.  Once that module is closed,
its box stands for the operation, and the box has inputs: the edge from the box to what reads
the constant is drawn (T5 at depth 3: ``decoder.block.0.layer.1 -> decoder.block.1.layer.1``).

The page draws every view from its finest drawing (every module open), where the operation
is left out, so it cannot find those edges there.  :func:`made_edges` lists them per holding
module: for each such operation, the innermost module of the page that holds it and each
drawn node its value reaches through nodes left out; the page draws the edge from that
module's box, re-attached as any other, only while the module is not drawn open
(``page_dot.js``).  A value passed on by an operation nothing feeds in a module beside it
(T5's next block) goes to that module, and on from there: block 0 -> block 1 -> block 2.
An operation left out at the finest depth that a closed box would feed (a constant's
consumer in an open sibling) is drawn by ``make_dot`` but not by the page.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Optional

from ..graph import Graph
from ..nodes import BaseNode, Key, LayerNode, OpNode, TensorNode
from ..projection import DATA_MOVEMENT_OPS, Projection

__all__ = ["MadeEdges", "made_edges"]


class MadeEdges:
    """The edges out of boxes that hold a constant, with what each carries: read as the page's
    edge rows read a projection's edges (``edges``, ``edge_tensor``, ``edge_tensors``, ``edge_ops``).

    Attributes:
        edges: ``(module, node)`` pairs, the module the innermost one of the page holding the
            constant's operation, the node one the page draws, in recording order.
    """

    def __init__(self) -> None:
        self.edges: list[tuple[BaseNode, BaseNode]] = []
        self._via: dict[tuple[Key, Key], TensorNode] = {}
        self._ops: dict[tuple[Key, Key], tuple[OpNode, ...]] = {}

    def add(self, module: LayerNode, node: BaseNode, tensor: Optional[TensorNode],
            ops: tuple[OpNode, ...]) -> None:
        """Add the edge from ``module``'s box to ``node`` (once), carrying ``tensor`` past ``ops``."""
        pair = (module.key, node.key)
        if pair in self._ops:
            return
        self.edges.append((module, node))
        self._ops[pair] = ops
        if tensor is not None:
            self._via[pair] = tensor

    def edge_tensor(self, fnode: BaseNode, tnode: BaseNode) -> Optional[TensorNode]:
        """The tensor the edge carries (the last one left out on its way), if any."""
        return self._via.get((fnode.key, tnode.key))

    def edge_tensors(self, fnode: BaseNode, tnode: BaseNode) -> tuple[TensorNode, ...]:
        """The tensors the edge stands for: the one of :meth:`edge_tensor`, if any."""
        tensor = self.edge_tensor(fnode, tnode)
        return () if tensor is None else (tensor,)

    def edge_ops(self, fnode: BaseNode, tnode: BaseNode) -> tuple[OpNode, ...]:
        """The data-movement operations left out on the edge's way, in the order they ran."""
        return self._ops.get((fnode.key, tnode.key), ())


def made_edges(rec: Graph, finest: Projection, index: Mapping[Key, int]) -> MadeEdges:
    """The edges out of each page module that holds an operation ``finest`` leaves out because
    nothing drawn feeds it (see the module docstring).

    Args:
        rec: the recording.
        finest: the page's finest drawing.
        index: node key -> its row in the page's data (the nodes the page can draw).
    """
    out = MadeEdges()
    hidden = finest.left_out
    if not hidden:
        return out
    nodes = rec.nodes
    drawn_key = finest.drawn_key
    succ: dict[Key, list[Key]] = {}
    for a, b in rec.links:
        ka, kb = drawn_key(a), drawn_key(b)
        if ka is None or kb is None or ka == kb:
            continue
        succ.setdefault(ka, []).append(kb)
    # the hidden nodes that something the page draws feeds (through hidden nodes): not constants
    fed: set[Key] = set()
    todo = deque(k for k in succ if k in index)
    while todo:
        for b in succ.get(todo.popleft(), ()):
            if b in hidden and b not in fed:
                fed.add(b)
                todo.append(b)
    for key in rec.nodes:
        if key not in hidden or key in fed or key not in succ or not isinstance(nodes[key], OpNode):
            continue
        module = _holder(nodes[key], nodes, index)
        if module is None:
            continue  # made at the top level: no box ever stands for it
        _reach(key, succ, hidden, fed, index, nodes, module, out)
    return out


def _reach(start: Key, succ: Mapping[Key, list[Key]], hidden: frozenset[Key], fed: set[Key],
           index: Mapping[Key, int], nodes: Mapping[Key, BaseNode], module: LayerNode,
           out: MadeEdges) -> None:
    """Add to ``out`` an edge from ``module`` to each drawn node that the value made at ``start``
    reaches through hidden nodes, with the last tensor and the data-movement operations passed.
    The value stops at an operation nothing feeds in a module beside ``module`` (neither
    holding it nor held by it: T5's next block, which passes the bias on): the edge goes to
    that module, and that operation's own edges go on from there."""
    seen: dict[Key, tuple[Optional[TensorNode], tuple[OpNode, ...]]] = {start: (None, ())}
    todo = deque([start])
    while todo:
        k = todo.popleft()
        tensor, ops = seen[k]
        for b in succ.get(k, ()):
            if b in index:
                out.add(module, nodes[b], tensor, ops)
            elif b in hidden and b not in seen:
                node = nodes[b]
                if isinstance(node, OpNode) and b not in fed:
                    other = _holder(node, nodes, index)
                    beside = other is not None and not _within(other, module, nodes)
                    if other is not None and beside and not _within(module, other, nodes):
                        seen[b] = (tensor, ops)
                        out.add(module, other, tensor, ops)
                        continue
                if isinstance(node, TensorNode):
                    seen[b] = (node, ops)
                elif isinstance(node, OpNode) and node.op in DATA_MOVEMENT_OPS:
                    seen[b] = (tensor, (*ops, node))
                else:
                    seen[b] = (tensor, ops)
                todo.append(b)


def _holder(node: BaseNode, nodes: Mapping[Key, BaseNode], index: Mapping[Key, int]) -> Optional[LayerNode]:
    """The innermost module the page draws that holds ``node``; ``None`` if none does."""
    parent = node.parent_key
    while parent is not None:
        holder = nodes.get(parent)
        if holder is None:
            return None
        if parent in index and isinstance(holder, LayerNode):
            return holder
        parent = holder.parent_key
    return None


def _within(inner: LayerNode, outer: LayerNode, nodes: Mapping[Key, BaseNode]) -> bool:
    """Whether ``inner`` is ``outer`` or a module inside it."""
    key: Key = inner.key
    while key is not None:
        if key == outer.key:
            return True
        holder = nodes.get(key)
        if holder is None:
            return False
        key = holder.parent_key
    return False
