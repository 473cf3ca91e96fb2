"""A headless Chromium for tests that need what a browser draws (Debian's ``chromium``,
driven by Playwright; no browser is ever downloaded).

Tests that use :func:`launch` skip, saying why, where Playwright or a Chromium binary is
missing; CI installs both (see ``.ci/run``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

#: the flags of a sandboxed CI machine: no GPU, no shared memory, no network chatter
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path() -> str | None:
    """The Chromium binary: ``$TORCHRECORDER_CHROMIUM``, else the first of the usual names on PATH."""
    env = os.environ.get("TORCHRECORDER_CHROMIUM")
    if env:
        return env
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@contextmanager
def launch() -> Iterator[Any]:
    """A Playwright browser on the system Chromium (the test skips where there is none)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    path = chromium_path()
    if path is None:
        pytest.skip("no Chromium binary on PATH (apt-get install chromium)")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
