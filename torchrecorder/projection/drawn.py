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

import contextlib
import itertools
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Optional, Union

from ..errors import GraphError
from ..graph import Graph
from ..nodes import BaseNode, ContextNode, Key, LayerNode, OpNode, ParamNode, ScopeNode, TensorNode
from .edges import drawn_edges, is_passed_tensor
from .fold import FoldPlan
from .loops import DATA_MOVEMENT_OPS, LoopNode
from .structures import BlockStructures

__all__ = ["AUTO_FOLD_MIN", "DATA_MOVEMENT_OPS", "IO_ROLES", "NODE_KINDS", "FoldRepeats", "Projection",
           "default_expanded", "fold_min", "is_passed_tensor", "kind_of"]

#: ``fold_repeats="auto"`` folds runs of at least this many identical blocks.
AUTO_FOLD_MIN = 8

FoldRepeats = Union[bool, int, str, None]


#: The kinds every renderer tells apart, by node class (searched along a node's MRO).  A
#: tensor whose ``role`` is one of :data:`IO_ROLES` (the network's inputs and outputs) is of
#: kind ``"io"``; another role (a tensor saved for the backward pass) leaves it a ``"tensor"``.  A
#: renderer may add states on top: ``"failed"`` (a module that raised) and ``"folded"``
#: (a run of identical blocks drawn once).
NODE_KINDS: Mapping[type, str] = MappingProxyType({
    LayerNode: "layer", ParamNode: "param", TensorNode: "tensor", OpNode: "op",
})
#: the roles of the tensors drawn as the network's inputs and outputs (kind ``"io"``)
IO_ROLES = frozenset({"input", "output"})


def kind_of(node: BaseNode, kinds: Mapping[type, str] = NODE_KINDS) -> str:
    """The kind of ``node``: ``"layer"``, ``"tensor"``, ``"io"``, ``"param"`` or ``"op"``.

    Raises:
        TypeError: no class in the node's MRO has a kind in ``kinds``.
    """
    for cls in type(node).__mro__:
        kind = kinds.get(cls)
        if kind is not None:
            if kind == "tensor" and getattr(node, "role", None) in IO_ROLES:
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
    if not isinstance(node, LayerNode) or node.depth >= render_depth or not node.subnet_keys:
        return False
    expand_leaves = expand_leaves or node.depth == 0
    ops = 0
    for key in node.subnet_keys:
        child = nodes.get(key)
        if isinstance(child, LayerNode):
            return True
        if isinstance(child, OpNode):
            ops += 1
    return expand_leaves and ops > 1


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
            :class:`~.structures.BlockStructures`), shared by the projections of one drawing;
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
        self._carried: list[tuple[BaseNode, BaseNode]] = []
        self._via: dict[tuple[Key, Key], TensorNode] = {}
        self._more: dict[tuple[Key, Key], tuple[TensorNode, ...]] = {}
        self._ops: dict[tuple[Key, Key], tuple[OpNode, ...]] = {}
        self._left_out: frozenset[Key] = frozenset()
        self._out_degree: dict[Key, int] = {}
        self._lifted: dict[Key, list[Key]] = {}  # a collapsed module's box -> parameters beside it
        self._beside: dict[Key, Key] = {}  # each of those parameters -> the box

    def is_expanded(self, node: BaseNode) -> bool:
        """The ``expanded`` rule's answer for ``node``, asked once per node."""
        got = self._expanded.get(node.key)
        if got is None:
            got = self._expanded[node.key] = isinstance(node, LoopNode) or bool(self._rule(node))
        return got

    @property
    def structures(self) -> BlockStructures:
        """The structures of the graph's blocks that the fold plan compared (see
        :class:`~.structures.BlockStructures`)."""
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
        """The nodes drawn directly inside the expanded layer (or the context) ``node``, in order."""
        if not isinstance(node, ScopeNode):
            return []
        nodes = self.nodes
        fold = self.fold
        hidden = fold.hidden
        kids = [nodes[k] for k in node.subnet_keys if k in nodes and k not in hidden]
        if self._drawn is None:
            self._drawn_map()
        if self._lifted:  # parameters read outside their collapsed module: beside its box
            lifted = self._lifted
            kids = [p for kid in kids for p in itertools.chain(
                (nodes[k] for k in lifted.get(kid.key, ())), (kid,))]
        if fold.in_loop:  # a folded loop's group stands for the children of its first iteration
            in_loop = fold.in_loop
            grouped: list[BaseNode] = []
            for kid in kids:
                group = in_loop.get(kid.key)
                if group is None or group is node:
                    grouped.append(kid)
                elif kid.key == next(iter(group.subnet_keys)):
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

    def beside(self, node: BaseNode) -> Optional[LayerNode]:
        """The collapsed module whose box the parameter ``node`` is drawn beside (something
        outside the module reads it, see :meth:`drawn_key`), or ``None``."""
        if self._drawn is None:
            self._drawn_map()
        box = self.nodes.get(self._beside.get(node.key))
        return box if isinstance(box, LayerNode) else None

    @contextlib.contextmanager
    def naming_beside(self, node: ParamNode, box: Optional[LayerNode]) -> Iterator[None]:
        """While the block runs, :meth:`param_name` (and so a styler's label) names the
        parameter ``node`` as drawn beside ``box``'s box, or, with ``None``, as drawn in its
        own module: the HTML page labels a lifted parameter for each box the reader can leave
        it beside."""
        if self._drawn is None:
            self._drawn_map()
        had = self._beside.get(node.key)
        if box is None:
            self._beside.pop(node.key, None)
        else:
            self._beside[node.key] = box.key
        try:
            yield
        finally:
            if had is None:
                self._beside.pop(node.key, None)
            else:
                self._beside[node.key] = had

    def param_name(self, node: ParamNode) -> str:
        """The name of the parameter ``node`` where it is drawn: as recorded (relative to the
        module call that first read it), or, drawn :meth:`beside` a collapsed module's box,
        prefixed with the names of the modules from the box down (``fc.weight``), as a
        parameter read before its module's call is named."""
        box = self.beside(node)
        if box is None:
            return node.name
        names = [node.name]
        nodes = self.nodes
        key: Key = node.parent_key
        while key is not None and key != box.parent_key:
            layer = nodes.get(key)
            if layer is None:
                break
            names.append(layer.name)
            key = layer.parent_key
        return ".".join(reversed(names))

    # ---------------------------------------------------------- drawn keys
    def drawn_key(self, key: Key) -> Optional[Key]:
        """The key of the drawn node that stands for ``key``: itself, or the collapsed module
        that holds it, or its counterpart in the first block of a folded run.

        ``None`` where nothing drawn stands for it: the context, a parameter
        inside a collapsed module that only operations of that module read (its edges are
        not data flowing between layers), a tensor passed between folded blocks.  A
        parameter of a collapsed module that something outside the module reads (a momentum
        encoder's update, ``x @ self.emb.weight.T`` after ``self.emb(ids)``) is drawn as
        itself, beside the module's box (:meth:`children` of the group holding the box),
        as it is when it is read before the module's call.
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
        inside: dict[Key, Key] = {}  # parameter made inside a collapsed module -> its box
        stack: list[ScopeNode] = [self.graph.context]
        while stack:
            layer = stack.pop()
            for key in layer.subnet_keys:
                node = nodes.get(key)
                if node is None or key in hidden:
                    continue
                drawn[key] = None if isinstance(node, ContextNode) else key
                if isinstance(node, LayerNode):
                    if expanded(node):
                        stack.append(node)
                    else:
                        _collapse(nodes, node, drawn, inside)
        if alias:
            # a node drawn as another's counterpart is drawn as that node is; in bulk (map and
            # zip run in C): one step first (``drawn[None]`` is ``None``), then the few keys
            # whose counterpart is itself an alias (a fold inside a folded block) followed
            # to the end of their chain
            drawn.update(zip(alias, list(map(drawn.get, alias.values())), strict=True))
            onward = alias.keys() & alias.values()
            if onward:
                for key in itertools.compress(alias, map(onward.__contains__, alias.values())):
                    target: Key = key
                    while target in alias:
                        target = alias[target]
                        if target is None:
                            break
                    drawn[key] = None if target is None else drawn.get(target)
        if inside:
            self._lift(inside, drawn)
        self._drawn = drawn
        return drawn

    def _lift(self, inside: dict[Key, Key], drawn: dict[Key, Optional[Key]]) -> None:
        """Draw as itself each parameter of ``inside`` (made inside a collapsed module: its box)
        that a node drawn outside that box reads, listed before the box in :attr:`_lifted`.
        A node inside another call of the box's module (a module called three times reads its
        parameters, recorded in its first call, in each) or of a module inside it is not
        outside it, nor is an operation of a module that holds the parameter as its own (an
        output projection tied to the embedding: its box stands for its weight).

        A parameter of a later block of a folded run or iteration of a folded loop stands
        for nothing (it is in ``fold.alias``, not in ``inside``); its counterpart in the first
        block is lifted when that one is read outside its module."""
        lifted: dict[Key, None] = {}
        get = inside.get
        nodes = self.nodes
        for a, b in self.graph.links:
            box = get(a)
            if box is not None and a not in lifted:
                target = drawn.get(b)
                if (target is not None and target != box and not _in_module(nodes, b, _path(nodes[box]))
                        and not held_by_reader(nodes, b, nodes[a])):
                    lifted[a] = None
        by_box = self._lifted
        for key in lifted:
            drawn[key] = key
            self._beside[key] = inside[key]
            by_box.setdefault(inside[key], []).append(key)

    # --------------------------------------------------------------- edges
    @property
    def edges(self) -> list[tuple[BaseNode, BaseNode]]:
        """Edges between drawn nodes: re-attached, deduplicated, without self-loops, in
        recording order; acyclic when the graph is (see :mod:`~.edges`).

        With ``tensor_nodes=False`` an edge through a tensor left out joins the
        tensor's producer to each of its consumers, and :meth:`edge_tensor`
        says which tensor it carries.  The values carried from one block or
        iteration of a folded run or loop to another are not among them
        (:attr:`carried_edges`).
        """
        if self._edges is None:
            drawn = self._drawn if self._drawn is not None else self._drawn_map()
            fold, nodes = self.fold, self.nodes
            boxes = {k for k, unit in fold.run_units.items()  # drawn as one box, in no other fold
                     if all(u == unit for u, _ in fold.copy_of(k))
                     and drawn.get(k) == k and not self.is_expanded(nodes[k])}
            got = drawn_edges(nodes, self.graph.links, drawn, fold, tensor_nodes=self.tensor_nodes,
                              all_ops=self.all_ops, boxes=boxes)
            self._edges = [(nodes[a], nodes[b]) for a, b in got.plain]
            self._carried = [(nodes[a], nodes[b]) for a, b in got.carried]
            self._via, self._ops, self._left_out = got.via, got.ops, got.left_out
            self._more = got.more
            degree: dict[Key, int] = {}
            for a, _ in got.plain:
                degree[a] = degree.get(a, 0) + 1
            self._out_degree = degree
        return self._edges

    @property
    def carried_edges(self) -> list[tuple[BaseNode, BaseNode]]:
        """Edges from one block or iteration of a folded run or loop to another, between two
        drawn nodes (the next iteration's use of a value, drawn as one edge between the
        nodes that stand for both): a renderer draws them marked as going back, and not
        ranking their ends.  A value passed to its own node's next copy, or from one block
        of a run to the next, is said by the ``×N`` mark and not listed."""
        if self._edges is None:
            self.edges  # noqa: B018 - computes them
        return self._carried

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

    def edge_tensors(self, fnode: BaseNode, tnode: BaseNode) -> tuple[TensorNode, ...]:
        """Every tensor left out that the drawn edge stands for, :meth:`edge_tensor` first: more
        than one where one module passes several to another (T5's hidden states and position
        bias, from one block to the next)."""
        tensor = self.edge_tensor(fnode, tnode)
        if tensor is None:
            return ()
        return (tensor, *self._more.get((fnode.key, tnode.key), ()))

    def edge_ops(self, fnode: BaseNode, tnode: BaseNode) -> tuple[OpNode, ...]:
        """The data-movement operations left out (without ``all_ops``) on the drawn edge
        from ``fnode`` to ``tnode``, in the order they ran."""
        if self._edges is None:
            self.edges  # noqa: B018 - computes the left-out operations
        return self._ops.get((fnode.key, tnode.key), ())


def _collapse(nodes: Mapping[Key, BaseNode], layer: LayerNode, drawn: dict[Key, Optional[Key]],
              params: dict[Key, Key]) -> None:
    """Everything inside the collapsed ``layer`` is drawn as ``layer``; its parameters as nothing
    (each noted in ``params`` with ``layer``'s key: :meth:`Projection._lift` draws those read
    outside it)."""
    key = layer.key
    stack = list(layer.subnet_keys)
    while stack:
        k = stack.pop()
        node = nodes.get(k)
        if node is None or k is None:
            continue
        if isinstance(node, ParamNode):
            drawn[k] = None
            params[k] = key
            continue
        drawn[k] = key
        if isinstance(node, LayerNode):
            stack.extend(node.subnet_keys)


def _path(node: BaseNode) -> str:
    """The dotted path of the module ``node`` (a layer) is a call of."""
    if not isinstance(node, LayerNode):
        raise GraphError(f"{node.key!r} is drawn as a collapsed module but is not a layer")
    return node.path


def _in_module(nodes: Mapping[Key, BaseNode], key: Key, path: str) -> bool:
    """Whether the node ``key`` ran inside a call of the module at ``path`` or of one inside it."""
    if not path:
        return True  # the network itself
    inner = path + "."
    node = nodes.get(key)
    while node is not None:
        if isinstance(node, LayerNode) and (node.path == path or node.path.startswith(inner)):
            return True
        node = nodes.get(node.parent_key) if node.parent_key is not None else None
    return False


def held_by_reader(nodes: Mapping[Key, BaseNode], key: Key, param: BaseNode) -> bool:
    """Whether the node ``key`` ran directly in the call of a module that holds ``param`` as its
    own: by name, one of the parameter's dotted paths (:attr:`ParamNode.path` and the paths of
    the modules tied to it, :attr:`ParamNode.held_as`) is the module's own, as an output
    projection holds the weight of the embedding it is tied to.  Where the graph does not know
    the names (``held_as`` is ``None``: a JSON document that does not say), by count: one that
    owns at least as many parameter elements more than its call recorded (the tied projection
    records none of its own)."""
    node = nodes.get(key)
    layer = nodes.get(node.parent_key) if node is not None and node.parent_key is not None else None
    if not isinstance(layer, LayerNode) or not layer.num_params or not isinstance(param, ParamNode):
        return False
    if param.held_as is not None:
        prefix = layer.path + "." if layer.path else ""
        return any(p.startswith(prefix) and "." not in p[len(prefix):]
                   for p in (param.path, *param.held_as))
    recorded = sum(p.numel for k in layer.subnet_keys if isinstance(p := nodes.get(k), ParamNode))
    return layer.num_params - recorded >= param.numel
