"""Figures that hold with whatever fonts a machine has: drawn by ``dot`` and shown in Chromium
with DejaVu alone (a fresh Debian machine, a container) and with the machine's fonts (CI adds
Liberation), every text run stays inside its shape, stacked lines stay a font's height apart,
no edge crosses any text (titles included) and edge labels keep off the nodes."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

import torchrecorder
from torchrecorder.backend import render_source

from .backends import needs_dot
from .browser import CHROMIUM, CHROMIUM_ARGS, needs_chromium
from .figure_checks import FONT_SETS, figure_problems, font_env
from .zoo.session import Zoo

pytestmark = [needs_dot, needs_chromium]

#: GPT-2, BERT, a ViT (transformers, tiny configurations) and a CNN
MODELS = ("hf-gpt2", "hf-bert", "hf-vit", "ResidualCNN")


@pytest.fixture(scope="module", params=FONT_SETS)
def fonts(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    """(font set, a Chromium page seeing only those fonts); ``dot`` sees the same ones."""
    from playwright.sync_api import sync_playwright

    env = font_env(request.param, tmp_path_factory.mktemp(f"fonts-{request.param}"))
    patch = pytest.MonkeyPatch()
    for key, value in env.items():
        patch.setenv(key, value)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, env=dict(os.environ))
            try:
                page = browser.new_page()
                page.tr_browser = browser  # the HTML view's tests open tabs of their own
                yield request.param, page
            finally:
                browser.close()
    finally:
        patch.undo()


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("preset", ["default", "compact", "paper"])
def test_text_stays_in_its_box_and_clear_of_edges(zoo: Zoo, fonts: tuple[str, Any], name: str,
                                                   preset: str) -> None:
    font_set, page = fonts
    rec = zoo.recorded(name).rec
    for depth in (1, 2):
        svg = render_source(torchrecorder.make_dot(rec, depth, preset=preset).source, "svg")
        page.set_content(svg.decode())
        assert figure_problems(page) == [], (font_set, name, preset, depth)


def test_the_checks_see_a_title_crossed_and_lines_overlapping(fonts: tuple[str, Any]) -> None:
    """The geometry checks find what they look for: lines set closer than the font's height
    (``<BR/>`` in Graphviz) and an edge through a cluster's own label."""
    _, page = fonts
    source = ('digraph { subgraph cluster_a { label=<<B>a very long title of the cluster</B>> '
              'labeljust=l b [shape=box label=<<B>layer_name</B><BR/>type_of_layer>] } '
              'x -> b }')
    page.set_content(render_source(source, "svg").decode())
    problems = figure_problems(page)
    assert any("crosses text \"a very long title" in p for p in problems), problems
    assert any('"layer_name" touches "type_of_layer"' in p for p in problems), problems


def test_outputs_left_to_right_in_the_models_order(zoo: Zoo) -> None:
    rec = zoo.recorded("hf-bert").rec
    svg = render_source(torchrecorder.make_dot(rec, 1).source, "svg").decode()
    xs = {m.group(2): float(m.group(1)) for m in re.finditer(
        r'<text [^>]*\bx="([-\d.]+)"[^>]*>(output\.\w+)</text>', svg)}
    assert xs["output.last_hidden_state"] < xs["output.pooler_output"], xs


def test_render_depth_none_draws_everything(zoo: Zoo) -> None:
    rec = zoo.recorded("hf-bert").rec
    assert torchrecorder.make_dot(rec, None).source == torchrecorder.make_dot(rec, 1 << 20).source
    assert torchrecorder.make_dot(rec, None).source != torchrecorder.make_dot(rec, 2).source


def test_pdf_has_no_margin_unless_asked(tmp_path: Any) -> None:
    from torch import nn

    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
    rec = torchrecorder.record(net, "mlp", (1, 4))
    svg = render_source(torchrecorder.make_dot(rec, 1).source, "svg").decode()
    width = float(re.search(r'<svg width="([\d.]+)pt"', svg).group(1))  # type: ignore[union-attr]

    def media_width(**kw: Any) -> float:
        pdf = render_source(torchrecorder.make_dot(rec, 1, **kw).source, "pdf")
        box = re.search(rb"/MediaBox \[ *([\d.]+) +([\d.]+) +([\d.]+)", pdf)
        assert box is not None
        return float(box.group(3)) - float(box.group(1))

    assert abs(media_width() - width) <= 1.5  # Graphviz's 4-point pad only
    assert abs(media_width(margin=0.5) - (width + 72)) <= 1.5
    with pytest.raises(ValueError, match="margin"):
        torchrecorder.make_dot(rec, 1, margin=-1)


def test_command_line_depth_all_and_token_hint(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from torchrecorder.__main__ import main

    model = tmp_path / "tok.py"
    model.write_text("import torch\ndef make():\n"
                     "    return torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 2))\n")
    assert main([f"{model}:make", "-s", "1,5", "-o", str(tmp_path / "t.svg")]) == 1
    assert "add --input-dtype int64" in capsys.readouterr().err
    out = tmp_path / "t.dot"
    assert main([f"{model}:make", "-s", "1,5", "--input-dtype", "int64", "-d", "all", "-o", str(out)]) == 0
    assert "cluster_make" in out.read_text()


def _view(browser_page: Any, path: Any) -> Any:
    """``path`` (an HTML view) opened in a new tab of ``browser_page``'s browser, laid out,
    its fonts loaded."""
    from .browser import wait_layouts

    page = browser_page.tr_browser.new_page(viewport={"width": 1000, "height": 700})
    page.goto(path.as_uri())
    wait_layouts(page, 0)
    page.evaluate("document.fonts.ready.then(() => true)")
    return page


@pytest.mark.parametrize("name", MODELS)
def test_html_view_text_in_boxes_titles_clear_and_fitted(zoo: Zoo, fonts: tuple[str, Any],
                                                         name: str, tmp_path: Any) -> None:
    font_set, tab = fonts
    rec = zoo.recorded(name).rec
    for depth in (1, 2):
        path = tmp_path / f"{depth}.html"
        torchrecorder.make_html(rec, depth).save(path)
        page = _view(tab, path)
        try:
            assert figure_problems(page, "#tr-canvas svg") == [], (font_set, name, depth)
            # the drawing drawn with the page's own fonts, which it carries
            families = set(page.eval_on_selector_all(
                "#tr-canvas text", "ts => ts.map(t => t.getAttribute('font-family'))"))
            assert families <= {"Arimo", "Tinos"}, families
            assert page.evaluate("document.fonts.check('11px Arimo') "
                                 "&& document.fonts.check('bold 11px Arimo')")
            # fitted: inside the window, and filling its width or height (or twice its own size)
            view = page.eval_on_selector("#tr-view", "e => { const r = e.getBoundingClientRect(); "
                                         "return [r.left, r.top, r.right, r.bottom]; }")
            box = page.eval_on_selector("#tr-canvas svg", "e => { const r = e.getBoundingClientRect(); "
                                        "return [r.left, r.top, r.right, r.bottom]; }")
            assert view[0] - 0.5 <= box[0] and box[2] <= view[2] + 0.5, (view, box)
            assert view[1] - 0.5 <= box[1] and box[3] <= view[3] + 0.5, (view, box)
            filled = max((box[2] - box[0]) / (view[2] - view[0]), (box[3] - box[1]) / (view[3] - view[1]))
            assert filled > 0.9 or page.evaluate("__tr.scale") >= 2 - 1e-6, (filled, name, depth)
        finally:
            page.close()


def _examples() -> Any:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    try:
        from figure_models import MODELS as EXAMPLES
    finally:
        sys.path.pop(0)
    return EXAMPLES


def _points(svg: bytes) -> tuple[float, float]:
    found = re.search(rb'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg)
    assert found is not None
    return float(found.group(1)), float(found.group(2))


def test_the_readmes_paper_recipe_fits_a_column_with_text_of_6pt(fonts: tuple[str, Any]) -> None:
    import warnings

    from torchrecorder.renderer.paper import printed_text_size

    font_set, page = fonts
    net, args = _examples()["gpt2"]()
    rec = torchrecorder.record(net, "gpt2", input_data=args)
    for depth in (1, 2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no warning: it fits
            source = torchrecorder.make_dot(rec, depth, preset="paper", direction="LR", size="3.5,9").source
        svg = render_source(source, "svg")
        width, height = _points(svg)
        assert width <= 3.5 * 72 + 0.5 and height <= 9 * 72 + 0.5, (width, height)
        assert printed_text_size(svg) >= 6.0, (depth, printed_text_size(svg))
        page.set_content(svg.decode())
        assert figure_problems(page) == [], (font_set, depth)


def test_paper_warns_when_no_drawing_fits(zoo: Zoo) -> None:
    rec = zoo.recorded("hf-bert").rec
    with pytest.warns(UserWarning, match=r"prints at \d+\.\d pt \(under 6\)"):
        torchrecorder.make_dot(rec, 2, preset="paper", size="1,1")
    # with room enough the drawing is the one without size=, but for the size
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        roomy = torchrecorder.make_dot(rec, 2, preset="paper", size="30,30").source
    assert roomy.replace(' size="30,30"', "") == torchrecorder.make_dot(rec, 2, preset="paper").source


def test_compact_is_a_quarter_smaller_than_default_with_text_of_6pt() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=30, n_embd=32, n_head=4, vocab_size=500, n_positions=64,
                        bos_token_id=0, eos_token_id=0)
    net = GPT2LMHeadModel(config).eval()
    rec = torchrecorder.record(net, "gpt2", input_data=(torch_tokens(500),))
    areas = {}
    for preset in ("default", "compact"):
        svg = render_source(torchrecorder.make_dot(rec, 2, preset=preset, fold_repeats=False).source, "svg")
        width, height = _points(svg)
        areas[preset] = width * height
        assert min(float(s) for s in re.findall(rb'font-size="([\d.]+)"', svg)) >= 6.0, preset
    assert areas["compact"] <= 0.75 * areas["default"], areas


def torch_tokens(vocab: int) -> Any:
    import torch

    return torch.randint(0, vocab, (1, 8), generator=torch.Generator().manual_seed(0))
