"""
A CNN with BatchNorm: render depth
==================================

``render_depth`` decides how deep modules open.  Modules above the depth are
drawn as clusters holding what ran inside them, modules at the depth are single
boxes, and edges into hidden insides are re-attached to the box.  A leaf module
(``Conv2d``, ``BatchNorm2d``) is one box at every depth.
"""

import torch
from torch import nn

import torchrecorder


def stage(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.MaxPool2d(2))


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(stage(3, 16), stage(16, 32))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


# %%
# A recording made in a block is drawn at depth 1: ``features`` is one box.
cnn = SmallCNN()
rec = torchrecorder.record(cnn, "cnn", (1, 3, 32, 32))

# %%
# Depth 2: ``features`` opens into its two stages.
depth2 = torchrecorder.make_dot(rec, render_depth=2)

# %%
# Depth 3: every stage opens too.  Recording leaves the BatchNorm statistics
# as they were: the running mean is still zero.
depth3 = torchrecorder.make_dot(rec, render_depth=3)
print(cnn.features[0][1].running_mean.abs().max())
