"""Python loops in the HTML view, driven in headless Chromium: folded as ``make_dot`` folds
them, unfolded by the reader into every operation and folded again."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.errors import LargeDrawingWarning
from torchrecorder.projection.budget import MAX_EDGES, MAX_NODES
from torchrecorder.renderer import GraphvizRenderer

from .browser import launch, needs_chromium, open_page, wait_layouts
from .dot_parse import parse_dot
from .test_html_browser import _dot_at_depth, _without_titles
from .test_html_loops import RunLoop
from .test_loops import CellLoop, Series, Wrapped
from .zoo.session import Zoo
from .zoo.stress import FarthestPointSampling

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def tr_browser() -> Iterator[Any]:
    yield from launch()


def _small_fps() -> nn.Module:
    torch.manual_seed(0)
    return FarthestPointSampling(npoint=10).eval()


#: small loop models: (build, input shape)
NETS = {
    "series": (lambda: Series(12), (1, 4)),
    "wrapped": (lambda: Wrapped(10), (1, 4)),
    "cellloop": (lambda: CellLoop(9), (1, 4)),
    "runloop": (lambda: RunLoop(3, 4), (1, 4)),
    "fps": (_small_fps, (1, 64, 3)),
}


def _rec(name: str) -> torchrecorder.Recorder:
    build, shape = NETS[name]
    torch.manual_seed(0)
    return torchrecorder.record(build(), name, shape)


def _do(page: Any, action: Any) -> None:
    """Run ``action`` and wait for the layout it starts."""
    count = page.evaluate("__tr.layouts")
    action()
    wait_layouts(page, count, 120, settled=True)


def _same(ours: Any, want: Any, where: object) -> None:
    """The page's DOT (parsed) draws make_dot's nodes, clusters and edges with their labels."""
    ours, want = _without_titles(ours), _without_titles(want)
    assert set(ours.nodes) == set(want.nodes), where
    assert len(ours.clusters) == len(want.clusters), where
    assert sorted((e, a.get("label")) for e, a in zip(ours.edges, ours.edge_attrs, strict=True)) == \
        sorted((e, a.get("label")) for e, a in zip(want.edges, want.edge_attrs, strict=True)), where
    for key, attrs in want.node_attrs.items():
        assert ours.node_attrs[key]["label"] == attrs["label"], (where, key)


def _loop_clusters(page: Any) -> list[int]:
    """The numbers of the loop clusters drawn (past the page's nodes)."""
    n = page.evaluate("JSON.parse(document.getElementById('tr-data').textContent).nodes.length")
    ids = page.eval_on_selector_all("#tr-canvas g.cluster", "els => els.map(e => e.id)")
    return [int(i[1:]) for i in ids if int(i[1:]) >= n]


@pytest.mark.parametrize("name", list(NETS))
def test_every_depth_folds_and_unfolds_as_make_dot_draws(tr_browser: Any, tmp_path: Path, name: str) -> None:
    """Folded, each depth draws make_dot's folded drawing; with "Fold repeats" off, make_dot's
    drawing of every operation; on again, the folded view once more."""
    rec = _rec(name)
    path = tmp_path / f"{name}.html"
    torchrecorder.make_html(rec, 0, fold_repeats=True).save(path)
    page, w = open_page(tr_browser, path)
    folded_once = False
    for depth in range(4):
        ours = _dot_at_depth(page, depth)
        _same(ours, parse_dot(torchrecorder.make_dot(rec, depth, fold_repeats=True).source), depth)
        folded_once |= "loop ×" in page.evaluate("__tr.dot")
        first = page.evaluate("__tr.dot")
        _do(page, lambda: page.click("#tr-fold"))  # every loop and run unfolded
        assert "loop ×" not in page.evaluate("__tr.dot")
        _same(parse_dot(page.evaluate("__tr.dot")),
              parse_dot(torchrecorder.make_dot(rec, depth, fold_repeats=False).source), (depth, "unfolded"))
        _do(page, lambda: page.click("#tr-fold"))
        assert page.evaluate("__tr.dot") == first
    assert folded_once
    assert w.page_errors == [] and w.console_errors == []
    page.close()


@pytest.mark.parametrize("name", ["series", "fps"])
def test_a_loop_unfolds_by_a_click_and_folds_again_from_the_panel(tr_browser: Any, tmp_path: Path,
                                                                    name: str) -> None:
    rec = _rec(name)
    path = tmp_path / f"{name}.html"
    torchrecorder.make_html(rec, fold_repeats=True).save(path)
    page, w = open_page(tr_browser, path)
    first = page.evaluate("__tr.dot")
    (loop,) = _loop_clusters(page)
    count = int(page.text_content(f"#t{loop} text").split("×")[1])
    assert count >= 9
    drawn = page.evaluate("document.querySelectorAll('#tr-canvas g.node[id^=n]').length")
    _do(page, lambda: page.click(f"#t{loop} text >> nth=0"))
    assert _loop_clusters(page) == []
    # every operation drawn: as many as make_dot draws without folding
    every = parse_dot(torchrecorder.make_dot(rec, 1, fold_repeats=False).source)
    _same(parse_dot(page.evaluate("__tr.dot")), every, "unfolded")
    unfolded = page.evaluate("document.querySelectorAll('#tr-canvas g.node[id^=n]').length")
    assert unfolded >= drawn + 3 * (count - 1)  # three operations or more per iteration
    page.mouse.move(1, 1)  # off the drawing: the panel shows the selected loop
    assert f"Fold the {count} iterations" in page.text_content("#tr-details")
    _do(page, lambda: page.click("#tr-details button[data-action=fold-loop]"))
    assert page.evaluate("__tr.dot") == first
    assert f"Show the {count} iterations" in page.text_content("#tr-details")
    assert w.page_errors == [] and w.console_errors == []
    page.close()


def test_an_operation_of_an_unfolded_loop_folds_it_again(tr_browser: Any, tmp_path: Path) -> None:
    rec = _rec("series")
    path = tmp_path / "series.html"
    torchrecorder.make_html(rec, fold_repeats=True).save(path)
    page, _ = open_page(tr_browser, path)
    first = page.evaluate("__tr.dot")
    (loop,) = _loop_clusters(page)
    _do(page, lambda: page.click(f"#t{loop} text >> nth=0"))
    # an add of a later iteration: selected, its panel folds the loop it belongs to
    adds = page.eval_on_selector_all("#tr-canvas g.node[id^=n]",
                                     "els => els.filter(e => e.textContent.trim() === 'add').map(e => e.id)")
    assert len(adds) == 12
    page.click(f"#{adds[-1]}")
    page.mouse.move(1, 1)
    assert "Fold the 12 iterations of its loop" in page.text_content("#tr-details")
    _do(page, lambda: page.click("#tr-details button[data-action=fold-loop]"))
    assert page.evaluate("__tr.dot") == first
    page.close()


@pytest.mark.parametrize(("name", "every"), [
    ("cellloop", True), ("series", True), ("wrapped", True), ("cellloop", False), ("fps", False)])
def test_folded_edges_map_onto_the_unfolded_ones(tr_browser: Any, tmp_path: Path, name: str,
                                                 every: bool) -> None:
    """Every edge of the folded view stands for an edge of the unfolded view (its ends taken to
    what stands for them), and every unfolded edge is drawn folded (``every``: tensors and all
    operations drawn as nodes): the values carried from one iteration to the next as make_dot
    draws them, dashed back edges."""
    rec = _rec(name)
    path = tmp_path / f"{name}.html"
    options = {"tensor_nodes": every, "all_ops": every}
    torchrecorder.make_html(rec, 2, fold_repeats=True, **options).save(path)
    page, _ = open_page(tr_browser, path)
    dot = _without_titles(parse_dot(page.evaluate("__tr.dot")))
    folded = {e for e, a in zip(dot.edges, dot.edge_attrs, strict=True) if a.get("style") != "dashed"}
    dashed = {e for e, a in zip(dot.edges, dot.edge_attrs, strict=True)
              if a.get("style") == "dashed" and a.get("constraint") == "false"}
    _do(page, lambda: page.click("#tr-fold"))
    unfolded = _without_titles(parse_dot(page.evaluate("__tr.dot"))).edges
    page.close()
    r = GraphvizRenderer(rec, 2, fold_repeats=True, **options)
    r.render()
    key_of = {r.node_id(n): k for k, n in rec.nodes.items()}
    p = r.projection
    iteration = p.fold.iteration
    mapped, carried = set(), set()
    for a, b in unfolded:
        ka, kb = key_of[a], key_of[b]
        ia, ib = iteration.get(ka), iteration.get(kb)
        fa, fb = p.drawn_key(ka), p.drawn_key(kb)
        if fa in p.left_out or fb in p.left_out:
            continue  # what stands for it folded is left out (an operation that reads nothing drawn)
        if fa is None or fb is None or fa == fb:
            continue
        edge = (r.node_id(rec.nodes[fa]), r.node_id(rec.nodes[fb]))
        if ia is not None and ib is not None and ia[0] == ib[0] and ia[1] != ib[1]:
            carried.add(edge)  # the value carried to the next iteration
        else:
            mapped.add(edge)
    assert folded and len(unfolded) > len(folded)
    assert folded == mapped
    # a carried value drawn dashed where no edge stands for it yet, as make_dot draws it
    assert dashed == {(r.node_id(a), r.node_id(b)) for a, b in p.carried_edges} == carried - folded


def test_search_unfolds_the_loop_holding_a_later_iteration(tr_browser: Any, tmp_path: Path) -> None:
    rec = _rec("cellloop")
    path = tmp_path / "cellloop.html"
    torchrecorder.make_html(rec, fold_repeats=True).save(path)
    page, _ = open_page(tr_browser, path)
    assert _loop_clusters(page)
    _do(page, lambda: (page.fill("#tr-search", "cell #5"), page.press("#tr-search", "Enter")))
    assert _loop_clusters(page) == []  # unfolded to show it
    page.wait_for_selector("#tr-canvas g.tr-hit")
    assert "cell #5" in page.text_content("#tr-details")
    page.close()


@pytest.mark.parametrize("case", ["SeriesDecoder", "FarthestPointSampling"])
def test_stress_loop_pages_open_folded_within_the_budget(tr_browser: Any, tmp_path: Path, zoo: Zoo,
                                                         case: str) -> None:
    rec = zoo.recorded(case).rec
    path = tmp_path / f"{case}.html"
    with warnings.catch_warnings():
        warnings.simplefilter("error", LargeDrawingWarning)
        torchrecorder.make_html(rec).save(path)
    page, w = open_page(tr_browser, path)
    parsed = parse_dot(page.evaluate("__tr.dot"))
    assert len(_loop_clusters(page)) == 1
    nodes = [n for n in _without_titles(parsed).nodes]
    assert len(nodes) + len(parsed.clusters) <= MAX_NODES and len(parsed.edges) <= MAX_EDGES
    assert len(nodes) < 30  # the 1,000 iterations drawn once
    # the network is open at depth 1 with its loop: what make_dot draws by default at depth 1
    _same(parsed, parse_dot(torchrecorder.make_dot(rec, 1).source), case)
    assert w.page_errors == [] and w.console_errors == []
    page.close()
