"""Headless Chromium for the HTML page's tests: Debian's system browser driven by Playwright.

No browser is downloaded (``playwright install`` is never run): the tests use
the ``chromium`` on PATH (``apt-get install chromium``, which ``.ci/run`` does),
or the binary named by ``TORCHRECORDER_CHROMIUM``.  Without one they skip.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

import pytest

#: the flags the issue asks for: headless, no sandbox (containers), nothing that phones home
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path() -> Optional[str]:
    """The system Chromium binary, or ``None``."""
    given = os.environ.get("TORCHRECORDER_CHROMIUM")
    if given:
        return given if os.path.exists(given) else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


CHROMIUM = chromium_path()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium binary (apt-get install chromium, or set TORCHRECORDER_CHROMIUM)")


@dataclass
class Watch:
    """What a page did besides drawing: requests, console errors, script errors, dialogs."""

    page: Any
    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def outside_requests(self, own_url: str) -> list[str]:
        """Requests other than loading the page itself and its in-page data/blob URLs."""
        return [u for u in self.requests if u != own_url and not u.startswith(("data:", "blob:"))]


def watch(page: Any) -> Watch:
    """Start recording what ``page`` requests and reports; dialogs are dismissed and recorded."""
    w = Watch(page)
    page.on("request", lambda r: w.requests.append(r.url))
    page.on("console", lambda m: w.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: w.page_errors.append(str(e)))

    def dialog(d: Any) -> None:
        w.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", dialog)
    return w


def open_page(browser: Any, path: Any, width: int = 1200, height: int = 800,
              **options: Any) -> tuple[Any, Watch]:
    """A new page of ``browser`` showing the file ``path`` (a :class:`~pathlib.Path`) in a
    ``width`` x ``height`` window (``options`` go to ``new_page``), once its first layout is
    drawn, and the :class:`Watch` of what it did meanwhile."""
    page = browser.new_page(viewport={"width": width, "height": height}, **options)
    w = watch(page)
    page.goto(path.as_uri())
    wait_layouts(page, 0)
    return page, w


def launch() -> Iterator[Any]:
    """A headless Chromium browser for one test module (closed afterwards)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def wait_layouts(page: Any, more_than: int, timeout: float = 60.0, settled: bool = False) -> int:
    """Wait until the page (or frame) has laid out more than ``more_than`` times; the count.

    Polled with ``evaluate``: ``wait_for_function`` compiles its predicate with
    ``eval`` inside the page, which the page's Content-Security-Policy forbids.
    """
    deadline = time.monotonic() + timeout
    while True:
        got = page.evaluate("() => window.__tr ? [window.__tr.layouts, window.__tr.error] : [0, null]")
        if got[1]:
            raise AssertionError(f"the page could not lay out: {got[1]}")
        if got[0] > more_than:
            if not settled:
                return int(got[0])
            # ``settled``: also wait out a layout the finished one queued (a control's
            # follow-up): the count once none has started or ended for a moment
            time.sleep(0.2)
            again = page.evaluate("() => [window.__tr.layouts, !!document.getElementById('tr-busy')"
                                  " && !document.getElementById('tr-busy').hidden]")
            if again[0] == got[0] and not again[1]:
                return int(got[0])
            more_than = int(again[0]) if again[1] else int(again[0]) - 1
        if time.monotonic() > deadline:
            raise AssertionError(f"the page laid out {got[0]} times in {timeout} s, "
                                 f"expected more than {more_than}")
        time.sleep(0.02)
