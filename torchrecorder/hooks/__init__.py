"""Hooks on live modules: torchfunc-compatible recorders (:mod:`.recorders`), and the selection
of layers by dotted name, glob, ``depth-idx`` label, type or index (:mod:`.select`) that they share
with :func:`torchrecorder.capture`.

``torchrecorder.hooks.LayerRecorder``, scio's wrapped network, is defined in
:mod:`torchrecorder.layer_recorder` (it records with :func:`torchrecorder.record`, above this
package) and published here by ``torchrecorder/__init__.py`` (:data:`ABOVE`).

The names are imported from their modules on first use, so that ``import torchrecorder``
(which imports this package) does not load the recorders.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

#: name -> a function returning it, for the names defined above this package (set by the
#: package ``torchrecorder``)
ABOVE: dict[str, Callable[[], Any]] = {}

_RECORDERS = frozenset(("BackwardInput", "BackwardOutput", "ForwardInput", "ForwardOutput", "ForwardPre"))


def _module_of(name: str) -> ModuleType:
    """The submodule that defines the public ``name``."""
    if name in _RECORDERS:
        from . import recorders

        return recorders
    if name in ("UnknownLayerError", "select_modules"):
        from . import select

        return select
    if name == "ReductionError":
        from . import _values

        return _values
    raise AttributeError(f"module 'torchrecorder.hooks' has no attribute {name!r}")


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept."""
    value = ABOVE[name]() if name in ABOVE else getattr(_module_of(name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the lazily imported ones included."""
    return sorted({*globals(), *__all__, *ABOVE})
