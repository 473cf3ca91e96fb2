"""How a recording looks in Graphviz: :class:`GraphvizStyler` gives each node, cluster and edge
its attributes, from :data:`DEFAULT_STYLES` and a named preset of :data:`PRESETS`."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Optional, TypeVar

from .._text import html_text, shorten
from ..backend import GRAPHVIZ_ATTRIBUTES
from ..graph import Graph
from ..nodes import BaseNode, Key, LayerNode, OpNode, ParamNode, TensorNode, shape_str
from ..projection import NODE_KINDS, LoopNode, iterations_text
from ..projection import kind_of as _kind_of
from ..seed import SeedName
from ._cluster_titles import cluster_label, one_box_holds_all, title_lines
from ._seedstyle import HtmlLabel, is_seed_styler, label_markup
from ._styler_args import KIND_ARGS, NAMED_ELSEWHERE, check_kind_attribute, check_node_attribute
from ._styletable import StyleTable
from .base import BaseRenderer
from .breakmarks import BreakMarks
from .labels import (
    OpInputShapes,
    call_name,
    dtype_suffix,
    edge_label,
    listed_params,
    ops_text,
    param_count_text,
    param_lines,
    params_text,
    run_title,
    shapes_text,
    stacked_label,
    tied_paths,
    tooltip_text,
)
from .presets import DEFAULT_STYLES, PRESETS
from .sourcelines import script_lines

__all__ = ["DEFAULT_STYLES", "EDGE_SHAPES", "GRAPH_ATTRIBUTES", "KIND_ARGS", "PRESETS", "GraphvizStyler",
           "HtmlLabel", "is_seed_styler"]

T = TypeVar("T")

#: The kinds of element a styler styles (``KIND_attrs=`` arguments): the node kinds of
#: :data:`~torchrecorder.projection.NODE_KINDS`, the states ``failed`` and ``folded``,
#: clusters, edges and the graph itself.
#: Graphviz attributes that only a graph has: given as keywords they set the graph's
#: (``rankdir="LR"``, ``dpi=300``) instead of every node's.
GRAPH_ATTRIBUTES = frozenset(name for name, users in GRAPHVIZ_ATTRIBUTES.items()
                             if "G" in users and "N" not in users)

#: the values of ``GraphvizStyler(edge_shapes=...)``
EDGE_SHAPES = ("changed", "all", "none")


class GraphvizStyler:
    """Provide the Graphviz attributes of each node, cluster and edge.

    Styles are looked up by node kind through the class hierarchy, so a node
    subclass gets its base class's style.  Arguments:

    Args:
        preset: a name from :data:`PRESETS` (``"default"``, ``"compact"``,
            ``"print"``, ``"paper"``).
        param_shapes: list the shapes of a module's parameters in its box
            (when it owns at most three); by default a box shows the module's
            type and parameter count, and the shapes are in its tooltip.
        param_counts: write a module's parameter count after its type
            (``Linear · 4.2k params``, the default); ``False`` leaves it to the
            tooltip.
        edge_shapes: which edges that carry a tensor (``tensor_nodes=False``)
            write its shape: ``"changed"`` (the default) where it differs from
            every input of the node the edge leaves, so that a chain of layers
            keeping one shape is not labelled over and over; ``"all"``; or
            ``"none"`` (the shapes stay in the edges' tooltips).
        breaks: ``torch.compile`` graph breaks (:func:`torchrecorder.compile_breaks`): each
            module call that holds one gets a red border (``graph_break_attrs``), a
            ``graph break`` badge and the reason in its tooltip; a box whose insides are
            not drawn counts those of the calls inside it.
        **styler_args: ``KIND_attrs={...}`` (``layer_attrs``, ``tensor_attrs``,
            ``io_attrs``, ``param_attrs``, ``op_attrs``, ``cluster_attrs``,
            ``edge_attrs``, ``graph_attrs``, ...) override one kind (each name an attribute
            that Graphviz uses on that kind, else ``ValueError``); any other
            keyword is a Graphviz node attribute applied to every node, as in the
            original torchrecorder (``fontname="Times"``, which sets the font of cluster
            titles, edge labels and the graph too), except the
            attributes of the whole graph (:data:`GRAPH_ATTRIBUTES`:
            ``rankdir``, ``dpi``, ``size``, ``ranksep``, ...), which go to it;
            any other keyword (a misspelt option such as ``render_dept``, or
            ``arrowhead``, an attribute of edges) raises ``TypeError``.  The kinds are
            ``layer`` (a module drawn as one box), ``cluster`` (an expanded
            module), ``tensor``, ``io`` (the network's inputs and outputs),
            ``param``, ``op``, ``edge``, ``param_edge``, ``failed`` (a module
            that raised), ``unread`` (a module's output that nothing reads, drawn
            with ``tensor_nodes=True``: dashed, over the tensor style), ``folded``
            and ``folded_cluster`` (a run of repeated blocks drawn once) and
            ``graph``.  The original torchrecorder's defaults ``style="filled"`` and
            ``color="black"`` are such attributes; its ``align`` (``"left"``, ``"center"`` or ``"right"``)
            places the titles of clusters.

    Attributes:
        styles: kind -> Graphviz attributes in use (a copy; safe to change); a
            node class stands for its kind, as in the original torchrecorder
            (``styles[LayerNode]`` is ``styles["layer"]``).
        rec: the recording being drawn, set by the renderer (``None`` before).

    Subclasses usually override :meth:`label` or :meth:`style_node`.

    >>> GraphvizStyler(preset="print", layer_attrs={"fillcolor": "red"}).styles["layer"]["fillcolor"]
    'red'
    """

    rec: Optional[Graph] = None
    #: whether the renderer draws the 1.0.3 view for this styler (see :func:`is_seed_styler`):
    #: ``None`` decides from the code of ``style_node`` and ``style_edge``
    seed_view: ClassVar[Optional[bool]] = None
    #: the renderer drawing with this styler, set by it (``None`` before): the styler asks it
    #: which data-movement operations an edge stands for (``edge_ops``)
    renderer: Optional[BaseRenderer] = None

    #: node class -> style kind, searched along the node's MRO
    kinds: ClassVar[Mapping[type, str]] = NODE_KINDS

    #: text longer than this in a label (a name, a type, a parameter line) is shortened in the
    #: middle with ``…``: Graphviz refuses strings of 16,384 bytes, and a wide node is unreadable.
    #: The tooltip keeps the whole text (up to Graphviz's limit), the JSON export all of it.
    max_label_chars: ClassVar[int] = 200

    #: the keywords taken as Graphviz node attributes; any other keyword (but ``preset`` and
    #: ``KIND_attrs``) raises ``TypeError``.  A subclass may add names its own Graphviz knows.
    node_attributes: ClassVar[frozenset[str]] = frozenset(
        name for name, users in GRAPHVIZ_ATTRIBUTES.items() if "N" in users)

    def __init__(self, preset: str = "default", *, param_shapes: bool = False, param_counts: bool = True,
                 edge_shapes: str = "changed", breaks: Iterable[Any] = (), **styler_args: Any) -> None:
        if edge_shapes not in EDGE_SHAPES:
            raise ValueError(f"edge_shapes must be one of {', '.join(map(repr, EDGE_SHAPES))}, "
                             f"got {edge_shapes!r}")
        self.param_shapes = bool(param_shapes)
        self.param_counts = bool(param_counts)
        self.edge_shapes = edge_shapes
        self.breaks = BreakMarks(breaks)
        # label and tooltip text of tensors and ops, by what they show (many nodes share one)
        self._text_memo: dict[Any, Any] = {}
        self._sibling_names: dict[Any, Any] = {}  # for call_name, of the recording _sibling_of
        self._sibling_of: Optional[Graph] = None
        # op key -> the shapes of the tensors and ops that fed it (made when first needed)
        self._op_inputs: Optional[OpInputShapes] = None
        #: the label :meth:`style_node` made last (a subclass may format it into its own text)
        self.last_label: Optional[str] = None
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; choose from {sorted(PRESETS)}")
        self.styles: dict[str, dict[str, str]] = StyleTable(
            self.kinds, {k: dict(v) for k, v in DEFAULT_STYLES.items()})
        for kind, attrs in PRESETS[preset].items():
            self.styles[kind].update(attrs)
        align = styler_args.pop("align", None)
        if align is not None:
            if str(align).lower() not in _ALIGN:
                raise ValueError(f"align must be one of {', '.join(map(repr, _ALIGN))}, got {align!r}")
            self.styles["cluster"]["labeljust"] = _ALIGN[str(align).lower()]
        for arg, value in styler_args.items():
            if arg.endswith("_attrs"):
                kind = arg[: -len("_attrs")]
                if kind not in KIND_ARGS:
                    if arg in NAMED_ELSEWHERE:
                        raise TypeError(f"unknown keyword argument {arg!r} ({NAMED_ELSEWHERE[arg]})")
                    raise TypeError(f"unknown styler argument {arg!r}; per-kind arguments are "
                                    + ", ".join(f"{k}_attrs" for k in KIND_ARGS))
                if not isinstance(value, Mapping):
                    raise TypeError(f"{arg} must be a mapping of Graphviz attributes")
                for name in value:
                    check_kind_attribute(arg, str(name), self.node_attributes)
                self.styles[kind].update({str(k): str(v) for k, v in value.items()})
            else:
                if arg in GRAPH_ATTRIBUTES:
                    self.styles["graph"][arg] = str(value)
                    continue
                check_node_attribute(arg, self.node_attributes)
                for node_kind in ("layer", "tensor", "io", "param", "op"):
                    self.styles[node_kind][arg] = str(value)
        # fontname= sets the typeface of the whole drawing (cluster titles, edge labels, the
        # legend too), as 1.0.3 set it on the graph as well; a KIND_attrs fontname stays
        if styler_args.get("fontname") is not None:
            for kind in ("cluster", "folded_cluster", "edge", "param_edge", "graph"):
                if "fontname" not in (styler_args.get(f"{kind}_attrs") or {}):
                    self.styles[kind]["fontname"] = str(styler_args["fontname"])
        # the sizes of a box's second lines follow the size of its name (11 points: 9, 8, 7),
        # never under 6 points
        try:
            size = float(self.styles["layer"].get("fontsize", 11))
        except ValueError:
            size = 11.0
        self._type_size = _clamp(size - 1, 9)
        self._type_line = _TYPE_LINE.replace('"9"', f'"{self._type_size:g}"')
        self._small = _SMALL.replace('"8"', f'"{_clamp(size - 2, 8):g}"')
        self._tiny = _TINY.replace('"7"', f'"{max(_clamp(size - 3, 7), 7.0 if size >= 9 else 6.0):g}"')
        # the tensor style as made here: what code edits later through styles[TensorNode] is
        # applied to the network's inputs and outputs too, as in 1.0.3
        self._tensor_made = dict(self.styles["tensor"])

    def _row_gap(self, kind: str) -> int:
        """Points between the stacked lines of a ``kind`` node's label: Graphviz sets lines
        their point size apart, and the line of a font such as DejaVu is 1.164 em tall
        (ascent and descent), so 17 % of the size goes between them, at least a point."""
        try:
            size = float(self.styles[kind].get("fontsize", 14))
        except ValueError:
            size = 14.0
        return max(1, math.ceil(0.17 * size))

    def _text(self, text: object) -> str:
        """``text`` for a label: shortened to :attr:`max_label_chars`, escaped."""
        return html_text(shorten(str(text), self.max_label_chars))

    def kind_of(self, node: BaseNode) -> str:
        """The style kind of ``node`` (``"layer"``, ``"tensor"``, ``"io"``, ``"param"``, ``"op"``),
        from :attr:`kinds` (see :func:`torchrecorder.projection.kind_of`)."""
        return _kind_of(node, self.kinds)

    def graph_attrs(self) -> dict[str, str]:
        """Attributes of the whole graph."""
        return dict(self.styles["graph"])

    def style_node(self, node: BaseNode) -> dict[str, str]:
        """Attributes (label included) of ``node`` drawn as a single node."""
        kind = self.kind_of(node)
        attrs = dict(self.styles[kind])
        if kind == "io" and "tensor" in getattr(self.styles, "by_class", ()):
            made = getattr(self, "_tensor_made", {})
            attrs.update({k: v for k, v in self.styles["tensor"].items() if made.get(k) != v})
        label = self.label(node)
        attrs["label"] = HtmlLabel(label) if label.startswith("<") and label.endswith(">") else label
        self.last_label = attrs["label"]  # (found again in a label a subclass formats it into)
        found = self.breaks.at(self.rec, node, inside=True) if isinstance(node, LayerNode) else []
        attrs["tooltip"] = tooltip_text(self.tooltip(node) + (self.breaks.tooltip(found)))
        if isinstance(node, (LayerNode, OpNode)) and node.error:
            attrs.update(self.styles["failed"])
        if kind == "tensor" and isinstance(node, TensorNode) and node.key not in self._read_keys():
            attrs.update(self.styles["unread"])  # drawn, as returned, but marked a dead end
            attrs["tooltip"] = tooltip_text(self.tooltip(node) + " (read by nothing)")
        return attrs | (self.styles["graph_break"] if found else {})

    def _read_keys(self) -> set[Key]:
        """The keys of the nodes that some node of the recording reads (found once)."""
        return self._memo(("read keys", id(self.rec)), lambda: {a for a, _ in self.rec.links}
                          if self.rec is not None else set())

    def style_cluster(self, node: LayerNode) -> dict[str, str]:
        """Attributes of an expanded layer, drawn as a cluster."""
        attrs = dict(self.styles["cluster"])
        count = not one_box_holds_all(self, node)
        title = node.call_title(dotted=True)
        attrs["label"] = cluster_label(self, node, title, count=count,
                                       lines=title_lines(self, node, title, count))
        own = self._own_layer_label(node)
        if own is not None:
            attrs["label"] = own
        found = self.breaks.at(self.rec, node, inside=False)
        attrs["tooltip"] = tooltip_text(self.tooltip(node) + self.breaks.tooltip(found))
        if node.error:
            attrs.update({k: v for k, v in self.styles["failed"].items() if k != "fillcolor"})
        return attrs | (self.styles["graph_break"] if found else {})

    def _own_layer_label(self, node: LayerNode) -> Optional[Any]:
        """The label this styler's own ``style_node`` gives the layer ``node`` where it differs
        from the default one, for the title of the layer's cluster; ``None`` for a styler that
        keeps the default label, or that has a ``style_cluster`` of its own.

        A layer is named the same whether it is drawn as a box or opened as a cluster: a styler
        that renames layers (as 1.0.3's did, whose ``style_node`` styled clusters too) renames
        the clusters as well.
        """
        cls = type(self)
        if (cls.style_node is GraphvizStyler.style_node
                or cls.style_cluster is not GraphvizStyler.style_cluster):
            return None
        own = self.style_node(node)
        label = own.get("label") if isinstance(own, Mapping) else None
        made = getattr(self, "last_label", None)  # what its ``super().style_node(node)`` gave
        if label is None or str(label) == str(GraphvizStyler.style_node(self, node).get("label")):
            return None
        if isinstance(label, str) and not isinstance(label, HtmlLabel):
            marked = label_markup(label, made)  # the default label formatted into text
            if marked is not label:
                return HtmlLabel(marked)
        return label

    def style_edge(self, fnode: BaseNode, tnode: BaseNode) -> dict[str, str]:
        """Attributes of the edge from ``fnode`` to ``tnode``; the data-movement operations
        left out on it (``all_ops=False``), if any, as its label."""
        attrs = dict(self.styles["param_edge" if isinstance(fnode, ParamNode) else "edge"])
        ops = self._edge_ops_text(fnode, tnode)
        if ops:
            attrs["label"] = edge_label([self._tiny.format(self._text(ops))])
            self._label_font(attrs)
        return attrs

    def _label_font(self, attrs: dict[str, str]) -> None:
        """Give an edge with a label the font of the edge style where its own style has none
        (a parameter's edge, ``param_edge``, labelled by the ``flatten`` it went through):
        Graphviz would write it in its default Times."""
        for key in ("fontname", "fontsize", "fontcolor"):
            value = self.styles["edge"].get(key)
            if value is not None:
                attrs.setdefault(key, value)

    def style_tensor_edge(self, fnode: BaseNode, tnode: BaseNode, tensor: TensorNode) -> dict[str, str]:
        """Attributes of an edge that carries ``tensor`` (drawn with ``tensor_nodes=False``): its
        shape, and below it the data-movement operations left out on the edge.

        A subclass's own :meth:`style_edge` styles these edges too: its
        attributes go over the default edge style, and a label it gives is kept.
        """
        attrs = dict(self.styles["param_edge" if isinstance(fnode, ParamNode) else "edge"])
        if type(self).style_edge is not GraphvizStyler.style_edge:  # a subclass's, over the defaults
            own = self.style_edge(fnode, tnode)
            if not isinstance(own, Mapping):
                raise TypeError(f"{type(self).__name__}.style_edge() must return a mapping of Graphviz "
                                f"attributes, got {type(own).__name__}")
            attrs.update(own)
            if "label" in own:
                attrs.setdefault("tooltip", tooltip_text(self.tooltip(tensor)))
                return attrs
        ops = self._edge_ops_text(fnode, tnode)
        tensors = self._edge_tensors(fnode, tnode, tensor)
        lines = []
        if self.edge_shapes == "all" or (self.edge_shapes == "changed"
                                         and not all(self._same_shape(fnode, t) for t in tensors)):
            # an edge that stands for several tensors says so: two shapes, else the first "+N"
            shapes = [self.label(t)[1:-1] for t in (tensors if len(tensors) <= 2 else tensors[:1])]
            lines.append(", ".join(shapes) + (f" +{len(tensors) - 1}" if len(tensors) > 2 else ""))
        if ops:
            lines.append(self._tiny.format(self._text(ops)))
        if lines:
            attrs["label"] = edge_label(lines)
            self._label_font(attrs)
        tip = "; ".join(self.tooltip(t) for t in tensors)
        attrs["tooltip"] = tooltip_text(tip + (f" ({ops})" if ops else ""))
        return attrs

    def _edge_tensors(self, fnode: BaseNode, tnode: BaseNode, tensor: TensorNode) -> tuple[TensorNode, ...]:
        """The tensors the edge carrying ``tensor`` stands for (the renderer's
        :meth:`~torchrecorder.renderer.base.BaseRenderer.edge_tensors`), in the order of a
        module's outputs (T5's hidden states before its position bias), else as recorded."""
        got = self.renderer.edge_tensors(fnode, tnode) if self.renderer is not None else ()
        if not got or got[0] is not tensor:
            return (tensor,)
        if len(got) > 1 and isinstance(fnode, LayerNode):
            outs = [tuple(shape) for shape in fnode.output_shapes]
            got = tuple(sorted(got, key=lambda t: outs.index(tuple(t.shape))
                               if t.shape is not None and tuple(t.shape) in outs else len(outs)))
        return got

    def style_fanout(self, fnode: BaseNode, tnodes: Sequence[BaseNode]) -> dict[str, str]:
        """Attributes of the mark that stands for the drawn nodes ``tnodes`` that ``fnode`` feeds,
        in a drawing over budget whose edges from ``fnode`` are shared (one edge to the mark):
        a small plain text ``"→ 32 × self_attn"`` (``"→ N boxes"`` where the boxes differ in
        name), the boxes listed in its tooltip."""
        names = [t.call_title(dotted=True) if isinstance(t, LayerNode) else t.name for t in tnodes]
        last = {name.rsplit(".", 1)[-1] for name in names}
        what = f" × {last.pop()}" if len(last) == 1 else " boxes"
        listed = ", ".join(names[:12]) + (", …" if len(names) > 12 else "")
        attrs = {"shape": "plain", "fontsize": "10", "label": f"→ {len(tnodes)}{what}",
                 "tooltip": tooltip_text(f"to {len(tnodes)}: {listed}")}
        font = self.styles["edge"].get("fontname")
        if font:
            attrs["fontname"] = font
        return attrs

    def style_carried_edge(self, fnode: BaseNode, tnode: BaseNode,
                           tensor: Optional[TensorNode]) -> dict[str, str]:
        """Attributes of an edge of a folded loop or run that carries a value from one iteration
        (or block) to another (carrying ``tensor``, if tensors are not drawn as nodes): the
        edge's own style (:meth:`style_edge`, :meth:`style_tensor_edge`), dashed, and not
        ranking its ends (``constraint=false``), since it goes back up the drawing."""
        attrs = (self.style_edge(fnode, tnode) if tensor is None
                 else self.style_tensor_edge(fnode, tnode, tensor))
        attrs = dict(attrs)
        attrs.update({"style": "dashed", "constraint": "false"})
        what = "carried to a later iteration"  # plain text: the tooltip's escaping keeps it
        attrs["tooltip"] = f"{attrs['tooltip']} ({what})" if attrs.get("tooltip") else what
        return attrs

    def _same_shape(self, fnode: BaseNode, tensor: TensorNode) -> bool:
        """Whether ``tensor`` has the shape of one of ``fnode``'s inputs (or is its shape, for
        an input of the network or a parameter): then the edge need not say it again."""
        if isinstance(fnode, TensorNode):
            return True
        if tensor.shape is None:
            return False
        try:
            shape = tuple(tensor.shape)
        except TypeError:
            return False
        if isinstance(fnode, LayerNode):
            return any(tuple(s) == shape for s in fnode.input_shapes)
        if isinstance(fnode, OpNode):
            return shape in self._op_input_shapes().get(fnode.key)
        return False

    def _edge_ops_text(self, fnode: BaseNode, tnode: BaseNode) -> str:
        """``view · transpose``: the operations the drawn edge stands for (repeats once)."""
        if self.renderer is None:
            return ""
        return ops_text(self.renderer.edge_ops(fnode, tnode))

    def tooltip(self, node: BaseNode) -> str:
        """Plain text shown when hovering over ``node`` in an SVG."""
        if isinstance(node, LayerNode):
            ins, outs = node.input_shapes, node.output_shapes
            shapes = self._memo(("shapes", *map(tuple, ins), None, *map(tuple, outs)),
                                lambda: shapes_text(ins, outs))
            text = f"{node.path or node.name} ({node.type_name}){shapes}"
            listed = listed_params(self.rec, node) if node.num_params_total else []
            if listed:
                text += " params: " + ", ".join(f"{p.name} {shape_str(p.shape)}" for p in listed)
            tied = tied_paths(self.rec, node)
            text += " tied: " + ", ".join(tied) if tied else ""
            note = node.run_note()
            text += f"; {note}" if note else ""
            text += f" raised {node.error}" if node.error else ""
            return text + self._code_at(node, "; called at ")
        if isinstance(node, ParamNode):
            return f"{node.path or node.name}: {shape_str(node.shape)} {node.dtype}"
        if isinstance(node, TensorNode):
            if node.role:
                return f"{node.name}: {shape_str(node.shape)} {node.dtype} on {node.device}"
            key: Any = ("tensor tooltip", node.shape, node.dtype, node.device)
            return self._memo(key, lambda: f"{shape_str(node.shape)} {node.dtype} on {node.device}")
        if isinstance(node, OpNode):
            if node.error:
                return f"{node.op} raised {node.error}" + self._code_at(node, " at ")
            key = ("op tooltip", node.op, node.source, *map(tuple, node.output_shapes))
            return self._memo(key, lambda: f"{node.op} -> " + ", ".join(map(shape_str, node.output_shapes))
                              + self._code_at(node, " at "))
        return node.name

    def _code_at(self, node: BaseNode, words: str) -> str:
        """``words`` and ``file:line`` of ``node``'s line of code, unless the line is in the script
        that recorded the network (the network's call, a ``Sequential``'s layers): not the model's."""
        script = self._memo(("script lines",), lambda: script_lines(self.rec))
        return f"{words}{node.source.where()}" if node.source and node.source not in script else ""

    def _memo(self, key: Any, make: Callable[[], T]) -> T:
        """``make()``, remembered under ``key`` for this styler."""
        try:
            got = self._text_memo.get(key)
        except TypeError:  # an unhashable shape
            return make()
        if got is None:
            got = self._text_memo[key] = make()
        return got

    def _param_name(self, node: ParamNode) -> str:
        """The parameter's name where the renderer draws it (see
        :meth:`~torchrecorder.projection.Projection.param_name`)."""
        renderer = self.renderer
        if renderer is None or renderer.rec is not self.rec:
            return node.name
        return renderer.projection.param_name(node)

    def label(self, node: BaseNode) -> str:
        """The HTML-like label of ``node``; all text in it is escaped.

        A layer shows its name, type, parameter shapes (up to three) and
        count; a tensor its shape (and dtype unless float32); a parameter its
        name and shape; an op the name of the function that ran.
        """
        if isinstance(node, LayerNode):
            graph = self.rec
            if not isinstance(graph, Graph):
                return self._layer_label(node, node.call_title())
            if self._sibling_of is not graph:  # a memo per recording drawn
                self._sibling_of, self._sibling_names = graph, {}
            return self._layer_label(node, call_name(graph, node, self._sibling_names))
        if isinstance(node, ParamNode):
            return stacked_label(self._row_gap("param"), [self._text(self._param_name(node)),
                             self._small.format(self._text(shape_str(node.shape)
                                                           + dtype_suffix(node.dtype)))])
        if isinstance(node, TensorNode):
            if node.role:
                shape = self._text(shape_str(node.shape) + dtype_suffix(node.dtype))
                return stacked_label(self._row_gap("io"), [f"<B>{self._text(node.name)}</B>", shape])
            key = ("tensor label", node.shape, node.dtype)
            return self._memo(
                key, lambda: f"<{self._text(shape_str(node.shape) + dtype_suffix(node.dtype))}>")
        if isinstance(node, OpNode):
            if node.error:  # the operation a failed recording stopped in: it made nothing
                raised = self._small.format(self._text("raised " + node.error.split(":")[0]))
                return stacked_label(self._row_gap("op"), [self._text(node.op), raised])
            new_shape = self._new_shape(node)
            if new_shape is None:
                return f"<{self._text(node.op)}>"
            return stacked_label(self._row_gap("op"),
                            [self._text(node.op), self._small.format(self._text(new_shape))])
        return f"<{self._text(node.name)}>"

    def _op_input_shapes(self) -> OpInputShapes:
        """Each operation's input shapes, indexed by the predecessors the renderer's projection
        already holds (when it draws this styler's recording)."""
        if self._op_inputs is None:
            renderer = self.renderer
            preds = None
            if renderer is not None and renderer.rec is self.rec:
                preds = lambda: renderer.projection.preds  # noqa: E731 - read on first need
            self._op_inputs = OpInputShapes(self.rec, preds)
        return self._op_inputs

    def _new_shape(self, node: OpNode) -> Optional[str]:
        """The output shape of ``node`` if it differs from every input's, as text (a matmul,
        the head split of attention), else ``None``."""
        if len(node.output_shapes) != 1:
            return None
        out = tuple(node.output_shapes[0])
        if out in self._op_input_shapes().get(node.key):
            return None
        return shape_str(out)

    def _layer_label(self, node: LayerNode, title: str, repeat: int = 1) -> str:
        type_name = node.type_name
        total = node.num_params_total
        # 1.0.3's name of a module, "conv1\n(Conv2d)", given while 1.0.3 code draws: two lines
        first, *rest = title.split("\n") if isinstance(node.name, SeedName) else (title,)
        if isinstance(node.name, SeedName) and title.startswith(node.name):
            # a later call, "0\n(Linear) #2": the call's mark goes with the name, on the first line
            first, *rest = node.name.split("\n")
            first += title[len(node.name):]
        # its "(Conv2d)" line says what the type line below says: shown once
        rest = [r for r in rest if r != f"({type_name})"]
        lines = [f"<B>{self._text(first)}</B>", *(self._type_line.format(self._text(r)) for r in rest)]
        if type(self).param_lines is GraphvizStyler.param_lines:
            # the type and the parameter count on one line; the shapes below it if asked for
            count = param_count_text(self.rec, node) if total and self.param_counts else ""
            lines.append(self._memo(("type", type_name, count), lambda: self._type_line.format(
                self._text(type_name + (f" · {count}" if count else "")))))
            if self.param_shapes and total:
                listed = listed_params(self.rec, node)
                key = ("params", total, *[(p.name, p.shape) for p in listed])
                lines.extend(self._memo(key, lambda: tuple(
                    self._small.format(self._text(p)) for p in params_text(listed, total)[:-1])))
        else:  # a subclass's own lines
            lines.append(self._memo(("type", type_name),
                                    lambda: self._type_line.format(self._text(type_name))))
            lines.extend(self._small.format(self._text(p)) for p in self.param_lines(node))
        if repeat > 1:
            # no larger than the line above it: Graphviz would set a larger line's top into it
            lines.append(self._type_line.format(f"<B>×{repeat}</B>"))
        note = node.run_note()
        if note:
            lines.append(f"<I>{self._small.format(html_text(note))}</I>")
        if node.error:
            lines.append(self._small.format(self._text("raised " + node.error.split(":")[0])))
        lines.extend(self.breaks.badges(self.rec, node, inside=True))
        return stacked_label(self._row_gap("layer"), lines)

    def param_lines(self, node: LayerNode) -> list[str]:
        """Parameter shapes (up to three) and count of a module, from the recording's metadata."""
        return param_lines(self.rec, node)

    def style_repeated(self, node: LayerNode, run: Sequence[LayerNode], expanded: bool) -> dict[str, str]:
        """Attributes of the first block of a folded run of ``len(run)`` identical blocks.

        Its title spans the run and it is marked ``×12``, named as the blocks would be
        unfolded: a box by the blocks' names (``0 … 11``, as a box reads ``0``), a cluster by
        their dotted paths (``layers.0 … layers.11``, as a cluster's title reads ``layers.0``).
        """
        if expanded:
            attrs = self.style_cluster(node)
            title = run_title(list(run), dotted=True)
            attrs["label"] = cluster_label(self, node, title, len(run))
            attrs.update(self.styles["folded_cluster"])
        else:
            attrs = self.style_node(node)
            attrs["label"] = self._layer_label(node, run_title(list(run), dotted=False), len(run))
            attrs.update(self.styles["folded"])
        what = (iterations_text(node, len(run)) if isinstance(node, LoopNode)
                else f"{len(run)} identical blocks")
        attrs["tooltip"] = tooltip_text(f"{what}: " + self.tooltip(node))
        return attrs


_SMALL = '<FONT POINT-SIZE="8" COLOR="#444444">{}</FONT>'
# align= (the original torchrecorder's option) -> the clusters' labeljust
_ALIGN = {"left": "l", "center": "c", "centre": "c", "right": "r"}
_TYPE_LINE = '<FONT POINT-SIZE="9" COLOR="#555555">{}</FONT>'
_TINY = '<FONT POINT-SIZE="7" COLOR="#666666">{}</FONT>'


def _clamp(size: float, most: float) -> float:
    """``size`` rounded to a whole point, between 6 (the smallest readable print) and ``most``."""
    return float(max(6, min(most, round(size))))

