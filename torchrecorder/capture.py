"""Capture the activations of chosen layers by name: :func:`capture` and its :class:`Capture`.

The implementation lives in :mod:`torchrecorder.hooks.capture`, beside the
recorders and the layer selection it shares with them; this module keeps the
name ``torchrecorder.capture`` importable.
"""

from .hooks.capture import STATS, Capture, StopForward, capture

__all__ = ["STATS", "Capture", "StopForward", "capture"]
