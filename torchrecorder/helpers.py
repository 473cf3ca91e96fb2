"""torchrecorder 1.0.3's module of the convenience functions, kept so that its imports run:
``from torchrecorder.helpers import record, make_dot, render_network``.

The functions are :mod:`torchrecorder.api`'s (see there)."""

from .api import make_dot, record, render_network

__all__ = ["make_dot", "record", "render_network"]
