"""
Gradient norms on the graph
===========================

Vanishing and exploding gradients show where the model's structure is.
``capture(..., grads=True, stats=True)`` keeps, for every chosen module (or
operation), running statistics of the gradient reaching its output over as many
backward passes as you like: ``grad_norm``, ``grad_mean`` and ``grad_zeros``.
``make_dot(rec, activations=cap, stat="grad_norm")`` colours the graph by them
(on a log scale) and ``cap.plot("grad_norm")`` draws the bar chart.

A deep stack of sigmoid layers, the textbook case of vanishing gradients, at
initialisation and after a few training steps.
"""

from collections import OrderedDict

import torch
from torch import nn

import torchrecorder

torch.manual_seed(0)
layers = OrderedDict()
for i in range(8):
    layers[f"fc{i}"] = nn.Linear(32, 32)
    layers[f"act{i}"] = nn.Sigmoid()
layers["head"] = nn.Linear(32, 1)
net = nn.Sequential(layers)
x, y = torch.randn(256, 32), torch.randn(256, 1)
rec = torchrecorder.record(net, "deep", input_data=x[:1])


def gradient_stats() -> torchrecorder.Capture:
    with torchrecorder.capture(net, types=nn.Linear, grads=True, stats=True, record=False) as cap:
        for batch, target in zip(x.split(64), y.split(64), strict=True):
            nn.functional.mse_loss(net(batch), target).backward()
    net.zero_grad()
    return cap


# %%
# At initialisation the gradient shrinks by orders of magnitude towards the input:
at_init = gradient_stats()
torchrecorder.make_dot(rec, render_depth=1, activations=at_init, stat="grad_norm")

# %%
# The same as a bar chart (a matplotlib figure; ``pip install matplotlib``):
chart = at_init.plot("grad_norm")

# %%
# After a few hundred steps of Adam, the picture has changed:
opt = torch.optim.Adam(net.parameters(), lr=3e-3)
for _ in range(300):
    opt.zero_grad()
    nn.functional.mse_loss(net(x), y).backward()
    opt.step()
trained = gradient_stats()
torchrecorder.make_dot(rec, render_depth=1, activations=trained, stat="grad_norm")
