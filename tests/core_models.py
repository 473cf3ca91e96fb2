"""Small models with known structure, for the core recording and rendering tests."""

from __future__ import annotations

import torch
from torch import nn


class MLP(nn.Module):
    """Linear -> ReLU -> Linear, children named fc1, act, fc2."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class ConvBN(nn.Module):
    """A CNN with BatchNorm (buffers) and a flatten outside any submodule."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.head = nn.Linear(4 * 8 * 8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn(self.conv(x)))
        return self.head(torch.flatten(y, 1))


class ResidualBlock(nn.Module):
    """Two convolutions and a residual add that runs in the block itself."""

    def __init__(self, c: int = 4) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(torch.relu(self.conv1(x))) + x


class ResNetish(nn.Module):
    """stem conv -> residual block -> pooled linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.block = ResidualBlock(4)
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.stem(x)).mean(dim=(2, 3)))


class TwoInputs(nn.Module):
    """Two inputs, each through its own linear, joined by torch.cat."""

    def __init__(self) -> None:
        super().__init__()
        self.left = nn.Linear(3, 4)
        self.right = nn.Linear(5, 4)
        self.out = nn.Linear(8, 1)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.out(torch.cat([self.left(a), self.right(b)], dim=1))


class Inner(nn.Module):
    """Level 3: a linear and a tanh."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.lin(x))


class Middle(nn.Module):
    """Level 2: two Inner blocks in a row."""

    def __init__(self) -> None:
        super().__init__()
        self.a = Inner()
        self.b = Inner()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x))


class Nested(nn.Module):
    """Level 1: Middle, then a head; three levels of modules in all."""

    def __init__(self) -> None:
        super().__init__()
        self.mid = Middle()
        self.head = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.mid(x))
