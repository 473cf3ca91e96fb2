"""The HTML view keeps what the reader looks at in view, in headless Chromium: a search brings
its hit into the window (each search its own, however quickly they follow), and a click or
"Expand all" leaves the clicked module where it was on screen."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import torchrecorder

from .browser import launch, needs_chromium, open_page, wait_layouts
from .test_html_browser import Stack, _click, _index

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def tr_browser() -> Iterator[Any]:
    yield from launch()


@pytest.fixture(scope="module")
def stack_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("html") / "stack.html"
    torchrecorder.make_html(torchrecorder.record(Stack(), "stack", (2, 6))).save(path)
    return path


def _open(browser: Any, path: Path) -> tuple[Any, Any]:
    """The page in a small window (a notebook cell's size): most of a tall view lies outside."""
    return open_page(browser, path, 700, 420)


def _box(page: Any, element_id: str) -> dict[str, float]:
    """The element's box on screen, relative to the drawing's window."""
    return dict(page.evaluate(
        """id => { const v = document.getElementById('tr-view').getBoundingClientRect(),
                          r = document.getElementById(id).getBoundingClientRect();
                   return {left: r.left - v.left, top: r.top - v.top, right: r.right - v.left,
                           bottom: r.bottom - v.top, width: v.width, height: v.height}; }""", element_id))


def _in_window(box: dict[str, float]) -> bool:
    return (box["left"] >= 0 and box["top"] >= 0
            and box["right"] <= box["width"] and box["bottom"] <= box["height"])


def _search(page: Any, text: str) -> None:
    count = page.evaluate("__tr.layouts")
    page.fill("#tr-search", text)
    page.press("#tr-search", "Enter")
    wait_layouts(page, count)
    page.wait_for_timeout(100)  # anything left over from an earlier search would move the view now


def test_search_brings_each_hit_into_the_window(tr_browser: Any, stack_file: Path) -> None:
    page, w = _open(tr_browser, stack_file)
    for path in ("blocks.8.fc2", "blocks.0.fc1", "blocks.6.act", "head"):
        _search(page, path)
        target = f"n{_index(page, path)}"
        page.wait_for_selector(f"#{target}.tr-hit")
        assert _in_window(_box(page, target)), (path, _box(page, target))
    assert w.page_errors == [] and w.console_errors == []
    page.close()


def test_a_hit_already_in_the_window_does_not_move(tr_browser: Any, stack_file: Path) -> None:
    page, _ = _open(tr_browser, stack_file)
    head = f"n{_index(page, 'head')}"
    before = _box(page, head)
    assert _in_window(before)
    _search(page, "head")
    assert _box(page, head) == before
    page.close()


def test_a_click_keeps_the_clicked_module_where_it_was(tr_browser: Any, stack_file: Path) -> None:
    page, _ = _open(tr_browser, stack_file)
    blocks = _index(page, "blocks")
    box = _box(page, f"n{blocks}")
    _click(page, f"#n{blocks}")  # opens: the cluster's top (its title) where the box's top was
    opened = _box(page, f"c{blocks}")
    assert abs(opened["top"] - box["top"]) < 2
    assert abs((opened["left"] + opened["right"]) / 2 - (box["left"] + box["right"]) / 2) < 2
    assert _in_window(_box(page, f"t{blocks}"))  # its title is on screen
    _click(page, f"#t{blocks} text")  # closes by its title: the box comes back where it was
    closed = _box(page, f"n{blocks}")
    assert abs(closed["top"] - box["top"]) < 2
    page.close()


def test_expand_all_keeps_the_selected_module_where_it_was(tr_browser: Any, stack_file: Path) -> None:
    page, _ = _open(tr_browser, stack_file)
    head = f"n{_index(page, 'head')}"
    page.click(f"#{head}")  # a leaf: selected, nothing opens
    box = _box(page, head)
    _click(page, "#tr-expand-all")
    after = _box(page, head)
    assert abs(after["top"] - box["top"]) < 2 and abs(after["left"] - box["left"]) < 2
    page.close()


def _drawn_in_window(page: Any) -> int:
    """How many drawn boxes lie (at least partly) in the drawing's window."""
    return int(page.evaluate(
        """() => { const v = document.getElementById('tr-view').getBoundingClientRect();
                   return [...document.querySelectorAll('#tr-view g.node')].filter(g => {
                     const r = g.getBoundingClientRect();
                     return r.right > v.left && r.left < v.right && r.bottom > v.top && r.top < v.bottom;
                   }).length; }"""))


@pytest.mark.parametrize("control", ["#tr-collapse-all", "#tr-fold", "depth"])
def test_a_smaller_drawing_after_a_search_deep_down_is_in_view(tr_browser: Any, stack_file: Path,
                                                                control: str) -> None:
    """A search scrolls far down a tall view; Collapse all, Fold repeats or a depth then draw
    something much smaller with nothing on screen to keep in place: it comes into view
    (it was left above the window, the page showing nothing)."""
    page, w = _open(tr_browser, stack_file)
    _click(page, "#tr-expand-all")
    if page.is_checked("#tr-fold"):
        _click(page, "#tr-fold")  # every block drawn: a tall view
    _search(page, "blocks.8.fc2")
    page.click("#tr-view", position={"x": 5, "y": 5})  # (nothing selected: no module to keep)
    count = page.evaluate("__tr.layouts")
    if control == "depth":
        page.fill("#tr-depth", "1")
        page.press("#tr-depth", "Enter")
    else:
        page.click(control)
    wait_layouts(page, count, settled=True)
    assert _drawn_in_window(page) > 0
    assert w.page_errors == [] and w.console_errors == []
    page.close()
