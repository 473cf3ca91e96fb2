"""Every gallery script runs, block by block as the docs build runs it, and the torchrecorder
scraper collects its figures through sphinx-gallery's own ``save_figures``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import torchrecorder

from .backends import needs_backend
from .sg_run import run_script

GALLERY = Path(__file__).resolve().parent.parent / "gallery"
SCRIPTS = sorted(GALLERY.glob("plot_*.py"))

#: figures each script draws (some blocks draw several; a block may draw none)
FIGURES = {
    "plot_01_mlp": 2, "plot_02_cnn_batchnorm": 3, "plot_03_resnet_stage": 3, "plot_04_unet": 1,
    "plot_05_lstm_tagger": 2, "plot_06_transformer_encoder": 1, "plot_07_transformers_config": 1,
    "plot_08_dict_io": 1, "plot_09_llama70b_meta": 2, "plot_10_custom_styler": 1,
    "plot_11_custom_renderer": 1, "plot_12_activations": 1, "plot_13_interactive_html": 1,
    "plot_14_attention_maps": 2, "plot_15_gradient_norms": 4, "plot_16_backward_graph": 3,
    "plot_17_cost": 2,
    "plot_20_diff_lora": 2, "plot_21_diff_edits": 3,
}


def test_the_gallery_has_a_script_per_kind_of_network() -> None:
    assert len(SCRIPTS) >= 12
    assert {p.stem for p in SCRIPTS} == set(FIGURES)
    for path in SCRIPTS:
        text = path.read_text()
        assert text.startswith('"""\n') and "=====" in text.split('"""')[1], path.name  # a titled docstring
        assert "torchrecorder" in text


@needs_backend
@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_gallery_script_runs_and_its_figures_are_scraped(script: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    if script.stem == "plot_13_interactive_html" and not hasattr(torchrecorder, "make_html"):
        pytest.skip("torchrecorder.make_html (the interactive view) is not in this version")
    for module in ("transformers", "matplotlib", "torchviz"):
        if f"import {module}" in script.read_text() or f"from {module}" in script.read_text():
            pytest.importorskip(module)
    monkeypatch.chdir(script.parent)  # sphinx-gallery runs an example in its folder
    example = run_script(script, tmp_path)
    rst = "".join(example.rst)
    images = re.findall(r"\.\. image-sg:: (\S+)", rst)
    assert len(images) == FIGURES[script.stem], rst
    for target in images:
        svg = (tmp_path / target.lstrip("/")).read_text()
        assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    number = re.search(r"sphinx_gallery_thumbnail_number = (\d+)", script.read_text())
    first = int(number[1]) if number else 1
    thumb = tmp_path / "auto_examples" / "images" / f"sphx_glr_{script.stem}_{first:03d}.png"
    assert thumb.read_bytes().startswith(b"\x89PNG")
    if script.stem == "plot_13_interactive_html":
        assert ".. raw:: html" in rst
