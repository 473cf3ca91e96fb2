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

from collections import deque
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Optional, Union

from ..errors import GraphError
from ..graph import Graph
from ..nodes import BaseNode, ContextNode, Key, LayerNode, OpNode, ParamNode, TensorNode
from .fold import BlockStructures, FoldPlan
from .loops import DATA_MOVEMENT_OPS, LoopNode

__all__ = ["AUTO_FOLD_MIN", "DATA_MOVEMENT_OPS", "NODE_KINDS", "FoldRepeats", "Projection",
           "default_expanded", "fold_min", "is_passed_tensor", "kind_of"]

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


def default_expanded(node: BaseNode, render_depth: int, nodes: Mapping[Key, BaseNode], *,
                     expand_leaves: bool = False) -> bool:
    """Whether ``node`` is drawn as a group of what ran inside it, by default.

    Layers above ``render_depth`` are, except a leaf module (one that called
    no other module: an ``nn.Linear``, an RMSNorm written as six operations),
    which is one box at every depth, so that identical modules look the same
    wherever they sit.  With ``expand_leaves`` a leaf that ran more than one
    operation opens too, and so does the network itself (depth 0) always:
    a network written without submodules shows its operations.
    """
    if not isinstance(node, LayerNode) or node.depth >= render_depth or not node.subnets:
        return False
    expand_leaves = expand_leaves or node.depth == 0
    ops = 0
    for key in node.subnets:
        child = nodes.get(key)
        if isinstance(child, LayerNode):
            return True
        if isinstance(child, OpNode):
            ops += 1
    return expand_leaves and ops > 1


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
        all_ops: draw every operation.  Without it, operations that only move
            data (:data:`DATA_MOVEMENT_OPS`) are left out and their edges joined
            (:meth:`edge_ops` names them), and operations that read no drawn
            input (``arange``, a buffer's ``expand``) are left out with their
            edges, so that nothing floats without an input.
        loops: fold Python loops too (runs of identical iterations of operations, see
            :mod:`~.loops`), not only runs of identical blocks.
        structures: the structures of ``graph``'s blocks to fold by (see
            :class:`~.fold.BlockStructures`), shared by the projections of one drawing;
            ``None``: its own.

    Raises:
        ValueError: ``structures`` are of another graph.
    """

    def __init__(self, graph: Graph, render_depth: int, expanded: Callable[[BaseNode], bool], *,
                 min_run: int, tensor_nodes: bool, all_ops: bool = True, loops: bool = True,
                 structures: Optional[BlockStructures] = None) -> None:
        if structures is not None and structures.rec is not graph:
            raise ValueError("structures of another graph")
        self.graph = graph
        self._structures = structures
        # the nodes as a plain dict: lookups in the loops below stay on CPython's fast path
        # (graph.nodes is a NodeTable, a dict subclass)
        self.nodes: dict[Key, BaseNode] = dict(graph.nodes)
        self.loops = loops
        self.render_depth = render_depth
        self.min_run = min_run
        self.tensor_nodes = tensor_nodes
        self.all_ops = all_ops
        self._rule = expanded
        self._expanded: dict[Key, bool] = {}
        self._fold: Optional[FoldPlan] = None
        self._drawn: Optional[dict[Key, Optional[Key]]] = None
        self._edges: Optional[list[tuple[BaseNode, BaseNode]]] = None
        self._via: dict[tuple[Key, Key], TensorNode] = {}
        self._ops: dict[tuple[Key, Key], tuple[OpNode, ...]] = {}
        self._left_out: frozenset[Key] = frozenset()
        self._out_degree: dict[Key, int] = {}

    def is_expanded(self, node: BaseNode) -> bool:
        """The ``expanded`` rule's answer for ``node``, asked once per node."""
        got = self._expanded.get(node.key)
        if got is None:
            got = self._expanded[node.key] = isinstance(node, LoopNode) or bool(self._rule(node))
        return got

    @property
    def structures(self) -> BlockStructures:
        """The structures of the graph's blocks that the fold plan compared (see
        :class:`~.fold.BlockStructures`)."""
        if self._structures is None:
            self._structures = BlockStructures(self.graph)
        return self._structures

    @property
    def preds(self) -> Mapping[Key, list[Key]]:
        """Each node's predecessors in the graph: keys, in the order of its edges."""
        return self.structures.preds

    @property
    def fold(self) -> FoldPlan:
        """The runs of identical blocks drawn once (see :class:`~.fold.FoldPlan`)."""
        if self._fold is None:
            self._fold = FoldPlan.build(self.graph, self.min_run, self.is_expanded, all_ops=self.all_ops,
                                        loops=self.loops, structures=self.structures)
        return self._fold

    def repeats(self, node: BaseNode) -> list[LayerNode]:
        """The blocks the drawn ``node`` stands for: a folded run, ``[node]`` for another layer,
        ``[]`` for a node that is not a layer.  Of a folded loop's group
        (:class:`~.loops.LoopNode`): one ``LoopNode`` per iteration."""
        if not isinstance(node, LayerNode):
            return []
        fold = self.fold
        run = fold.loops.get(node.key) if isinstance(node, LoopNode) else fold.runs.get(node.key)
        return run if run is not None else [node]

    def children(self, node: BaseNode) -> list[BaseNode]:
        """The nodes drawn directly inside the expanded layer ``node``, in order."""
        if not isinstance(node, LayerNode):
            return []
        nodes = self.nodes
        fold = self.fold
        hidden = fold.hidden
        kids = [nodes[k] for k in node.subnets if k in nodes and k not in hidden]
        if fold.in_loop:  # a folded loop's group stands for the children of its first iteration
            in_loop = fold.in_loop
            grouped: list[BaseNode] = []
            for kid in kids:
                group = in_loop.get(kid.key)
                if group is None or group is node:
                    grouped.append(kid)
                elif kid.key == next(iter(group.subnets)):
                    grouped.append(group)
            kids = grouped
        if not self.tensor_nodes or not self.all_ops:
            left_out = self.left_out
            kids = [n for n in kids if n.key not in left_out]
            if fold.in_loop:  # a loop of operations all left out (a getitem each time): no group
                kids = [n for n in kids if not isinstance(n, LoopNode) or self.children(n)]
        return kids

    @property
    def left_out(self) -> frozenset[Key]:
        """Keys of the nodes not drawn although their group is: passed tensors (without
        ``tensor_nodes``), data-movement operations and operations with no drawn input
        (without ``all_ops``)."""
        if self._edges is None:
            self.edges  # noqa: B018 - decides what is left out
        return self._left_out

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
        nodes = self.nodes
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
            iteration = self.fold.iteration
            for a, b in self.graph.edges:
                da = get(a)
                if da is None:
                    continue
                db = get(b)
                if db is None or da == db:
                    continue
                if iteration:  # an edge between two iterations of a folded loop: not drawn
                    ia = iteration.get(a)
                    if ia is not None:
                        ib = iteration.get(b)
                        if ib is not None and ia[0] == ib[0] and ia[1] != ib[1]:
                            continue
                pairs[(da, db)] = None
            if not self.tensor_nodes or not self.all_ops:
                pairs = self._join_left_out(list(pairs))
            nodes = self.nodes
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

    def edge_ops(self, fnode: BaseNode, tnode: BaseNode) -> tuple[OpNode, ...]:
        """The data-movement operations left out (without ``all_ops``) on the drawn edge
        from ``fnode`` to ``tnode``, in the order they ran."""
        if self._edges is None:
            self.edges  # noqa: B018 - computes the left-out operations
        return self._ops.get((fnode.key, tnode.key), ())

    def _join_left_out(self, pairs: list[tuple[Key, Key]]) -> dict[tuple[Key, Key], None]:
        """``pairs`` without the nodes left out: an edge into a passed tensor or a
        data-movement op is joined to what the chain feeds; an operation with no drawn
        input is dropped with its edges."""
        nodes = self.nodes
        succ: dict[Key, list[Key]] = {}
        for a, b in pairs:
            succ.setdefault(a, []).append(b)
        through: set[Key] = set()
        if not self.tensor_nodes:
            through.update(k for k in succ if is_passed_tensor(nodes[k]))
            through.update(b for _, b in pairs if is_passed_tensor(nodes[b]))
        dropped: set[Key] = set()
        if not self.all_ops:
            through.update(k for k in succ
                           if isinstance(n := nodes[k], OpNode) and n.op in DATA_MOVEMENT_OPS)
            dropped = self._sourceless(pairs, succ)
            through -= dropped
        self._left_out = frozenset(through | dropped)

        def reached(start: Key) -> list[tuple[Key, Optional[TensorNode], tuple[OpNode, ...]]]:
            """Drawn nodes fed through the chain of left-out nodes that starts at ``start``,
            each with the last tensor and the operations on the way."""
            first = nodes[start]
            seen = {start: (first if isinstance(first, TensorNode) else None,
                            (first,) if isinstance(first, OpNode) else ())}
            out: list[tuple[Key, Optional[TensorNode], tuple[OpNode, ...]]] = []
            todo = deque([start])
            while todo:
                k = todo.popleft()
                tensor, ops = seen[k]
                for b in succ.get(k, ()):
                    if b in dropped:
                        continue
                    if b in through:
                        if b not in seen:
                            node = nodes[b]
                            seen[b] = ((node, ops) if isinstance(node, TensorNode)
                                       else (tensor, (*ops, node) if isinstance(node, OpNode) else ops))
                            todo.append(b)
                    else:
                        out.append((b, tensor, ops))
            return out

        result: dict[tuple[Key, Key], None] = {}
        via, edge_ops = self._via, self._ops
        memo: dict[Key, list[tuple[Key, Optional[TensorNode], tuple[OpNode, ...]]]] = {}
        for a, b in pairs:
            if a in through or a in dropped or b in dropped:
                continue
            if b not in through:
                result[(a, b)] = None
                continue
            got = memo.get(b)
            if got is None:  # several producers feeding one left-out node walk its chain once
                got = memo[b] = reached(b)
            for c, tensor, ops in got:
                if c != a and (a, c) not in result:
                    result[(a, c)] = None
                    if tensor is not None:
                        via[(a, c)] = tensor
                    if ops:
                        edge_ops[(a, c)] = ops
        return result

    def _sourceless(self, pairs: list[tuple[Key, Key]], succ: Mapping[Key, list[Key]]) -> set[Key]:
        """Drawn operations (and the passed tensors they make) that no input, parameter or
        layer feeds, however far back: constants and buffer reads."""
        nodes = self.nodes
        candidates: set[Key] = set()
        has_input: set[Key] = set()
        for a, b in pairs:
            has_input.add(b)
            for k in (a, b):
                node = nodes[k]
                if isinstance(node, OpNode) or is_passed_tensor(node):
                    candidates.add(k)
        fed = list(dict.fromkeys(a for a, _ in pairs if a not in candidates))  # each once
        sourced: set[Key] = set()
        while fed:
            for b in succ.get(fed.pop(), ()):
                if b in candidates and b not in sourced:
                    sourced.add(b)
                    fed.append(b)
        # a tensor nothing made (no edge in) is not a constant's product: keep it
        return {k for k in candidates - sourced
                if isinstance(nodes[k], OpNode) or k in has_input}


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
