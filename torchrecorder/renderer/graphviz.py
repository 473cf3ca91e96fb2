"""Draw a recording with Graphviz: :class:`GraphvizStyler` picks looks, :class:`GraphvizRenderer` draws."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, Optional

import graphviz
from graphviz.quoting import attr_list

from .._text import dot_id, dot_quote, dot_text, html_text, quote_dot_id, quoted_dot_text, string_quote
from ..nodes import BaseNode, Key, LayerNode, OpNode, ParamNode, TensorNode, shape_str
from ..recorder import Recorder
from . import _labels
from ._labels import dtype_suffix, param_lines, run_title
from .base import BaseRenderer, FoldRepeats, _is_passed_tensor
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

    @staticmethod
    def _attr_list(label: Any = None, kwargs: Any = None, attributes: Any = None) -> str:
        """The graphviz package's attribute list text, remembered for a plain dict of attributes
        (``source`` writes the graph's attributes every time it is read)."""
        if label is not None or attributes is not None or type(kwargs) is not dict:
            return attr_list(label, kwargs=kwargs, attributes=attributes)
        try:
            key: Any = tuple(kwargs.items())
            got = _ATTR_LISTS.get(key)
        except TypeError:  # an unhashable value
            key = got = None
        if got is None:
            got = attr_list(kwargs=kwargs)
            if key is not None and len(_ATTR_LISTS) < 256:
                _ATTR_LISTS[key] = got
        return got


_ATTR_LISTS: dict[Any, str] = {}


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

    def render(self) -> graphviz.Digraph:
        """Draw the whole recording into a new :meth:`new_graph`; return :meth:`finish` of it.

        The DOT text is the one that :meth:`render_node`, :meth:`render_recursive_node`
        and :meth:`render_edge` write; unless a subclass overrides one of them (or
        another hook of the walk), it is written in a single pass that keeps the
        attribute text of each kind of node and edge instead of rebuilding it for
        every node.  Styler methods are called as usual where a subclass of
        :class:`GraphvizStyler` overrides them.
        """
        if _overrides(self, GraphvizRenderer, _WALK_HOOKS):
            return super().render()
        g = self.new_graph()
        self._write(g.body)
        return self.finish(g)

    def _write(self, body: list[str]) -> None:
        """Append the DOT statements of every drawn node, cluster and edge to ``body``.

        Writes what the hooks would write, in the same order (so that the same
        ids are given out), with the same styler calls where those are overridden.
        """
        rec = self.rec
        nodes = rec.nodes
        styler = self.styler
        styles = styler.styles
        plan = self.fold_plan
        hidden, runs = plan.hidden, plan.runs
        expanded = self._expanded_test()
        expanded_memo = self._expanded
        tensor_nodes = self.tensor_nodes
        ids, used, qids = self._ids, self._used_ids, self._qids
        checked, attr_list = self._checked, self._attr_list
        fast = not _overrides(styler, GraphvizStyler, _NODE_HOOKS) and styler.kinds is _KINDS
        fast_clusters = not _overrides(styler, GraphvizStyler, _CLUSTER_HOOKS)
        styler_param_lines = _overrides(styler, GraphvizStyler, ("param_lines",))
        listed_params = _labels.listed_params
        drawn: dict[Key, Optional[Key]] = {}  # drawn nodes, each standing for itself
        shapes: dict[Any, str] = {}
        types: dict[str, str] = {}
        tensors: dict[Any, tuple[str, str]] = {}
        ops: dict[Any, str] = {}
        layer_shapes: dict[Any, str] = {}
        params_text: dict[Any, str] = {}
        mids: dict[str, str] = {}
        cluster_parts: list[tuple[str, str, str]] = []

        def qid(key: Key) -> str:
            """``_quoted_id``: the node's unique id (``unique_id(node, dot_id)``), quoted."""
            got = ids.get(key)
            if got is None:
                base = got = dot_id(key)
                n = 0
                while got in used:
                    n += 1
                    got = f"{base}_{n}"
                used.add(got)
                ids[key] = got
            quoted = quote_dot_id(got)
            qids[key] = quoted
            return quoted

        def shape_text(shape: Any) -> str:
            try:
                got = shapes.get(shape)
            except TypeError:  # not hashable
                return shape_str(shape)
            if got is None:
                got = shapes[shape] = shape_str(shape)
            return got

        def mid(kind: str) -> str:
            """What stands between a node's label and its tooltip: the other attributes of ``kind``."""
            got = mids.get(kind)
            if got is None:
                got = mids[kind] = _mid_of(styles[kind])
            return got

        def tensor_text(node: TensorNode) -> tuple[str, str]:
            """The label and quoted tooltip of a tensor between layers, as the default styler writes them."""
            key: Any = (node.shape, node.dtype, node.device)
            try:
                got = tensors.get(key)
            except TypeError:
                got = key = None
            if got is None:
                shape = shape_text(node.shape)
                got = (f"<{html_text(shape + dtype_suffix(node.dtype))}>",
                       quoted_dot_text(f"{shape} {node.dtype} on {node.device}"))
                if key is not None:
                    tensors[key] = got
            return got

        def op_text(node: OpNode) -> str:
            try:
                key: Any = (node.op, tuple(node.output_shapes))
                got = ops.get(key)
            except TypeError:
                key = got = None
            if got is None:
                got = (f"label=<{html_text(node.op)}>" + mid("op") + quoted_dot_text(
                    f"{node.op} -> " + ", ".join(map(shape_text, node.output_shapes))))
                if key is not None:
                    ops[key] = got
            return got

        def layer_tooltip(node: LayerNode) -> str:
            """The default styler's tooltip of a layer that did not raise, quoted."""
            try:
                key: Any = (tuple(node.input_shapes), tuple(node.output_shapes))
                got = layer_shapes.get(key)
            except TypeError:
                key = got = None
            if got is None:
                got = ""
                if node.input_shapes:
                    got += " in: " + ", ".join(map(shape_text, node.input_shapes))
                if node.output_shapes:
                    got += " out: " + ", ".join(map(shape_text, node.output_shapes))
                if key is not None:
                    layer_shapes[key] = got
            return quoted_dot_text(f"{node.path or node.name} ({node.type_name}){got}")

        def layer_text(node: LayerNode) -> Optional[str]:
            if node.error or (runs and node.key in runs):
                return None
            name, type_name = node.name, node.type_name
            type_line = types.get(type_name)
            if type_line is None:
                type_line = types[type_name] = (
                    f'<BR/><FONT POINT-SIZE="9" COLOR="#555555">{html_text(type_name)}</FONT>')
            title = name if node.call_index == 1 else f"{name} #{node.call_index}"
            label = f"label=<<B>{html_text(title)}</B>{type_line}"
            if styler_param_lines:  # a subclass's own
                for line in styler.param_lines(node):
                    label += "<BR/>" + _SMALL.format(html_text(line))
            elif node.num_params_total:
                # param_lines reads the count and the listed parameters' names and shapes only
                total = node.num_params_total
                listed = listed_params(rec, node)
                try:
                    key: Any = (total, tuple([(p.name, p.shape) for p in listed]))
                    got = params_text.get(key)
                except TypeError:
                    key = got = None
                if got is None:
                    got = "".join(["<BR/>" + _SMALL.format(html_text(line))
                                   for line in _labels.params_text(listed, total)])
                    if key is not None:
                        params_text[key] = got
                label += got
            return label + ">" + mid("layer") + layer_tooltip(node)

        def io_text(node: TensorNode) -> str:
            name, shape = node.name, shape_text(node.shape)
            text = html_text(shape + dtype_suffix(node.dtype))
            return (f"label=<<B>{html_text(name)}</B><BR/>{text}>" + mid("io")
                    + quoted_dot_text(f"{name}: {shape} {node.dtype} on {node.device}"))

        def param_text(node: ParamNode) -> str:
            shape = shape_text(node.shape)
            return (f"label=<{html_text(node.name)}<BR/>"
                    + _SMALL.format(html_text(shape + dtype_suffix(node.dtype))) + ">"
                    + mid("param") + quoted_dot_text(f"{node.path or node.name}: {shape} {node.dtype}"))

        def styled(node: BaseNode) -> str:
            """``render_node``'s attribute text, through the styler."""
            run = runs.get(node.key) if runs and isinstance(node, LayerNode) else None
            if run is not None and len(run) > 1:
                assert isinstance(node, LayerNode)
                attrs = checked(styler.style_repeated(node, run, False), "style_repeated")
            else:
                attrs = checked(styler.style_node(node), "style_node")
            return attr_list(attrs)

        def cluster_text(node: LayerNode) -> str:
            """``Digraph.attr(**attrs)``'s text for the cluster of ``node``; ``""`` for no attributes."""
            run = runs.get(node.key) if runs else None
            if run is not None and len(run) > 1:
                attrs = checked(styler.style_repeated(node, run, True), "style_repeated")
            elif fast_clusters and not node.error:
                if not cluster_parts:
                    cluster_parts.append(_cluster_parts(styles["cluster"]))
                before, between, after = cluster_parts[0]
                title = node.path or node.name
                if node.call_index > 1:
                    title += f" #{node.call_index}"
                label = styler._cluster_label(node, title)
                if not (label.startswith("<") and label.endswith(">")):
                    label = dot_quote(label)
                return f"{before}label={label}{between}tooltip={layer_tooltip(node)}{after}"
            else:
                attrs = checked(styler.style_cluster(node), "style_cluster")
            return _a_list(attrs)

        def write_cluster(node: LayerNode, indent: str) -> None:
            """``render_recursive_node``."""
            attrs = cluster_text(node)
            name = ids.get(node.key)
            if name is None:
                qid(node.key)
                name = ids[node.key]
            body.append(f"{indent}subgraph {dot_quote('cluster_' + name)} {{\n")
            if attrs:
                body.append(f"{indent}\t{attrs}\n")
            walk(node, indent + "\t")
            body.append(indent + "}\n")

        def inside(layer: LayerNode) -> None:
            """Note what the nodes inside ``layer``, drawn as one node, stand for (``drawn_key``):
            ``layer``, but parameters stand for nothing."""
            key = layer.key
            stack = list(layer.subnets)
            while stack:
                k = stack.pop()
                node = nodes.get(k)
                if node is None or k is None:
                    continue
                if isinstance(node, ParamNode):
                    drawn[k] = None
                    continue
                drawn[k] = key
                if isinstance(node, LayerNode):
                    stack.extend(node.subnets)

        def walk(layer: LayerNode, indent: str) -> None:
            """Write ``children(layer)``, each as ``render_node`` draws it."""
            text: Optional[str]
            for key in layer.subnets:
                node = nodes.get(key)
                if node is None or key in hidden:
                    continue
                if type(node) is TensorNode:
                    if node.role:
                        text = io_text(node) if fast else None
                    elif not tensor_nodes:
                        continue
                    elif fast:
                        label, tip = tensor_text(node)
                        text = "label=" + label + mid("tensor") + tip
                    else:
                        text = None
                elif type(node) is OpNode:
                    text = op_text(node) if fast else None
                elif type(node) is LayerNode:
                    is_expanded = expanded_memo.get(key)
                    if is_expanded is None:
                        is_expanded = expanded(node)
                    if is_expanded:
                        drawn[key] = key
                        write_cluster(node, indent)
                        continue
                    text = layer_text(node) if fast else None
                    inside(node)
                elif type(node) is ParamNode:
                    text = param_text(node) if fast else None
                else:  # another kind of node: drawn as the hooks draw it
                    if not tensor_nodes and _is_passed_tensor(node):
                        continue
                    if expanded(node):
                        assert isinstance(node, LayerNode)
                        write_cluster(node, indent)
                        continue
                    body.append(f"{indent}{qids.get(key) or qid(key)} [{styled(node)}]\n")
                    continue
                drawn[key] = key
                if text is None:
                    text = styled(node)
                body.append(f"{indent}{qids.get(key) or qid(key)} [{text}]\n")

        walk(rec.context, "\t")

        edges = self._drawn_key_pairs(drawn)
        degree: dict[Key, int] = {}
        get = degree.get
        for a, _ in edges:
            degree[a] = get(a, 0) + 1
        self._out_degree = degree
        fanout = self.max_constraining_fanout
        if tensor_nodes and not _overrides(styler, GraphvizStyler, ("style_edge",)):
            # style_edge's attributes: one text per (from a parameter, fed to many) pair
            tails = [_edge_tail(styles["param_edge" if i & 1 else "edge"], i >= 2) for i in range(4)]
            for a, b in edges:
                qa = qids.get(a) or qid(a)
                tail = tails[(isinstance(nodes[a], ParamNode)) + 2 * (degree[a] > fanout)]
                body.append(f"\t{qa} -> {qids.get(b) or qid(b)}{tail}")
            return
        via = self._via if not tensor_nodes else {}
        fast_tensor_edges = not _overrides(styler, GraphvizStyler, _TENSOR_EDGE_HOOKS)
        for a, b in edges:
            qa = qids.get(a) or qid(a)
            qb = qids.get(b) or qid(b)
            fnode, tnode = nodes[a], nodes[b]
            wide = degree[a] > fanout
            tensor = via.get((a, b))
            if tensor is not None and fast_tensor_edges and type(tensor) is TensorNode:
                kind = "param_edge" if isinstance(fnode, ParamNode) else "edge"
                attrs = checked(styles[kind], "style_edge")
                if wide:
                    attrs.setdefault("constraint", "false")
                label, tip = tensor_text(tensor)
                body.append(f"\t{qa} -> {qb} [label={label}{_mid_of(attrs)}{tip}]\n")
                continue
            if tensor is not None:
                attrs = checked(styler.style_tensor_edge(fnode, tnode, tensor), "style_tensor_edge")
            else:
                attrs = checked(styler.style_edge(fnode, tnode), "style_edge")
            if wide:
                attrs.setdefault("constraint", "false")
            body.append(f"\t{qa} -> {qb} [{attr_list(attrs)}]\n")

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
            got = self._qids[node.key] = dot_quote(self.node_id(node))
        return got

    @staticmethod
    def _quote_label(label: str) -> str:
        # an HTML-like label is written as it is, as the graphviz package does
        return label if label.startswith("<") and label.endswith(">") else dot_quote(label)

    def _attr_list(self, attrs: dict[str, str]) -> str:
        """``label=... key=value ... tooltip=...``, quoted as the graphviz package quotes.

        Everything but the label and the tooltip usually repeats from node to
        node, so that part is formatted once per distinct set of attributes.
        """
        return _attr_text(attrs, self._quoted)

    def _checked(self, attrs: Any, method: str) -> dict[str, str]:
        if not isinstance(attrs, Mapping):
            raise TypeError(f"{type(self.styler).__name__}.{method}() must return a mapping of "
                            f"Graphviz attributes, got {type(attrs).__name__}")
        out = dict(attrs)
        for k, v in out.items():
            if type(k) is not str or type(v) is not str:
                return {str(k): str(v) for k, v in out.items()}
        return out


_KINDS = GraphvizStyler.kinds

#: renderer hooks that :meth:`GraphvizRenderer.render` writes without calling; a
#: subclass overriding one of them is drawn through the hooks
_WALK_HOOKS = ("render_node", "render_recursive_node", "render_edge", "node_id", "children",
               "is_expanded", "repeats", "drawn_edges", "drawn_key", "edge_tensor", "out_degree",
               "unique_id", "_quoted_id", "_attr_list", "_checked", "_inner_rep")
#: styler methods that the default node text stands for
_NODE_HOOKS = ("style_node", "kind_of", "label", "tooltip", "_layer_label")
#: styler methods that the default cluster text stands for
_CLUSTER_HOOKS = ("style_cluster", "tooltip")
#: styler methods that the default text of an edge carrying a tensor stands for
_TENSOR_EDGE_HOOKS = ("style_tensor_edge", "style_edge", "label", "tooltip")

_CLASS_OVERRIDES: dict[tuple[type, type, tuple[str, ...]], bool] = {}


def _overrides(obj: object, base: type, names: tuple[str, ...]) -> bool:
    """Whether ``obj`` (its class, or itself) replaces any of the methods ``names`` of ``base``."""
    cls = type(obj)
    key = (cls, base, names)
    got = _CLASS_OVERRIDES.get(key)
    if got is None:
        got = any(getattr(cls, name) is not getattr(base, name) for name in names)
        if len(_CLASS_OVERRIDES) < 1024:  # classes made on the fly are not all kept
            _CLASS_OVERRIDES[key] = got
    own: Optional[dict[str, Any]] = getattr(obj, "__dict__", None)
    return got or (own is not None and any(name in own for name in names))


def _attr_text(attrs: dict[str, str], cache: dict[tuple[tuple[str, str], ...], str]) -> str:
    """``GraphvizRenderer._attr_list``: ``cache`` keeps the text of the attributes but the
    label and the tooltip (it pops them from ``attrs``)."""
    label = attrs.pop("label", None)
    tooltip = attrs.pop("tooltip", None)
    key = tuple(attrs.items())
    rest = cache.get(key)
    if rest is None:
        rest = cache[key] = " ".join(f"{dot_quote(k)}={dot_quote(v)}" for k, v in sorted(key))
    parts = [rest] if rest else []
    if label is not None:
        parts.insert(0, f"label={GraphvizRenderer._quote_label(label)}")
    if tooltip is not None:
        parts.append(f"tooltip={string_quote(tooltip)}")
    return " ".join(parts)


#: attribute texts made from style dicts, by their items (styles rarely change between drawings)
_STYLE_TEXTS: dict[Any, Any] = {}


def _style_text(what: str, attrs: Mapping[Any, Any], make: Callable[[Mapping[Any, Any]], Any]) -> Any:
    """``make(attrs)``, remembered by ``what`` and the items of ``attrs``."""
    try:
        key = (what, tuple(attrs.items()))
        got = _STYLE_TEXTS.get(key)
    except TypeError:  # an unhashable value
        return make(attrs)
    if got is None:
        if len(_STYLE_TEXTS) > 1024:
            _STYLE_TEXTS.clear()
        got = _STYLE_TEXTS[key] = make(attrs)
    return got


def _pairs(attrs: Mapping[Any, Any]) -> list[tuple[str, str]]:
    """``attrs`` as ``_checked`` makes them: str keys and values, sorted, each pair quoted."""
    items = {str(k): str(v) for k, v in attrs.items()}
    return [(k, f"{dot_quote(k)}={dot_quote(v)}") for k, v in sorted(items.items())]


def _rest(attrs: Mapping[Any, Any]) -> str:
    """The attribute text of ``attrs`` but ``label`` and ``tooltip``, as ``_attr_list`` writes it."""
    return " ".join(text for k, text in _pairs(attrs) if k not in ("label", "tooltip"))


def _make_mid(attrs: Mapping[Any, Any]) -> str:
    rest = _rest(attrs)
    return f" {rest} tooltip=" if rest else " tooltip="


def _mid_of(attrs: Mapping[Any, Any]) -> str:
    """What stands between ``label=...`` and the tooltip text in ``_attr_list``'s text for ``attrs``."""
    return _style_text("mid", attrs, _make_mid)


def _make_cluster_parts(attrs: Mapping[Any, Any]) -> tuple[str, str, str]:
    pairs = [(k, text) for k, text in _pairs(attrs) if k not in ("label", "tooltip")]
    before = "".join(text + " " for k, text in pairs if k < "label")
    between = "".join(" " + text for k, text in pairs if "label" < k < "tooltip")
    after = "".join(" " + text for k, text in pairs if k > "tooltip")
    return before, between + " ", after


def _cluster_parts(attrs: Mapping[Any, Any]) -> tuple[str, str, str]:
    """The sorted attribute text of a cluster around its ``label`` and ``tooltip``:
    ``before + "label=..." + between + "tooltip=..." + after``."""
    return _style_text("cluster", attrs, _make_cluster_parts)


def _a_list(attrs: dict[str, str]) -> str:
    """``Digraph.attr(**attrs)``'s attribute text: sorted, each quoted."""
    return " ".join(f"{dot_quote(k)}={string_quote(v) if k == 'tooltip' else dot_quote(v)}"
                    for k, v in sorted(attrs.items()))


def _make_tail(attrs: Mapping[Any, Any], wide: bool) -> str:
    out = {str(k): str(v) for k, v in attrs.items()}  # as _checked makes them
    if wide:
        out.setdefault("constraint", "false")
    return f" [{_attr_text(out, {})}]\n"


def _edge_tail(attrs: Mapping[Any, Any], wide: bool) -> str:
    """``" [...]"`` and a newline: the attributes of an edge styled ``attrs``, with
    ``constraint=false`` if ``wide``."""
    if wide:
        return _style_text("wide edge", attrs, lambda a: _make_tail(a, True))
    return _style_text("edge", attrs, lambda a: _make_tail(a, False))
