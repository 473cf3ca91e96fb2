"""What recordings of one model keep between them, and the one check that says it still holds.

A model recorded again is usually the model recorded before: the same module objects under
the same paths, holding the same parameter and buffer objects under the same names, of the
same shapes.  What the recording derives from that structure alone (the module index of
:mod:`~torchrecorder.recording.modules`, where the model state of
:mod:`~torchrecorder.recording.state` lies) is kept in one :class:`ModelMemo` per model and
reused while the model's *stamp* (:class:`~torchrecorder.recording.meta.ModelWalk`, read by
:func:`~torchrecorder.recording.meta.check_model` in the walk every recording makes anyway) is
the stamp the memo was made from.  The stamp is compared on every recording, once for every
user of the memo, as flat lists compared in C: the ids of its objects (the same objects while
none of them has been collected: each is watched by a weak reference whose callback marks the
memo dead) and its facts (paths, classes, names, shapes); any difference (a module, parameter
or buffer added, removed or replaced, renamed, of another class, a ``.data`` of another shape)
starts a fresh memo.

What can change without changing the stamp (values, ``requires_grad``, ``.grad``, training
flags, dtypes, devices, strides, storages) is never kept here: each recording reads it again.

The memo holds weak references and positions in the walk only: it never keeps a model,
module or tensor alive, and it is dropped when its model is collected.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Optional

from torch import nn

__all__ = ["ModelMemo", "forget_all", "kept_memo", "new_memo"]


class ModelMemo:
    """What recordings of one model keep between them (see the module's docstring).

    Attributes:
        index: the module index (:class:`~torchrecorder.recording.modules.ModuleIndex`),
            or ``None`` until a recording has made it.
        state: where the model's state lies (:class:`~torchrecorder.recording.state.StateLayout`),
            or ``None`` until a recording has made it.
        sizes: how many nodes of each kind the model's last recording made (see
            :mod:`~torchrecorder.recording.pool`), or ``None``: a hint for the next recording's
            pool of nodes, which depends on the inputs too, so never trusted.
    """

    __slots__ = ("__weakref__", "alive", "facts", "ids", "index", "refs", "sizes", "state")

    def __init__(self, objects: list[Any], ids: list[int], facts: list[Any]) -> None:
        self.ids = ids
        self.facts = facts
        self.alive = True
        self.index: Any = None
        self.state: Any = None
        self.sizes: Optional[tuple[int, ...]] = None
        me = weakref.ref(self)

        def died(_ref: Any) -> None:  # an object of the stamp was collected: its id may come again
            memo = me()
            if memo is not None:
                memo.alive = False

        # (a TypeError: an object without weak references)
        self.refs = [weakref.ref(o, died) for o in objects]

    def matches(self, ids: list[int], facts: list[Any]) -> bool:
        """Whether ``ids`` and ``facts`` are the stamp this memo was made from: the same
        objects and equal facts.  Equal ids are the same objects while every object of the
        memo's stamp lives (an id is given again only after its object is gone): each holds a
        weak reference whose callback marks the memo dead, so two lists of ints compared in
        C stand for comparing every object (``is``)."""
        return self.alive and ids == self.ids and facts == self.facts


# id(model) -> (weak reference to the model, its memo); an entry goes when its model is collected
_MEMOS: dict[int, tuple[weakref.ref[nn.Module], ModelMemo]] = {}
_LOCK = threading.Lock()


def kept_memo(net: nn.Module, ids: list[int], facts: list[Any]) -> Optional[ModelMemo]:
    """The memo kept for ``net`` when its stamp is ``(ids, facts)``, else ``None``."""
    with _LOCK:
        got = _MEMOS.get(id(net))
    if got is not None and got[0]() is net and got[1].matches(ids, facts):
        return got[1]
    return None


def new_memo(net: nn.Module, objects: list[Any], ids: list[int], facts: list[Any]) -> Optional[ModelMemo]:
    """A fresh (empty) memo for ``net`` of the stamp ``(ids, facts)`` (``objects``: the stamp's
    objects, ``None`` left out), kept in the place of any other.  ``None`` for a model whose
    objects take no weak references (nothing is kept for it)."""
    key = id(net)

    def forget(ref: Any, key: int = key) -> None:  # the model was collected: drop its memo
        with _LOCK:
            if _MEMOS.get(key, (None,))[0] is ref:
                del _MEMOS[key]

    try:
        memo = ModelMemo(objects, ids, facts)
        ref = weakref.ref(net, forget)
    except TypeError:
        return None
    with _LOCK:
        _MEMOS[key] = (ref, memo)
    return memo


def forget_all() -> None:
    """Drop every memo (the next recording of each model starts afresh)."""
    with _LOCK:
        _MEMOS.clear()
