"""The folded Python loops of the HTML page: which of the page's nodes each loop spans, and what
its later iterations stand for while it is folded.

The page lists the nodes of the finest drawing (nothing folded).  A loop found
by :class:`~torchrecorder.projection.FoldPlan` (the iterations of a Python
loop: :mod:`~torchrecorder.projection.loops`) is a stretch of consecutive
children of one layer (or of the network's top level).  Each of those children
belongs to one iteration, and so do the children between two of them that a
folded run of blocks hides (the later blocks of a run led by a child of the
iteration, the tensors passed between them).  Folded, the page draws the first
iteration's children inside one cluster marked ``×N`` and maps every node of a
later iteration onto its counterpart in the first (or onto nothing).  Its edges
are the projection's, as ``make_dot`` draws them
(:mod:`~torchrecorder.projection.edges`): the page hides the edges of the
unfolded drawing that the folded one lacks (from one iteration to another,
chains joined over a left-out node), and draws those only the folded one has,
the carried edges (dashed back edges) among them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..nodes import BaseNode, Key
from ..projection import LoopNode, Projection

__all__ = ["loop_rows"]


def loop_rows(folded: Projection, also: Iterable[Key], top: Key, order: Sequence[BaseNode],
              parents: Sequence[int], index: dict[Key, int], edges: list[list[Any]],
              describe: Callable[[LoopNode, list[Any]], list[Any]],
              edge_rows: Callable[[list[tuple[BaseNode, BaseNode]], bool], list[list[Any]]]
              ) -> list[list[Any]]:
    """``[holder, first, later, aliases, hidden edges, *describe(group, iterations), added
    edges, carried edges, added nodes]`` per folded loop of ``folded`` that spans a node of the
    page, in its fold plan's order.

    Args:
        folded: the finest drawing with every run and loop folded (its ``fold`` plan's
            ``loops``, ``iteration``, ``alias`` and ``hidden``; its edges and carried edges).
        also: keys of the nodes on the page drawn only while their loop is folded.
        top: the key of the layer whose children are the page's top level (the context).
        order: the page's nodes, in preorder.
        parents: each node's parent's position in ``order`` (-1 at the top).
        index: node key -> position in ``order``.
        edges: the page's edge rows (``[from, to, ...]``); the rows of the edges drawn only
            while a loop is folded are appended.
        describe: the rest of a loop's row (its drawing attributes, id, count, ...).
        edge_rows: the rows of edges of ``folded`` (``True``: of its carried edges).

    ``holder`` is the position of the layer that ran the loop (-1: the top
    level); ``first`` the positions of its children in the first iteration's
    stretch, ``later`` those in the later iterations' (in order); ``aliases``
    pairs ``from, to`` mapping each node of a later iteration to its counterpart
    in the first (-1: to nothing); ``crossing edges`` the positions in ``edges``
    of the edges not drawn while the loop is folded (from one iteration of the loop to
    another, or that the folded drawing joins otherwise); ``added edges`` and ``carried
    edges`` the positions in ``edges`` of the rows drawn only while it is folded, ``added
    nodes`` the positions of the nodes drawn only then.
    """
    plan = folded.fold
    if not plan.loops:
        return []
    groups = list(plan.loops.items())
    holders: dict[int, set[int]] = {}
    holder_of: list[int] = []
    for number, (_, iterations) in enumerate(groups):
        parent = iterations[0].parent_key
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
    shown_nodes: list[list[int]] = [[] for _ in groups]
    for key in also:
        at = index.get(key)
        if at is not None:
            for loop in {loop for loop, _ in around[at]}:
                shown_nodes[loop].append(at)
    added, carried = _folded_edges(folded, order, index, edges, around, cross, edge_rows)
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
                     *describe(group, iterations), added.get(number, []), carried.get(number, []),
                     sorted(shown_nodes[number])])
    return rows


def _folded_edges(folded: Projection, order: Sequence[BaseNode], index: dict[Key, int],
                  edges: list[list[Any]], around: list[tuple[tuple[int, int], ...]], cross: list[list[int]],
                  edge_rows: Callable[[list[tuple[BaseNode, BaseNode]], bool], list[list[Any]]]
                  ) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """The page's edges while its loops are folded made ``folded``'s: the rows of ``edges``
    whose image ``folded`` does not draw join ``cross`` (hidden while a loop around an end is
    folded); the rows of ``folded``'s edges no shown row stands for, and of its carried
    edges, are appended to ``edges`` and returned per loop around an end (drawn only while
    folded)."""
    def loops_at(*ends: int) -> set[int]:
        return {loop for end in ends for loop, _ in around[end]}

    drawn = folded.drawn_key
    plain = {(a.key, b.key) for a, b in folded.edges}
    hidden = {e for got in cross for e in got}
    shown: set[tuple[Key, Key]] = set()
    for e, row in enumerate(edges):
        a, b = drawn(order[row[0]].key), drawn(order[row[1]].key)
        if a is None or b is None or a == b:
            continue
        if (a, b) not in plain:
            for loop in loops_at(row[0], row[1]):
                if e not in cross[loop]:
                    cross[loop].append(e)
        elif e not in hidden:
            shown.add((a, b))

    def owned(pairs: list[tuple[BaseNode, BaseNode]]) -> list[tuple[tuple[BaseNode, BaseNode], set[int]]]:
        got = []
        for a, b in pairs:
            i, j = index.get(a.key), index.get(b.key)
            if i is not None and j is not None and (owners := loops_at(i, j)):
                got.append(((a, b), owners))
        return got

    added: dict[int, list[int]] = {}
    carried: dict[int, list[int]] = {}
    for to, pairs, back in ((added, [(a, b) for a, b in folded.edges if (a.key, b.key) not in shown], False),
                            (carried, folded.carried_edges, True)):
        got = owned(pairs)
        for (_, owners), row in zip(got, edge_rows([pair for pair, _ in got], back), strict=True):
            for loop in owners:
                to.setdefault(loop, []).append(len(edges))
            edges.append(row)
    return added, carried
