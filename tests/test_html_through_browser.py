"""A value that a module only passes on is drawn by the page through that module's box
while it is closed, as ``make_dot`` draws it (T5's attention bias: made in block 0, returned
by each block for the next).  With every module open the value's edge runs past the module
(its ``identity``/``view`` is left out); with the module closed the box returned it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest
import torch
from torch import nn

import torchrecorder

from .browser import launch, needs_chromium, open_page, wait_layouts
from .dot_parse import parse_dot

pytestmark = [needs_chromium]


@pytest.fixture(scope="module")
def tr_browser() -> Iterator[Any]:
    yield from launch()


class _Attend(nn.Module):
    """Uses a bias, makes it from ``x`` when none is given, and returns it with its output."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.make = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, bias: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        if bias is None:
            bias = self.make(x)
        return self.proj(x) + bias, bias.view(bias.shape)  # the bias only passed on


class _Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.attn = _Attend()
        self.ff = nn.Sequential(*[nn.Linear(4, 4) for _ in range(width)])

    def forward(self, x: torch.Tensor, bias: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        y, bias = self.attn(x, bias)
        return self.ff(y), bias


class _Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([_Block(w) for w in (1, 2, 3, 1)])  # (no run to fold)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None
        for block in self.blocks:
            x, bias = block(x, bias)
        return x


def _edges(dot: str) -> set[tuple[str, str]]:
    return set(parse_dot(dot).edges)


def test_a_value_passed_on_is_drawn_through_the_closed_box(tr_browser: Any, tmp_path: Path) -> None:
    rec = torchrecorder.record(_Stack(), "stack", (1, 4))
    path = tmp_path / "stack.html"
    torchrecorder.make_html(rec, 1).save(path)
    page, w = open_page(tr_browser, path)
    for depth in range(5):
        done = int(page.evaluate("() => window.__tr.layouts"))
        page.fill("#tr-depth", str(depth))
        page.dispatch_event("#tr-depth", "change")
        wait_layouts(page, done, settled=True)
        drawn = _edges(str(page.evaluate("() => window.__tr.dot")))
        expected = _edges(torchrecorder.make_dot(rec, depth).source)
        assert drawn == expected, (depth, sorted(drawn - expected), sorted(expected - drawn))
    assert w.page_errors == [] and w.console_errors == []
    page.close()


class _Maker(nn.Module):
    """Makes a constant (nothing feeds it) beside its output, as T5's first block makes its
    zero cross-attention position bias."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.lin(x), torch.zeros(1, 4)


class _Holder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = _Maker()
        self.ff = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y, bias = self.inner(x)
        return self.ff(y), bias


class _Reader(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + bias


class _Constant(nn.Module):
    """A constant made inside ``a.inner`` and read in its sibling ``b``: ``make_dot`` draws
    the edge out of the closed box that holds it (at depth 1 and 2), not at depth 3, where the
    constant's operation is left out (nothing drawn feeds it)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = _Holder()
        self.b = _Reader()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, bias = self.a(x)
        return self.b(y, bias)


def _depths(page: Any, rec: Any, depths: range) -> None:
    for depth in depths:
        done = int(page.evaluate("() => window.__tr.layouts"))
        page.fill("#tr-depth", str(depth))
        page.dispatch_event("#tr-depth", "change")
        wait_layouts(page, done, settled=True)
        drawn = _edges(str(page.evaluate("() => window.__tr.dot")))
        expected = _edges(torchrecorder.make_dot(rec, depth).source)
        assert drawn == expected, (depth, sorted(drawn - expected), sorted(expected - drawn))


def test_a_constant_is_drawn_out_of_the_closed_box_that_made_it(tr_browser: Any, tmp_path: Path) -> None:
    rec = torchrecorder.record(_Constant(), "constant", (1, 4))
    assert ("a.inner", "b/add") in _edges(torchrecorder.make_dot(rec, 2).source)  # the case at issue
    path = tmp_path / "constant.html"
    torchrecorder.make_html(rec, 3).save(path)
    page, w = open_page(tr_browser, path)
    _depths(page, rec, range(4))
    assert w.page_errors == [] and w.console_errors == []
    page.close()


def test_t5s_cross_attention_bias_leaves_its_closed_block(tr_browser: Any, tmp_path: Path) -> None:
    """T5's decoder makes a zero cross-attention position bias in block 0 (nothing feeds it)
    and hands it to block 1, which passes it on to block 2, ...: make_dot draws block 0 -> block 1
    -> block 2 ... at depth 3, and so does the page (not block 0 -> block 2)."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.T5Config(vocab_size=99, d_model=16, d_kv=8, d_ff=32, num_layers=2,
                                num_decoder_layers=4, num_heads=2, decoder_start_token_id=0)
    net = transformers.T5ForConditionalGeneration(cfg).eval()
    ids = torch.randint(0, 99, (1, 5))
    rec = torchrecorder.record(net, "t5", input_kwargs={"input_ids": ids, "decoder_input_ids": ids[:, :3]})
    at_3 = _edges(torchrecorder.make_dot(rec, 3).source)
    assert ("decoder.block.0.layer.1", "decoder.block.1.layer.1") in at_3
    path = tmp_path / "t5.html"
    torchrecorder.make_html(rec, 2).save(path)
    page, w = open_page(tr_browser, path)
    _depths(page, rec, range(2, 6))
    assert w.page_errors == [] and w.console_errors == []
    page.close()
