"""Notebook views sharing one viewer, in headless Chromium: outputs as Jupyter puts them, one after
another in one document, each a sandboxed ``<iframe srcdoc>``."""

from __future__ import annotations

import html
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from torchrecorder.renderer.html import HtmlPage
from torchrecorder.renderer.html_page import ASK_TRIES, MISSING, viewer_version

from .browser import launch, needs_chromium, wait_layouts, watch

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def tr_browser() -> Iterator[Any]:
    yield from launch()


def _iframe(doc: str) -> str:
    return (f'<iframe srcdoc="{html.escape(doc, quote=True)}" style="width:100%;height:400px" '
            'sandbox="allow-scripts allow-downloads"></iframe>')


def _notebook(tmp_path: Path, *docs: str) -> Path:
    path = tmp_path / "notebook.html"
    path.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>"
                    + "".join(_iframe(d) for d in docs) + "</body></html>", encoding="utf-8")
    return path


def _drawn(frame: Any) -> tuple[int, str]:
    """The number of drawn nodes in a view and its title line."""
    return (frame.evaluate("document.querySelectorAll('#tr-canvas svg g.node[id^=n]').length"),
            frame.evaluate("document.getElementById('tr-title').textContent"))


@pytest.mark.parametrize("order", ["carrier first", "carrier last"])
def test_two_outputs_share_one_viewer(tr_browser: Any, pages: tuple[HtmlPage, HtmlPage], tmp_path: Path,
                                      order: str) -> None:
    carrier, later = pages[0].notebook_page(True), pages[1].notebook_page(False)
    assert len(later) < 0.05 * len(carrier)
    # a reopened notebook loads its outputs in any order: a later view may ask before the first is whole
    path = _notebook(tmp_path, *([carrier, later] if order == "carrier first" else [later, carrier]))
    page = tr_browser.new_page(viewport={"width": 1000, "height": 900})
    w = watch(page)
    page.goto(path.as_uri())
    frames = page.frames[1:]
    assert len(frames) == 2
    drawn = {}
    for frame in frames:
        wait_layouts(frame, 0)
        count, title = _drawn(frame)
        drawn[title.split()[0]] = count
        assert frame.evaluate("document.getElementById('tr-wait')") is None
        # each lays out in its own worker made from the viz.js it carries or borrowed (a blob: URL
        # that the sandboxed frame's policy allows, the later view's hashed policy too)
        assert frame.evaluate("__tr.worker") is True
        # the borrowed web fonts draw the later view as they draw the first
        assert frame.evaluate("document.fonts.check('13px Arimo')")
    assert drawn == {"mlp": 5, "cnn": 5}, drawn
    assert w.console_errors == [] and w.page_errors == [] and w.dialogs == []
    assert w.outside_requests(path.as_uri()) == []
    page.close()


def test_without_the_carrier_the_view_says_so(tr_browser: Any, pages: tuple[HtmlPage, HtmlPage],
                                              tmp_path: Path) -> None:
    """The first view's output cleared: the later one says what is missing and what to do."""
    path = _notebook(tmp_path, pages[1].notebook_page(False))
    page = tr_browser.new_page()
    w = watch(page)
    page.goto(path.as_uri())
    frame = page.frames[1]
    deadline = time.monotonic() + ASK_TRIES * 0.25 + 30
    while frame.evaluate("document.getElementById('tr-wait').className") != "tr-missing":
        assert time.monotonic() < deadline, "the view never said the viewer is missing"
        time.sleep(0.1)
    assert frame.evaluate("document.getElementById('tr-wait').textContent") == MISSING
    assert "share_viewer = False" in MISSING
    assert _drawn(frame)[0] == 0 and frame.evaluate("typeof window.Viz") == "undefined"
    assert w.console_errors == [] and w.page_errors == []
    assert w.outside_requests(path.as_uri()) == []
    page.close()


_FORGER = """<!DOCTYPE html><html><body><script>
window.addEventListener("message", function (ev) {
  if (!ev.data || ev.data.torchrecorder !== "viewer?") return;
  const code = "window.Viz = {}; window.__tr = {layouts: 99}; document.title = 'forged';";
  ev.source.postMessage({torchrecorder: "viewer", version: ev.data.version, fonts: "",
                         scripts: [code, code]}, "*");
});
</script></body></html>"""


def test_a_forged_viewer_never_runs(tr_browser: Any, pages: tuple[HtmlPage, HtmlPage],
                                    tmp_path: Path) -> None:
    """Another frame answering with its own code: the later view's policy refuses it, and the
    view still takes the real viewer from the first view."""
    later = pages[1].notebook_page(False)
    assert viewer_version() in later
    path = _notebook(tmp_path, _FORGER, later)
    page = tr_browser.new_page()
    w = watch(page)
    page.goto(path.as_uri())
    frame = page.frames[2]
    time.sleep(1.5)  # several answers refused
    assert frame.evaluate("document.title") == "cnn · torchrecorder"
    assert frame.evaluate("typeof window.Viz") == "undefined" and frame.evaluate("window.__tr") is None
    assert any("Content Security Policy" in e for e in w.console_errors), w.console_errors
    page.close()
    # with the real carrier on the page too, it draws
    path = _notebook(tmp_path, _FORGER, later, pages[0].notebook_page(True))
    page = tr_browser.new_page()
    w = watch(page)
    page.goto(path.as_uri())
    frame = page.frames[2]
    wait_layouts(frame, 0)
    assert _drawn(frame) == (5, frame.evaluate("document.getElementById('tr-title').textContent"))
    assert frame.evaluate("document.title") == "cnn · torchrecorder"
    assert w.page_errors == [] and w.outside_requests(path.as_uri()) == []
    page.close()


def test_a_later_view_hands_the_viewer_on(tr_browser: Any, pages: tuple[HtmlPage, HtmlPage],
                                          tmp_path: Path) -> None:
    """The first view unloaded (cleared, or out of sight in JupyterLab's windowing): a view
    that already took the viewer hands it to a view that loads after."""
    path = _notebook(tmp_path, pages[0].notebook_page(True), pages[1].notebook_page(False))
    page = tr_browser.new_page()
    w = watch(page)
    page.goto(path.as_uri())
    wait_layouts(page.frames[2], 0)
    page.evaluate("document.querySelector('iframe').remove()")  # the first view is gone
    assert page.evaluate("document.querySelectorAll('iframe').length") == 1
    page.evaluate("""doc => { const f = document.createElement('iframe');
                              f.setAttribute('sandbox', 'allow-scripts allow-downloads');
                              f.srcdoc = doc; document.body.appendChild(f); }""",
                  pages[0].notebook_page(False))
    frame = page.query_selector_all("iframe")[-1].content_frame()
    wait_layouts(frame, 0)
    assert _drawn(frame)[0] == 5 and frame.evaluate("document.getElementById('tr-wait')") is None
    assert w.console_errors == [] and w.page_errors == []
    assert w.outside_requests(path.as_uri()) == []
    page.close()
