"""A model that ``torch.compile`` breaks into pieces three times, and the same model fixed
(the user guide's page on lines of code and graph breaks draws both)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class Gate(nn.Module):
    """Passes its input on when a score is positive: a Python ``if`` on ``.item()``."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.score = nn.Linear(dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.score(x).mean().item() > 0:  # a Python bool read from a tensor
            return x
        return torch.zeros_like(x)


class Noise(nn.Module):
    """Adds noise drawn with NumPy."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        noise = np.random.default_rng(0).normal(size=tuple(x.shape))  # NumPy, not torch
        return x + torch.from_numpy(noise).to(x.dtype)


class Net(nn.Module):
    """A projection, the gate, the noise and a head; prints on the way."""

    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.gate = Gate(dim)
        self.noise = Noise()
        self.head = nn.Linear(dim, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.proj(x))
        print("hidden", h.shape)  # a side effect dynamo does not trace
        h = self.noise(self.gate(h))
        return self.head(h)


class FixedGate(Gate):
    """The choice made on tensors: ``torch.where`` instead of ``if``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keep = self.score(x).mean() > 0
        return torch.where(keep, x, torch.zeros_like(x))


class FixedNoise(nn.Module):
    """The noise drawn by torch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.randn_like(x)


class FixedNet(Net):
    """The three fixes: no break left."""

    def __init__(self, dim: int = 8) -> None:
        super().__init__(dim)
        self.gate = FixedGate(dim)
        self.noise = FixedNoise()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.proj(x))
        if not torch.compiler.is_compiling():  # printed when run eagerly, skipped when traced
            print("hidden", h.shape)
        h = self.noise(self.gate(h))
        return self.head(h)
