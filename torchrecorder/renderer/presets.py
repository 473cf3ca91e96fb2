"""The default look of a drawing: :data:`DEFAULT_STYLES`, the Graphviz attributes of each kind
of element, and :data:`PRESETS`, named sets of overrides on them (``preset=`` of
:class:`~torchrecorder.renderer.styler.GraphvizStyler`, which re-exports both)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["DEFAULT_STYLES", "PRESETS"]

# Font families Graphviz measures with metric-compatible faces on every system (Helvetica,
# Arial and Liberation Sans; Times and Liberation Serif), so that the widths ``dot`` lays out
# match what browsers and librsvg draw.  Nothing else is needed on the reader's machine.
_FONT = "Helvetica,Arial,sans-serif"
_SERIF = "Times-Roman"

#: The default Graphviz attributes of each kind of element; copy it to customise.
DEFAULT_STYLES: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "graph": MappingProxyType({
        "rankdir": "TB", "fontname": _FONT, "fontsize": "11", "nodesep": "0.15",
        "ranksep": "0.18", "bgcolor": "white", "newrank": "true",
        # no margin beyond Graphviz's 4-point pad in every format (PDF's default is half an inch)
        "margin": "0",
    }),
    "layer": MappingProxyType({
        "shape": "box", "style": "rounded,filled", "fillcolor": "#dbe8f5", "color": "#4a77a8",
        "fontname": _FONT, "fontsize": "11", "margin": "0.1,0.04", "height": "0.3",
        "penwidth": "1.2",
    }),
    "tensor": MappingProxyType({
        "shape": "box", "style": "filled", "fillcolor": "#f4f4f4", "color": "#9a9a9a",
        "fontname": _FONT, "fontsize": "9", "height": "0.25", "margin": "0.06,0.02",
    }),
    "io": MappingProxyType({
        "shape": "box", "style": "filled,bold", "fillcolor": "#e2f2df", "color": "#4f8a45",
        "fontname": _FONT, "fontsize": "10", "margin": "0.1,0.04", "height": "0.3",
    }),
    "param": MappingProxyType({
        "shape": "box", "style": "filled", "fillcolor": "#fcf0c8", "color": "#b39533",
        "fontname": _FONT, "fontsize": "9", "height": "0.25", "margin": "0.06,0.02",
    }),
    "op": MappingProxyType({
        "shape": "box", "style": "rounded,filled", "fillcolor": "#ede4f3", "color": "#8a6aa6",
        "fontname": _FONT, "fontsize": "9", "height": "0.2", "margin": "0.05,0.01",
    }),
    "cluster": MappingProxyType({
        "style": "rounded,dashed", "color": "#7d8fa3", "fontname": _FONT, "fontsize": "10",
        "labeljust": "l", "labelloc": "t", "margin": "4",
    }),
    "edge": MappingProxyType({"color": "#555555", "arrowsize": "0.6", "penwidth": "1.0",
                              "fontname": _FONT, "fontsize": "8", "fontcolor": "#444444"}),
    "param_edge": MappingProxyType({"color": "#b39533", "style": "dashed", "arrowsize": "0.5"}),
    "failed": MappingProxyType({"fillcolor": "#f8cccc", "color": "#c0392b", "penwidth": "2.5"}),
    "folded": MappingProxyType({"peripheries": "2", "penwidth": "1.4"}),
    "folded_cluster": MappingProxyType({"style": "rounded,bold", "penwidth": "2"}),
    "graph_break": MappingProxyType({"color": "#d93025", "penwidth": "2.5"}),
    # a module's output that nothing reads (over the tensor's own style)
    "unread": MappingProxyType({"style": "filled,dashed", "fontcolor": "#777777"}),
})

#: Named sets of overrides on :data:`DEFAULT_STYLES`, chosen with ``preset=``:
#:
#: * ``"default"``: soft colours per node kind, for screens and slides;
#: * ``"compact"``: smaller fonts and tighter spacing, for large models;
#: * ``"print"``: black and grey, serif fonts, kinds told apart by shape
#:   (grey layer boxes, white tensor boxes, dashed parameters, elliptic ops),
#:   for greyscale printing;
#: * ``"paper"``: ``"print"`` made compact for a column of a two-column paper:
#:   smaller serif type, thin lines, tight spacing.
PRESETS: Mapping[str, Mapping[str, Mapping[str, str]]] = MappingProxyType({
    "default": MappingProxyType({}),
    "compact": MappingProxyType({
        "graph": {"nodesep": "0.1", "ranksep": "0.12", "fontsize": "8"},
        # vertical margins of a fifth of the font size or more: Graphviz centres a line
        # assuming a shorter ascent than DejaVu's, whose tops would touch the border
        "layer": {"fontsize": "8", "margin": "0.04,0.025", "height": "0.2"},
        "io": {"fontsize": "8", "margin": "0.04,0.025", "height": "0.2"},
        "cluster": {"fontsize": "8", "margin": "4"},
        "tensor": {"fontsize": "7", "height": "0.2", "margin": "0.04,0.02"},
        "param": {"fontsize": "7", "height": "0.2", "margin": "0.04,0.02"},
        "op": {"fontsize": "7", "height": "0.15", "margin": "0.03,0.02"},
        "edge": {"fontsize": "7", "arrowsize": "0.5"},
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
    "paper": MappingProxyType({
        "graph": {"fontname": _SERIF, "fontsize": "8", "nodesep": "0.15", "ranksep": "0.2"},
        "layer": {"fillcolor": "#f0f0f0", "color": "#222222", "fontname": _SERIF, "fontsize": "9",
                  "margin": "0.06,0.03", "penwidth": "0.8"},
        "tensor": {"fillcolor": "white", "color": "#444444", "fontname": _SERIF, "fontsize": "7",
                   "penwidth": "0.6"},
        "io": {"fillcolor": "white", "color": "black", "fontname": _SERIF, "fontsize": "8",
               "margin": "0.06,0.03", "style": "filled", "penwidth": "1.0"},
        "param": {"fillcolor": "white", "color": "#444444", "style": "filled,dashed",
                  "fontname": _SERIF, "fontsize": "7", "penwidth": "0.6"},
        "op": {"fillcolor": "white", "color": "#444444", "shape": "ellipse", "fontname": _SERIF,
               "fontsize": "8", "penwidth": "0.6", "margin": "0.04,0.02"},
        "cluster": {"color": "#666666", "fontname": _SERIF, "fontsize": "8", "margin": "6",
                    "penwidth": "0.6"},
        "edge": {"color": "black", "fontname": _SERIF, "fontsize": "7", "fontcolor": "#222222",
                 "arrowsize": "0.45", "penwidth": "0.7"},
        "param_edge": {"color": "#444444", "arrowsize": "0.4"},
        "failed": {"fillcolor": "#cccccc", "color": "black", "penwidth": "1.6"},
        "folded": {"penwidth": "1.0"},
        "folded_cluster": {"penwidth": "1.2"},
    }),
})
