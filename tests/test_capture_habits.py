"""Habits of baukit, nnsight and TransformerLens users that broke a capture: statistics asked of
a model on ``meta``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchrecorder

from .hook_checks import hooks_left


def test_stats_on_meta_say_why_nothing_was_summarised() -> None:
    with torch.device("meta"):
        net = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
    with torchrecorder.capture(net, ["0", "1"], stats=True, record=False) as cap:
        net(torch.randn(3, 4, device="meta"))
    assert cap.unsummarised == {"0": "a meta tensor, which has no values",
                                "1": "a meta tensor, which has no values"}
    with pytest.warns(RuntimeWarning, match=r"not summarised.*'0' \(a meta tensor"):
        assert cap.stats("mean") == {}
    assert hooks_left(net) == []
