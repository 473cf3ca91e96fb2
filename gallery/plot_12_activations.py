"""
Activations coloured on the graph
=================================

:func:`torchrecorder.capture` records chosen layers while a ``with`` block
runs the model.  With ``stats=True`` it keeps running statistics (mean, std,
fraction of zeros, max magnitude, fraction of dead units) instead of tensors,
over as many batches as you like; ``make_dot(rec, activations=cap,
stat="dead")`` colours the modules by one of them, with a legend.

Here a small classifier is trained on two moons for a few steps, then drawn
coloured by the fraction of its ReLU units that never fire.
"""

from collections import OrderedDict

import torch
from torch import nn

import torchrecorder

gen = torch.Generator().manual_seed(0)
t = torch.rand(512, generator=gen) * 3.1416
x = torch.cat([torch.stack([t.cos(), t.sin()], 1), torch.stack([1 - t.cos(), 0.5 - t.sin()], 1)])
x = x[:, :2] + 0.1 * torch.randn(x.shape, generator=gen)
y = torch.cat([torch.zeros(512), torch.ones(512)]).long()

torch.manual_seed(0)
net = nn.Sequential(OrderedDict(
    fc1=nn.Linear(2, 64), relu1=nn.ReLU(), fc2=nn.Linear(64, 64), relu2=nn.ReLU(),
    fc3=nn.Linear(64, 32), relu3=nn.ReLU(), head=nn.Linear(32, 2)))
opt = torch.optim.SGD(net.parameters(), lr=0.3, momentum=0.9)
for _ in range(100):
    idx = torch.randint(0, len(x), (64,), generator=gen)
    loss = nn.functional.cross_entropy(net(x[idx]), y[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"loss after training: {loss.item():.3f}")

# %%
# Statistics of every ReLU over the whole data set; no activation is kept.
with torch.no_grad(), torchrecorder.capture(net, types=nn.ReLU, stats=True, record=False) as cap:
    for batch in x.split(128):
        net(batch)
for name, dead in cap.stats("dead").items():
    print(f"{name}: {100 * dead:.0f}% of units dead")

# %%
# The picture, coloured by the dead fraction:
rec = torchrecorder.record(net, "classifier", input_data=x[:1])
torchrecorder.make_dot(rec, render_depth=1, activations=cap, stat="dead")
