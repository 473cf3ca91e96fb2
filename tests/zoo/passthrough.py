"""Zoo models for the edges of issue 16: modules that hand back a tensor that already existed,
and the edges that run through code torch's function mode does not see.

Pass-through (compared with torch.fx and torch.export, exactly): an ``nn.Identity``
shortcut followed by ``bn(x)``, an eval ``Dropout`` whose input is used again, a module
returning its parameter that is also read directly, a module returning a buffer called
twice, a module returning its input inside a tuple and a dict, and all of them at once in
a forward run with gradients, under ``no_grad`` and under ``inference_mode``.

Missing edges (``MISSING_EDGES``: producer and consumer calls that must be joined): a
``@torch.jit.script`` function between two layers, in-place writes through ``.data`` and
``.detach()`` that decide the output, and a custom ``autograd.Function`` whose forward
goes through ``.item()``.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import Tensor, nn

from . import Case, Inputs

__all__ = ["CASES", "MISSING_EDGES", "PASS_THROUGH"]


def _x(*shape: int, seed: int = 0) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------- pass-through
class IdentityShortcut(nn.Module):
    """A pre-activation ResNet block: ``sc = self.shortcut(x)`` (an ``nn.Identity``), then
    ``self.bn1(x)`` on the same object."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.shortcut = nn.Identity()
        self.bn1 = nn.BatchNorm2d(8)
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.head = nn.Linear(8, 3)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stem(x)
        sc = self.shortcut(x)
        y = self.conv1(torch.relu(self.bn1(x)))
        y = self.conv2(torch.relu(self.bn2(y)))
        return self.head((y + sc).mean((2, 3)))


class EvalDropoutReuse(nn.Module):
    """``d = self.drop(h); y = self.norm(h)``: an eval-mode Dropout returns ``h`` itself."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 6)
        self.drop = nn.Dropout(0.1)
        self.norm = nn.LayerNorm(6)
        self.fc = nn.Linear(6, 6)
        self.out = nn.Linear(6, 2)

    def forward(self, x: Tensor) -> Tensor:
        h = self.proj(x)
        d = self.drop(h)
        y = self.norm(h)
        return self.out(self.fc(d) + y)


class PosEmbed(nn.Module):
    """A learned positional embedding that returns its parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = nn.Parameter(_x(5, 6, seed=7))

    def forward(self) -> Tensor:
        return self.pos


class ParamReturning(nn.Module):
    """``self.embed()`` returns a parameter; ``self.embed.pos`` is later read directly."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = PosEmbed()
        self.fc = nn.Linear(6, 6)
        self.other = nn.Linear(6, 6)

    def forward(self, x: Tensor) -> Tensor:
        a = self.fc(x + self.embed())
        b = self.other(x * self.embed.pos)
        return a + b


class CosCache(nn.Module):
    """A rotary-style cache that returns its buffer."""

    cos: Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cos", torch.cos(torch.arange(6.0)), persistent=False)

    def forward(self) -> Tensor:
        return self.cos


class BufferReturning(nn.Module):
    """A module returning a buffer, called twice: the two calls share no data."""

    def __init__(self) -> None:
        super().__init__()
        self.rope = CosCache()
        self.q = nn.Linear(6, 6)
        self.k = nn.Linear(6, 6)
        self.out = nn.Linear(6, 2)

    def forward(self, x: Tensor) -> Tensor:
        q = self.q(x) * self.rope()
        k = self.k(x) * self.rope()
        return self.out(q + k)


class KeepInTuple(nn.Module):
    """Returns its input next to a new tensor: ``return x, x * 2``."""

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return x, x * 2


class KeepInDict(nn.Module):
    """Returns its input inside a dict."""

    def forward(self, x: Tensor) -> dict[str, Tensor]:
        return {"raw": x, "half": x / 2}


class ContainerHoldingInput(nn.Module):
    """Children return their input inside a tuple and a dict; the input is read again after."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.split = KeepInTuple()
        self.pack = KeepInDict()
        self.b = nn.Linear(4, 4)
        self.c = nn.Linear(4, 4)
        self.d = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        h = self.a(x)
        pair = self.split(h)
        packed = self.pack(h)
        return self.b(pair[0]) + self.c(pair[1]) + self.d(h) + packed["raw"]


class AllPassThroughs(nn.Module):
    """Every pass-through in one forward: Identity, eval Dropout, a returned parameter read
    directly later, a returned buffer (two calls), a tuple holding the input."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(6, 6)
        self.shortcut = nn.Identity()
        self.drop = nn.Dropout(0.1)
        self.norm = nn.LayerNorm(6)
        self.embed = PosEmbed()
        self.rope = CosCache()
        self.split = KeepInTuple()
        self.b = nn.Linear(6, 6)
        self.c = nn.Linear(6, 6)

    def forward(self, x: Tensor) -> Tensor:
        h = self.a(x)
        sc = self.shortcut(h)
        d = self.drop(h)
        pair = self.split(self.norm(h))
        y = self.b(d + self.embed()) * self.rope() + pair[1]
        z = self.c(h * self.embed.pos + pair[0]) * self.rope()
        return y + z + sc


# --------------------------------------------------------------- missing edges
def _gate(x: Tensor) -> Tensor:
    """A TorchScript function: its ops run in TorchScript's interpreter, unseen by the mode."""
    return torch.sigmoid(x) * x


with warnings.catch_warnings():  # torch.jit.script is deprecated, and still used by real models
    warnings.simplefilter("ignore", DeprecationWarning)
    scripted_gate = torch.jit.script(_gate)


class ScriptedGate(nn.Module):
    """A module whose output is made by a scripted function."""

    def forward(self, x: Tensor) -> Tensor:
        return scripted_gate(x)


class ScriptedFunction(nn.Module):
    """``h = scripted_gate(self.a(x)); self.b(h)``, and a module returning such a result."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.gate = ScriptedGate()
        self.c = nn.Linear(4, 2)

    def forward(self, x: Tensor) -> Tensor:
        h = scripted_gate(self.a(x))
        return self.c(self.gate(self.b(h)))


class DataInplace(nn.Module):
    """One-hot masks written in place through ``.data`` and ``.detach()`` decide the output."""

    def __init__(self) -> None:
        super().__init__()
        self.score = nn.Linear(6, 6)
        self.fc = nn.Linear(6, 3)
        self.fc2 = nn.Linear(6, 3)

    def forward(self, x: Tensor) -> Tensor:
        idx = self.score(x).argmax(-1, keepdim=True)
        onehot = torch.zeros_like(x)
        onehot.data.scatter_(1, idx, 1.0)
        mask = torch.zeros_like(x)
        mask.detach().index_fill_(1, idx[0], 1.0)
        return self.fc(onehot) + self.fc2(mask)


class ItemRound(torch.autograd.Function):
    """Rounds to 8 levels through Python numbers (``.item()``, ``.tolist()``), straight-through
    gradient."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        scale = max(x.abs().max().item(), 1e-6) / 7
        rows = [[float(round(v / scale)) for v in row] for row in x.tolist()]
        return torch.tensor(rows, dtype=x.dtype) * scale

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        return grad


class CustomFunction(nn.Module):
    """``self.b(ItemRound.apply(self.a(x)))``: a custom autograd Function through ``.item()``."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        return self.b(ItemRound.apply(self.a(x)))


# ----------------------------------------------------------------- the cases
def _case(cls: Any, inputs: Any, name: str = "", **kw: Any) -> Case:
    def build() -> nn.Module:
        torch.manual_seed(0)
        return cls().eval()

    return Case(name=name or cls.__name__, build=build, inputs=inputs, **kw)


def _one(*shape: int) -> Any:
    def inputs() -> Inputs:
        return (_x(*shape),), {}
    return inputs


_FX_SCRIPT = ("torch.fx cannot trace it: a TorchScript function cannot take a Proxy")
_FX_MUTATION = ("fx disagrees by design: torch.fx does not model mutation, so it misses the "
                "in-place writes through .data and .detach() that decide the output")
_FX_FUNCTION = "torch.fx cannot trace it: ItemRound.forward calls .item() on a Proxy"

PASS_THROUGH: list[Case] = [
    _case(IdentityShortcut, _one(1, 3, 6, 6)),
    _case(EvalDropoutReuse, _one(2, 6)),
    _case(ParamReturning, _one(2, 5, 6)),
    _case(BufferReturning, _one(2, 6)),
    _case(ContainerHoldingInput, _one(2, 4)),
    _case(AllPassThroughs, _one(2, 5, 6)),
    _case(AllPassThroughs, _one(2, 5, 6), name="AllPassThroughsNoGrad", grad_mode="no_grad"),
    _case(AllPassThroughs, _one(2, 5, 6), name="AllPassThroughsInference", grad_mode="inference"),
]

MISSING_EDGES: list[tuple[Case, list[tuple[str, str]]]] = [
    (_case(ScriptedFunction, _one(2, 4), oracle=_FX_SCRIPT),
     [("a#1", "b#1"), ("b#1", "gate#1"), ("gate#1", "c#1")]),
    (_case(DataInplace, _one(2, 6), oracle=_FX_MUTATION,
           no_export="torch.export cannot trace a write through .data (a fake tensor is left "
                     "among the program's constants)"),
     [("score#1", "fc#1"), ("score#1", "fc2#1")]),
    (_case(CustomFunction, _one(2, 4), oracle=_FX_FUNCTION,
           no_export="torch.export cannot trace .item() inside a custom autograd Function"),
     [("a#1", "b#1")]),
]

CASES: list[Case] = [*PASS_THROUGH, *(case for case, _ in MISSING_EDGES)]
