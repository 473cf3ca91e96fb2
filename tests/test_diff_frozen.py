"""A diff names the parameters that were only frozen or unfrozen: the tree leaves their modules
out (nothing else of theirs changed), so the header says which they are."""

from __future__ import annotations

import copy

import torch
from torch import nn

import torchrecorder


def _net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8)),
                         nn.Linear(8, 2))


def _rec(net: nn.Module) -> torchrecorder.Graph:
    return torchrecorder.record(net, "net", (1, 4))


def test_frozen_parameters_are_named() -> None:
    net = _net()
    tuned = copy.deepcopy(net)
    tuned[0].requires_grad_(False)
    tuned[2][0].weight.requires_grad_(False)
    tuned[2][1].weight.requires_grad_(False)
    d = torchrecorder.diff(_rec(net), _rec(tuned))
    text = str(d)
    assert "parameters: 4 of 8 differ (4 frozen)" in text
    line = next(x for x in text.splitlines() if x.startswith("  frozen: "))
    assert line == "  frozen: 0.weight, 0.bias, 2 × 2.*.weight"


def test_every_shared_parameter_frozen_is_one_phrase() -> None:
    net = _net()
    tuned = copy.deepcopy(net).requires_grad_(False)
    tuned[3].weight.requires_grad_(True)
    d = torchrecorder.diff(_rec(tuned), _rec(net))
    assert "  unfrozen: all 7 of the 8 parameters the models share but 3.weight" in str(d).splitlines()
    d = torchrecorder.diff(torchrecorder.record(net, "net", (1, 4)),
                           torchrecorder.record(copy.deepcopy(net).requires_grad_(False), "net", (1, 4)))
    assert "  frozen: all 8 parameters the models share" in str(d).splitlines()


def test_the_drawing_names_the_frozen_parameters_under_its_legend() -> None:
    """No box changes when parameters were only frozen: the legend says which were."""
    net = _net()
    tuned = copy.deepcopy(net)
    tuned[0].requires_grad_(False)
    d = torchrecorder.diff(_rec(net), _rec(tuned))
    source = torchrecorder.make_dot(d).source
    legend = next(line for line in source.splitlines() if '"diff legend"' in line)
    assert "frozen: 0.weight, 0.bias" in legend
    assert "frozen" not in torchrecorder.make_dot(d, legend=False).source
    plain = torchrecorder.diff(_rec(net), _rec(copy.deepcopy(net)))
    assert "frozen" not in torchrecorder.make_dot(plain).source
