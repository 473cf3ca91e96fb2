"""Renderers: turn a recording into a picture or a text format."""

from .base import BaseRenderer
from .graphviz import GraphvizRenderer, GraphvizStyler

__all__ = ["BaseRenderer", "GraphvizRenderer", "GraphvizStyler"]
