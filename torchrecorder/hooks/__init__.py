"""Hooks on live modules: torchfunc-compatible recorders (:mod:`.recorders`), a scio-style
network wrapper that records layers by label (:mod:`.layers`), and the selection of layers by
dotted name, glob, ``depth-idx`` label, type or index (:mod:`.select`) that they share with
:func:`torchrecorder.capture`."""

from .select import UnknownLayerError, select_modules  # noqa: I001 (first: capture needs it)
from ._values import ReductionError
from .recorders import BackwardInput, BackwardOutput, ForwardInput, ForwardOutput, ForwardPre
from .layers import LayerRecorder

__all__ = [
    "BackwardInput",
    "BackwardOutput",
    "ForwardInput",
    "ForwardOutput",
    "ForwardPre",
    "LayerRecorder",
    "ReductionError",
    "UnknownLayerError",
    "select_modules",
]
