"""The backward graph's page in Chromium: it draws, and every grad_fn shows once expanded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import torchrecorder

from .browser import launch, needs_chromium, wait_layouts, watch
from .test_backward import net

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def tr_browser() -> Iterator[Any]:
    yield from launch()


def test_backward_page_draws_and_expands_to_every_grad_fn(tr_browser: Any, tmp_path: Path) -> None:
    rec = torchrecorder.record(net(), "net", (2, 4), backward=True)
    path = tmp_path / "backward.html"
    torchrecorder.make_html(torchrecorder.loads_json(rec.to_json()), backward=True).save(path)
    page = tr_browser.new_page(viewport={"width": 1200, "height": 800})
    w = watch(page)
    page.goto(path.as_uri())
    wait_layouts(page, 0)
    assert page.evaluate("__tr.firstPaint") > 0
    count = page.evaluate("__tr.layouts")
    page.click("#tr-expand-all")
    wait_layouts(page, count)
    text = page.eval_on_selector("#tr-canvas", "e => e.textContent")
    names = {n.name for n in rec.backward.nodes if n.name != "AccumulateGrad"}
    assert names and all(name in text for name in names), sorted(n for n in names if n not in text)
    assert w.page_errors == [] and w.console_errors == []
    page.close()
