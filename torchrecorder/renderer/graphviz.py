"""Draw a recording with Graphviz: :class:`GraphvizStyler` picks looks, :class:`GraphvizRenderer` draws."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, Optional

import graphviz
from graphviz.quoting import quote

from .._text import dot_id, dot_text, html_text
from ..nodes import BaseNode, LayerNode, OpNode, ParamNode, TensorNode, shape_str
from ..recorder import Recorder
from ._labels import dtype_suffix, param_lines, run_title
from .base import BaseRenderer, FoldRepeats
from .notebook import mimebundle

__all__ = ["DEFAULT_STYLES", "PRESETS", "GraphvizRenderer", "GraphvizStyler", "RecordingDigraph"]

_FONT = "Helvetica,Arial,sans-serif"

#: The default Graphviz attributes of each kind of element; copy it to customise.
DEFAULT_STYLES: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "graph": MappingProxyType({
        "rankdir": "TB", "fontname": _FONT, "fontsize": "11", "nodesep": "0.25",
        "ranksep": "0.3", "bgcolor": "white", "newrank": "true",
    }),
    "layer": MappingProxyType({
        "shape": "box", "style": "rounded,filled", "fillcolor": "#dbe8f5", "color": "#4a77a8",
        "fontname": _FONT, "fontsize": "11", "margin": "0.12,0.05", "penwidth": "1.2",
    }),
    "tensor": MappingProxyType({
        "shape": "box", "style": "filled", "fillcolor": "#f4f4f4", "color": "#9a9a9a",
        "fontname": _FONT, "fontsize": "9", "height": "0.25", "margin": "0.06,0.02",
    }),
    "io": MappingProxyType({
        "shape": "box", "style": "filled,bold", "fillcolor": "#e2f2df", "color": "#4f8a45",
        "fontname": _FONT, "fontsize": "10", "margin": "0.1,0.04",
    }),
    "param": MappingProxyType({
        "shape": "box", "style": "filled", "fillcolor": "#fcf0c8", "color": "#b39533",
        "fontname": _FONT, "fontsize": "9", "height": "0.25", "margin": "0.06,0.02",
    }),
    "op": MappingProxyType({
        "shape": "box", "style": "rounded,filled", "fillcolor": "#ede4f3", "color": "#8a6aa6",
        "fontname": _FONT, "fontsize": "9", "height": "0.25", "margin": "0.06,0.02",
    }),
    "cluster": MappingProxyType({
        "style": "rounded,dashed", "color": "#7d8fa3", "fontname": _FONT, "fontsize": "10",
        "labeljust": "l", "margin": "10",
    }),
    "edge": MappingProxyType({"color": "#555555", "arrowsize": "0.6", "penwidth": "1.0",
                              "fontname": _FONT, "fontsize": "8", "fontcolor": "#444444"}),
    "param_edge": MappingProxyType({"color": "#b39533", "style": "dashed", "arrowsize": "0.5"}),
    "failed": MappingProxyType({"fillcolor": "#f8cccc", "color": "#c0392b", "penwidth": "2.5"}),
    "folded": MappingProxyType({"peripheries": "2", "penwidth": "1.4"}),
    "folded_cluster": MappingProxyType({"style": "rounded,bold", "penwidth": "2"}),
})

#: Named sets of overrides on :data:`DEFAULT_STYLES`, chosen with ``preset=``:
#:
#: * ``"default"``: soft colours per node kind, for screens and slides;
#: * ``"compact"``: smaller fonts and tighter spacing, for large models;
#: * ``"print"``: black and grey, serif fonts, kinds told apart by shape
#:   (grey layer boxes, white tensor boxes, dashed parameters, elliptic ops),
#:   for papers and greyscale printing.
PRESETS: Mapping[str, Mapping[str, Mapping[str, str]]] = MappingProxyType({
    "default": MappingProxyType({}),
    "compact": MappingProxyType({
        "graph": {"nodesep": "0.15", "ranksep": "0.2", "fontsize": "9"},
        "layer": {"fontsize": "9", "margin": "0.06,0.02"},
        "io": {"fontsize": "8", "margin": "0.06,0.02"},
        "cluster": {"fontsize": "8", "margin": "6"},
        "tensor": {"fontsize": "8"}, "param": {"fontsize": "8"}, "op": {"fontsize": "8"},
    }),
    "print": MappingProxyType({
        "graph": {"fontname": "Times-Roman"},
        "layer": {"fillcolor": "#eeeeee", "color": "black", "fontname": "Times-Roman"},
        "tensor": {"fillcolor": "white", "color": "#444444", "fontname": "Times-Roman"},
        "io": {"fillcolor": "white", "color": "black", "fontname": "Times-Roman"},
        "param": {"fillcolor": "white", "color": "#444444", "style": "filled,dashed",
                  "fontname": "Times-Roman"},
        "op": {"fillcolor": "white", "color": "#444444", "shape": "ellipse", "fontname": "Times-Roman"},
        "cluster": {"color": "#444444", "fontname": "Times-Roman"},
        "edge": {"color": "black"},
        "param_edge": {"color": "#444444"},
        "failed": {"fillcolor": "#cccccc", "color": "black"},
    }),
})

_KIND_ARGS = ("graph", "layer", "tensor", "io", "param", "op", "cluster", "edge", "param_edge",
              "failed", "folded", "folded_cluster")


class RecordingDigraph(graphviz.Digraph):
    """A :class:`graphviz.Digraph` that shows itself in Jupyter at a readable size.

    It renders with whichever Graphviz torchrecorder finds (``dot`` or
    pygraphviz) and lets a wide graph scroll instead of shrinking it.
    """

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None,
                          **kwargs: Any) -> dict[str, str]:
        text = f"<torchrecorder drawing {self.name!r}: {len(self.body)} DOT statements>"
        return mimebundle(self.source, text, include=include, exclude=exclude)


class GraphvizStyler:
    """Provide the Graphviz attributes of each node, cluster and edge.

    Styles are looked up by node kind through the class hierarchy, so a node
    subclass gets its base class's style.  Arguments:

    Args:
        preset: a name from :data:`PRESETS` (``"default"``, ``"compact"``,
            ``"print"``).
        **styler_args: ``KIND_attrs={...}`` (``layer_attrs``, ``tensor_attrs``,
            ``io_attrs``, ``param_attrs``, ``op_attrs``, ``cluster_attrs``,
            ``edge_attrs``, ``graph_attrs``, ...) override one kind; any other
            keyword is a Graphviz node attribute applied to every node, as in the
            original torchrecorder (``fontname="Times"``).  The kinds are
            ``layer`` (a module drawn as one box), ``cluster`` (an expanded
            module), ``tensor``, ``io`` (the network's inputs and outputs),
            ``param``, ``op``, ``edge``, ``param_edge``, ``failed`` (a module
            that raised), ``folded`` and ``folded_cluster`` (a run of repeated
            blocks drawn once) and ``graph``.

    Attributes:
        styles: kind -> Graphviz attributes in use (a copy; safe to change).
        rec: the recording being drawn, set by the renderer (``None`` before).

    Subclasses usually override :meth:`label` or :meth:`style_node`.

    >>> GraphvizStyler(preset="print", layer_attrs={"fillcolor": "red"}).styles["layer"]["fillcolor"]
    'red'
    """

    rec: Optional[Recorder] = None

    #: node class -> style kind, searched along the node's MRO
    kinds: ClassVar[Mapping[type, str]] = MappingProxyType({
        LayerNode: "layer", ParamNode: "param", TensorNode: "tensor", OpNode: "op",
    })

    def __init__(self, preset: str = "default", **styler_args: Any) -> None:
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; choose from {sorted(PRESETS)}")
        self.styles: dict[str, dict[str, str]] = {k: dict(v) for k, v in DEFAULT_STYLES.items()}
        for kind, attrs in PRESETS[preset].items():
            self.styles[kind].update(attrs)
        for arg, value in styler_args.items():
            if arg.endswith("_attrs"):
                kind = arg[: -len("_attrs")]
                if kind not in _KIND_ARGS:
                    raise TypeError(f"unknown styler argument {arg!r}; per-kind arguments are "
                                    + ", ".join(f"{k}_attrs" for k in _KIND_ARGS))
                if not isinstance(value, Mapping):
                    raise TypeError(f"{arg} must be a mapping of Graphviz attributes")
                self.styles[kind].update({str(k): str(v) for k, v in value.items()})
            else:
                for node_kind in ("layer", "tensor", "io", "param", "op"):
                    self.styles[node_kind][arg] = str(value)

    def kind_of(self, node: BaseNode) -> str:
        """The style kind of ``node`` (``"layer"``, ``"tensor"``, ``"io"``, ``"param"``, ``"op"``)."""
        for cls in type(node).__mro__:
            kind = self.kinds.get(cls)
            if kind is not None:
                if kind == "tensor" and getattr(node, "role", None):
                    return "io"
                return kind
        raise TypeError(f"no style for node type {type(node).__name__}")

    def graph_attrs(self) -> dict[str, str]:
        """Attributes of the whole graph."""
        return dict(self.styles["graph"])

    def style_node(self, node: BaseNode) -> dict[str, str]:
        """Attributes (label included) of ``node`` drawn as a single node."""
        attrs = dict(self.styles[self.kind_of(node)])
        attrs["label"] = self.label(node)
        attrs["tooltip"] = dot_text(self.tooltip(node))
        if isinstance(node, LayerNode) and node.error:
            attrs.update(self.styles["failed"])
        return attrs

    def style_cluster(self, node: LayerNode) -> dict[str, str]:
        """Attributes of an expanded layer, drawn as a cluster."""
        attrs = dict(self.styles["cluster"])
        title = node.path or node.name
        if node.call_index > 1:
            title += f" #{node.call_index}"
        attrs["label"] = self._cluster_label(node, title)
        attrs["tooltip"] = dot_text(self.tooltip(node))
        if node.error:
            attrs.update({k: v for k, v in self.styles["failed"].items() if k != "fillcolor"})
        return attrs

    def style_edge(self, fnode: BaseNode, tnode: BaseNode) -> dict[str, str]:
        """Attributes of the edge from ``fnode`` to ``tnode``."""
        return dict(self.styles["param_edge" if isinstance(fnode, ParamNode) else "edge"])

    def style_tensor_edge(self, fnode: BaseNode, tnode: BaseNode, tensor: TensorNode) -> dict[str, str]:
        """Attributes of an edge that carries ``tensor`` (drawn with ``tensor_nodes=False``): its shape."""
        attrs = self.style_edge(fnode, tnode)
        attrs["label"] = self.label(tensor)
        attrs["tooltip"] = dot_text(self.tooltip(tensor))
        return attrs

    def tooltip(self, node: BaseNode) -> str:
        """Plain text shown when hovering over ``node`` in an SVG."""
        if isinstance(node, LayerNode):
            text = f"{node.path or node.name} ({node.type_name})"
            if node.input_shapes:
                text += " in: " + ", ".join(shape_str(s) for s in node.input_shapes)
            if node.output_shapes:
                text += " out: " + ", ".join(shape_str(s) for s in node.output_shapes)
            return text + (f" raised {node.error}" if node.error else "")
        if isinstance(node, ParamNode):
            return f"{node.path or node.name}: {shape_str(node.shape)} {node.dtype}"
        if isinstance(node, TensorNode):
            text = f"{shape_str(node.shape)} {node.dtype} on {node.device}"
            return f"{node.name}: {text}" if node.role else text
        if isinstance(node, OpNode):
            return f"{node.op} -> " + ", ".join(shape_str(s) for s in node.output_shapes)
        return node.name

    def label(self, node: BaseNode) -> str:
        """The HTML-like label of ``node``; all text in it is escaped.

        A layer shows its name, type, parameter shapes (up to three) and
        count; a tensor its shape (and dtype unless float32); a parameter its
        name and shape; an op the name of the function that ran.
        """
        if isinstance(node, LayerNode):
            title = node.name if node.call_index == 1 else f"{node.name} #{node.call_index}"
            return self._layer_label(node, title)
        if isinstance(node, ParamNode):
            return (f"<{html_text(node.name)}<BR/>"
                    + _SMALL.format(html_text(shape_str(node.shape) + dtype_suffix(node.dtype))) + ">")
        if isinstance(node, TensorNode):
            shape = html_text(shape_str(node.shape) + dtype_suffix(node.dtype))
            if node.role:
                return f"<<B>{html_text(node.name)}</B><BR/>{shape}>"
            return f"<{shape}>"
        if isinstance(node, OpNode):
            return f"<{html_text(node.op)}>"
        return f"<{html_text(node.name)}>"

    def _layer_label(self, node: LayerNode, title: str, repeat: int = 1) -> str:
        lines = [f"<B>{html_text(title)}</B>",
                 f'<FONT POINT-SIZE="9" COLOR="#555555">{html_text(node.type_name)}</FONT>']
        lines.extend(_SMALL.format(html_text(p)) for p in self.param_lines(node))
        if repeat > 1:
            lines.append(f"<B>×{repeat}</B>")
        if node.error:
            lines.append(_SMALL.format(html_text("raised " + node.error.split(":")[0])))
        return "<" + "<BR/>".join(lines) + ">"

    def param_lines(self, node: LayerNode) -> list[str]:
        """Parameter shapes (up to three) and count of a module, from the recording's metadata."""
        return param_lines(self.rec, node)

    def style_repeated(self, node: LayerNode, run: Sequence[LayerNode], expanded: bool) -> dict[str, str]:
        """Attributes of the first block of a folded run of ``len(run)`` identical blocks.

        Its title spans the run (``layers.0 … layers.11``) and it is marked ``×12``.
        """
        if expanded:
            attrs = self.style_cluster(node)
            title = run_title(list(run), dotted=True)
            attrs["label"] = self._cluster_label(node, title, len(run))
            attrs.update(self.styles["folded_cluster"])
        else:
            attrs = self.style_node(node)
            attrs["label"] = self._layer_label(node, run_title(list(run), dotted=True), len(run))
            attrs.update(self.styles["folded"])
        attrs["tooltip"] = dot_text(f"{len(run)} identical blocks: " + self.tooltip(node))
        return attrs


    def _cluster_label(self, node: LayerNode, title: str, repeat: int = 1) -> str:
        """``title Type ×N  N params``: the dotted path in bold, the type in grey."""
        text = f'<B>{html_text(title)}</B> <FONT COLOR="#555555">{html_text(node.type_name)}</FONT>'
        if repeat > 1:
            text += f" <B>×{repeat}</B>"
        if node.num_params_total:
            text += " " + _SMALL.format(html_text(param_lines(None, node)[-1]))
        return f"<{text}>"


_SMALL = '<FONT POINT-SIZE="8" COLOR="#444444">{}</FONT>'


class GraphvizRenderer(BaseRenderer):
    """Render a :class:`~torchrecorder.recorder.Recorder` into a :class:`graphviz.Digraph`.

    Args:
        rec: the recording.
        render_depth: see :class:`~torchrecorder.renderer.base.BaseRenderer`.
        styler_cls: a :class:`GraphvizStyler` subclass (default: ``GraphvizStyler``).
        fold_repeats: see :class:`~torchrecorder.renderer.base.BaseRenderer`.
        tensor_nodes: see :class:`~torchrecorder.renderer.base.BaseRenderer`;
            ``None`` (the default) draws tensors as nodes except with
            ``preset="compact"``, which writes their shapes on the edges.
        **styler_args: passed to ``styler_cls``.

    Attributes:
        styler: the :class:`GraphvizStyler` instance in use.
    """

    def __init__(self, rec: Recorder, render_depth: int = 256,
                 styler_cls: Optional[type[GraphvizStyler]] = None, *,
                 fold_repeats: FoldRepeats = "auto", tensor_nodes: Optional[bool] = None,
                 **styler_args: Any) -> None:
        if tensor_nodes is None:
            tensor_nodes = styler_args.get("preset") != "compact"
        super().__init__(rec, render_depth, fold_repeats=fold_repeats, tensor_nodes=tensor_nodes)
        cls = styler_cls if styler_cls is not None else GraphvizStyler
        self.styler = cls(**styler_args)
        self.styler.rec = rec
        self._qids: dict[Any, str] = {}
        self._quoted: dict[tuple[tuple[str, str], ...], str] = {}

    def node_id(self, node: BaseNode) -> str:
        """The unique, readable DOT id of ``node``."""
        return self.unique_id(node, dot_id)

    def new_graph(self) -> graphviz.Digraph:
        """An empty Digraph carrying the styler's graph attributes (it shows itself in Jupyter)."""
        return RecordingDigraph(name=dot_id(self.rec.name), graph_attr=self.styler.graph_attrs())

    def render_node(self, g: graphviz.Digraph, node: BaseNode) -> None:
        """Draw ``node`` as one Graphviz node, or as a cluster if it is an expanded layer."""
        if self.is_expanded(node):
            assert isinstance(node, LayerNode)
            self.render_recursive_node(g, node)
            return
        run = self.repeats(node)
        if len(run) > 1:
            assert isinstance(node, LayerNode)
            attrs = self._checked(self.styler.style_repeated(node, run, False), "style_repeated")
        else:
            attrs = self._checked(self.styler.style_node(node), "style_node")
        g.body.append(f"\t{self._quoted_id(node)} [{self._attr_list(attrs)}]\n")

    #: a node feeding more drawn nodes than this does not constrain their ranks
    #: (rotary tables or a mask fed to all 80 layers of an unfolded Llama: the
    #: layout takes seconds instead of minutes)
    max_constraining_fanout = 8

    def render_recursive_node(self, g: graphviz.Digraph, node: LayerNode) -> None:
        """Draw the expanded layer ``node`` as a cluster holding its children."""
        run = self.repeats(node)
        if len(run) > 1:
            attrs = self._checked(self.styler.style_repeated(node, run, True), "style_repeated")
        else:
            attrs = self._checked(self.styler.style_cluster(node), "style_cluster")
        with g.subgraph(name="cluster_" + self.node_id(node)) as sub:
            sub.attr(**attrs)
            for child in self.children(node):
                self.render_node(sub, child)

    def render_edge(self, g: graphviz.Digraph, fnode: BaseNode, tnode: BaseNode) -> None:
        """Draw the edge from ``fnode`` to ``tnode``."""
        tensor = self.edge_tensor(fnode, tnode)
        if tensor is not None:
            attrs = self._checked(self.styler.style_tensor_edge(fnode, tnode, tensor), "style_tensor_edge")
        else:
            attrs = self._checked(self.styler.style_edge(fnode, tnode), "style_edge")
        if self.out_degree(fnode) > self.max_constraining_fanout:
            attrs.setdefault("constraint", "false")
        line = f"\t{self._quoted_id(fnode)} -> {self._quoted_id(tnode)} [{self._attr_list(attrs)}]\n"
        g.body.append(line)

    # DOT statements are written here rather than through Digraph.node/edge: same text,
    # but each distinct attribute is quoted once per drawing instead of once per use.
    def _quoted_id(self, node: BaseNode) -> str:
        got = self._qids.get(node.key)
        if got is None:
            got = self._qids[node.key] = quote(self.node_id(node))
        return got

    @staticmethod
    def _quote_label(label: str) -> str:
        # an HTML-like label is written as it is, as the graphviz package does
        return label if label.startswith("<") and label.endswith(">") else quote(label)

    def _attr_list(self, attrs: dict[str, str]) -> str:
        """``label=... key=value ... tooltip=...``, quoted as the graphviz package quotes.

        Everything but the label and the tooltip usually repeats from node to
        node, so that part is formatted once per distinct set of attributes.
        """
        label = attrs.pop("label", None)
        tooltip = attrs.pop("tooltip", None)
        key = tuple(attrs.items())
        rest = self._quoted.get(key)
        if rest is None:
            rest = self._quoted[key] = " ".join(f"{quote(k)}={quote(v)}" for k, v in sorted(key))
        parts = [rest] if rest else []
        if label is not None:
            parts.insert(0, f"label={self._quote_label(label)}")
        if tooltip is not None:
            parts.append(f"tooltip={quote(tooltip)}")
        return " ".join(parts)

    def _checked(self, attrs: Any, method: str) -> dict[str, str]:
        if not isinstance(attrs, Mapping):
            raise TypeError(f"{type(self.styler).__name__}.{method}() must return a mapping of "
                            f"Graphviz attributes, got {type(attrs).__name__}")
        out = dict(attrs)
        for k, v in out.items():
            if type(k) is not str or type(v) is not str:
                return {str(k): str(v) for k, v in out.items()}
        return out
