"""A figure for a printed page: with ``preset="paper"`` and ``size=``, Graphviz shrinks a
drawing that is larger than the size; :func:`fit_options` makes the drawing more compact
first, so that its smallest text still prints at :data:`MIN_PRINTED_PT` points or more."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Optional

from ..backend import render_source
from ..errors import GraphvizNotFoundError

__all__ = ["MIN_PRINTED_PT", "fit_options", "printed_text_size"]

#: the smallest text a printed figure may have, in points
MIN_PRINTED_PT = 6.0

_SCALE = re.compile(rb'<g id="graph0" class="graph" transform="scale\(([\d.]+) ([\d.]+)\)')
_FONT_SIZE = re.compile(rb'font-size="([\d.]+)"')

# the steps that make a drawing more compact, each applied on top of the ones before it
_STEPS: tuple[dict[str, Any], ...] = (
    {"fold_repeats": True},  # identical blocks drawn once
    {"graph_attrs": {"nodesep": "0.06", "ranksep": "0.1"},  # tighter spacing
     "cluster_attrs": {"margin": "3"}},
    # shorter labels: shapes and parameter counts stay in the tooltips
    {"edge_shapes": "none", "param_counts": False},
)
_TURNED = {"LR": "TB", "RL": "BT", "TB": "LR", "BT": "RL"}


def printed_text_size(svg: bytes) -> float:
    """The size at which the smallest text of Graphviz's ``svg`` prints, in points: its
    ``font-size`` times the scale Graphviz applied to fit ``size=``."""
    sizes = [float(s) for s in _FONT_SIZE.findall(svg)]
    if not sizes:
        return float("inf")
    match = _SCALE.search(svg)
    scale = min(float(match.group(1)), float(match.group(2))) if match else 1.0
    return min(sizes) * scale


def _merged(options: Mapping[str, Any], step: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(options)
    for key, value in step.items():
        if key.endswith("_attrs"):
            out[key] = {**dict(out.get(key) or {}), **value}
        else:
            out[key] = value
    return out


def fit_options(draw: Callable[[dict[str, Any]], str], options: dict[str, Any],
                size: str, stacklevel: int = 3) -> dict[str, Any]:
    """The drawing options under which the smallest text prints at :data:`MIN_PRINTED_PT`
    or more at ``size``: ``options`` themselves if they do; else, in turn, with identical
    blocks folded, tighter spacing, no shapes on the edges nor parameter counts in the
    boxes, and the layout turned (left to
    right instead of top to bottom, or back) if that prints larger.  If none does, the
    one that prints largest, with a warning saying how small its text is.

    ``draw(options)`` returns the DOT source of the drawing made with ``options``.
    Without Graphviz ``options`` are returned unchanged.
    """
    def printed(opts: dict[str, Any]) -> float:
        return printed_text_size(render_source(draw(opts), "svg"))

    try:
        best = (printed(options), options)
    except GraphvizNotFoundError:
        return options
    if best[0] >= MIN_PRINTED_PT:
        return options
    current = options
    for step in _STEPS:
        current = _merged(current, step)
        got = printed(current)
        if got > best[0]:
            best = (got, current)
        if got >= MIN_PRINTED_PT:
            return current
    direction = _direction(current)
    turned = _merged(current, {"graph_attrs": {"rankdir": _TURNED[direction]}})
    turned["direction"] = _TURNED[direction]
    got = printed(turned)
    if got > best[0]:
        best = (got, turned)
    if best[0] < MIN_PRINTED_PT:
        warnings.warn(f"preset='paper' with size={size!r}: even drawn compactly, the smallest text "
                      f"prints at {best[0]:.1f} pt (under {MIN_PRINTED_PT:g}); give a larger size= "
                      "or a smaller render_depth", UserWarning, stacklevel=stacklevel)
    return best[1]


def _direction(options: Mapping[str, Any]) -> str:
    graph: Optional[Mapping[str, Any]] = options.get("graph_attrs")
    given = options.get("direction") or options.get("rankdir") or (graph or {}).get("rankdir") or "TB"
    return str(given).upper() if str(given).upper() in _TURNED else "TB"
