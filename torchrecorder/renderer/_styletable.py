"""The styler's table of Graphviz attributes by kind, which node classes index too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["StyleTable"]


class StyleTable(dict[str, dict[str, str]]):
    """Kind (``"layer"``, ``"tensor"``, ``"edge"``, ...) -> Graphviz attributes.

    A node class stands for its kind, found along its MRO as the styler finds it,
    so code written for the original torchrecorder, whose ``styles`` was keyed by
    node class, reads and changes the same dicts: ``styles[LayerNode]`` is
    ``styles["layer"]``.  Iteration and ``in`` see the kinds only.

    >>> from torchrecorder.nodes import LayerNode
    >>> from torchrecorder.projection import NODE_KINDS
    >>> table = StyleTable(NODE_KINDS, {"layer": {"color": "red"}})
    >>> table[LayerNode] is table["layer"]
    True
    """

    __slots__ = ("by_class", "kinds")

    def __init__(self, kinds: Mapping[type, str], *args: Any) -> None:
        super().__init__(*args)
        self.kinds = kinds
        #: the kinds read or set through a node class (1.0.3's way): ``styles[TensorNode]``
        #: styled the network's inputs and outputs too, which today have a kind of their own
        self.by_class: set[str] = set()

    def kind(self, key: Any) -> str:
        """The kind ``key`` names: itself, or the kind of a node class."""
        if isinstance(key, type):
            for cls in key.__mro__:
                kind = self.kinds.get(cls)
                if kind is not None:
                    return kind
            raise KeyError(f"no style kind for the node class {key.__name__}; the kinds are "
                           + ", ".join(sorted(self)))
        return str(key)

    def __missing__(self, key: Any) -> dict[str, str]:
        if isinstance(key, type):
            kind = self.kind(key)
            self.by_class.add(kind)
            return dict.__getitem__(self, kind)
        raise KeyError(key)

    def __setitem__(self, key: Any, value: dict[str, str]) -> None:
        kind = self.kind(key)
        if isinstance(key, type):
            self.by_class.add(kind)
        super().__setitem__(kind, value)
