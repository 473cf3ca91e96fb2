"""A module's output that nothing reads is drawn (as the module returned it; torchview draws it
too) but marked a dead end: dashed and grey, its tooltip saying nothing reads it, in make_dot
and on the page alike."""

from __future__ import annotations

import json
import re

import torch
from torch import nn

import torchrecorder
from torchrecorder.renderer.html import HtmlRenderer


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.lin(x), torch.ones(1, 3) * x.mean()


class _Net(nn.Module):
    """The second block's bias is returned and never read (T5's last block's position bias)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = _Block(), _Block()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, bias = self.a(x)
        out, _ = self.b(h + bias.sum())
        return out


def _tensor_nodes(source: str) -> dict[str, str]:
    """Node id -> its attribute text, for the tensor boxes (``"a@out"``, ``"b@out"``, ...)."""
    return {m.group(1): m.group(2) for m in re.finditer(r'^\s*"([\w.]+@out)" \[(.*)\]$', source, re.M)}


def test_an_output_nothing_reads_is_drawn_dashed_with_a_tooltip_saying_so() -> None:
    rec = torchrecorder.record(_Net(), "net", input_data=torch.randn(2, 6))
    boxes = _tensor_nodes(torchrecorder.make_dot(rec, render_depth=1, tensor_nodes=True).source)
    assert "b@out" in boxes and "a@out" in boxes
    assert "dashed" in boxes["b@out"] and "read by nothing" in boxes["b@out"]
    assert "dashed" not in boxes["a@out"] and "read by nothing" not in boxes["a@out"]
    # the style is a kind of its own, which a keyword changes as any other
    boxes = _tensor_nodes(torchrecorder.make_dot(rec, render_depth=1, tensor_nodes=True,
                                                 unread_attrs={"fillcolor": "#ff0000"}).source)
    assert "#ff0000" in boxes["b@out"] and "#ff0000" not in boxes["a@out"]


def test_the_page_marks_the_output_nothing_reads_as_make_dot_does() -> None:
    rec = torchrecorder.record(_Net(), "net", input_data=torch.randn(2, 6))
    data = json.dumps(HtmlRenderer(rec, tensor_nodes=True).render()._data, ensure_ascii=False)
    assert data.count("read by nothing") == 1
