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

and may override the rule :meth:`~BaseRenderer.is_expanded` (which layers are
drawn as groups; everything else follows it) and use the helpers
:meth:`~BaseRenderer.children`, :meth:`~BaseRenderer.repeats` (the run of
identical blocks a drawn layer stands for, see ``fold_repeats``),
:meth:`~BaseRenderer.drawn_edges`, :meth:`~BaseRenderer.edge_tensor` (the
tensor an edge carries when ``tensor_nodes=False``), :meth:`~BaseRenderer.edge_ops`
(the data-movement operations left out on it),
:meth:`~BaseRenderer.out_degree` and :meth:`~BaseRenderer.unique_id`.  They
read :attr:`~BaseRenderer.projection`, which is computed once per drawing and
shared by all of them; :meth:`render` draws only through the hooks above, so
whatever a subclass overrides shapes the output.  Calling a renderer on a
destination, ``renderer(dest)`` (torchrecorder 1.0.3's way), makes the same
walk into ``dest`` and returns it: ``new_graph`` is needed by :meth:`render`
only.  For code written for 1.0.3, :attr:`~BaseRenderer.processed` lists the
drawn nodes with the nodes their edges go to.

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

import contextlib
import functools
import operator
import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Optional

from .._progress import bar, stage
from .._stack import StackRoom
from ..errors import LargeDrawingWarning, not_a_recording
from ..graph import Graph
from ..nodes import BaseNode, Key, LayerNode, OpNode, TensorNode
from ..projection import (
    BlockStructures,
    FoldPlan,
    FoldRepeats,
    LoopNode,
    Projection,
    default_expanded,
    fold_min,
)
from ..projection.budget import ALL_DEPTHS, DefaultDepth, Fit, MaxNodes, budget_of, default_depth, fit
from ..seed import named_as_seed
from ._seedwalk import seed_projection, seed_table

_depth = operator.attrgetter("depth")

# nesting below which a drawing needs no more stack than Python's default limit allows
_DEEP = 64

#: the ``render_depth`` a renderer draws at when none is given: every module open, within the
#: drawing budget (see ``max_nodes``)
DEFAULT_RENDER_DEPTH: DefaultDepth = default_depth(256)

__all__ = ["ALL_DEPTHS", "DEFAULT_RENDER_DEPTH", "BaseRenderer", "follows_projection"]


class BaseRenderer:
    """Base class of all renderers.

    Args:
        rec: the graph to draw (a :class:`~torchrecorder.recorder.Recorder`,
            or any :class:`~torchrecorder.graph.Graph`, such as one loaded
            from JSON).
        render_depth: modules at depth ``< render_depth`` are drawn expanded,
            showing what ran inside them; modules at ``render_depth`` are drawn
            as single nodes; everything deeper is folded into its nearest drawn
            ancestor, and edges are re-attached there.  ``None`` draws every
            depth (all modules expanded).
        fold_repeats: draw a run of structurally identical consecutive blocks
            (same types, shapes and inner structure, whatever their names) as
            its first block, marked with the repeat count.  ``"auto"`` (the
            default) folds runs of at least
            :data:`~torchrecorder.projection.AUTO_FOLD_MIN` blocks, ``True``
            runs of 2 or more, an int ``n`` runs of ``n`` or more, ``False``
            nothing.  Edges into any block of a run go to the drawn block,
            edges out of the last block leave from it.
        tensor_nodes: draw the tensors passed between layers as nodes (the
            default); with ``False`` they are left out and an edge that went
            through one carries it instead (:meth:`edge_tensor`), so that a
            renderer can write its shape on the edge.  The network's inputs and
            outputs stay nodes.
        expand_leaves: let a leaf module (one that calls no other module)
            above ``render_depth`` open into the operations it ran; by default
            a leaf is one box at every depth.
        all_ops: draw every operation.  By default operations that only move
            data (``view``, ``transpose``, ``getitem``, casts: see
            :data:`~torchrecorder.projection.DATA_MOVEMENT_OPS`) are left out
            and listed by :meth:`edge_ops` on the edge they sat on, and
            operations that read no drawn input (``arange``, a buffer's
            ``expand``) are left out with their edges.
        max_nodes: the drawing budget.  When ``render_depth`` is left to its
            default and the drawing would exceed :data:`~torchrecorder.projection.budget.MAX_NODES`
            nodes or :data:`~torchrecorder.projection.budget.MAX_EDGES` edges
            (``"auto"``) or ``max_nodes`` nodes (an int), repeated runs of 2
            or more are folded (if ``fold_repeats`` is ``"auto"``) and, if that
            is not enough, the deepest depth that fits is drawn; a note in
            the drawing and a :class:`~torchrecorder.errors.LargeDrawingWarning`
            say what was collapsed (:attr:`budget`).  ``None``, or a
            ``render_depth`` given explicitly (``None``: every module open),
            draws everything as asked, with a warning first if it is over
            the budget.
    """

    #: whether ``fold_repeats`` folds Python loops (runs of identical iterations of operations,
    #: drawn as a :class:`~torchrecorder.projection.LoopNode` group) as well as blocks
    fold_loops = True

    def __init__(self, rec: Graph, render_depth: Optional[int] = DEFAULT_RENDER_DEPTH, *,
                 fold_repeats: FoldRepeats = "auto", tensor_nodes: bool = True,
                 expand_leaves: bool = False, all_ops: bool = False, max_nodes: MaxNodes = "auto") -> None:
        if not isinstance(rec, Graph):
            raise not_a_recording(rec, "render")
        if render_depth is not None and (isinstance(render_depth, bool) or not isinstance(render_depth, int)
                                         or render_depth < 0):
            raise ValueError(f"render_depth must be an int >= 0 or None (every module open), "
                             f"got {render_depth!r}")
        budget_of(max_nodes)  # checks it
        self.rec = rec
        self._projection: Optional[Projection] = None
        self._requested: Optional[int] = render_depth
        self._render_depth: int = ALL_DEPTHS if render_depth is None else render_depth
        self._max_nodes = max_nodes
        self._may_fold = isinstance(fold_repeats, str) and fold_repeats == "auto"
        #: what the drawing budget chose (see ``max_nodes``), once the projection is made
        self.budget: Optional[Fit] = None
        self._fold_min = fold_min(fold_repeats)
        self._tensor_nodes = bool(tensor_nodes)
        self._expand_leaves = bool(expand_leaves)
        self._all_ops = bool(all_ops)
        self._ids: dict[Key, str] = {}
        self._used_ids: set[str] = set()
        # layers a subclass's own render_node drew as groups although the rule keeps them
        # closed, and as single nodes although it opens them (see open() and close())
        self._opened: set[Key] = set()
        self._closed: set[Key] = set()
        self._recursed: set[Key] = set()  # layers given to render_recursive_node in this walk
        self._processed: Optional[OrderedDict[BaseNode, list[BaseNode]]] = None
        #: draw the 1.0.3 view of the recording (see :attr:`seed_view`)
        self._seed_view = False
        self._seed_walk = False  # a 1.0.3 walk (``renderer(dest)``) is under way

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # a subclass's render_node may decide by itself which layers open: what it does wins
        # over is_expanded (see open() and close())
        for name, wrap in (("render_recursive_node", _opening), ("render_node", _closing)):
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, "_follows_" + name, False):
                setattr(cls, name, wrap(method))

    # ------------------------------------------------------------- contract
    def new_graph(self) -> Any:
        """Create the object that the nodes and edges are drawn into (needed by :meth:`render`
        only: calling the renderer on a destination, ``renderer(dest)``, draws into ``dest``)."""
        raise NotImplementedError(
            f"{type(self).__name__} has no new_graph(): call the renderer on a destination "
            f"({type(self).__name__}(rec)(dest) draws into dest and returns it), or implement "
            "new_graph() to make one for render()")

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
        """Draw the whole graph into :meth:`new_graph` and return :meth:`finish` of it: the
        context's children (each through :meth:`render_node`), then every drawn edge (through
        :meth:`render_edge`)."""
        g = self.new_graph()
        with named_as_seed(self.rec) if self._seed_view else contextlib.nullcontext():
            self._walk(g)
            return self.finish(g)

    def __call__(self, dest: Any) -> Any:
        """Draw the 1.0.3 view of the graph into ``dest`` and return ``dest`` (the original
        torchrecorder's way to call a renderer: ``GraphvizRenderer(rec, 2)(graphviz.Digraph())``).

        This is a 1.0.3 use, and draws what 1.0.3 drew (see :attr:`seed_view`),
        walked as 1.0.3 walked: :attr:`processed` holds every node of depth
        ``<= render_depth`` with the drawn nodes its edges go to; until it is
        empty, its first node is drawn by :meth:`render_node`, then its edges by
        :meth:`render_edge`, and it is taken out.  A ``render_recursive_node``
        that draws a layer's children takes them out itself
        (``self.processed.pop(child)``, harmless when already out); what it
        leaves is drawn at the top.  :meth:`new_graph` is not needed;
        :meth:`finish` runs on ``dest`` for what it adds.
        """
        self.seed_view = True
        self._seed_walk = True
        room = StackRoom()
        if self.render_depth > _DEEP:
            room.grow(2 * min(self.render_depth, max(map(_depth, self.rec.nodes.values()), default=0)))
        try:
            with named_as_seed(self.rec):  # 1.0.3's names while its code draws
                self._begin(dest)
                self._recursed.clear()
                processed = self._processed = seed_table(self)
                while processed:
                    node = next(iter(processed))
                    targets = processed[node]
                    self.render_node(dest, node)
                    for target in targets:
                        self.render_edge(dest, node, target)
                    processed.pop(node, None)
                self._end_seed_walk(dest)
                self.finish(dest)
        finally:
            self._seed_walk = False
            room.release()
        return dest

    def _end_seed_walk(self, g: Any) -> None:
        """Called when a 1.0.3 walk has drawn everything, before :meth:`finish` (a renderer
        resolves what it left pending)."""

    @property
    def seed_view(self) -> bool:
        """Whether this renderer draws the 1.0.3 view of the recording: every node of depth
        ``<= render_depth`` (operations, parameters and the tensors between layers too), every
        layer above ``render_depth`` a group, nothing folded or left out, edges re-attached to
        the nearest drawn node.  On for ``renderer(dest)`` and for a 1.0.3 styler (see
        :func:`~torchrecorder.renderer.styler.is_seed_styler`); set it to choose."""
        return self._seed_view

    @seed_view.setter
    def seed_view(self, value: bool) -> None:
        if bool(value) != self._seed_view:
            self._seed_view = bool(value)
            self._projection = None
            self._processed = None

    def _walk(self, g: Any) -> None:
        """The one drawing pass: every drawn node, then every drawn edge whose source is still
        in :attr:`processed` (when a subclass has read it and drawn some edges itself)."""
        room = StackRoom()
        levels = self.render_depth
        if levels > _DEEP:  # and the nodes as deep?
            levels = min(levels, max(map(_depth, self.rec.nodes.values()), default=0))
        if levels > _DEEP:  # render_node -> render_recursive_node: two frames per open level
            room.grow(2 * levels)
        try:
            self._begin(g)
            self._processed = None
            self._recursed.clear()
            children = self.children(self.rec.context)
            nodes, edges = self.budget.size if self.budget is not None else (0, 0)
            with stage(f"drawing {self.rec.name!r}: {nodes:,} nodes", nodes + edges):
                for child in children:
                    self.render_node(g, child)
            todo = self._processed
            drawn = self.drawn_edges()
            for fnode, tnode in bar(drawn, len(drawn), "edges", size=nodes + edges):
                if todo is None or fnode in todo:
                    self.render_edge(g, fnode, tnode)
            if todo is not None:
                todo.clear()
        finally:
            room.release()

    def _begin(self, g: Any) -> None:
        """Called at the start of every walk, before any hook (a renderer resets its state)."""

    # ------------------------------------------------------------ the rule
    def is_expanded(self, node: BaseNode) -> bool:
        """Whether ``node`` is a layer drawn as a group of its children.

        The default: layers above ``render_depth`` are expanded, except a
        module that calls no other module and ran at most one operation (an
        ``nn.Linear``), whose box already says all that a group would.
        Override it to change which modules open; the projection (children,
        drawn edges, folding) follows whatever it answers.  The group of a
        folded loop (a :class:`~torchrecorder.projection.LoopNode`) is always
        expanded: an override should answer ``True`` for it, as this one does.
        """
        if isinstance(node, LoopNode):
            return True
        if self._seed_view:
            return isinstance(node, LayerNode) and node.depth < self.render_depth
        return default_expanded(node, self.render_depth, self.rec.nodes,
                                expand_leaves=self.expand_leaves)

    # ------------------------------------------------------------- helpers
    @property
    def render_depth(self) -> int:
        """Modules at depth ``< render_depth`` may be drawn expanded."""
        return self._render_depth

    @render_depth.setter
    def render_depth(self, value: int) -> None:
        self._render_depth = value
        self._requested = value
        self._opened.clear()
        self._closed.clear()
        self._projection = None

    @property
    def fold_min(self) -> int:
        """The shortest run of identical blocks drawn once (0: none)."""
        return self._fold_min

    @fold_min.setter
    def fold_min(self, value: int) -> None:
        self._fold_min = value
        self._projection = None

    @property
    def tensor_nodes(self) -> bool:
        """Whether tensors passed between layers are drawn as nodes."""
        return self._tensor_nodes

    @tensor_nodes.setter
    def tensor_nodes(self, value: bool) -> None:
        self._tensor_nodes = bool(value)
        self._projection = None

    @property
    def expand_leaves(self) -> bool:
        """Whether leaf modules above ``render_depth`` open (see the ``expand_leaves`` argument)."""
        return self._expand_leaves

    @expand_leaves.setter
    def expand_leaves(self, value: bool) -> None:
        self._expand_leaves = bool(value)
        self._projection = None

    @property
    def all_ops(self) -> bool:
        """Whether every operation is drawn (see the ``all_ops`` argument)."""
        return self._all_ops

    @all_ops.setter
    def all_ops(self, value: bool) -> None:
        self._all_ops = bool(value)
        self._projection = None

    @property
    def projection(self) -> Projection:
        """What is drawn (see :class:`~torchrecorder.projection.Projection`): computed on first
        use, and again after ``render_depth``, ``fold_min`` or ``tensor_nodes`` change, or a
        layer is opened (:meth:`open`)."""
        p = self._projection
        if p is None:
            p = self._fit().projection
        return p

    def _fit(self) -> Fit:
        """Make the projection within the drawing budget (see ``max_nodes``), and say so."""
        rule: Callable[[BaseNode], bool] = self.is_expanded
        if self._opened or self._closed:
            opened, closed, asked = self._opened, self._closed, self.is_expanded
            rule = lambda node: node.key not in closed and (  # noqa: E731
                node.key in opened or asked(node))

        if self._seed_view:
            seed = seed_projection(self.rec, self._render_depth)
            self._projection, self.budget = seed.projection, None
            return seed
        structures = BlockStructures(self.rec)  # read once for every projection tried

        def make(depth: int, min_run: int) -> Projection:
            self._render_depth = depth  # the rule reads it
            return Projection(self.rec, depth, rule, min_run=min_run, tensor_nodes=self._tensor_nodes,
                              all_ops=self._all_ops, loops=self.fold_loops, structures=structures)

        got = fit(self.rec, self._requested, make, min_run=self._fold_min, may_fold=self._may_fold,
                  max_nodes=self._max_nodes, fanout=self._shares_over())
        self._render_depth, self._fold_min = got.depth, got.min_run
        self._projection, self.budget = got.projection, got
        if got.reduced:
            warnings.warn(f"{self.rec.name!r}: {got.note()}", LargeDrawingWarning, stacklevel=4)
        elif got.over:
            warnings.warn(f"{self.rec.name!r}: {got.message()}", LargeDrawingWarning, stacklevel=4)
        return got

    def _shares_over(self) -> Optional[int]:
        """The out-degree over which a drawing over budget shares a node's edges (``None``: never)."""
        return None

    def open(self, node: LayerNode) -> None:
        """Draw the layer ``node`` as a group from now on, whatever :meth:`is_expanded` says.

        A subclass's ``render_recursive_node(g, node)`` calls it when the rule
        keeps ``node`` closed: a ``render_node`` that decides by itself which
        layers open gets the children and edges of what it opened.  The first
        time, every layer above ``render_depth`` opens with it, as the original
        torchrecorder's ``render_node`` opened them (a ``Linear`` too), so that
        the projection is computed again once, not once per layer; a layer that
        ``render_node`` then draws as one node closes again (:meth:`close`).
        """
        if node.key is None or node.key in self._opened:
            return
        if not self._opened:
            depth = self._render_depth
            self._opened.update(n.key for n in self.rec.layers()
                                if n.depth < depth and n.subnet_keys and n.key not in self._closed)
        self._opened.add(node.key)
        self._closed.discard(node.key)
        self._projection = None
        self._processed = None

    def close(self, node: LayerNode) -> None:
        """Draw the layer ``node`` as one node from now on, whatever :meth:`is_expanded` says.

        A subclass's ``render_node`` that draws an expanded layer without
        calling ``render_recursive_node`` calls it (through the base class), so
        that edges reach the node it drew.  The projection is computed again.
        """
        if node.key is None or node.key in self._closed:
            return
        self._closed.add(node.key)
        self._opened.discard(node.key)
        self._projection = None
        self._processed = None

    @property
    def processed(self) -> OrderedDict[BaseNode, list[BaseNode]]:
        """The original torchrecorder's table of what is drawn: every drawn node (expanded
        layers too), in drawing order, with the list of the drawn nodes its edges go to.

        Made when first read during a walk.  The walk of :meth:`render` draws
        the edges of the nodes still in it once every node is drawn and then
        empties it; a subclass that draws a node's edges itself removes the node
        (``self.processed.pop(node)``), and the walk leaves them to it.  During
        ``renderer(dest)`` it is 1.0.3's table, which that walk empties node by
        node (see :meth:`__call__`).
        """
        p = self._processed
        if p is None:
            p = OrderedDict()
            projection = self.projection
            stack = list(reversed(self.children(self.rec.context)))
            while stack:
                node = stack.pop()
                p[node] = []
                if projection.is_expanded(node):
                    stack.extend(reversed(self.children(node)))
            for fnode, tnode in self.drawn_edges():
                p.setdefault(fnode, []).append(tnode)
            self._processed = p
        return p

    @property
    def fold_plan(self) -> FoldPlan:
        """What ``fold_repeats`` folds."""
        return self.projection.fold

    def children(self, node: BaseNode) -> list[BaseNode]:
        """The nodes drawn directly inside the expanded layer ``node``, in order.

        Of a folded run only the first block is listed (see :meth:`repeats`).
        """
        return self.projection.children(node)

    def repeats(self, node: BaseNode) -> list[LayerNode]:
        """The blocks that the drawn ``node`` stands for: a folded run, or just ``[node]``.

        A renderer marks a node with ``len(self.repeats(node)) > 1`` as repeated.
        """
        return self.projection.repeats(node)

    def drawn_key(self, key: Key) -> Optional[Key]:
        """The key of the drawn node that stands for ``key`` (itself or an ancestor), or
        ``None`` (see :meth:`~torchrecorder.projection.Projection.drawn_key`)."""
        return self.projection.drawn_key(key)

    def drawn_edges(self) -> list[tuple[BaseNode, BaseNode]]:
        """Edges between drawn nodes: re-attached, deduplicated, without self-loops.

        With ``tensor_nodes=False`` an edge through a tensor left out joins the
        tensor's producer to each of its consumers; :meth:`edge_tensor` tells
        which tensor it carries.
        """
        return self.projection.edges

    def edge_tensor(self, fnode: BaseNode, tnode: BaseNode) -> Optional[TensorNode]:
        """The tensor left out (``tensor_nodes=False``) that the drawn edge carries, if any."""
        return self.projection.edge_tensor(fnode, tnode)

    def edge_tensors(self, fnode: BaseNode, tnode: BaseNode) -> tuple[TensorNode, ...]:
        """Every tensor left out that the drawn edge stands for, :meth:`edge_tensor` first."""
        return self.projection.edge_tensors(fnode, tnode)

    def edge_ops(self, fnode: BaseNode, tnode: BaseNode) -> tuple[OpNode, ...]:
        """The data-movement operations left out (``all_ops=False``) on the drawn edge, in
        the order they ran."""
        return self.projection.edge_ops(fnode, tnode)

    def out_degree(self, node: BaseNode) -> int:
        """How many drawn edges leave ``node``."""
        return self.projection.out_degree(node)

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


def follows_projection(method: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a ``render_node`` that draws a layer as a group exactly when the projection
    expands it (the built-in renderers' own), so that subclassing does not wrap it with the
    bookkeeping of :meth:`BaseRenderer.close`."""
    setattr(method, "_follows_" + method.__name__, True)
    return method


def _opening(method: Callable[..., Any]) -> Callable[..., Any]:
    """A subclass's ``render_recursive_node`` that first opens the layer it draws (see
    :meth:`BaseRenderer.open`) if the rule keeps it closed."""

    @functools.wraps(method)
    def render_recursive_node(self: BaseRenderer, g: Any, node: LayerNode) -> Any:
        if isinstance(node, LayerNode) and node.key is not None:
            self._recursed.add(node.key)
            if not self._seed_view and not self.projection.is_expanded(node):
                self.open(node)
        return method(self, g, node)

    render_recursive_node._follows_render_recursive_node = True  # type: ignore[attr-defined]
    return render_recursive_node


def _closing(method: Callable[..., Any]) -> Callable[..., Any]:
    """A subclass's ``render_node``, after which an expanded layer that it did not hand to
    ``render_recursive_node`` is closed (see :meth:`BaseRenderer.close`)."""

    @functools.wraps(method)
    def render_node(self: BaseRenderer, g: Any, node: BaseNode) -> Any:
        result = method(self, g, node)
        if (isinstance(node, LayerNode) and not self._seed_view and node.key not in self._recursed
                and node.key is not None and self.projection.is_expanded(node)):
            self.close(node)
        return result

    render_node._follows_render_node = True  # type: ignore[attr-defined]
    return render_node
