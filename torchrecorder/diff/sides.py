"""The two sides of a diff, indexed for pairing (:class:`Side`), and the pairs found (:class:`Matching`)."""

from __future__ import annotations

from typing import Any, Optional

from ..graph import Graph
from ..nodes import BaseNode, Key, LayerNode, OpNode, ParamNode, TensorNode

__all__ = ["WRAPPED_NAMES", "Matching", "Side"]

#: names under which a wrapper keeps the module it wraps (peft, torch.ao, DDP-like wrappers)
WRAPPED_NAMES = ("base_layer", "module", "original_module", "base_model", "model", "layer")

class Side:
    """One graph, indexed for matching: children, signatures and normalised paths of its calls."""

    def __init__(self, graph: Graph, interned: dict[Any, int]) -> None:
        self.graph = graph
        nodes = graph.nodes
        self.layers: list[LayerNode] = list(graph.layers())
        self.order: dict[Key, int] = {k: i for i, k in enumerate(nodes)}
        self.children: dict[Key, list[LayerNode]] = {}
        self.ops: dict[Key, list[OpNode]] = {}
        self.params: dict[Key, list[ParamNode]] = {}
        self.tensors: dict[Key, list[TensorNode]] = {}
        for layer in [graph.context, *self.layers]:
            kids: list[LayerNode] = []
            ops: list[OpNode] = []
            params: list[ParamNode] = []
            tensors: list[TensorNode] = []
            for k in layer.subnets:
                n = nodes[k]
                if isinstance(n, LayerNode):
                    kids.append(n)
                elif isinstance(n, OpNode):
                    ops.append(n)
                elif isinstance(n, ParamNode):
                    params.append(n)
                elif isinstance(n, TensorNode):
                    tensors.append(n)
            self.children[layer.key] = kids
            self.ops[layer.key] = ops
            self.params[layer.key] = params
            self.tensors[layer.key] = tensors
        self.calls: dict[str, int] = {}
        for layer in self.layers:
            self.calls[layer.path] = self.calls.get(layer.path, 0) + 1
        # subtree signatures, interned into small ints shared by both sides (children first)
        self.sig: dict[Key, int] = {}
        for layer in reversed(self.layers):
            k = layer.key
            item = (layer.type_name,
                    tuple((p.name, tuple(p.shape or ()), p.dtype) for p in self.params[k]),
                    tuple(self.sig.get(c.key, -1) for c in self.children[k]),
                    tuple(o.op for o in self.ops[k]))
            got = interned.get(item)
            if got is None:
                got = interned[item] = len(interned)
            self.sig[k] = got
        self.norm: dict[Key, str] = {layer.key: layer.path for layer in self.layers}
        self.types: dict[Key, str] = {layer.key: layer.type_name for layer in self.layers}
        self.prefix = ""

    def strip(self, prefix: str) -> None:
        """Normalise every path by removing ``prefix`` (``"x.y."``)."""
        self.prefix = prefix
        whole = prefix[:-1]
        for layer in self.layers:
            p = layer.path
            if p.startswith(prefix):
                self.norm[layer.key] = p[len(prefix):]
            elif p == whole:
                self.norm[layer.key] = ""
            elif not p or prefix.startswith(p + "."):  # a module around the prefix: a wrapper
                self.norm[layer.key] = "^" + p

    def local(self, layer: LayerNode, parent: Optional[LayerNode]) -> str:
        """``layer``'s name inside ``parent`` (normalised), with ``#k`` for a later call."""
        p = self.norm.get(parent.key, "") if parent is not None and parent.key is not None else ""
        path = self.norm[layer.key]
        name = path[len(p) + 1:] if p and path.startswith(p + ".") else path
        return name if layer.call_index == 1 else f"{name}#{layer.call_index}"

    def parent_layer(self, node: BaseNode) -> Optional[LayerNode]:
        got = self.graph.nodes.get(node.parent)
        return got if isinstance(got, LayerNode) and got.key is not None else None


class Matching:
    """The result of :func:`match`.

    Attributes:
        a, b: the two indexed sides.
        pairs: ``a`` key -> ``b`` key; ``back`` the reverse.
        via: ``a`` key -> how it was paired (``"key"``, ``"aligned"``, ``"signature"``,
            ``"bottom-up"``, ``"user"``, ``"wrapped"``, ``"scope"``, ``"producer"``).
        wrapped: ``a`` key -> (the side holding the wrapper, the wrapper's key).
        ambiguous: keys (``("a", key)`` / ``("b", key)``) of unpaired calls that an identical
            sibling could stand for.
        notes: what the matcher did that a reader should know, in words.
    """

    def __init__(self, a: Side, b: Side) -> None:
        self.a, self.b = a, b
        self.pairs: dict[Key, Key] = {}
        self.back: dict[Key, Key] = {}
        self.via: dict[Key, str] = {}
        self.wrapped: dict[Key, tuple[str, Key]] = {}
        self.ambiguous: list[tuple[str, Key]] = []
        self.notes: list[str] = []

    def pair(self, ka: Key, kb: Key, via: str) -> None:
        self.pairs[ka] = kb
        self.back[kb] = ka
        self.via[ka] = via
