"""The figures and numbers the documentation quotes are what the code draws now: a figure of
``docs/figures.md`` redrawn (with DejaVu alone, as ``examples/compare_figures.py`` draws them)
has the size its table and its checked-in SVG say.  ``python examples/compare_figures.py
--check`` (run by CI) checks every figure of the page and the README's ratios."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import torchrecorder

from .backends import needs_dot
from .figure_checks import font_env

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compare_figures():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import compare_figures as module
    finally:
        sys.path.pop(0)
    return module


@needs_dot
@pytest.mark.parametrize("name", ["cnn", "transformer_encoder"])
def test_documented_sizes_are_what_the_code_draws(compare_figures, name: str, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    page = (ROOT / "docs" / "figures.md").read_text(encoding="utf-8")
    made_with = re.search(r"with Graphviz\s+(\S+)\s", page)
    assert made_with is not None, "docs/figures.md names no Graphviz version"
    if made_with.group(1) != compare_figures.graphviz_version():
        pytest.skip(f"docs/figures.md was drawn with Graphviz {made_with.group(1)}")
    for key, value in font_env("dejavu", tmp_path / "fonts").items():
        monkeypatch.setenv(key, value)
    net, args = compare_figures.MODELS[name]()
    for depth in compare_figures.DEPTHS:
        path = torchrecorder.render_network(net, name, None, str(tmp_path), filename=f"{name}_d{depth}",
                                            input_data=args, render_depth=depth)
        w, h = compare_figures.svg_size(path)
        row = f"| {compare_figures.TITLES[name]} | {depth} | {w:.0f}×{h:.0f} pt"
        assert row in page, f"docs/figures.md is stale: it has no row {row!r}"
        assert compare_figures.svg_size(str(ROOT / "docs" / "images" / "figures" / f"{name}_d{depth}.svg")) \
            == (w, h), f"docs/images/figures/{name}_d{depth}.svg is stale"


def test_every_documentation_svg_carries_its_font() -> None:
    """Made with ``embed_font=True`` (``tools/docs_images.py``, ``examples/compare_figures.py``):
    each names an embedded family first wherever it draws text."""
    svgs = sorted((ROOT / "docs" / "images").rglob("*.svg"))
    assert len(svgs) > 10
    for path in svgs:
        text = path.read_text(encoding="utf-8")
        faces = set(re.findall(r'@font-face \{ font-family: "([^"]+)"', text))
        assert faces, f"{path.name} embeds no font"
        families = re.findall(r'font-family="([^",]*)', text)
        assert families and set(families) <= faces, (path.name, set(families) - faces)
