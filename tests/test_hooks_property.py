"""Property test: recorders and ``capture`` with any options leave the model's results untouched.

Random small models whose blocks return random structures (tensors, ``None``,
tuples, dicts, sparse and integer tensors), random recorder and capture options
(``condition``, ``reduction``, ``keep``, ``detach``, ``clone``, ``stats``,
``edit``): two training passes give outputs and gradients bit-identical to a
plain run, and no module hook and no full-backward-hook flag is left behind.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from torchrecorder import capture
from torchrecorder.hooks.recorders import (
    BackwardInput,
    BackwardOutput,
    ForwardInput,
    ForwardOutput,
    ForwardPre,
)

from .hook_checks import hooks_left

SHAPES = ("tensor", "tuple_none", "dict", "sparse", "integer", "list")


class Structured(nn.Module):
    """A Linear whose output is wrapped in one of :data:`SHAPES`."""

    def __init__(self, shape: str) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.shape = shape

    def forward(self, x: torch.Tensor) -> Any:
        h = self.lin(x)
        if self.shape == "tensor":
            return h
        if self.shape == "tuple_none":
            return h, None
        if self.shape == "dict":
            return {"h": h, "none": None, "n": 3}
        if self.shape == "sparse":
            return h, h.detach().to_sparse()
        if self.shape == "integer":
            return h, h.argmax(-1)
        return [h, None]


class Pick(nn.Module):
    """Takes the first tensor of what the previous block returned."""

    def forward(self, value: Any) -> torch.Tensor:
        if isinstance(value, dict):
            return value["h"]
        return value if isinstance(value, torch.Tensor) else value[0]


def build(shapes: list[str], inplace: bool) -> nn.Sequential:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for shape in shapes:
        layers += [Structured(shape), Pick(), nn.ReLU(inplace=inplace)]
    return nn.Sequential(*layers, nn.Linear(4, 2))


ADD = lambda a, b: a + b  # noqa: E731

recorder_options = st.fixed_dictionaries({
    "cls": st.sampled_from([ForwardPre, ForwardInput, ForwardOutput, BackwardInput, BackwardOutput]),
    "condition": st.sampled_from([None, "always", "never", "odd"]),
    "reduction": st.sampled_from([None, ADD]),
    "detach": st.booleans(),
    "clone": st.booleans(),
    "types": st.sampled_from([Structured, Pick, nn.ReLU, nn.Linear]),
})

capture_options = st.fixed_dictionaries({
    "names": st.sampled_from([["**"], ["0", "1"], ["0.lin"], ["", "**"]]),
    "condition": st.sampled_from([None, "always", "never", "odd"]),
    "reduction": st.sampled_from([None, ADD]),
    "keep": st.sampled_from(["last", "all"]),
    "detach": st.booleans(),
    "clone": st.booleans(),
    "stats": st.booleans(),
    "grads": st.booleans(),
    "inputs": st.booleans(),
    "edit": st.sampled_from([None, "none", "same"]),
})


def _condition(kind: Any, counter: list[int]) -> Any:
    if kind is None:
        return None

    def condition() -> bool:
        counter[0] += 1
        return kind == "always" or (kind == "odd" and counter[0] % 2 == 1)

    return condition


def _edit(kind: Any) -> Any:
    if kind is None:
        return None
    return (lambda name, out: None) if kind == "none" else (lambda name, out: out)


def _run(net: nn.Module, xs: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    outs = []
    for x in xs:
        y = net(x)
        y.pow(2).sum().backward()
        outs.append(y.detach())
    grads = [x.grad for x in xs] + [p.grad.clone() for p in net.parameters() if p.grad is not None]
    return outs, grads


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes=st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3), inplace=st.booleans(),
       recorders=st.lists(recorder_options, max_size=3), cap=st.none() | capture_options,
       seed=st.integers(0, 2**16))
def test_outputs_and_gradients_are_bit_identical_and_nothing_is_left(
        shapes: list[str], inplace: bool, recorders: list[dict[str, Any]], cap: Any, seed: int) -> None:
    net = build(shapes, inplace)
    plain = copy.deepcopy(net)
    gen = torch.Generator().manual_seed(seed)
    xs = [torch.randn(3, 4, generator=gen, requires_grad=True) for _ in range(2)]
    want = _run(plain, [x.detach().requires_grad_() for x in xs])
    counter = [0]
    active = []
    for opts in recorders:
        o = dict(opts)
        cls, types = o.pop("cls"), o.pop("types")
        o["condition"] = _condition(o["condition"], counter)
        active.append(cls(**o).modules(net, types=types))
    inputs = [x.detach().requires_grad_() for x in xs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sparse tensors are a beta feature
        if cap is None:
            got = _run(net, inputs)
        else:
            c = dict(cap)
            names = c.pop("names")
            c["condition"] = _condition(c["condition"], counter)
            c["edit"] = _edit(c["edit"])
            if c["reduction"] is not None:
                c["keep"] = "last"  # keep="all" with a reduction is refused
            with capture(net, names, **c) as kept:
                got = _run(net, inputs)
            assert kept.passes == 2
            if c["stats"]:
                kept.stats("mean")
    for r in active:
        r.remove()
    for a, b in zip(got[0] + got[1], want[0] + want[1], strict=True):
        assert torch.equal(a, b)
    assert len(got[1]) == len(want[1])
    assert hooks_left(net) == []
