"""Draw a recording with Graphviz: :class:`GraphvizStyler` picks looks, :class:`GraphvizRenderer` draws."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Optional

import graphviz

from .._text import dot_id, html_text, visible
from ..nodes import BaseNode, LayerNode, OpNode, ParamNode, TensorNode, shape_str
from ..recorder import Recorder
from .base import BaseRenderer

__all__ = ["DEFAULT_STYLES", "PRESETS", "GraphvizRenderer", "GraphvizStyler"]

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
    "edge": MappingProxyType({"color": "#555555", "arrowsize": "0.6", "penwidth": "1.0"}),
    "param_edge": MappingProxyType({"color": "#b39533", "style": "dashed", "arrowsize": "0.5"}),
    "failed": MappingProxyType({"fillcolor": "#f8cccc", "color": "#c0392b", "penwidth": "2.5"}),
})

#: Named sets of overrides on :data:`DEFAULT_STYLES`.
PRESETS: Mapping[str, Mapping[str, Mapping[str, str]]] = MappingProxyType({
    "default": MappingProxyType({}),
    "compact": MappingProxyType({
        "graph": {"nodesep": "0.15", "ranksep": "0.2"},
        "layer": {"fontsize": "9", "margin": "0.06,0.02"},
        "tensor": {"fontsize": "8"}, "param": {"fontsize": "8"}, "op": {"fontsize": "8"},
    }),
    "print": MappingProxyType({
        "layer": {"fillcolor": "white", "color": "black"},
        "tensor": {"fillcolor": "white", "color": "#444444"},
        "io": {"fillcolor": "white", "color": "black"},
        "param": {"fillcolor": "white", "color": "#444444", "style": "filled,dashed"},
        "op": {"fillcolor": "white", "color": "#444444"},
        "cluster": {"color": "#444444"},
        "edge": {"color": "black"},
        "param_edge": {"color": "#444444"},
    }),
})

_KIND_ARGS = ("graph", "layer", "tensor", "io", "param", "op", "cluster", "edge", "param_edge",
              "failed")


def _count(n: int) -> str:
    """``1234567`` -> ``1.2M``."""
    for unit, size in (("B", 10**9), ("M", 10**6), ("k", 10**3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _dtype_suffix(dtype: str) -> str:
    return "" if dtype in ("", "float32") else f" {dtype}"


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
            original torchrecorder (``fontname="Times"``).

    Subclasses usually override :meth:`label` or :meth:`style_node`.
    """

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
        attrs["tooltip"] = graphviz.escape(visible(self.tooltip(node)))
        if isinstance(node, LayerNode) and node.error:
            attrs.update(self.styles["failed"])
        return attrs

    def style_cluster(self, node: LayerNode) -> dict[str, str]:
        """Attributes of an expanded layer, drawn as a cluster."""
        attrs = dict(self.styles["cluster"])
        title = node.path or node.name
        if node.call_index > 1:
            title += f" #{node.call_index}"
        type_name = html_text(node.type_name)
        attrs["label"] = f'<<B>{html_text(title)}</B> <FONT COLOR="#555555">{type_name}</FONT>>'
        attrs["tooltip"] = graphviz.escape(visible(self.tooltip(node)))
        if node.error:
            attrs.update({k: v for k, v in self.styles["failed"].items() if k != "fillcolor"})
        return attrs

    def style_edge(self, fnode: BaseNode, tnode: BaseNode) -> dict[str, str]:
        """Attributes of the edge from ``fnode`` to ``tnode``."""
        return dict(self.styles["param_edge" if isinstance(fnode, ParamNode) else "edge"])

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
        """The HTML-like label of ``node``; all text in it is escaped."""
        small = '<FONT POINT-SIZE="8" COLOR="#444444">{}</FONT>'
        if isinstance(node, LayerNode):
            title = node.name if node.call_index == 1 else f"{node.name} #{node.call_index}"
            lines = [f"<B>{html_text(title)}</B>",
                     f'<FONT POINT-SIZE="9" COLOR="#555555">{html_text(node.type_name)}</FONT>']
            params = self._param_lines(node)
            lines.extend(small.format(html_text(p)) for p in params)
            if node.error:
                lines.append(small.format(html_text("raised " + node.error.split(":")[0])))
            return "<" + "<BR/>".join(lines) + ">"
        if isinstance(node, ParamNode):
            return (f"<{html_text(node.name)}<BR/>"
                    + small.format(html_text(shape_str(node.shape) + _dtype_suffix(node.dtype))) + ">")
        if isinstance(node, TensorNode):
            shape = html_text(shape_str(node.shape) + _dtype_suffix(node.dtype))
            if node.role:
                return f"<<B>{html_text(node.name)}</B><BR/>{shape}>"
            return f"<{shape}>"
        if isinstance(node, OpNode):
            return f"<{html_text(node.op)}>"
        return f"<{html_text(node.name)}>"

    def _param_lines(self, node: LayerNode) -> list[str]:
        """Parameter shapes of a leaf module, or the parameter count of a bigger one."""
        if not node.num_params_total:
            return []
        if node.num_params == node.num_params_total and node.fn is not None:
            shapes = [f"{n}: {shape_str(tuple(p.shape))}"
                      for n, p in node.fn.named_parameters(recurse=False)]
            if len(shapes) <= 3:
                return shapes
        return [f"{_count(node.num_params_total)} params"]


class GraphvizRenderer(BaseRenderer):
    """Render a :class:`~torchrecorder.recorder.Recorder` into a :class:`graphviz.Digraph`.

    Args:
        rec: the recording.
        render_depth: see :class:`~torchrecorder.renderer.base.BaseRenderer`.
        styler_cls: a :class:`GraphvizStyler` subclass (default: ``GraphvizStyler``).
        **styler_args: passed to ``styler_cls``.

    Attributes:
        styler: the :class:`GraphvizStyler` instance in use.
    """

    def __init__(self, rec: Recorder, render_depth: int = 256,
                 styler_cls: Optional[type[GraphvizStyler]] = None, **styler_args: Any) -> None:
        super().__init__(rec, render_depth)
        cls = styler_cls if styler_cls is not None else GraphvizStyler
        self.styler = cls(**styler_args)
        self._ids: dict[Any, str] = {}
        self._used_ids: set[str] = set()

    def node_id(self, node: BaseNode) -> str:
        """The unique, readable DOT id of ``node``."""
        got = self._ids.get(node.key)
        if got is None:
            base = dot_id(node.key)
            got, n = base, 0
            while got in self._used_ids:
                n += 1
                got = f"{base}_{n}"
            self._used_ids.add(got)
            self._ids[node.key] = got
        return got

    def new_graph(self) -> graphviz.Digraph:
        """An empty Digraph carrying the styler's graph attributes."""
        return graphviz.Digraph(name=dot_id(self.rec.name), graph_attr=self.styler.graph_attrs())

    def render_node(self, g: graphviz.Digraph, node: BaseNode) -> None:
        """Draw ``node`` as one Graphviz node, or as a cluster if it is an expanded layer."""
        if self.is_expanded(node):
            assert isinstance(node, LayerNode)
            self.render_recursive_node(g, node)
            return
        g.node(self.node_id(node), **self._checked(self.styler.style_node(node), "style_node"))

    def render_recursive_node(self, g: graphviz.Digraph, node: LayerNode) -> None:
        """Draw the expanded layer ``node`` as a cluster holding its children."""
        with g.subgraph(name="cluster_" + self.node_id(node)) as sub:
            sub.attr(**self._checked(self.styler.style_cluster(node), "style_cluster"))
            for child in self.children(node):
                self.render_node(sub, child)

    def render_edge(self, g: graphviz.Digraph, fnode: BaseNode, tnode: BaseNode) -> None:
        """Draw the edge from ``fnode`` to ``tnode``."""
        g.edge(self.node_id(fnode), self.node_id(tnode),
               **self._checked(self.styler.style_edge(fnode, tnode), "style_edge"))

    def _checked(self, attrs: Any, method: str) -> dict[str, str]:
        if not isinstance(attrs, Mapping):
            raise TypeError(f"{type(self.styler).__name__}.{method}() must return a mapping of "
                            f"Graphviz attributes, got {type(attrs).__name__}")
        return {str(k): v if isinstance(v, str) else str(v) for k, v in attrs.items()}
