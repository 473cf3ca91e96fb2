"""Which Graphviz backends exist here, as pytest skip markers."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys

import pytest

HAS_DOT = shutil.which("dot") is not None
HAS_PYGRAPHVIZ = importlib.util.find_spec("pygraphviz") is not None

needs_dot = pytest.mark.skipif(not HAS_DOT, reason="the Graphviz `dot` program is not installed")
needs_pygraphviz = pytest.mark.skipif(not HAS_PYGRAPHVIZ, reason="pygraphviz is not installed")
needs_backend = pytest.mark.skipif(not (HAS_DOT or HAS_PYGRAPHVIZ), reason="no Graphviz backend")


def lays_out(source: str, timeout: float = 60.0) -> None:
    """Graphviz lays DOT ``source`` out, with whichever backend torchrecorder finds (``dot``, or
    pygraphviz without it), in a fresh process killed after ``timeout`` seconds: a liveness
    bound (a drawing that would take minutes fails), not a speed claim."""
    code = ("import sys; from torchrecorder.backend import render_source; "
            "render_source(sys.stdin.read(), 'svg')")
    subprocess.run([sys.executable, "-c", code], input=source.encode(), timeout=timeout, check=True)
