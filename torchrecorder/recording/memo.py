"""What recordings of one model keep between them, and the one check that says it still holds.

A model recorded again is usually the model recorded before: the same module objects under
the same paths, holding the same parameter and buffer objects under the same names, of the
same shapes.  What the recording derives from that structure alone (the module index of
:mod:`~torchrecorder.recording.modules`, where the model state of
:mod:`~torchrecorder.recording.state` lies) is kept in one :class:`ModelMemo` per model and
reused while the model's *stamp* (:class:`~torchrecorder.recording.meta.ModelWalk`, read by
:func:`~torchrecorder.recording.meta.check_model` in the walk every recording makes anyway) is
the stamp the memo was made from.  The stamp is compared on every recording, once for every
user of the memo; any difference (a module, parameter or buffer added, removed or replaced,
renamed, of another class, a ``.data`` of another shape) starts a fresh memo.

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

__all__ = ["ModelMemo", "forget_all", "memo_of"]


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

    __slots__ = ("facts", "index", "refs", "sizes", "state")

    def __init__(self, objects: list[Any], facts: list[Any]) -> None:
        self.refs = [weakref.ref(o) for o in objects]  # (a TypeError: an object without weak references)
        self.facts = facts
        self.index: Any = None
        self.state: Any = None
        self.sizes: Optional[tuple[int, ...]] = None

    def matches(self, objects: list[Any], facts: list[Any]) -> bool:
        """Whether ``objects`` and ``facts`` are the stamp this memo was made from: the same
        objects (``is``) and equal facts."""
        refs = self.refs
        if len(objects) != len(refs) or facts != self.facts:
            return False
        return all(ref() is obj for ref, obj in zip(refs, objects, strict=True))


# id(model) -> (weak reference to the model, its memo); an entry goes when its model is collected
_MEMOS: dict[int, tuple[weakref.ref[nn.Module], ModelMemo]] = {}
_LOCK = threading.Lock()


def memo_of(net: nn.Module, objects: list[Any], facts: list[Any]) -> Optional[ModelMemo]:
    """The memo of ``net`` whose stamp is ``(objects, facts)``: the kept one when the stamp
    matches it, else a fresh (empty) one, kept in its place.  ``None`` for a model whose
    objects take no weak references (nothing is kept for it)."""
    with _LOCK:
        got = _MEMOS.get(id(net))
    if got is not None and got[0]() is net and got[1].matches(objects, facts):
        return got[1]
    key = id(net)

    def forget(ref: Any, key: int = key) -> None:  # the model was collected: drop its memo
        with _LOCK:
            if _MEMOS.get(key, (None,))[0] is ref:
                del _MEMOS[key]

    try:
        memo = ModelMemo(objects, facts)
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
