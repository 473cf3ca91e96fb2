"""The HTML view without a browser: one self-contained file, data escaped, every way to get it.

The page is driven in Chromium by ``test_html_browser.py``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch
from torch import nn

import torchrecorder
from torchrecorder.renderer.html import HtmlPage, HtmlRenderer, script_json

ROOT = Path(__file__).resolve().parents[1]
EVIL = "<img src=x onerror=alert(1)>"


class Evil(nn.Module):
    """A module whose child is named like an HTML tag, and one named like the end of a script."""

    def __init__(self) -> None:
        super().__init__()
        self.add_module(EVIL, nn.Linear(3, 3))
        self.add_module("</script><script>alert(2)</script>", nn.ReLU())
        self.add_module("a\u2028b&c", nn.Linear(3, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for child in self.children():
            x = child(x)
        return x


@pytest.fixture(scope="module")
def evil_page() -> HtmlPage:
    rec = torchrecorder.record(Evil(), "</script><!-- net", (1, 3))
    return torchrecorder.make_html(rec, render_depth=2)


class _Tags(HTMLParser):
    """The tags of a page and the text of each ``<script>``, as a browser's parser splits them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


def _parse(text: str) -> _Tags:
    parser = _Tags()
    parser.feed(text)
    parser.close()
    return parser


def test_names_cannot_close_the_data_script(evil_page: HtmlPage) -> None:
    tags = _parse(evil_page.text)
    # exactly the page's three scripts (data, viz.js, the view), whatever the names hold
    assert [t for t, _ in tags.tags if t == "script"] == ["script"] * 3
    assert not any(t == "img" for t, _ in tags.tags)
    data = json.loads(tags.scripts[0])
    names = {json.loads(data["strings"][row[6]]).get("name") for row in data["nodes"]}
    assert EVIL in names and "</script><script>alert(2)</script>" in names and "a\u2028b&c" in names
    assert data["name"] == "</script><!-- net"
    raw = evil_page.text.split('id="tr-data">', 1)[1].split("</script>", 1)[0]
    assert not set("<>&\u2028\u2029") & set(raw)


def test_script_json_escapes() -> None:
    text = script_json({"a": "</script>&\u2028\u2029"})
    assert text == '{"a":"\\u003c/script\\u003e\\u0026\\u2028\\u2029"}'
    assert json.loads(text) == {"a": "</script>&\u2028\u2029"}


def test_page_is_self_contained(evil_page: HtmlPage) -> None:
    tags = _parse(evil_page.text)
    for tag, attrs in tags.tags:
        assert tag not in ("link", "iframe", "img", "object", "embed"), tag
        assert "src" not in attrs and "href" not in attrs, (tag, attrs)
    csp = next(a["content"] for t, a in tags.tags if t == "meta" and a.get("http-equiv"))
    assert "default-src 'none'" in (csp or "") and "connect-src 'none'" in (csp or "")
    assert len(evil_page.text.encode()) < 3_000_000


def test_vendored_file_is_the_pinned_one() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import update_vendor
    finally:
        sys.path.pop(0)
    vendor = ROOT / "torchrecorder" / "renderer" / "_vendor"
    vendored = vendor / "viz-global.js"
    readme = (vendor / "README.md").read_text()
    for package, version, tarball_hash, files in update_vendor.VENDORED:
        assert package in readme and version in readme and tarball_hash in readme, package
        for _, name, file_hash in files:
            assert hashlib.sha256((vendor / name).read_bytes()).hexdigest() == file_hash, name
            assert file_hash in readme, name
    for licence in ("LICENSE-viz-js-MIT.txt", "LICENSE-graphviz-EPL-1.0.txt", "LICENSE-expat-MIT.txt",
                    "LICENSE-arimo-OFL-1.1.txt", "LICENSE-tinos-OFL-1.1.txt"):
        assert (vendor / licence).stat().st_size > 500
    # the page inlines it unchanged
    page = torchrecorder.make_html(torchrecorder.record(nn.Linear(2, 2), "fc", (1, 2)))
    assert vendored.read_text(encoding="utf-8") in page.text
    # and the web fonts, base64 in @font-face rules
    font = base64.b64encode((vendor / "arimo-latin-400-normal.woff2").read_bytes()).decode()
    assert f"url(data:font/woff2;base64,{font})" in page.text


def test_package_data_lists_the_assets() -> None:
    cfg = (ROOT / "setup.cfg").read_text()
    assert "renderer/_html/*" in cfg and "renderer/_vendor/*" in cfg


def test_data_follows_the_styler() -> None:
    rec = torchrecorder.record(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), "mlp", (1, 4))
    red = HtmlRenderer(rec, layer_attrs={"fillcolor": "red"}).page_data()
    plain = HtmlRenderer(rec).page_data()
    assert any('fillcolor=red' in s for s in red["strings"])
    assert not any('fillcolor=red' in s for s in plain["strings"])
    assert HtmlRenderer(rec, direction="LR").page_data()["header"].count("rankdir=LR") == 1


def test_first_view_opens_at_render_depth() -> None:
    rec = torchrecorder.record(nn.Sequential(nn.Sequential(nn.Linear(4, 4), nn.ReLU())), "net", (1, 4))
    for depth, opened in ((0, 0), (1, 1), (2, 2)):
        data = HtmlRenderer(rec, depth).page_data()
        assert sum(row[5] for row in data["nodes"]) == opened


def test_page_carries_the_drawing_budget() -> None:
    """The page holds every view to max_nodes's budget, with Python's numbers (one definition)."""
    rec = torchrecorder.record(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), "mlp", (1, 4))
    assert HtmlRenderer(rec).page_data()["budget"] == {"nodes": 1000, "edges": 1200, "spans": 2500}
    smaller = HtmlRenderer(rec, max_nodes=300).page_data()["budget"]
    assert smaller == {"nodes": 300, "edges": 360, "spans": 750}
    assert HtmlRenderer(rec, max_nodes=None).page_data()["budget"] is None


def test_the_layout_worker_is_allowed_and_nothing_more() -> None:
    """The page's policy lets it start its layout worker from a blob: URL (no other source)."""
    page = torchrecorder.make_html(torchrecorder.record(nn.Linear(2, 2), "fc", (1, 2)))
    csp = next(a["content"] for t, a in _parse(page.text).tags if t == "meta" and a.get("http-equiv"))
    assert "worker-src blob:;" in (csp or "") and "connect-src 'none'" in (csp or "")


def test_bad_height() -> None:
    rec = torchrecorder.record(nn.Linear(2, 2), "fc", (1, 2))
    with pytest.raises(ValueError, match="height"):
        HtmlRenderer(rec, height=10)


def test_notebook_iframe(evil_page: HtmlPage) -> None:
    html = evil_page._repr_html_()
    assert html.startswith("<iframe srcdoc='") and 'sandbox="allow-scripts allow-downloads"' in html
    tags = _parse(html)
    assert [t for t, _ in tags.tags] == ["iframe"]  # the page is inside the attribute, escaped
    # outside a notebook cell every view carries the viewer (and offers it to later views)
    assert tags.tags[0][1]["srcdoc"] == evil_page.notebook_page(True)
    rec = torchrecorder.record(nn.Linear(2, 2), "fc", (1, 2))
    shown = rec.show()
    assert isinstance(shown, HtmlPage) and shown._repr_html_().startswith("<iframe")
    assert "fc" in repr(shown) and "bytes" in repr(shown)


def test_render_network_html(tmp_path: Path) -> None:
    path = torchrecorder.render_network(nn.Sequential(nn.Linear(3, 2)), "net", (1, 3), tmp_path, fmt="html")
    assert path.endswith("net-1.html")  # the name and the depth, as 1.0.3 named files
    text = Path(path).read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and 'id="tr-data"' in text
    assert os.listdir(tmp_path) == ["net-1.html"]


def test_cli_format_html(tmp_path: Path) -> None:
    out = tmp_path / "m.html"
    proc = subprocess.run([sys.executable, "-m", "torchrecorder", "tests.core_models:TinyMLP", "-s", "1,4",
                           "-o", str(out), "--format", "html"], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r'<script type="application/json" id="tr-data">', out.read_text(encoding="utf-8"))


def test_save(tmp_path: Path) -> None:
    page = torchrecorder.make_html(torchrecorder.record(nn.Linear(2, 2), "fc", (1, 2)))
    target = tmp_path / "fc.html"
    assert page.save(target) == str(target)
    assert target.read_text(encoding="utf-8") == page.text == str(page)


def test_a_capture_colours_the_page_as_it_colours_make_dot() -> None:
    """``make_html(rec, activations=cap, stat=...)`` (and ``render_network(fmt="html", ...)``)
    takes a capture's statistics as ``make_dot`` does (it raised ``TypeError``); that colouring
    is in every view, so the page leaves out the Colour menu, whose choices would have drawn
    their legend over the capture's notes.  A cost ``stat=`` is the menu's choice instead."""
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    with torchrecorder.capture(net, stats=True, record=False) as cap:
        net(torch.randn(16, 4))
    rec = torchrecorder.record(net, "net", (2, 4))
    page = torchrecorder.make_html(rec, activations=cap, stat="dead")
    assert "dead-unit fraction" in page.text and "colour" not in page._data
    by_mapping = torchrecorder.make_html(rec, activations={"0": 1.0, "2": 3.0}, stat="mean")
    assert "mean activation" in by_mapping.text and "colour" not in by_mapping._data
    flops = torchrecorder.make_html(rec, stat="flops")
    assert flops._data["colour_start"] == "flops" and "flops" in flops._data["colour"]
    assert "FLOPs per call" not in "".join(flops._data["strings"])  # not drawn into the views
