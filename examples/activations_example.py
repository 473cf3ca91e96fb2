"""Train a toy classifier, then draw it coloured by the fraction of dead ReLU units
(figures/activations.svg; the README's figure of activations).

A unit is dead when it is zero for every input of the data set; training kills
some of them (a larger learning rate, such as 0.2, kills nearly all).
``capture(..., stats=True, record=False)`` gathers running statistics over many
batches without keeping any activation.
"""

import math
from collections import OrderedDict

import torch
from torch import nn

import torchrecorder


def spiral(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Three interleaved spiral arms in the plane, ``n`` points each."""
    xs, ys = [], []
    for arm in range(3):
        r = torch.linspace(0.1, 1.0, n)
        angle = r * 4.0 + arm * 2 * math.pi / 3 + 0.2 * torch.randn(n, generator=generator)
        xs.append(torch.stack([r * torch.cos(angle), r * torch.sin(angle)], 1))
        ys.append(torch.full((n,), arm))
    return torch.cat(xs), torch.cat(ys)


def block(width_in: int, width_out: int) -> nn.Sequential:
    return nn.Sequential(OrderedDict(fc=nn.Linear(width_in, width_out), relu=nn.ReLU()))


torch.manual_seed(0)
net = nn.Sequential(OrderedDict(
    block1=block(2, 64), block2=block(64, 64), block3=block(64, 64), block4=block(64, 32),
    head=nn.Linear(32, 3)))

if __name__ == "__main__":
    gen = torch.Generator().manual_seed(0)
    x, y = spiral(300, gen)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for _ in range(300):
        idx = torch.randint(0, len(x), (64,), generator=gen)
        loss = nn.functional.cross_entropy(net(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        accuracy = (net(x).argmax(1) == y).float().mean().item()
    print(f"trained: loss {loss.item():.3f}, accuracy {accuracy:.2f}")

    # statistics of every ReLU over the whole data set, in batches; no activation is kept
    with torch.no_grad(), torchrecorder.capture(net, types=nn.ReLU, stats=True, record=False) as cap:
        for batch in x.split(128):
            net(batch)
    for name, dead in cap.stats("dead").items():
        print(f"{name}: {100 * dead:.0f}% of units dead")

    # the picture: make_dot(rec, activations=cap, stat="dead") does the same for a recording
    path = torchrecorder.render_network(net, "toy", None, "figures", "activations", input_data=x[:1],
                                        render_depth=2, activations=cap, stat="dead",
                                        tensor_nodes=False)
    print(f"wrote {path}")
