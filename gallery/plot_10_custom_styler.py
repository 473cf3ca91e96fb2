"""
A custom styler
===============

A styler subclasses :class:`torchrecorder.GraphvizStyler` and returns Graphviz
attributes per node (``style_node``), per edge (``style_edge``) and per
cluster (``style_cluster``).  The Graphviz renderer writes every statement
through these hooks, so overriding one changes the picture.  This one colours
layers by kind: convolutions blue, normalisations green, activations orange,
and leaves everything else to the default style.
"""

import torch
from torch import nn

import torchrecorder
from torchrecorder.nodes import LayerNode

COLOURS = {"Conv": "#cfe2f3", "Norm": "#d9ead3", "ReLU": "#fce5cd", "Linear": "#ead1dc"}


class KindColours(torchrecorder.GraphvizStyler):
    def style_node(self, node):
        attrs = super().style_node(node)
        if isinstance(node, LayerNode):
            for word, colour in COLOURS.items():  # node metadata: type_name, shapes, num_params
                if word in node.type_name:
                    attrs.update(style="filled,rounded", fillcolor=colour)
        return attrs


net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3),
                    nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))
net(torch.randn(1, 3, 16, 16))  # materialise the lazy layer
rec = torchrecorder.record(net, "coloured", (1, 3, 16, 16))
torchrecorder.make_dot(rec, render_depth=1, styler_cls=KindColours)
