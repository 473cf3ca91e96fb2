"""Small models written as users of torchrecorder 1.0.3 wrote them (modules called in ``forward``,
tensors in and out), shared by ``tests/test_seed_view.py`` and ``tests/data/record_seed103.py``,
which records what the original torchrecorder 1.0.3 drew of them.

Only torch is imported here: the recording script runs them under torchrecorder 1.0.3.
"""

from __future__ import annotations

import torch
from torch import nn


def mlp() -> nn.Module:
    """Three linear layers with activations."""
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 3))


class Residual(nn.Module):
    """Two convolutions and a skip connection."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(x + self.conv2(self.relu(self.conv1(x))))


class SmallCNN(nn.Module):
    """A stem, a residual block, pooling, a flatten outside any submodule, a head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, 4, 3, padding=1)
        self.block = Residual(4)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pool(self.block(self.stem(x)))
        return self.head(torch.flatten(h, 1))


class Attention(nn.Module):
    """Single-head self-attention written with plain operations."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.scale = dim ** -0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        weights = torch.softmax(q @ k.transpose(-2, -1) * self.scale, dim=-1)
        return self.proj(weights @ v)


class Block(nn.Module):
    """A pre-norm transformer block."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyTransformer(nn.Module):
    """An input projection, one transformer block, a head."""

    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.embed = nn.Linear(4, dim)
        self.block = Block(dim)
        self.head = nn.Linear(dim, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.embed(x)))


#: name -> (model factory, input shape), as 1.0.3's ``record(net, name, input_shapes)`` takes them
MODELS = {
    "mlp": (mlp, (2, 6)),
    "cnn": (SmallCNN, (1, 1, 8, 8)),
    "transformer": (TinyTransformer, (1, 5, 4)),
}
