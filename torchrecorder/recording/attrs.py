"""The plain attributes of a model's modules, put back after a recording.

A module keeps state that is neither a parameter nor a buffer as plain attributes: the hidden
state of a recurrent language model trained with truncated backpropagation
(``self.hidden = h.detach()``), a step counter (``self.steps += 1``), the weight that
``torch.nn.utils.prune``'s pre-hook computes before every call.  A plain call rebinds them;
a recording puts the objects they held back (:class:`~.state.ModelState` does it for
parameters, buffers and submodules).  An attribute that ``forward`` adds stays, as a module
or parameter it registers does.

Which attributes a module has is read from its ``__dict__`` with ``nn.Module``'s own entries
left out (:data:`MODULE_KEYS`); it is kept with the model's state layout between recordings,
and read again for every module when the number of entries of any module's ``__dict__``
changed since (an attribute added by a plain call in between).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import repeat
from typing import Any, Optional

from torch import nn

__all__ = ["MODULE_KEYS", "Attributes", "attribute_slots"]

#: the entries of every ``nn.Module``'s ``__dict__`` (its registries, hook dicts, ``training``):
#: not plain attributes (the state layout and the training flags put back what they hold)
MODULE_KEYS = frozenset(vars(nn.Module()))

_DICT = operator.attrgetter("__dict__")
_MISSING = object()
_REGISTRIES = ("_parameters", "_buffers", "_modules")


def attribute_slots(dicts: Sequence[dict[str, Any]]) -> tuple[list[int], list[str]]:
    """The plain attributes in the modules' ``__dict__`` s: (position of the module, name) each."""
    owners: list[int] = []
    names: list[str] = []
    for i, d in enumerate(dicts):
        if len(d) > len(MODULE_KEYS) or not d.keys() <= MODULE_KEYS:
            for name in d:
                if name not in MODULE_KEYS:
                    owners.append(i)
                    names.append(name)
    return owners, names


class Attributes:
    """The objects the plain attributes of ``modules`` hold before a pass, to put back after it.

    Args:
        modules: the model's distinct modules.
        owners, names, lens: the attribute slots kept from an earlier read (:func:`attribute_slots`)
            and the length of each module's ``__dict__`` then; read afresh where ``None`` or where
            a length differs.
    """

    __slots__ = ("dicts", "names", "objects")

    def __init__(self, modules: Sequence[nn.Module], owners: Optional[list[int]] = None,
                 names: Optional[list[str]] = None, lens: Optional[list[int]] = None) -> None:
        dicts = list(map(_DICT, modules))
        if owners is None or names is None or lens is None or list(map(len, dicts)) != lens:
            owners, names = attribute_slots(dicts)
        self.dicts: list[dict[str, Any]] = [dicts[i] for i in owners]
        self.names: list[str] = names
        self.objects: list[Any] = list(map(dict.get, self.dicts, names))

    def restore(self) -> None:
        """Put back every attribute ``forward`` rebound or deleted; one it turned into a
        parameter, buffer or submodule (``self.head = nn.Linear(...)`` where ``head`` was
        ``None``) stays what ``forward`` made it, as registered ones do."""
        dicts, names, objects = self.dicts, self.names, self.objects
        now = list(map(dict.get, dicts, names, repeat(_MISSING)))
        if all(map(operator.is_, now, objects)):
            return
        for d, name, obj, got in zip(dicts, names, objects, now, strict=True):
            if got is obj:
                continue
            if got is _MISSING and any(name in (d.get(r) or ()) for r in _REGISTRIES):
                continue
            d[name] = obj

    def close(self) -> None:
        """Forget the objects (the recording may live much longer than the pass)."""
        self.dicts, self.names, self.objects = [], [], []
