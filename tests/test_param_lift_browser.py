"""The HTML page draws a parameter read outside its closed module beside the module's box, as
make_dot does, at every depth and after opening and closing the module (headless Chromium)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import torchrecorder

from .browser import launch, needs_chromium, open_page
from .dot_parse import parse_dot
from .test_html_browser import _click, _dot_at_depth, _index, _without_titles
from .test_param_lift import Blocks, NestedRead, ReadAfter, TiedHead

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def tr_browser() -> Iterator[Any]:
    yield from launch()


def _same(ours: Any, want: Any, where: object) -> None:
    """The page's DOT (parsed) has make_dot's nodes and edges."""
    ours, want = _without_titles(ours), _without_titles(want)
    assert set(ours.nodes) == set(want.nodes), where
    assert sorted(ours.edges) == sorted(want.edges), where
    assert len(ours.clusters) == len(want.clusters), where


class TiedInside(nn.Module):
    """An encoder that opens, holding the embedding; a head tied to it, and a read outside."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 4))
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.enc[0].weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.enc(ids)
        return self.head(h) + (h @ self.enc[0].weight.T) * 0.5


class LoopRead(nn.Module):
    """A Python loop calling fc, each iteration reading fc's weight outside it (folds)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(4):
            x = self.fc(x) * self.fc.weight.sum()
        return x


NETS = {"ReadAfter": ReadAfter, "NestedRead": NestedRead, "Blocks": Blocks, "TiedHead": TiedHead,
        "TiedRead": lambda: TiedHead(functional=True), "TiedInside": TiedInside,
        "LoopRead": LoopRead}


@pytest.mark.parametrize("name", list(NETS))
def test_every_depth_draws_the_parameter_as_make_dot(tr_browser: Any, tmp_path: Path, name: str) -> None:
    torch.manual_seed(0)
    net: nn.Module = NETS[name]()
    x = torch.randint(0, 10, (2, 3)) if name.startswith("Tied") else torch.randn(2, 4)
    rec = torchrecorder.record(net, name, input_data=x)
    path = tmp_path / "page.html"
    torchrecorder.make_html(rec, 1, fold_repeats=True).save(path)
    page, w = open_page(tr_browser, path)
    for depth in range(4):
        want = parse_dot(torchrecorder.make_dot(rec, depth, fold_repeats=True).source)
        ours = _dot_at_depth(page, depth)
        _same(ours, want, depth)
        for key, attrs in want.node_attrs.items():  # a parameter is named where it is drawn
            if key.endswith((".weight", ".bias")):
                assert ours.node_attrs[key]["label"] == attrs["label"], (depth, key)
    if name in ("Blocks", "LoopRead"):  # (the control shows where something folds)
        _click(page, "#tr-fold")  # every run and loop unfolded (at depth 3)
        _same(parse_dot(page.evaluate("__tr.dot")),
              parse_dot(torchrecorder.make_dot(rec, 3, fold_repeats=False).source), "unfolded")
    assert w.page_errors == [] and w.console_errors == []
    page.close()


def test_opening_and_closing_the_module_moves_the_parameter(tr_browser: Any, tmp_path: Path) -> None:
    torch.manual_seed(0)
    rec = torchrecorder.record(NestedRead(), "net", input_data=torch.randn(2, 4))
    path = tmp_path / "page.html"
    torchrecorder.make_html(rec, 1).save(path)
    page, w = open_page(tr_browser, path)
    first = page.evaluate("__tr.dot")
    dot = parse_dot(first)
    assert {("enc.fc.weight", "enc"), ("enc.fc.weight", "net/mul")} <= set(dot.edges)
    enc = _index(page, "enc")
    _click(page, f"#n{enc}")  # open enc: the parameter goes beside fc, inside enc's cluster
    dot = parse_dot(page.evaluate("__tr.dot"))
    _same(dot, parse_dot(torchrecorder.make_dot(rec, 2).source), "opened")
    assert {("enc.fc.weight", "enc.fc"), ("enc.fc.weight", "net/mul")} <= set(dot.edges)
    _click(page, f"#t{enc} text")  # closed again: beside enc's box once more
    assert page.evaluate("__tr.dot") == first
    assert w.page_errors == [] and w.console_errors == []
    page.close()


@pytest.mark.parametrize("start", [1, 2])
def test_the_parameter_is_named_from_the_box_it_is_drawn_beside_now(tr_browser: Any, tmp_path: Path,
                                                                     start: int) -> None:
    """``enc.fc.weight`` beside enc's box, ``fc.weight`` beside fc's once enc opens, as make_dot
    names it at each depth, whichever depth the page opened at."""
    torch.manual_seed(0)
    rec = torchrecorder.record(NestedRead(), "net", input_data=torch.randn(2, 4))
    path = tmp_path / "page.html"
    torchrecorder.make_html(rec, start).save(path)
    page, w = open_page(tr_browser, path)
    for depth in (1, 2, 3, 1):
        ours = _dot_at_depth(page, depth).node_attrs
        want = parse_dot(torchrecorder.make_dot(rec, depth).source).node_attrs
        assert ours["enc.fc.weight"]["label"] == want["enc.fc.weight"]["label"], (start, depth)
    assert ">enc.fc.weight<" in want["enc.fc.weight"]["label"]
    assert w.page_errors == [] and w.console_errors == []
    page.close()
