"""Figures that carry their font: ``embed_font=True`` embeds the glyphs an SVG draws (the font
Graphviz measured them with) as ``@font-face`` rules, so that a reader without that font sees
the text as wide as it was laid out; on by default for ``preset="paper"`` only."""

from __future__ import annotations

import base64
import html
import io
import os
import re
from pathlib import Path
from typing import Any

import pytest
from torch import nn

import torchrecorder
from torchrecorder.svgfont import embed_fonts

from .backends import needs_dot
from .browser import CHROMIUM, CHROMIUM_ARGS, needs_chromium
from .figure_checks import font_env

pytestmark = needs_dot

_FACE = re.compile(r'@font-face \{ font-family: "([^"]+)"; font-weight: (\w+); font-style: (\w+); '
                   r'src: url\(data:font/woff;base64,([A-Za-z0-9+/=]+)\)')


def _net() -> nn.Module:
    class Tagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed_input_ids = nn.Embedding(50, 8)
            self.head = nn.Linear(8, 3)

        def forward(self, input_ids: Any) -> Any:
            return self.head(self.embed_input_ids(input_ids))

    return Tagger()


def _draw(tmp_path: Path, **options: Any) -> str:
    import torch

    tokens = torch.tensor([[1, 2, 3]])
    path = torchrecorder.render_network(_net(), "tagger", None, tmp_path, input_data=tokens, **options)
    return Path(path).read_text(encoding="utf-8")


@pytest.fixture
def dejavu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Graphviz (and fc-match) see DejaVu alone."""
    for key, value in font_env("dejavu", tmp_path / "fonts").items():
        monkeypatch.setenv(key, value)
    from torchrecorder import svgfont

    svgfont.font_file.cache_clear()


def test_the_svg_carries_the_glyphs_it_draws(tmp_path: Path, dejavu: None) -> None:
    pytest.importorskip("fontTools")
    from fontTools.ttLib import TTFont

    svg = _draw(tmp_path, embed_font=True)
    faces = _FACE.findall(svg)
    assert {(weight, style) for _, weight, style, _ in faces} >= {("normal", "normal"), ("bold", "normal")}
    families = set(re.findall(r'font-family="([^"]*)"', svg))
    assert families and all(f.split(",")[0] in {name for name, *_ in faces} for f in families), families
    texts = html.unescape("".join(re.findall(r"<text[^>]*>([^<]*)</text>", svg)))
    assert "input_ids" in texts
    covered: set[int] = set()
    for *_, data in faces:
        font = TTFont(io.BytesIO(base64.b64decode(data)))
        assert font.flavor == "woff" and "DejaVu" not in font["name"].getDebugName(1)
        assert "DejaVu" in (font["name"].getDebugName(0) or "") + (font["name"].getDebugName(13) or "")
        cmap = font.getBestCmap()
        covered.update(cmap)
        assert len(cmap) <= len(set(texts)) + 1  # the characters drawn (and a space), no more
    assert set(map(ord, texts)) <= covered
    assert len(svg) < 200_000


def test_embedding_is_off_by_default_and_on_for_the_paper_preset(tmp_path: Path, dejavu: None) -> None:
    pytest.importorskip("fontTools")
    assert "@font-face" not in _draw(tmp_path)
    assert "@font-face" in _draw(tmp_path, preset="paper")
    assert "@font-face" not in _draw(tmp_path, preset="paper", embed_font=False)


def test_an_svg_without_text_is_unchanged() -> None:
    svg = b'<svg width="1pt" height="1pt"><g class="graph"><polygon points="0,0 1,1"/></g></svg>'
    assert embed_fonts(svg) == svg


def test_the_command_line_embeds_on_request(tmp_path: Path, dejavu: None) -> None:
    pytest.importorskip("fontTools")
    from torchrecorder.__main__ import main

    model = tmp_path / "tiny.py"
    model.write_text("import torch\ndef make():\n    return torch.nn.Sequential(torch.nn.Linear(4, 8))\n")
    out = tmp_path / "tiny.svg"
    assert main([f"{model}:make", "-s", "1,4", "-o", str(out), "--embed-font"]) == 0
    assert "@font-face" in out.read_text()


_WIDTHS = "() => Array.from(document.querySelectorAll('text')).map(t => Math.round(t.getBBox().width * 10))"


def _widths(svg: str, fonts: dict[str, str]) -> list[int]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, env={**os.environ, **fonts})
        try:
            page = browser.new_page()
            page.set_content(svg)
            page.evaluate("document.fonts.ready.then(() => true)")
            return list(page.evaluate(_WIDTHS))
        finally:
            browser.close()


@needs_chromium
def test_a_reader_without_the_font_sees_the_text_as_wide_as_laid_out(tmp_path: Path, dejavu: None) -> None:
    """Laid out with DejaVu; shown in a browser that has DejaVu and in one that has only
    Liberation: the same widths with the font embedded (not without it)."""
    pytest.importorskip("fontTools")
    try:
        liberation = font_env("liberation", tmp_path / "lib")
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    dejavu_fonts = {"FONTCONFIG_FILE": os.environ["FONTCONFIG_FILE"]}
    plain = _draw(tmp_path, embed_font=False)
    embedded = _draw(tmp_path, embed_font=True)
    assert _widths(plain, dejavu_fonts) != _widths(plain, liberation)
    assert _widths(embedded, liberation) == _widths(embedded, dejavu_fonts) == _widths(plain, dejavu_fonts)
