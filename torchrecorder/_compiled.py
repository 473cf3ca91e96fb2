"""Recording a model that ``torch.compile`` compiled: its pass runs eagerly while it is
recorded or captured (the recording engine's and ``capture``'s hook handles)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Optional

import torch

__all__ = ["EagerStance", "compiled_run_eagerly"]


def compiled_run_eagerly(modules: Iterable[tuple[str, torch.nn.Module]]) -> AbstractContextManager[Any]:
    """A ``with`` block in which the compiled parts of a model run eagerly while it is recorded.

    A ``torch.compile(module)`` wrapper (``OptimizedModule``) or a module compiled in place
    (``module.compile()``) would hand the recorded pass to dynamo: it traces the model's frames,
    breaks its graphs at the recorder's hooks (:func:`eager`) and counts those breaks among the
    user's (``torch._dynamo.utils.counters``), for nothing.  Under
    ``torch.compiler.set_stance("force_eager")`` the pass runs as a plain eager call; what the
    model compiled before stays cached and is used again by its next compiled call.  Other
    models (nothing compiled, or dynamo not loaded) get a block that does nothing.

    Args:
        modules: the model's ``named_modules(remove_duplicate=False)``.
    """
    if "torch._dynamo" not in sys.modules:  # nothing was compiled in this process
        return nullcontext()
    optimized = sys.modules["torch._dynamo"].eval_frame.OptimizedModule
    for _, module in modules:
        if isinstance(module, optimized) or module.__dict__.get("_compiled_call_impl") is not None:
            return torch.compiler.set_stance("force_eager")
    return nullcontext()


class EagerStance:
    """:func:`compiled_run_eagerly` as a hook handle: on from its making, off at ``remove()``
    (for a list of handles that a ``with`` block takes off at its end, as ``capture`` keeps).

    Args:
        modules: the model's ``named_modules(remove_duplicate=False)``.
    """

    __slots__ = ("block",)

    def __init__(self, modules: Iterable[tuple[str, torch.nn.Module]]) -> None:
        self.block: Optional[AbstractContextManager[Any]] = compiled_run_eagerly(modules)
        self.block.__enter__()

    def remove(self) -> None:
        """End the block (once)."""
        block, self.block = self.block, None
        if block is not None:
            block.__exit__(None, None, None)

    def hooks_dict_ref(self) -> None:
        """No hook dict holds it (torch's handles answer with theirs)."""
        return None
