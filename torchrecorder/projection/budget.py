"""The drawing budget: a default drawing that Graphviz (or the browser) lays out in seconds.

Graphviz's ``dot`` takes seconds for a few thousand nodes and edges and
minutes past that (``benchmarks/layout_budget.py`` measures where).  A
drawing the caller did not size itself (the default ``render_depth`` of
``make_dot``, ``render_network``, the notebook, the HTML page, the command
line, the directive and the scraper: a :class:`DefaultDepth`) is fitted to
:data:`MAX_NODES` nodes and :data:`MAX_EDGES` edges by :func:`fit`: it keeps
the depth asked for if the drawing fits, else folds every repeated run of two
or more (when folding was left to ``"auto"``), else draws the deepest depth
that fits.  Counting nodes and edges is not enough: ``dot`` routes an edge
that skips ranks through one virtual node per rank it passes, and a drawing
of a few hundred boxes whose edges reach far back (a DARTS cell, where every
step reads every earlier state; a loop whose every iteration reads the same
input) lays out as slowly as one of thousands of nodes.  So a drawing also
fits only when its edges pass at most :data:`MAX_SPANS` ranks in all
(:func:`edge_spans`), counting the invisible edges that put each cluster's title
above what feeds it (:func:`layout_spans`): a PointNet++ whose every stage reads
the point coordinates again draws 200 boxes within the other bounds, yet its
title edges alone pass thousands of ranks and ``dot`` took 24 s on it.
Before it folds or collapses anything, :func:`fit` shares the edges of a value
fed to more than :data:`MAX_FANOUT` drawn boxes (the rotary embedding's tables,
read by every layer of an unfolded Llama): they are drawn as one edge to a
small mark that names the boxes (:func:`wide_sources`), which loses no box and
takes away the long edges that made ``dot`` slow.  :func:`fit` says what it
shared and collapsed; the renderer writes that in
the drawing and in a :class:`~torchrecorder.errors.LargeDrawingWarning`.  A
depth given explicitly (an ``int`` or ``None`` for everything) is drawn as
asked, its fan-out edges shared when it exceeds the budget (with a warning
first when it still does); ``max_nodes=None`` draws every edge.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Optional, Union

from ..graph import Graph
from ..nodes import BaseNode, Key, LayerNode
from .drawn import Projection

__all__ = ["ALL_DEPTHS", "MAX_EDGES", "MAX_FANOUT", "MAX_NODES", "MAX_SPANS", "DefaultDepth", "Fit",
           "MaxNodes", "budget_limits", "budget_of", "default_depth", "drawn_size", "edge_spans", "fit",
           "graph_depth", "layout_spans", "wide_sources"]

#: the most drawn nodes (boxes and clusters) of a default drawing: ``dot`` lays out drawings
#: of recorded models this size in 2-3 s on a loaded 2-core machine (``benchmarks/layout_budget.py``:
#: 795 nodes of transformer layers 3.1 s, 1,002 of an MLP 1.2 s)
MAX_NODES = 1000
#: the most drawn edges of a default drawing
MAX_EDGES = 1200
#: the most ranks the edges of a default drawing pass in all (:func:`edge_spans`): ``dot``
#: lays out a loop whose every iteration reads one input in 0.8 s at 2,146 of them, 3.5 s at
#: 3,404 and 22 s at 4,951, and a DARTS supernet's cells (736 boxes) in 10-15 s at 7,238, on
#: a loaded 2-core machine (``benchmarks/layout_budget.py``); counted with the title edges
#: (:func:`layout_spans`), a PointNet++ (197 boxes) took 24 s at 8,690 and a 48-layer
#: transformer 1.5 s at 913 (``benchmarks/layout_measures.py``)
MAX_SPANS = 2500
#: a value fed to more drawn boxes than this is not, in a drawing over budget, drawn with an
#: edge to each: one edge to a mark naming them stands for all (:func:`wide_sources`); drawn
#: over the budget anyway (``max_nodes=None``), its edges do not rank the boxes
#: (``constraint=false``).  An unfolded 8B Llama (235
#: boxes, the rotary tables fed to its 32 layers) passes 14,282 ranks and ``dot`` had not laid
#: it out after 2 minutes; shared, it passes a few hundred and lays out in seconds
MAX_FANOUT = 8
#: a ``render_depth`` deeper than any recording
ALL_DEPTHS = 1 << 30

MaxNodes = Union[int, str, None]


class DefaultDepth(int):
    """A ``render_depth`` the caller did not choose: an ``int`` that the budget may lower.

    >>> d = default_depth(256)
    >>> d == 256, isinstance(d, DefaultDepth), isinstance(256, DefaultDepth)
    (True, True, False)
    """

    def __repr__(self) -> str:
        return f"default_depth({int(self)})"


def default_depth(depth: int) -> DefaultDepth:
    """``depth`` marked as a default (see :class:`DefaultDepth`)."""
    return DefaultDepth(depth)


#: the depth the page and the notebook's picture open at by default (within the drawing budget)
VIEW_DEPTH = default_depth(1)


def budget_of(max_nodes: MaxNodes) -> Optional[tuple[int, int]]:
    """``(nodes, edges)`` of a ``max_nodes`` option: ``"auto"`` the defaults, an int that many
    nodes (and ``6/5`` as many edges), ``None`` no budget.

    >>> budget_of("auto"), budget_of(300), budget_of(None)
    ((1000, 1200), (300, 360), None)
    """
    if max_nodes is None:
        return None
    if max_nodes == "auto":
        return MAX_NODES, MAX_EDGES
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1:
        raise ValueError(f"max_nodes must be 'auto', None or an int >= 1, got {max_nodes!r}")
    return max_nodes, max_nodes * MAX_EDGES // MAX_NODES


def budget_limits(max_nodes: MaxNodes) -> Optional[dict[str, int]]:
    """The limits a drawing within ``max_nodes``'s budget keeps to: ``nodes``, ``edges`` and
    ``spans`` (the ranks its edges pass, :func:`layout_spans`), or ``None`` for no budget.
    The HTML page carries them, so that what the reader opens is held to the same budget.

    >>> budget_limits("auto"), budget_limits(None)
    ({'nodes': 1000, 'edges': 1200, 'spans': 2500}, None)
    """
    budget = budget_of(max_nodes)
    if budget is None:
        return None
    return {"nodes": budget[0], "edges": budget[1], "spans": _max_spans(budget)}


def wide_sources(p: Projection, fanout: int) -> tuple[Key, ...]:
    """The keys of the nodes drawn from ``p`` that feed more than ``fanout`` drawn nodes, in
    the order of their first edge: the values whose edges a drawing over budget shares (one
    edge to a mark, :data:`MAX_FANOUT`)."""
    edges = p.edges
    if len(edges) <= fanout:
        return ()
    return tuple(dict.fromkeys(a.key for a, _ in edges if p.out_degree(a) > fanout))


def drawn_size(p: Projection, shared: Sequence[Key] = ()) -> tuple[int, int]:
    """``(nodes, edges)`` a renderer draws from ``p``: boxes and groups, and edges (those a
    folded loop carries from one iteration to another too); with the edges of the nodes
    ``shared`` (:func:`wide_sources`) drawn as one edge to a mark each."""
    count = 0
    todo = list(p.children(p.graph.context))
    while todo:
        node = todo.pop()
        count += 1
        if isinstance(node, LayerNode) and p.is_expanded(node):
            todo.extend(p.children(node))
    edges = len(p.edges) + len(p.carried_edges)
    if shared:
        gone = set(shared)
        edges -= sum(1 for a, _ in p.edges if a.key in gone)
    return count + len(shared), edges + len(shared)


def _key_pairs(p: Projection, shared: Sequence[Key]) -> list[tuple[Hashable, Hashable]]:
    """The drawn edges of ``p`` as key pairs, those of the nodes ``shared`` replaced by one
    edge to a mark each (keyed ``("fanout", key)``, drawn outside every cluster)."""
    if not shared:
        return [(a.key, b.key) for a, b in p.edges]
    gone = set(shared)
    pairs: list[tuple[Hashable, Hashable]] = [(a.key, b.key) for a, b in p.edges if a.key not in gone]
    pairs.extend((k, ("fanout", k)) for k in shared)
    return pairs


def edge_spans(p: Projection, shared: Sequence[Key] = ()) -> int:
    """How many ranks the edges drawn from ``p`` pass without stopping, in all: the virtual
    nodes ``dot`` adds to route them, which drive its layout time as boxes do.

    Ranks are estimated as ``dot`` would rank the drawn graph: each node one below its lowest
    predecessor (longest path), a node without predecessors just above its first consumer.
    Linear in nodes and edges; edges on a cycle (boxes of modules that feed each other) count
    nothing.  ``shared``: as in :func:`drawn_size`.
    """
    return _spans(_key_pairs(p, shared))


def layout_spans(p: Projection, shared: Sequence[Key] = ()) -> int:
    """:func:`edge_spans` of the graph ``dot`` is given: the drawn edges and the invisible
    edges that put each cluster's title on a rank of its own, below whatever feeds the
    cluster (one per edge entering it: an edge from far above into a cluster nested
    ``k`` deep ranks ``k`` more long edges) and above the cluster's members.

    These edges, not the boxes, make a drawing of a few hundred boxes whose values are read
    far below where they are made (a PointNet++: every set abstraction and feature
    propagation reads the point coordinates again) lay out for tens of seconds.
    ``shared``: as in :func:`drawn_size` (a mark is in no cluster: it ranks no title).
    """
    parent: dict[Hashable, Key] = {}
    members: list[tuple[Key, Key, Hashable]] = []  # (cluster, direct child, it or its title)
    todo: list[BaseNode] = [p.graph.context]
    while todo:
        node = todo.pop()
        for child in p.children(node):
            parent[child.key] = node.key
            opened = isinstance(child, LayerNode) and p.is_expanded(child)
            if opened:
                todo.append(child)
            members.append((node.key, child.key, ("title", child.key) if opened else child.key))
    root = p.graph.context.key
    pairs: list[tuple[Hashable, Hashable]] = []
    fed_inside: set[tuple[Key, Hashable]] = set()  # (cluster, direct child) fed from inside it
    for a, b in _key_pairs(p, shared):
        pairs.append((a, b))
        outer = set()
        k: Hashable = a
        while k in parent:
            k = parent[k]
            outer.add(k)
        inner = b
        while inner in parent:
            k = parent[inner]
            if k in outer:
                fed_inside.add((k, inner))
                break
            if k != root:
                pairs.append((a, ("title", k)))
            inner = k
    for cluster, key, head in members:  # the title above the members nothing inside feeds
        if cluster != root and (cluster, key) not in fed_inside:
            pairs.append((("title", cluster), head))
    return _spans(pairs)


def _spans(pairs: Sequence[tuple[Hashable, Hashable]]) -> int:
    """The ranks the edges ``pairs`` pass without stopping (see :func:`edge_spans`)."""
    succ: dict[Hashable, list[Hashable]] = {}  # each node's successors, in edge order
    indegree: dict[Hashable, int] = {}
    for a, b in pairs:
        succ.setdefault(a, []).append(b)
        indegree[b] = indegree.get(b, 0) + 1
        indegree.setdefault(a, 0)
    rank = dict.fromkeys(indegree, 0)
    sources = [k for k, n in indegree.items() if n == 0]
    order = list(sources)
    for k in order:  # Kahn's order: grows while it is walked
        r = rank[k] + 1
        for b in succ.get(k, ()):
            if rank[b] < r:
                rank[b] = r
            indegree[b] -= 1
            if indegree[b] == 0:
                order.append(b)
    ranked = set(order)
    for k in sources:  # pulled down to just above its first consumer
        below = [rank[b] for b in succ.get(k, ()) if b in ranked]
        if below:
            rank[k] = min(below) - 1
    return sum(rank[b] - rank[a] - 1 for a, b in pairs
               if a in ranked and b in ranked and rank[b] - rank[a] > 1)


def graph_depth(graph: Graph) -> int:
    """One more than the deepest module call's depth: the ``render_depth`` that opens all."""
    return max((n.depth + 1 for n in graph.layers()), default=0)


class Fit:
    """What :func:`fit` chose, and what it left out.

    Attributes:
        projection: the projection drawn.
        depth: the ``render_depth`` drawn.
        min_run: the shortest folded run drawn (0: none).
        size: ``(nodes, edges)`` drawn.
        budget: ``(nodes, edges)`` allowed, or ``None``.
        requested: the ``render_depth`` asked for (``None``: everything).
        full: ``(nodes, edges)`` of the drawing asked for, when it did not fit.
        spans: the ranks the drawn edges pass (the larger of :func:`edge_spans` and
            :func:`layout_spans`).
        full_spans: the same of the drawing asked for, when it did not fit.
        shared: the keys of the nodes whose edges are drawn as one edge to a mark each
            (:func:`wide_sources`; empty: every edge drawn).
    """

    def __init__(self, projection: Projection, depth: int, min_run: int, size: tuple[int, int],
                 budget: Optional[tuple[int, int]], requested: Optional[int],
                 full: Optional[tuple[int, int]], deepest: Optional[int], spans: int = 0,
                 full_spans: Optional[int] = None, shared: tuple[Key, ...] = ()) -> None:
        self.projection = projection
        self.depth = depth
        self.min_run = min_run
        self.size = size
        self.budget = budget
        self.requested = requested
        self.full = full
        self._deepest = deepest
        self.spans = spans
        self.full_spans = full_spans
        self.shared = shared

    @property
    def deepest(self) -> int:
        """The ``render_depth`` that opens every module (:func:`graph_depth`, found when first
        asked: a drawing made as asked never needs it)."""
        if self._deepest is None:
            self._deepest = graph_depth(self.projection.graph)
        return self._deepest

    @property
    def reduced(self) -> bool:
        """Whether less is drawn than was asked for."""
        return self.full is not None

    @property
    def over(self) -> bool:
        """Whether the drawing exceeds the budget (possible only when drawn as asked)."""
        return self.budget is not None and not _fits(self.size, self.spans, self.budget)

    def _asked_text(self, size: tuple[int, int], spans: Optional[int]) -> str:
        text = f"{size[0]:,} nodes, {size[1]:,} edges"
        if self.budget is not None and spans is not None and spans > _max_spans(self.budget):
            text += f" passing {spans:,} ranks (at most {_max_spans(self.budget):,})"
        return text

    def note(self) -> str:
        """What was collapsed and how to draw everything, in words (``""`` if nothing was)."""
        if self.full is None or self.budget is None:
            return ""
        what = []
        if self.shared:
            what.append(f"the edges of {', '.join(map(self._name, self.shared))} to the boxes each feeds "
                        "drawn as one (→ N)")
        asked = int(self.requested) if self.requested is not None and self.requested < self.deepest else None
        if self.depth < min(self.requested if self.requested is not None else ALL_DEPTHS, self.deepest):
            what.append(f"modules deeper than render_depth={self.depth} collapsed")
        if self.min_run == 2:
            what.append("every repeated run of 2 or more folded")
        all_depth = asked if asked is not None else self.deepest
        everything = f"render_depth={all_depth} or max_nodes=None" if len(what) > bool(self.shared) else (
            "max_nodes=None")
        kept = (f"to keep the drawing to {self.size[0]:,} nodes and {self.size[1]:,} edges" if not self.over
                else f"and still over the budget at {self._asked_text(self.size, self.spans)}")
        return (f"{' and '.join(what) or 'folded'} {kept} (budget {self.budget[0]:,} / {self.budget[1]:,}; "
                f"asked for: {self._asked_text(self.full, self.full_spans)}). Draw everything with "
                f"{everything} (the layout may take minutes).")

    def _name(self, key: Key) -> str:
        """How the note names the node ``key``: a module by its dotted path, anything else by
        its name and the module it is in."""
        nodes = self.projection.graph.nodes
        node = dict.get(nodes, key)
        if node is None:
            return str(key)
        if isinstance(node, LayerNode):
            return node.call_title(dotted=True)
        scope = dict.get(nodes, node.parent_key)
        if isinstance(scope, LayerNode) and scope.path:
            return f"{node.name} in {scope.call_title(dotted=True)}"
        return node.name

    def message(self) -> str:
        """The warning before a layout that may take long (a drawing over budget, as asked)."""
        if self.budget is None:
            return ""
        return (f"drawing {self._asked_text(self.size, self.spans)}, over the budget of "
                f"{self.budget[0]:,} / {self.budget[1]:,}: Graphviz may take minutes to lay it out")


def _max_spans(budget: tuple[int, int]) -> int:
    """The ranks the edges of a drawing within ``budget`` may pass (:data:`MAX_SPANS`, scaled)."""
    return budget[0] * MAX_SPANS // MAX_NODES


def _fits(size: tuple[int, int], spans: int, budget: tuple[int, int]) -> bool:
    return size[0] <= budget[0] and size[1] <= budget[1] and spans <= _max_spans(budget)


def _measure(p: Projection, fanout: Optional[int]) -> tuple[tuple[int, int], int, tuple[Key, ...]]:
    """``(nodes, edges)``, spans and the shared sources of the drawing of ``p``, whose fan-out
    edges are shared when ``fanout`` is given (:func:`wide_sources`)."""
    shared = wide_sources(p, fanout) if fanout is not None else ()
    # two estimates of the ranks dot's virtual nodes fill: the larger one counts
    return drawn_size(p, shared), max(edge_spans(p, shared), layout_spans(p, shared)), shared


def fit(graph: Graph, requested: Optional[int], make: Callable[[int, int], Projection], *,
        min_run: int, may_fold: bool, max_nodes: MaxNodes = "auto", fanout: Optional[int] = None) -> Fit:
    """The drawing to make of ``graph``.

    A drawing within the budget is drawn as asked.  Over it, the edges of each node feeding
    more than ``fanout`` drawn nodes are first shared (drawn as one edge to a mark), which
    loses no box and applies to a depth given explicitly too; a default depth is then folded
    (if ``may_fold``) and then collapsed until it fits.

    Args:
        graph: the graph.
        requested: the ``render_depth`` asked for: a :class:`DefaultDepth` may be lowered;
            an int or ``None`` (everything) is drawn as asked (its edges shared if over).
        make: ``make(depth, min_run)`` -> the projection at that depth and folding.
        min_run: the folding asked for (the shortest run folded, 0: none).
        may_fold: whether the budget may fold runs of 2 or more (folding was left to ``"auto"``).
        max_nodes: the budget (see :func:`budget_of`).
        fanout: share the edges of a node feeding more drawn nodes than this when the drawing
            is over budget (:data:`MAX_FANOUT` for Graphviz); ``None``: never.
    """
    budget = budget_of(max_nodes)
    asked = ALL_DEPTHS if requested is None else int(requested)
    first = make(asked, min_run)
    size, spans, _ = _measure(first, None)
    if budget is None or _fits(size, spans, budget):
        # drawn as asked; without a budget, measured against the default one (the graph's
        # depth is found only if the fit is asked for it: a pass over every node)
        return Fit(first, asked, min_run, size, budget or (MAX_NODES, MAX_EDGES), requested, None, None,
                   spans)
    deepest = graph_depth(graph)
    got_size, got_spans, shared = _measure(first, fanout)
    if not isinstance(requested, DefaultDepth) or (shared and _fits(got_size, got_spans, budget)):
        # drawn as asked, its fan-out edges shared; still over the budget, it says so
        return Fit(first, asked, min_run, got_size, budget, requested, size if shared else None, deepest,
                   got_spans, spans if shared else None, shared)
    runs = [min_run]
    if may_fold and min_run != 2:
        runs.append(2)
        folded = make(asked, 2)
        folded_size, folded_spans, shared = _measure(folded, fanout)
        if _fits(folded_size, folded_spans, budget):
            return Fit(folded, asked, 2, folded_size, budget, requested, size, deepest, folded_spans, spans,
                       shared)
    run = runs[-1]
    lo, hi = -1, min(asked, deepest)  # depth lo fits (-1: none known), depth hi does not
    best: Optional[tuple[Projection, int, tuple[int, int], int, tuple[Key, ...]]] = None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = make(mid, run)
        got, got_spans, shared = _measure(p, fanout)
        if _fits(got, got_spans, budget):
            best, lo = (p, mid, got, got_spans, shared), mid
        else:
            hi = mid
    if best is None:
        p = make(0, run)
        best = (p, 0, *_measure(p, fanout))
    return Fit(best[0], best[1], run, best[2], budget, requested, size, deepest, best[3], spans, best[4])
