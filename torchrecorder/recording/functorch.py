"""Reading the wrapped tensors of torch.func's transforms (``torch.vmap``, ``torch.func.grad``,
...) while recording: what a wrapper wraps (:func:`wrapped_chain`), and how an operation run
inside ``torch.vmap`` was batched (:func:`vmap_plan`, which :func:`torchrecorder.cost` reads
to count it as vmap ran it).  functorch's functions for this are private; without them nothing
is matched across a transform.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import torch
from torch import Tensor

__all__ = ["IS_BATCHED", "TRANSFORM_NOTE", "vmap_plan", "wrapped_chain"]

# torch.func's transforms (vmap, grad, ...) hand the function they transform wrapped tensors,
# new objects around the ones outside; functorch's own (private) functions read the level of a
# wrapper and what it wraps.  Without them nothing is matched across a transform.
_FUNCTORCH = getattr(torch._C, "_functorch", None)
_LEVEL: Optional[Callable[[Tensor], int]] = getattr(_FUNCTORCH, "maybe_get_level", None)
_UNWRAPPED: Optional[Callable[[Tensor], Tensor]] = getattr(_FUNCTORCH, "get_unwrapped", None)
IS_BATCHED: Optional[Callable[[Tensor], bool]] = getattr(_FUNCTORCH, "is_batchedtensor", None)
_BDIM: Optional[Callable[[Tensor], int]] = getattr(_FUNCTORCH, "maybe_get_bdim", None)
TRANSFORM_NOTE = ("{where} ran operations inside torch.vmap or another torch.func transform: they "
                  "are drawn with the shapes the transformed function sees (one sample under vmap)")


def wrapped_chain(t: Tensor) -> list[Tensor]:
    """The tensors a torch.func wrapper ``t`` wraps, outermost first (empty for a plain tensor)."""
    chain: list[Tensor] = []
    if _LEVEL is None or _UNWRAPPED is None:
        return chain
    try:
        while _LEVEL(t) != -1 and len(chain) < 64:
            t = _UNWRAPPED(t)
            chain.append(t)
    except Exception:  # not a functorch wrapper after all, or a torch that reads them otherwise
        pass
    return chain


def vmap_plan(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[tuple[Any, Any]]:
    """How an operation run inside ``torch.vmap`` was batched (see ``Graph.op_vmap``): the
    ``in_dims`` of each vmap level around it, outermost first, and each positional tensor
    argument's shape with its batch dimensions; ``None`` where that cannot be said (a batched
    tensor in a list or a keyword argument, a wrapper functorch's functions cannot read)."""
    if _LEVEL is None or _UNWRAPPED is None or IS_BATCHED is None or _BDIM is None:
        return None
    try:
        if any(isinstance(v, Tensor) and _LEVEL(v) != -1 for v in kwargs.values()) or any(
                isinstance(v, (list, tuple)) and any(isinstance(x, Tensor) and _LEVEL(x) != -1 for x in v)
                for v in args):
            return None
        dims: list[dict[int, int]] = []
        shapes: list[Optional[tuple[int, ...]]] = []
        for v in args:
            found: dict[int, int] = {}
            if isinstance(v, Tensor):
                t = v
                for _ in range(64):
                    level = _LEVEL(t)
                    if level == -1:
                        break
                    if IS_BATCHED(t):  # (a grad transform's wrapper batches nothing)
                        found[level] = _BDIM(t)
                    t = _UNWRAPPED(t)
                else:
                    return None
                shapes.append(tuple(t.shape) if found else None)
            else:
                shapes.append(None)
            dims.append(found)
    except Exception:  # a torch that reads its wrappers otherwise
        return None
    levels = sorted({level for found in dims for level in found})
    if not levels:
        return None
    return tuple(tuple(found.get(level) for found in dims) for level in levels), tuple(shapes)
