"""The backward graph of a recording as a graph of its own, drawn like the forward one.

:func:`backward_view` turns the :class:`~torchrecorder.graph.AutogradGraph` a recording
kept (``record(..., backward=True)``) into a :class:`~torchrecorder.graph.Graph` with the
same module calls: every autograd node is an op node inside the call whose forward created
it, every ``AccumulateGrad`` of a parameter the parameter's node, every input leaf an
input node, and the model's outputs output nodes.  Any renderer then draws it with its
depth, folding and styling options, as it draws the forward graph.

>>> import torch, torchrecorder
>>> net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh())
>>> rec = torchrecorder.record(net, "net", (1, 3), backward=True)
>>> view = backward_view(rec)
>>> [(n.op, n.parent_key) for n in view.nodes.values() if isinstance(n, OpNode)]
[('TBackward0', '0'), ('AddmmBackward0', '0'), ('TanhBackward0', '1')]
"""

from __future__ import annotations

import copy
import math

from ..graph import AutogradGraph, Graph
from ..nodes import (
    BaseNode,
    Key,
    LayerNode,
    OpNode,
    OrderedSet,
    ParamNode,
    ScopeNode,
    TensorNode,
)

__all__ = ["SAVED", "backward_view", "autograd_graph_of"]

#: the ``role`` of a tensor saved for the backward pass (``show_saved``): drawn as a tensor
#: with its name, not as an input of the network
SAVED = "saved"


def autograd_graph_of(graph: Graph) -> AutogradGraph:
    """The autograd graph ``graph`` kept; a clear error where there is none.

    Raises:
        ValueError: the recording was made without ``backward=True``, or its forward pass
            ran without gradients (``torch.no_grad()``, ``torch.inference_mode()``, a model
            with no parameter or input that requires gradients).
    """
    bw = getattr(graph, "backward", None)
    if bw is None:
        raise ValueError("this recording holds no backward graph: record it with "
                         "record(..., backward=True) (or render_network(..., backward=True))")
    if not bw.grad_enabled:
        raise ValueError("the recorded forward pass ran without gradients (torch.no_grad() or "
                         "torch.inference_mode()), so it built no backward graph: record it "
                         "with gradients on")
    if not bw.nodes:
        raise ValueError("the recorded forward pass built no backward graph: no output of the "
                         "model requires gradients (no parameter or input requires them)")
    return bw


def backward_view(graph: Graph, *, saved: bool = False) -> Graph:
    """A graph of the backward pass of ``graph``, in the clusters of its module calls.

    Args:
        graph: a recording made with ``backward=True``.
        saved: also draw the tensors each autograd node saved for the backward pass
            (named after the saved attribute, with their shapes; role :data:`SAVED`, styled
            as tensors), as torchviz's ``show_saved`` does.

    Edges run as torchviz draws them, in the direction of the forward pass: from each
    node of ``next_functions`` to the node that lists it.  Module calls that created no
    autograd node (a dropout in ``eval()``, an integer embedding lookup's scope with no
    parameter that requires gradients) are left out.

    Raises:
        ValueError: as :func:`autograd_graph_of`.
    """
    bw = autograd_graph_of(graph)
    view = Graph(graph.name)
    nodes = view.nodes
    calls = [copy.copy(n) for k, n in graph.nodes.items()
             if isinstance(n, LayerNode)]
    for layer in calls:
        layer.subnet_keys = OrderedSet()
        nodes[layer.key] = layer
        view.keys.reserve(str(layer.key))
    for layer in calls:
        parent = dict.get(nodes, layer.parent_key)
        if not isinstance(parent, ScopeNode):
            raise ValueError(f"layer {layer.key!r} sits in {layer.parent_key!r}, which is not a layer")
        parent.subnet_keys.add(layer.key)

    def scope_of(key: Key) -> ScopeNode:
        scope = dict.get(nodes, key)
        return scope if isinstance(scope, ScopeNode) else view.context

    params = {n.path: n for n in graph.nodes.values() if isinstance(n, ParamNode)}
    keys: list[Key] = []
    for i, an in enumerate(bw.nodes):
        scope = scope_of(an.scope)
        prefix = f"{scope.key}/" if scope.key is not None else ""
        made: BaseNode
        if an.param:
            p = params.get(an.param)  # the forward's node: its dtype, device and size
            made = ParamNode(an.param.rpartition(".")[2], None, scope.depth + 1, scope.key,
                             shape=an.shape, path=an.param, dtype=p.dtype if p else "",
                             device=p.device if p else "",
                             numel=p.numel if p else math.prod(an.shape or ()),
                             requires_grad=p.requires_grad if p else True)
            made = view.insert(made, f"grad:{an.param}")
        elif an.shape is not None:
            made = view.insert(TensorNode(f"leaf {i}", None, scope.depth + 1, scope.key,
                                          shape=an.shape, role="input"), f"{prefix}leaf")
        else:
            made = view.insert(OpNode(an.name, None, scope.depth + 1, scope.key, op=an.name),
                               f"{prefix}{an.name}")
        keys.append(made.key)
        if saved:
            for attr, shape in an.saved:
                t = view.insert(TensorNode(attr, None, scope.depth + 1, scope.key, shape=shape,
                                           role=SAVED), f"{prefix}saved:{attr}")
                view.links.add((t.key, made.key))
    for a, b in bw.edges:
        view.links.add((keys[a], keys[b]))
    for i, out_key in bw.outputs:
        source = dict.get(graph.nodes, out_key)
        if not isinstance(source, TensorNode):
            raise ValueError(f"the output {out_key!r} of the backward graph is not a tensor of the recording")
        out = view.insert(TensorNode(source.name, None, 0, None, shape=source.shape, role="output",
                                     dtype=source.dtype, device=source.device), f"output:{source.name}")
        view.links.add((keys[i], out.key))
    _drop_empty_layers(view)
    view.lint()
    return view


def _drop_empty_layers(view: Graph) -> None:
    """Remove the module calls that hold nothing (innermost first)."""
    for key in reversed([k for k, n in view.nodes.items()
                         if isinstance(n, LayerNode)]):
        layer = view.nodes[key]
        if isinstance(layer, LayerNode) and not layer.subnet_keys:
            view.remove([key])
