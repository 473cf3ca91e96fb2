"""The live objects a recording has seen, and the seed's node and edge API on them.

:class:`LiveObjects` is the part of :class:`~torchrecorder.recording.engine.Engine` that maps a
live module, tensor or ``grad_fn`` (by ``id``, through a weak reference where the object takes
one) to the key of the node that stands for it, and that the seed's hook-level functions
(``add_node``, ``add_edge``) use.
"""

from __future__ import annotations

import weakref
from typing import Any, Optional

from torch import Tensor, nn

from ..errors import GraphError
from ..graph import Graph, NodeTable
from ..nodes import BaseNode, Key, LayerNode, OpNode, ParamNode, ScopeNode, TensorNode
from .meta import ParamFacts, dtype_names, grad_fn_op_name, shape_name, tensor_meta
from .pool import NodePool, take
from .untraced import Untraced

__all__ = ["LiveObjects"]


class LiveObjects:
    """The live-object table of a recording engine (a base class of the engine)."""

    graph: Graph
    keep_tensors: bool
    # id(object) -> (weak reference, or the object where it takes none; node key)
    live: dict[int, tuple[Any, Key]]
    _sources: set[Key]
    # ids of the objects in ``live`` held as they are (they take no weak reference)
    _strong: list[int]
    # id(parameter) -> (the parameter, its dotted path where first found)
    _params: dict[int, tuple[nn.Parameter, str]]
    untraced: Untraced
    pool: NodePool  # nodes made ahead of the pass (see .pool)

    def lookup(self, obj: Any) -> Key:
        """The key of the node that currently stands for the live object ``obj``, or ``None``."""
        entry = self.live.get(id(obj))
        if entry is not None:
            ref = entry[0]
            target = ref() if isinstance(ref, weakref.ref) else ref
            if target is obj:
                return entry[1]
        return None

    def hand_over(self) -> None:
        """Give the graph's :class:`~torchrecorder.graph.NodeTable` the tensors still alive that
        stand for tensor nodes (a module's inputs and outputs), by weak reference, so that
        ``rec.nodes[y]`` finds them once the recording is over; modules and parameters are
        found through their nodes' ``fn``.  The table adopts the nodes (their ``parent`` and
        ``subnets`` read it)."""
        nodes = self.graph.nodes
        if not isinstance(nodes, NodeTable):
            return
        nodes.adopt(nodes.values())
        live, self.live = self.live, {}
        for ident in self._strong:  # (objects held as they are, taking no weak reference)
            entry = live.get(ident)
            if entry is not None and type(entry[0]) is not weakref.ref:
                del live[ident]
        self._strong.clear()
        nodes.keep_table(live)  # its entries are read when looked up (see NodeTable._key_of)

    def key_of(self, obj: Any) -> Key:
        """The key named by ``obj``: a key itself, a node, or a live object recorded before."""
        if obj is None or isinstance(obj, str):
            return obj
        if isinstance(obj, BaseNode):
            return obj.key
        key = self.lookup(obj)
        if key is None:
            raise KeyError(f"{type(obj).__name__} object is not part of this recording")
        return key

    def bind(self, obj: Any, key: Key) -> None:
        """Let the live object ``obj`` stand for the node ``key`` from now on."""
        try:
            ref: Any = weakref.ref(obj)
        except TypeError:
            ref = obj
            self._strong.append(id(obj))
        self.live[id(obj)] = (ref, key)
        if isinstance(obj, Tensor):
            self.untraced.track(obj, key)

    def add_node(self, net: Any, depth: int = 0, parent: Any = None, name: Optional[str] = None) -> BaseNode:
        """A new node for the live object ``net`` in the scope ``parent`` (see
        :meth:`torchrecorder.recorder.Recorder.add_node`)."""
        classname = type(net).__name__
        label = name if name is not None else classname
        pkey = self.key_of(parent)
        node: BaseNode
        if isinstance(net, nn.Module):
            node = LayerNode(name=label, fn=net, depth=depth, parent=pkey, type_name=classname)
        elif isinstance(net, nn.Parameter):
            shape, dtype, device = tensor_meta(net)
            node = ParamNode(name=label, fn=net, depth=depth, parent=pkey, shape=shape,
                             dtype=dtype, device=device, numel=net.numel(),
                             requires_grad=net.requires_grad)
        elif isinstance(net, Tensor):
            shape, dtype, device = tensor_meta(net)
            # a tensor added in the context's scope is an input of the network (the original
            # torchrecorder's manual workflow: add_node(x, name="Input") before net(x))
            node = TensorNode(name=label, fn=net if self.keep_tensors else None, depth=depth,
                              parent=pkey, shape=shape, dtype=dtype, device=device,
                              role="input" if pkey is None else "")
        elif hasattr(net, "next_functions"):
            opname = grad_fn_op_name(classname)
            node = OpNode(name=name or opname, fn=net, depth=depth, parent=pkey, op=opname)
        else:
            raise TypeError(f"cannot create a node for {classname} object {net!r}")
        parent_key = pkey if pkey is not None else ""
        self.graph.insert(node, f"{parent_key}/{label}" if parent_key else label)
        self.bind(net, node.key)
        return node

    def add_edge(self, _from: Any, _to: Any) -> None:
        """An edge between two recorded nodes given as keys, nodes or live objects."""
        a, b = self.key_of(_from), self.key_of(_to)
        try:
            self.graph.connect(a, b)
        except GraphError as exc:
            raise KeyError(str(exc)) from None
        self._sources.add(a)

    def tensor_node(self, t: Tensor, scope: ScopeNode, candidate: str, name: str = "",
                    role: str = "", meta: Optional[tuple[tuple[int, ...], str, str]] = None) -> TensorNode:
        """A new tensor node for ``t`` in ``scope``; ``t`` stands for it from now on.  ``meta``:
        ``tensor_meta(t)``, where the caller has it already."""
        # (one call per module input and output: OrderedSet.add and
        # Untraced.track inlined for the usual case)
        shape, dtype, device = meta or tensor_meta(t)
        graph = self.graph
        key = graph.keys(candidate)
        node = take(self.pool.tensors, TensorNode)
        TensorNode.__init__(node, name or shape_name(shape), t if self.keep_tensors else None,
                            scope.depth + 1, scope.key, key, shape, dtype, device, role)
        graph.nodes[key] = node
        scope.subnet_keys._items[key] = None
        self.live[id(t)] = (weakref.ref(t), key)
        gf = t.grad_fn
        if gf is not None:
            self.untraced.grad_fns[id(gf)] = (gf, key)
        return node

    def param_node(self, param: nn.Parameter, scope: ScopeNode, path: str,
                   facts: Optional[ParamFacts] = None, name: str = "") -> ParamNode:
        """A new parameter node for ``param`` (dotted ``path``) in ``scope``.  ``facts``: its name,
        shape and element count, where the module index has them (they hold while the model's
        stamp does); the dtype, device and ``requires_grad`` are read each time.  ``name``: the
        node's name, where it is not the last part of ``path``."""
        if facts is None:
            shape, dtype, device = tensor_meta(param)
            name, numel = name or path.rpartition(".")[2], param.numel()
        else:
            name, shape, numel = facts
            dtype, device = dtype_names(param)
        graph = self.graph
        key = graph.keys(path)
        node = take(self.pool.params, ParamNode)
        ParamNode.__init__(node, name, param, scope.depth + 1, scope.key, key,
                           shape, dtype, device, path, numel, param.requires_grad, ())
        graph.nodes[key] = node
        scope.subnet_keys._items[key] = None
        self.live[id(param)] = (weakref.ref(param), key)
        return node

    def held_also(self, key: Key, path: str) -> None:
        """Note that a module also holds the recorded parameter ``key`` as its own, under the
        dotted ``path`` (a weight tied to one recorded before): :attr:`ParamNode.held_as`."""
        node = dict.get(self.graph.nodes, key)
        if isinstance(node, ParamNode) and node.held_as is not None and path != node.path \
                and path not in node.held_as:
            node.held_as = (*node.held_as, path)

    def param_path(self, param: nn.Parameter) -> str:
        """The dotted path under which ``param`` was first found, or ``""``."""
        return self._params.get(id(param), (None, ""))[1]

    def known_source(self, t: Tensor, scope: ScopeNode) -> Key:
        """Key of the node that stands for ``t``; creates a parameter node on first use."""
        entry = self.live.get(id(t))
        if entry is not None and entry[0]() is t:
            return entry[1]
        found = self._params.get(id(t))
        if found is not None and found[0] is t:
            # used outside its module's call: named from the scope that uses it, so that the
            # weight of a module never called reads `rel_embeddings.weight`, not `weight`
            path = found[1]
            base = getattr(scope, "path", None)
            if base is None or scope.depth < 0:
                name = path
            else:
                name = path[len(base) + 1:] if base and path.startswith(base + ".") else path
            return self.param_node(t, scope, path, name=name).key
        return None

    def _param_owner(self, t: Tensor) -> Optional[tuple[str, Key]]:
        """``(dotted path, key of the call holding its node)`` for a parameter, else ``None``."""
        found, key = self._params.get(id(t)), self.lookup(t)
        if found is None or found[0] is not t or key is None:
            return None
        return found[1], self.graph.nodes[key].parent_key
