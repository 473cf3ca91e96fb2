"""Draw a graph with Graphviz: :class:`GraphvizRenderer` writes DOT through the documented hooks,
with the attributes a :class:`~torchrecorder.renderer.styler.GraphvizStyler` gives."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any, Optional

import graphviz

from .._text import dot_id, dot_quote, quote_dot_id, string_quote
from ..graph import Graph
from ..nodes import BaseNode, LayerNode, TensorNode
from ..projection import FoldRepeats
from ..projection.budget import MaxNodes
from .base import DEFAULT_RENDER_DEPTH, BaseRenderer
from .notebook import mimebundle
from .styler import DEFAULT_STYLES, PRESETS, GraphvizStyler

__all__ = ["DEFAULT_STYLES", "DIRECTIONS", "PRESETS", "GraphvizRenderer", "GraphvizStyler",
           "RecordingDigraph"]


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
        direction: the layout direction, ``"TB"`` (top to bottom, the
            default), ``"LR"``, ``"BT"`` or ``"RL"``; the same as
            ``graph_attrs={"rankdir": ...}``.
        **styler_args: passed to ``styler_cls``.

    Attributes:
        styler: the :class:`GraphvizStyler` instance in use.
    """

    #: a node feeding more drawn nodes than this does not constrain their ranks
    #: (rotary tables or a mask fed to all 80 layers of an unfolded Llama: the
    #: layout takes seconds instead of minutes)
    max_constraining_fanout = 8

    def __init__(self, rec: Graph, render_depth: Optional[int] = DEFAULT_RENDER_DEPTH,
                 styler_cls: Optional[type[GraphvizStyler]] = None, *,
                 fold_repeats: FoldRepeats = "auto", tensor_nodes: bool = False,
                 expand_leaves: bool = False, all_ops: bool = False,
                 direction: Optional[str] = None, max_nodes: MaxNodes = "auto", **styler_args: Any) -> None:
        super().__init__(rec, render_depth, fold_repeats=fold_repeats, tensor_nodes=tensor_nodes,
                         expand_leaves=expand_leaves, all_ops=all_ops, max_nodes=max_nodes)
        if direction is not None:
            if str(direction).upper() not in DIRECTIONS:
                raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
            graph_attrs = dict(styler_args.get("graph_attrs") or {})
            graph_attrs["rankdir"] = str(direction).upper()
            styler_args["graph_attrs"] = graph_attrs
        cls = styler_cls if styler_cls is not None else GraphvizStyler
        self.styler = cls(**styler_args)
        self.styler.rec = rec
        self.styler.renderer = self
        self._indent = "\t"
        self._qids: dict[Any, str] = {}
        # attribute text of everything but the label and the tooltip, by the attributes' items:
        # nodes of one kind share it
        self._rests: dict[tuple[tuple[Any, Any], ...], str] = {}
        # quoted tooltips (the styler hands out one string for all tensors of a shape)
        self._tips: dict[str, str] = {}

    def node_id(self, node: BaseNode) -> str:
        """The unique, readable DOT id of ``node``."""
        return self.unique_id(node, dot_id)

    def new_graph(self) -> graphviz.Digraph:
        """An empty Digraph carrying the styler's graph attributes (it shows itself in Jupyter)."""
        return RecordingDigraph(name=dot_id(self.rec.name), graph_attr=self.styler.graph_attrs())

    def finish(self, g: graphviz.Digraph) -> graphviz.Digraph:
        """Put the network's inputs on the first rank and its outputs on the last.

        A drawn node that nothing drawn feeds (a parameter, an embedding of
        positions) gets an invisible edge from the first input, so that it
        sits below the inputs, not above them.
        """
        note: list[str] = []
        if self.budget is not None and self.budget.reduced:  # on the last rank, with the outputs
            text = self._attr_text(self.style_note(), "style_note")
            note.append(quote_dot_id(_NOTE_ID))
            g.body.append(f"\t{note[0]} [{text}]\n")
        top = [n for n in self.children(self.rec.context) if isinstance(n, TensorNode)]
        inputs = [n for n in top if n.role == "input"]
        for role, rank in (("input", "source"), ("output", "sink")):
            ids = [self._quoted_id(n) for n in top if n.role == role] + (note if role == "output" else [])
            if ids:
                g.body.append(f"\t{{rank={rank}; {'; '.join(ids)}}}\n")
        if inputs:
            fed = {b.key for _, b in self.drawn_edges()}
            first = self._quoted_id(inputs[0])
            todo = list(reversed(self.children(self.rec.context)))
            while todo:  # depth first, in drawing order
                node = todo.pop()
                if self.projection.is_expanded(node):
                    todo.extend(reversed(self.children(node)))
                elif node.key not in fed and not (isinstance(node, TensorNode) and node.role):
                    g.body.append(f"\t{first} -> {self._quoted_id(node)} [style=invis]\n")
        return g

    def style_note(self) -> dict[str, str]:
        """Attributes of the note that says what the drawing budget collapsed."""
        note = self.budget.note() if self.budget is not None else ""
        label = "".join(line + "\\l" for line in textwrap.wrap(note, 72))  # left-aligned lines
        return {"label": label, "shape": "note", "fontsize": "9",
                "fontname": "Helvetica,Arial,sans-serif", "style": "filled", "fillcolor": "#fff8dc",
                "color": "#b8a26a", "tooltip": note}

    def render_node(self, g: graphviz.Digraph, node: BaseNode) -> None:
        """Draw ``node`` as one Graphviz node, or as a cluster if it is an expanded layer."""
        if self.projection.is_expanded(node):  # self.is_expanded's answer, asked once per node
            if not isinstance(node, LayerNode):
                raise TypeError(f"{type(self).__name__}.is_expanded() said yes to {node.key!r}, "
                                f"a {type(node).__name__}: only layers can be expanded")
            self.render_recursive_node(g, node)
            return
        run = self.repeats(node)
        if len(run) > 1 and isinstance(node, LayerNode):
            text = self._attr_text(self.styler.style_repeated(node, run, False), "style_repeated")
        else:
            text = self._attr_text(self.styler.style_node(node), "style_node")
        g.body.append(f"{self._indent}{self._quoted_id(node)} [{text}]\n")

    def render_recursive_node(self, g: graphviz.Digraph, node: LayerNode) -> None:
        """Draw the expanded layer ``node`` as a cluster holding its children."""
        run = self.repeats(node)
        if len(run) > 1:
            attrs = self._checked(self.styler.style_repeated(node, run, True), "style_repeated")
        else:
            attrs = self._checked(self.styler.style_cluster(node), "style_cluster")
        indent = self._indent
        g.body.append(f"{indent}subgraph {dot_quote('cluster_' + self.node_id(node))} {{\n")
        if attrs:
            g.body.append(f"{indent}\t{_cluster_attr_list(attrs)}\n")
        self._indent = indent + "\t"
        try:
            for child in self.children(node):
                self.render_node(g, child)
        finally:
            self._indent = indent
        g.body.append(indent + "}\n")

    def render_edge(self, g: graphviz.Digraph, fnode: BaseNode, tnode: BaseNode) -> None:
        """Draw the edge from ``fnode`` to ``tnode`` (with the shape it carries, if tensors are
        not drawn as nodes)."""
        tensor = self.edge_tensor(fnode, tnode)
        wide = self.out_degree(fnode) > self.max_constraining_fanout
        if tensor is not None:
            text = self._attr_text(self.styler.style_tensor_edge(fnode, tnode, tensor), "style_tensor_edge",
                                   wide)
        else:
            text = self._attr_text(self.styler.style_edge(fnode, tnode), "style_edge", wide)
        g.body.append(f"\t{self._quoted_id(fnode)} -> {self._quoted_id(tnode)} [{text}]\n")

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
            label = str(label)
            # an HTML-like label is written as it is, as the graphviz package does
            quoted = label if label.startswith("<") and label.endswith(">") else dot_quote(label)
            rest = f"label={quoted} {rest}" if rest else f"label={quoted}"
        if tooltip is not None:
            tip = self._tips.get(tooltip)
            if tip is None:
                tip = self._tips[tooltip] = f"tooltip={string_quote(str(tooltip))}"
            rest = f"{rest} {tip}" if rest else tip
        return rest

    def _checked(self, attrs: Any, method: str) -> dict[str, str]:
        """``attrs`` returned by the styler's ``method``, as a new dict of plain strings."""
        if not isinstance(attrs, Mapping):
            raise TypeError(f"{type(self.styler).__name__}.{method}() must return a mapping of "
                            f"Graphviz attributes, got {type(attrs).__name__}")
        return {str(k): str(v) for k, v in attrs.items()}


#: the DOT id of the drawing budget's note (no recorded key has a space)
_NOTE_ID = "torchrecorder note"

#: the attributes written apart from the others: they differ from node to node
_SPLIT_OFF = frozenset(("label", "tooltip"))


def _cluster_attr_list(attrs: dict[str, str]) -> str:
    """A cluster's attributes as ``Digraph.attr(**attrs)`` writes them: sorted, each quoted
    (the tooltip never as an HTML string)."""
    return " ".join(f"{dot_quote(k)}={string_quote(v) if k == 'tooltip' else dot_quote(v)}"
                    for k, v in sorted(attrs.items()))
