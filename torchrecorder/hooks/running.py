"""Running statistics of what a capture sees, in constant memory: of each output
(:class:`RunningStats`) and of the gradients reaching it (:class:`GradStats`), read by
:meth:`torchrecorder.capture.Capture.stats`."""

from __future__ import annotations

import math
from typing import Any, Optional

import torch

from ._values import leaves

__all__ = ["GradStats", "RunningStats", "summarise"]


class RunningStats:
    """Running statistics of a layer's output over every recorded call (scalars on its device)."""

    __slots__ = ("absmax", "alive", "count", "sq", "sum", "zeros")

    def __init__(self) -> None:
        self.count = 0
        self.sum: Any = 0.0
        self.sq: Any = 0.0
        self.zeros: Any = 0
        self.absmax: Any = 0.0
        self.alive: Optional[torch.Tensor] = None

    def add(self, t: torch.Tensor) -> None:
        with torch.no_grad():
            x = t.detach()
            d = x.to(torch.float64)
            self.count += x.numel()
            self.sum = self.sum + d.sum()
            self.sq = self.sq + (d * d).sum()
            self.zeros = self.zeros + (x == 0).sum()
            self.absmax = torch.maximum(torch.as_tensor(self.absmax, device=x.device, dtype=torch.float64),
                                        d.abs().max()) if x.numel() else self.absmax
            if x.dim() >= 1 and x.shape[0] > 0:
                alive = (x != 0).reshape(x.shape[0], -1).any(0)
                if self.alive is None:
                    self.alive = alive
                elif self.alive.shape == alive.shape:
                    self.alive = self.alive | alive

    def value(self, stat: str) -> Optional[float]:
        if not self.count:
            return None
        if stat == "dead":
            return None if self.alive is None else 1.0 - float(self.alive.float().mean())
        mean = float(self.sum) / self.count
        if stat == "mean":
            return mean
        if stat == "std":
            return math.sqrt(max(0.0, float(self.sq) / self.count - mean * mean))
        if stat == "zeros":
            return float(self.zeros) / self.count
        return float(self.absmax)


class GradStats:
    """Running statistics of the gradients reaching one output (scalars on their device)."""

    __slots__ = ("calls", "count", "norms", "sum", "zeros")

    def __init__(self) -> None:
        self.calls = 0
        self.count = 0
        self.norms: Any = 0.0
        self.sum: Any = 0.0
        self.zeros: Any = 0

    def add(self, g: torch.Tensor) -> None:
        with torch.no_grad():
            d = g.detach().to(torch.float64)
            self.calls += 1
            self.count += d.numel()
            self.norms = self.norms + torch.linalg.vector_norm(d)
            self.sum = self.sum + d.sum()
            self.zeros = self.zeros + (d == 0).sum()

    def value(self, stat: str) -> Optional[float]:
        if not self.count:
            return None
        if stat == "grad_norm":
            return float(self.norms) / self.calls
        if stat == "grad_mean":
            return float(self.sum) / self.count
        return float(self.zeros) / self.count


def summarise(stats: dict[str, RunningStats], unsummarised: dict[str, str], name: str, output: Any) -> None:
    """Add the first floating (or boolean) tensor of ``output`` to ``stats[name]``; one of
    another layout (sparse, nested) or on ``meta`` cannot be: ``unsummarised[name]`` says why."""
    for t in leaves(output):
        if not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool):
            continue
        if t.device.type == "meta":
            unsummarised.setdefault(name, "a meta tensor, which has no values")
            return
        if t.is_nested or t.layout != torch.strided:
            kind = "nested" if t.is_nested else str(t.layout).replace("torch.", "")
            unsummarised.setdefault(name, f"a {kind} tensor")
            continue
        stats.setdefault(name, RunningStats()).add(t)
        return
