"""The HTML page of a failed recording: the operation that raised says so in the detail panel."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import torchrecorder

from .browser import launch, needs_chromium, open_page
from .test_failed_op import _CatFails

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def tr_browser() -> Iterator[Any]:
    yield from launch()


def test_the_panel_of_the_operation_that_raised_names_the_error(tr_browser: Any, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as info:
        torchrecorder.record(_CatFails(), "net", (2, 8))
    rec = info.value.recording  # type: ignore[attr-defined]
    path = tmp_path / "failed.html"
    torchrecorder.make_html(rec, 2).save(path)
    page, _ = open_page(tr_browser, path)
    index = int(page.evaluate(
        """() => { const D = JSON.parse(document.getElementById('tr-data').textContent);
                   return D.nodes.findIndex(r => { const i = JSON.parse(D.strings[r[6]]);
                                                   return i.kind === 'operation' && i.name === 'cat'; });
              }"""))
    assert index >= 0
    page.hover(f"#n{index}")
    text = page.text_content("#tr-details")
    assert "cat" in text and "raised RuntimeError: Sizes of tensors must match" in text, text
    page.close()
