"""Draw a recording as a Mermaid flowchart, which GitHub, GitLab and many docs tools render natively.

Built only on :class:`~torchrecorder.renderer.base.BaseRenderer`'s hooks: each
drawn node becomes a Mermaid node whose shape says its kind, each expanded
module a ``subgraph``, each edge an arrow (dotted for parameters).  Ids are
made of ``[A-Za-z0-9_]`` only and every label is escaped with Mermaid's
``#code;`` entities, so no module name can break the chart.

>>> import torch, torchrecorder
>>> rec = torchrecorder.record(torch.nn.Sequential(torch.nn.Linear(2, 3)), "net", (1, 2))
>>> print(MermaidRenderer(rec, render_depth=1).render())  # doctest: +ELLIPSIS
flowchart TB
  subgraph n_net["net : Sequential"]
    direction TB
    n_0["0<br>Linear<br>weight: 3×2<br>bias: 3<br>9 params"]
  end
  n_input_input(["input<br>1×2"])
  n_0_out(["output<br>1×3"])
  n_input_input --> n_0
  n_0 --> n_0_out
  classDef layer ...
"""

from __future__ import annotations

import re
import unicodedata
import warnings
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Optional

from ..graph import Graph
from ..nodes import BaseNode, LayerNode, OpNode, ParamNode, TensorNode, shape_str
from ..projection import FoldRepeats
from ..projection import kind_of as _kind_of
from ..projection.budget import MaxNodes
from ._once import render_once
from .base import DEFAULT_RENDER_DEPTH, BaseRenderer, follows_projection
from .labels import dtype_suffix, ops_text, param_lines, run_title

__all__ = ["MERMAID_MAX_EDGES", "MERMAID_STYLES", "MermaidRenderer", "make_mermaid", "mermaid_id",
           "mermaid_text"]

#: ``classDef`` of each node kind (Mermaid style properties), and ``failed_module``, the ``style`` of
#: the subgraph of a module call that raised; override with ``styles=``.
MERMAID_STYLES: Mapping[str, str] = MappingProxyType({
    "layer": "fill:#dbe8f5,stroke:#4a77a8,color:#111111",
    "folded": "fill:#dbe8f5,stroke:#4a77a8,stroke-width:3px,color:#111111",
    "tensor": "fill:#f4f4f4,stroke:#9a9a9a,color:#111111",
    "io": "fill:#e2f2df,stroke:#4f8a45,stroke-width:2px,color:#111111",
    "param": "fill:#fcf0c8,stroke:#b39533,color:#111111",
    "op": "fill:#ede4f3,stroke:#8a6aa6,color:#111111",
    "failed": "fill:#f8cccc,stroke:#c0392b,stroke-width:3px,color:#111111",
    # (a subgraph: an expanded module call that raised, drawn red as make_dot draws its cluster)
    "failed_module": "stroke:#c0392b,stroke-width:3px,stroke-dasharray:6 3",
})

#: Mermaid's default ``maxEdges``: it refuses to draw charts with more edges.
MERMAID_MAX_EDGES = 500

# node kind -> (opening, closing) of its Mermaid shape
_SHAPES: Mapping[str, tuple[str, str]] = MappingProxyType({
    "layer": ("[", "]"),          # rectangle
    "folded": ("[[", "]]"),       # subroutine: a box with double sides
    "failed": ("[", "]"),
    "tensor": ("[/", "/]"),       # parallelogram: data
    "io": ("([", "])"),           # stadium
    "param": ("[(", ")]"),        # cylinder: stored weights
    "op": ("(", ")"),             # rounded
})

# characters written as they are inside a quoted label; everything else is an entity
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _.,:-+/()[]{}=?!@$*'")
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def mermaid_text(text: object) -> str:
    """Escape ``text`` for a quoted Mermaid label: unsafe characters become ``#code;``.

    Letters and digits of any script stay as they are; quotes, ``#``, ``<``,
    ``>``, ``&``, backticks, ``%``, ``;``, ``|``, ``~``, backslashes, control and
    format characters become decimal entities, which Mermaid decodes.

    >>> mermaid_text('a "b" <c> #1 & ü')
    'a #34;b#34; #60;c#62; #35;1 #38; ü'
    """
    out = []
    for ch in str(text):
        if ch in _PLAIN:
            out.append(ch)
        elif ord(ch) > 127 and unicodedata.category(ch)[0] in "LNSP" and ch.isprintable():
            out.append(ch)
        else:
            out.append(f"#{ord(ch)};")
    return "".join(out)


def mermaid_id(key: object) -> str:
    """A Mermaid id for a node key: ``n_`` and the key's ``[A-Za-z0-9_]`` characters.

    The prefix keeps ids clear of Mermaid's keywords (``end``, ``graph``,
    ``class``, ...); callers keep ids unique.

    >>> mermaid_id("layer1.0/add"), mermaid_id("end"), mermaid_id('a "b"')
    ('n_layer1_0_add', 'n_end', 'n_a__b_')
    """
    return "n_" + _ID_UNSAFE.sub("_", str(key))


class _Chart:
    """The flowchart being drawn: its lines, the current indent, the ids of each class."""

    def __init__(self, direction: str) -> None:
        self.lines = [f"flowchart {direction}"]
        self.indent = 1
        self.edges = 0
        self.classes: dict[str, list[str]] = {}
        self.failed_subgraphs: list[str] = []

    def add(self, line: str) -> None:
        self.lines.append("  " * self.indent + line)


class MermaidRenderer(BaseRenderer):
    """Render a :class:`~torchrecorder.recorder.Recorder` as Mermaid ``flowchart`` text.

    Args:
        rec: the recording.
        render_depth: see :class:`~torchrecorder.renderer.base.BaseRenderer`.
        fold_repeats, max_nodes: see :class:`~torchrecorder.renderer.base.BaseRenderer`.
        tensor_nodes: see :class:`~torchrecorder.renderer.base.BaseRenderer`;
            with ``False`` tensor shapes are written on the edges.
        direction: ``"TB"`` (top to bottom, the default), ``"LR"``, ``"BT"`` or ``"RL"``.
        styles: ``{kind: "fill:...,stroke:..."}`` overriding :data:`MERMAID_STYLES`.
        edge_shapes: write the tensor shape on edges leaving ops and layers.

    ``render()`` returns the chart as a string; put it in a Markdown code
    block fenced as ``mermaid`` to have GitHub draw it.  Mermaid refuses charts
    of more than :data:`MERMAID_MAX_EDGES` edges unless configured otherwise
    (a warning says so): draw big models at a smaller ``render_depth``, with
    ``fold_repeats`` or with ``tensor_nodes=False``.
    """

    def __init__(self, rec: Graph, render_depth: Optional[int] = DEFAULT_RENDER_DEPTH, *,
                 fold_repeats: FoldRepeats = "auto", tensor_nodes: bool = True, direction: str = "TB",
                 styles: Optional[Mapping[str, str]] = None, edge_shapes: bool = False,
                 max_nodes: MaxNodes = "auto") -> None:
        super().__init__(rec, render_depth, fold_repeats=fold_repeats, tensor_nodes=tensor_nodes,
                         max_nodes=max_nodes)
        if direction not in ("TB", "TD", "BT", "LR", "RL"):
            raise ValueError(f"direction must be one of TB, TD, BT, LR, RL, got {direction!r}")
        self.direction = direction
        self.styles = dict(MERMAID_STYLES)
        for kind, value in (styles or {}).items():
            if kind not in MERMAID_STYLES:
                raise ValueError(f"unknown Mermaid style kind {kind!r}; kinds: {sorted(MERMAID_STYLES)}")
            self.styles[kind] = str(value).replace(";", ",").replace("\n", " ")
        self.edge_shapes = edge_shapes

    def node_id(self, node: BaseNode) -> str:
        """The unique Mermaid id of ``node``."""
        return self.unique_id(node, mermaid_id)

    # ------------------------------------------------------------- contract
    def new_graph(self) -> _Chart:
        """An empty flowchart."""
        return _Chart(self.direction)

    @follows_projection
    def render_node(self, g: _Chart, node: BaseNode) -> None:
        """Draw ``node`` as one Mermaid node whose shape says its kind (expanded layers as subgraphs)."""
        if self.is_expanded(node) and isinstance(node, LayerNode):
            self.render_recursive_node(g, node)
            return
        kind = self.kind_of(node)
        lines = self.label_lines(node)
        opening, closing = _SHAPES[kind]
        label = "<br>".join(mermaid_text(line) for line in lines)
        node_id = self.node_id(node)
        g.add(f'{node_id}{opening}"{label}"{closing}')
        g.classes.setdefault(kind, []).append(node_id)

    def render_recursive_node(self, g: _Chart, node: LayerNode) -> None:
        """Draw the expanded layer ``node`` as a ``subgraph`` holding its children."""
        run = self.repeats(node)
        if len(run) > 1:
            title = f"{run_title(run, dotted=True)} : {node.type_name} ×{len(run)}"
        else:
            title = f"{node.call_title(dotted=True)} : {node.type_name}"
        if node.run_note():
            title += f" ({node.run_note()})"
        g.add(f'subgraph {self.node_id(node)}["{mermaid_text(title)}"]')
        if node.error:
            g.failed_subgraphs.append(self.node_id(node))
        g.indent += 1
        g.add(f"direction {self.direction}")
        for child in self.children(node):
            self.render_node(g, child)
        g.indent -= 1
        g.add("end")

    def render_edge(self, g: _Chart, fnode: BaseNode, tnode: BaseNode) -> None:
        """Draw an arrow from ``fnode`` to ``tnode``; dotted from a parameter.  Its label, as
        ``make_dot``'s: the shape it carries (see :attr:`edge_shapes`) above the names of the
        data-movement operations it stands for (``flatten``; ``all_ops=False``)."""
        a, b = self.node_id(fnode), self.node_id(tnode)
        g.edges += 1
        lines = []
        arrow = "-.->" if isinstance(fnode, ParamNode) else "-->"
        if arrow == "-->":
            tensor = self.edge_tensor(fnode, tnode)
            shapes = [tensor.shape] if tensor is not None else getattr(fnode, "output_shapes", None)
            if (tensor is not None or self.edge_shapes) and shapes and not isinstance(tnode, TensorNode):
                lines.append(", ".join(shape_str(s) for s in shapes))
        ops = ops_text(self.edge_ops(fnode, tnode))
        if ops:
            lines.append(ops)
        if lines:
            text = "<br>".join(mermaid_text(line) for line in lines)
            g.add(f'{a} {arrow}|"{text}"| {b}')
        else:
            g.add(f"{a} {arrow} {b}")

    def finish(self, g: _Chart) -> str:
        """The chart's text: nodes, subgraphs, edges, then a ``classDef`` and ``class`` line per kind,
        and a ``style`` line for each subgraph of a module call that raised."""
        if g.edges > MERMAID_MAX_EDGES:
            warnings.warn(f"the Mermaid chart of {self.rec.name!r} has {g.edges} edges; Mermaid draws at "
                          f"most {MERMAID_MAX_EDGES} unless configured with a larger maxEdges. Use a "
                          "smaller render_depth, fold_repeats=True or tensor_nodes=False.", stacklevel=3)
        if self.budget is not None and self.budget.reduced:
            g.add(f"n_torchrecorder_note>\"{mermaid_text(self.budget.note())}\"]")
        for kind in self.styles:
            ids = g.classes.get(kind)
            if ids:
                g.add(f"classDef {kind} {self.styles[kind]}")
                g.add(f"class {','.join(ids)} {kind}")
        for sub in g.failed_subgraphs:  # (a subgraph takes a style, not a class, in every Mermaid)
            g.add(f"style {sub} {self.styles['failed_module']}")
        return "\n".join(g.lines) + "\n"

    # --------------------------------------------------------------- labels
    def kind_of(self, node: BaseNode) -> str:
        """The node kinds of :data:`~torchrecorder.projection.NODE_KINDS` (``layer``, ``tensor``,
        ``io``, ``param``, ``op``), with the states ``failed`` and ``folded`` for layers
        (``failed`` also for the operation a failed recording stopped in)."""
        kind = _kind_of(node)
        if isinstance(node, OpNode) and node.error:  # the operation a failed recording stopped in
            return "failed"
        if kind == "layer" and isinstance(node, LayerNode):
            if node.error:
                return "failed"
            return "folded" if len(self.repeats(node)) > 1 else "layer"
        return kind

    def label_lines(self, node: BaseNode) -> list[str]:
        """The lines of text of ``node``'s label, unescaped."""
        if isinstance(node, LayerNode):
            run = self.repeats(node)
            if len(run) > 1:
                title = run_title(run, dotted=True)
            else:
                title = node.call_title()
            lines = [title, node.type_name, *param_lines(self.rec, node)]
            if len(run) > 1:
                lines.append(f"×{len(run)}")
            if node.run_note():
                lines.append(node.run_note())
            if node.error:
                lines.append("raised " + node.error.split(":")[0])
            return lines
        if isinstance(node, ParamNode):
            return [self.projection.param_name(node), shape_str(node.shape) + dtype_suffix(node.dtype)]
        if isinstance(node, TensorNode):
            shape = shape_str(node.shape) + dtype_suffix(node.dtype)
            return [node.name, shape] if node.role else [shape]
        if isinstance(node, OpNode):
            return [node.op, "raised " + node.error.split(":")[0]] if node.error else [node.op]
        return [node.name]


def make_mermaid(rec: Graph, render_depth: Optional[int] = 256, **options: Any) -> str:
    """The Mermaid flowchart of a recording (``options`` as in :class:`MermaidRenderer`)."""
    return str(render_once(MermaidRenderer(rec, render_depth, **options)))
