"""A sphinx-gallery image scraper: gallery examples that draw with torchrecorder get their figures.

In a Sphinx project's ``conf.py``::

    sphinx_gallery_conf = {
        "examples_dirs": "../gallery",
        "gallery_dirs": "auto_examples",
        "image_scrapers": ("torchrecorder",),       # or ("matplotlib", "torchrecorder")
        "ignore_repr_types": r"graphviz\\.|torchrecorder\\.",  # the figure replaces the repr
    }

sphinx-gallery imports :mod:`torchrecorder` and calls its
``_get_sg_image_scraper()``, which returns a :class:`Scraper`; after every code
block of an example the scraper collects what the block drew:

* **objects the block made**: every :class:`~torchrecorder.recorder.Recorder`
  (any :class:`~torchrecorder.graph.Graph`), :class:`graphviz.Digraph` (from
  :func:`~torchrecorder.make_dot`; also ``graphviz.Graph`` and ``graphviz.Source``) and
  interactive view (below) bound to a
  global name, or held in a list, tuple or dict bound to one, that is new or
  changed since the previous block.  A recording is drawn at
  ``render_depth=1`` (:attr:`Scraper.render_depth`), but only where the block
  made no other figure: ``rec = record(...); dot = make_dot(rec, 2)`` gives the
  one figure of ``dot``;
* **matplotlib figures made without pyplot** (what ``Capture.plot`` returns), bound to a
  global name like the objects above (pyplot's own figures are left to sphinx-gallery's
  ``"matplotlib"`` scraper);
* **the object the block displayed**: the value of its last line when that is
  an expression (``make_dot(rec, 3)`` or ``rec``), as a notebook would show it;
* **files the block wrote** through torchrecorder (``render_network``,
  ``rec.to_json(path)``, the command line run in-process): SVG, PNG, JPEG, GIF
  and WebP pictures are embedded, HTML pages are embedded as interactive views.

Each figure is written as SVG at the path sphinx-gallery's
``image_path_iterator`` gives (with the ``.svg`` suffix), the example's
thumbnail figure (``sphinx_gallery_thumbnail_number``, default 1) also as a
PNG beside it for the gallery's thumbnail, and the reST that
:func:`sphinx_gallery.scrapers.figure_rst` makes for it is returned.

**Interactive views** are embedded where the example asks for one: an object
with a ``_repr_html_()`` method whose class belongs to torchrecorder (the page
that :func:`torchrecorder.make_html` returns) or sets ``_torchrecorder_view_ =
True``, made by the block, or an HTML file the block wrote.  Its HTML goes into
the page in a ``.. raw:: html`` block, as sphinx-gallery embeds a displayed
object's ``_repr_html_``.  A view that is the block's last expression is left to
sphinx-gallery's own ``capture_repr`` where that shows it (not embedded twice), and
embedded here where it does not: with the documented ``ignore_repr_types``, which
matches torchrecorder's types, or a ``capture_repr`` that asks for text first.
"""

from __future__ import annotations

import ast
import html
import os
import re
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from typing import Any, Optional

import graphviz

from ._files import dot_source_of, files_written_after
from .backend import render_source
from .graph import Graph
from .projection.budget import default_depth
from .renderer.graphviz import GraphvizRenderer

__all__ = ["Scraper", "get_scraper", "reset_scraper"]

#: picture files a block wrote that are embedded as they are
IMAGE_EXTENSIONS = ("svg", "png", "jpg", "jpeg", "gif", "webp")
#: page files a block wrote that are embedded as interactive views
HTML_EXTENSIONS = ("html", "htm")


def _is_view(obj: Any) -> bool:
    """An interactive view: ``_repr_html_`` on a torchrecorder class, or a marked class."""
    if isinstance(obj, type) or not callable(getattr(obj, "_repr_html_", None)):
        return False
    cls = type(obj)
    return bool(getattr(cls, "_torchrecorder_view_", False)) or \
        cls.__module__.split(".", 1)[0] == "torchrecorder"


def _is_plot(obj: Any) -> bool:
    """A matplotlib figure made without pyplot (``cap.plot()`` returns one), which
    sphinx-gallery's matplotlib scraper does not see: it collects pyplot's figures only."""
    cls = type(obj)
    return cls.__module__ == "matplotlib.figure" and cls.__name__ == "Figure" and \
        getattr(getattr(obj, "canvas", None), "manager", None) is None


def _figure_kind(obj: Any) -> Optional[str]:
    if isinstance(obj, Graph):
        return "graph"
    if isinstance(obj, graphviz.Digraph | graphviz.Graph | graphviz.Source):
        return "dot"
    if _is_view(obj):
        return "view"
    if _is_plot(obj):
        return "plot"
    return None


def _candidates(namespace: dict[str, Any]) -> Iterator[Any]:
    """The values bound to global names (not dunder ones), and one level inside containers."""
    for key, value in list(namespace.items()):
        if key.startswith("__") or key == "___":
            continue
        if isinstance(value, list | tuple):
            yield from value
        elif isinstance(value, dict):
            yield from list(value.values())
        else:
            yield value


def _fingerprint(obj: Any, kind: str) -> Any:
    """What tells a changed figure from the one seen before: a Digraph's source, a graph's size."""
    if kind == "dot":
        return obj.source
    if kind == "graph":
        return (len(obj.nodes), len(obj.links))
    return None


def _last_expression(block: Any, namespace: dict[str, Any]) -> Any:
    """The value of the block's last line when it is an expression (sphinx-gallery's ``___``)."""
    content = block[1] if isinstance(block, tuple) else getattr(block, "content", "")
    try:
        body = ast.parse(content).body
    except SyntaxError:
        return None
    if body and isinstance(body[-1], ast.Expr):
        return namespace.get("___")
    return None


def _gallery_shows_html(shown: Any, block: Any, block_vars: dict[str, Any],
                        gallery_conf: Optional[dict[str, Any]]) -> bool:
    r"""Whether sphinx-gallery itself puts the ``_repr_html_`` of ``shown``, the block's last
    expression, in the page: its ``capture_repr`` (the block's, the file's or the gallery's)
    names ``_repr_html_`` before any other method ``shown`` has, and ``ignore_repr_types``
    (which the documented configuration sets to ``r"graphviz\.|torchrecorder\."``) does not
    match its type."""
    if gallery_conf is None:
        return True
    ignore = gallery_conf.get("ignore_repr_types")
    if ignore and re.search(ignore, str(type(shown))):
        return False
    capture = (block_vars.get("file_conf") or {}).get("capture_repr", gallery_conf.get("capture_repr", ()))
    content = block[1] if isinstance(block, tuple) else getattr(block, "content", "")
    found = re.search(r"^[ \t]*#\s*sphinx_gallery_capture_repr_block\s*=\s*(.+)$", content, re.MULTILINE)
    if found:
        try:
            capture = ast.literal_eval(found.group(1).strip())
        except (ValueError, SyntaxError):
            pass
    for method in capture or ():
        if callable(getattr(shown, method, None)):
            return bool(method == "_repr_html_")
    return False


class _Example:
    """What one example's earlier blocks drew: each object kept (so ids stay unique)."""

    def __init__(self, src_file: str, serial: int) -> None:
        self.src_file = src_file
        self.serial = serial
        self.seen: dict[int, tuple[Any, Any]] = {}

    def is_new(self, obj: Any, kind: str) -> bool:
        mark = _fingerprint(obj, kind)
        old = self.seen.get(id(obj))
        self.seen[id(obj)] = (obj, mark)
        return old is None or old[0] is not obj or old[1] != mark


class Scraper:
    """The sphinx-gallery image scraper of torchrecorder (see the module docstring).

    Args:
        render_depth: depth at which recordings (not Digraphs, which are drawn
            as they are) are drawn.
        thumbnail_dpi: resolution of the PNG made for the gallery thumbnail.

    Instances are callables with sphinx-gallery's scraper signature
    ``scraper(block, block_vars, gallery_conf) -> str``.  An instance can be
    put in ``image_scrapers`` directly to change the options:
    ``"image_scrapers": (torchrecorder.scraper.Scraper(render_depth=2),)``.
    """

    def __init__(self, render_depth: int = default_depth(1), thumbnail_dpi: float = 72, *,
                 files_since_start: bool = False) -> None:
        if isinstance(render_depth, bool) or not isinstance(render_depth, int) or render_depth < 0:
            raise ValueError(f"render_depth must be an int >= 0, got {render_depth!r}")
        self.render_depth = render_depth
        self.thumbnail_dpi = float(thumbnail_dpi)
        self._example: Optional[_Example] = None
        # files written before the scraper existed count only for the shared one, which
        # sphinx-gallery first asks for after the first block ran
        self._serial = 0 if files_since_start else files_written_after(0)[0]

    def __repr__(self) -> str:
        return f"torchrecorder.scraper.Scraper(render_depth={int(self.render_depth)})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (Sphinx caches its configuration) as its options, without the per-example state."""
        return (type(self), (self.render_depth, self.thumbnail_dpi))

    def __eq__(self, other: object) -> bool:
        """Scrapers with the same options are equal (Sphinx compares cached configurations)."""
        return type(other) is type(self) and (self.render_depth, self.thumbnail_dpi) == (
            other.render_depth, other.thumbnail_dpi)

    def __hash__(self) -> int:
        return hash((type(self), self.render_depth, self.thumbnail_dpi))

    def reset(self) -> None:
        """Forget earlier examples: files written before now belong to none of the next one's
        blocks (see :func:`reset_scraper`)."""
        self._example = None
        self._serial = files_written_after(0)[0]

    # ---- collecting
    def _state(self, block_vars: dict[str, Any]) -> _Example:
        src = str(block_vars.get("src_file", ""))
        if self._example is None or self._example.src_file != src:
            self._example = _Example(src, self._serial)
        return self._example

    def collect(self, block: Any, block_vars: dict[str, Any],
                gallery_conf: Optional[dict[str, Any]] = None) -> tuple[list[Any], list[str]]:
        """The objects (recordings, Digraphs, views) and files the block drew, in order; a view
        that is the block's last expression only where sphinx-gallery does not show it itself
        (with ``gallery_conf``: see :func:`_gallery_shows_html`)."""
        state = self._state(block_vars)
        namespace: dict[str, Any] = block_vars.get("example_globals") or {}
        made = [(obj, kind) for obj in _candidates(namespace)
                if (kind := _figure_kind(obj)) is not None and state.is_new(obj, kind)]
        shown = _last_expression(block, namespace)
        shown_kind = _figure_kind(shown)
        if shown_kind is not None:
            state.is_new(shown, shown_kind)
            gallery_shows = (shown_kind == "view"
                             and _gallery_shows_html(shown, block, block_vars, gallery_conf))
            if not gallery_shows and all(obj is not shown for obj, _ in made):
                made.append((shown, shown_kind))
            if gallery_shows:  # sphinx-gallery shows it: not twice
                made = [(o, k) for o, k in made if o is not shown]
        self._serial, paths = files_written_after(state.serial)
        state.serial = self._serial
        files = [p for p in paths if p.rsplit(".", 1)[-1].lower() in IMAGE_EXTENSIONS + HTML_EXTENSIONS
                 and os.path.isfile(p)]
        # a recording is drawn where the block drew nothing else from it (a view is no figure)
        others = [o for o, k in made if k == "dot"] + [p for p in files if not p.endswith(HTML_EXTENSIONS)]
        objects = [o for o, k in made if k != "graph" or not others or o is shown]
        return objects, files

    # ---- writing
    def _thumbnail_number(self, block_vars: dict[str, Any]) -> Optional[int]:
        conf = block_vars.get("file_conf") or {}
        number = conf.get("thumbnail_number", None if conf.get("thumbnail_path") else 1)
        return number if isinstance(number, int) and number > 0 else None

    def _png_for(self, source: Optional[str], svg_path: str, png_path: str) -> None:
        """The PNG thumbnail of a figure: from its DOT source, else from the SVG by rsvg-convert
        (where neither is at hand, sphinx-gallery shows its default thumbnail)."""
        if source is not None:
            end = source.rstrip().rfind("}")
            if end >= 0:  # a graph attribute set last wins over the figure's own dpi
                source = f"{source[:end]}\tgraph [dpi={self.thumbnail_dpi:g}]\n}}\n"
            data = render_source(source, "png")
            with open(png_path, "wb") as fh:
                fh.write(data)
            return
        tool = shutil.which("rsvg-convert")
        if tool is not None:
            subprocess.run([tool, "-o", png_path, svg_path], check=False, capture_output=True)

    def __call__(self, block: Any, block_vars: dict[str, Any], gallery_conf: dict[str, Any]) -> str:
        """Write the block's figures at the paths of ``block_vars["image_path_iterator"]`` and
        return their reST (sphinx-gallery's scraper contract)."""
        from sphinx_gallery.scrapers import figure_rst

        objects, files = self.collect(block, block_vars, gallery_conf)
        paths = block_vars["image_path_iterator"]
        src_dir = gallery_conf["src_dir"]
        thumb = self._thumbnail_number(block_vars)
        rst: list[str] = []
        done_files: set[str] = set()
        for obj in [*objects, *files]:
            if isinstance(obj, str):
                if obj in done_files:
                    continue
                done_files.add(obj)
                ext = obj.rsplit(".", 1)[-1].lower()
                if ext in HTML_EXTENSIONS:
                    with open(obj, encoding="utf-8") as fh:
                        rst.append(_raw_html(_iframe(fh.read(), os.path.basename(obj))))
                    continue
                target = os.path.splitext(next(paths))[0] + "." + ext
                shutil.copyfile(obj, target)
                if ext == "svg" and len(paths) == thumb:  # drawn from DOT where torchrecorder wrote it
                    self._png_for(dot_source_of(obj), target, os.path.splitext(target)[0] + ".png")
                rst.append(figure_rst([target], src_dir, f"{os.path.basename(obj)}, drawn by torchrecorder"))
                continue
            kind = _figure_kind(obj)
            if kind == "view":
                rst.append(_raw_html(obj._repr_html_()))
                continue
            if kind == "plot":
                target = os.path.splitext(next(paths))[0] + ".svg"
                obj.savefig(target, format="svg")
                if len(paths) == thumb:
                    obj.savefig(os.path.splitext(target)[0] + ".png", format="png", dpi=self.thumbnail_dpi)
                rst.append(figure_rst([target], src_dir, "a chart drawn with matplotlib"))
                continue
            if kind == "graph":
                source = GraphvizRenderer(obj, self.render_depth).render().source
                name = obj.name
            else:
                source, name = obj.source, getattr(obj, "name", None) or "graph"
            target = os.path.splitext(next(paths))[0] + ".svg"
            with open(target, "wb") as fh:
                fh.write(render_source(source, "svg"))
            if len(paths) == thumb:
                self._png_for(source, target, os.path.splitext(target)[0] + ".png")
            rst.append(figure_rst([target], src_dir, f"the graph of {name}, drawn by torchrecorder"))
        return "".join(rst)


def _iframe(page: str, title: str, height: int = 640) -> str:
    """A whole HTML page inline, isolated from the documentation page: an ``<iframe srcdoc>``."""
    return (f'<iframe srcdoc="{html.escape(page, quote=True)}" title="{html.escape(title, quote=True)}" '
            f'style="width:100%;height:{height}px;border:1px solid #ccc" '
            'sandbox="allow-scripts allow-downloads"></iframe>')


def _raw_html(text: str) -> str:
    """``text`` as a ``.. raw:: html`` block (docutils strips the indentation back off)."""
    return ("\n\n.. raw:: html\n\n    <div class=\"torchrecorder-view\">\n"
            + textwrap.indent(text, "    ", lambda line: True) + "\n    </div>\n\n")


_SHARED: Optional[Scraper] = None


def reset_scraper(gallery_conf: Any = None, fname: Any = None) -> None:
    """Reset the shared scraper before an example runs: a ``reset_modules`` entry of
    ``sphinx_gallery_conf`` (``"reset_modules": ("torchrecorder.scraper.reset_scraper",)``).

    Files a program writes between two examples, outside any code block, would otherwise be
    taken for the next example's first block; a documentation build writes none, so this is
    needed only where gallery examples run beside other code (tests, notebooks)."""
    get_scraper().reset()


def get_scraper() -> Scraper:
    """The shared :class:`Scraper` with the default options (what ``_get_sg_image_scraper``
    returns).  sphinx-gallery resolves ``'torchrecorder'`` anew for every code block, so the
    same instance is returned each time: it remembers what the example's earlier blocks drew."""
    global _SHARED
    if _SHARED is None:
        _SHARED = Scraper(files_since_start=True)
    return _SHARED
