"""Architectures and idioms from outside the test zoo that once recorded wrongly (redteam17).

Each test builds a tiny hand-written model with the idiom of a real architecture and
checks the recording against an independent oracle or against what the model does.
"""

from __future__ import annotations

import warnings
from typing import Optional

import pytest
import torch
from torch import Tensor, nn

import torchrecorder
from torchrecorder import OpNode

from .graph_checks import check_invariants, check_state_unchanged, snapshot
from .oracle import compare, export_relation, fx_relation, recorded_relation


class _LinearBN(nn.Module):
    """LeViT's ``MLPLayerWithBN``: the batch norm's result takes the linear's shape with
    ``reshape_as``, which reads no value of the linear's output."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.linear = nn.Linear(n, n)
        self.batch_norm = nn.BatchNorm1d(n)

    def forward(self, h: Tensor) -> Tensor:
        h = self.linear(h)
        return self.batch_norm(h.flatten(0, 1)).reshape_as(h)


class _ShapeFrom(nn.Module):
    """``other`` of ``reshape_as`` / ``view_as`` / ``expand_as`` made by a call of its own."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how
        self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        shape, g = self.a(x), self.b(x)
        if self.how == "expand_as":
            y = g[:, :1].expand_as(shape)
        else:
            y = getattr(g.flatten(), self.how)(shape)
        return self.c(y)


@pytest.mark.parametrize("how", ["reshape_as", "view_as", "expand_as"])
def test_the_tensor_an_operation_takes_only_its_shape_from_feeds_nothing(how: str) -> None:
    torch.manual_seed(0)
    net = _ShapeFrom(how)
    x = torch.randn(2, 4)
    before = snapshot(net)
    rec = torchrecorder.record(net, "net", input_data=x)
    check_state_unchanged(before, net)
    check_invariants(rec)
    got = recorded_relation(rec)
    assert ("a#1", "c#1") not in got, f"{how}'s shape argument draws an edge"
    assert {("INPUT", "a#1"), ("INPUT", "b#1"), ("b#1", "c#1"), ("c#1", "OUTPUT")} == got
    op = next(n for n in rec.nodes.values() if isinstance(n, OpNode) and n.op == how)
    assert [a for a, b in rec.links if b == op.key] != [], "the reshaped tensor still feeds it"
    assert compare(fx_relation(net, (x,), {}), got)[2:] == (set(), set())


def test_levit_linear_batch_norm_feeds_the_next_call_through_its_batch_norm() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(_LinearBN(4), nn.Hardswish(), _LinearBN(4)).eval()
    x = torch.randn(2, 3, 4)
    rec = torchrecorder.record(net, "net", input_data=x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected, visible = export_relation(net, (x,), {})
    got = recorded_relation(rec, visible)
    _, _, missing, extra = compare(expected, got)
    assert (missing, extra) == (set(), set())
    assert ("0.linear#1", "1#1") not in recorded_relation(rec)


class _Float64ScaleFirst(nn.Module):
    """A float64 parameter registered before the float32 layers that take the input."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4, dtype=torch.float64))
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        return self.b(self.a(x)) * self.scale.float()


def test_random_inputs_take_the_dtype_of_most_of_the_parameters() -> None:
    net = _Float64ScaleFirst()
    rec = torchrecorder.record(net, "net", (2, 4))
    inputs = [n for n in rec.nodes.values() if getattr(n, "role", None) == "input"]
    assert [n.dtype for n in inputs] == ["float32"]
    half = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2)).to(torch.float16)
    rec = torchrecorder.record(half, "half", (2, 4))
    assert [n.dtype for n in rec.nodes.values() if getattr(n, "role", None) == "input"] == ["float16"]


class _GaussianPolicy(nn.Module):
    """A policy network returning its state-independent log-std parameter and its input as
    they are (``return self.mu(x), self.log_std, x``), as many RL codebases do."""

    def __init__(self) -> None:
        super().__init__()
        self.mu = nn.Linear(4, 2)
        self.log_std = nn.Parameter(torch.zeros(2))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return self.mu(x), self.log_std, x


def test_a_parameter_or_input_the_network_returns_is_handed_back_as_it_is() -> None:
    net = _GaussianPolicy()
    x = torch.randn(3, 4)
    before = snapshot(net)
    with torchrecorder.recording(net, "pi") as rec:
        _mu, log_std, same = net(x)
    check_state_unchanged(before, net)
    assert type(log_std) is nn.Parameter and log_std is net.log_std and same is x, (
        "the caller got other objects than a plain call gives")
    outputs = {n.name: n.key for n in rec.nodes.values() if getattr(n, "role", None) == "output"}
    assert set(outputs) == {"output[0]", "output[1]", "output[2]"}
    fed_by = {b: a for a, b in rec.links}
    assert fed_by[fed_by[outputs["output[1]"]]] == "log_std"
    assert fed_by[fed_by[outputs["output[2]"]]] == "input:x"


class _KeywordModel(nn.Module):
    """A Hugging Face-style forward: every input optional and named."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, input_ids: Optional[Tensor] = None, attention_mask: Optional[Tensor] = None) -> Tensor:
        assert isinstance(input_ids, Tensor)
        h = self.embed(input_ids)
        if attention_mask is not None:
            h = h * attention_mask[..., None]
        return self.out(h)


class _BatchModel(nn.Module):
    """A forward that takes one dict of features."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 2)

    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        return self.a(batch["x"]) * batch["m"]


def test_a_dict_of_forwards_argument_names_given_as_input_data_is_its_keyword_arguments() -> None:
    ids = torch.randint(0, 10, (1, 5))
    mask = torch.ones(1, 5)
    rec = torchrecorder.record(_KeywordModel(), "lm", input_data={"input_ids": ids, "attention_mask": mask})
    inputs = [n.name for n in rec.nodes.values() if getattr(n, "role", None) == "input"]
    assert inputs == ["input_ids", "attention_mask"]
    # a dict whose keys are not forward's argument names stays one argument
    rec = torchrecorder.record(_BatchModel(), "b", input_data={"x": torch.randn(2, 4), "m": torch.ones(2, 2)})
    names = [n.name for n in rec.nodes.values() if getattr(n, "role", None) == "input"]
    assert names == ["batch.x", "batch.m"]


class _SameNodeTwice(nn.Module):
    """``v = h.view_as(h)`` is ``h`` under another name; ``v.reshape_as(h)`` reads ``h``."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        h = self.a(x)
        return self.b(h.view_as(h).reshape_as(h))


def test_a_tensor_reshaped_as_itself_under_another_name_still_feeds_the_operation() -> None:
    rec = torchrecorder.record(_SameNodeTwice(), "net", (2, 4))
    check_invariants(rec)
    assert ("a#1", "b#1") in recorded_relation(rec)
