"""Turn DOT source into an image: the ``dot`` program on PATH, or pygraphviz's bundled Graphviz.

The choice is automatic (``dot`` first); the environment variable
``TORCHRECORDER_BACKEND`` set to ``dot`` or ``pygraphviz`` forces one.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from types import MappingProxyType
from typing import Optional

from ._progress import LONG_LAYOUT, stage
from .errors import GraphvizNotFoundError

__all__ = [
    "GRAPHVIZ_ATTRIBUTES",
    "GraphvizNotFoundError",
    "REFUSED_FORMATS",
    "SOURCE_FORMATS",
    "available_formats",
    "backend_name",
    "check_format",
    "name_measured_fonts",
    "render_source",
]

#: formats written without running Graphviz: DOT source, the recorded graph as
#: JSON (:mod:`torchrecorder.export`), a Mermaid flowchart
SOURCE_FORMATS = frozenset({"dot", "gv", "html", "json", "mmd"})

#: Graphviz formats torchrecorder refuses, and why: they do not produce one file
REFUSED_FORMATS: Mapping[str, str] = MappingProxyType({
    "vrml": "Graphviz writes one PNG file per node beside the VRML file, into the current "
            "directory, where they would overwrite files of the same name",
    "x11": "it opens a window instead of writing a file",
    "xlib": "it opens a window instead of writing a file",
    "gtk": "it opens a window instead of writing a file",
})

# Graphviz's formats that write nothing but their output (each checked with dot 2.43); any
# other format is run in a scratch directory and refused if it writes a file there
_OUTPUT_ONLY = frozenset((
    "canon cmap cmapx cmapx_np dot dot_json eps fig gd gd2 gif gv imap imap_np ismap jpe jpeg "
    "jpg json json0 mp pdf pic plain plain-ext png pov ps ps2 svg svgz tk vdx vml vmlz wbmp webp "
    "xdot xdot1.2 xdot1.4 xdot_json").split())

# Every attribute of https://graphviz.org/doc/info/attrs.html, with the components that use it:
# G the root graph, C clusters, S subgraphs, N nodes, E edges.
_ATTRIBUTE_USERS = {
    "_background": "G", "area": "NC", "arrowhead": "E", "arrowsize": "E", "arrowtail": "E",
    "bb": "GC", "beautify": "G", "bgcolor": "GC", "center": "G", "charset": "G", "class": "GCNE",
    "cluster": "CS", "clusterrank": "G", "color": "NEC", "colorscheme": "GCNE", "comment": "GNE",
    "compound": "G", "concentrate": "G", "constraint": "E", "Damping": "G", "decorate": "E",
    "defaultdist": "G", "dim": "G", "dimen": "G", "dir": "E", "diredgeconstraints": "G",
    "distortion": "N", "dpi": "G", "edgehref": "E", "edgetarget": "E", "edgetooltip": "E",
    "edgeURL": "E", "epsilon": "G", "esep": "G", "fillcolor": "NEC", "fixedsize": "N",
    "fontcolor": "GCNE", "fontname": "GCNE", "fontnames": "G", "fontpath": "G", "fontsize": "GCNE",
    "forcelabels": "G", "gradientangle": "GCN", "group": "N", "head_lp": "E", "headclip": "E",
    "headhref": "E", "headlabel": "E", "headport": "E", "headtarget": "E", "headtooltip": "E",
    "headURL": "E", "height": "N", "href": "GCNE", "id": "GCNE", "image": "N", "imagepath": "G",
    "imagepos": "N", "imagescale": "N", "inputscale": "G", "K": "GC", "label": "GCNE",
    "label_scheme": "G", "labelangle": "E", "labeldistance": "E", "labelfloat": "E",
    "labelfontcolor": "E", "labelfontname": "E", "labelfontsize": "E", "labelhref": "E",
    "labeljust": "GC", "labelloc": "GCN", "labeltarget": "E", "labeltooltip": "E", "labelURL": "E",
    "landscape": "G", "layer": "CNE", "layerlistsep": "G", "layers": "G", "layerselect": "G",
    "layersep": "G", "layout": "G", "len": "E", "levels": "G", "levelsgap": "G", "lhead": "E",
    "lheight": "GC", "linelength": "G", "lp": "GCE", "ltail": "E", "lwidth": "GC", "margin": "GCN",
    "maxiter": "G", "mclimit": "G", "mindist": "G", "minlen": "E", "mode": "G", "model": "G",
    "newrank": "G", "nodesep": "G", "nojustify": "GCN", "normalize": "G", "notranslate": "G",
    "nslimit": "G", "nslimit1": "G", "oneblock": "G", "ordering": "GN", "orientation": "GN",
    "outputorder": "G", "overlap": "G", "overlap_scaling": "G", "overlap_shrink": "G", "pack": "G",
    "packmode": "G", "pad": "G", "page": "G", "pagedir": "G", "pencolor": "C", "penwidth": "CNE",
    "peripheries": "CN", "pin": "N", "pos": "NE", "quadtree": "G", "quantum": "G", "rank": "S",
    "rankdir": "G", "ranksep": "G", "ratio": "G", "rects": "N", "regular": "N", "remincross": "G",
    "repulsiveforce": "G", "resolution": "G", "root": "GN", "rotate": "G", "rotation": "G",
    "samehead": "E", "sametail": "E", "samplepoints": "N", "scale": "G", "searchsize": "G",
    "sep": "G", "shape": "N", "shapefile": "N", "showboxes": "GNE", "sides": "N", "size": "G",
    "skew": "N", "smoothing": "G", "sortv": "GCN", "splines": "G", "start": "G", "style": "CNE",
    "stylesheet": "G", "tail_lp": "E", "tailclip": "E", "tailhref": "E", "taillabel": "E",
    "tailport": "E", "tailtarget": "E", "tailtooltip": "E", "tailURL": "E", "target": "GCNE",
    "TBbalance": "G", "tooltip": "GCNE", "truecolor": "G", "URL": "GCNE", "vertices": "N",
    "viewport": "G", "voro_margin": "G", "weight": "E", "width": "N", "xdotversion": "G",
    "xlabel": "NE", "xlp": "NE", "z": "N",
}

#: Graphviz's attributes (https://graphviz.org/doc/info/attrs.html), each with the letters of
#: the components that use it: ``G`` the graph, ``C`` clusters, ``S`` subgraphs, ``N`` nodes,
#: ``E`` edges.  Names are case-sensitive, as in Graphviz.
GRAPHVIZ_ATTRIBUTES: Mapping[str, str] = MappingProxyType(_ATTRIBUTE_USERS)

_INSTALL_HINT = (
    "Rendering an image needs Graphviz: install the `dot` program (Debian/Ubuntu: "
    "`apt-get install graphviz`, macOS: `brew install graphviz`, conda: `conda install "
    "graphviz`), or `pip install 'torchrecorder[render]'` for pygraphviz, whose wheels bundle "
    "Graphviz. The DOT source is available without either: make_dot(rec).source, or fmt='dot'."
)


def _pygraphviz() -> Optional[object]:
    try:
        import pygraphviz  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None
    return pygraphviz


def backend_name() -> str:
    """``"dot"`` or ``"pygraphviz"``: what :func:`render_source` will use.

    Raises:
        GraphvizNotFoundError: neither is available (or the forced one is not).
    """
    forced = os.environ.get("TORCHRECORDER_BACKEND", "").strip().lower()
    if forced not in ("", "auto", "dot", "pygraphviz"):
        raise ValueError(
            f"TORCHRECORDER_BACKEND={forced!r} is not one of 'dot', 'pygraphviz', 'auto'"
        )
    if forced in ("", "auto", "dot") and shutil.which("dot"):
        return "dot"
    if forced in ("", "auto", "pygraphviz") and _pygraphviz() is not None:
        return "pygraphviz"
    if forced == "dot":
        raise GraphvizNotFoundError("TORCHRECORDER_BACKEND=dot but no `dot` program is on PATH. "
                                    + _INSTALL_HINT)
    if forced == "pygraphviz":
        raise GraphvizNotFoundError("TORCHRECORDER_BACKEND=pygraphviz but pygraphviz is not "
                                    "installed. " + _INSTALL_HINT)
    raise GraphvizNotFoundError("Graphviz was not found. " + _INSTALL_HINT)


@functools.lru_cache(maxsize=4)
def _formats_of(backend: str, dot_path: str) -> frozenset[str]:
    if backend == "dot":
        proc = subprocess.run([dot_path, "-T?"], capture_output=True, text=True, check=False)
        match = re.search(r"Use one of:(.*)", proc.stderr + proc.stdout, re.S)
        if match:
            return frozenset(f.split(":")[0] for f in match.group(1).split())
        return frozenset({"svg", "png", "pdf", "ps", "dot"})
    # pygraphviz bundles Graphviz with its usual plugins
    return frozenset({"svg", "png", "pdf", "ps", "eps", "jpg", "jpeg", "gif", "plain", "json",
                      "dot", "xdot", "canon", "gv", "svgz", "fig", "imap", "cmapx"})


def available_formats() -> frozenset[str]:
    """Every output format: those of the installed Graphviz (less :data:`REFUSED_FORMATS`),
    plus ``dot``, ``gv``, ``json`` and ``mmd``."""
    backend = backend_name()
    return (_formats_of(backend, shutil.which("dot") or "") - REFUSED_FORMATS.keys()) | SOURCE_FORMATS


def check_format(fmt: str) -> str:
    """``fmt`` as a known output format (lower case, no leading dot), before anything runs.

    Raises:
        ValueError: ``fmt`` is refused (see :data:`REFUSED_FORMATS`) or unknown.
        GraphvizNotFoundError: ``fmt`` needs Graphviz and there is none.
    """
    if not isinstance(fmt, str):
        raise TypeError(f"fmt must be a str such as 'svg', got {type(fmt).__name__}")
    fmt = fmt.lower().lstrip(".")
    if fmt in REFUSED_FORMATS:
        raise ValueError(f"format {fmt!r} is not supported: {REFUSED_FORMATS[fmt]}; write "
                         f"fmt='dot' and run Graphviz on it yourself")
    if fmt not in SOURCE_FORMATS and fmt not in available_formats():
        raise ValueError(f"unknown format {fmt!r}; available: {', '.join(sorted(available_formats()))}")
    return fmt


_RESOLVED = re.compile(r'^fontname: "([^"]*)" resolved to: .*\(PangoCairo\w*Font\) "([^",]+)', re.M)
_FONT_FAMILY = re.compile(rb'font-family="([^"]*)"')


def _family_key(name: str) -> str:
    """``"Helvetica,Arial,sans-serif"`` and ``"Helvetica,sans-Serif"`` -> ``"helvetica"``;
    ``"Times-Roman"`` and ``"Times,serif"`` -> ``"times"``: a font list by its first family."""
    return name.split(",")[0].strip().strip("'\"").split("-")[0].strip().lower()


def name_measured_fonts(svg: bytes, log: str) -> bytes:
    """``svg`` with the font that Graphviz laid its text out with named first in each
    ``font-family``, from ``log``, the output of ``dot -v`` (``fontname: "X" resolved to:
    ... "DejaVu Sans, Book"``).

    A browser that has that font draws the text as wide as it was measured; one that
    has not falls back to the families written after it, as before.  Without such
    lines (Graphviz without Pango) ``svg`` is returned unchanged.
    """
    measured = {_family_key(name): family.strip() for name, family in _RESOLVED.findall(log)}
    if not measured:
        return svg

    def name_first(match: re.Match[bytes]) -> bytes:
        value = match.group(1).decode("utf-8", "replace")
        family = measured.get(_family_key(value))
        if not family or _family_key(value) == family.lower().split("-")[0]:
            return match.group(0)
        return b'font-family="' + f"{family},{value}".encode() + b'"'

    return _FONT_FAMILY.sub(name_first, svg)


def render_source(source: str, fmt: str, engine: str = "dot") -> bytes:
    """Lay out DOT ``source`` with Graphviz and return the ``fmt`` output as bytes.

    Raises:
        GraphvizNotFoundError: no Graphviz is available.
        ValueError: Graphviz does not know ``fmt``.
        RuntimeError: Graphviz failed; the message carries its error output.
    """
    backend = backend_name()
    formats = _formats_of(backend, shutil.which("dot") or "")
    if fmt in REFUSED_FORMATS:
        raise ValueError(f"format {fmt!r} is not supported: {REFUSED_FORMATS[fmt]}")
    if fmt not in formats:
        raise ValueError(f"unknown format {fmt!r}; Graphviz ({backend}) supports: "
                         + ", ".join(sorted((formats - REFUSED_FORMATS.keys()) | SOURCE_FORMATS)))
    with stage(f"laying out with {engine} -T{fmt}", source.count("\n"), LONG_LAYOUT):
        return _run(source, fmt, engine, backend)


def _run(source: str, fmt: str, engine: str, backend: str) -> bytes:
    if backend == "dot":
        command = [shutil.which(engine) or engine, f"-T{fmt}"]
        if fmt == "svg":  # -v: Graphviz says which installed font it measured each fontname with
            command.append("-v")
        if fmt in _OUTPUT_ONLY:  # where the user is: relative image= paths keep working
            proc = subprocess.run(command, input=source.encode(), capture_output=True, check=False)
            side_files: list[str] = []
        else:  # a format not known here runs in an empty directory of its own
            with tempfile.TemporaryDirectory(prefix="torchrecorder-dot-") as scratch:
                proc = subprocess.run(command, input=source.encode(), capture_output=True,
                                      check=False, cwd=scratch)
                side_files = sorted(os.listdir(scratch))
        if proc.returncode != 0:
            raise RuntimeError(f"Graphviz `{engine} -T{fmt}` failed: "
                               + proc.stderr.decode(errors="replace").strip())
        if side_files:
            raise ValueError(f"format {fmt!r} is not supported: Graphviz wrote files beside its "
                             f"output ({', '.join(side_files[:5])}), which would be lost")
        if fmt == "svg":
            return name_measured_fonts(proc.stdout, proc.stderr.decode(errors="replace"))
        return proc.stdout
    pgv = _pygraphviz()
    graph = pgv.AGraph(string=source)  # type: ignore[attr-defined]
    data = graph.draw(format=fmt, prog=engine)
    if not data:
        raise RuntimeError(f"pygraphviz could not render format {fmt!r}")
    return bytes(data)
