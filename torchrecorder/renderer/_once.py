"""One drawing by a renderer that is thrown away afterwards, freed as soon as it is done."""

from __future__ import annotations

from typing import Any

from .base import BaseRenderer

__all__ = ["render_once"]


def render_once(renderer: BaseRenderer) -> Any:
    """``renderer.render()``, for a renderer nothing else holds (``make_dot``'s own): what the
    drawing computed is dropped before returning, so that reference counting frees it at once.

    A renderer refers to itself through what it computes (its styler's ``renderer``, the
    projection's rule for opening layers, the styler's index of operation inputs): left as
    it is, everything one drawing made (thousands of lists and tuples for a large model:
    4,157 objects after a 32-layer GPT-2's ``make_dot``) waits for the cyclic garbage
    collector, whose next collection then spends about as long as a tenth of the drawing
    took (0.7 ms there) walking it.  The value returned holds none of it.
    """
    try:
        return renderer.render()
    finally:
        renderer._projection = None
        renderer.budget = None
        styler = getattr(renderer, "styler", None)
        if styler is not None:
            styler.renderer = None
            if hasattr(styler, "_op_inputs"):
                styler._op_inputs = None
