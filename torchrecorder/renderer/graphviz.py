"""Draw a graph with Graphviz: :class:`GraphvizRenderer` writes DOT through the documented hooks,
with the attributes a :class:`~torchrecorder.renderer.styler.GraphvizStyler` gives."""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Mapping
from typing import Any, Optional

import graphviz

from .._text import dot_id, dot_quote, quote_dot_id, string_quote
from ..errors import RenderError
from ..graph import Graph
from ..nodes import BaseNode, LayerNode, TensorNode
from ..projection import FoldRepeats
from ..projection.budget import MAX_FANOUT, MaxNodes
from ._cluster_titles import TITLE_SUFFIX, cluster_attr_list, title_attrs
from ._edge_paths import (
    LABEL_SUFFIX,
    VIA_SUFFIX,
    around,
    cluster_parents,
    input_groups,
    path_edge,
    titles_entered,
)
from ._fanout import draw_marks
from ._seedstyle import label_markup, seed_cluster_attrs
from ._seedwalk import pending_token, resolve_pending
from ._subclass_names import naming_edge, naming_node
from .attr_values import check_attribute_values
from .base import DEFAULT_RENDER_DEPTH, BaseRenderer, follows_projection
from .notebook import mimebundle
from .styler import DEFAULT_STYLES, PRESETS, GraphvizStyler, is_seed_styler

__all__ = ["DEFAULT_STYLES", "DIRECTIONS", "LABEL_SUFFIX", "PRESETS", "TITLE_SUFFIX", "VIA_SUFFIX",
           "GraphvizRenderer",
           "GraphvizStyler", "RecordingDigraph", "title_attrs"]


#: the layout directions (Graphviz's ``rankdir``)
DIRECTIONS = ("TB", "LR", "BT", "RL")


class RecordingDigraph(graphviz.Digraph):
    """A :class:`graphviz.Digraph` that shows itself in Jupyter at a readable size.

    It renders with whichever Graphviz torchrecorder finds (``dot`` or
    pygraphviz) and lets a wide graph scroll instead of shrinking it.
    """

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None,
                          **kwargs: Any) -> dict[str, str]:
        text = f"<torchrecorder drawing {self.name!r}: {len(self.body)} DOT statements>"
        return mimebundle(self.source, text, include=include, exclude=exclude)


class GraphvizRenderer(BaseRenderer):
    """Render a graph into a :class:`graphviz.Digraph`.

    Every node, cluster and edge is written by :meth:`render_node`,
    :meth:`render_recursive_node` and :meth:`render_edge` with the attributes
    that the styler's ``style_node``, ``style_cluster``, ``style_repeated``,
    ``style_edge`` and ``style_tensor_edge`` return; override any of them and
    the output changes accordingly.  Clusters are written into the same
    Digraph, nested by ``subgraph`` statements.

    Args:
        rec: the recording (or any :class:`~torchrecorder.graph.Graph`).
        render_depth: see :class:`~torchrecorder.renderer.base.BaseRenderer`.
        styler_cls: a :class:`GraphvizStyler` subclass (default: ``GraphvizStyler``).
        fold_repeats: see :class:`~torchrecorder.renderer.base.BaseRenderer`.
        tensor_nodes: see :class:`~torchrecorder.renderer.base.BaseRenderer`;
            by default the tensors passed between layers are not drawn and
            their shapes are written on the edges; ``True`` draws each as a box.
        expand_leaves, all_ops, max_nodes: see :class:`~torchrecorder.renderer.base.BaseRenderer`;
            a drawing reduced to fit the budget carries a note saying so.
        label_nodes: draw each edge label as a node of its own on the edge (``a -> label ->
            b``, the label a plain text node), in the innermost cluster that holds both ends:
            Graphviz keeps a node inside its cluster and routes other edges around it, where
            it may put an edge's own label across a cluster's border or under another edge.
            Edges that do not rank their ends keep their label; a hidden edge's label node is
            hidden too (it keeps its place, so the views of a diff share one layout).
            ``None``: the class attribute :attr:`label_nodes` (``True``); ``False`` leaves
            the labels to Graphviz.  The label nodes are not drawn by :meth:`render_node`,
            and a labelled edge becomes two edge statements.
        direction: the layout direction, ``"TB"`` (top to bottom, the
            default), ``"LR"``, ``"BT"`` or ``"RL"``; the same as
            ``graph_attrs={"rankdir": ...}``.
        margin: white space around the drawing, in inches, on each side
            (default 0: nothing beyond Graphviz's 4-point pad, in PDF and PNG
            as in SVG); ``margin=0.25`` leaves a quarter inch.  Node margins
            are ``KIND_attrs={"margin": ...}``.
        **styler_args: passed to ``styler_cls``.

    Calling the renderer on a Digraph, ``GraphvizRenderer(rec, 2)(graphviz.Digraph())``,
    draws into it and returns it (its graph attributes are kept; the styler's fill
    in the rest).  A subclass may name nodes as it likes in its own
    ``render_node`` (the original torchrecorder wrote ``str(id(node))``): the
    name each node was drawn under is the one every edge and the input/output
    ranks use, also those written by an overridden ``render_edge``.  An edge to
    a node that ``render_node`` never drew raises
    :class:`~torchrecorder.errors.RenderError` naming both ends.

    Attributes:
        styler: the :class:`GraphvizStyler` instance in use.
        recursion_trace: the graphs of the clusters being drawn, outermost first
            (the original torchrecorder's; while an expanded layer is drawn).
    """

    #: in a drawing over the budget, the edges of a node feeding more drawn nodes than
    #: this are drawn as one edge to a mark naming them (the styler's ``style_fanout``;
    #: the HTML page does the same); where they are drawn anyway (``max_nodes=None``,
    #: still over the default budget: rotary tables or a mask fed to all 80 layers of
    #: an unfolded Llama) they do not constrain their ranks, so that the layout takes
    #: seconds instead of minutes.  Within the budget they rank as every edge does:
    #: a value fed to nine operations (a mixture of experts' routing indices) is drawn
    #: above them, never below
    max_constraining_fanout = MAX_FANOUT
    #: an edge entering more titled clusters than this at once passes their title ranks
    #: outside them (500 nested wrappers: no 500 points for the edge into the innermost)
    max_titles_entered = 16
    #: the default of ``label_nodes``
    label_nodes = True

    def __init__(self, rec: Graph, render_depth: Optional[int] = DEFAULT_RENDER_DEPTH,
                 styler_cls: Optional[type[GraphvizStyler]] = None, *,
                 fold_repeats: FoldRepeats = "auto", tensor_nodes: bool = False,
                 expand_leaves: bool = False, all_ops: bool = False,
                 direction: Optional[str] = None, margin: Optional[float] = None,
                 max_nodes: MaxNodes = "auto", label_nodes: Optional[bool] = None,
                 **styler_args: Any) -> None:
        super().__init__(rec, render_depth, fold_repeats=fold_repeats, tensor_nodes=tensor_nodes,
                         expand_leaves=expand_leaves, all_ops=all_ops, max_nodes=max_nodes)
        if margin is not None:
            try:
                inches = float(margin)
            except (TypeError, ValueError):
                inches = -1.0
            if isinstance(margin, bool) or not inches >= 0:
                raise ValueError(f"margin must be a number of inches >= 0, got {margin!r}")
            graph_attrs = dict(styler_args.get("graph_attrs") or {})
            graph_attrs["margin"] = f"{inches:g}"
            styler_args["graph_attrs"] = graph_attrs
        if direction is not None:
            if str(direction).upper() not in DIRECTIONS:
                raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
            graph_attrs = dict(styler_args.get("graph_attrs") or {})
            graph_attrs["rankdir"] = str(direction).upper()
            styler_args["graph_attrs"] = graph_attrs
        if label_nodes is not None:
            self.label_nodes = bool(label_nodes)
        cls = styler_cls if styler_cls is not None else GraphvizStyler
        self.styler = cls(**styler_args)
        check_attribute_values(self.styler.styles)  # dpi=inf, nan, -5: refused before any work
        self.styler.rec = rec
        self.styler.renderer = self
        self._indent = "\t"
        # expanded layer key -> its drawn children, for the title edges
        self._clusters: dict[Any, list[BaseNode]] = {}
        self._cluster_nodes: dict[Any, BaseNode] = {}  # key -> the layer (or loop group) drawn
        self._titled: set[Any] = set()
        #: (tail key, head key) -> the quoted id of the node drawing that edge's label
        self._label_ids: dict[tuple[Any, Any], str] = {}
        #: a node's key or an edge's (tail key, head key) -> its ``group`` (:func:`input_groups`)
        self._groups: dict[Any, str] = {}
        self._cluster_parent_of: Optional[dict[Any, Any]] = None  # drawn key -> its cluster's key
        self._qids: dict[Any, str] = {}
        # attribute text of everything but the label and the tooltip, by the attributes' items:
        # nodes of one kind share it
        self._rests: dict[tuple[tuple[Any, Any], ...], str] = {}
        # quoted tooltips (the styler hands out one string for all tensors of a shape)
        self._tips: dict[str, str] = {}
        # key -> the ID (as written) each node was drawn under in the current walk
        self._drawn: dict[Any, str] = {}
        # plain_id of each of them, and how many there were (see _subclass_names)
        self._drawn_names: tuple[set[str], int] = (set(), 0)
        self.recursion_trace: list[Any] = []
        # a 1.0.3 walk: edges left to the end (their nodes taken by a cluster), and what edges
        # drawn before one of their nodes wait for (see _end_seed_walk)
        self._seed_edges: list[tuple[BaseNode, BaseNode]] = []
        self._pending: list[tuple[BaseNode, Optional[BaseNode], str]] = []
        # source key -> the drawn nodes it feeds, for a source whose edges the budget shares
        self._fanout: dict[Any, list[BaseNode]] = {}
        if is_seed_styler(type(self.styler)):
            self.seed_view = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # a subclass's own render_node / render_edge: learn the names it draws nodes under
        for name, wrap in (("render_node", naming_node), ("render_edge", naming_edge)):
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, "_names_" + name, False):
                setattr(cls, name, wrap(method))

    def __call__(self, dest: Any) -> Any:
        """Draw into the Digraph ``dest`` and return it; graph attributes it does not set
        come from the styler (see :meth:`BaseRenderer.__call__`)."""
        if isinstance(dest, graphviz.Graph) or not hasattr(dest, "body"):  # a path: make_dot writes files
            raise TypeError(f"{type(self).__name__} draws into a graphviz.Digraph, not "
                            f"{'a graphviz.Graph' if hasattr(dest, 'body') else repr(dest)}; files: make_dot")
        if isinstance(dest, graphviz.Digraph):
            for key, value in self.styler.graph_attrs().items():
                dest.graph_attr.setdefault(key, value)
        return super().__call__(dest)

    def _begin(self, g: Any) -> None:
        self._drawn.clear()
        self._clusters.clear()
        self._cluster_nodes.clear()
        self._titled.clear()
        self._label_ids.clear()
        self._cluster_parent_of = None
        self._drawn_names = (set(), 0)
        self.recursion_trace.clear()
        self._seed_edges.clear()
        self._pending.clear()
        self.projection  # noqa: B018 - fitted to the budget, which says what it shares
        self._fanout = {key: [] for key in self.budget.shared} if self.budget is not None else {}
        self._groups = {} if self._seed_walk else input_groups(self)  # 1.0.3 ranked none

    def _shares_over(self) -> Optional[int]:
        return self.max_constraining_fanout

    def _unranked_fanout(self) -> bool:
        """Whether the edges of a node feeding more than :attr:`max_constraining_fanout` drawn
        nodes are drawn with ``constraint=false``: only in a drawing over the (default)
        budget, where they would make the layout slow (and in the 1.0.3 view, which has none)."""
        return self.budget is None or self.budget.over

    def _ranked_edges(self) -> list[tuple[BaseNode, BaseNode]]:
        """The drawn edges written as edges (not those a mark stands for: a subclass's own
        ``render_edge`` may have drawn them all)."""
        shared = {key for key, targets in self._fanout.items() if targets}
        edges = self.drawn_edges()
        return [e for e in edges if e[0].key not in shared] if shared else edges

    def _end_seed_walk(self, g: Any) -> None:
        """Draw the edges of the nodes a cluster took, then name the ends of the edges that were
        drawn before their nodes (1.0.3 drew edges as it went)."""
        edges, self._seed_edges = self._seed_edges, []
        for fnode, tnode in edges:
            self.render_edge(g, fnode, tnode)
        if self._pending:
            resolve_pending(self, g, self._pending)

    def drawn_id(self, node: BaseNode, other: Optional[BaseNode] = None) -> str:
        """The ID (as written in DOT) that ``node`` was drawn under in this walk.

        Raises:
            RenderError: ``render_node`` has not drawn ``node`` as a node (the
                message names the edge to ``other``, if given).
        """
        got = self._drawn.get(node.key)
        if got is None:
            raise RenderError(_never_drawn(self, node, other))
        return got

    def node_id(self, node: BaseNode) -> str:
        """The unique, readable DOT id of ``node``."""
        return self.unique_id(node, dot_id)

    def new_graph(self) -> graphviz.Digraph:
        """An empty Digraph carrying the styler's graph attributes (it shows itself in Jupyter)."""
        return RecordingDigraph(name=dot_id(self.rec.name), graph_attr=self.styler.graph_attrs())

    def finish(self, g: graphviz.Digraph) -> graphviz.Digraph:
        """Put each cluster's title above what enters it, the network's inputs on the first
        rank (each above the first node it feeds) and its outputs on the last.

        A drawn node that nothing drawn feeds (a parameter, an embedding of
        positions) gets an invisible edge from the first input, so that it
        sits below the inputs, not above them; one in a titled cluster has its
        title's edge already, which ranks it below what enters the cluster (an
        edge from the first input down to each iteration of a long unfolded loop
        would give ``dot`` a path through every rank to route for each).
        """
        self._title_edges(g)
        self._carried_edges(g)
        draw_marks(self, g, self._fanout)
        drawn = self._drawn
        note: list[str] = []
        if self.budget is not None and self.budget.reduced:  # on the last rank, with the outputs
            text = self._attr_text(self.style_note(), "style_note")
            note.append(quote_dot_id(_NOTE_ID))
            g.body.append(f"\t{note[0]} [{text}]\n")
        top = [n for n in self.children(self.rec.context) if isinstance(n, TensorNode) and n.key in drawn]
        inputs = [n for n in top if n.role == "input"]
        for role, rank in (("input", "source"), ("output", "sink")):
            ids = [drawn[n.key] for n in top if n.role == role] + (note if role == "output" else [])
            if ids:
                g.body.append(f"\t{{rank={rank}; {'; '.join(ids)}}}\n")
            # flat invisible edges keep them left to right in the model's order
            g.body.extend(f"\t{a} -> {b} [style=invis]\n" for a, b in itertools.pairwise(ids))
        if inputs:
            fed = {b.key for _, b in self._ranked_edges()}
            fed.update(child.key for key, children in self._clusters.items() if key in self._titled
                       for child in children)  # placed by the title's edge
            first = drawn[inputs[0].key]
            todo = list(reversed(self.children(self.rec.context)))
            while todo:  # depth first, in drawing order
                node = todo.pop()
                if self.projection.is_expanded(node):
                    todo.extend(reversed(self.children(node)))
                elif (node.key not in fed and node.key in drawn
                      and not (isinstance(node, TensorNode) and node.role)):
                    g.body.append(f"\t{first} -> {drawn[node.key]} [style=invis]\n")
        return g

    def _carried_edges(self, g: graphviz.Digraph) -> None:
        """The values a folded loop or run carries from one iteration (or block) to another
        (:attr:`~torchrecorder.projection.Projection.carried_edges`), styled by the styler's
        ``style_carried_edge``: back edges that do not rank their ends."""
        drawn = self._drawn
        for fnode, tnode in self.projection.carried_edges:
            a, b = drawn.get(fnode.key), drawn.get(tnode.key)
            if a is None or b is None:  # an end a subclass's render_node did not draw
                continue
            attrs = self.styler.style_carried_edge(fnode, tnode, self.edge_tensor(fnode, tnode))
            g.body.append(f"\t{a} -> {b} [{self._attr_text(attrs, 'style_carried_edge')}]\n")

    def style_note(self) -> dict[str, str]:
        """Attributes of the note that says what the drawing budget collapsed."""
        note = self.budget.note() if self.budget is not None else ""
        label = "".join(line + "\\l" for line in textwrap.wrap(note, 72))  # left-aligned lines
        return {"label": label, "shape": "note", "fontsize": "9",
                "fontname": "Helvetica,Arial,sans-serif", "style": "filled", "fillcolor": "#fff8dc",
                "color": "#b8a26a", "tooltip": note}

    @follows_projection
    def render_node(self, g: graphviz.Digraph, node: BaseNode) -> None:
        """Draw ``node`` as one Graphviz node, or as a cluster if it is an expanded layer."""
        if self.projection.is_expanded(node):  # self.is_expanded's answer, asked once per node
            if not isinstance(node, LayerNode):
                raise TypeError(f"{type(self).__name__}.is_expanded() said yes to {node.key!r}, "
                                f"a {type(node).__name__}: only layers can be expanded")
            self.recursion_trace.append(g)
            try:
                self.render_recursive_node(g, node)
            finally:
                self.recursion_trace.pop()
            return
        run = self.repeats(node)
        if len(run) > 1 and isinstance(node, LayerNode):
            text = self._attr_text(self.styler.style_repeated(node, run, False), "style_repeated")
        else:
            text = self._attr_text(self.styler.style_node(node), "style_node")
        group = self._groups.get(node.key)
        if group is not None:  # an input and its first consumer: one above the other
            text += f" group={group}"
        qid = self._drawn[node.key] = self._quoted_id(node)
        g.body.append(f"{self._indent}{qid} [{text}]\n")

    def render_recursive_node(self, g: graphviz.Digraph, node: LayerNode) -> None:
        """Draw the expanded layer ``node`` as a cluster holding its children."""
        run = self.repeats(node)
        if len(run) > 1:
            attrs = self._checked(self.styler.style_repeated(node, run, True), "style_repeated")
        else:
            attrs = self._checked(self.styler.style_cluster(node), "style_cluster")
            if self._seed_view:
                attrs.update(self._seed_cluster_style(node))
        indent = self._indent
        g.body.append(f"{indent}subgraph {dot_quote('cluster_' + self.node_id(node))} {{\n")
        title = title_attrs(attrs)  # takes the label out of attrs
        if attrs:
            g.body.append(f"{indent}\t{cluster_attr_list(attrs)}\n")
        children = self.children(node)
        self._clusters[node.key] = children
        self._cluster_nodes[node.key] = node
        if title is not None:
            self._titled.add(node.key)
            g.body.append(f"{indent}\t{self._title_id(node)} [{self._attr_text(title, 'style_cluster')}]\n")
        self._indent = indent + "\t"
        try:
            for child in children:
                self.render_node(g, child)
        finally:
            self._indent = indent
        g.body.append(indent + "}\n")
        if self._seed_walk:  # 1.0.3's render_recursive_node took its children, with their edges
            processed = self.processed
            for child in children:
                targets = processed.pop(child, None)
                if targets:
                    self._seed_edges.extend((child, target) for target in targets)

    def _title_id(self, node: BaseNode) -> str:
        """The quoted DOT id of the title of the cluster drawn for ``node``."""
        return quote_dot_id(self.node_id(node) + TITLE_SUFFIX)

    def _title_edges(self, g: graphviz.Digraph) -> None:
        """Invisible edges that rank each cluster's title node below whatever feeds the
        cluster (the label of an input's edge entering it) and above the cluster's first members (and
        a nested cluster's title)."""
        if not self._clusters:
            return
        parent = cluster_parents(self, cached=False)
        titled = self._titled

        def clusters_of(key: Any) -> list[Any]:
            return around(key, parent)

        lines: dict[str, None] = {}
        fed_inside: set[tuple[Any, Any]] = set()  # (cluster, direct child) fed from inside the cluster
        for fnode, tnode in self._ranked_edges():
            outer_of_f = set(clusters_of(fnode.key))
            chain = clusters_of(tnode.key)
            inner = tnode.key
            for key in chain:
                if key in outer_of_f:  # the innermost cluster holding both ends
                    fed_inside.add((key, inner))
                    break
                # an input's edge to its first consumer (kept straight, :func:`input_groups`):
                # below its label, if it has a node of its own (outside this cluster), which
                # on the title's rank would sit beside the cluster, pushing the input aside
                tail = self._drawn.get(fnode.key)
                if (fnode.key, tnode.key) in self._groups:
                    tail = self._label_ids.get((fnode.key, tnode.key), tail)
                if key in titled and tail is not None:
                    lines[f"\t{tail} -> {self._title_id(self._cluster_nodes[key])} [style=invis]\n"] = None
                inner = key
        for key, children in self._clusters.items():
            if key not in titled:
                continue
            tid = self._title_id(self._cluster_nodes[key])
            for child in children:
                if (key, child.key) in fed_inside:
                    continue
                if child.key in self._clusters and child.key in titled:
                    head = self._title_id(child)
                elif child.key in self._clusters:
                    continue
                else:
                    drawn = self._drawn.get(child.key)
                    if drawn is None:  # a subclass's render_node drew nothing for it
                        continue
                    head = drawn
                lines[f"\t{tid} -> {head} [style=invis]\n"] = None
        g.body.extend(lines)

    def render_edge(self, g: graphviz.Digraph, fnode: BaseNode, tnode: BaseNode) -> None:
        """Draw the edge from ``fnode`` to ``tnode`` (with the shape it carries, if tensors are
        not drawn as nodes); an edge of a node whose edges the drawing budget shares
        (:attr:`~torchrecorder.projection.budget.Fit.shared`) is kept for its mark, which
        :meth:`finish` draws."""
        shared = self._fanout.get(fnode.key)
        if shared is not None:  # drawn with the other edges of fnode as one edge to a mark
            shared.append(tnode)
            return
        tensor = self.edge_tensor(fnode, tnode)
        wide = self.out_degree(fnode) > self.max_constraining_fanout and self._unranked_fanout()
        if tensor is not None:
            attrs, method = self.styler.style_tensor_edge(fnode, tnode, tensor), "style_tensor_edge"
        else:
            attrs, method = self.styler.style_edge(fnode, tnode), "style_edge"
        drawn = self._drawn
        a, b = drawn.get(fnode.key), drawn.get(tnode.key)
        if (a is None or b is None) and self._seed_walk:  # an end not drawn yet: named at the end
            g.body.append(f"\t{self._pend(fnode, tnode, self._attr_text(attrs, method, wide), 'E')}\n")
            return
        if (not wide and a is not None and b is not None and not self._seed_walk
                and isinstance(attrs, Mapping) and str(attrs.get("constraint", "true")).lower() != "false"):
            labelled = bool(self.label_nodes and attrs.get("label"))
            entered = titles_entered(self, fnode, tnode)
            if len(entered) > self.max_titles_entered:
                entered = []
            if labelled or entered:
                path_edge(self, g, fnode, tnode, (a, b), dict(attrs), method, labelled, entered)
                return
        text = self._attr_text(attrs, method, wide)
        if a is None or b is None:  # an end drawn as a cluster (an edge into a layer), or never
            a, b, text = self._cluster_edge(g, fnode, tnode, text)
        g.body.append(f"\t{a} -> {b} [{text}]\n")

    def _pend(self, node: BaseNode, other: Optional[BaseNode], text: str, kind: str) -> str:
        """A placeholder, resolved when the 1.0.3 walk ends, for an edge (``kind`` ``"E"``) or
        one end of an edge (``"N"``) whose node is not drawn yet."""
        self._pending.append((node, other, text))
        return pending_token(kind, len(self._pending) - 1)

    def _cluster_edge(self, g: Any, fnode: BaseNode, tnode: BaseNode, text: str) -> tuple[str, str, str]:
        """The ends of an edge one of whose ends was drawn as a cluster (a graph loaded from
        JSON may join a layer itself): the first node drawn inside it, with ``ltail``/``lhead``
        naming the cluster.

        Raises:
            RenderError: an end was neither drawn as a node nor as a cluster holding one.
        """
        ends = []
        for node, other, attr in ((fnode, tnode, "ltail"), (tnode, fnode, "lhead")):
            got = self._drawn.get(node.key)
            if got is None:
                got = self._first_drawn_inside(node) if node.key in self._recursed else None
                if got is None:
                    raise RenderError(_never_drawn(self, node, other))
                text += f" {attr}={dot_quote('cluster_' + self.node_id(node))}"
                if isinstance(g, graphviz.Digraph):
                    g.graph_attr.setdefault("compound", "true")
            ends.append(got)
        return ends[0], ends[1], text.lstrip()

    def _first_drawn_inside(self, layer: BaseNode) -> Optional[str]:
        """The ID of the first node drawn inside the cluster of ``layer``, if any."""
        todo = list(reversed(self.children(layer)))
        while todo:
            node = todo.pop()
            got = self._drawn.get(node.key)
            if got is not None:
                return got
            todo.extend(reversed(self.children(node)))
        return None

    # DOT statements are written here rather than through Digraph.node/edge: the same text,
    # but the attributes that nodes of one kind share are quoted once per drawing.
    def _quoted_id(self, node: BaseNode) -> str:
        got = self._qids.get(node.key)
        if got is None:
            got = self._qids[node.key] = quote_dot_id(self.node_id(node))
        return got

    def _attr_text(self, attrs: Any, method: str, wide: bool = False) -> str:
        """The attribute list of a node or edge styled ``attrs`` (what the styler's ``method``
        returned): ``label=... key=value ... tooltip=...``, quoted as the graphviz package
        quotes, with ``constraint=false`` added if ``wide``.

        The attributes but the label and the tooltip usually repeat from node to
        node, so their text is made once per distinct set.
        """
        if type(attrs) is not dict and not isinstance(attrs, Mapping):
            raise TypeError(f"{type(self.styler).__name__}.{method}() must return a mapping of "
                            f"Graphviz attributes, got {type(attrs).__name__}")
        label = attrs.get("label")
        tooltip = attrs.get("tooltip")
        # the key of the other attributes, made without copying the styler's dict
        if label is None and tooltip is None and not wide:
            key: Any = tuple(attrs.items())
        else:
            key = (wide, *[item for item in attrs.items() if item[0] not in _SPLIT_OFF])
        try:
            rest = self._rests.get(key)
        except TypeError:  # an unhashable value
            rest = key = None
        if rest is None:
            rest_attrs = {k: v for k, v in attrs.items() if k not in _SPLIT_OFF}
            if wide:
                rest_attrs.setdefault("constraint", "false")
            pairs = sorted((str(k), str(v)) for k, v in rest_attrs.items())
            rest = " ".join(f"{dot_quote(k)}={dot_quote(v)}" for k, v in pairs)
            if key is not None:
                self._rests[key] = rest
        if label is not None:
            # the default label formatted into text by a styler (f"{z['label']} x"): kept HTML
            label = label_markup(str(label), getattr(self.styler, "last_label", None)
                                 if method == "style_node" else None)
            # an HTML-like label is written as it is, as the graphviz package does
            quoted = label if label.startswith("<") and label.endswith(">") else dot_quote(label)
            rest = f"label={quoted} {rest}" if rest else f"label={quoted}"
        if tooltip is not None:
            tip = self._tips.get(tooltip)
            if tip is None:
                tip = self._tips[tooltip] = f"tooltip={string_quote(str(tooltip))}"
            rest = f"{rest} {tip}" if rest else tip
        return rest

    def _seed_cluster_style(self, node: LayerNode) -> dict[str, str]:
        """What a 1.0.3 styler's ``style_node`` changes on the layer ``node``, for its cluster (see
        :func:`~torchrecorder.renderer._seedstyle.seed_cluster_attrs`)."""
        if type(self.styler).style_node is GraphvizStyler.style_node:
            return {}
        own = self._checked(self.styler.style_node(node), "style_node")
        default = self._checked(GraphvizStyler.style_node(self.styler, node), "style_node")
        plain = type(self.styler).style_cluster is GraphvizStyler.style_cluster
        return seed_cluster_attrs(own, default, tooltip=plain)

    def _checked(self, attrs: Any, method: str) -> dict[str, str]:
        """``attrs`` returned by the styler's ``method``, as a new dict of plain strings."""
        if not isinstance(attrs, Mapping):
            raise TypeError(f"{type(self.styler).__name__}.{method}() must return a mapping of "
                            f"Graphviz attributes, got {type(attrs).__name__}")
        return {str(k): str(v) for k, v in attrs.items()}


def _never_drawn(renderer: GraphvizRenderer, node: BaseNode, other: Optional[BaseNode]) -> str:
    """The message for an edge (with ``other``) to ``node``, which was never drawn."""
    edge = f" cannot draw the edge between {node.key!r} and {other.key!r}:" if other is not None else ""
    return (f"{type(renderer).__name__}:{edge} {type(node).__name__} {node.key!r} was never drawn as a "
            "node (render_node wrote no node statement for it); draw every node that render_node "
            "is given, or leave out the edges that touch the nodes it skips")



#: the DOT id of the drawing budget's note (no recorded key has a space)
_NOTE_ID = "torchrecorder note"


#: the attributes written apart from the others: they differ from node to node
_SPLIT_OFF = frozenset(("label", "tooltip"))
