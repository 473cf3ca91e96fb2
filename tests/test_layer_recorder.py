"""scio's ``Recorder`` as ``torchrecorder.hooks.LayerRecorder``: the examples of scio's documentation,
then what the documentation promises about postprocessing, errors and hooks."""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import Linear, ReLU, Sequential

import torchrecorder
from torchrecorder.hooks import LayerRecorder
from torchrecorder.hooks.select import module_labels

from .hook_checks import hooks_left


def toy() -> tuple[nn.Module, LayerRecorder]:
    torch.manual_seed(0)
    toynet = Sequential(Linear(5, 4), ReLU(), Linear(4, 3), ReLU())
    rnet = LayerRecorder(toynet, input_size=(1, 5))
    return toynet, rnet


def test_the_examples_of_scios_documentation() -> None:
    toynet, rnet = toy()
    text = repr(rnet)
    for row in ("1-1", "1-2", "1-3", "1-4"):
        assert row in text
    assert text.splitlines()[-2] == "Currently recording: None"
    rnet.record((0, 1), (1, 3))
    assert "Currently recording: 0-1, 1-3" in repr(rnet)
    out = rnet(torch.rand((1, 5)))  # Forward pass for 1 random sample
    acts = rnet.activations
    assert isinstance(acts, types.MappingProxyType)
    assert list(acts) == [(1, 3), (0, 1)]  # in the order the layers returned
    assert torch.equal(acts[(0, 1)], out) and acts[(0, 1)].grad_fn is not None
    assert acts[(1, 3)].grad_fn.name() == "AddmmBackward0"
    assert torch.equal(acts[(0, 1)], torch.relu(acts[(1, 3)]))
    assert rnet.recorded_modules == {(0, 1): toynet, (1, 3): toynet[2]}
    assert list(rnet.recorded_params) == ["_net.0.weight", "_net.0.bias", "_net.2.weight", "_net.2.bias"]
    assert rnet.recorded_params["_net.2.weight"] is toynet[2].weight
    assert rnet.recording == ((0, 1), (1, 3))
    assert rnet.net is toynet
    with pytest.raises(TypeError):
        rnet.activations[(1, 3)] = None  # type: ignore[index]


def test_record_ignores_duplicates_and_order_and_names_the_nearest_label() -> None:
    _, rnet = toy()
    rnet.record((1, 3), (0, 1), (1, 3), "1-1")
    assert rnet.recording == ((0, 1), (1, 1), (1, 3))
    assert [p for p in rnet.recorded_params] == ["_net.0.weight", "_net.0.bias", "_net.2.weight",
                                                 "_net.2.bias"]
    with pytest.raises(ValueError, match=r"no layer has the label 1-5; nearest: '1-4'"):
        rnet.record((1, 5))
    with pytest.raises(ValueError, match=r"\(depth, idx\) pair"):
        rnet.record((1, 2, 3))  # type: ignore[arg-type]
    assert rnet.recording == ((0, 1), (1, 1), (1, 3))  # a failed record() changes nothing
    rnet.record()
    assert rnet.recording == () and "Currently recording: None" in repr(rnet)


def test_postprocessing_after_recording_not_on_a_copy() -> None:
    _, rnet = toy()
    rnet.record((1, 1), (1, 3))
    x = torch.rand(2, 5)
    plain = rnet.net(x)
    # one postprocessor for every recorded layer, in place: the records see the change
    out = rnet(x, activation_postproc=lambda t: t.zero_())
    assert bool((out == 0).all())
    assert bool((rnet.activations[(1, 1)] == 0).all()) and bool((rnet.activations[(1, 3)] == 0).all())
    # a replacement: what the network receives, while the record keeps the layer's own output
    seen: list[Any] = []
    out = rnet(x, activation_postproc=[lambda t: seen.append(1) or t * 2, None])
    assert seen == [1]
    assert torch.equal(rnet.activations[(1, 1)], rnet.net[0](x))
    assert torch.equal(rnet.activations[(1, 3)], rnet.net[2](torch.relu(rnet.net[0](x) * 2)))
    assert not torch.equal(out, plain)
    # the list follows the call order, extra elements are ignored, a short one is refused
    order: list[str] = []
    rnet(x, activation_postproc=[lambda t: order.append("first"), lambda t: order.append("second"),
                                 "ignored"])
    assert order == ["first", "second"]
    with pytest.raises(ValueError, match="1 postprocessors for 2 recorded layers"):
        rnet(x, activation_postproc=[lambda t: None])
    with pytest.raises(TypeError, match="not callable"):
        rnet(x, activation_postproc=[lambda t: None, 3])
    # dont_record: postprocessing still happens, nothing is kept
    out = rnet(x, activation_postproc=lambda t: t * 0, dont_record=True)
    assert dict(rnet.activations) == {} and torch.equal(out, rnet(x, activation_postproc=lambda t: t * 0))
    assert hooks_left(rnet) == []


class Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 3)

    def forward(self, x: torch.Tensor, use_b: bool = True) -> torch.Tensor:
        x = self.a(x)
        return self.b(x) if use_b else x


def test_a_recorded_layer_that_did_not_run_is_an_error_and_no_hook_stays() -> None:
    rnet = LayerRecorder(Branchy(), input_size=(1, 3))
    rnet.record((1, 2))
    rnet(torch.randn(2, 3))
    with pytest.raises(RuntimeError, match=r"did not run in this forward pass: 1-2 \(b\)"):
        rnet(torch.randn(2, 3), use_b=False)
    assert hooks_left(rnet) == []
    with pytest.raises(RuntimeError, match="mat1 and mat2"):
        rnet(torch.randn(2, 4))
    assert hooks_left(rnet) == []
    with pytest.raises(ValueError, match="input_size"):
        LayerRecorder(Branchy())
    # scio's setting for Hugging Face models: accepted (the layers are numbered from one pass)
    assert LayerRecorder(Branchy(), input_size=(1, 3), force_static_flow=False).recording == ()
    assert LayerRecorder(Branchy(), input_size=(1, 3), force_static_flow=True).recording == ()
    with pytest.raises(TypeError, match=r"wraps a torch\.nn\.Module"):
        LayerRecorder("net", input_size=(1, 3))  # type: ignore[arg-type]


class Blocks(nn.Module):
    """A ModuleList of blocks: labels come from the summary's numbering."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(4, 4)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(2))
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def test_labels_are_the_summarys() -> None:
    net = Blocks()
    rnet = LayerRecorder(net, input_data=torch.randn(1, 4))
    rec = torchrecorder.record(net, "Blocks", (1, 4))
    # the labels capture= and the recorders read (hooks.select over summary.layer_labels)
    want = {tuple(map(int, label.split("-"))): path for label, path in module_labels(net, rec).items()}
    assert rnet.labels == want
    table = rec.summary()
    for depth, idx in want:
        assert f"{depth}-{idx}" in table
    label = next(k for k, path in want.items() if path == "blocks.1.1")
    rnet.record(label)
    x = torch.randn(3, 4)
    rnet(x)
    assert torch.equal(rnet.activations[label], net.blocks[1](net.blocks[0](net.stem(x))))
    assert f"Currently recording: {label[0]}-{label[1]}" in repr(rnet)


def test_a_failing_postprocessor_is_named_by_its_label() -> None:
    net, rnet = toy()
    rnet.record((1, 3))
    with pytest.raises(RuntimeError) as info:
        rnet(torch.rand(1, 5), activation_postproc=lambda out: out.view(7, 7))
    notes = info.value.__notes__
    assert any("activation_postproc for layer 1-3" in n for n in notes)
    assert not any("baukit" in n for n in notes)  # capture's hint is for capture's own edits

    assert hooks_left(net) == []
