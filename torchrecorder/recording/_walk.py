"""Find the tensors inside the arguments and results of a forward call.

The recorder never rebuilds or replaces what a module receives or returns, so
it only needs to *read* tensors out of arbitrary containers: tuples (named or
not), lists, dicts (``ModelOutput`` is one), dataclasses, and anything else,
which is left alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from torch import Tensor

__all__ = ["iter_tensors", "named_tensors"]

_MAX_ITEMS = 100_000  # containers larger than this are not searched further


def _children(obj: Any) -> Any:
    """The items of a container worth searching, or ``None`` for a leaf."""
    if isinstance(obj, (list, tuple)):
        return obj
    if type(obj) is dict:  # the common case, before the slower ABC check
        return list(obj.values())
    if isinstance(obj, Mapping):
        return list(obj.values())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [getattr(obj, f.name, None) for f in dataclasses.fields(obj)]
    return None


def iter_tensors(obj: Any) -> Iterator[Tensor]:
    """Yield every tensor in ``obj``, depth first, each object once.

    >>> import torch
    >>> [t.shape for t in iter_tensors({"a": (torch.zeros(2), None), "b": [torch.ones(1, 3)]})]
    [torch.Size([2]), torch.Size([1, 3])]
    """
    if isinstance(obj, Tensor):
        yield obj
        return
    seen: set[int] = set()
    stack = [obj]
    budget = _MAX_ITEMS
    while stack and budget > 0:
        item = stack.pop()
        budget -= 1
        if isinstance(item, Tensor):
            if id(item) not in seen:
                seen.add(id(item))
                yield item
            continue
        if item is None or isinstance(item, (int, float, bool, str, bytes)):
            continue
        children = _children(item)
        if children is None or id(item) in seen:
            continue
        seen.add(id(item))
        stack.extend(reversed(children))


def named_tensors(obj: Any, prefix: str) -> Iterator[tuple[str, Tensor]]:
    """Yield ``(name, tensor)`` for every tensor in ``obj``; names show where it sits.

    >>> import torch
    >>> [n for n, _ in named_tensors({"logits": torch.zeros(1), "past": (torch.zeros(1),)}, "out")]
    ['out.logits', 'out.past[0]']
    """
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [(prefix, obj)]
    budget = _MAX_ITEMS
    while stack and budget > 0:
        name, item = stack.pop()
        budget -= 1
        if isinstance(item, Tensor):
            if id(item) not in seen:
                seen.add(id(item))
                yield name, item
            continue
        if id(item) in seen:
            continue
        if isinstance(item, (list, tuple)):
            seen.add(id(item))
            stack.extend((f"{name}[{i}]", v) for i, v in reversed(list(enumerate(item))))
        elif isinstance(item, Mapping):
            seen.add(id(item))
            stack.extend((f"{name}.{k}", v) for k, v in reversed(list(item.items())))
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            seen.add(id(item))
            fields = [(f"{name}.{f.name}", getattr(item, f.name, None)) for f in dataclasses.fields(item)]
            stack.extend(reversed(fields))
