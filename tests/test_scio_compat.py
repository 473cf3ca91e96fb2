"""Programs written for scio's ``Recorder`` run on ``LayerRecorder``: its keywords, its labels.

scio labels layers as torchinfo numbers its rows, each call of a shared module
on a row of its own; these tests compare the labels with torchinfo's own.
"""

from __future__ import annotations

import pytest
import torch
import torchinfo
from torch import nn

from torchrecorder.hooks import LayerRecorder


class SharedLayer(nn.Module):
    """``fc`` and ``act`` called twice: scio's ``1-1`` and ``1-3`` are the two calls of ``fc``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU()
        self.out = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.act(self.fc(self.act(self.fc(x)))))


def _torchinfo_labels(net: nn.Module, size: tuple[int, ...]) -> dict[tuple[int, int], nn.Module]:
    """torchinfo's rows: ``(depth, depth_index)`` -> module (the numbering scio shows)."""
    stats = torchinfo.summary(net, input_size=size, verbose=0)
    return {(row.depth, row.depth_index): row.module for row in stats.summary_list if row.depth_index}


def test_each_call_of_a_shared_layer_has_its_own_label():
    torch.manual_seed(0)
    net = SharedLayer()
    rnet = LayerRecorder(net, input_size=(1, 4))
    theirs = _torchinfo_labels(net, (1, 4))
    assert {label: rnet.net.get_submodule(path) for label, path in rnet.labels.items() if label[0] == 1} == {
        label: module for label, module in theirs.items() if label[0] == 1}
    assert rnet.labels[(1, 1)] == rnet.labels[(1, 3)] == "fc"
    rnet.record((1, 1), (1, 3))
    x = torch.randn(2, 4)
    out = rnet(x)
    first = net.fc(x)
    second = net.fc(torch.relu(first))
    assert torch.allclose(rnet.activations[(1, 1)], first)
    assert torch.allclose(rnet.activations[(1, 3)], second)  # main before: the first call under 1-1 only
    assert torch.allclose(out, net.out(torch.relu(second)))


def test_a_postprocessor_reaches_the_call_it_is_for():
    torch.manual_seed(0)
    net = SharedLayer()
    rnet = LayerRecorder(net, input_size=(1, 4))
    rnet.record((1, 3))  # the second call of fc only
    x = torch.randn(2, 4)
    out = rnet(x, activation_postproc=lambda a: torch.zeros_like(a))
    # recorded before the postprocessor replaced it, as in scio
    assert torch.allclose(rnet.activations[(1, 3)], net.fc(torch.relu(net.fc(x))))
    assert torch.allclose(out, net.out(torch.zeros(2, 4)))  # the first call ran untouched
    rnet.record((1, 1), (1, 3))
    out = rnet(x, activation_postproc=[None, lambda a: a * 0])
    assert torch.allclose(rnet.activations[(1, 1)], net.fc(x))
    assert torch.allclose(out, net.out(torch.zeros(2, 4)))


def test_scio_settings_for_a_hugging_face_model():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                     num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=16)
    torch.manual_seed(0)
    bert = transformers.BertModel(config)
    bert.train()
    # as scio's documentation builds one for a Hugging Face model, torchinfo keywords passed on
    rnet = LayerRecorder(bert, input_size=(1, 8), dtypes=[torch.long], force_static_flow=False,
                         col_names=("input_size", "output_size", "num_params"), depth=4, mode="eval",
                         verbose=0)
    assert bert.training and all(m.training for m in bert.modules())  # its mode is put back
    layers = [label for label, path in rnet.labels.items() if path.startswith("encoder.layer.")
              and path.count(".") == 2]
    assert len(layers) == 2
    rnet.record(*layers)
    bert.eval()
    ids = torch.randint(0, 50, (3, 8))
    with torch.no_grad():
        out = rnet(ids)
        plain = bert(ids)
    assert torch.allclose(out.last_hidden_state, plain.last_hidden_state)
    last = rnet.activations[layers[-1]]
    last = last[0] if isinstance(last, tuple) else last
    assert torch.allclose(last, plain.last_hidden_state)
    with pytest.raises(ValueError, match="mode"):
        LayerRecorder(bert, input_size=(1, 8), dtypes=[torch.long], mode="inference")


def test_dtypes_give_each_input_of_input_size_its_dtype() -> None:
    """scio passes torchinfo's ``dtypes=`` on: one per input (ids and a bool mask) works, as
    in torchinfo; it raised 'LayerRecorder makes every input ... with one dtype'."""

    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.words = nn.Embedding(9, 4)

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.words(ids) * mask[..., None]

    rnet = LayerRecorder(Masked(), input_size=[(1, 6), (1, 6)], dtypes=[torch.long, torch.bool])
    inputs = [n for n in rnet._graph.nodes.values() if getattr(n, "role", "") == "input"]
    assert [n.dtype for n in inputs] == ["int64", "bool"]
    rnet.record((1, 1))
    ids = torch.randint(0, 9, (1, 6))
    rnet(ids, torch.ones(1, 6, dtype=torch.bool))
    assert torch.equal(rnet.activations[(1, 1)], rnet.recorded_modules[(1, 1)](ids))


class Fuse(nn.Module):
    """Two inputs, each through a layer of its own, joined by a head."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 4)
        self.b = nn.Linear(5, 4)
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cat([self.a(x), self.b(y)], -1))


@pytest.mark.parametrize("input_data", [
    [torch.randn(2, 3), torch.randn(2, 5)],                 # torchinfo: a list holds positional inputs
    {"x": torch.randn(2, 3), "y": torch.randn(2, 5)},       # a dict holds keyword inputs
])
def test_input_data_as_torchinfo_reads_it(input_data) -> None:
    net = Fuse()
    stats = torchinfo.summary(net, input_data=input_data, verbose=0)
    expected = {(row.depth, row.depth_index): row.module for row in stats.summary_list if row.depth_index}
    rnet = LayerRecorder(net, input_data=input_data)
    rnet.record(*expected)
    x, y = torch.randn(4, 3), torch.randn(4, 5)
    out = rnet(x, y)
    assert rnet.recorded_modules == expected
    assert torch.equal(rnet.activations[(1, 3)], out)
    assert torch.equal(rnet.activations[(1, 2)], net.b(y))
    with pytest.raises(ValueError, match="not both"):
        LayerRecorder(net, input_data={"x": x}, input_kwargs={"y": y})
