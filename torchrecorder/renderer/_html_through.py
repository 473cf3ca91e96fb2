"""The modules that an edge of the HTML page's finest drawing passes through unseen.

``make_dot`` joins the data-movement operations it leaves out (``view``, ``identity``,
``contiguous``, ...) into the edge that carries their value.  With every module open, a
value that a module only passes on is drawn from where it is made straight to where it is
read: T5 computes its attention bias in its first block and each block returns it for the
next, so the edge runs from block 0 to block 2 past block 1.  Where the module that passed
it on is closed into a box, ``make_dot`` draws the value into that box and out of it (the
box returned it): block 0 -> block 1 -> block 2.

The page draws each view by taking the finest drawing's edges to the boxes that stand for
their ends, so it needs to know, for such an edge, the modules its left-out operations ran
in: :func:`through_rows` lists them, and the page draws the edge through the box of each
one that is closed (page_dot.js), as ``make_dot`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..nodes import BaseNode, Key
from ..projection import Projection

__all__ = ["holders", "through_rows"]


def through_rows(finest: Projection, index: Mapping[Key, int], parents: list[int]) -> dict[str, Any]:
    """``{"through": rows}`` or, where no edge passes through a module unseen, ``{}``.

    A row is ``[edge, module, ...]``: the row of an edge of ``finest`` in the page's
    ``edges`` (counted as the page's edge rows are made: the edges whose two ends are in
    ``index``, in ``finest.edges``' order), then, in the order they ran, the innermost
    module (its position in ``index``) of each operation left out on the edge, and of the
    tensor it carries, that holds neither end of the edge.

    Args:
        finest: the page's finest drawing (every module open).
        index: node key -> its row in the page's data.
        parents: each row's parent row (-1: none).
    """
    nodes = finest.nodes
    rows: list[list[int]] = []
    row = -1
    for fnode, tnode in finest.edges:
        a, b = index.get(fnode.key), index.get(tnode.key)
        if a is None or b is None:
            continue
        row += 1
        items: list[BaseNode] = list(finest.edge_ops(fnode, tnode))
        tensor = finest.edge_tensor(fnode, tnode)
        if tensor is not None:
            items.append(tensor)
        if not items:
            continue
        ends = set(holders(a, parents)) | set(holders(b, parents))
        through: list[int] = []
        for item in items:
            m = _innermost(item, nodes, index)
            if m >= 0 and m not in ends and (not through or through[-1] != m):
                through.append(m)
        if through:
            rows.append([row, *through])
    return {"through": rows} if rows else {}


def holders(i: int, parents: list[int]) -> list[int]:
    """The row ``i`` and the rows of the modules holding it, innermost first."""
    out = []
    while i >= 0:
        out.append(i)
        i = parents[i]
    return out


def _innermost(item: BaseNode, nodes: Mapping[Key, BaseNode], index: Mapping[Key, int]) -> int:
    """The row of the innermost module in the page that holds ``item``; -1 if none does."""
    parent = item.parent_key
    while parent is not None:
        got = index.get(parent)
        if got is not None:
            return got
        holder = nodes.get(parent)
        parent = holder.parent_key if holder is not None else None
    return -1
