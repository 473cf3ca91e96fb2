"""
A ResNet stage: residual connections and folded blocks
======================================================

Residual additions are operations outside any submodule; they appear as
``add`` nodes in the scope of the block that ran them.  Structurally identical
blocks that follow each other are drawn once, marked ``×N``: ``fold_repeats``
says when (``"auto"``: runs of 8 or more, ``True``: any run of 2 or more).
"""

import torch
from torch import nn

import torchrecorder


class BasicBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + x)


stage = nn.Sequential(*(BasicBlock(64) for _ in range(4)))
rec = torchrecorder.record(stage, "layer1", (1, 64, 56, 56))

# %%
# Unfolded, one block opened to show the residual ``add``:
unfolded = torchrecorder.make_dot(rec, render_depth=2, fold_repeats=False)

# %%
# Folded: the four blocks are drawn once, marked ``×4``.
folded = torchrecorder.make_dot(rec, render_depth=2, fold_repeats=True)
