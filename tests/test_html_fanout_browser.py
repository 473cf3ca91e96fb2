"""The page ranks the edges of a value fed to many boxes as ``make_dot`` does: within the
drawing budget as every edge (the boxes it feeds are drawn below it), in a view kept whole over
the default budget with ``constraint=false`` (the layout stays fast)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import torchrecorder
from torchrecorder.errors import LargeDrawingWarning

from .browser import launch, needs_chromium, open_page
from .test_render import _Chain, _FanOut

pytestmark = [needs_chromium]


@pytest.fixture(scope="module")
def tr_browser() -> Iterator[Any]:
    yield from launch()


def _first_dot(browser: Any, tmp_path: Path, rec: torchrecorder.Recorder, **options: Any) -> str:
    path = tmp_path / f"{rec.name}.html"
    torchrecorder.make_html(rec, 1, **options).save(path)
    page, w = open_page(browser, path)
    dot = str(page.evaluate("() => window.__tr.dot"))
    assert w.page_errors == [] and w.console_errors == []
    page.close()
    return dot


def test_the_page_ranks_a_wide_values_edges_within_the_budget(tr_browser: Any, tmp_path: Path) -> None:
    rec = torchrecorder.record(_FanOut(12), "fan", (1, 4))
    dot = _first_dot(tr_browser, tmp_path, rec)
    assert dot.count("stem -> ") == 12 and "constraint=false" not in dot
    assert dot.replace("\t", "").count("\n") > 20  # (the drawing itself, not an empty page)


def test_the_page_does_not_rank_them_over_the_default_budget(tr_browser: Any, tmp_path: Path) -> None:
    rec = torchrecorder.record(_Chain(80), "chain", (1, 4))
    dot = _first_dot(tr_browser, tmp_path, rec, max_nodes=None, fold_repeats=False)
    fan = [line for line in dot.splitlines() if line.strip().startswith("pos -> ")]
    assert len(fan) == 80 and all("constraint=false" in line for line in fan)


def test_the_pages_mark_of_shared_edges_is_in_the_drawings_font(tr_browser: Any, tmp_path: Path) -> None:
    """The mark "→ 30 boxes" is written in its edge's font, as make_dot's ``style_fanout``
    writes it; the page wrote it with no font, so Graphviz drew it in Times."""
    from .test_fanout_share import _fan

    rec = _fan(30)
    path = tmp_path / "fan.html"
    with pytest.warns(LargeDrawingWarning):
        torchrecorder.make_html(rec, 1, fold_repeats=False, max_nodes=60).save(path)
    page, w = open_page(tr_browser, path)
    dot = str(page.evaluate("() => window.__tr.dot"))
    mark = next(line for line in dot.splitlines() if "::fanout\" [" in line)
    assert "fontname=Arimo" in mark
    family = page.evaluate("() => [...document.querySelectorAll('#tr-canvas svg g.node text')]"
                           ".filter(t => t.textContent.startsWith('→'))"
                           ".map(t => t.getAttribute('font-family'))")
    assert family == ["Arimo"], family
    assert w.page_errors == [] and w.console_errors == []
    page.close()


class _LoudFanout(torchrecorder.GraphvizStyler):
    """A styler with its own mark for shared edges (a red box naming the count)."""

    def style_fanout(self, fnode: Any, tnodes: Any) -> dict[str, str]:
        return {"shape": "box", "color": "#cc0000", "fontcolor": "#cc0000", "fontsize": "13",
                "label": f"fans out to {len(tnodes)}", "tooltip": f"{fnode.name} feeds {len(tnodes)}"}


def test_the_page_draws_a_stylers_own_mark_of_shared_edges(tr_browser: Any, tmp_path: Path) -> None:
    """A styler's ``style_fanout`` draws the page's mark as it draws make_dot's (the page
    wrote its own "→ N boxes" whatever the styler said)."""
    from .test_fanout_share import _fan

    rec = _fan(30)
    options: dict[str, Any] = {"fold_repeats": False, "max_nodes": 60, "styler_cls": _LoudFanout}
    with pytest.warns(LargeDrawingWarning):
        svg_dot = torchrecorder.make_dot(rec, 1, **options).source
    want = next(line for line in svg_dot.splitlines() if "::fanout\" [" in line or "::fanout [" in line)
    path = tmp_path / "fan.html"
    with pytest.warns(LargeDrawingWarning):
        torchrecorder.make_html(rec, 1, **options).save(path)
    page, w = open_page(tr_browser, path)
    dot = str(page.evaluate("() => window.__tr.dot"))
    mark = next(line for line in dot.splitlines() if "::fanout\" [" in line)
    for part in ("shape=box", 'color="#cc0000"', 'fontcolor="#cc0000"', "fontsize=13",
                 'label="fans out to 30"', 'tooltip="pos feeds 30"'):
        assert part in want and part in mark, (part, want, mark)
    texts = page.evaluate("() => [...document.querySelectorAll('#tr-canvas svg g.node text')]"
                          ".map(t => t.textContent)")
    assert "fans out to 30" in texts and not any(t.startswith("→") for t in texts)
    assert w.page_errors == [] and w.console_errors == []
    page.close()
