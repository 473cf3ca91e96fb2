"""The sphinx-gallery scraper, through sphinx-gallery's own ``save_figures`` and config resolution."""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path

import pytest
import torch

import torchrecorder
from torchrecorder.scraper import Scraper, get_scraper

from .backends import needs_backend
from .sg_run import Example

pytestmark = needs_backend

SETUP = """
import torch
import torchrecorder
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
"""


def _image_targets(rst: str) -> list[str]:
    return re.findall(r"\.\. image-sg:: (\S+)", rst)


def test_package_gives_the_scraper_sphinx_gallery_asks_for() -> None:
    """``'image_scrapers': ('torchrecorder',)``: sphinx-gallery imports the package and calls
    ``_get_sg_image_scraper()``; the same (shared) scraper each time it resolves the name."""
    from sphinx_gallery.gen_gallery import _fill_gallery_conf_defaults
    from sphinx_gallery.gen_rst import _get_callables

    conf = _fill_gallery_conf_defaults({"image_scrapers": ("torchrecorder",)})
    (first,) = _get_callables(conf, "image_scrapers")
    (second,) = _get_callables(conf, "image_scrapers")
    assert isinstance(first, Scraper) and first is second is torchrecorder._get_sg_image_scraper()
    assert pickle.loads(pickle.dumps(first)) == first  # Sphinx caches its configuration


def test_a_recording_made_in_a_block_is_drawn_as_svg_with_a_png_thumbnail(tmp_path: Path) -> None:
    ex = Example(tmp_path, "rec")
    rst = ex.run(SETUP + "rec = torchrecorder.record(net, 'mlp', (1, 4))\n")
    assert ex.images("svg") == ["sphx_glr_rec_001.svg"] and ex.images("png") == ["sphx_glr_rec_001.png"]
    assert _image_targets(rst) == ["/auto_examples/images/sphx_glr_rec_001.svg"]
    svg = (tmp_path / "auto_examples" / "images" / "sphx_glr_rec_001.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "mlp" in svg
    png = (tmp_path / "auto_examples" / "images" / "sphx_glr_rec_001.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    assert "the graph of mlp" in rst


def test_a_digraph_replaces_the_recording_it_was_drawn_from(tmp_path: Path) -> None:
    ex = Example(tmp_path, "dot")
    rst = ex.run(SETUP + "rec = torchrecorder.record(net, 'mlp', (1, 4))\n"
                          "dot = torchrecorder.make_dot(rec, render_depth=2, preset='paper')\n")
    assert len(_image_targets(rst)) == 1
    svg = (tmp_path / "auto_examples" / "images" / "sphx_glr_dot_001.svg").read_text()
    assert "Times" in svg or "serif" in svg  # the Digraph's own style, not a fresh depth-1 drawing


def test_blocks_draw_only_what_is_new_and_what_they_display(tmp_path: Path) -> None:
    ex = Example(tmp_path, "blocks")
    ex.run(SETUP + "rec = torchrecorder.record(net, 'mlp', (1, 4))\n")
    assert _image_targets(ex.run("x = 1\n")) == []  # nothing new: nothing drawn again
    shown = ex.run("torchrecorder.make_dot(rec, render_depth=1)\n")  # the last expression
    assert len(_image_targets(shown)) == 1
    assert _image_targets(ex.run("y = 2\n")) == []  # ___ is still bound, but not displayed here
    again = ex.run("rec\n")  # displaying an old recording draws it again
    assert len(_image_targets(again)) == 1
    two = ex.run("dots = [torchrecorder.make_dot(rec, d) for d in (1, 2)]\n")  # in a list
    assert len(_image_targets(two)) == 2
    assert ex.images("svg") == [f"sphx_glr_blocks_{i:03}.svg" for i in range(1, 6)]
    assert ex.images("png") == ["sphx_glr_blocks_001.png"]  # the thumbnail (number 1) only


def test_files_a_block_wrote_are_embedded(tmp_path: Path) -> None:
    ex = Example(tmp_path, "files")
    out = tmp_path / "out"
    rst = ex.run(SETUP + f"out = {str(out)!r}\n"
                          "p = torchrecorder.render_network(net, 'mlp', (1, 4), out)\n"
                          "q = torchrecorder.render_network(net, 'mlp2', (1, 4), out, fmt='png')\n"
                          "j = torchrecorder.render_network(net, 'mlp3', (1, 4), out, fmt='json')\n")
    assert [Path(t).name for t in _image_targets(rst)] == ["sphx_glr_files_001.svg", "sphx_glr_files_002.png"]
    images = tmp_path / "auto_examples" / "images"
    assert (images / "sphx_glr_files_001.svg").read_bytes() == (out / "mlp-1.svg").read_bytes()
    assert (images / "sphx_glr_files_002.png").read_bytes() == (out / "mlp2-1.png").read_bytes()
    assert _image_targets(ex.run("z = 0\n")) == []  # written once, embedded once


def test_an_svg_file_a_block_wrote_gets_a_thumbnail_without_an_svg_rasterizer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The thumbnail of a written SVG is drawn from the DOT source torchrecorder wrote it from
    (no rsvg-convert needed): on a machine without one, the gallery kept its default picture."""
    import shutil

    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "rsvg-convert"
                        else real_which(name, *a, **k))
    ex = Example(tmp_path, "thumb")
    out = tmp_path / "out"
    ex.run(SETUP + f"out = {str(out)!r}\n"
                   "p = torchrecorder.render_network(net, 'mlp', (1, 4), out)\n")
    png = (tmp_path / "auto_examples" / "images" / "sphx_glr_thumb_001.png").read_bytes()
    assert png.startswith(b"\x89PNG")


def test_the_dot_source_of_a_written_picture_is_remembered_until_the_file_is_rewritten(
        tmp_path: Path) -> None:
    from torchrecorder._files import dot_source_of, write_atomically

    net = torch.nn.Sequential(torch.nn.Linear(4, 2))
    path = torchrecorder.render_network(net, "tiny", (1, 4), tmp_path)
    source = dot_source_of(path)
    assert source is not None and source.startswith("digraph") and "tiny" in source
    assert dot_source_of(os.path.relpath(path)) == source  # any spelling of the path
    write_atomically(path, b"<svg/>")  # written again, not from DOT: forgotten
    assert dot_source_of(path) is None
    json_path = torchrecorder.render_network(net, "tiny", (1, 4), tmp_path, fmt="json")
    assert dot_source_of(json_path) is None
    for i in range(40):  # only the latest few are kept
        torchrecorder.render_network(net, f"n{i}", (1, 4), tmp_path, fmt="dot")
    assert dot_source_of(tmp_path / "n0-1.dot") is None and dot_source_of(tmp_path / "n39-1.dot")


def test_a_changed_digraph_is_drawn_again(tmp_path: Path) -> None:
    ex = Example(tmp_path, "changed")
    ex.run(SETUP + "dot = torchrecorder.make_dot(torchrecorder.record(net, 'mlp', (1, 4)))\n")
    assert len(_image_targets(ex.run("dot.attr(label='changed')\n"))) == 1


class PageView:
    """A stand-in for the interactive view (the protocol: ``_repr_html_`` on a marked class),
    built from torchrecorder's own notebook HTML of a real drawing."""

    _torchrecorder_view_ = True

    def __init__(self, rec: torchrecorder.Recorder) -> None:
        from torchrecorder.renderer.notebook import html_of, svg_of

        svg = svg_of(torchrecorder.make_dot(rec).source)
        assert svg is not None
        self.html = html_of(svg)

    def _repr_html_(self) -> str:
        return self.html


def test_an_interactive_view_a_block_made_is_embedded_as_html(tmp_path: Path) -> None:
    ex = Example(tmp_path, "view")
    ex.globals["PageView"] = PageView
    rst = ex.run(SETUP + "rec = torchrecorder.record(net, 'mlp', (1, 4))\npage = PageView(rec)\n")
    assert ".. raw:: html" in rst and "torchrecorder-view" in rst and "<svg" in rst
    # the recording is drawn too (a view is no static figure: the gallery's thumbnail)
    assert len(_image_targets(rst)) == 1
    # a view shown as the last expression is left to sphinx-gallery's capture_repr
    shown = ex.run("PageView(rec)\n")
    assert ".. raw:: html" not in shown


def test_a_view_on_the_last_line_is_shown_under_the_documented_configuration(tmp_path: Path) -> None:
    """With the configuration the docs give (``ignore_repr_types`` matching torchrecorder's
    types) sphinx-gallery does not show ``rec.show()`` ending a block: the scraper embeds it,
    once; where sphinx-gallery shows its ``_repr_html_`` itself, the scraper does not."""
    ex = Example(tmp_path, "shown")
    ex.conf["ignore_repr_types"] = r"graphviz\.|torchrecorder\."
    ex.run(SETUP + "rec = torchrecorder.record(net, 'mlp', (1, 4))\n")
    rst = ex.run("rec.show()\n")
    assert rst.count(".. raw:: html") == 1 and "tr-data" in rst
    plain = Example(tmp_path / "plain", "plain")  # sphinx-gallery's defaults: it shows the view
    plain.run(SETUP + "rec = torchrecorder.record(net, 'mlp', (1, 4))\n")
    assert ".. raw:: html" not in plain.run("rec.show()\n")
    # a block that asks for the text repr: the view is not shown by sphinx-gallery, so here
    asked = plain.run("# sphinx_gallery_capture_repr_block = ('__repr__',)\nrec.show()\n")
    assert asked.count(".. raw:: html") == 1


def test_an_html_file_a_block_wrote_is_embedded_in_an_iframe(tmp_path: Path) -> None:
    from torchrecorder._files import write_atomically

    ex = Example(tmp_path, "page")
    target = tmp_path / "view.html"
    ex.globals["write_atomically"] = write_atomically
    rst = ex.run(f"write_atomically({str(target)!r}, '<!DOCTYPE html><p>\"x\" & y</p>')\n")
    assert "<iframe srcdoc=\"&lt;!DOCTYPE html&gt;&lt;p&gt;&quot;x&quot; &amp; y&lt;/p&gt;\"" in rst
    assert _image_targets(rst) == []


def test_objects_that_are_not_figures_are_left_alone(tmp_path: Path) -> None:
    ex = Example(tmp_path, "none")
    rst = ex.run("import torch\nt = torch.zeros(3)\nd = {'a': 1}\n"
                 "class Html:\n    def _repr_html_(self): return '<b>x</b>'\nh = Html()\n")
    assert rst == "" and ex.images() == []


def test_scraper_options_are_checked() -> None:
    with pytest.raises(ValueError, match="render_depth"):
        Scraper(render_depth=-1)
    assert get_scraper().render_depth == 1


def test_files_written_between_examples_are_not_the_next_examples(tmp_path: Path) -> None:
    """A file written outside any block (here: before the example starts, after another one ran)
    is not taken for the next example's first block once reset_scraper ran before it."""
    from torchrecorder._files import write_atomically

    Example(tmp_path / "a", "first").run("x = 1\n")
    write_atomically(tmp_path / "stray.svg", "<svg xmlns='http://www.w3.org/2000/svg'/>")
    ex = Example(tmp_path / "b", "second")  # runs sphinx-gallery's reset_modules first
    assert _image_targets(ex.run("y = 2\n")) == []


def test_a_graphviz_source_of_dot_text_is_drawn(tmp_path: Path) -> None:
    ex = Example(tmp_path, "source")
    rst = ex.run(SETUP + "import graphviz\n"
                          "text = torchrecorder.make_dot(torchrecorder.record(net, 'mlp', (1, 4))).source\n"
                          "src = graphviz.Source(text)\n")
    assert len(_image_targets(rst)) == 1  # the Source (the recording was made inside the call)
