"""
Diffs of everyday edits: an inserted block, a fusion, a refactor
================================================================

Three edits a model goes through, each compared with :func:`torchrecorder.diff`.
An inserted block renumbers the blocks after it; the diff pairs them by their
structure, so they are *renamed*, not changed.  A fusion that no structure can
explain is given as ``mapping={old: new}``.  A refactor that should change
nothing is checked in CI with ``bool(d)`` or ``torchrecorder diff a.json b.json
--exit-code``.
"""

import torch
from torch import nn

import torchrecorder


class Block(nn.Module):
    def __init__(self, hidden: int = 16) -> None:
        super().__init__()
        self.fc = nn.Linear(16, hidden)
        self.act = nn.GELU()
        self.out = nn.Linear(hidden, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.out(self.act(self.fc(x)))


class Stack(nn.Module):
    def __init__(self, hiddens: tuple[int, ...]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(h) for h in hiddens])
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


# %%
# A wider block inserted second: ``blocks.1`` is added, the old ``blocks.1`` and
# ``blocks.2`` are now ``blocks.2`` and ``blocks.3``.
a = torchrecorder.record(Stack((16, 16, 16)), "stack", (1, 16))
b = torchrecorder.record(Stack((16, 64, 16, 16)), "stack", (1, 16))
inserted = torchrecorder.diff(a, b)
print(inserted)
torchrecorder.make_dot(inserted)


# %%
# Conv, BatchNorm and ReLU fused into one module (as ``torch.ao`` fusion does):
# the mapping pairs the conv and the relu with the fused module's parts, and the
# BatchNorm shows as removed.
class ConvBnRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.relu(self.bn(self.conv(x))))


class ConvReLU2d(nn.Sequential):
    pass


class FusedNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = ConvReLU2d(nn.Conv2d(3, 8, 3), nn.ReLU())
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.conv(x))


fused = torchrecorder.diff(torchrecorder.record(ConvBnRelu(), "net", (1, 3, 16, 16)),
                           torchrecorder.record(FusedNet(), "net", (1, 3, 16, 16)),
                           mapping={"conv": "conv.0", "relu": "conv.1"})
print(fused)
torchrecorder.make_dot(fused)


# %%
# A refactor that only moved code around (here: ``Stack.forward`` rewritten to
# index its blocks): the two recordings are the same, the diff is empty
# (``bool(d)`` is false) and the summary says so; drawn with every module, the
# union is all grey.
torch.manual_seed(0)
old = torchrecorder.record(Stack((16, 16)), "stack", (1, 16))


def forward_by_index(self: Stack, x: torch.Tensor) -> torch.Tensor:
    for i in range(len(self.blocks)):
        x = self.blocks[i](x)
    return self.head(x)


Stack.forward = forward_by_index  # type: ignore[method-assign]
torch.manual_seed(0)
new = torchrecorder.record(Stack((16, 16)), "stack", (1, 16))
refactor = torchrecorder.diff(old, new)
print(refactor)
print("the models differ:", bool(refactor))
torchrecorder.make_dot(refactor, changes_only=False, legend=False)
