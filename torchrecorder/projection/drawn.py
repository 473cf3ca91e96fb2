"""The drawn graph: what a renderer shows of a graph at one ``render_depth``, computed once.

A :class:`Projection` answers, for one graph and one set of drawing options,
the questions every renderer asks: which layers are expanded into groups,
which nodes are drawn inside each group, which drawn node stands for a node
that is not drawn (an edge into a collapsed module is re-attached to its
box), which runs of identical blocks are folded, which edges are drawn (each
once, never a self-loop) and which tensor an edge carries when tensors are
not drawn as nodes.  It reads node metadata only, never a live module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Optional, Union

from ..errors import GraphError
from ..graph import Graph
from ..nodes import BaseNode, ContextNode, Key, LayerNode, OpNode, ParamNode, TensorNode
from .fold import FoldPlan

__all__ = ["AUTO_FOLD_MIN", "NODE_KINDS", "FoldRepeats", "Projection", "default_expanded", "fold_min",
           "is_passed_tensor", "kind_of"]

#: ``fold_repeats="auto"`` folds runs of at least this many identical blocks.
AUTO_FOLD_MIN = 8

FoldRepeats = Union[bool, int, str, None]

#: The kinds every renderer tells apart, by node class (searched along a node's MRO).  A
#: tensor with a ``role`` (the network's inputs and outputs) is of kind ``"io"``.  A
#: renderer may add states on top: ``"failed"`` (a module that raised) and ``"folded"``
#: (a run of identical blocks drawn once).
NODE_KINDS: Mapping[type, str] = MappingProxyType({
    LayerNode: "layer", ParamNode: "param", TensorNode: "tensor", OpNode: "op",
})


def kind_of(node: BaseNode, kinds: Mapping[type, str] = NODE_KINDS) -> str:
    """The kind of ``node``: ``"layer"``, ``"tensor"``, ``"io"``, ``"param"`` or ``"op"``.

    Raises:
        TypeError: no class in the node's MRO has a kind in ``kinds``.
    """
    for cls in type(node).__mro__:
        kind = kinds.get(cls)
        if kind is not None:
            if kind == "tensor" and getattr(node, "role", None):
                return "io"
            return kind
    raise TypeError(f"no kind for node type {type(node).__name__}")


def fold_min(fold_repeats: FoldRepeats) -> int:
    """The shortest run that ``fold_repeats`` folds (0: none).

    >>> fold_min("auto"), fold_min(True), fold_min(False), fold_min(3)
    (8, 2, 0, 3)
    """
    if fold_repeats is None or fold_repeats is False:
        return 0
    if fold_repeats is True:
        return 2
    if fold_repeats == "auto":
        return AUTO_FOLD_MIN
    if isinstance(fold_repeats, int) and fold_repeats >= 0:
        return fold_repeats if fold_repeats >= 2 else 0
    raise ValueError(f"fold_repeats must be 'auto', a bool or an int >= 0, got {fold_repeats!r}")


def default_expanded(node: BaseNode, render_depth: int, nodes: Mapping[Key, BaseNode]) -> bool:
    """Whether ``node`` is drawn as a group of what ran inside it, by default.

    Layers above ``render_depth`` are, except a module that calls no other
    module and ran at most one operation (an ``nn.Linear``): its box already
    says all that a group would.
    """
    if not isinstance(node, LayerNode) or node.depth >= render_depth or not node.subnets:
        return False
    ops = 0
    for key in node.subnets:
        child = nodes.get(key)
        if isinstance(child, LayerNode):
            return True
        if isinstance(child, OpNode):
            ops += 1
    return ops > 1


def is_passed_tensor(node: BaseNode) -> bool:
    """A tensor between layers: not a parameter, not one of the network's inputs or outputs."""
    return isinstance(node, TensorNode) and not isinstance(node, ParamNode) and not node.role


class Projection:
    """What is drawn of ``graph`` with one set of options; every answer is computed once.

    Args:
        graph: the graph to draw.
        render_depth: modules at depth ``< render_depth`` may be expanded.
        expanded: the rule saying whether a layer is drawn as a group (a
            renderer's ``is_expanded``); called at most once per layer.
        min_run: the shortest run of identical blocks that is folded (0: none).
        tensor_nodes: whether tensors passed between layers are drawn as nodes.
    """

    def __init__(self, graph: Graph, render_depth: int, expanded: Callable[[BaseNode], bool], *,
                 min_run: int, tensor_nodes: bool) -> None:
        self.graph = graph
        self.render_depth = render_depth
        self.min_run = min_run
        self.tensor_nodes = tensor_nodes
        self._rule = expanded
        self._expanded: dict[Key, bool] = {}
        self._fold: Optional[FoldPlan] = None
        self._drawn: Optional[dict[Key, Optional[Key]]] = None
        self._edges: Optional[list[tuple[BaseNode, BaseNode]]] = None
        self._via: dict[tuple[Key, Key], TensorNode] = {}
        self._out_degree: dict[Key, int] = {}

    def is_expanded(self, node: BaseNode) -> bool:
        """The ``expanded`` rule's answer for ``node``, asked once per node."""
        got = self._expanded.get(node.key)
        if got is None:
            got = self._expanded[node.key] = bool(self._rule(node))
        return got

    @property
    def fold(self) -> FoldPlan:
        """The runs of identical blocks drawn once (see :class:`~.fold.FoldPlan`)."""
        if self._fold is None:
            self._fold = FoldPlan.build(self.graph, self.min_run, self.is_expanded)
        return self._fold

    def repeats(self, node: BaseNode) -> list[LayerNode]:
        """The blocks the drawn ``node`` stands for: a folded run, ``[node]`` for another layer,
        ``[]`` for a node that is not a layer."""
        if not isinstance(node, LayerNode):
            return []
        run = self.fold.runs.get(node.key)
        return run if run is not None else [node]

    def children(self, node: BaseNode) -> list[BaseNode]:
        """The nodes drawn directly inside the expanded layer ``node``, in order."""
        if not isinstance(node, LayerNode):
            return []
        nodes = self.graph.nodes
        hidden = self.fold.hidden
        kids = [nodes[k] for k in node.subnets if k in nodes and k not in hidden]
        if not self.tensor_nodes:
            kids = [n for n in kids if not is_passed_tensor(n)]
        return kids

    # ---------------------------------------------------------- drawn keys
    def drawn_key(self, key: Key) -> Optional[Key]:
        """The key of the drawn node that stands for ``key``: itself, or the collapsed module
        that holds it, or its counterpart in the first block of a folded run.

        ``None`` where nothing drawn stands for it: the context, a parameter
        inside a collapsed module (its edges are not data flowing between
        layers), a tensor passed between folded blocks.
        """
        drawn = self._drawn if self._drawn is not None else self._drawn_map()
        if key not in drawn:
            raise GraphError(f"{key!r} is not a node of the graph, or is not reachable from the context")
        return drawn[key]

    def _drawn_map(self) -> dict[Key, Optional[Key]]:
        """Every node's drawn key, found in one walk down from the context."""
        nodes = self.graph.nodes
        fold = self.fold
        hidden, alias = fold.hidden, fold.alias
        expanded = self.is_expanded
        drawn: dict[Key, Optional[Key]] = {None: None}
        stack: list[LayerNode] = [self.graph.context]
        while stack:
            layer = stack.pop()
            for key in layer.subnets:
                node = nodes.get(key)
                if node is None or key in hidden:
                    continue
                drawn[key] = None if isinstance(node, ContextNode) else key
                if isinstance(node, LayerNode):
                    if expanded(node):
                        stack.append(node)
                    else:
                        _collapse(nodes, node, drawn)
        for key in alias:
            target: Key = key
            while target in alias:
                target = alias[target]
                if target is None:
                    break
            drawn[key] = None if target is None else drawn.get(target)
        self._drawn = drawn
        return drawn

    # --------------------------------------------------------------- edges
    @property
    def edges(self) -> list[tuple[BaseNode, BaseNode]]:
        """Edges between drawn nodes: re-attached, deduplicated, without self-loops, in
        recording order.

        With ``tensor_nodes=False`` an edge through a tensor left out joins the
        tensor's producer to each of its consumers, and :meth:`edge_tensor`
        says which tensor it carries.
        """
        if self._edges is None:
            drawn = self._drawn if self._drawn is not None else self._drawn_map()
            pairs: dict[tuple[Key, Key], None] = {}
            get = drawn.get
            for a, b in self.graph.edges:
                da = get(a)
                if da is None:
                    continue
                db = get(b)
                if db is None or da == db:
                    continue
                pairs[(da, db)] = None
            if not self.tensor_nodes:
                pairs = self._through_tensors(list(pairs))
            nodes = self.graph.nodes
            self._edges = [(nodes[a], nodes[b]) for a, b in pairs]
            degree: dict[Key, int] = {}
            for a, _ in pairs:
                degree[a] = degree.get(a, 0) + 1
            self._out_degree = degree
        return self._edges

    def out_degree(self, node: BaseNode) -> int:
        """How many drawn edges leave ``node``."""
        if self._edges is None:
            self.edges  # noqa: B018 - computes the degrees
        return self._out_degree.get(node.key, 0)

    def edge_tensor(self, fnode: BaseNode, tnode: BaseNode) -> Optional[TensorNode]:
        """The tensor left out (``tensor_nodes=False``) that the drawn edge carries, if any."""
        if self._edges is None:
            self.edges  # noqa: B018 - computes the carried tensors
        return self._via.get((fnode.key, tnode.key))

    def _through_tensors(self, pairs: list[tuple[Key, Key]]) -> dict[tuple[Key, Key], None]:
        """Replace each passed tensor ``t`` in ``pairs`` by edges from its producers to its consumers."""
        nodes = self.graph.nodes
        succ: dict[Key, list[Key]] = {}
        for a, b in pairs:
            succ.setdefault(a, []).append(b)

        def consumers(t: Key) -> list[Key]:
            """Drawn nodes fed by tensor ``t``, through chains of left-out tensors."""
            out: list[Key] = []
            todo, seen = [t], {t}
            while todo:
                for b in succ.get(todo.pop(0), ()):
                    if is_passed_tensor(nodes[b]):
                        if b not in seen:
                            seen.add(b)
                            todo.append(b)
                    else:
                        out.append(b)
            return out

        result: dict[tuple[Key, Key], None] = {}
        via = self._via
        for a, b in pairs:
            if is_passed_tensor(nodes[a]):
                continue
            tensor = nodes[b]
            if not is_passed_tensor(tensor):
                result[(a, b)] = None
                continue
            if not isinstance(tensor, TensorNode):
                raise GraphError(f"{b!r} is not a tensor")
            for c in consumers(b):
                if c != a:
                    result[(a, c)] = None
                    via.setdefault((a, c), tensor)
        return result


def _collapse(nodes: Mapping[Key, BaseNode], layer: LayerNode, drawn: dict[Key, Optional[Key]]) -> None:
    """Everything inside the collapsed ``layer`` is drawn as ``layer``; its parameters as nothing."""
    key = layer.key
    stack = list(layer.subnets)
    while stack:
        k = stack.pop()
        node = nodes.get(k)
        if node is None or k is None:
            continue
        if isinstance(node, ParamNode):
            drawn[k] = None
            continue
        drawn[k] = key
        if isinstance(node, LayerNode):
            stack.extend(node.subnets)
