"""The page of a backward graph draws a folded run as ``make_dot(rec, backward=True)`` does:
the gradients go from each block to the one before it, so besides the chain that ``×N``
says they are carried from one block to another, drawn dashed between the nodes of the
first block while the run is folded (the page hid them with every other edge between two
blocks)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


class _Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.lin(self.norm(x))


def _edges(dot: str) -> set[tuple[str, str]]:
    return set(parse_dot(dot).edges)


def test_the_backward_page_draws_a_folded_runs_carried_gradients(tr_browser: Any, tmp_path: Path) -> None:
    net = nn.Sequential(nn.Linear(4, 4), *[_Residual() for _ in range(3)], nn.Linear(4, 2))
    rec = torchrecorder.record(net, "res", (2, 4), backward=True)
    path = tmp_path / "res.html"
    torchrecorder.make_html(rec, 1, backward=True, fold_repeats=True).save(path)
    page, w = open_page(tr_browser, path)
    for depth in range(1, 4):
        done = int(page.evaluate("() => window.__tr.layouts"))
        page.fill("#tr-depth", str(depth))
        page.dispatch_event("#tr-depth", "change")
        wait_layouts(page, done, settled=True)
        dot = str(page.evaluate("() => window.__tr.dot"))
        expected = torchrecorder.make_dot(rec, depth, backward=True, fold_repeats=True).source
        assert _edges(dot) == _edges(expected), (depth, sorted(_edges(dot) ^ _edges(expected)))
        assert dot.count("carried to a later iteration") == expected.count("carried to a later iteration")
    assert "carried to a later iteration" in expected  # (the case at hand: the run open at depth 3)
    done = int(page.evaluate("() => window.__tr.layouts"))
    page.click("#tr-fold")  # unfolded: the blocks drawn one by one, nothing carried
    wait_layouts(page, done, settled=True)
    dot = str(page.evaluate("() => window.__tr.dot"))
    assert _edges(dot) == _edges(torchrecorder.make_dot(rec, 3, backward=True, fold_repeats=False).source)
    assert "carried to a later iteration" not in dot
    assert w.page_errors == [] and w.console_errors == []
    page.close()


class _TiedLM(nn.Module):
    """A language model whose output projection is its embedding (GPT-2's lm_head)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 4))
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.body[0].weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(ids))


def test_the_backward_page_leaves_out_an_operation_fed_only_by_a_hidden_parameter(
        tr_browser: Any, tmp_path: Path) -> None:
    """At depth 2 the embedding is a closed box holding the tied weight: the head's
    ``TBackward0`` of it is fed by nothing drawn, and make_dot leaves it out; the page drew it
    unfed.  Opened (depth 3), the weight is drawn and so is the transpose."""
    rec = torchrecorder.record(_TiedLM(), "tied", input_data=torch.tensor([[1, 2, 3]]), backward=True)
    path = tmp_path / "tied.html"
    torchrecorder.make_html(rec, 1, backward=True).save(path)
    page, w = open_page(tr_browser, path)
    for depth in (2, 3, 1):
        done = int(page.evaluate("() => window.__tr.layouts"))
        page.fill("#tr-depth", str(depth))
        page.dispatch_event("#tr-depth", "change")
        wait_layouts(page, done, settled=True)
        got = parse_dot(str(page.evaluate("() => window.__tr.dot")))
        expected = parse_dot(torchrecorder.make_dot(rec, depth, backward=True).source)
        assert set(got.nodes) == set(expected.nodes), (depth, set(got.nodes) ^ set(expected.nodes))
        assert set(got.edges) == set(expected.edges), (depth, set(got.edges) ^ set(expected.edges))
        assert (depth == 3) == any("TBackward0" in name for name in got.nodes)
    assert w.page_errors == [] and w.console_errors == []
    page.close()
