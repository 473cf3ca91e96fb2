"""The :class:`Recorder`: a graph that shows itself, and records a module when asked.

``Recorder`` is composed from the graph (:class:`~torchrecorder.graph.Graph`),
its display (:class:`~torchrecorder.display.Display`) and, on first use of a
recording method, a recording engine
(:class:`~torchrecorder.recording.engine.Engine`).  A graph loaded from JSON is
a ``Recorder`` that never builds one.

The original torchrecorder's hook-level functions stay importable from here:
:func:`prehook`, :func:`posthook`, :func:`op_acc`, :func:`tensor_acc`,
:func:`param_acc` and :func:`leaf_dummy`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Optional

from torch import nn

from .display import Display
from .graph import Graph
from .nodes import BaseNode
from .recording import Engine
from .recording.hooks import leaf_dummy, op_acc, param_acc, posthook, prehook, tensor_acc
from .recording.ops import OpMode, op_mode
from .recording.timing import CallTimer

__all__ = [
    "Recorder",
    "leaf_dummy",
    "op_acc",
    "param_acc",
    "posthook",
    "prehook",
    "recording",
    "tensor_acc",
]


class Recorder(Display, Graph):
    """Record and store execution graph information.

    A ``Recorder`` is the graph: ``nodes`` maps keys to nodes, ``links`` holds
    ``(from_key, to_key)`` pairs in the order they were recorded.  Build one with
    :func:`torchrecorder.record` or the :func:`recording` context manager;
    ``print(rec)`` shows its layer table.

    Attributes:
        name: the name given to the root module (``Recorder()``: "net" until
            :meth:`register_hooks` names it after the network's class).
        nodes: dict from key to :class:`~torchrecorder.nodes.BaseNode`; the
            context node has the key ``None``.  As in the original
            torchrecorder, a recorded object finds its node by subscript, ``in``
            and ``get`` while it is alive: a module (its first call), a parameter,
            a tensor that crossed a module boundary (``rec.nodes[net[0]]``,
            ``net[0].weight in rec.nodes``, ``rec.nodes.get(y)``); see
            :class:`~torchrecorder.graph.NodeTable`.  Tensors are held by weak
            reference only.
        links: ordered set of ``(from_key, to_key)`` pairs, in recording order.
        edges: the edges as 1.0.3 held them: ``(from_key, to_key, order)`` triples, the
            timestamp replaced by the recording order (read-only; see
            :attr:`~torchrecorder.graph.Graph.edges`).
        fn_types: how many nodes of each node class the graph holds.
        keep_tensors: whether tensor nodes keep the tensors in ``fn``.
        unfuse_fast_paths: whether modules with a fused fast path are recorded through
            their unfused Python path (see :func:`torchrecorder.record`).
        record_backward: whether the pass's autograd graph is kept (``backward``, drawn by
            ``make_dot(rec, backward=True)``).
        record_source: whether module calls and operations get the line of code they come
            from (``node.source``).
        timing: whether each module call's wall time is measured (``call_times``).
        error: ``"ExcType: message"`` when the recorded forward pass raised.
        failed_key: key of the innermost module call that raised, if any.
    """

    def __init__(self, name: Optional[str] = None, *, keep_tensors: bool = False,
                 unfuse_fast_paths: bool = False, backward: bool = False, source: bool = True,
                 timing: bool = False) -> None:
        super().__init__(name if name is not None else "net")
        self._name_given = name is not None
        self.record_source = source
        self.keep_tensors = keep_tensors
        self.unfuse_fast_paths = unfuse_fast_paths
        self.record_backward = backward
        self.timing = timing
        self._engine: Optional[Engine] = None
        self._manual: Optional[_ManualMode] = None
        self.nodes.find = self._find_live

    def __getstate__(self) -> dict[str, Any]:
        # copied or pickled: the graph and the options; the engine (the live objects, hooks and
        # model it holds while it records) stays behind, so a copy never drags the model along
        state = dict(self.__dict__)
        state["_engine"] = state["_manual"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.nodes.find = self._find_live

    def _find_live(self, obj: Any) -> Any:
        """The key of the node the live object ``obj`` stands for while the engine records."""
        return self._engine.lookup(obj) if self._engine is not None else None

    @property
    def engine(self) -> Engine:
        """The recording engine that fills this graph (made on first use)."""
        if self._engine is None:
            self._engine = Engine(self, keep_tensors=self.keep_tensors,
                                  unfuse_fast_paths=self.unfuse_fast_paths,
                                  backward=self.record_backward, source=self.record_source)
            if self.timing:  # each call's wall time, the recorder's own work subtracted
                CallTimer(self).install(self._engine)
        return self._engine

    def add_node(self, net: Any, depth: int = 0, parent: Any = None, name: Optional[str] = None) -> BaseNode:
        """Construct a node of the recording graph for the object ``net``.

        Args:
            net: a module (gives a :class:`~torchrecorder.nodes.LayerNode`), a
                parameter (:class:`~torchrecorder.nodes.ParamNode`), a tensor
                (:class:`~torchrecorder.nodes.TensorNode`) or an autograd node
                such as a ``grad_fn`` (:class:`~torchrecorder.nodes.OpNode`).
            depth: the scope depth at which ``net`` is found.
            parent: the key, node or recorded object in whose scope ``net`` runs.
            name: display name; defaults to the class name.

        Returns:
            The new node; ``net`` now maps to it (see :meth:`add_dummy`).
        """
        return self.engine.add_node(net, depth, parent, name)

    def add_dummy(self, dummy: Any, fn: Any) -> None:
        """Point the object ``dummy`` at the node already recorded for ``fn``.

        Instead of creating a separate node, later lookups of ``dummy`` (a dummy
        tensor, a ``grad_fn``) find the node of ``fn``.  Used by
        :func:`leaf_dummy` and for ``AccumulateGrad`` nodes in :func:`op_acc`.
        """
        self.engine.bind(dummy, self.engine.key_of(fn))

    def add_edge(self, _from: Any, _to: Any) -> None:
        """Record an edge between two recorded nodes (given as keys, nodes or objects)."""
        self.engine.add_edge(_from, _to)

    def register_hooks(self, net: nn.Module, depth: int = 0, parent: Any = None,
                       name: Optional[str] = None) -> None:
        """Register the recorder's hooks on ``net`` and every module inside it.

        See :meth:`~torchrecorder.recording.engine.Engine.register_hooks`;
        :meth:`remove_hooks` takes all of them off.

        Args:
            net: the root module.
            depth: unused; kept for compatibility (depths follow the calls).
            parent: unused; kept for compatibility.
            name: display name of the root module (defaults to the name the recorder was
                made with, else, as in 1.0.3, the class name of ``net``); the recorder's
                ``name`` too.
        """
        del depth, parent
        if name is None:
            name = self.name if getattr(self, "_name_given", True) else type(net).__name__
        self.name = name
        self.engine.register_hooks(net, name)
        if self._manual is None:
            self._manual = _ManualMode(self.engine)
        self._manual.hook(net)

    def remove_hooks(self) -> None:
        """Remove every hook this recorder registered; safe to call twice."""
        try:
            if self._manual is not None:
                self._manual.remove()
        finally:
            if self._engine is not None:
                self._engine.remove_hooks()


class _ManualMode:
    """The op mode of the manual workflow (``register_hooks``, then the user's own call of the
    network): :func:`record` puts it on around the pass; here each outermost call of the root
    module does, so every torch operation of the forward is a node, as in :func:`record`,
    not only what autograd's graph still shows between the module calls."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.depth = 0
        self.mode: Optional[OpMode] = None
        self.handles: list[Any] = []

    def hook(self, net: nn.Module) -> None:
        self.handles.append(net.register_forward_pre_hook(self._enter, prepend=True))
        self.handles.append(net.register_forward_hook(self._leave, always_call=True))

    def _enter(self, module: nn.Module, args: Any) -> None:
        if self.depth == 0 and not self.engine.closed:
            mode = op_mode(self.engine)
            mode.__enter__()
            self.mode = mode
        self.depth += 1

    def _leave(self, module: nn.Module, args: Any, output: Any) -> None:
        self.depth = max(self.depth - 1, 0)
        if self.depth == 0:
            self._exit()

    def _exit(self) -> None:
        mode, self.mode = self.mode, None
        if mode is not None:
            mode.__exit__(None, None, None)

    def remove(self) -> None:
        handles, self.handles = self.handles, []
        for h in handles:
            h.remove()
        self.depth = 0
        self._exit()


def recording(net: nn.Module, name: str = "net", *, keep_tensors: bool = False,
              unfuse_fast_paths: bool = False, backward: bool = False,
              source: bool = True) -> AbstractContextManager[Recorder]:
    """Record every forward call of ``net`` made inside the ``with`` block.

    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    >>> with recording(net, "mlp") as rec:
    ...     out = net(torch.randn(2, 4))
    >>> [layer.key for layer in rec.layers()]
    ['mlp', '0', '1']

    On leaving the block every hook is removed, whatever happened.  If the
    block raises, the same exception object goes on, with a note naming the
    module that raised and ``exc.recording``, the partial graph (where the
    exception takes attributes).

    Args:
        net: the module to record.
        name: the name shown for the root module.
        keep_tensors: keep the tensors (activations) on the tensor nodes.
        unfuse_fast_paths: record modules with a fused fast path through their unfused
            Python path (see :func:`torchrecorder.record`).
        backward: keep the autograd graph of the pass (see :func:`torchrecorder.record`).
        source: give each module call and operation its line of code (see
            :func:`torchrecorder.record`).
    """
    if not isinstance(net, nn.Module):
        raise TypeError(f"expected a torch.nn.Module to record, got {type(net).__name__}")
    if not isinstance(name, str):
        raise TypeError(f"name must be a str (the name shown for the network), got {name!r}")
    rec = Recorder(name, keep_tensors=keep_tensors, unfuse_fast_paths=unfuse_fast_paths,
                   backward=backward, source=source)
    return rec.engine.active(net, name, rec)
