"""What the HTML page shows of a recording's cost: each call's cost in its panel, and the
colourings of its colour menu (see :func:`torchrecorder.cost`)."""

from __future__ import annotations

from typing import Any, Optional

from ..cost import COST_STATS, CallCost, Cost, cost, format_bytes, format_flops
from ..graph import Graph
from ..nodes import BaseNode

__all__ = ["colourings", "cost_text", "page_colouring", "recorded_cost"]


def recorded_cost(rec: Graph) -> Optional[Cost]:
    """The recording's cost (:func:`~torchrecorder.cost.cost`), or ``None`` for a graph that
    holds none (built by hand)."""
    if rec.op_args is None and rec.op_flops is None:
        return None
    return cost(rec)


def colourings(costs: Cost, order: list[BaseNode]) -> dict[str, Any]:
    """For the page's colour menu, per cost statistic: its title, its legend (a DOT label) and
    ``{node index: [colour, text colour, colour of the second lines]}`` for the nodes it colours
    (the index as a string: the page's data is JSON, and its object keys are strings; the text
    colours as :func:`~torchrecorder.renderer.activations.text_colours` picks them, the second
    lines' ``""`` where they keep their grey)."""
    from .activations import SECOND_LINE_GREYS, ActivationStyler, text_colours  # (the drawing's colouring)

    out: dict[str, Any] = {}
    for stat, title in zip(COST_STATS, ("FLOPs", "output size", "parameter size", "saved for backward"),
                           strict=True):
        values = {k: v for k, v in costs.stat(stat).items() if v > 0}
        if not values:
            continue
        styler = ActivationStyler(activations=values, stat=stat)
        fill: dict[str, list[Any]] = {}
        for i, node in enumerate(order):
            value = styler.value_of(node)
            if value is not None:
                colour = styler.colour(value)
                main, second = text_colours(colour)
                fill[str(i)] = [colour, main, "" if second == SECOND_LINE_GREYS[0] else second]
        out[stat] = {"title": title, "legend": styler.graph_attrs()["label"], "fill": fill}
    return out


def cost_text(entry: CallCost) -> str:
    """``8.9 MFLOPs · params 544.8 KB · out 64.0 KB`` (and ``· saved 1.2 MB`` where the
    recording kept the backward graph)."""
    text = (f"{format_flops(entry.flops)} · params {format_bytes(entry.param_bytes)} · "
            f"out {format_bytes(entry.activation_bytes)}")
    if entry.saved_bytes is not None:
        text += f" · saved {format_bytes(entry.saved_bytes)}"
    return text


#: options of :class:`~torchrecorder.renderer.activations.ActivationStyler` that the Colour menu's
#: colourings do not take: a ``stat=`` given with one of them is drawn into the page as asked
_STYLER_ONLY = ("scale", "vmin", "vmax", "annotate", "legend", "title", "log")


def page_colouring(rec: Graph, options: dict[str, Any], styler_cls: Any) -> tuple[Any, Optional[str]]:
    """How ``make_html(rec, stat=...)`` colours the page: ``(styler class, menu choice)``.

    A cost the Colour menu offers (``"flops"``, ...), with the default styler, is that menu's
    choice when the page opens (taken out of ``options``): the menu says it, and "as drawn"
    takes it off.  Any other ``stat`` (``"time"``, a styler's own, or one given with the
    colouring's options such as ``scale=``) is drawn into every view by
    :class:`~torchrecorder.renderer.activations.ActivationStyler`, as ``make_dot`` draws it, and
    so are ``activations=`` (a capture made with ``stats=True``, or a mapping of call to number).

    Raises:
        ValueError: the recording cannot give ``stat`` (``"saved_bytes"`` without ``backward=True``).
    """
    from .activations import ActivationStyler, cost_values  # (the activation colouring, fed the costs)

    stat = options.get("stat")
    if "activations" in options:  # a capture's statistics (or a mapping), as make_dot takes them
        return styler_cls or ActivationStyler, None
    if stat is None or not (styler_cls is None or stat in (*COST_STATS, "time")):
        return styler_cls, None
    values = cost_values(rec, stat)  # a stat the recording cannot give: ValueError
    if styler_cls is None and stat in COST_STATS and values and not any(k in options for k in _STYLER_ONLY):
        del options["stat"]
        return None, stat
    options["activations"] = values
    return styler_cls or ActivationStyler, None
