"""Models the user guide draws at build time with the ``torchrecorder`` directive
(``.. torchrecorder:: _models:factory``); random weights, nothing downloaded."""

from __future__ import annotations

import torch
from torch import nn


class ResidualCNN(nn.Module):
    """A stem, two residual blocks and a classifier."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.blocks = nn.Sequential(*(Residual(16) for _ in range(2)))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)))


class Residual(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(x + self.conv2(self.relu(self.conv1(x))))


class TinyLM(nn.Module):
    """Token embedding, a two-layer transformer encoder, a language-model head."""

    def __init__(self, vocab: int = 1000, width: int = 64, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, 4, 2 * width, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.lm_head = nn.Linear(width, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.encoder(self.embed(ids)))


class TwoTowers(nn.Module):
    """Two inputs, one per tower, joined by a sum."""

    def __init__(self) -> None:
        super().__init__()
        self.left = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.right = nn.Sequential(nn.Linear(4, 16), nn.ReLU())
        self.out = nn.Linear(16, 2)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.out(self.left(a) + self.right(b))


def deep_mlp(blocks: int = 10) -> nn.Sequential:
    """Ten identical blocks in a row: folded into one, marked ×10."""
    return nn.Sequential(*(nn.Sequential(nn.Linear(32, 32), nn.GELU()) for _ in range(blocks)))
