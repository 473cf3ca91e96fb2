"""
The backward graph, in module clusters
======================================

``record(..., backward=True)`` also keeps the autograd graph the forward pass
built: every ``grad_fn`` that ``loss.backward()`` would run, each placed in the
module call whose forward created it.  ``make_dot(rec, backward=True)`` draws
it with the same options as the forward graph (depth, folding, styling);
``show_saved=True`` adds the tensors each node saved for the backward pass.

Below, a small convolutional network, then the same backward graph as
torchviz draws it: the same nodes, but flat, with no module to tell where each
came from.
"""

import torch
from torch import nn

import torchrecorder

torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Flatten(), nn.Linear(8 * 7 * 7, 10))
rec = torchrecorder.record(net, "cnn", (2, 3, 16, 16), backward=True)
print(f"{len(rec.backward.nodes)} autograd nodes, {len(rec.backward.edges)} edges")
torchrecorder.make_dot(rec, backward=True)

# %%
# At depth 1 each module is one box again, as in the forward drawing:
torchrecorder.make_dot(rec, backward=True, render_depth=1)

# %%
# torchviz (``pip install torchviz``) draws the same autograd graph from an output:
import torchviz  # noqa: E402

out = net(torch.randn(2, 3, 16, 16))
torchviz.make_dot(out, params=dict(net.named_parameters()))
