"""Renderers: turn a graph into a picture or a text format.

:class:`GraphvizRenderer` (DOT, and every image format Graphviz writes, styled
by a :class:`GraphvizStyler`) and :class:`MermaidRenderer` (Mermaid flowchart
text) are both built on :class:`BaseRenderer`'s documented hooks; write your
own the same way.  :class:`HtmlRenderer` writes one self-contained interactive
page whose Graphviz attributes come from the same styler.  Renderers read a graph and its
:class:`~torchrecorder.projection.Projection`, never a live model.
"""

from ..projection import AUTO_FOLD_MIN
from .base import BaseRenderer
from .graphviz import GraphvizRenderer, RecordingDigraph
from .html import HtmlPage, HtmlRenderer, make_html
from .mermaid import MERMAID_STYLES, MermaidRenderer, make_mermaid
from .styler import DEFAULT_STYLES, PRESETS, GraphvizStyler

__all__ = [
    "AUTO_FOLD_MIN",
    "DEFAULT_STYLES",
    "MERMAID_STYLES",
    "PRESETS",
    "BaseRenderer",
    "GraphvizRenderer",
    "GraphvizStyler",
    "HtmlPage",
    "HtmlRenderer",
    "MermaidRenderer",
    "RecordingDigraph",
    "make_html",
    "make_mermaid",
]
