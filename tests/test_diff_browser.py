"""The HTML page of a diff in headless Chromium: the views' drawings, the list of changes,
the side panel, the counterpart highlighted on hover."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import torchrecorder
from torchrecorder.diff.files import render_diff
from torchrecorder.renderer.labels import count_str

from .backends import needs_backend
from .browser import launch, needs_chromium, watch
from .diff_models import Decoder, Stack, lora_wrap

pytestmark = [needs_chromium, needs_backend]


@pytest.fixture(scope="module")
def tr_browser() -> Iterator[Any]:
    yield from launch()


@pytest.fixture(scope="module")
def page_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    a = torchrecorder.record(Stack((8, 8, 8)), "net", (1, 8))
    b = torchrecorder.record(Stack((8, 16, 8, 8)), "net", (1, 8))
    path = tmp_path_factory.mktemp("diffhtml") / "diff.html"
    render_diff(torchrecorder.diff(a, b), path)
    return path


def _visible(page: Any, pane: int, entry: int) -> bool:
    return bool(page.evaluate(
        """([p, e]) => {
             const g = document.querySelectorAll('.pane')[p].querySelector('g[data-entry="' + e + '"]');
             return !!g && getComputedStyle(g).visibility !== 'hidden'; }""", [pane, entry]))


def test_diff_page(tr_browser: Any, page_file: Path) -> None:
    page = tr_browser.new_page(viewport={"width": 1400, "height": 900})
    w = watch(page)
    page.goto(page_file.as_uri())
    page.wait_for_selector(".pane svg")
    changes = page.evaluate("__diff.changes")
    data = page.evaluate("JSON.parse(document.getElementById('diff-data').textContent)")
    titles = [data["entries"][str(i)]["title"] for i in changes]
    assert titles[:2] == ["layers.1", "layers.1.fc"] and "layers.2" in titles and "net" not in titles
    added = next(i for i in changes if data["entries"][str(i)]["title"] == "layers.1")
    renamed = next(i for i in changes if data["entries"][str(i)]["title"] == "layers.2")
    # the union shows the added block; view a hides it; view b shows it
    assert _visible(page, 0, added)
    page.click("#bar button[data-view=a]")
    assert not _visible(page, 0, added) and _visible(page, 0, renamed)
    page.click("#bar button[data-view=b]")
    assert _visible(page, 0, added)
    # a | b: two panes with the same layout; hovering in a highlights the counterpart in b
    page.click("#bar button[data-view=ab]")
    assert page.evaluate("document.querySelectorAll('.pane').length") == 2
    boxes = page.evaluate(
        """e => [...document.querySelectorAll('.pane')].map(p => {
                 const r = p.querySelector('g[data-entry="' + e + '"]').getBBox(); return [r.x, r.y]; })""",
        renamed)
    assert boxes[0] == boxes[1]
    page.hover(f".pane:first-of-type g[data-entry='{renamed}']")
    assert page.evaluate(
        """e => document.querySelectorAll('.pane')[1].querySelector('g[data-entry="' + e + '"]')
                    .classList.contains('hl')""", renamed)
    assert "renumbered +1" in page.inner_text("#panel") and "layers.1" in page.inner_text("#panel")
    # next / previous walk the list of changes; the panel shows old and new keys
    page.click("#next")
    page.click("#next")
    assert page.inner_text("#pos").startswith("2 /")
    assert page.inner_text("#changes li.sel") == page.inner_text("#changes li:nth-child(2)")
    page.click("#prev")
    assert page.inner_text("#pos").startswith("1 /")
    # only changes fades what did not change
    page.check("#only")
    assert page.evaluate("document.getElementById('panes').classList.contains('only-changes')")
    assert w.console_errors == [] and w.page_errors == []
    assert [u for u in w.requests if u != page_file.as_uri()] == []
    page.close()


def test_lora_page_has_no_errors(tr_browser: Any, tmp_path: Path) -> None:
    torch.manual_seed(0)
    m = Decoder(2)
    d = torchrecorder.diff(torchrecorder.record(m, "dec", (1, 3, 8)),
                           torchrecorder.record(lora_wrap(copy.deepcopy(m)), "dec", (1, 3, 8)))
    path = Path(render_diff(d, tmp_path / "lora.html"))
    page = tr_browser.new_page()
    w = watch(page)
    page.goto(path.as_uri())
    page.wait_for_selector(".pane svg")
    assert len(page.evaluate("__diff.changes")) > 4
    assert w.console_errors == [] and w.page_errors == []
    page.close()


def test_page_opens_fitted_and_zooms(tr_browser: Any, tmp_path: Path) -> None:
    # a tall drawing (a LoRA decoder, every module open) in a small window
    torch.manual_seed(0)
    m = Decoder(4)
    d = torchrecorder.diff(torchrecorder.record(m, "dec", (1, 3, 8)),
                           torchrecorder.record(lora_wrap(copy.deepcopy(m)), "dec", (1, 3, 8)))
    path = Path(render_diff(d, tmp_path / "tall.html", changes_only=False))
    page = tr_browser.new_page(viewport={"width": 1000, "height": 600})
    w = watch(page)
    page.goto(path.as_uri())
    page.wait_for_selector(".pane svg")
    fits = """() => [...document.querySelectorAll('.pane')].every(p => {
                 const r = p.getBoundingClientRect(), s = p.querySelector('svg').getBoundingClientRect();
                 return s.left >= r.left - 1 && s.right <= r.right + 1 && s.top >= r.top - 1
                        && s.bottom <= r.bottom + 1; })"""
    assert page.evaluate(fits)
    fitted = page.evaluate("__diff.zoom.scale")
    assert fitted < 1  # the drawing is larger than the window
    page.click("#zin")
    assert page.evaluate("__diff.zoom.scale") > fitted
    page.click("#fit")
    assert abs(page.evaluate("__diff.zoom.scale") - fitted) < 1e-9
    # a | b: each pane as wide as the other, together the width left to them, both fitted
    page.click("#bar button[data-view=ab]")
    widths = page.evaluate("[...document.querySelectorAll('.pane')].map(p => p.clientWidth)")
    assert len(widths) == 2 and abs(widths[0] - widths[1]) <= 1
    assert sum(widths) >= page.evaluate("document.getElementById('panes').clientWidth") - 4
    assert page.evaluate(fits)
    # each pane reads its own side's parameter counts and names, not the other side's
    shown = page.evaluate("""() => [...document.querySelectorAll('.pane')].map(
        p => [...p.querySelectorAll('text')].filter(t => getComputedStyle(t).visibility !== 'hidden')
                 .map(t => t.textContent).join(' '))""")
    counts = [{f"{count_str(n.num_params_total)} params" for n in g.layers() if n.num_params_total > 1}
              for g in (d.a, d.b)]
    assert counts[0] - counts[1] and counts[1] - counts[0]
    assert all(c in shown[0] for c in counts[0] - counts[1])
    assert not any(c in shown[0] for c in counts[1] - counts[0])
    assert all(c in shown[1] for c in counts[1] - counts[0])
    assert not any(c in shown[1] for c in counts[0] - counts[1])
    assert "lora" not in shown[0] and "lora" in shown[1] and "→" not in shown[0] + shown[1]
    # the list of changes shows the end of each path (cut at its start when it is long)
    ends = page.evaluate("""() => [...document.querySelectorAll('#changes li .path')].map(t => {
        const n = t.firstChild, r = document.createRange();
        r.setStart(n, n.length - 2); r.setEnd(n, n.length - 1);
        const c = r.getBoundingClientRect(), b = t.getBoundingClientRect();
        return c.right <= b.right + 1 && c.left >= b.left - 1; })""")
    assert ends and all(ends)
    assert w.console_errors == [] and w.page_errors == []
    page.close()
