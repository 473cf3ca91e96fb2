"""
A multilayer perceptron: record, print, draw
============================================

The smallest complete use of torchrecorder: :func:`torchrecorder.record` runs
one forward pass and returns a :class:`~torchrecorder.Recorder`;
``print(rec)`` shows the layer table, and :func:`torchrecorder.make_dot` draws
the graph as a :class:`graphviz.Digraph`.
"""

from torch import nn

import torchrecorder

mlp = nn.Sequential(
    nn.Linear(784, 256), nn.ReLU(),
    nn.Linear(256, 64), nn.ReLU(),
    nn.Linear(64, 10),
)
rec = torchrecorder.record(mlp, "mlp", (32, 784))
print(rec)

# %%
# Above is the recording drawn at ``render_depth=1``: the network's direct
# children as boxes, with the tensor shape on each edge where it changes.
# ``make_dot`` takes the drawing options: here every edge carries its shape and
# every box its parameter shapes.  A block whose last line is a recording or a
# Digraph shows it, as a notebook would.

torchrecorder.make_dot(rec, edge_shapes="all", param_shapes=True)
