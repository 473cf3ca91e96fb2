"""
What LoRA changed: a diff of two recordings
===========================================

:func:`torchrecorder.diff` compares two recordings (or two saved JSON files) and
pairs every module, operation, parameter and tensor with its counterpart.  Here a
small decoder is compared with the same decoder after a LoRA adapter was put
around its ``q_proj`` and ``v_proj`` projections, the way peft does it: each
projection becomes the ``base_layer`` of a wrapper holding ``lora_A`` and
``lora_B``, and the whole model moves under ``base_model.model.``.  Record the
model *before* wrapping it: peft edits the model in place.
"""

import copy

import torch
from torch import nn

import torchrecorder


class Attention(nn.Module):
    def __init__(self, width: int = 16) -> None:
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
    def __init__(self, n: int = 2) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Layer() for _ in range(n)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class LoraLinear(nn.Module):
    """The original layer as ``base_layer`` plus a rank-2 update (what peft's ``lora.Linear`` holds)."""

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
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.base_model = Inner(model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base_model(x)


def add_lora(model: Decoder) -> PeftLike:
    """Wrap every ``q_proj`` and ``v_proj`` in a :class:`LoraLinear`, under peft's prefix."""
    for layer in model.layers:
        for name in ("q_proj", "v_proj"):
            setattr(layer.self_attn, name, LoraLinear(getattr(layer.self_attn, name)))
    return PeftLike(model)


# %%
# Record the model, then its LoRA variant, and compare.  The text report folds
# the repeated change into one line; the prefix was found and stripped on its own
# (the paths are written without it).  The two roots are paired: a note in the
# header says the decoder is *wrapped by* ``PeftLike``, which holds it as
# ``base_model.model``; below it, exactly the four projections are wrapped, each by
# a wrapper found by its structure (a child with the very parameters of the
# original layer), so their weights are not "removed" and ``lora_A`` / ``lora_B``
# count as the wrapper's parts (status ``wrapper``, not "added": ``12 wrapper
# parts`` in the counts).  ``peft.get_peft_model`` itself gives the same report
# (its wrapper class is called ``Linear`` too: the report says ``peft Linear``).
torch.manual_seed(0)
model = Decoder()
d = torchrecorder.diff(torchrecorder.record(model, "decoder", (1, 4, 16)),
                       torchrecorder.record(add_lora(copy.deepcopy(model)), "decoder", (1, 4, 16)))
print(d)

# %%
# One picture: unchanged modules muted, the original projections marked as wrapped
# (purple, ``⊐``), the wrappers and their factors as the wrappers' parts (paler
# purple, ``⊂``), not as additions.  Only the
# modules that hold changes open; each cluster carries the count of what changed
# inside it.
torchrecorder.make_dot(d)

# %%
# ``view="a"`` lays out the same nodes with only the first model visible, so the
# two pictures line up side by side (``view="b"`` the second); each draws its own
# model's names, parameter counts and shapes, and what only the other model holds,
# titles included, is left out.
torchrecorder.make_dot(d, view="a", legend=False)
