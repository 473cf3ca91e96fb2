"""Which Graphviz backends exist here, as pytest skip markers."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

HAS_DOT = shutil.which("dot") is not None
HAS_PYGRAPHVIZ = importlib.util.find_spec("pygraphviz") is not None

needs_dot = pytest.mark.skipif(not HAS_DOT, reason="the Graphviz `dot` program is not installed")
needs_pygraphviz = pytest.mark.skipif(not HAS_PYGRAPHVIZ, reason="pygraphviz is not installed")
needs_backend = pytest.mark.skipif(not (HAS_DOT or HAS_PYGRAPHVIZ), reason="no Graphviz backend")
