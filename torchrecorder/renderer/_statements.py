"""What a Graphviz renderer's hooks wrote: the DOT statements added to a graph's ``body``.

A subclass of :class:`~torchrecorder.renderer.graphviz.GraphvizRenderer` may
write its own node and edge statements (the original torchrecorder named nodes
``str(id(node))``).  These helpers read such statements, so that the renderer
learns the name each node was drawn under and writes every edge with it.
"""

from __future__ import annotations

import re
from typing import Optional

__all__ = ["edge_ends", "first_node_id", "plain_id", "same_id", "top_level_statements"]

# a DOT ID: a double-quoted string, a numeral, or a name (HTML ids are not used for nodes here)
_ID = r'"(?:[^"\\]|\\.)*"|-?(?:\.\d+|\d+(?:\.\d*)?)|[^\W\d][\w]*'
_NODE = re.compile(rf"\s*({_ID})\s*(?:\[|;|$)", re.DOTALL)
_EDGE = re.compile(rf"\s*({_ID})(?::(?:{_ID}))*\s*->\s*({_ID})", re.DOTALL)
_KEYWORDS = frozenset(("node", "edge", "graph", "subgraph", "digraph", "strict"))


def top_level_statements(body: list[str], start: int) -> list[tuple[int, str]]:
    """The statements of ``body[start:]`` outside any ``subgraph { ... }``, with their index."""
    found: list[tuple[int, str]] = []
    level = 0
    for i in range(start, len(body)):
        stmt = body[i]
        text = stmt.strip()
        if text == "}":
            level = max(level - 1, 0)
        elif text.endswith("{"):
            level += 1
        elif level == 0:
            found.append((i, stmt))
    return found


def first_node_id(body: list[str], start: int) -> Optional[str]:
    """The ID (as written) of the first node statement in ``body[start:]`` outside subgraphs.

    >>> first_node_id(["\\tsubgraph c {\\n", "\\t\\tx [a=1]\\n", "\\t}\\n", "\\t140 [label=a]\\n"], 0)
    '140'
    """
    for _, stmt in top_level_statements(body, start):
        m = _NODE.match(stmt)
        if m and m.group(1).lower() not in _KEYWORDS:
            return m.group(1)
    return None


def edge_ends(stmt: str) -> Optional[tuple[tuple[int, int], tuple[int, int]]]:
    """The spans of the tail and head IDs of the edge statement ``stmt``, or ``None``.

    >>> edge_ends('\\t1 -> "b c" [color=red]\\n')
    ((1, 2), (6, 11))
    """
    m = _EDGE.match(stmt)
    if m is None:
        return None
    return m.span(1), m.span(2)


def same_id(a: str, b: str) -> bool:
    """Whether the written IDs ``a`` and ``b`` name the same DOT node (``"x"`` is ``x``)."""
    return plain_id(a) == plain_id(b)


def plain_id(text: str) -> str:
    """The node name the written ID ``text`` stands for (``"a b"`` is ``a b``)."""
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        return re.sub(r'\\(["\\])', r"\1", text[1:-1])
    return text
