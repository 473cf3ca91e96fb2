"""Programs written the way users of torchrecorder 1.0.3, scio and torchfunc wrote them, round 4:
each test is a habit that gave a different answer here than in the package it was written for."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchrecorder.hooks import LayerRecorder


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(x)) + x


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, 2, 1)
        self.block = _Block()
        self.fc = nn.Linear(2, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.block(self.stem(x)).mean((2, 3)))


def test_scio_recorded_modules_follow_the_layer_table() -> None:
    # scio lists recorded_modules in the order of its summary (call order, a layer before its
    # insides): 1-2 (block), 2-1 (block.conv), 1-3 (fc); zipping them with names relied on it
    rnet = LayerRecorder(_Net(), input_size=(1, 1, 4, 4))
    rnet.record((1, 3), (2, 1), (1, 2))
    assert list(rnet.recorded_modules) == [(1, 2), (2, 1), (1, 3)]
    assert [type(m).__name__ for m in rnet.recorded_modules.values()] == ["_Block", "Conv2d", "Linear"]


def test_scio_a_pass_that_raises_leaves_no_activations() -> None:
    # scio empties activations when a pass fails; reading them after catching the error must
    # not give the previous pass's outputs as if they were this one's
    net = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 2))
    rnet = LayerRecorder(net, input_size=(2, 3))
    rnet.record((1, 1), (1, 3))
    rnet(torch.randn(2, 3))
    assert len(rnet.activations) == 2

    def boom(t: torch.Tensor) -> torch.Tensor:
        raise ArithmeticError("postprocessing failed")

    with pytest.raises(ArithmeticError):
        rnet(torch.randn(2, 3), activation_postproc=[None, boom])
    assert dict(rnet.activations) == {}
    rnet(torch.randn(2, 3))
    with pytest.raises(RuntimeError):  # the network itself fails: wrong input width
        rnet(torch.randn(2, 4))
    assert dict(rnet.activations) == {}


def test_103_layer_node_back_is_none() -> None:
    # 1.0.3's LayerNode had pre, post and back (back always None); cleanup loops read all three
    import torchrecorder

    net = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    rec = torchrecorder.record(net, "net", (1, 3))
    removed = 0
    for node in rec.nodes.values():
        if isinstance(node, torchrecorder.nodes.LayerNode):
            for handle in (node.pre, node.post, node.back):
                if handle is not None:
                    handle.remove()
                    removed += 1
            assert node.back is None
    assert removed == 2 * len(list(rec.layers()))
