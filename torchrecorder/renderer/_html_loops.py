"""The folded Python loops of the HTML page: which of the page's nodes each loop spans, and what
its later iterations stand for while it is folded.

The page lists the nodes of the finest drawing (nothing folded).  A loop found
by :class:`~torchrecorder.projection.FoldPlan` (the iterations of a Python
loop: :mod:`~torchrecorder.projection.loops`) is a stretch of consecutive
children of one layer (or of the network's top level).  Each of those children
belongs to one iteration, and so do the children between two of them that a
folded run of blocks hides (the later blocks of a run led by a child of the
iteration, the tensors passed between them).  Folded, the page draws the first
iteration's children inside one cluster marked ``×N``, maps every node of a
later iteration onto its counterpart in the first (or onto nothing) and does
not draw the edges from one iteration to another, as
:class:`~torchrecorder.projection.Projection` does for ``make_dot``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..nodes import BaseNode, Key
from ..projection import FoldPlan, LoopNode

__all__ = ["loop_rows"]


def loop_rows(plan: FoldPlan, top: Key, order: Sequence[BaseNode], parents: Sequence[int],
              index: dict[Key, int], edges: Sequence[Sequence[Any]],
              describe: Callable[[LoopNode, list[Any]], list[Any]]) -> list[list[Any]]:
    """``[holder, first, later, aliases, crossing edges, *describe(group, iterations)]`` per
    folded loop of ``plan`` that spans a node of the page, in ``plan``'s order.

    Args:
        plan: the folding (its ``loops``, ``iteration``, ``alias`` and ``hidden``).
        top: the key of the layer whose children are the page's top level (the context).
        order: the page's nodes, in preorder.
        parents: each node's parent's position in ``order`` (-1 at the top).
        index: node key -> position in ``order``.
        edges: the page's edge rows (``[from, to, ...]``).
        describe: the rest of a loop's row (its drawing attributes, id, count, ...).

    ``holder`` is the position of the layer that ran the loop (-1: the top
    level); ``first`` the positions of its children in the first iteration's
    stretch, ``later`` those in the later iterations' (in order); ``aliases``
    pairs ``from, to`` mapping each node of a later iteration to its counterpart
    in the first (-1: to nothing); ``crossing edges`` the positions in ``edges``
    of the edges from one iteration of the loop to another.
    """
    if not plan.loops:
        return []
    groups = list(plan.loops.items())
    holders: dict[int, set[int]] = {}
    holder_of: list[int] = []
    for number, (_, iterations) in enumerate(groups):
        parent = iterations[0].parent
        holder = -1 if parent == top else index.get(parent, -2)  # -2: not on the page
        holder_of.append(holder)
        if holder != -2:
            holders.setdefault(holder, set()).add(number)
    kids: dict[int, list[int]] = {h: [] for h in holders}
    for i, p in enumerate(parents):
        got = kids.get(p)
        if got is not None:
            got.append(i)
    iteration, hidden = plan.iteration, plan.hidden
    first: list[list[int]] = [[] for _ in groups]
    later: list[list[int]] = [[] for _ in groups]
    own: dict[int, tuple[int, int]] = {}  # a child of a holder -> (loop, iteration) of its stretch
    for holder, numbers in holders.items():
        current = None
        for c in kids[holder]:
            key = order[c].key
            it = iteration.get(key)
            if it is not None and it[0] in numbers:
                current = it  # a child the loop's stretch is made of
            elif key not in hidden:
                current = None  # past the stretch (a hidden child: a later block of a run that a
                # child of the iteration leads, or a tensor passed between its blocks)
            if current is not None:
                own[c] = current
                (later if current[1] else first)[current[0]].append(c)
    # each node's stretches: its own and those of the children holding it
    around: list[tuple[tuple[int, int], ...]] = []
    for i, p in enumerate(parents):
        outer = around[p] if p >= 0 else ()
        mine = own.get(i)
        around.append(outer if mine is None else (*outer, mine))
    cross: list[list[int]] = [[] for _ in groups]
    for e, row in enumerate(edges):
        a, b = around[row[0]], around[row[1]]
        if a and b:
            for loop, k in a:
                if any(loop == other and k != j for other, j in b):
                    cross[loop].append(e)
                    break
    aliases: list[list[int]] = [[] for _ in groups]
    alias = plan.alias
    for key, (loop, k) in iteration.items():
        at = index.get(key)
        if k == 0 or at is None:
            continue
        target = alias.get(key)
        to = index.get(target) if target is not None else None
        aliases[loop].extend((at, -1 if to is None else to))
    rows: list[list[Any]] = []
    for number, (_, iterations) in enumerate(groups):
        if not first[number] and not later[number]:
            continue  # nothing of it is on the page
        holder = holder_of[number]
        group = iterations[0]
        if not isinstance(group, LoopNode):
            raise TypeError(f"a folded loop's group is a {type(group).__name__}, not a LoopNode")
        rows.append([holder, first[number], later[number], aliases[number], cross[number],
                     *describe(group, iterations)])
    return rows
