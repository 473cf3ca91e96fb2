"""Show a drawing inline in Jupyter at a readable size: natural size, scrolling when wide.

Notebook front ends scale an SVG down to the width of the output cell, which
makes a wide network unreadably small; here the SVG keeps the size Graphviz
gave it (11-point text stays 11-point) inside a box that scrolls sideways.
"""

from __future__ import annotations

import re
from collections.abc import Container
from typing import Optional

from ..backend import render_source
from ..errors import GraphvizNotFoundError

__all__ = ["mimebundle", "svg_of"]

_PROLOGUE = re.compile(r"\A(?:\s*<\?xml[^>]*\?>|\s*<!DOCTYPE[^>]*>|\s*<!--.*?-->)*\s*", re.S)
_SVG_TAG = re.compile(r"<svg\b")


def svg_of(source: str) -> Optional[str]:
    """The SVG of DOT ``source``, or ``None`` when no Graphviz is installed."""
    try:
        return render_source(source, "svg").decode("utf-8")
    except GraphvizNotFoundError:
        return None


def html_of(svg: str) -> str:
    """``svg`` for an HTML page: inline, at its natural size, in a box that scrolls when wide."""
    body = _PROLOGUE.sub("", svg, count=1)
    body = _SVG_TAG.sub('<svg style="max-width:none;height:auto"', body, count=1)
    return f'<div style="overflow-x:auto;max-width:100%">{body}</div>'


def mimebundle(source: str, text: str, include: Optional[Container[str]] = None,
               exclude: Optional[Container[str]] = None) -> dict[str, str]:
    """The MIME bundle Jupyter displays for DOT ``source``.

    Holds ``text/html`` (the scrolling box), ``image/svg+xml`` and
    ``text/plain`` (``text``); without Graphviz only ``text/plain``, which then
    says how to get a picture.
    """
    svg = svg_of(source)
    bundle: dict[str, str] = {}
    if svg is not None:
        bundle["text/html"] = html_of(svg)
        bundle["image/svg+xml"] = svg
        bundle["text/plain"] = text
    else:
        bundle["text/plain"] = text + "\n(no Graphviz found to draw it: see torchrecorder.backend)"
    return {k: v for k, v in bundle.items()
            if (include is None or k in include) and (exclude is None or k not in exclude)}
