"""The hook-level functions of the original torchrecorder, on the current engine.

:class:`~torchrecorder.recorder.Recorder` registers the same work on every
module itself (see :meth:`~torchrecorder.recording.engine.Engine.register_hooks`);
these functions remain for code written against the original API, which calls
them with a recorder and a node.  Each takes ``rec``: a
:class:`~torchrecorder.recorder.Recorder` (its ``engine`` does the work) or an
:class:`~torchrecorder.recording.engine.Engine`.
"""

from __future__ import annotations

from typing import Any, Optional

from torch import Tensor, nn

from ..errors import GraphError
from ..nodes import Key, LayerNode, ScopeNode
from .engine import Engine

__all__ = ["leaf_dummy", "op_acc", "param_acc", "posthook", "prehook", "tensor_acc"]


def _engine(rec: Any) -> Engine:
    engine = rec if isinstance(rec, Engine) else getattr(rec, "engine", None)
    if not isinstance(engine, Engine):
        raise TypeError(f"expected a Recorder or an Engine, got {type(rec).__name__}")
    return engine


def _layer(engine: Engine, node: Any) -> LayerNode:
    layer = engine.graph.nodes[engine.key_of(node)]
    if not isinstance(layer, LayerNode):
        raise GraphError(f"{layer.key!r} is a {type(layer).__name__}, not a layer")
    return layer


def prehook(module: nn.Module, inputs: Any, rec: Any, node: Optional[LayerNode] = None,
            kwargs: Optional[dict[str, Any]] = None) -> None:
    """Hook run BEFORE ``module``: open a call scope.

    Records a new :class:`~torchrecorder.nodes.LayerNode` for this call (in the
    scope of the calling module), the module's parameters on its first call,
    and a :class:`~torchrecorder.nodes.TensorNode` for each input tensor not
    already standing for a layer boundary.  The inputs are passed on untouched.

    Args:
        module: the module about to run.
        inputs: its positional arguments.
        rec: the active :class:`~torchrecorder.recorder.Recorder`.
        node: a layer whose ``path`` and ``name`` the module's calls take, for a
            module that :meth:`~torchrecorder.recorder.Recorder.register_hooks`
            did not see; else ignored.
        kwargs: its keyword arguments.
    """
    engine = _engine(rec)
    if node is not None:
        engine.module_info(module, node.path, node.name)
    engine._pre_hook(module, inputs, kwargs or {})


def posthook(module: nn.Module, inputs: Any, outputs: Any, rec: Any,
             node: Optional[LayerNode] = None, kwargs: Optional[dict[str, Any]] = None) -> Any:
    """Hook run AFTER ``module`` returned: close its call scope.

    Each output tensor gets a :class:`~torchrecorder.nodes.TensorNode` in the
    caller's scope with an edge from the node inside the call that produced it;
    an output that is just a child's output is moved up instead of copied, and
    an output the module returned unchanged gets an ``identity`` op.  The hook
    the recorder registers itself is called even when ``forward`` raises
    (``always_call=True``): the call is then closed without outputs and marked
    with the error.

    Returns:
        ``None`` when the outputs go on untouched; else the outputs with each
        tensor that existed before the call (an input returned as it is, a
        parameter, a buffer) replaced by an alias of it that stands for the
        call's output.  A forward hook that calls this function should return
        what it returns, as torch then hands the alias on.
    """
    del node
    return _engine(rec)._post_hook(module, inputs, kwargs, outputs)


def op_acc(gf: Any, rec: Any, node: Any) -> None:
    """Operator accumulator: record the autograd graph that ends at ``gf``.

    Walks ``gf`` and everything reachable through ``next_functions`` with an
    explicit stack (no recursion limit), adding an
    :class:`~torchrecorder.nodes.OpNode` in the scope of ``node`` for each
    autograd node not yet recorded, and an edge for each connection.  An
    ``AccumulateGrad`` node is not drawn: it points to the node of its
    ``variable`` (recorded as a parameter node if needed).

    Args:
        gf: a ``grad_fn`` (autograd node) or ``None``.
        rec: the :class:`~torchrecorder.recorder.Recorder` to update.
        node: the layer node (or its key) whose scope the operations belong to.
    """
    if gf is None:
        return
    engine = _engine(rec)
    scope = engine.graph.nodes[engine.key_of(node)]
    depth = scope.depth + 1

    def ensure(fn: Any) -> Key:
        key = engine.lookup(fn)
        if key is not None:
            return key
        variable = getattr(fn, "variable", None)
        if variable is not None:
            vkey = engine.lookup(variable)
            if vkey is None:
                vkey = engine.add_node(variable, depth, scope.key, getattr(variable, "name", None)).key
            engine.bind(fn, vkey)
            return vkey
        return engine.add_node(fn, depth, scope.key).key

    stack = [gf]
    ensure(gf)
    expanded: set[int] = set()
    while stack:
        fn = stack.pop()
        if id(fn) in expanded or getattr(fn, "variable", None) is not None:
            continue
        expanded.add(id(fn))
        to_key = ensure(fn)
        for nxt, _ in fn.next_functions:
            if nxt is None:
                continue
            engine.add_edge(ensure(nxt), to_key)
            stack.append(nxt)


def tensor_acc(tensor: Tensor, rec: Any, node: Any) -> Key:
    """Tensor accumulator: record ``tensor`` as an input/output of ``node``'s module.

    The new :class:`~torchrecorder.nodes.TensorNode` goes in the scope of
    ``node``'s parent (the tensor crosses ``node``'s boundary).  Nothing happens
    if the tensor already stands for a node.

    Returns:
        the key of the tensor's node.
    """
    engine = _engine(rec)
    key = engine.lookup(tensor)
    if key is not None:
        return key
    layer = engine.graph.nodes[engine.key_of(node)]
    scope = engine.graph.nodes[layer.parent_key]
    if not isinstance(scope, ScopeNode):
        raise GraphError(f"the parent {layer.parent_key!r} of {layer.key!r} is not a layer")
    return engine.tensor_node(tensor, scope, f"{layer.key}:tensor").key


def param_acc(param: nn.Parameter, rec: Any, node: Any) -> Key:
    """Parameter accumulator: record ``param`` in the scope of ``node`` (its module's call).

    Returns:
        the key of the parameter's node (an existing one if already recorded).
    """
    engine = _engine(rec)
    key = engine.lookup(param)
    if key is not None:
        return key
    layer = _layer(engine, node)
    path = engine.param_path(param) or f"{layer.key}.param"
    return engine.param_node(param, layer, path).key


def leaf_dummy(tensor: Tensor, rec: Any) -> Tensor:
    """Return ``tensor + 0``, pointed at ``tensor``'s node.

    The original recorder fed modules such dummies so that operations on them
    could be told apart; the current recorder does not need them, but the
    function keeps working for code that does.
    """
    engine = _engine(rec)
    engine.paused += 1
    try:
        dummy = tensor + 0
    finally:
        engine.paused -= 1
    key = engine.key_of(tensor)
    engine.bind(dummy, key)
    if dummy.grad_fn is not None:
        engine.bind(dummy.grad_fn, key)
    return dummy
