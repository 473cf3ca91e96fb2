"""Hooks on live modules: torchfunc-compatible recorders (:mod:`.recorders`), and the selection
of layers by dotted name, glob, ``depth-idx`` label, type or index (:mod:`.select`) that they share
with :func:`torchrecorder.capture`."""

from .recorders import BackwardInput, BackwardOutput, ForwardInput, ForwardOutput, ForwardPre
from .select import UnknownLayerError, select_modules

__all__ = [
    "BackwardInput",
    "BackwardOutput",
    "ForwardInput",
    "ForwardOutput",
    "ForwardPre",
    "UnknownLayerError",
    "select_modules",
]
