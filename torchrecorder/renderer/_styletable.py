"""The styler's table of Graphviz attributes by kind, which node classes index too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ..nodes import BaseNode

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

    __slots__ = ("by_class", "kinds", "unkinded")

    def __init__(self, kinds: Mapping[type, str], *args: Any) -> None:
        super().__init__(*args)
        self.kinds = kinds
        #: the kinds read or set through a node class (1.0.3's way): ``styles[TensorNode]``
        #: styled the network's inputs and outputs too, which today have a kind of their own
        self.by_class: set[str] = set()
        #: node classes without a kind -> their dict (see the class docstring)
        self.unkinded: dict[type, dict[str, str]] = {}

    def kind(self, key: Any) -> str:
        """The kind ``key`` names: itself, or the kind of a node class."""
        kind = self._class_kind(key) if isinstance(key, type) else str(key)
        if kind is None:
            raise KeyError(f"no style kind for the node class {key.__name__}; the kinds are "
                           + ", ".join(sorted(self)))
        return kind

    def _class_kind(self, cls: type) -> Optional[str]:
        for klass in cls.__mro__:
            kind = self.kinds.get(klass)
            if kind is not None:
                return kind
        return None

    def _unkinded(self, cls: type) -> Optional[dict[str, str]]:
        """The dict of a node class without a kind, made on first use; ``None`` for another class."""
        if not issubclass(cls, BaseNode) or self._class_kind(cls) is not None:
            return None
        if cls not in self.unkinded:
            node_kinds = [dict.__getitem__(self, k) for k in sorted(set(self.kinds.values())) if k in self]
            first = node_kinds[0] if node_kinds else {}
            self.unkinded[cls] = {k: v for k, v in first.items() if all(d.get(k) == v for d in node_kinds)}
        return self.unkinded[cls]

    def __missing__(self, key: Any) -> dict[str, str]:
        if isinstance(key, type):
            own = self._unkinded(key)
            if own is not None:
                return own
            kind = self.kind(key)
            self.by_class.add(kind)
            return dict.__getitem__(self, kind)
        raise KeyError(key)

    def __setitem__(self, key: Any, value: dict[str, str]) -> None:
        if isinstance(key, type) and self._unkinded(key) is not None:
            self.unkinded[key] = value
            return
        kind = self.kind(key)
        if isinstance(key, type):
            self.by_class.add(kind)
        super().__setitem__(kind, value)
