"""The page draws edge labels as ``make_dot`` does (issue 35): each label a node of its own in
the innermost cluster holding both ends of its edge, and an edge entering a titled cluster
through a point on the title's rank inside it.  The page's own DOT (``__tr.dot``, as Chromium
built it), laid out by the real ``dot -Tjson``, has no label across a cluster's border and no
edge through a label (:mod:`tests.label_geometry`), at depth 2 and with everything open."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import torchrecorder

from .backends import needs_dot
from .browser import launch, needs_chromium, open_page, wait_layouts
from .label_geometry import edges_outside_their_cluster, label_problems
from .test_edge_labels import _MaskedStack

pytestmark = [needs_chromium, needs_dot]

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
try:
    from figure_models import MODELS
finally:
    sys.path.pop(0)


@pytest.fixture(scope="module")
def tr_browser() -> Iterator[Any]:
    yield from launch()


def _dot(page: Any) -> str:
    return str(page.evaluate("() => window.__tr.dot"))


@pytest.mark.parametrize("name", ["unet", "gpt2"])
def test_the_pages_labels_stay_clear_of_borders_and_edges(tr_browser: Any, tmp_path: Path, name: str) -> None:
    net, args = MODELS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = torchrecorder.record(net, name, input_data=args)
    path = tmp_path / f"{name}.html"
    torchrecorder.make_html(rec, 2).save(path)
    page, w = open_page(tr_browser, path)
    count = page.evaluate("__tr.layouts")
    depth2 = _dot(page)
    page.click("#tr-expand-all")
    wait_layouts(page, count)
    everything = _dot(page)
    assert everything != depth2
    for dot in (depth2, everything):
        assert label_problems(dot) == []
        assert '::label" [label=' in dot  # the labels are nodes of their own
    assert w.page_errors == [] and w.console_errors == []
    page.close()


def test_the_pages_edges_enter_a_cluster_on_its_title_rank(tr_browser: Any, tmp_path: Path) -> None:
    """A mask read before each layer: the page puts the points its edges pass on the title's
    rank, as ``make_dot`` does, and no edge runs outside the cluster down to its layer."""
    import torch

    inputs = (torch.randn(1, 4, 10), torch.ones(1, 1, 10))
    rec = torchrecorder.record(_MaskedStack(), "stack", input_data=inputs)
    path = tmp_path / "stack.html"
    torchrecorder.make_html(rec, 1).save(path)
    page, w = open_page(tr_browser, path)
    count = page.evaluate("__tr.layouts")
    first = _dot(page)
    page.click("#tr-expand-all")
    wait_layouts(page, count)
    for dot in (first, _dot(page)):
        assert '{rank=same; "stack::title"; "input@mask -> ' in dot
        assert edges_outside_their_cluster(dot) == []
    assert w.page_errors == [] and w.console_errors == []
    page.close()


def test_the_pages_scripts_leave_only_their_namespace_in_the_window(tr_browser: Any, tmp_path: Path) -> None:
    """The page's script is several files (html_page.PAGE_SCRIPTS) that share one object: the
    window gains ``__tr`` (and viz.js's ``Viz``) and nothing else; ``__tr.page`` holds the
    shared state without showing in ``__tr``'s keys."""
    net, args = MODELS["cnn"]()
    rec = torchrecorder.record(net, "cnn", input_data=args)
    path = tmp_path / "cnn.html"
    torchrecorder.make_html(rec).save(path)
    empty = tmp_path / "empty.html"
    empty.write_text("<!DOCTYPE html><html><body></body></html>", encoding="utf-8")
    blank = tr_browser.new_page()
    blank.goto(empty.as_uri())
    plain = set(blank.evaluate("() => Object.getOwnPropertyNames(window)"))
    blank.close()
    page = tr_browser.new_page()
    page.goto(path.as_uri())
    wait_layouts(page, 0)
    added = set(page.evaluate("() => Object.getOwnPropertyNames(window)")) - plain
    assert added == {"__tr", "Viz"}
    assert "page" not in page.evaluate("() => Object.keys(window.__tr)")
    assert page.evaluate("() => typeof window.__tr.page.buildDot") == "function"
    page.close()
