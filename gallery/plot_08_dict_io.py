"""
Dict inputs and outputs
=======================

Inputs and outputs can be any pytree: dicts, lists, tuples, dataclasses,
``None`` and non-tensor values.  Each tensor inside becomes an input or output
node named by its path in the container.
"""

import torch
from torch import nn

import torchrecorder


class MultiModal(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.image = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                   nn.Flatten())
        self.text = nn.EmbeddingBag(100, 8)
        self.fuse = nn.Linear(16, 4)

    def forward(self, batch: dict) -> dict:
        features = torch.cat([self.image(batch["image"]), self.text(batch["tokens"])], dim=1)
        return {"logits": self.fuse(features), "features": features}


batch = {"image": torch.randn(2, 3, 32, 32), "tokens": torch.randint(0, 100, (2, 5))}
rec = torchrecorder.record(MultiModal(), "multimodal", input_data=(batch,))
torchrecorder.make_dot(rec, render_depth=1)
