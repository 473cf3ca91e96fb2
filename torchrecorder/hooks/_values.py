"""What a hook keeps of the values it sees: tensors detached, copied, moved; reductions leaf by leaf.

A value is a tensor or any nesting of tuples, lists and dicts holding tensors
(other objects pass through unchanged).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Optional, Union

import torch

__all__ = ["Device", "check_device", "inputs_value", "keep_value", "leaves", "reduce_values"]

Device = Union[str, torch.device, None]


def check_device(to: Device) -> Optional[torch.device]:
    """``to`` as a :class:`torch.device` (``None`` stays ``None``); a clear error if it is none."""
    if to is None:
        return None
    try:
        return torch.device(to)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"to= must be a device such as 'cpu' or 'cuda:0', got {to!r}") from exc


def _map(value: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, tuple):
        items = [_map(v, fn) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [_map(v, fn) for v in value]
    if isinstance(value, Mapping):
        items_d = {k: _map(v, fn) for k, v in value.items()}
        if type(value) is dict:
            return items_d
        try:
            return type(value)(**items_d)
        except TypeError:
            return items_d
    return value


def keep_value(value: Any, *, detach: bool = True, to: Optional[torch.device] = None,
               clone: bool = True) -> Any:
    """``value`` with each tensor detached (``detach``), moved to ``to`` and copied (``clone``), so
    that later in-place changes in the model cannot reach what was kept."""

    def one(t: torch.Tensor) -> torch.Tensor:
        if detach:
            t = t.detach()
        if to is not None and t.device != to:
            return t.to(to)  # a copy already
        return t.clone() if clone else t

    return _map(value, one)


def leaves(value: Any) -> list[torch.Tensor]:
    """The tensors in ``value``, in order."""
    out: list[torch.Tensor] = []
    _map(value, out.append)
    return out


def reduce_values(acc: Any, new: Any, fn: Callable[[Any, Any], Any]) -> Any:
    """``fn(acc, new)``, applied tensor by tensor where both are tuples, lists or dicts alike."""
    if isinstance(acc, (tuple, list)) and isinstance(new, (tuple, list)) and len(acc) == len(new):
        items = [reduce_values(a, b, fn) for a, b in zip(acc, new, strict=True)]
        return type(acc)(*items) if hasattr(acc, "_fields") else type(acc)(items)
    if isinstance(acc, Mapping) and isinstance(new, Mapping) and acc.keys() == new.keys():
        return {k: reduce_values(acc[k], new[k], fn) for k in acc}
    return fn(acc, new)


def inputs_value(args: tuple[Any, ...], kwargs: Optional[Mapping[str, Any]]) -> Any:
    """What a module received: the argument itself if it got one positional argument, a tuple of
    them if several; ``(args, kwargs)`` when it got keyword arguments too."""
    if kwargs:
        return (tuple(args), dict(kwargs))
    return args[0] if len(args) == 1 else tuple(args)
