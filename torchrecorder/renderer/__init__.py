"""Renderers: turn a graph into a picture or a text format.

:class:`GraphvizRenderer` (DOT, and every image format Graphviz writes, styled
by a :class:`GraphvizStyler`) and :class:`MermaidRenderer` (Mermaid flowchart
text) are both built on :class:`BaseRenderer`'s documented hooks; write your
own the same way.  :class:`HtmlRenderer` writes one self-contained interactive
page whose Graphviz attributes come from the same styler.  Renderers read a graph and its
:class:`~torchrecorder.projection.Projection`, never a live model.
"""

from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..projection import AUTO_FOLD_MIN
from .base import BaseRenderer
from .graphviz import GraphvizRenderer, RecordingDigraph
from .styler import DEFAULT_STYLES, PRESETS, GraphvizStyler

if TYPE_CHECKING:
    from .html import HtmlPage, HtmlRenderer, make_html
    from .mermaid import MERMAID_STYLES, MermaidRenderer, make_mermaid

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


def _module_of(name: str) -> ModuleType:
    """The submodule that defines the lazily imported ``name``."""
    if name in ("HtmlPage", "HtmlRenderer", "make_html"):
        from . import html

        return html
    if name in ("MERMAID_STYLES", "MermaidRenderer", "make_mermaid"):
        from . import mermaid

        return mermaid
    raise AttributeError(f"module 'torchrecorder.renderer' has no attribute {name!r}")


def __getattr__(name: str) -> Any:
    """The page's and Mermaid's names, imported from their modules on first use and kept (the
    page's scripts and Mermaid are not needed to draw with Graphviz)."""
    value = getattr(_module_of(name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the lazily imported ones included."""
    return sorted({*globals(), *__all__})
