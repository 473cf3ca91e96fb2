"""The page for a reader who uses only the keyboard: Tab reaches every box of the drawing in
order, with a visible focus ring, the panel shows the focused box's details, and Enter or Space
opens and closes a module as a click does (focus stays on it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from torch import nn

import torchrecorder

from .browser import launch, needs_chromium, open_page, wait_layouts

pytestmark = [needs_chromium]


@pytest.fixture(scope="module")
def tr_browser() -> Iterator[Any]:
    yield from launch()


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(),
                         nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 4)))


#: the focused element of the drawing: its id (n<row>: a box, t<row>: an open module's
#: title), its text, and the focus ring's stroke
_FOCUSED = """() => {
  const g = document.activeElement;
  if (!g || !document.getElementById("tr-canvas").contains(g)) return null;
  const shape = g.querySelector("polygon, path, ellipse");
  return { id: g.id, label: g.getAttribute("aria-label"), expanded: g.getAttribute("aria-expanded"),
           ring: shape ? getComputedStyle(shape).strokeDasharray
                       : getComputedStyle(g.querySelector("text")).textDecorationLine };
}"""


def _tab_to(page: Any, label: str) -> dict[str, Any]:
    """Tab from the drawing's frame until the focused box's text starts with ``label``."""
    page.focus("#tr-view")
    seen = []
    for _ in range(30):
        page.keyboard.press("Tab")
        got = page.evaluate(_FOCUSED)
        assert got is not None, f"Tab left the drawing after {seen}"
        seen.append(got["label"])
        if got["label"].startswith(label):
            return dict(got)
    raise AssertionError(f"Tab never reached {label!r}: {seen}")


def _press(page: Any, key: str) -> None:
    done = int(page.evaluate("() => window.__tr.layouts"))
    page.keyboard.press(key)
    wait_layouts(page, done, settled=True)


def test_a_keyboard_reader_reaches_opens_and_closes_a_module(tr_browser: Any, tmp_path: Path) -> None:
    rec = torchrecorder.record(_net(), "net", (1, 4))
    path = tmp_path / "net.html"
    torchrecorder.make_html(rec, 1).save(path)
    page, w = open_page(tr_browser, path)
    # every box of the first view in order: input, the three children, output
    page.focus("#tr-view")
    order = []
    for _ in range(5):
        page.keyboard.press("Tab")
        order.append(page.evaluate(_FOCUSED)["label"].split(" ")[0])
    assert order[1:4] == ["0", "1", "2"], order
    got = _tab_to(page, "2")
    assert got["id"].startswith("n") and got["expanded"] == "false"
    assert got["ring"] not in ("none", ""), "no visible focus ring"
    assert "Sequential" in str(page.text_content("#tr-details"))  # the panel shows the focused box
    _press(page, "Enter")
    cluster = f"subgraph cluster_{got['id'][1:]} "
    assert cluster in str(page.evaluate("() => window.__tr.dot"))  # the module opened
    opened = page.evaluate(_FOCUSED)
    assert opened is not None and opened["expanded"] == "true"  # focus stays on it (its title)
    _press(page, " ")  # Space closes it again
    closed = page.evaluate(_FOCUSED)
    assert closed is not None and closed["id"] == got["id"] and closed["expanded"] == "false"
    assert cluster not in str(page.evaluate("() => window.__tr.dot"))
    # the downloaded SVG carries none of the page's keyboard attributes
    assert page.evaluate("() => document.querySelectorAll('#tr-canvas [tabindex]').length") >= 5
    with page.expect_download() as download:
        page.click("#tr-svg")
    svg = tmp_path / "view.svg"
    download.value.save_as(svg)
    assert "<svg" in svg.read_text() and "tabindex" not in svg.read_text() and "aria-" not in svg.read_text()
    assert w.page_errors == [] and w.console_errors == []
    page.close()
