"""How a recording looks in Graphviz: :class:`GraphvizStyler` gives each node, cluster and edge
its attributes, from :data:`DEFAULT_STYLES` and a named preset of :data:`PRESETS`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, Optional, TypeVar

from .._text import dot_text, html_text
from ..graph import Graph
from ..nodes import BaseNode, LayerNode, OpNode, ParamNode, TensorNode, shape_str
from ..projection import NODE_KINDS
from ..projection import kind_of as _kind_of
from .labels import dtype_suffix, listed_params, param_lines, params_text, run_title

__all__ = ["DEFAULT_STYLES", "KIND_ARGS", "PRESETS", "GraphvizStyler"]

T = TypeVar("T")

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

#: The kinds of element a styler styles (``KIND_attrs=`` arguments): the node kinds of
#: :data:`~torchrecorder.projection.NODE_KINDS`, the states ``failed`` and ``folded``,
#: clusters, edges and the graph itself.
KIND_ARGS = ("graph", "layer", "tensor", "io", "param", "op", "cluster", "edge", "param_edge",
              "failed", "folded", "folded_cluster")


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

    rec: Optional[Graph] = None

    #: node class -> style kind, searched along the node's MRO
    kinds: ClassVar[Mapping[type, str]] = NODE_KINDS

    def __init__(self, preset: str = "default", **styler_args: Any) -> None:
        # label and tooltip text of tensors and ops, by what they show (many nodes share one)
        self._text_memo: dict[Any, Any] = {}
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; choose from {sorted(PRESETS)}")
        self.styles: dict[str, dict[str, str]] = {k: dict(v) for k, v in DEFAULT_STYLES.items()}
        for kind, attrs in PRESETS[preset].items():
            self.styles[kind].update(attrs)
        for arg, value in styler_args.items():
            if arg.endswith("_attrs"):
                kind = arg[: -len("_attrs")]
                if kind not in KIND_ARGS:
                    raise TypeError(f"unknown styler argument {arg!r}; per-kind arguments are "
                                    + ", ".join(f"{k}_attrs" for k in KIND_ARGS))
                if not isinstance(value, Mapping):
                    raise TypeError(f"{arg} must be a mapping of Graphviz attributes")
                self.styles[kind].update({str(k): str(v) for k, v in value.items()})
            else:
                for node_kind in ("layer", "tensor", "io", "param", "op"):
                    self.styles[node_kind][arg] = str(value)

    def kind_of(self, node: BaseNode) -> str:
        """The style kind of ``node`` (``"layer"``, ``"tensor"``, ``"io"``, ``"param"``, ``"op"``),
        from :attr:`kinds` (see :func:`torchrecorder.projection.kind_of`)."""
        return _kind_of(node, self.kinds)

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
        attrs["label"] = self._cluster_label(node, node.call_title(dotted=True))
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
            ins, outs = node.input_shapes, node.output_shapes
            shapes = self._memo(("shapes", *map(tuple, ins), None, *map(tuple, outs)),
                                lambda: _shapes_text(ins, outs))
            text = f"{node.path or node.name} ({node.type_name}){shapes}"
            note = node.run_note()
            text += f"; {note}" if note else ""
            return text + (f" raised {node.error}" if node.error else "")
        if isinstance(node, ParamNode):
            return f"{node.path or node.name}: {shape_str(node.shape)} {node.dtype}"
        if isinstance(node, TensorNode):
            if node.role:
                return f"{node.name}: {shape_str(node.shape)} {node.dtype} on {node.device}"
            key: Any = ("tensor tooltip", node.shape, node.dtype, node.device)
            return self._memo(key, lambda: f"{shape_str(node.shape)} {node.dtype} on {node.device}")
        if isinstance(node, OpNode):
            key = ("op tooltip", node.op, *map(tuple, node.output_shapes))
            return self._memo(key, lambda: f"{node.op} -> " + ", ".join(map(shape_str, node.output_shapes)))
        return node.name

    def _memo(self, key: Any, make: Callable[[], T]) -> T:
        """``make()``, remembered under ``key`` for this styler."""
        try:
            got = self._text_memo.get(key)
        except TypeError:  # an unhashable shape
            return make()
        if got is None:
            got = self._text_memo[key] = make()
        return got

    def label(self, node: BaseNode) -> str:
        """The HTML-like label of ``node``; all text in it is escaped.

        A layer shows its name, type, parameter shapes (up to three) and
        count; a tensor its shape (and dtype unless float32); a parameter its
        name and shape; an op the name of the function that ran.
        """
        if isinstance(node, LayerNode):
            return self._layer_label(node, node.call_title())
        if isinstance(node, ParamNode):
            return (f"<{html_text(node.name)}<BR/>"
                    + _SMALL.format(html_text(shape_str(node.shape) + dtype_suffix(node.dtype))) + ">")
        if isinstance(node, TensorNode):
            if node.role:
                shape = html_text(shape_str(node.shape) + dtype_suffix(node.dtype))
                return f"<<B>{html_text(node.name)}</B><BR/>{shape}>"
            key = ("tensor label", node.shape, node.dtype)
            return self._memo(key, lambda: f"<{html_text(shape_str(node.shape) + dtype_suffix(node.dtype))}>")
        if isinstance(node, OpNode):
            return f"<{html_text(node.op)}>"
        return f"<{html_text(node.name)}>"

    def _layer_label(self, node: LayerNode, title: str, repeat: int = 1) -> str:
        type_name = node.type_name
        lines = [f"<B>{html_text(title)}</B>",
                 self._memo(("type", type_name),
                            lambda: f'<FONT POINT-SIZE="9" COLOR="#555555">{html_text(type_name)}</FONT>')]
        if type(self).param_lines is GraphvizStyler.param_lines:
            listed = listed_params(self.rec, node)
            total = node.num_params_total
            if total:
                key = ("params", total, *[(p.name, p.shape) for p in listed])
                lines.extend(self._memo(key, lambda: tuple(
                    _SMALL.format(html_text(p)) for p in params_text(listed, total))))
        else:  # a subclass's own lines
            lines.extend(_SMALL.format(html_text(p)) for p in self.param_lines(node))
        if repeat > 1:
            lines.append(f"<B>×{repeat}</B>")
        note = node.run_note()
        if note:
            lines.append(f"<I>{_SMALL.format(html_text(note))}</I>")
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
        note = node.run_note()
        if note:
            text += f" <I>{_SMALL.format(html_text(note))}</I>"
        return f"<{text}>"


_SMALL = '<FONT POINT-SIZE="8" COLOR="#444444">{}</FONT>'


def _shapes_text(ins: list[tuple[int, ...]], outs: list[tuple[int, ...]]) -> str:
    """`` in: 1×3, 1×4 out: 1×2`` (either part left out when empty)."""
    text = ""
    if ins:
        text += " in: " + ", ".join(map(shape_str, ins))
    if outs:
        text += " out: " + ", ".join(map(shape_str, outs))
    return text

