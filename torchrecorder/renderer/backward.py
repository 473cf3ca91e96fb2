"""The renderer of backward graphs (:func:`~torchrecorder.projection.backward.backward_view`)."""

from __future__ import annotations

from typing import Any

from ..nodes import BaseNode, LayerNode, OpNode
from .graphviz import GraphvizRenderer

__all__ = ["NO_COLOURING", "BackwardRenderer"]

#: why a backward drawing refuses ``stat=`` and ``activations=``
NO_COLOURING = ("stat= and activations= colour the forward drawing; the backward drawing "
                "(backward=True) takes neither")


class BackwardRenderer(GraphvizRenderer):
    """A :class:`~torchrecorder.renderer.GraphvizRenderer` whose module calls above
    ``render_depth`` open whenever they hold an autograd node, leaf modules included, so that
    every ``grad_fn`` is drawn (a forward drawing keeps a one-op ``nn.ReLU`` a box instead).

    Raises:
        ValueError: given ``stat=`` or ``activations=``, which colour a forward drawing.
    """

    def __init__(self, *args: Any, **options: Any) -> None:
        if "stat" in options or "activations" in options:
            raise ValueError(NO_COLOURING)
        super().__init__(*args, **options)

    def is_expanded(self, node: BaseNode) -> bool:
        """Layers above ``render_depth`` holding an autograd node (or a child layer) open."""
        if not isinstance(node, LayerNode) or node.depth >= self.render_depth:
            return False
        nodes = self.rec.nodes
        return any(isinstance(nodes.get(k), (LayerNode, OpNode)) for k in node.subnet_keys)
