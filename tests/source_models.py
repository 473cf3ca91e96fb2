"""Models whose source lines the tests read back: each line a test looks for ends in a
``# at:<name>`` marker, and :func:`line_of` finds it in this file."""

from __future__ import annotations

import torch
from torch import nn


def line_of(marker: str) -> int:
    """The line of this file that ends in ``# at:<marker>``."""
    with open(__file__, encoding="utf-8") as f:
        hits = [i for i, text in enumerate(f, 1) if text.rstrip().endswith(f"# at:{marker}")]
    if len(hits) != 1:
        raise LookupError(f"{len(hits)} lines marked {marker!r} in {__file__}")
    return hits[0]


class Gate(nn.Module):
    """A linear layer and a sigmoid."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)  # at:gate.fc
        return torch.sigmoid(y)  # at:sigmoid


class Joined(nn.Module):
    """A child called twice, a cat between modules and a Sequential."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = Gate()
        self.head = nn.Sequential(nn.Linear(8, 4), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = self.gate(x)  # at:gate
        h = self.gate(g)  # at:gate#2
        z = torch.cat([g, h], dim=1)  # at:cat
        return self.head(z)  # at:head


class Wrapped(nn.Linear):
    """A module whose class overrides ``__call__`` (as Hugging Face's checkpointing layers do)."""

    def __call__(self, *args: object, **kwargs: object) -> torch.Tensor:
        return super().__call__(*args, **kwargs)


class CallsWrapped(nn.Module):
    """Calls a module whose class overrides ``__call__``."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = Wrapped(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)  # at:wrapped


class Thresholded(nn.Module):
    """Takes a branch on a value read with ``.item()``: a graph break for torch.compile."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        if y.sum().item() > 0:  # at:item
            y = -y
        return torch.sigmoid(y)


class Chatty(nn.Module):
    """Prints in its own forward (a graph break) and calls a child that breaks too."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = Thresholded()
        self.out = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.gate(x)  # at:chatty.gate
        print("hidden", tuple(h.shape))  # at:print
        return self.out(h)
