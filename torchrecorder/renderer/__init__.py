"""Renderers: turn a recording into a picture or a text format.

:class:`GraphvizRenderer` (DOT, and every image format Graphviz writes) and
:class:`MermaidRenderer` (Mermaid flowchart text) are both built on
:class:`BaseRenderer`'s documented hooks; write your own the same way.
"""

from .base import AUTO_FOLD_MIN, BaseRenderer
from .graphviz import DEFAULT_STYLES, PRESETS, GraphvizRenderer, GraphvizStyler, RecordingDigraph
from .mermaid import MERMAID_STYLES, MermaidRenderer

__all__ = [
    "AUTO_FOLD_MIN",
    "DEFAULT_STYLES",
    "MERMAID_STYLES",
    "PRESETS",
    "BaseRenderer",
    "GraphvizRenderer",
    "GraphvizStyler",
    "MermaidRenderer",
    "RecordingDigraph",
]
