"""Colour a drawing by a statistic of each module's activations (or the time it took), with a legend.

>>> import torch, torchrecorder
>>> net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
>>> with torchrecorder.capture(net, stats=True, record=False) as cap:
...     _ = net(torch.randn(16, 4))
>>> rec = torchrecorder.record(net, "net", (16, 4))
>>> dot = torchrecorder.make_dot(rec, activations=cap, stat="zeros")
>>> "zeros" in dot.source
True

:class:`ActivationStyler` wraps the styler's ``style_node``, ``style_cluster``
and ``style_repeated``: it changes the fill colour (boxes) or border colour
(expanded modules) of every module call the statistics name, adds the value
to its label and tooltip, and puts a colour scale under the graph.  The
statistics come from :meth:`torchrecorder.capture.Capture.stats`, or from any
mapping of call name (a dotted path; ``""`` is the network, ``"path#2"`` a
second call) to a number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from .._text import dot_text, html_text
from ..cost import COST_STATS, cost, format_stat
from ..nodes import BaseNode, LayerNode, OpNode
from .styler import GraphvizStyler

__all__ = ["SCALES", "ActivationStyler", "call_name", "check_cost_stat", "cost_values"]

#: colour scales, from low to high: ``"warm"`` (white to dark red: fractions where high is bad,
#: such as dead ReLUs), ``"cool"`` (white to dark blue) and ``"diverging"`` (blue, white, red)
SCALES: Mapping[str, Sequence[str]] = {
    "warm": ("#fff7ec", "#fdd49e", "#fc8d59", "#d7301f", "#7f0000"),
    "cool": ("#f7fbff", "#c6dbef", "#6baed6", "#2171b5", "#08306b"),
    "diverging": ("#2166ac", "#92c5de", "#f7f7f7", "#f4a582", "#b2182b"),
}

def check_cost_stat(stat: Any) -> None:
    """Raise ``ValueError`` unless ``stat`` is one a recording gives itself (a cost, or ``"time"``).

    ``make_dot(rec, stat=...)`` without ``activations=`` colours by such a statistic.
    """
    if not (isinstance(stat, str) and stat in (*COST_STATS, "time")):
        raise ValueError(f"stat={stat!r} without activations= is not a cost statistic; choose from "
                         f"{[*COST_STATS, 'time']}, or pass activations= (a torchrecorder.capture(..., "
                         "stats=True) or a mapping of call to number) to colour by another statistic")


def cost_values(rec: Any, stat: Any) -> dict[str, float]:
    """The values ``make_dot(rec, stat=stat)`` colours by without ``activations=``: each call's
    cost (:func:`torchrecorder.cost`), or its time in milliseconds; calls of value 0 left out.

    Raises:
        ValueError: ``stat`` is no cost statistic, or the recording lacks what it needs
            (``"time"`` without ``timing=True``, ``"saved_bytes"`` without ``backward=True``).
    """
    check_cost_stat(stat)
    if stat == "time":
        if not getattr(rec, "call_times", None):
            raise ValueError("stat='time' colours by the time each call took, which this recording "
                             "did not measure: record it with timing=True")
        return {k: 1000 * v for k, v in cost(rec).stat("time").items() if v > 0}
    costs = cost(rec)
    if stat == "saved_bytes" and costs.total.saved_bytes is None:
        raise ValueError("stat='saved_bytes' colours by what autograd saved for the backward pass, "
                         "which this recording did not keep: record it with backward=True")
    return {k: v for k, v in costs.stat(stat).items() if v > 0}


_TITLES = {"mean": "mean activation", "std": "activation std", "zeros": "fraction of zeros",
           "absmax": "max |activation|", "dead": "dead-unit fraction", "time": "time per call (ms)",
           "grad_norm": "gradient norm", "grad_mean": "mean gradient",
           "grad_zeros": "fraction of zero gradients", "flops": "FLOPs per call",
           "activation_bytes": "output size per call", "param_bytes": "parameter size",
           "saved_bytes": "saved for backward per call"}
_FRACTIONS = ("zeros", "dead", "grad_zeros")
_COST_NOTES = {"flops": "", "activation_bytes": "out ", "param_bytes": "params ", "saved_bytes": "saved "}


def call_name(node: LayerNode) -> str:
    """The name :func:`torchrecorder.capture` gives the call ``node``: its dotted path, with
    ``#2`` for a second call."""
    return node.path if node.call_index == 1 else f"{node.path}#{node.call_index}"


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def _mix(scale: Sequence[str], t: float) -> str:
    t = min(1.0, max(0.0, t))
    pos = t * (len(scale) - 1)
    i = min(int(pos), len(scale) - 2)
    f = pos - i
    a, b = _rgb(scale[i]), _rgb(scale[i + 1])
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b, strict=True))


def _luminance(colour: str) -> float:
    """The relative luminance of ``#rrggbb`` (WCAG 2: 0 black, 1 white)."""
    def linear(c: int) -> float:
        x = c / 255
        return x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4
    r, g, b = _rgb(colour)
    return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)


def _contrast(a: str, b: str) -> float:
    """The WCAG contrast ratio of two colours, from 1 (alike) to 21 (black on white)."""
    la, lb = sorted((_luminance(a), _luminance(b)))
    return (lb + 0.05) / (la + 0.05)


#: the grey of a box's second lines (its type and parameter count, an operation's shape), as
#: the stylers write them into labels (``COLOR="#555555"``), and the light grey that stands
#: for it on a dark fill
SECOND_LINE_GREYS = ("#555555", "#666666")
_LIGHT_GREY = "#e0e0e0"
#: the least contrast a text keeps with the fill under it (WCAG's AA level for normal text)
MIN_CONTRAST = 4.5


def text_colours(fill: str) -> tuple[str, str]:
    """The colours of the text on a box filled with ``fill``: ``(name, second lines)``.

    White where white stands out more than black, else black; the second lines keep their
    grey (light grey on a dark fill) where it keeps :data:`MIN_CONTRAST` with the fill, else
    they take the name's colour.

    >>> text_colours("#fff7ec"), text_colours("#fc8d59"), text_colours("#7f0000")
    (('black', '#555555'), ('black', 'black'), ('white', '#e0e0e0'))
    """
    dark = _contrast(fill, "#ffffff") > _contrast(fill, "#000000")
    main, grey = ("white", _LIGHT_GREY) if dark else ("black", SECOND_LINE_GREYS[0])
    return main, grey if _contrast(fill, grey) >= MIN_CONTRAST else main


def _dark(colour: str) -> bool:
    """Whether text on ``colour`` is white (see :func:`text_colours`)."""
    return text_colours(colour)[0] == "white"


def recolour_second_lines(label: str, colour: str) -> str:
    """``label`` (DOT HTML-like text) with its grey second lines (:data:`SECOND_LINE_GREYS`)
    drawn in ``colour``."""
    for grey in SECOND_LINE_GREYS:
        label = label.replace(f'COLOR="{grey}"', f'COLOR="{colour}"')
    return label


def _fmt(value: float, stat: str) -> str:
    if stat in _FRACTIONS:
        return f"{100 * value:.0f}%"
    if stat == "time":
        return f"{value:.3g} ms"
    if stat in COST_STATS:
        return format_stat(value, stat)
    return f"{value:.3g}"


class ActivationStyler(GraphvizStyler):
    """A :class:`~torchrecorder.renderer.GraphvizStyler` that colours module calls by a statistic.

    Use it through :func:`torchrecorder.make_dot`:
    ``make_dot(rec, activations=cap, stat="dead")`` (or
    ``styler_cls=ActivationStyler``).

    Args:
        activations: a :class:`~torchrecorder.capture.Capture` made with
            ``stats=True`` (or ``timing=True`` for ``stat="time"``), or a
            mapping of call name to number.
        stat: the statistic to show: ``"mean"``, ``"std"``, ``"zeros"``
            (fraction of zero elements), ``"absmax"``, ``"dead"`` (fraction
            of units zero for every input), ``"time"`` (milliseconds per
            call), or a cost of :func:`torchrecorder.cost` (``"flops"``,
            ``"activation_bytes"``, ``"param_bytes"``, ``"saved_bytes"``: values written in
            their unit); with
            a mapping, the legend's title and the values' unit.
        scale: a name of :data:`SCALES`, or a sequence of ``#rrggbb`` colours
            from low to high; default ``"warm"`` for fractions, time and costs,
            ``"cool"`` otherwise.
        vmin, vmax: the values at the ends of the scale; default 0 to 1 for
            fractions, else the smallest and largest value shown.
        log: place values on the scale by their logarithm (default: for ``"grad_norm"``,
            where vanishing and exploding gradients differ by orders of magnitude, and for
            the costs ``"flops"``, ``"activation_bytes"``, ``"param_bytes"`` and
            ``"saved_bytes"``, when every
            value is positive).
        annotate: write the value in each coloured label (default).
        legend: draw the colour scale under the graph (default).
        title: the legend's title (default: a description of ``stat``).
        **styler_args: as for :class:`~torchrecorder.renderer.GraphvizStyler`.

    Module calls and operations (``capture(..., ops=...)``, by their keys) without a value
    keep the default style, but for a module that called no other module and ran one
    operation (drawn as a box at every depth): its box takes that operation's value.
    Under the scale, the legend counts the values the drawing does not show (on calls
    inside closed modules, on operations left out) and names the options that show them
    (the ``render_depth`` that opens their modules, ``expand_leaves``, ``all_ops``).
    """

    def __init__(self, activations: Any = None, stat: str = "zeros", *, scale: Any = None,
                 vmin: Optional[float] = None, vmax: Optional[float] = None, annotate: bool = True,
                 legend: bool = True, title: Optional[str] = None, log: Optional[bool] = None,
                 **styler_args: Any) -> None:
        super().__init__(**styler_args)
        if activations is None:
            raise TypeError("ActivationStyler needs activations= (a torchrecorder.capture(...) made "
                            "with stats=True, or a mapping of layer name to number)")
        if isinstance(activations, Mapping):
            values = dict(activations)
        elif callable(getattr(activations, "stats", None)):
            values = activations.stats(stat)
        else:
            raise TypeError(f"activations must be a capture or a mapping, got {type(activations).__name__}")
        # a capture names the network's own operations "net/<op>" (or after the rec= it was
        # given), a recording after its name: value_of pairs them
        root = getattr(activations, "root", None)
        self._network = root if isinstance(root, str) else "net"
        self.values: dict[str, float] = {}
        for k, v in values.items():
            try:
                self.values[str(k)] = float(v)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"the value for {k!r} is not a number: {v!r}") from exc
        self.stat = stat
        if scale is None:
            scale = "warm" if stat in _FRACTIONS or stat in ("time", *COST_STATS) else "cool"
        if isinstance(scale, str):
            if scale not in SCALES:
                raise ValueError(f"unknown scale {scale!r}; choose from {sorted(SCALES)}")
            scale = SCALES[scale]
        self.scale = list(scale)
        if len(self.scale) < 2 or not all(isinstance(c, str) and len(c) == 7 and c.startswith("#")
                                          for c in self.scale):
            raise ValueError("scale must be a name or at least two '#rrggbb' colours")
        shown = list(self.values.values())
        fraction = stat in _FRACTIONS
        self.vmin = vmin if vmin is not None else (0.0 if fraction or not shown else min(shown))
        self.vmax = vmax if vmax is not None else (1.0 if fraction or not shown else max(shown))
        positive = bool(shown) and min(shown) > 0 and self.vmin > 0
        self.log = (stat in ("grad_norm", *COST_STATS) and positive) if log is None else bool(log)
        if self.log and not positive:
            raise ValueError("log=True needs positive values and a positive vmin")
        self.annotate = annotate
        self.legend = legend
        if title is None:
            title = _TITLES.get(stat, stat) + (" (log scale)" if self.log else "")
        self.title = title

    # ------------------------------------------------------------ values and colours
    def value_of(self, node: BaseNode) -> Optional[float]:
        """The statistic of the call or operation ``node`` (by its key), or ``None``."""
        if isinstance(node, OpNode):
            return self._op_value(node)
        if not isinstance(node, LayerNode):
            return None
        got = self.values.get(call_name(node))
        if got is None and (op := self._only_op(node)) is not None:
            return self._op_value(op)  # its box stands for its one operation
        return got

    def _op_value(self, op: OpNode) -> Optional[float]:
        """The value of ``op`` by its key; for an operation of the network's own ``forward``,
        also by the name the capture gave the network (``net/tanh`` for the graph's ``lb/tanh``)."""
        got = self.values.get(str(op.key))
        if got is None and self.renderer is not None:
            call = dict.get(self.renderer.rec.nodes, op.parent_key)
            if isinstance(call, LayerNode) and call.parent_key is None:
                got = self.values.get(f"{self._network}/{str(op.key).rpartition('/')[2]}")
        return got

    def _only_op(self, layer: LayerNode) -> Optional[OpNode]:
        """The one operation of a module that called no other module and ran one operation (drawn
        as a box at every depth), where the styler draws for a renderer; else ``None``."""
        if self.renderer is None or not self.values:
            return None
        nodes = self.renderer.rec.nodes
        only: Optional[OpNode] = None
        for key in layer.subnet_keys:
            child = dict.get(nodes, key)
            if isinstance(child, LayerNode) or (isinstance(child, OpNode) and only is not None):
                return None
            if isinstance(child, OpNode):
                only = child
        return only

    def colour(self, value: float) -> str:
        """The ``#rrggbb`` colour of ``value`` on the scale."""
        lo, hi, v = self.vmin, self.vmax, value
        if self.log:
            lo, hi, v = math.log10(lo), math.log10(hi), math.log10(max(value, self.vmin))
        span = hi - lo
        return _mix(self.scale, (v - lo) / span if span else 0.0)

    def _note(self, value: float) -> str:
        if self.stat in COST_STATS:  # the unit names it: "2.1 MFLOPs", "out 64.0 KB"
            return f"{_COST_NOTES[self.stat]}{_fmt(value, self.stat)}"
        return f"{self.stat} {_fmt(value, self.stat)}"

    def _paint(self, attrs: dict[str, str], value: Optional[float], fill: bool) -> dict[str, str]:
        if value is None:
            return attrs
        colour = self.colour(value)
        if fill:
            attrs["fillcolor"] = colour
            if "filled" not in attrs.get("style", ""):
                attrs["style"] = (attrs.get("style", "") + ",filled").lstrip(",")
            # text that stands out from the fill: white on a dark one, the grey second lines
            # light grey, or as dark as the name where their grey would fade into the fill
            main, second = text_colours(colour)
            attrs["fontcolor"] = main
            if second != SECOND_LINE_GREYS[0]:
                attrs["label"] = recolour_second_lines(str(attrs.get("label", "")), second)
        else:
            attrs["color"] = colour
            attrs["penwidth"] = "2.5"
        if self.annotate:
            label = str(attrs.get("label", ""))  # the markup (an HtmlLabel's methods read its text)
            note = html_text(self._note(value))
            if label.endswith("</TABLE>>"):  # a table (a cluster's title): one more row
                row = f'<TR><TD ALIGN="LEFT" COLSPAN="2"><I>{note}</I></TD></TR>'
                attrs["label"] = f"{label[:-len('</TABLE>>')]}{row}</TABLE>>"
            elif label.startswith("<") and label.endswith(">"):
                sep = "<BR/>" if fill else " "
                attrs["label"] = f"{label[:-1]}{sep}<I>{note}</I>>"
        tip, note_text = attrs.get("tooltip", ""), dot_text(self._note(value))
        attrs["tooltip"] = f"{tip}; {note_text}" if tip else note_text
        return attrs

    # ------------------------------------------------------------ the styler's hooks
    def style_node(self, node: BaseNode) -> dict[str, str]:
        """The default attributes, filled with the colour of the call's value."""
        return self._paint(super().style_node(node), self.value_of(node), True)

    def style_cluster(self, node: LayerNode) -> dict[str, str]:
        """The default attributes, with the border in the colour of the call's value."""
        return self._paint(super().style_cluster(node), self.value_of(node), False)

    def style_repeated(self, node: LayerNode, run: Sequence[LayerNode], expanded: bool) -> dict[str, str]:
        """A folded run coloured by the mean value of its blocks."""
        attrs = super().style_repeated(node, run, expanded)
        got = [v for v in (self.value_of(n) for n in run) if v is not None]
        return self._paint(attrs, sum(got) / len(got) if got else None, not expanded)

    def _not_in_view(self) -> str:
        """What the legend says of the values whose call or operation the drawing does not show
        (inside a closed module, or an operation left out): ``""`` when every one is shown."""
        renderer = self.renderer
        if renderer is None:
            return ""
        projection = renderer.projection
        nodes = renderer.rec.nodes
        left_out = projection.left_out
        values = self.values
        valued = [n for n in nodes.values() if (isinstance(n, OpNode) and self._op_value(n) is not None)
                  or (isinstance(n, LayerNode) and call_name(n) in values)]
        hidden, depth, leaves, left = 0, 0, False, False  # and what would show them
        for node in valued:
            drawn = projection.drawn_key(node.key)
            out = node.key in left_out
            inside = drawn is None or out
            parent = node.parent_key
            while not inside and drawn != node.key and parent is not None:
                inside = parent == drawn  # the drawn node is a closed module around it
                parent = getattr(dict.get(nodes, parent), "parent_key", None)
            if inside and isinstance(node, OpNode) and isinstance(holder := nodes.get(drawn), LayerNode):
                inside = self._only_op(holder) is not node  # the box of its one-op module shows it
            if inside:
                hidden += 1
                left = left or out
                owner = dict.get(nodes, node.parent_key)
                if out or drawn is None or not isinstance(node, OpNode) or not isinstance(owner, LayerNode):
                    depth = max(depth, node.depth if not out and drawn is not None else 0)
                elif self._only_op(owner) is node:  # the box of its one-op module, drawn open
                    depth = max(depth, owner.depth)
                else:  # its module opened, a leaf only with expand_leaves
                    depth = max(depth, node.depth)
                    leaves = leaves or not any(isinstance(nodes.get(k), LayerNode) for k in owner.subnet_keys)
        if not hidden:
            return ""
        shown_by = [f"render_depth={depth}"] if depth else []
        shown_by += ["expand_leaves=True"] if leaves else []
        shown_by += ["all_ops=True"] if left else []
        # what a new drawing needs, not what this one was drawn with: "drawn with render_depth=4"
        # under a drawing made at depth 1 read as a statement about that drawing
        how = f"; a drawing with {', '.join(shown_by)} shows them" if shown_by else ""
        return f"{hidden} of {len(valued)} values not in view: inside closed modules or left out{how}"

    def graph_attrs(self) -> dict[str, str]:
        """The default graph attributes, with the colour scale as the graph's label (at the bottom);
        under the scale, how many values lie on calls or operations the drawing does not show."""
        attrs = super().graph_attrs()
        if not self.legend or not self.values:
            return attrs
        steps = 5
        marks: list[tuple[str, str]] = []  # (label, colour) of each cell, no label twice
        for i in range(steps):
            if self.log:
                v = self.vmin * (self.vmax / self.vmin) ** (i / (steps - 1))
            else:
                v = self.vmin + (self.vmax - self.vmin) * i / (steps - 1)
            text = _fmt(v, self.stat)
            if not marks or marks[-1][0] != text:
                marks.append((text, self.colour(v)))
        if len(marks) == 1:  # one value for every call (all dead, all alike): said once
            marks = [(f"{marks[0][0]} everywhere", marks[0][1])]
        cells = []
        for text, colour in marks:
            font = ' COLOR="white"' if _dark(colour) else ""
            width = 48 if len(marks) > 1 else 96
            cells.append(f'<TD BGCOLOR="{colour}" WIDTH="{width}"><FONT POINT-SIZE="9"{font}>'
                         f"{html_text(text)}</FONT></TD>")
        steps = len(cells)
        unseen = self._not_in_view()
        note = (f'<TR><TD COLSPAN="{steps}" BORDER="0"><FONT POINT-SIZE="9">{html_text(unseen)}</FONT>'
                "</TD></TR>" if unseen else "")
        attrs["label"] = ('<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">'
                          f'<TR><TD COLSPAN="{steps}" BORDER="0"><B>{html_text(self.title)}</B></TD></TR>'
                          f"<TR>{''.join(cells)}</TR>{note}</TABLE>>")
        attrs.setdefault("labelloc", "b")
        return attrs
