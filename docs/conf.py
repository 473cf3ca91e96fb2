"""Sphinx configuration of torchrecorder's documentation.

Build: ``pip install torch==2.13.0 -e '.[docs]' && sphinx-build -W --keep-going docs docs/_build/html``.
Every figure is drawn by torchrecorder during the build: the gallery's examples run and
the package's sphinx-gallery scraper embeds what they draw; the user guide's figures come
from the ``torchrecorder`` directive (torchrecorder.sphinxext) and the models in
``docs/_models.py``.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)  # this checkout's torchrecorder, whatever else is installed
sys.path.insert(0, HERE)  # docs/_models.py, for the directive

import torchrecorder  # noqa: E402

project = "torchrecorder"
author = "the torchrecorder authors"
copyright = "the torchrecorder authors, MIT licence"
version = release = torchrecorder.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "torchrecorder.sphinxext",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip",
                    "auto_examples/*.json", "auto_examples/*.md5", "images/README*"]
myst_enable_extensions = ["html_image", "colon_fence"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"torchrecorder {release}"
html_static_path: list[str] = []

autodoc_member_order = "bysource"
autodoc_default_options = {"show-inheritance": True}
autodoc_typehints = "description"
autosummary_generate = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False

intersphinx_mapping: dict[str, tuple[str, None]] = {}  # no network during the build

# the gallery: run every example, embed what torchrecorder drew; the interactive view's example
# runs where torchrecorder.make_html exists
_HAS_HTML = hasattr(torchrecorder, "make_html")

sphinx_gallery_conf = {
    "examples_dirs": os.path.join(ROOT, "gallery"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py" if _HAS_HTML else r"plot_13_interactive_html\.py",
    "image_scrapers": ("torchrecorder",),
    "ignore_repr_types": r"graphviz\.|torchrecorder\.",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "show_memory": False,
    "abort_on_example_error": True,
    "reset_modules": ("torchrecorder.scraper.reset_scraper",),
}
