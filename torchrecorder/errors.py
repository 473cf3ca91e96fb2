"""The exceptions torchrecorder raises on its own account.

Errors in the caller's input are the usual ``TypeError``/``ValueError``; the
classes here name problems that only torchrecorder can detect.
"""

from __future__ import annotations

import torch

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


def not_a_recording(got: object, doing: str, expected: str = "a Recorder (or Graph)") -> TypeError:
    """The ``TypeError`` for a drawing or export function given ``got`` instead of a recording.

    A model or a tensor is what torchview's ``draw_graph`` and torchviz's ``make_dot`` take, so
    for these the message says how to make the recording.
    """
    kind = type(got).__name__
    hint = ""
    if isinstance(got, torch.nn.Module):
        hint = (": record the model first, rec = torchrecorder.record(model, input_shapes=...) "
                "or input_data=..., or draw it in one call with torchrecorder.render_network")
    elif isinstance(got, torch.Tensor):
        hint = (": torchrecorder draws a recording, not an output's autograd graph as torchviz's "
                "make_dot(y) does; rec = torchrecorder.record(model, input_data=x, backward=True) "
                "then make_dot(rec, backward=True) draws that graph")
    return TypeError(f"expected {expected} to {doing}, got {kind}{hint}")
