"""The exceptions torchrecorder raises on its own account.

Errors in the caller's input are the usual ``TypeError``/``ValueError``; the
classes here name problems that only torchrecorder can detect.
"""

from __future__ import annotations

__all__ = ["GraphError", "GraphvizNotFoundError", "LargeDrawingWarning", "RenderError"]


class GraphError(ValueError):
    """A graph breaks one of its invariants (see :meth:`torchrecorder.graph.Graph.lint`).

    Raised by ``lint()`` and by :func:`torchrecorder.load_json` for a document
    that describes an inconsistent graph; a ``ValueError``, so code that checks
    loaded input for ``ValueError`` catches it too.
    """


class GraphvizNotFoundError(RuntimeError):
    """No way to run Graphviz was found (neither the ``dot`` program nor pygraphviz)."""


class RenderError(RuntimeError):
    """A renderer's hooks drew something that does not fit together: an edge to a node
    that its ``render_node`` never drew."""


class LargeDrawingWarning(UserWarning):
    """A drawing is larger than the drawing budget: a default one was reduced to fit (the
    message says what was collapsed and how to draw everything), or one drawn as asked may
    take Graphviz minutes to lay out."""
