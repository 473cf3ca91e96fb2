"""The structure of a block: what makes two module calls *structurally identical*.

Two module calls are structurally identical when they have the same type, the same input
and output shapes, the same parameter names and shapes, and their insides match: the same
kinds of nodes (layer types, op names, tensor shapes) in the same order, joined by the same
edges.  Names and module identity do not matter: the 32 decoder layers of a transformer
match, and so do 12 calls of one shared module.  :func:`structure_ids` numbers every layer
of a graph at once; :class:`BlockStructures` reads the blocks that may fold as it is asked
for them (see :mod:`~torchrecorder.projection.fold`).  Everything here reads node metadata only.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from functools import partial
from typing import Optional

from ..graph import Graph, adjacency
from ..nodes import BaseNode, Key, LayerNode, OpNode, ParamNode, ScopeNode, TensorNode

__all__ = ["BlockStructures", "structure_ids"]


def _kids(rec: Graph, layer: ScopeNode) -> list[BaseNode]:
    """Children of ``layer`` that take part in its structure (parameters do not)."""
    nodes = rec.nodes
    return [nodes[k] for k in layer.subnet_keys if k in nodes.keys() and not isinstance(nodes[k], ParamNode)]


def _params(rec: Graph, layer: LayerNode) -> tuple[Hashable, ...]:
    nodes = rec.nodes
    return tuple((n.name, n.shape, n.dtype) for k in layer.subnet_keys
                 if isinstance(n := dict.get(nodes, k), ParamNode))


def structure_ids(rec: Graph) -> dict[Key, int]:
    """A number per layer; two layers get the same number exactly when their structures match."""
    nodes = rec.nodes
    pos: dict[Key, int] = {}
    order: list[ScopeNode] = []
    stack: list[ScopeNode] = [rec.context]
    while stack:
        layer = stack.pop()
        order.append(layer)
        for i, kid in enumerate(_kids(rec, layer)):
            pos[kid.key] = i
            if isinstance(kid, LayerNode):
                stack.append(kid)

    # each edge belongs to the innermost layer holding both ends, as two relative paths
    owned: dict[Key, list[tuple[tuple[int, ...], tuple[int, ...]]]] = {}

    def depth(k: Key) -> int:
        return -1 if k is None else nodes[k].depth

    for a, b in rec.links:
        if a not in pos or b not in pos:
            continue  # parameters, or the context itself
        x, y, px, py = a, b, [], []
        while depth(x) > depth(y):
            px.append(pos.get(x, -1))
            x = nodes[x].parent_key
        while depth(y) > depth(x):
            py.append(pos.get(y, -1))
            y = nodes[y].parent_key
        while x != y:
            px.append(pos.get(x, -1))
            py.append(pos.get(y, -1))
            x, y = nodes[x].parent_key, nodes[y].parent_key
        owned.setdefault(x, []).append((tuple(reversed(px)), tuple(reversed(py))))

    # parameters live in a module's first call; later calls of it share them
    first_params: dict[tuple[str, str], tuple[Hashable, ...]] = {}
    for layer in order:
        if isinstance(layer, LayerNode) and layer.call_index == 1:
            first_params[(layer.path, layer.name)] = _params(rec, layer)

    interned: dict[Hashable, int] = {}
    ids: dict[Key, int] = {}
    for layer in reversed(order):  # children before parents
        kids: list[Hashable] = []
        for kid in _kids(rec, layer):
            if isinstance(kid, LayerNode):
                kids.append(ids[kid.key])
            elif isinstance(kid, TensorNode):
                kids.append(("tensor", kid.shape, kid.dtype, kid.role))
            elif isinstance(kid, OpNode):
                kids.append(("op", kid.op, tuple(map(tuple, kid.output_shapes))))
            else:
                kids.append((type(kid).__name__, kid.name))
        own: tuple[Hashable, ...] = (
            layer.type_name,
            tuple(map(tuple, layer.input_shapes)),
            tuple(map(tuple, layer.output_shapes)),
            first_params.get((layer.path, layer.name), ()),
            layer.error is not None,
        ) if isinstance(layer, LayerNode) else ("<context>",)
        signature = (
            *own,
            tuple(kids),
            tuple(sorted(owned.get(layer.key, ()))),
        )
        ids[layer.key] = interned.setdefault(signature, len(interned))
    return ids


class BlockStructures:
    """The structure of the blocks that may fold, read from a graph as it is asked for.

    :meth:`number` gives equal numbers to two layers exactly when
    :func:`structure_ids` would: the structure of a block is written out as
    its nodes in preorder (the children of a layer followed by an end mark, so
    that the order says how they nest) and the edges between them as pairs of
    positions in that order, which says the same as the edges each layer
    inside holds, as paths relative to it.

    It keeps what it has read (numbers, walks, the predecessors of each node):
    the projections that one drawing tries for one graph (the drawing budget's,
    see :func:`~.budget.fit`) share one, so that no block is read twice.  Make a
    new one for a graph that changed.
    """

    def __init__(self, rec: Graph) -> None:
        self.rec = rec
        self.nodes = rec.nodes
        self._preds: Optional[dict[Key, list[Key]]] = None
        self._succs: Optional[dict[Key, list[Key]]] = None
        self._preorder: dict[Key, list[Key]] = {}
        self._params: dict[Key, list[Key]] = {}
        self._entries: dict[Key, list[Key]] = {}
        self._numbers: dict[Key, int] = {}
        self._interned: dict[Hashable, int] = {}
        self._first_calls: Optional[dict[tuple[str, str], LayerNode]] = None
        self._param_memo: dict[Key, tuple[Hashable, ...]] = {}

    @property
    def succs(self) -> dict[Key, list[Key]]:
        """Each node's successors: keys, in the order of the graph's edges (indexed on first use)."""
        if self._succs is None:
            self._preds, self._succs = adjacency(self.rec.links)
        return self._succs

    @property
    def preds(self) -> dict[Key, list[Key]]:
        """Each node's predecessors: keys, in the order of the graph's edges (indexed on first use)."""
        if self._preds is None:
            self._preds, self._succs = adjacency(self.rec.links)
        return self._preds

    def preorder(self, layer: LayerNode) -> list[Key]:
        """Keys of ``layer`` and everything inside it but parameters, parents before children."""
        if layer.key not in self._preorder:
            self.number(layer)
        return self._preorder[layer.key]

    def params_inside(self, layer: LayerNode) -> list[Key]:
        """Keys of the parameters of ``layer`` and of every layer inside it."""
        if layer.key not in self._params:
            self.number(layer)
        return self._params[layer.key]

    def entries(self, layer: LayerNode) -> list[Key]:
        """The sources outside ``layer`` of the edges into it or anything inside it (its
        parameters count as outside), once per edge, found as its structure is read."""
        if layer.key not in self._entries:
            self.number(layer)
        return self._entries[layer.key]

    def number(self, layer: LayerNode) -> int:
        """A number per structure: equal for two layers exactly when their structures match."""
        got = self._numbers.get(layer.key)
        if got is None:
            interned = self._interned
            try:  # shapes are tuples (as recorded and loaded): no copies needed
                got = interned.setdefault(self._structure(layer, tuple), len(interned))
            except TypeError:  # a shape given as a list
                got = interned.setdefault(self._structure(layer, _tuples), len(interned))
            self._numbers[layer.key] = got
        return got

    def _first_params(self, layer: LayerNode, own: list[ParamNode]) -> tuple[Hashable, ...]:
        """The parameters of the first call of ``layer``'s module (``own`` are its own parameters)."""
        calls = self._first_calls
        if calls is None:
            calls = self._first_calls = _first_calls(self.rec)
        first = calls.get((layer.path, layer.name))
        if first is layer:
            return tuple([(p.name, p.shape, p.dtype) for p in own]) if own else ()
        if first is None:
            return ()
        got = self._param_memo.get(first.key)
        if got is None:
            nodes = self.nodes
            got = tuple([(p.name, p.shape, p.dtype) for k in first.subnet_keys
                         if isinstance(p := dict.get(nodes, k), ParamNode)])
            self._param_memo[first.key] = got
        return got

    def _structure(self, block: LayerNode, shapes: Callable[[list[tuple[int, ...]]], Hashable]) -> Hashable:
        nodes_get = partial(dict.get, self.nodes)  # (keys only: the C lookup, not NodeTable.get)
        first_params = self._first_params
        keys: list[Key] = []
        items: list[Hashable] = []
        params: list[Key] = []
        add_key, add_item, add_param = keys.append, items.append, params.append
        # a preorder walk that reads each layer's children with a for loop: the layer being
        # read (``None`` above the block), its item's place and its own parameters, and
        # the same of the layers it is inside, with what is left of their children
        open_layers: list[tuple[Iterator[Key], int, Optional[LayerNode], list[ParamNode]]] = []
        kids: Iterator[Key] = iter((block.key,))
        layer: Optional[LayerNode] = None
        own: list[ParamNode] = []
        at = 0
        while True:
            for key in kids:
                node = nodes_get(key)
                if node is None:
                    continue
                if type(node) is OpNode:
                    add_key(key)
                    add_item(("op", node.op, shapes(node.output_shapes)))
                elif type(node) is TensorNode:
                    add_key(key)
                    add_item(("tensor", node.shape, node.dtype, node.role))
                elif isinstance(node, LayerNode):
                    add_key(key)
                    open_layers.append((kids, at, layer, own))
                    at, layer, own = len(items), node, []
                    add_item(None)  # the layer's item, written once its parameters are known
                    kids = iter(node.subnet_keys)
                    break  # read its children first
                elif isinstance(node, ParamNode):
                    add_param(key)
                    own.append(node)
                elif isinstance(node, TensorNode):
                    add_key(key)
                    add_item(("tensor", node.shape, node.dtype, node.role))
                elif isinstance(node, OpNode):
                    add_key(key)
                    add_item(("op", node.op, shapes(node.output_shapes)))
                else:
                    add_key(key)
                    add_item((type(node).__name__, node.name))
            else:  # the layer's children are done: its parameters are known
                if layer is None:
                    break
                items[at] = ("layer", layer.type_name, shapes(layer.input_shapes),
                             shapes(layer.output_shapes), first_params(layer, own),
                             layer.error is not None)
                add_item(None)  # the end mark
                kids, at, layer, own = open_layers.pop()
        self._preorder[block.key] = keys
        self._params[block.key] = params
        # an edge as one int, ``i * n + j`` for positions ``i -> j``: the same order as the
        # pairs, and as telling, since two blocks of equal items have the same ``n``
        n = len(keys)
        index = dict(zip(keys, range(n), strict=True))
        preds_get, index_get = self.preds.get, index.get
        edges: list[int] = []
        entries: list[Key] = []  # the sources of the edges that enter the block from outside
        add_edge, add_entry = edges.append, entries.append
        for j, key in enumerate(keys):
            got = preds_get(key)
            if got:
                for p in got:
                    i = index_get(p)
                    if i is not None:
                        add_edge(i * n + j)
                    else:
                        add_entry(p)
        self._entries[block.key] = entries
        edges.sort()
        return (tuple(items), tuple(edges))


def _tuples(shapes: list[tuple[int, ...]]) -> Hashable:
    return tuple(map(tuple, shapes))


def _first_calls(rec: Graph) -> dict[tuple[str, str], LayerNode]:
    """``(path, name)`` -> the first call of that module (as :func:`structure_ids` finds it)."""
    out: dict[tuple[str, str], LayerNode] = {}
    twice = False
    for node in rec.nodes.values():
        if isinstance(node, LayerNode) and node.call_index == 1:
            key = (node.path, node.name)
            if key in out:
                twice = True
            out[key] = node
    if twice:  # two modules of one path and name: the last in structure_ids' order counts
        out = {}
        stack: list[ScopeNode] = [rec.context]
        while stack:
            layer = stack.pop()
            if isinstance(layer, LayerNode) and layer.call_index == 1:
                out[(layer.path, layer.name)] = layer
            stack.extend(kid for kid in _kids(rec, layer) if isinstance(kid, LayerNode))
    return out
