"""Which Graphviz backends exist here, as pytest skip markers; running drawings in tests."""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator

import pytest

from torchrecorder.errors import LargeDrawingWarning

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


@contextlib.contextmanager
def budget_said() -> Iterator[list[str]]:
    """Collect what the drawing budget says (each :class:`LargeDrawingWarning`'s message, every
    time it is raised) inside the ``with`` block, into the list it gives; other warnings
    go on as usual."""
    said: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield said
    for w in caught:
        if issubclass(w.category, LargeDrawingWarning):
            said.append(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
