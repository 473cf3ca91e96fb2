"""Shared helpers of the recorder and capture tests: small models and a check that no hook remains."""

from __future__ import annotations

import torch
from torch import nn


def hook_count(net: nn.Module) -> int:
    """How many module hooks ``net`` and its submodules hold (forward, pre, backward, backward pre).

    Zero only when the bookkeeping of hooks with kwargs and always-called hooks is empty too.
    """
    names = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
    marks = ("_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called")
    hooks = sum(len(getattr(m, n, {})) for m in net.modules() for n in names)
    return hooks or sum(len(getattr(m, n, {})) for m in net.modules() for n in marks)


def mlp(seed: int = 0, inplace: bool = False) -> nn.Sequential:
    """Linear(4, 8), ReLU, Linear(8, 6), ReLU, Linear(6, 3)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(inplace=inplace), nn.Linear(8, 6),
                         nn.ReLU(inplace=inplace), nn.Linear(6, 3))


class Encoder(nn.Module):
    """Two identical layers with an attention-named part each, then a head."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.layer = nn.ModuleList(nn.ModuleDict({"attention": nn.Linear(4, 4), "out": nn.Linear(4, 4)})
                                   for _ in range(2))
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.layer:
            x = torch.relu(block["out"](block["attention"](x)))
        return self.head(x)


def hooks_left(net: nn.Module) -> list[str]:
    """Every module of ``net`` that still holds a hook, or whose full-backward-hook flag torch left
    set (``_is_full_backward_hook``, which makes ``register_backward_hook`` refuse): ``"path: what"``."""
    names = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
             "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called")
    out = []
    for path, m in net.named_modules():
        out.extend(f"{path or '(root)'}: {n}" for n in names if len(getattr(m, n, {})))
        if getattr(m, "_is_full_backward_hook", None) is not None:
            out.append(f"{path or '(root)'}: _is_full_backward_hook={m._is_full_backward_hook}")
    return out
