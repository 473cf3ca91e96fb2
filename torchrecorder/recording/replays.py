"""Module calls made while a recording is on that are no calls of the recorded pass: those
that autograd makes as it runs a backward pass, and those made in another thread."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from threading import get_ident
from typing import Any

import torch
from torch import nn

__all__ = ["Replays", "in_backward", "other_thread"]

# the id of the backward pass the autograd engine runs in this thread, -1 outside one
_GRAPH_TASK = getattr(torch._C, "_current_graph_task_id", None)


def in_backward() -> bool:
    """Whether the autograd engine is running a backward pass in this thread (False on a torch
    that does not say)."""
    return _GRAPH_TASK is not None and _GRAPH_TASK() != -1


class Replays:
    """The module calls that autograd makes during a backward pass run inside a recording, as
    ``torch.utils.checkpoint`` runs the forward of the checkpointed modules again for what it
    did not keep (a training step inside ``with torchrecorder.recording(...)``, a model
    made with gradient checkpointing on): no calls of the recorded pass, they and their
    operations are not recorded.  The engine pauses from such a call's pre-hook
    (:meth:`started`) to its forward hook (:meth:`ended`)."""

    __slots__ = ("modules",)

    def __init__(self) -> None:
        self.modules: list[nn.Module] = []  # the calls paused, innermost last

    def started(self, engine: Any, module: nn.Module) -> bool:
        """Called by the engine's pre-hook for a call made while no call of the pass is open:
        pause the engine and return True if autograd makes it, after a call of the pass (a
        recording made from a hook that autograd runs records its pass)."""
        if not in_backward() or not any(info.calls for info in engine._modules.values()):
            return False
        self.modules.append(module)
        engine.paused += 1
        return True

    def ended(self, engine: Any, module: nn.Module) -> None:
        """Called by the engine's forward hook while it is paused: end the pause that
        ``module``'s call began, if it began one."""
        if self.modules and self.modules[-1] is module:
            self.modules.pop()
            engine.paused -= 1


def other_thread(engine: Any, module: nn.Module, engines: Iterable[Any]) -> None:
    """A module of the model was called in a thread other than the recording one (a forward
    that hands branches to a thread pool): the recording follows one thread, so it lacks that
    call and what it computed.  Said once per thread and recording, in the graph's notes and
    as a :class:`RuntimeWarning`, naming the first module met there.  Nothing is said of a call
    that autograd makes in its own thread (see :class:`Replays`), nor of one of a model that
    another recording (among ``engines``, the open ones) records in that thread."""
    thread = get_ident()
    if thread in engine._other_threads or in_backward():
        return
    if any(e.thread == thread and id(module) in e._modules for e in engines):
        return  # that thread records the model itself: its call is not one of this pass
    engine._other_threads.add(thread)
    info = engine._modules.get(id(module))
    path = info.path if info is not None and info.path else type(module).__name__
    text = (f"'{path}' ({type(module).__name__}) and what it called ran in another thread than "
            "the one recording: the recording follows one thread, and lacks those calls and "
            "what they computed")
    engine.untraced.note(text)
    warnings.warn(f"torchrecorder: {text}", RuntimeWarning, stacklevel=2)
