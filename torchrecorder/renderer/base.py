"""The renderer contract: walk a finished recording, at a chosen depth, and draw it.

A renderer never runs a model, and reads only node metadata (never ``node.fn``),
so a :class:`~torchrecorder.recorder.Recorder` loaded from JSON draws exactly
like the recording it was saved from.  :meth:`BaseRenderer.render` does the
walk; a subclass says how to draw by overriding:

================================  ==================================================
``new_graph()``                   create the object being drawn into
``render_node(g, node)``          draw one node; for an expanded layer call
                                  ``render_recursive_node`` instead
``render_recursive_node(g, n)``   draw an expanded layer as a group holding
                                  ``self.children(n)``, each through ``render_node``
``render_edge(g, fnode, tnode)``  draw one edge between two drawn nodes
``finish(g)``                     turn ``g`` into the result (default: ``g`` itself)
================================  ==================================================

and may use the helpers :meth:`~BaseRenderer.is_expanded`,
:meth:`~BaseRenderer.children`, :meth:`~BaseRenderer.repeats` (the run of
identical blocks a drawn layer stands for, see ``fold_repeats``),
:meth:`~BaseRenderer.drawn_edges` and :meth:`~BaseRenderer.edge_tensor` (the
tensor an edge carries when ``tensor_nodes=False``).

Example: a renderer that lists what would be drawn, as text.

>>> import torch, torchrecorder
>>> class Outline(BaseRenderer):
...     def new_graph(self): return []
...     def render_node(self, g, node):
...         if self.is_expanded(node):
...             self.render_recursive_node(g, node)
...         else:
...             g.append("  " * node.depth + node.name)
...     def render_recursive_node(self, g, node):
...         g.append("  " * node.depth + node.name + ":")
...         for child in self.children(node):
...             self.render_node(g, child)
...     def render_edge(self, g, fnode, tnode): pass
...     def finish(self, g): return "\\n".join(g)
>>> net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
>>> print(Outline(torchrecorder.record(net, "mlp", (1, 2)), render_depth=1).render())
mlp:
  0
  1×2
  1
input
output
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional, Union

from ..nodes import BaseNode, ContextNode, Key, LayerNode, OpNode, ParamNode, TensorNode
from ..recorder import Recorder
from ._fold import FoldPlan

__all__ = ["AUTO_FOLD_MIN", "BaseRenderer", "FoldRepeats"]

#: ``fold_repeats="auto"`` folds runs of at least this many identical blocks.
AUTO_FOLD_MIN = 8

FoldRepeats = Union[bool, int, str, None]


def _fold_min(fold_repeats: FoldRepeats) -> int:
    """The shortest run that ``fold_repeats`` folds (0: none)."""
    if fold_repeats is None or fold_repeats is False:
        return 0
    if fold_repeats is True:
        return 2
    if fold_repeats == "auto":
        return AUTO_FOLD_MIN
    if isinstance(fold_repeats, int) and fold_repeats >= 0:
        return fold_repeats if fold_repeats >= 2 else 0
    raise ValueError(f"fold_repeats must be 'auto', a bool or an int >= 0, got {fold_repeats!r}")


class BaseRenderer:
    """Base class of all renderers.

    Args:
        rec: the recording to draw.
        render_depth: modules at depth ``< render_depth`` are drawn expanded,
            showing what ran inside them; modules at ``render_depth`` are drawn
            as single nodes; everything deeper is folded into its nearest drawn
            ancestor, and edges are re-attached there.
        fold_repeats: draw a run of structurally identical consecutive blocks
            (same types, shapes and inner structure, whatever their names) as
            its first block, marked with the repeat count.  ``"auto"`` (the
            default) folds runs of at least :data:`AUTO_FOLD_MIN` blocks,
            ``True`` runs of 2 or more, an int ``n`` runs of ``n`` or more,
            ``False`` nothing.  Edges into any block of a run go to the drawn
            block, edges out of the last block leave from it.
        tensor_nodes: draw the tensors passed between layers as nodes (the
            default); with ``False`` they are left out and an edge that went
            through one carries it instead (:meth:`edge_tensor`), so that a
            renderer can write its shape on the edge.  The network's inputs and
            outputs stay nodes.
    """

    def __init__(self, rec: Recorder, render_depth: int = 256, *,
                 fold_repeats: FoldRepeats = "auto", tensor_nodes: bool = True) -> None:
        if not isinstance(rec, Recorder):
            raise TypeError(f"expected a Recorder to render, got {type(rec).__name__}")
        if isinstance(render_depth, bool) or not isinstance(render_depth, int) or render_depth < 0:
            raise ValueError(f"render_depth must be an int >= 0, got {render_depth!r}")
        self.rec = rec
        self.render_depth = render_depth
        self.fold_min = _fold_min(fold_repeats)
        self.tensor_nodes = bool(tensor_nodes)
        self._via: dict[tuple[Key, Key], TensorNode] = {}
        self._rep_memo: dict[Key, Optional[Key]] = {}
        self._ids: dict[Key, str] = {}
        self._out_degree: dict[Key, int] = {}
        self._used_ids: set[str] = set()
        self._plan: Optional[FoldPlan] = None
        self._expanded: dict[Key, bool] = {}
        self._expanded_fn: Optional[Callable[[BaseNode], bool]] = None
        self._expanded_depth = render_depth

    # ------------------------------------------------------------- contract
    def new_graph(self) -> Any:
        """Create the object that the nodes and edges are drawn into."""
        raise NotImplementedError(f"{type(self).__name__} must implement new_graph()")

    def render_node(self, g: Any, node: BaseNode) -> None:
        """Draw ``node`` into ``g`` (expanded layers go to :meth:`render_recursive_node`)."""
        raise NotImplementedError(f"{type(self).__name__} must implement render_node()")

    def render_recursive_node(self, g: Any, node: LayerNode) -> None:
        """Draw the expanded layer ``node`` as a group holding its children."""
        raise NotImplementedError(f"{type(self).__name__} must implement render_recursive_node()")

    def render_edge(self, g: Any, fnode: BaseNode, tnode: BaseNode) -> None:
        """Draw an edge from ``fnode`` to ``tnode``."""
        raise NotImplementedError(f"{type(self).__name__} must implement render_edge()")

    def finish(self, g: Any) -> Any:
        """Turn the drawn ``g`` into the value :meth:`render` returns."""
        return g

    # --------------------------------------------------------------- walk
    def render(self) -> Any:
        """Draw the whole recording: top-level nodes, then every drawn edge."""
        g = self.new_graph()
        for child in self.children(self.rec.context):
            self.render_node(g, child)
        edges = self.drawn_edges()
        self._count_out_degrees(edges)
        for fnode, tnode in edges:
            self.render_edge(g, fnode, tnode)
        return self.finish(g)

    def _count_out_degrees(self, edges: list[tuple[BaseNode, BaseNode]]) -> dict[Key, int]:
        """Count the drawn edges leaving each node, for :meth:`out_degree`."""
        degree: dict[Key, int] = {}
        get = degree.get
        for fnode, _ in edges:
            key = fnode.key
            degree[key] = get(key, 0) + 1
        self._out_degree = degree
        return degree

    def out_degree(self, node: BaseNode) -> int:
        """How many drawn edges leave ``node`` (known once :meth:`render` draws edges)."""
        return self._out_degree.get(node.key, 0)

    def is_expanded(self, node: BaseNode) -> bool:
        """Whether ``node`` is a layer drawn as a group of its children.

        Layers above ``render_depth`` are expanded, except a module that calls
        no other module and ran at most one operation (an ``nn.Linear``): its
        box already says all that a group would.  (The answer is remembered
        per node for the current ``render_depth``.)
        """
        test = self._expanded_fn
        if test is None or self._expanded_depth != self.render_depth:
            test = self._base_expanded()
        return test(node)

    def _is_expanded(self, node: BaseNode) -> bool:
        """:meth:`is_expanded`, worked out."""
        if not isinstance(node, LayerNode) or node.depth >= self.render_depth or not node.subnets:
            return False
        nodes = self.rec.nodes
        ops = 0
        for key in node.subnets:
            child = nodes.get(key)
            if isinstance(child, LayerNode):
                return True
            if isinstance(child, OpNode):
                ops += 1
        return ops > 1

    def _expanded_test(self) -> Callable[[BaseNode], bool]:
        """:meth:`is_expanded`: a subclass's own, or the remembered base one."""
        if type(self).is_expanded is not BaseRenderer.is_expanded or "is_expanded" in vars(self):
            return self.is_expanded
        return self._base_expanded()

    def _base_expanded(self) -> Callable[[BaseNode], bool]:
        """The base :meth:`is_expanded`, remembered per node for the current ``render_depth``."""
        if self._expanded_fn is not None and self._expanded_depth == self.render_depth:
            return self._expanded_fn
        self._expanded_depth = self.render_depth
        memo = self._expanded = {}
        test = self._is_expanded

        def expanded(node: BaseNode) -> bool:
            got = memo.get(node.key)
            if got is None:
                got = memo[node.key] = test(node)
            return got

        self._expanded_fn = expanded
        return expanded

    def children(self, node: BaseNode) -> list[BaseNode]:
        """The nodes drawn directly inside the expanded layer ``node``, in order.

        Of a folded run only the first block is listed (see :meth:`repeats`).
        """
        if not isinstance(node, LayerNode):
            return []
        nodes = self.rec.nodes
        hidden = self.fold_plan.hidden
        kids = [nodes[k] for k in node.subnets if k in nodes and k not in hidden]
        if not self.tensor_nodes:
            kids = [n for n in kids if not _is_passed_tensor(n)]
        return kids

    def unique_id(self, node: BaseNode, make_id: Callable[[Key], str]) -> str:
        """A unique id for ``node`` in the output: ``make_id(node.key)``, suffixed ``_1``,
        ``_2``, ... where two keys give the same text; the same id every time it is asked."""
        got = self._ids.get(node.key)
        if got is None:
            base = got = make_id(node.key)
            n = 0
            while got in self._used_ids:
                n += 1
                got = f"{base}_{n}"
            self._used_ids.add(got)
            self._ids[node.key] = got
        return got

    @property
    def fold_plan(self) -> FoldPlan:
        """What ``fold_repeats`` folds: computed once, on first use."""
        if self._plan is None:
            self._plan = FoldPlan.build(self.rec, self.fold_min, self._expanded_test())
        return self._plan

    def repeats(self, node: BaseNode) -> list[LayerNode]:
        """The blocks that the drawn ``node`` stands for: a folded run, or just ``[node]``.

        A renderer marks a node with ``len(self.repeats(node)) > 1`` as repeated.
        """
        run = self.fold_plan.runs.get(node.key) if isinstance(node, LayerNode) else None
        if run is not None:
            return run
        return [node] if isinstance(node, LayerNode) else []

    def drawn_key(self, key: Key) -> Optional[Key]:
        """The key of the drawn node that stands for ``key`` (itself or an ancestor).

        A hidden parameter stands for nothing (``None``): edges out of it are
        not data flowing between layers.  A node inside a folded block stands
        for its counterpart in the run's first block; a tensor passed between
        folded blocks stands for nothing.
        """
        alias = self.fold_plan.alias
        while key in alias:
            key = alias[key]
            if key is None:
                return None
        node = self.rec.nodes[key]
        rep = self._inner_rep(node.parent) if key is not None else None
        if rep is None:
            return key
        if isinstance(node, ParamNode):
            return None
        return rep

    def _inner_rep(self, key: Key) -> Optional[Key]:
        """``None`` if the children of layer ``key`` are drawn, else the key drawn in their place."""
        memo = self._rep_memo
        nodes = self.rec.nodes
        chain = []
        k = key
        while k is not None and k not in memo:
            chain.append(k)
            k = nodes[k].parent
        result = memo[k] if k is not None else None
        if chain:
            expanded = self._expanded_test()
            for k in reversed(chain):
                if result is None:
                    result = None if expanded(nodes[k]) else k
                memo[k] = result
        return result

    def drawn_edges(self) -> list[tuple[BaseNode, BaseNode]]:
        """Edges between drawn nodes: re-attached, deduplicated, without self-loops.

        With ``tensor_nodes=False`` an edge through a tensor left out joins the
        tensor's producer to each of its consumers; :meth:`edge_tensor` tells
        which tensor it carries.
        """
        nodes = self.rec.nodes
        return [(nodes[a], nodes[b]) for a, b in self._drawn_key_pairs({})]

    def _drawn_key_pairs(self, known: dict[Key, Optional[Key]]) -> dict[tuple[Key, Key], None]:
        """The keys of :meth:`drawn_edges`, in order.

        ``known`` maps keys already known to be drawn to themselves (a walk of the
        drawn nodes fills it); the other keys are looked up with :meth:`drawn_key`.
        """
        # each key's drawn key, found once; ``None`` also for the context (no edges to it)
        cache = known
        drawn = self._drawn_key_test(cache)
        get = cache.get
        missing = _MISSING
        alias = self.fold_plan.alias
        if alias and known and self._own_drawn_key():
            # a node of a later block of a run stands for its counterpart in the first block:
            # where that one is known, so is it (drawn_key's first step, for all of them at once)
            for k, v in alias.items():
                if v is None:
                    cache[k] = None
                elif v not in alias:
                    got = get(v, missing)
                    if got is not missing:
                        cache[k] = got
        seen: dict[tuple[Key, Key], None] = {}
        for a, b in self.rec.edges:
            da = get(a, missing)
            if da is missing:
                da = cache[a] = drawn(a)
            if da is None:
                continue
            db = get(b, missing)
            if db is missing:
                db = cache[b] = drawn(b)
            if db is None or da == db:
                continue
            seen[(da, db)] = None
        if not self.tensor_nodes:
            seen = self._through_tensors(list(seen))
        return seen

    def _own_drawn_key(self) -> bool:
        """Whether :meth:`drawn_key` is this class's own (no subclass changes it)."""
        return (type(self).drawn_key is BaseRenderer.drawn_key
                and type(self)._inner_rep is BaseRenderer._inner_rep
                and "drawn_key" not in vars(self))

    def _drawn_key_test(self, known: Optional[dict[Key, Optional[Key]]] = None,
                        ) -> Callable[[Key], Optional[Key]]:
        """:meth:`drawn_key`, but ``None`` for the context (edges to it are not drawn).

        Unless a subclass overrides :meth:`drawn_key`, the same walk with less overhead,
        which takes the drawn key of a node standing for another from ``known`` where
        that one is known.
        """
        nodes = self.rec.nodes
        if not self._own_drawn_key():
            return lambda key: _no_context(nodes, self.drawn_key(key))
        alias = self.fold_plan.alias
        memo = self._rep_memo
        inner_rep = self._inner_rep
        missing = _MISSING

        cache: dict[Key, Optional[Key]] = known if known is not None else {}

        def drawn(key: Key) -> Optional[Key]:
            if alias and key in alias:
                while key in alias:
                    key = alias[key]
                    if key is None:
                        return None
                got = cache.get(key, missing)
                if got is not missing:
                    return got
            if key is None:
                return None
            node = nodes[key]
            rep = memo.get(node.parent, missing)
            if rep is missing:
                rep = inner_rep(node.parent)
            if rep is None:
                return None if isinstance(node, ContextNode) else key
            if isinstance(node, ParamNode):
                return None
            return _no_context(nodes, rep)

        return drawn

    def edge_tensor(self, fnode: BaseNode, tnode: BaseNode) -> Optional[TensorNode]:
        """The tensor left out (``tensor_nodes=False``) that the drawn edge carries, if any."""
        return self._via.get((fnode.key, tnode.key))

    def _through_tensors(self, pairs: list[tuple[Key, Key]]) -> dict[tuple[Key, Key], None]:
        """Replace each passed tensor ``t`` in ``pairs`` by edges from its producers to its consumers."""
        nodes = self.rec.nodes
        succ: dict[Key, list[Key]] = {}
        for a, b in pairs:
            succ.setdefault(a, []).append(b)

        def consumers(t: Key) -> list[Key]:
            """Drawn nodes fed by tensor ``t``, through chains of left-out tensors."""
            out: list[Key] = []
            todo, seen = [t], {t}
            while todo:
                for b in succ.get(todo.pop(0), ()):
                    if _is_passed_tensor(nodes[b]):
                        if b not in seen:
                            seen.add(b)
                            todo.append(b)
                    else:
                        out.append(b)
            return out

        result: dict[tuple[Key, Key], None] = {}
        self._via = {}
        for a, b in pairs:
            if _is_passed_tensor(nodes[a]):
                continue
            if not _is_passed_tensor(nodes[b]):
                result[(a, b)] = None
                continue
            tensor = nodes[b]
            assert isinstance(tensor, TensorNode)
            for c in consumers(b):
                if c != a:
                    result[(a, c)] = None
                    self._via.setdefault((a, c), tensor)
        return result


_MISSING: Any = object()


def _no_context(nodes: dict[Key, BaseNode], key: Optional[Key]) -> Optional[Key]:
    """``key``, or ``None`` where it names the context (edges to it are not drawn)."""
    return None if key is None or isinstance(nodes[key], ContextNode) else key


def _is_passed_tensor(node: BaseNode) -> bool:
    """A tensor between layers: not a parameter, not one of the network's inputs or outputs."""
    return isinstance(node, TensorNode) and not isinstance(node, ParamNode) and not node.role
