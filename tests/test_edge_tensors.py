"""An edge that stands for several tensors says so, in make_dot and on the page alike: one
module passing its hidden states and an attention bias to the next (T5's blocks) is one
edge labelled with both shapes, or the first and "+N" where there are more than two."""

from __future__ import annotations

import json
import re
from typing import Optional

import torch
from torch import nn

import torchrecorder
from torchrecorder.renderer.html import HtmlRenderer


class _Block(nn.Module):
    """Returns its hidden states and the bias it was given, made in the first block."""

    def __init__(self, extra: int) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.extra = extra

    def forward(self, x: torch.Tensor, bias: Optional[torch.Tensor] = None,
                more: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, ...]:
        if bias is None:
            bias = torch.ones(1, 2, 3, 3) * x.mean()
            more = torch.ones(1, 5) * x.mean() if self.extra else None
        h = self.lin(x) + bias.mean()
        if more is not None:
            h = h + more.sum()
            return h, bias, more
        return h, bias


class _Stack(nn.Module):
    def __init__(self, extra: int = 0) -> None:
        super().__init__()
        self.first, self.second = _Block(extra), _Block(extra)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.first(x)
        return self.second(*out)[0]


def test_an_edge_of_two_tensors_shows_both_shapes() -> None:
    rec = torchrecorder.record(_Stack(), "net", input_data=torch.randn(2, 4, 6))
    source = torchrecorder.make_dot(rec, render_depth=1).source
    assert re.search(r"<TD>2×4×6, 1×2×3×3</TD>", source), source
    assert "<TD>1×2×3×3</TD>" not in source


def test_an_edge_of_more_than_two_tensors_shows_the_first_and_how_many_more() -> None:
    rec = torchrecorder.record(_Stack(extra=1), "net", input_data=torch.randn(2, 4, 6))
    source = torchrecorder.make_dot(rec, render_depth=1).source
    assert "<TD>2×4×6 +2</TD>" in source, source
    tips = re.findall(r'tooltip="([^"]*1×5[^"]*)"', source)
    assert any("1×2×3×3" in tip and "2×4×6" in tip for tip in tips)  # the tooltip names them all


def test_the_pages_edge_between_the_two_boxes_shows_both_shapes() -> None:
    rec = torchrecorder.record(_Stack(), "net", input_data=torch.randn(2, 4, 6))
    page = HtmlRenderer(rec).render()
    data = json.dumps(page._data, ensure_ascii=False)
    assert "<TD>2×4×6, 1×2×3×3</TD>" in data
