"""A Sphinx extension that draws a model when the documentation is built.

Add it to ``conf.py``::

    extensions = ["torchrecorder.sphinxext"]

and write, in a reStructuredText page::

    .. torchrecorder:: mypackage.models:build_net
       :input-shape: 1,3,224,224
       :depth: 2
       :caption: The network, drawn from its code at build time.

or in a MyST Markdown page::

    ```{torchrecorder} mypackage.models:build_net
    :input-shape: 1,3,224,224
    :depth: 2
    ```

The argument names the model as on the command line: ``module:factory`` (a
class or function that returns an ``nn.Module``, or a module instance) in an
importable module, or ``path/to/file.py:factory`` (relative to the page, or to
the source directory when it starts with ``/``).  Options (each on its own
line; ``:input-shape:`` may be repeated, once per input):

``:input-shape:``
    the shape of an input, ``1,3,224,224`` (several inputs: repeat the option,
    or separate shapes with ``;``).  Required.
``:input-dtype:``
    the inputs' dtype, ``float16`` (a floating dtype converts the model to it
    too); an integer dtype (``int64``) makes valid token ids, ``bool`` masks.
``:depth:``
    the render depth (default 1); ``all`` opens every module.
``:preset:``, ``:direction:``, ``:fold:``
    the style preset (``default``, ``compact``, ``print``, ``paper``), the
    layout direction (``TB``, ``LR``) and when to fold repeated blocks
    (``auto``, ``yes``, ``no``, or a run length), as in :func:`~torchrecorder.make_dot`.
``:format:``
    ``svg`` (default), ``png``, or ``html`` for the interactive view (where
    :func:`torchrecorder.make_html` exists).
``:compile-breaks:``
    ``yes`` marks the module calls where ``torch.compile`` breaks the graph
    (:func:`torchrecorder.compile_breaks`; dynamo runs while the page is built).
``:caption:``, ``:alt:``, ``:name:``
    the figure's caption (inline markup allowed), its alternative text
    (default: the network's name and what drew it) and the network's name
    (default: the factory's).

A factory that cannot be imported or built, a shape that does not fit the
model, or a bad option is reported as a Sphinx warning naming the file and line
(type ``torchrecorder``, so ``suppress_warnings = ["torchrecorder"]`` silences
it), and the page is built without the figure.  Pages are rebuilt when the
file holding the model changes.
"""

from __future__ import annotations

import hashlib
import html
import os
import re
import sys
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from . import renderer as _renderer
from .api import make_dot, record
from .backend import render_source
from .factory import ModelSpecError, initialize_lazy, load_model, match_input_dtype, parse_dtype, parse_shape
from .projection.budget import default_depth
from .recording._failure import PARTIAL_RECORDING

__all__ = ["TorchrecorderDirective", "setup", "torchrecorder_figure"]

logger = logging.getLogger(__name__)

FORMATS = ("svg", "png", "html")
OPTIONS = ("input-shape", "input-dtype", "depth", "preset", "direction", "fold", "format",
           "caption", "alt", "name", "compile-breaks")
_OPTION_LINE = re.compile(r"^:([A-Za-z][\w-]*):(?:\s+(.*))?$")


class torchrecorder_figure(nodes.General, nodes.Element):
    """The drawn picture: ``data`` (bytes), ``format`` and ``alt``; written by the builder."""


class _NoParsedOptions(dict[str, Any]):
    """The directive's options, but false: so that neither docutils nor MyST parses them
    (both refuse a repeated option), and :meth:`TorchrecorderDirective.run` reads them itself."""

    def __bool__(self) -> bool:
        return False


class TorchrecorderDirective(SphinxDirective):
    """``.. torchrecorder:: module:factory`` with options (see :mod:`torchrecorder.sphinxext`)."""

    required_arguments = 1
    optional_arguments = 0
    final_argument_whitespace = True
    has_content = True
    option_spec = _NoParsedOptions((name, str) for name in OPTIONS)

    def _split(self) -> tuple[str, list[tuple[str, str]]]:
        """The model spec and the ``(option, value)`` pairs, in order, repeats kept."""
        lines = [*self.arguments[0].splitlines(), *self.content]
        spec = lines[0].strip() if lines else ""
        pairs: list[tuple[str, str]] = []
        for line in lines[1:]:
            text = line.strip()
            if not text:
                continue
            match = _OPTION_LINE.match(text)
            if match is None:
                raise ModelSpecError(f"{text!r} is not an option line such as ':input-shape: 1,3,32,32'")
            name, value = match.group(1), (match.group(2) or "").strip()
            if name not in OPTIONS:
                raise ModelSpecError(f"unknown option :{name}: (known: {', '.join(OPTIONS)})")
            pairs.append((name, value))
        return spec, pairs

    def _options(self) -> tuple[str, dict[str, Any]]:
        spec, pairs = self._split()
        if ":" not in spec:
            raise ModelSpecError(f"the model {spec!r} must look like 'package.module:factory' or "
                                 "'file.py:factory'")
        opts: dict[str, Any] = {"shapes": [], "depth": default_depth(1), "preset": "default",
                                "direction": None,
                                "fold": "auto", "format": "svg", "dtype": None, "caption": None,
                                "alt": None, "name": None}
        for name, value in pairs:
            if name == "input-shape":
                opts["shapes"].extend(parse_shape(s) for s in value.split(";") if s.strip())
                continue
            if name != "input-shape" and any(name == n for n, _ in pairs[:pairs.index((name, value))]):
                raise ModelSpecError(f"option :{name}: is given twice")
            if name == "input-dtype":
                opts["dtype"] = parse_dtype(value)
            elif name == "depth":
                if value.strip().lower() == "all":
                    opts["depth"] = None
                elif not value.isdigit():
                    raise ModelSpecError(f":depth: must be an int >= 0 or 'all', got {value!r}")
                else:
                    opts["depth"] = int(value)
            elif name == "format":
                if value.lower() not in FORMATS:
                    raise ModelSpecError(f":format: must be one of {', '.join(FORMATS)}, got {value!r}")
                opts["format"] = value.lower()
            elif name == "compile-breaks":
                if value.lower() not in ("", "yes", "no"):
                    raise ModelSpecError(f":compile-breaks: must be yes or no, got {value!r}")
                opts["breaks"] = value.lower() != "no"
            elif name == "fold":
                word = value.lower()
                opts["fold"] = {"auto": "auto", "yes": True, "no": False}.get(
                    word, int(word) if word.isdigit() else value)
            else:
                opts[name] = value
        if not opts["shapes"]:
            raise ModelSpecError("an :input-shape: option is required (such as ':input-shape: 1,3,32,32')")
        return spec, opts

    def _resolve(self, spec: str) -> str:
        """A ``.py`` path relative to the page (or, with a leading ``/``, to the source folder)."""
        target, _, attr = spec.rpartition(":")
        if target.endswith(".py"):
            target = self.env.relfn2path(target, self.env.docname)[1]
            self.env.note_dependency(target)
        return f"{target}:{attr}"

    def _draw(self, spec: str, opts: dict[str, Any]) -> tuple[bytes, str]:
        net = load_model(self._resolve(spec))
        module = sys.modules.get(spec.rpartition(":")[0])
        source_file = getattr(module, "__file__", None)
        if source_file:
            self.env.note_dependency(os.path.abspath(source_file))
        name = opts["name"] or spec.rpartition(":")[2]
        shapes = opts["shapes"][0] if len(opts["shapes"]) == 1 else opts["shapes"]
        match_input_dtype(net, opts["dtype"])  # float16 inputs: the model in float16 too
        initialize_lazy(net, shapes, dtype=opts["dtype"])  # the directive owns the model
        style: dict[str, Any] = {"preset": opts["preset"], "direction": opts["direction"],
                                 "fold_repeats": opts["fold"]}
        if opts["format"] == "html":
            make_html = getattr(_renderer, "make_html", None)
            if make_html is None:
                raise ModelSpecError(":format: html needs torchrecorder.make_html (the interactive "
                                     "view), which this version of torchrecorder does not have")
            page = make_html(record(net, name, shapes, dtype=opts["dtype"]), opts["depth"], **style)
            return str(page._repr_html_()).encode("utf-8"), name
        rec = record(net, name, shapes, dtype=opts["dtype"])
        if opts.get("breaks"):  # dynamo: imported only here
            from .graph_breaks import compile_breaks
            style["breaks"] = compile_breaks(net, shapes, dtype=opts["dtype"], recording=rec)
        if opts["format"] == "png":
            style["dpi"] = 192
        source = make_dot(rec, opts["depth"], **style).source
        return render_source(source, opts["format"]), name

    def run(self) -> list[nodes.Node]:
        """Record the model and return its figure, or a warning and nothing."""
        try:
            spec, opts = self._options()
            data, name = self._draw(spec, opts)
        except Exception as exc:  # a broken model must not stop the documentation build
            notes = "".join(f" ({str(note).removeprefix('torchrecorder: ').replace(PARTIAL_RECORDING, '')})"
                            for note in getattr(exc, "__notes__", []))
            kind = "" if isinstance(exc, ModelSpecError) else f"{type(exc).__name__}: "
            logger.warning("torchrecorder: cannot draw %r: %s%s%s", self.arguments[0].splitlines()[0],
                           kind, exc, notes, location=self.get_location(), type="torchrecorder",
                           subtype="directive")
            return []
        alt = opts["alt"] or f"the graph of {name}, drawn by torchrecorder"
        node = torchrecorder_figure("", data=data, format=opts["format"], alt=alt)
        self.set_source_info(node)
        if not opts["caption"]:
            return [node]
        figure = nodes.figure("", node)
        self.set_source_info(figure)
        text_nodes, messages = self.parse_inline(opts["caption"], lineno=self.lineno)
        caption = nodes.caption(opts["caption"], "", *text_nodes)
        self.set_source_info(caption)
        figure += caption
        return [figure, *messages]


def _file_name(node: torchrecorder_figure) -> str:
    digest = hashlib.sha1(node["data"], usedforsecurity=False).hexdigest()[:16]
    return f"torchrecorder-{digest}.{node['format']}"


def visit_figure_html(self: Any, node: torchrecorder_figure) -> None:
    """HTML: the picture written under ``_images/`` and shown with ``<img>``; a view inline."""
    if node["format"] == "html":
        self.body.append(f'<div class="torchrecorder-view">{node["data"].decode("utf-8")}</div>\n')
        raise nodes.SkipNode
    name = _file_name(node)
    folder = os.path.join(self.builder.outdir, self.builder.imagedir)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        with open(path, "wb") as fh:
            fh.write(node["data"])
    src = f"{self.builder.imgpath}/{name}"
    alt = html.escape(node["alt"], quote=True)
    self.body.append(f'<img src="{html.escape(src, quote=True)}" alt="{alt}" '
                     'class="torchrecorder-figure" style="max-width:100%;height:auto" />\n')
    raise nodes.SkipNode


def visit_figure_text(self: Any, node: torchrecorder_figure) -> None:
    """Builders that show no pictures here (text, man, LaTeX, ...): the figure is left out."""
    raise nodes.SkipNode


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the ``torchrecorder`` directive and its node."""
    from . import __version__

    skip = (visit_figure_text, None)
    app.add_node(torchrecorder_figure, html=(visit_figure_html, None), latex=skip, text=skip, man=skip,
                 texinfo=skip)
    app.add_directive("torchrecorder", TorchrecorderDirective)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
