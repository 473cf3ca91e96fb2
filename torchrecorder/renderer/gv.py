"""torchrecorder 1.0.3's module of the Graphviz renderer, kept so that its imports run:
``from torchrecorder.renderer.gv import GraphvizRenderer, GraphvizStyler``.

The classes are :mod:`torchrecorder.renderer.graphviz`'s (see there)."""

from graphviz import Digraph

from ..nodes import BaseNode, LayerNode, OpNode, ParamNode, TensorNode
from .base import BaseRenderer
from .graphviz import GraphvizRenderer
from .styler import GraphvizStyler

__all__ = ["BaseNode", "BaseRenderer", "Digraph", "GraphvizRenderer", "GraphvizStyler", "LayerNode",
           "OpNode", "ParamNode", "TensorNode"]
