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
from typing import Optional

from .errors import GraphvizNotFoundError

__all__ = [
    "GraphvizNotFoundError",
    "SOURCE_FORMATS",
    "available_formats",
    "backend_name",
    "render_source",
]

#: formats written without running Graphviz: DOT source, the recorded graph as
#: JSON (:mod:`torchrecorder.export`), a Mermaid flowchart
SOURCE_FORMATS = frozenset({"dot", "gv", "html", "json", "mmd"})

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
    """Every output format: those of the installed Graphviz, plus ``dot``, ``gv``, ``json`` and ``mmd``."""
    backend = backend_name()
    return _formats_of(backend, shutil.which("dot") or "") | SOURCE_FORMATS


def render_source(source: str, fmt: str, engine: str = "dot") -> bytes:
    """Lay out DOT ``source`` with Graphviz and return the ``fmt`` output as bytes.

    Raises:
        GraphvizNotFoundError: no Graphviz is available.
        ValueError: Graphviz does not know ``fmt``.
        RuntimeError: Graphviz failed; the message carries its error output.
    """
    backend = backend_name()
    formats = _formats_of(backend, shutil.which("dot") or "")
    if fmt not in formats:
        raise ValueError(f"unknown format {fmt!r}; Graphviz ({backend}) supports: "
                         + ", ".join(sorted(formats | SOURCE_FORMATS)))
    if backend == "dot":
        proc = subprocess.run([shutil.which(engine) or engine, f"-T{fmt}"], input=source.encode(),
                              capture_output=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"Graphviz `{engine} -T{fmt}` failed: "
                               + proc.stderr.decode(errors="replace").strip())
        return proc.stdout
    pgv = _pygraphviz()
    graph = pgv.AGraph(string=source)  # type: ignore[attr-defined]
    data = graph.draw(format=fmt, prog=engine)
    if not data:
        raise RuntimeError(f"pygraphviz could not render format {fmt!r}")
    return bytes(data)
