"""Tensors that share storage under two names, as the recording engine tracks them.

The engine follows tensors by object identity.  Two kinds of objects share
their storage with another one without being a view of it in autograd's sense
(``_base``), so that an in-place write through one name changes what the other
holds:

* the alias the engine gives a module's output when the module returned an
  object that existed before the call (its input, a parameter, a buffer), so
  that later reads of the original still come from its real producer;
* ``t.data`` and ``t.detach()``, which user code writes through
  (``onehot.data.scatter_(1, idx, 1)``).

:class:`Aliases` remembers such pairs for one recording; an in-place operation
on either name then stands for both.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any, Optional

from torch import Tensor, nn

from ._walk import replace_tensors

__all__ = ["STORAGE_ALIAS_OPS", "Aliases", "make_alias"]

#: operations whose result shares its argument's storage but has no ``_base``
STORAGE_ALIAS_OPS = frozenset({"data", "detach"})


def make_alias(t: Tensor) -> tuple[Optional[Tensor], str]:
    """A new tensor object for the values of ``t`` (a view of all of it: storage, strides and
    version counter shared, gradients flowing back to ``t``), or ``None`` and the reason
    why none can be made.

    Only plain tensors and parameters are aliased (the alias of a parameter is a
    plain tensor); a tensor subclass could behave differently as a view, so it is
    left alone.  Must run where torch function modes are off.

    >>> import torch
    >>> x = torch.ones(2)
    >>> a, _ = make_alias(x)
    >>> a is not x and a.data_ptr() == x.data_ptr() and a._version == x._version
    True
    """
    kind = type(t)
    if kind is not Tensor and kind is not nn.Parameter:
        return None, f"a {kind.__name__} (tensor subclass) is not aliased"
    try:
        if t.is_nested:
            return None, "a nested tensor has no view of itself"
        return t.view_as(t), ""
    except Exception as exc:  # sparse layouts and anything else that refuses a view
        return None, f"no view of it could be made ({type(exc).__name__}: {exc})"


class Aliases:
    """Pairs of live objects that share storage, by ``id`` (weak references only)."""

    __slots__ = ("_peers",)

    def __init__(self) -> None:
        # id(obj) -> (weak reference to obj, weak references to the objects sharing its storage)
        self._peers: dict[int, tuple[Any, list[Any]]] = {}

    def __bool__(self) -> bool:
        return bool(self._peers)

    def link(self, a: Tensor, b: Tensor) -> None:
        """Remember that ``a`` and ``b`` share storage (both ways)."""
        for x, y in ((a, b), (b, a)):
            entry = self._peers.get(id(x))
            if entry is None or entry[0]() is not x:
                entry = self._peers[id(x)] = (weakref.ref(x), [])
            entry[1].append(weakref.ref(y))

    def hand_on(self, outputs: Any, pairs: list[tuple[Tensor, Tensor]]) -> Any:
        """``outputs`` with each original of ``pairs`` replaced by its alias (the containers
        on the way rebuilt, see :func:`~torchrecorder.recording._walk.replace_tensors`), the
        pairs linked.

        Raises:
            TypeError: a container cannot be rebuilt; nothing is linked then.
        """
        replaced = replace_tensors(outputs, {id(t): alias for t, alias in pairs})
        for t, alias in pairs:
            self.link(t, alias)
        return replaced

    def peers(self, obj: Any) -> Iterator[Tensor]:
        """The live objects linked to ``obj``."""
        entry = self._peers.get(id(obj))
        if entry is None or entry[0]() is not obj:
            return
        for ref in entry[1]:
            peer = ref()
            if peer is not None:
                yield peer

    def clear(self) -> None:
        """Forget every pair."""
        self._peers.clear()
