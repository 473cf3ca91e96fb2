"""The Sphinx directive: a throwaway Sphinx project that draws models at build time."""

from __future__ import annotations

import io
import re
import textwrap
from pathlib import Path

import pytest

import torchrecorder

from .backends import needs_backend

sphinx_application = pytest.importorskip("sphinx.application")
docutils_namespace = pytest.importorskip("sphinx.util.docutils").docutils_namespace

pytestmark = needs_backend

MODELS = '''
import torch


class TwoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 4)
        self.b = torch.nn.Linear(5, 4)

    def forward(self, x, y):
        return self.a(x) + self.b(y)


def lm():
    return torch.nn.Sequential(torch.nn.Embedding(40, 8), torch.nn.Linear(8, 40))


def broken():
    raise RuntimeError("no weights here")


def not_a_module():
    return 42


def lazy():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.LazyLinear(8), torch.nn.ReLU(), torch.nn.LazyLinear(3))
'''


def build(tmp_path: Path, pages: dict[str, str], extensions: tuple[str, ...] = ()) -> tuple[Path, str]:
    """Build ``pages`` (name -> text) with the directive; return the output folder and the warnings."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "dirmodels.py").write_text(MODELS)
    (src / "conf.py").write_text(textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        extensions = ["torchrecorder.sphinxext", *{list(extensions)!r}]
        """))
    for name, text in pages.items():
        (src / name).write_text(textwrap.dedent(text))
    out = tmp_path / "out"
    warnings = io.StringIO()
    # docutils keeps registered nodes and directives process-wide: a fresh namespace per build
    with docutils_namespace():
        app = sphinx_application.Sphinx(str(src), str(src), str(out), str(tmp_path / "doctrees"), "html",
                                         status=None, warning=warnings, freshenv=True)
        app.build()
    return out, re.sub(r"\x1b\[[0-9;]*m", "", warnings.getvalue())


def test_directive_draws_the_model_into_the_page(tmp_path: Path) -> None:
    out, warnings = build(tmp_path, {"index.rst": """
        Models
        ======

        .. torchrecorder:: dirmodels:TwoInputs
           :input-shape: 1,3
           :input-shape: 1,5
           :depth: 1
           :preset: paper
           :caption: Two *inputs*.
           :alt: a network with two inputs

        .. torchrecorder:: dirmodels:lm
           :input-shape: 2,6
           :input-dtype: int64
           :format: png
           :direction: LR
        """})
    assert warnings == ""
    page = (out / "index.html").read_text()
    svgs = sorted((out / "_images").glob("torchrecorder-*.svg"))
    pngs = sorted((out / "_images").glob("torchrecorder-*.png"))
    assert len(svgs) == 1 and len(pngs) == 1
    assert f'src="_images/{svgs[0].name}"' in page and f'src="_images/{pngs[0].name}"' in page
    assert 'alt="a network with two inputs"' in page
    assert re.search(r"<figcaption>\s*<p><span class=\"caption-text\">Two <em>inputs</em>", page)
    svg = svgs[0].read_text()
    assert "input@b" in svg or "1×5" in svg  # both inputs were given
    assert pngs[0].read_bytes().startswith(b"\x89PNG")


def test_a_failing_factory_is_a_warning_with_file_and_line(tmp_path: Path) -> None:
    out, warnings = build(tmp_path, {"index.rst": """
        Models
        ======

        .. torchrecorder:: dirmodels:broken
           :input-shape: 1,3

        .. torchrecorder:: dirmodels:not_a_module
           :input-shape: 1,3

        .. torchrecorder:: nosuchmodule:Net
           :input-shape: 1,3

        .. torchrecorder:: dirmodels:TwoInputs
           :input-shape: 1,3
           :input-shape: 1,6

        .. torchrecorder:: dirmodels:lm
           :depth: 1

        .. torchrecorder:: dirmodels:lm
           :input-shape: 1,3
           :colour: red

        After the figures.
        """})
    lines = [line for line in warnings.splitlines() if "WARNING" in line]
    assert len(lines) == 6, warnings
    for lineno, line in zip((5, 8, 11, 14, 18, 21), lines, strict=True):
        assert f"index.rst:{lineno}: WARNING: torchrecorder: cannot draw" in line, line
    assert "RuntimeError: no weights here" in lines[0]
    assert "gave int 42, not a torch.nn.Module" in lines[1]
    assert "cannot import 'nosuchmodule'" in lines[2]
    assert "shapes cannot be multiplied" in lines[3] and "'b' (Linear)" in lines[3]
    assert ":input-shape: option is required" in lines[4]
    assert "unknown option :colour:" in lines[5]
    page = (out / "index.html").read_text()
    assert "After the figures." in page and "torchrecorder-" not in page


def test_html_format_embeds_the_interactive_view_or_warns(tmp_path: Path) -> None:
    out, warnings = build(tmp_path, {"index.rst": """
        Models
        ======

        .. torchrecorder:: dirmodels:lm
           :input-shape: 1,4
           :input-dtype: int64
           :format: html
        """})
    page = (out / "index.html").read_text()
    if hasattr(torchrecorder, "make_html"):
        assert warnings == "" and "torchrecorder-view" in page and "<iframe" in page
    else:
        assert "needs torchrecorder.make_html" in warnings and "torchrecorder-view" not in page


def test_directive_in_a_myst_page_with_a_py_path(tmp_path: Path) -> None:
    pytest.importorskip("myst_parser")
    out, warnings = build(tmp_path, {"index.md": """
        # Models

        ```{torchrecorder} dirmodels.py:TwoInputs
        :input-shape: 1,3
        :input-shape: 1,5
        :depth: 2
        ```
        """}, extensions=("myst_parser",))
    assert warnings == ""
    assert len(list((out / "_images").glob("torchrecorder-*.svg"))) == 1
    assert "torchrecorder-figure" in (out / "index.html").read_text()


def test_a_factory_with_lazy_modules_is_run_once_before_it_is_drawn(tmp_path: Path) -> None:
    out, warnings = build(tmp_path, {"index.rst": """
        Lazy
        ====

        .. torchrecorder:: dirmodels:lazy
           :input-shape: 2,5
           :depth: 1
        """})
    assert warnings == ""
    svgs = sorted((out / "_images").glob("torchrecorder-*.svg"))
    assert len(svgs) == 1
    svg = svgs[0].read_text()
    # both LazyLinears ran (they became Linear) and were drawn with the shapes this input gave them
    assert svg.count("Linear") >= 2 and "2×8" in svg and "2×3" in svg and "Lazy" not in svg
