"""
A custom renderer, step by step
===============================

A renderer subclasses :class:`torchrecorder.BaseRenderer` and implements four
hooks: ``new_graph`` (make the object drawn into), ``render_node`` (one node;
an expanded layer goes to ``render_recursive_node``), ``render_recursive_node``
(a layer drawn as a group of its children) and ``render_edge`` (one edge
between two drawn nodes); ``finish`` turns the result into what ``render()``
returns.  Only ``render()`` needs ``new_graph``: calling the renderer on a
graph you made, ``BlockDiagram(rec)(graphviz.Digraph())``, draws into that
one and returns it.  Which layers open, re-attached edges and folding come
from the projection that every renderer shares.

This one draws a "block diagram": modules as circles sized by their
parameter count, groups as dashed boxes, and no tensors or operations.
"""

import math
import re

import graphviz
from torch import nn

import torchrecorder
from torchrecorder.nodes import LayerNode


class BlockDiagram(torchrecorder.BaseRenderer):
    # step 1: the object drawn into
    def new_graph(self):
        return graphviz.Digraph(self.rec.name, graph_attr={"rankdir": "LR", "fontname": "Helvetica"},
                                node_attr={"fontname": "Helvetica", "fontsize": "10"})

    def _id(self, node):
        return self.unique_id(node, lambda key: "n_" + re.sub(r"\W", "_", str(key)))

    # step 2: one node; expanded layers become groups
    def render_node(self, g, node):
        if self.is_expanded(node):
            self.render_recursive_node(g, node)
        elif isinstance(node, LayerNode):
            # renderers read node metadata only (so a graph loaded from JSON draws too)
            size = 0.4 + 0.15 * math.log10(1 + node.num_params_total)
            g.node(self._id(node), node.call_title(dotted=True), shape="circle", width=f"{size:.2f}",
                   fixedsize="true", style="filled", fillcolor="#e8eef7", fontsize="9")
        elif node.kind == "tensor" and node.role in ("input", "output"):
            g.node(self._id(node), node.role, shape="plaintext")

    # step 3: a group holding the layer's children
    def render_recursive_node(self, g, node):
        with g.subgraph(name=f"cluster_{self._id(node)}") as sub:
            sub.attr(label=node.name, style="dashed")
            for child in self.children(node):
                self.render_node(sub, child)

    # step 4: one edge (only between nodes this renderer drew)
    def render_edge(self, g, fnode, tnode):
        g.edge(self._id(fnode), self._id(tnode))


net = nn.Sequential(
    nn.Sequential(nn.Linear(16, 64), nn.ReLU()),
    nn.Sequential(nn.Linear(64, 64), nn.ReLU()),
    nn.Linear(64, 4),
)
rec = torchrecorder.record(net, "mlp", (1, 16))
diagram = BlockDiagram(rec, render_depth=2, tensor_nodes=False).render()
