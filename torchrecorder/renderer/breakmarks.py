"""Module calls marked with the ``torch.compile`` graph breaks they hold (``make_dot(rec,
breaks=...)``): the index the styler asks, the words of the badge and of the tooltip.

The breaks come from :func:`torchrecorder.compile_breaks`; any objects with its
``module`` (the key of a module call), ``reason``, ``filename`` and ``lineno`` attributes
will do.  Nothing here runs dynamo.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, Optional

from ..graph import Graph
from ..nodes import Key, LayerNode

__all__ = ["BADGE", "BreakMarks"]

#: the label line of a call that holds graph breaks
BADGE = '<FONT POINT-SIZE="9" COLOR="#c5221f"><B>{}</B></FONT>'

_NEEDS = ("module", "reason", "filename", "lineno")


class BreakMarks:
    """The graph breaks to mark, by the module call that holds each.

    Args:
        breaks: graph breaks (:class:`~torchrecorder.graph_breaks.GraphBreak`); a break whose
            ``module`` is ``None`` or names no call of the drawn recording is not drawn.

    Raises:
        TypeError: ``breaks`` is not an iterable of graph breaks.
    """

    def __init__(self, breaks: Iterable[Any] = ()) -> None:
        if breaks is None:
            breaks = ()
        if isinstance(breaks, (str, bytes)) or not isinstance(breaks, Iterable):
            raise TypeError("breaks must be the graph breaks of torchrecorder.compile_breaks(), "
                            f"got {type(breaks).__name__}")
        self.breaks = list(breaks)
        for b in self.breaks:
            missing = [a for a in _NEEDS if not hasattr(b, a)]
            if missing:
                raise TypeError(f"breaks must hold graph breaks of torchrecorder.compile_breaks(); "
                                f"a {type(b).__name__} has no {', '.join(missing)}")
        self._rec: Optional[Graph] = None
        self._own: dict[Key, list[Any]] = {}
        self._inside: dict[Key, list[Any]] = {}

    def __bool__(self) -> bool:
        return bool(self.breaks)

    def _index(self, rec: Graph) -> None:
        if self._rec is rec:
            return
        self._rec, self._own, self._inside = rec, {}, {}
        nodes = rec.nodes
        for b in self.breaks:
            key = b.module
            if not isinstance(key, str) or not isinstance(nodes.get(key), LayerNode):
                continue
            self._own.setdefault(key, []).append(b)
            while key is not None:  # every call around it holds it too
                self._inside.setdefault(key, []).append(b)
                key = nodes[key].parent_key if key in nodes.keys() else None

    def at(self, rec: Optional[Graph], node: LayerNode, inside: bool) -> list[Any]:
        """The breaks of ``node``'s call: its own, and with ``inside`` those of the calls in it
        (for a box whose insides are not drawn)."""
        if not self.breaks or rec is None:
            return []
        self._index(rec)
        return (self._inside if inside else self._own).get(node.key, [])

    @staticmethod
    def badge(found: list[Any]) -> str:
        """``graph break`` or ``3 graph breaks``."""
        return "graph break" if len(found) == 1 else f"{len(found)} graph breaks"

    def badges(self, rec: Optional[Graph], node: LayerNode, inside: bool) -> list[str]:
        """The label line (Graphviz label markup) that marks ``node``'s breaks, if it has any."""
        found = self.at(rec, node, inside)
        return [BADGE.format(self.badge(found))] if found else []

    @staticmethod
    def describe(b: Any) -> str:
        """``<reason> (<dynamo's explanation>)``, one line."""
        reason = str(b.reason).splitlines()[0] if b.reason else "no reason given"
        why = getattr(b, "explanation", "")
        return f"{reason} ({why})" if why and why != reason else reason

    @classmethod
    def tooltip(cls, found: list[Any]) -> str:
        """``; graph break at model.py:12: <reason>`` for each break."""
        return "".join(f"; graph break at {os.path.basename(str(b.filename))}:{b.lineno}: "
                       f"{cls.describe(b)}" for b in found)
