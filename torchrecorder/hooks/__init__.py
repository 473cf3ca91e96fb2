"""Hooks on live modules: torchfunc-compatible recorders (:mod:`.recorders`), and the selection
of layers by dotted name, glob, ``depth-idx`` label, type or index (:mod:`.select`) that they share
with :func:`torchrecorder.capture`.

``torchrecorder.hooks.LayerRecorder``, scio's wrapped network, is defined in
:mod:`torchrecorder.layer_recorder` (it records with :func:`torchrecorder.record`, above this
package) and set here by ``torchrecorder/__init__.py``.
"""

from ._values import ReductionError
from .recorders import BackwardInput, BackwardOutput, ForwardInput, ForwardOutput, ForwardPre
from .select import UnknownLayerError, select_modules

__all__ = [
    "BackwardInput",
    "BackwardOutput",
    "ForwardInput",
    "ForwardOutput",
    "ForwardPre",
    "ReductionError",
    "UnknownLayerError",
    "select_modules",
]
