"""Two of the page's controls as a reader of netron or torchvista uses them: Shift+Enter in the
search goes back to the match before (Enter goes on), and after a layout cancelled or failed
the page's report of what it draws (``window.__tr.dot``) is the view kept, not the one dropped."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from torch import nn

import torchrecorder

from .browser import launch, needs_chromium, open_page, wait_layouts
from .test_html_scale_browser import _break_a_deep_node, _llama

pytestmark = [needs_chromium]


@pytest.fixture(scope="module")
def tr_browser() -> Iterator[Any]:
    yield from launch()


def _found(page: Any, key: str) -> str:
    done = int(page.evaluate("() => window.__tr.layouts"))
    page.press("#tr-search", key)
    wait_layouts(page, done, settled=True)
    return str(page.text_content("#tr-found"))


def test_shift_enter_goes_to_the_match_before(tr_browser: Any, tmp_path: Path) -> None:
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Sequential(*[nn.Linear(4, 4) for _ in range(3)]))
    rec = torchrecorder.record(net, "net", (1, 4))
    path = tmp_path / "net.html"
    torchrecorder.make_html(rec).save(path)
    page, w = open_page(tr_browser, path)
    page.fill("#tr-search", "2.")
    assert [_found(page, k) for k in ("Enter", "Enter", "Shift+Enter", "Shift+Enter", "Enter")] == \
        ["1 of 3", "2 of 3", "1 of 3", "3 of 3", "1 of 3"]
    assert w.page_errors == [] and w.console_errors == []
    page.close()


def test_a_failed_layout_leaves_the_dot_of_the_view_kept(tr_browser: Any, tmp_path: Path) -> None:
    rec = _llama(2, width=64, heads=4, kv_heads=2, intermediate=128, vocab=256)
    path = tmp_path / "llama2.html"
    torchrecorder.make_html(rec).save(path)
    _break_a_deep_node(path)
    page, _ = open_page(tr_browser, path)
    dot = page.evaluate("() => window.__tr.dot")
    page.click("#tr-expand-all")  # draws the broken node: Graphviz fails
    deadline = time.monotonic() + 60
    while not page.evaluate("() => window.__tr.error"):
        assert time.monotonic() < deadline, "the layout neither failed nor ended"
        time.sleep(0.05)
    assert page.evaluate("() => window.__tr.dot") == dot
    assert "broken" not in page.evaluate("() => window.__tr.dot")
    page.close()


def test_search_finds_the_boxes_of_a_type(tr_browser: Any, tmp_path: Path) -> None:
    """As netron's search: a module class name finds the boxes of that type, beside names."""
    inner = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), inner)
    rec = torchrecorder.record(net, "net", (1, 4))
    path = tmp_path / "net.html"
    torchrecorder.make_html(rec, 1).save(path)
    page, w = open_page(tr_browser, path)
    hit = "() => { const g = document.querySelector('#tr-canvas .tr-hit'); return g ? g.textContent : ''; }"
    page.fill("#tr-search", "tanh")  # (any case, as names)
    assert _found(page, "Enter") == "1 of 1"
    assert "Tanh" in page.evaluate(hit)  # the box inside the closed 2 was opened to and marked
    page.fill("#tr-search", "Linear")
    assert [_found(page, "Enter") for _ in range(3)] == ["1 of 3", "2 of 3", "3 of 3"]
    assert "Linear" in page.evaluate(hit)
    page.fill("#tr-search", "2.")  # paths still match: those inside the Sequential named 2
    assert _found(page, "Enter") == "1 of 3"
    assert "type" in str(page.get_attribute("#tr-search", "title"))  # the tooltip says so
    assert w.page_errors == [] and w.console_errors == []
    page.close()


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        return self.c(self.b(self.a(x)))


def _fold(page: Any) -> dict[str, Any]:
    done = int(page.evaluate("() => window.__tr.layouts"))
    page.click("#tr-fold")
    wait_layouts(page, done, settled=True)
    return dict(page.evaluate("""() => ({depth: document.getElementById('tr-depth').value,
        fold: document.getElementById('tr-fold').checked, dot: window.__tr.dot,
        note: document.getElementById('tr-note').hidden ? ''
            : document.getElementById('tr-note').textContent})"""))


def test_fold_repeats_on_again_returns_to_the_view_before_a_budget_collapse(tr_browser: Any,
                                                                            tmp_path: Path) -> None:
    """Fold repeats off asks for more than the budget: the page collapses the view (a note says
    so); Fold repeats on again draws the view the reader had, not the collapsed one."""
    rec = torchrecorder.record(nn.Sequential(*[_Block() for _ in range(12)]), "blocks", (1, 4))
    path = tmp_path / "blocks.html"
    torchrecorder.make_html(rec, 2, max_nodes=30).save(path)
    page, w = open_page(tr_browser, path)
    before = page.evaluate("() => window.__tr.dot")
    assert page.input_value("#tr-depth") == "2" and page.is_checked("#tr-fold")
    off = _fold(page)  # 12 blocks of 3: over the budget, the blocks are closed
    assert not off["fold"] and off["depth"] == "1" and "collapsed" in off["note"]
    on = _fold(page)
    assert on["fold"] and on["depth"] == "2" and on["note"] == ""
    assert on["dot"] == before
    assert w.page_errors == [] and w.console_errors == []
    page.close()
