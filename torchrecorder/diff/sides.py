"""The two sides of a diff, indexed for pairing (:class:`Side`), and the pairs found (:class:`Matching`)."""

from __future__ import annotations

import hashlib
from typing import Any, Optional

from ..graph import Graph
from ..nodes import BaseNode, Key, LayerNode, OpNode, OrderedSet, ParamNode, TensorNode

__all__ = ["WRAPPED_NAMES", "Matching", "Side", "content_key"]

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
            for k in layer.subnet_keys:
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
        # parameters that torch.nn.utils.parametrize moved (``x.parametrizations.weight.original``),
        # or torch.nn.utils.prune (``x.weight_orig``, times the buffer ``x.weight_mask``)
        self.parametrized: dict[str, ParamNode] = {
            n.path: n for n in nodes.values() if isinstance(n, ParamNode)
            and (".parametrizations." in n.path or n.path.endswith("_orig"))}
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
        got = self.graph.nodes.get(node.parent_key)
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
        chain: keys (``("a", key)`` / ``("b", key)``) of the modules between a wrapping root
            and the other model's root it holds (peft's ``LoraModel``): parts of that wrapper.
        notes: what the matcher did that a reader should know, in words.
    """

    def __init__(self, a: Side, b: Side) -> None:
        self.a, self.b = a, b
        self.pairs: dict[Key, Key] = {}
        self.back: dict[Key, Key] = {}
        self.via: dict[Key, str] = {}
        self.wrapped: dict[Key, tuple[str, Key]] = {}
        self.ambiguous: list[tuple[str, Key]] = []
        self.chain: list[tuple[str, Key]] = []
        self.notes: list[str] = []

    def pair(self, ka: Key, kb: Key, via: str) -> None:
        """Pair ``a``'s node ``ka`` with ``b``'s ``kb`` (neither may be paired already)."""
        if ka in self.pairs or kb in self.back:
            raise RuntimeError(f"diff: {ka!r} or {kb!r} is paired twice (a bug in the matcher)")
        self.pairs[ka] = kb
        self.back[kb] = ka
        self.via[ka] = via

    def swapped(self) -> Matching:
        """The same pairs seen from the other side (``b`` first)."""
        m = Matching(self.b, self.a)
        for ka, kb in self.pairs.items():
            m.pair(kb, ka, self.via[ka])
        flip = {"a": "b", "b": "a"}
        m.wrapped = {self.pairs[k]: (flip[side], w) for k, (side, w) in self.wrapped.items()}
        m.ambiguous = [(flip[tag], k) for tag, k in self.ambiguous]
        m.chain = [(flip[tag], k) for tag, k in self.chain]
        m.notes = list(self.notes)
        return m


def _slots(cls: type) -> list[str]:
    out: list[str] = []
    for klass in reversed(cls.__mro__):
        for name in getattr(klass, "__slots__", ()):
            if name not in out:
                out.append(name)
    return out


def _plain(value: Any) -> Any:
    """``value`` with lists, tuples and sets as tuples and any other object as its text (so a
    recording and its JSON copy give one digest)."""
    if isinstance(value, (list, tuple, OrderedSet)):
        return tuple(_plain(v) for v in value)
    if value is None or isinstance(value, (str, int, float)):
        return value
    return str(value)


def content_key(graph: Graph) -> bytes:
    """A digest of everything recorded in ``graph`` (not of where it came from): equal for two
    graphs that a matcher cannot tell apart, and the same in every process."""
    h = hashlib.blake2b(digest_size=16)
    slots: dict[type, list[str]] = {}
    for key, node in graph.nodes.items():
        names = slots.get(type(node))
        if names is None:
            # (the line of code as node.source gives it, not as the recording named it)
            names = slots[type(node)] = [("source" if n == "_source" else n)
                                         for n in _slots(type(node)) if n != "fn"]
        values: list[Any] = [type(node).__name__]
        for name in names:
            values.append(_plain(getattr(node, name, None)))
        h.update(repr((key, values)).encode("utf-8", "surrogatepass"))
    for edge in graph.links:
        h.update(repr(edge).encode("utf-8", "surrogatepass"))
    return h.digest()
