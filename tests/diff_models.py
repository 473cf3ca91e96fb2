"""Small models and their edited versions for the diff tests (each edit a docstring)."""

from __future__ import annotations

import torch
from torch import nn


class Block(nn.Module):
    """A residual MLP block."""

    def __init__(self, width: int = 8, hidden: int = 8) -> None:
        super().__init__()
        self.fc = nn.Linear(width, hidden)
        self.act = nn.ReLU()
        self.out = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.out(self.act(self.fc(x)))


class Stack(nn.Module):
    """Blocks in a ModuleList, then a head."""

    def __init__(self, hiddens: tuple[int, ...] = (8, 8, 8), head: str = "head") -> None:
        super().__init__()
        self.layers = nn.ModuleList([Block(8, h) for h in hiddens])
        setattr(self, head, nn.Linear(8, 2))
        self._head = head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return getattr(self, self._head)(x)


class Attention(nn.Module):
    """q, k, v projections and an output projection."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.q_proj = nn.Linear(width, width)
        self.k_proj = nn.Linear(width, width)
        self.v_proj = nn.Linear(width, width)
        self.o_proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = torch.softmax(self.q_proj(x) @ self.k_proj(x).transpose(-1, -2), dim=-1)
        return self.o_proj(w @ self.v_proj(x))


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.self_attn = Attention()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.self_attn(x)


class Decoder(nn.Module):
    """A tiny decoder: layers of attention."""

    def __init__(self, n: int = 3) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Layer() for _ in range(n)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class LoraLinear(nn.Module):
    """A hand-written LoRA wrapper: the original layer as ``base_layer`` plus a low-rank update."""

    def __init__(self, base: nn.Linear, rank: int = 2) -> None:
        super().__init__()
        self.base_layer = base
        self.lora_A = nn.Linear(base.in_features, rank, bias=False)
        self.lora_B = nn.Linear(rank, base.out_features, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base_layer(x) + self.lora_B(self.lora_A(x))


class Inner(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


class PeftLike(nn.Module):
    """``base_model.model.`` around the original model, as peft does."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.base_model = Inner(model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base_model(x)


def lora_wrap(model: Decoder, targets: tuple[str, ...] = ("q_proj", "v_proj")) -> PeftLike:
    """Wrap the ``targets`` projections of every layer with :class:`LoraLinear`, under a prefix."""
    for layer in model.layers:
        for name in targets:
            setattr(layer.self_attn, name, LoraLinear(getattr(layer.self_attn, name)))
    return PeftLike(model)


class QuantLinear(nn.Linear):
    """A quantised-style subclass of Linear."""


class ConvBnRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.head = nn.Conv2d(4, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.relu(self.bn(self.conv(x))))


class ConvReLU2d(nn.Sequential):
    """A fused conv + relu, as torch.ao's fusion makes."""


class Fused(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = ConvReLU2d(nn.Conv2d(3, 4, 3), nn.ReLU())
        self.head = nn.Conv2d(4, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(x))


class Twice(nn.Module):
    """Calls ``fc`` once, or twice (weight sharing)."""

    def __init__(self, twice: bool) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.twice = twice

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        return self.fc(y) if self.twice else y


class Residual(nn.Module):
    """``fc(x) + x``, or with a ``mul`` inserted before the ``add``."""

    def __init__(self, scale: bool) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc(x)) + x
        if self.scale:
            h = h * 2
        return self.fc(h) + h


class Features(nn.Module):
    """A container holding one block."""

    def __init__(self) -> None:
        super().__init__()
        self.block = Block()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class Trunk(nn.Module):
    """Another container: the same block, then a norm."""

    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.norm = nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.block(x))


class Before(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = Features()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)


class After(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = Trunk()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.trunk(x)
