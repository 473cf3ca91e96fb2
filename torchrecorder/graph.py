"""The recorded graph as plain data: nodes under readable keys, edges between keys, one context.

:class:`Graph` knows nothing of torch: the recording engine
(:mod:`torchrecorder.recording`) fills one during a forward pass,
:mod:`torchrecorder.export` fills one from JSON, and every renderer reads one.
A test can build one by hand:

>>> from torchrecorder.nodes import LayerNode, OpNode
>>> g = Graph("tiny")
>>> net = g.insert(LayerNode("tiny", type_name="Net", depth=0), "tiny")
>>> relu = g.insert(OpNode("relu", depth=1, parent="tiny"), "tiny/relu")
>>> [layer.key for layer in g.layers()], list(g.context.subnet_keys)
(['tiny'], ['tiny'])
>>> g.lint()
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, Set
from typing import Any, Optional

from .errors import GraphError
from .nodes import BaseNode, ContextNode, Key, LayerNode, OpNode, OrderedSet, ParamNode, ScopeNode, TensorNode

__all__ = ["AutogradGraph", "AutogradNode", "FnSet", "Graph", "Namespace", "NodeTable", "adjacency",
           "predecessors"]


class AutogradNode:
    """One node of the autograd graph a recorded pass built (a ``grad_fn``), as plain data.

    Attributes:
        name: the autograd node's name, e.g. ``"AddmmBackward0"`` or ``"AccumulateGrad"``.
        scope: key of the module call whose forward created it (``None``: the top level).
        forward: key of the recorded operation whose output it is the ``grad_fn`` of, if any.
        param: dotted path of the parameter an ``AccumulateGrad`` node fills, else ``""``.
        shape: shape of the leaf tensor an ``AccumulateGrad`` node fills, else ``None``.
        saved: ``(name, shape)`` of each tensor the node saved for the backward pass (an
            item of a saved list, such as an indexing's ``indices``, named ``indices.0``).
        stored: for each entry of ``saved``, in the same order, ``(dtype, storage)``: the
            saved tensor's dtype name (``"float32"``) and the index of its storage in
            :attr:`AutogradGraph.storages`; empty where not known (a document saved before
            they were recorded).
        unread: names of the saved tensors that a saved-tensor hook holds
            (``torch.autograd.graph.saved_tensors_hooks``, ``torch.utils.checkpoint``,
            ``save_on_cpu``): the recording does not unpack them (that would run the user's
            unpack hooks), so their shapes are not known and they are not in ``saved``.
    """

    __slots__ = ("forward", "name", "param", "saved", "scope", "shape", "stored", "unread")

    def __init__(self, name: str, scope: Key = None, forward: Key = None, param: str = "",
                 shape: Optional[tuple[int, ...]] = None,
                 saved: Optional[list[tuple[str, tuple[int, ...]]]] = None,
                 unread: Optional[list[str]] = None,
                 stored: Optional[list[tuple[str, int]]] = None) -> None:
        self.name, self.scope, self.forward, self.param = name, scope, forward, param
        self.shape = shape
        self.saved = saved if saved is not None else []
        self.unread = unread if unread is not None else []
        self.stored = stored if stored is not None else []

    def __repr__(self) -> str:
        return f"AutogradNode({self.name!r}, scope={self.scope!r})"


class AutogradGraph:
    """The backward graph of a recorded pass: what ``loss.backward()`` would run.

    Attributes:
        nodes: the autograd nodes in forward order: each comes after every node in its
            ``next_functions`` (the leaves' ``AccumulateGrad`` nodes first).
        edges: ``(i, j)`` index pairs: node ``i`` is in ``nodes[j]``'s ``next_functions``
            (drawn ``i -> j``, in the direction of the forward pass, as torchviz draws them).
        outputs: ``(node index, key of the output tensor node)`` for each output of the
            recorded model that has a ``grad_fn``.
        grad_enabled: whether the pass ran with gradients on (``False`` under
            ``torch.no_grad()`` or ``torch.inference_mode()``: then there is no graph).
        storages: ``(nbytes, kind)`` of each distinct storage the saved tensors live in
            (:attr:`AutogradNode.stored` indexes it): its size in bytes, and its kind:
            ``""`` for activations, ``"model"`` for the model's own (a parameter's or a
            buffer's, which the model holds anyway), ``"number"`` for a Python number
            torch wrapped as a 0-dim tensor (``0.5`` in ``0.5 * x``; torch's saved-tensor
            hooks do not see those); ``None`` where not known (a document saved before
            they were recorded).
    """

    __slots__ = ("edges", "grad_enabled", "nodes", "outputs", "storages")

    def __init__(self, grad_enabled: bool = True) -> None:
        self.nodes: list[AutogradNode] = []
        self.edges: list[tuple[int, int]] = []
        self.outputs: list[tuple[int, Key]] = []
        self.grad_enabled = grad_enabled
        self.storages: Optional[list[tuple[int, str]]] = None


class Namespace:
    """Hands out unique, readable keys: ``add``, ``add_1``, ``add_2``, ..."""

    __slots__ = ("used",)

    def __init__(self) -> None:
        #: candidate -> the last suffix handed out for it (0: the bare candidate)
        self.used: dict[str, int] = {}

    def __call__(self, candidate: str) -> str:
        used = self.used
        n = used.get(candidate)
        if n is None:  # the usual case: one dict lookup
            used[candidate] = 0
            return candidate
        while True:
            n += 1
            name = f"{candidate}_{n}"
            if name not in used:
                used[candidate] = n
                used[name] = 0
                return name

    def reserve(self, key: str) -> None:
        """Mark ``key`` as taken (a node added under a key chosen elsewhere)."""
        self.used.setdefault(key, 0)


class NodeTable(dict[Key, BaseNode]):
    """A graph's nodes by key; a recorded object (module, parameter, tensor) also stands for
    its node, as in the original torchrecorder: ``rec.nodes[net[0]]``, ``rec.nodes[y]``.

    Keys are what iteration and ``len`` see.  Subscript, ``in`` and ``get`` look a key up
    first, then an object, as 1.0.3's table keyed by objects answered: ``net[0] in
    rec.nodes`` is true and ``rec.nodes.get(net[0])`` is its node.  An object is found only
    while it is alive: through :attr:`find` (the recording engine's table of live objects,
    while it has one), the objects handed over when a recording ends (:meth:`keep_table`, by
    weak reference: nothing is kept alive), and the node whose ``fn`` is the object (a
    module gives the node of its first call).  ``keys()`` holds keys only: code that looks
    up keys alone where speed matters can use ``k in nodes.keys()`` and
    ``dict.get(nodes, k)``, which skip the object lookup.
    """

    __slots__ = ("__weakref__", "_fn_index", "_kept", "_tables", "find")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: where live objects are looked up first (the engine's table), or ``None``
        self.find: Optional[Any] = None
        self._kept: dict[int, tuple[weakref.ref[Any], Key]] = {}
        # the live-object tables of the recordings that filled this table (see keep_table)
        self._tables: list[dict[int, tuple[weakref.ref[Any], Key]]] = []
        self._fn_index: tuple[int, dict[int, Key]] = (-1, {})
        self.adopt(self.values())

    def adopt(self, nodes: Iterable[BaseNode]) -> None:
        """Make this table the graph of ``nodes`` (nodes stored in it), through which their
        ``parent`` and ``subnets`` give the recorded objects (see
        :attr:`~torchrecorder.nodes.BaseNode.parent`).  The recording engine and the JSON
        loader adopt all their nodes once they are stored; :meth:`Graph.insert` the one it
        adds."""
        ref = weakref.ref(self)
        for node in nodes:
            node._table = ref

    def seed_ref(self, node: BaseNode) -> Any:
        """What 1.0.3 code reads in ``parent`` and ``subnets`` for ``node`` (a node of this
        table): its recorded object (the module of a first call, the parameter, ``fn`` of a
        tensor or an operation) where ``self[obj]`` finds ``node`` again, else its key."""
        obj = node._seed_ref()
        key = node.key
        if obj is None or isinstance(obj, str):
            return key
        try:
            found = self._key_of(obj)
        except TypeError:  # unhashable
            return key
        if found == key:
            return obj
        if found is None:  # an object made for 1.0.3 code (a meta tensor, an operation)
            try:
                self._kept[id(obj)] = (weakref.ref(obj), key)
            except TypeError:  # takes no weak reference
                return key
            return obj
        return key  # the object stands for another node (a tensor kept twice, ...)

    def keep_table(self, table: dict[int, tuple[weakref.ref[Any], Key]]) -> None:
        """Take over a finished recording's table of live objects (``id`` -> ``(weak reference,
        key)``, every entry a weak reference): a tensor still alive that stood for a tensor
        node when the recording ended finds that node, with no pass over the table now.  A
        table taken over later wins."""
        self._tables.append(table)

    def __reduce__(self) -> tuple[Any, ...]:
        # copied or pickled: the nodes by key; the live objects stay behind
        return (NodeTable, (dict(self),))

    def __contains__(self, obj: object) -> bool:
        if dict.__contains__(self, obj):  # a key (an unhashable object raises, as for a dict)
            return True
        if obj is None or isinstance(obj, (str, int, float, tuple)):
            return False
        key = self._key_of(obj)
        return key is not None and dict.__contains__(self, key)

    def get(self, obj: Any, default: Any = None) -> Any:
        """The node of key ``obj``, else of the recorded object ``obj`` (as subscript finds
        it), else ``default``."""
        node = dict.get(self, obj)
        if node is not None or obj is None or isinstance(obj, (str, int, float, tuple)):
            return default if node is None else node
        key = self._key_of(obj)
        if key is None:
            return default
        return dict.get(self, key, default)

    def __missing__(self, obj: Any) -> BaseNode:
        if obj is None or isinstance(obj, (str, int, float, tuple)):
            raise KeyError(obj)
        key = self._key_of(obj)
        if key is None or not dict.__contains__(self, key):
            raise KeyError(f"{type(obj).__name__} object is not part of this recording (or is no "
                           "longer the object that was recorded)")
        return dict.__getitem__(self, key)

    def _key_of(self, obj: Any) -> Key:
        if self.find is not None:
            key = self.find(obj)
            if key is not None:
                return key
        ident = id(obj)
        for table in reversed(self._tables):
            entry = table.get(ident)
            if entry is not None and entry[0]() is obj and type(dict.get(self, entry[1])) is TensorNode:
                return entry[1]
        entry = self._kept.get(ident)
        if entry is not None and entry[0]() is obj:
            return entry[1]
        size, index = self._fn_index
        if size != len(self):  # made again once nodes were added
            index = {}
            for key, node in self.items():
                fn = node._fn  # the object kept, not what 1.0.3 code reads (see nodes)
                if fn is not None:
                    index.setdefault(id(fn), key)
            self._fn_index = (len(self), index)
        key = index.get(id(obj))
        return key if key is not None and dict.__getitem__(self, key)._fn is obj else None


class FnSet(Set[Key]):
    """The keys of a graph's nodes; ``obj in fn_set`` is also true of a recorded module,
    parameter or tensor that finds its node (see :class:`NodeTable`)."""

    __slots__ = ("_nodes",)

    def __init__(self, nodes: NodeTable) -> None:
        self._nodes = nodes

    def __contains__(self, obj: object) -> bool:
        if obj is None or isinstance(obj, str):
            return dict.__contains__(self._nodes, obj)
        try:
            key = self._nodes._key_of(obj)
        except TypeError:  # unhashable, or not an object a node stands for
            return False
        return key is not None and dict.__contains__(self._nodes, key)

    def __iter__(self) -> Iterator[Key]:
        return iter(self._nodes.keys())

    def __len__(self) -> int:
        return len(self._nodes)


def predecessors(edges: Iterable[tuple[Key, Key]]) -> dict[Key, list[Key]]:
    """Each edge's target -> the sources of its edges, in the order of ``edges`` (one pass).

    >>> predecessors([("a", "c"), ("b", "c"), ("c", "d")])
    {'c': ['a', 'b'], 'd': ['c']}
    """
    preds: dict[Key, list[Key]] = {}
    for a, b in edges:
        got = preds.get(b)
        if got is None:
            preds[b] = [a]
        else:
            got.append(a)
    return preds


def adjacency(edges: Iterable[tuple[Key, Key]]) -> tuple[dict[Key, list[Key]], dict[Key, list[Key]]]:
    """Each node's predecessors and successors, in the order of ``edges`` (one pass).

    >>> adjacency([("a", "c"), ("b", "c")])
    ({'c': ['a', 'b']}, {'a': ['c'], 'b': ['c']})
    """
    preds: dict[Key, list[Key]] = {}
    succs: dict[Key, list[Key]] = {}
    preds_get, succs_get = preds.get, succs.get
    for a, b in edges:
        got = preds_get(b)
        if got is None:
            preds[b] = [a]
        else:
            got.append(a)
        got = succs_get(a)
        if got is None:
            succs[a] = [b]
        else:
            got.append(b)
    return preds, succs


class Graph:
    """Nodes, edges and the context node of one recording.

    Attributes:
        name: the name given to the root module.
        nodes: key -> :class:`~torchrecorder.nodes.BaseNode`, in recording
            order; the context node has the key ``None``.  A recorded module,
            parameter or tensor also finds its node while it is alive
            (``nodes[module]``: see :class:`NodeTable`).
        links: the edges, an ordered set of ``(from_key, to_key)`` pairs in recording order
            (what today's code reads and tests membership on); :attr:`edges` gives them as
            1.0.3 held them, ``(from_key, to_key, order)`` triples.
        error: ``"ExcType: message"`` when the recorded forward pass raised.
        failed_key: key of the innermost module call that raised, if any.
        notes: what the recording could not follow, in words (an edge through
            code torch's function mode does not see, a module output that could
            not be given its own identity); empty when nothing was lost.
        backward: the pass's :class:`AutogradGraph` when recorded with
            ``backward=True`` (``record(..., backward=True)``), else ``None``.
        op_args: what :func:`torchrecorder.cost` needs to count an operation's FLOPs, for
            each recorded operation torch has a FLOP formula for (see
            :mod:`torchrecorder.opargs`): op key -> one flat tuple
            (:data:`~torchrecorder.opargs.Kept`; :func:`~torchrecorder.opargs.unpack`
            gives the key of the call that ran it, the torch callable, its arguments and
            keyword arguments with tensors as shapes and dtypes); kept for operations
            later pruned too.  ``None`` for a graph not recorded (loaded from JSON, built
            by hand).
        output_dtypes: call key -> the dtype names of the call's outputs, in the order of
            ``output_shapes`` (``None`` for a graph not recorded).
        op_vmap: op key -> how an operation of ``op_args`` run inside ``torch.vmap`` (kept
            with one sample's shapes) was batched: ``(in_dims, shapes)``, ``in_dims`` the
            ``in_dims`` of each vmap level around it, outermost first (one entry per
            positional argument, ``None`` where not batched), ``shapes`` the shape of each
            positional tensor argument with its batch dimensions (``None`` for the others).
            :func:`torchrecorder.cost` counts it again under those vmaps.  Empty for other
            graphs.
        op_flops: ``(op key, key of the call that ran it, FLOPs)`` for each operation of
            ``op_args``, once :func:`torchrecorder.cost` counted them (saved in JSON, so a
            loaded graph has its cost too); else ``None``.
        op_backward_flops: likewise the FLOPs of each operation's backward pass, for a
            recording with a backward graph, once :func:`torchrecorder.cost` counted them
            (saved in JSON too); else ``None``.
        call_times: call key -> the call's wall time in seconds, the recorder's own work
            subtracted, when recorded with ``timing=True``; else ``None``.
        timing_subtracted: seconds of the recorder's own work subtracted from the root calls'
            times (``timing=True``).
        inputs_listed: whether :func:`~torchrecorder.record` was given the inputs as a
            sequence (a list of shapes, a tuple of tensors), so that 1.0.3's names number
            even one input (``Input-1``; see :func:`~torchrecorder.seed.seed_names`).
    """

    inputs_listed = False

    def __init__(self, name: str = "net") -> None:
        self.name = name
        self.nodes: NodeTable = NodeTable({None: ContextNode()})
        self.links: OrderedSet[tuple[Key, Key]] = OrderedSet()
        self.error: Optional[str] = None
        self.failed_key: Key = None
        self.notes: list[str] = []
        self.keys = Namespace()
        # the pass's autograd graph, when recorded with backward=True (see the class docstring)
        self.backward: Optional[AutogradGraph] = None
        # filled by the recording engine (see the class docstring)
        self.op_args: Optional[dict[Key, tuple[Any, ...]]] = None
        self.output_dtypes: Optional[dict[Key, list[str]]] = None
        self.op_vmap: dict[Key, tuple[tuple[tuple[Optional[int], ...], ...], tuple[Any, ...]]] = {}
        self.op_flops: Optional[list[tuple[Key, Key, int]]] = None
        # record(..., timing=True): call key -> seconds (see recording.timing)
        self.op_backward_flops: Optional[list[tuple[Key, Key, int]]] = None
        self.call_times: Optional[dict[Key, float]] = None
        self.timing_subtracted = 0.0

    # ------------------------------------------------------------ reading
    @property
    def context(self) -> ContextNode:
        """The node that holds the whole graph (key ``None``)."""
        node = dict.get(self.nodes, None)
        if not isinstance(node, ContextNode):
            raise GraphError("the context node (key None) is missing")
        return node

    @property
    def edges(self) -> tuple[tuple[Key, Key, int], ...]:
        """The edges as 1.0.3 code reads them: a ``(from_key, to_key, order)`` triple per edge of
        :attr:`links`, in recording order, where 1.0.3's timestamp is replaced by the recording
        order (0, 1, 2, ...).  Programs written for 1.0.3 keep working::

            for a, b, t in sorted(rec.edges, key=lambda e: e[2]):
                print(rec.nodes[a].name, "->", rec.nodes[b].name)

        A new tuple made at each read: add edges with :meth:`connect` (or 1.0.3's
        ``Recorder.add_edge``); today's code reads the pairs of :attr:`links`.
        """
        return tuple((a, b, i) for i, (a, b) in enumerate(self.links))

    @property
    def fn_types(self) -> dict[str, int]:
        """How many recorded objects of each class the graph holds, by class name, as 1.0.3
        counted them: each module once (``"Conv2d"``, its first call), ``"Parameter"``,
        ``"Tensor"``, and each operation by its autograd node (``"AddmmBackward0"``: see
        :class:`~torchrecorder.seed.Operation`)."""
        counts: dict[str, int] = {}
        for key, node in self.nodes.items():
            if key is None:
                continue
            if isinstance(node, LayerNode):
                if node.call_index != 1:
                    continue
                name = node.type_name or "Module"
            elif isinstance(node, ParamNode):
                name = "Parameter"
            elif isinstance(node, TensorNode):
                name = "Tensor"
            elif isinstance(node, OpNode):
                name = type(node.fn).__name__
            else:
                name = type(node).__name__
            counts[name] = counts.get(name, 0) + 1
        return counts

    @property
    def fn_set(self) -> FnSet:
        """The keys of all nodes, a set that also holds the recorded objects while they are
        alive, as 1.0.3's did (``module in rec.fn_set``)."""
        return FnSet(self.nodes)

    def layers(self) -> Iterator[LayerNode]:
        """Every module call, in call order."""
        for node in self.nodes.values():
            if isinstance(node, LayerNode):
                yield node

    def calls_of(self, module: Any) -> list[LayerNode]:
        """The recorded calls of ``module`` (the object in their ``fn``), in order."""
        return [n for n in self.layers() if n.fn is module]

    # ------------------------------------------------------------ changing
    def insert(self, node: BaseNode, candidate: str) -> BaseNode:
        """Add ``node`` under a new key made from ``candidate``, inside its ``parent`` layer.

        Raises:
            GraphError: ``node.parent_key`` is not a layer of this graph.
        """
        parent = dict.get(self.nodes, node.parent_key)
        if not isinstance(parent, ScopeNode):
            raise GraphError(f"cannot add {candidate!r}: its parent {node.parent_key!r} is not a layer "
                             "of this graph")
        node.key = self.keys(candidate)
        self.nodes[node.key] = node
        self.nodes.adopt((node,))
        parent.subnet_keys.add(node.key)
        return node

    def connect(self, a: Key, b: Key) -> None:
        """Add the edge ``a -> b`` between two nodes of this graph.

        Raises:
            GraphError: an end is not a node of this graph.
        """
        if a not in self.nodes.keys() or b not in self.nodes.keys():
            raise GraphError(f"cannot draw an edge involving nodes not in the graph: {(a, b)!r}")
        self.links.add((a, b))

    def reparent(self, key: Key, parent: Key) -> None:
        """Move node ``key`` (and what it holds) into the layer ``parent``, after its last child."""
        node = self.nodes[key]
        new = dict.get(self.nodes, parent)
        if not isinstance(new, ScopeNode) or key is None:
            raise GraphError(f"cannot move {key!r} into {parent!r}: not a layer of this graph")
        old = dict.get(self.nodes, node.parent_key)
        if isinstance(old, ScopeNode):
            old.subnet_keys.discard(key)
        node.parent_key = parent
        shift = new.depth + 1 - node.depth
        new.subnet_keys.add(key)
        if shift:
            stack = [node]
            while stack:
                n = stack.pop()
                n.depth += shift
                if isinstance(n, ScopeNode):
                    stack.extend(self.nodes[k] for k in n.subnet_keys if k in self.nodes.keys())

    def remove(self, keys: Iterable[Key]) -> None:
        """Remove the nodes ``keys`` (not what they hold) and every edge touching them."""
        dead = set(keys)
        if not dead:
            return
        if None in dead:
            raise GraphError("the context node cannot be removed")
        for k in dead:
            node = self.nodes.pop(k)
            parent = dict.get(self.nodes, node.parent_key)
            if isinstance(parent, ScopeNode):
                parent.subnet_keys.discard(k)
        self.links = OrderedSet(e for e in self.links if e[0] not in dead and e[1] not in dead)

    def prune(self, sources: Optional[Set[Key]] = None) -> None:
        """Drop operations whose results nothing used (``x.sum().item()`` checks and the like),
        and the operations that then feed nothing, transitively.

        ``sources``, when the caller keeps it (the recording engine does), is the set of keys
        that some edge leaves; a graph in which every operation feeds something is then
        checked without a pass over the edges.
        """
        if sources is not None:
            # the keys no edge leaves, found in C (a recording's outputs and few others): the
            # graph is kept as it is unless one of them is an operation
            nodes = self.nodes
            if not any(isinstance(nodes[k], OpNode) for k in nodes.keys() - sources):
                return
        outdeg: dict[Key, int] = {}
        for a, _ in self.links:
            outdeg[a] = outdeg.get(a, 0) + 1
        preds = predecessors(self.links)
        removable = [k for k, n in self.nodes.items() if isinstance(n, OpNode) and k not in outdeg]
        dead: set[Key] = set()
        while removable:
            k = removable.pop()
            if k in dead:
                continue
            dead.add(k)
            for src in preds.get(k, ()):
                outdeg[src] -= 1
                if outdeg[src] == 0 and isinstance(self.nodes[src], OpNode):
                    removable.append(src)
        self.remove(dead)

    # ------------------------------------------------------------ checking
    def lint(self) -> None:
        """Check the graph's invariants; raise :class:`~torchrecorder.errors.GraphError` naming
        the first broken one.

        Every node is stored under its own key; every node's parent is a layer
        that lists it in ``subnets`` and is one level shallower, so every
        parent chain reaches the context; ``subnets`` name only nodes of the
        graph that have that parent; every edge joins two nodes of the graph
        and no edge is a self-loop.
        """
        nodes = self.nodes
        if not isinstance(nodes.get(None), ContextNode):
            raise GraphError("the context node (key None) is missing")
        for key, node in nodes.items():
            if not isinstance(node, BaseNode):
                raise GraphError(f"{key!r} maps to a {type(node).__name__}, not a node")
            if node.key != key:
                raise GraphError(f"node {key!r} carries the key {node.key!r}")
            if key is not None:
                parent = dict.get(nodes, node.parent_key)
                if not isinstance(parent, ScopeNode):
                    raise GraphError(f"parent {node.parent_key!r} of {key!r} is not a layer of the graph")
                if key not in parent.subnet_keys:
                    raise GraphError(f"{key!r} is missing from the subnets of {node.parent_key!r}")
                if node.depth != parent.depth + 1:
                    raise GraphError(f"{key!r} has depth {node.depth}, its parent {node.parent_key!r} "
                                     f"{parent.depth}")
            if isinstance(node, ScopeNode):
                for sub in node.subnet_keys:
                    child = dict.get(nodes, sub)
                    if child is None or sub is None:
                        raise GraphError(f"{key!r} lists {sub!r} in subnets, which is not a node")
                    if child.parent_key != key:
                        raise GraphError(f"{sub!r} is in the subnets of {key!r}, not its child")
        for a, b in self.links:
            if a not in nodes.keys() or b not in nodes.keys():
                raise GraphError(f"edge {(a, b)!r} joins nodes not in the graph")
            if a == b:
                raise GraphError(f"self-loop on {a!r}")
